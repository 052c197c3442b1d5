"""Stream headers: how a tool tells a wire log from frames from an ASR stream.

Every acp-pipes stream starts with a header line, a JSON object whose ``format`` names
the stream kind and whose ``version`` its revision, so a tool can refuse the wrong input
with a clear message and migrate old revisions. A file may hold several streams back to
back; a header starts the next one. A bare ACP JSONL stream has no header: its first
line is a JSON-RPC message.
"""

from __future__ import annotations

WIRE = "acp-pipes/wire"
FRAMES = "acp-pipes/frames"
FOLD = "acp-pipes/fold"
ASR = "asr"

#: Newest revision of each format this version writes and reads.
VERSIONS = {WIRE: 1, FRAMES: 1, FOLD: 1}

#: Human names for messages such as "expected frames, got an ASR stream".
NAMES = {WIRE: "a wire log", FRAMES: "frames", FOLD: "folded entities", ASR: "an ASR stream"}


def header_format(record: object) -> str | None:
    """The format a header record names, or None when ``record`` is not a header.

    acp-pipes headers carry ``format: "acp-pipes/..."``; an ASR header is recognised by
    its ``type: "header"`` (see docs/asr.md).
    """
    if not isinstance(record, dict):
        return None
    fmt = record.get("format")
    if isinstance(fmt, str) and fmt.startswith("acp-pipes/"):
        return fmt
    if record.get("type") == "header" and "asr" in record:
        return ASR
    return None


def describe(fmt: str | None) -> str:
    if fmt is None:
        return "a bare ACP JSONL stream"
    return NAMES.get(fmt, f"a {fmt!r} stream")

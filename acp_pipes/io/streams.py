"""Stream headers: how a tool tells a wire log from frames from an ASR stream, and which
revision of its format it is.

Every acp-pipes stream starts with a header line, a JSON object whose ``format`` names
the stream kind and whose ``version`` its revision. A file may hold several streams back
to back; a header starts the next one. A bare ACP JSONL stream has no header: its first
line is a JSON-RPC message. An ASR stream's header is ``{"type": "header", "asr":
"1.0", ...}`` (docs/asr.md).

:func:`judge` is the one place that decides what a header line means, for every reader:
the kind (refused with "expected frames, got an ASR stream" where it does not belong),
the version (an older one migrated step by step to the current one, as mitmproxy's
``io/compat.py`` does for its flows; a newer one refused with "please update
acp-pipes"). One fixture per old version (``tests/fixtures/formats/``) keeps old
recordings readable.

Revisions:

======================  =======  =====================================================
format                  version  what changed
======================  =======  =====================================================
``acp-pipes/wire``      1        header and frame records
``acp-pipes/wire``      2        ends with an end record (:func:`acp_pipes.io.wire.end_record`)
``acp-pipes/wire``      3        remote transports: the header's ``transport``; event
                                 records (WebSocket handshakes, closes and binary frames,
                                 HTTP requests and statuses); a frame's ``stream``,
                                 ``sseq`` and ``sse`` (:mod:`acp_pipes.io.wire`)
``acp-pipes/frames``    1        header (``source``: the wire header) and frame records
``acp-pipes/fold``      1        header, session events and entity records
``asr``                 1.x      ASR 1.0 (docs/asr.md); a later minor revision is read
======================  =======  =====================================================

The records of an older revision need no change: each revision so far only added to
what a stream may hold, so only headers are migrated.
"""

from __future__ import annotations

from acp_pipes.errors import InputError

TYPE_CHECKING = False
if TYPE_CHECKING:  # acp-tee imports this module (through acp_pipes.io.wire) before its agent
    from collections.abc import Callable, Collection

WIRE = "acp-pipes/wire"
FRAMES = "acp-pipes/frames"
FOLD = "acp-pipes/fold"
ASR = "asr"

#: Newest revision of each acp-pipes format this version writes and reads.
VERSIONS = {WIRE: 3, FRAMES: 1, FOLD: 1}
#: The ASR revision written, and the major revision read (any minor of it).
ASR_VERSION = "1.0"
ASR_MAJOR = 1

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


# -- migrations: one step from each old version to the next ---------------------------


def _wire_1_to_2(header: dict) -> dict:
    """Wire log 2 adds the end record; a version 1 log has none (read as cut off)."""
    return {**header, "version": 2}


def _wire_2_to_3(header: dict) -> dict:
    """Wire log 3 records remote transports too; a version 2 log was a stdio session
    (acp-tee knew no other), and says so as a version 3 header would."""
    return {**header, "version": 3, "transport": {"client": "stdio", "agent": "stdio"}}


#: ``(format, version) -> step`` turning a header of that version into the next one's.
MIGRATIONS: dict[tuple[str, int], Callable[[dict], dict]] = {
    (WIRE, 1): _wire_1_to_2,
    (WIRE, 2): _wire_2_to_3,
}


def migrate(header: dict) -> dict:
    """An acp-pipes header of a version this one reads, brought to the current version
    step by step, with the header it names as its ``source`` (the header itself when
    both are current)."""
    fmt = header["format"]
    version = header["version"]
    while version < VERSIONS[fmt]:
        header = MIGRATIONS[(fmt, version)](header)
        version = header["version"]
    source = header.get("source")  # frames and fold headers carry the one they came from
    if source.__class__ is dict and header_format(source) in VERSIONS:
        version = source.get("version")
        if version.__class__ is int and 1 <= version < VERSIONS[source["format"]]:
            header = {**header, "source": migrate(source)}
    return header


def judge(record: object, source: str, line: int, accept: Collection[str],
          expected: str | None = None) -> dict | None:
    """What a line that may start a stream means, for every reader alike.

    None when ``record`` is no header (a record, a bare ACP message). A header of a kind
    in ``accept`` at a version this acp-pipes reads is returned migrated to the current
    version (an ASR header as it is). Anything else raises :class:`InputError` naming
    ``source`` and ``line``: a kind not accepted ("expected EXPECTED, got an ASR
    stream"; ``expected`` defaults to the accepted kinds' names), a version newer than
    this acp-pipes reads ("please update acp-pipes"), a version no acp-pipes wrote.
    """
    fmt = header_format(record)
    if fmt is None or not isinstance(record, dict):  # (a header is a dict)
        return None
    if fmt not in accept:
        want = expected or " or ".join(describe(f) for f in accept)
        raise InputError(source, line, f"expected {want}, got {describe(fmt)}")
    if fmt == ASR:
        _judge_asr(record, source, line)
        return record
    version = record.get("version")
    current = VERSIONS.get(fmt)
    if current is None:  # an acp-pipes format this version does not know at all
        raise InputError(source, line, f"{describe(fmt)} is not a format this acp-pipes "
                         "reads: please update acp-pipes")
    if version.__class__ is not int or version < 1:
        raise InputError(source, line, f"{describe(fmt)} of version {_shown(version)}: "
                         "no acp-pipes wrote that version")
    if version > current:
        raise InputError(source, line, f"{describe(fmt)} of version {version}, newer than "
                         f"this acp-pipes reads (up to {current}): please update acp-pipes")
    return migrate(record)


def asr_major(header: dict) -> int | None:
    """The major revision an ASR header's ``asr`` names (``"1.0"``: 1); None when it
    names none."""
    version = header.get("asr")
    if isinstance(version, str):
        head, dot, minor = version.partition(".")
        if dot and head.isascii() and head.isdigit() and minor.isascii() and minor.isdigit():
            return int(head)
    return None


def _judge_asr(header: dict, source: str, line: int) -> None:
    version = header.get("asr")
    major = asr_major(header)
    if major is None or major < 1:
        raise InputError(source, line, f"an ASR stream of version {_shown(version)}: not "
                         f"an ASR revision (this acp-pipes reads {ASR_MAJOR}.x)")
    if major > ASR_MAJOR:
        raise InputError(source, line, f"an ASR stream of version {version}, newer than "
                         f"this acp-pipes reads ({ASR_MAJOR}.x): please update acp-pipes")


def _shown(value: object) -> str:
    import json  # only for a message about a broken header

    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)

"""``acp-replay --wire``: resend the captured agent frames of an ASR stream (ASR-723,
ASR-733).

ASR-733: byte-level equivalence is only possible from the capture: the wire logs the stream was
recorded from (acp-tee), which each record points into with ``native.ref``
(``{"connection": n, "frames": [seq, ...]}``; connection ``n`` is the n-th wire log given
to acp-asr). The frames resent are the agent's ``session/update`` notifications for the
stream's session that the replayed records came from, with their recorded bytes, in
recorded order. Records that replay drops (permissions, questions, notices, audit
records) contribute no frame.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from acp_pipes.asr.reader import AsrStream
from acp_pipes.errors import AcpPipesError, InputError
from acp_pipes.io.lines import display_name
from acp_pipes.io.wire import decode_raw
from acp_pipes.replay.asr.index import current_state

__all__ = ["NoCapture", "captured_frames", "referenced_frames"]

_REPLAYED = frozenset({"message", "tool_call", "tool_result", "file_change", "plan",
                       "terminal", "compaction", "session_info", "usage_summary", "state"})


class NoCapture(AcpPipesError, ValueError):
    """The stream keeps no reference into a wire capture."""


def referenced_frames(stream: AsrStream) -> dict[int, set[int]]:
    """Connection -> the frame seqs the replayed records came from."""
    refs: dict[int, set[int]] = {}
    for rec in stream.records:
        t = rec.get("type")
        if t not in _REPLAYED:
            continue
        if t == "message" and (rec.get("origin") in ("notice", "inter_session")
                               or rec.get("role") == "system"):
            continue
        if t == "state" and not current_state(rec.get("state")):
            continue
        native = rec.get("native")
        ref = native.get("ref") if isinstance(native, dict) else None
        if not isinstance(ref, dict):
            continue
        frames = ref.get("frames")
        conn = ref.get("connection") or 0
        if isinstance(frames, list) and frames and type(conn) is int:
            refs.setdefault(conn, set()).update(f for f in frames if type(f) is int)
    return refs


def captured_frames(stream: AsrStream, wire_paths: Sequence[str]) -> Iterator[bytes]:
    """The recorded bytes (without LF) of the agent's session/update frames for this
    stream, from the wire logs (``wire_paths[n]`` is connection ``n``): ASR-733, the
    captured frames resent instead of rebuilt.

    Raises NoCapture when no record points into a capture, InputError when a wire log is
    missing or does not hold the frames the stream names."""
    from acp_pipes.frame.core import read_frames

    refs = referenced_frames(stream)
    if not refs:
        raise NoCapture(f"{display_name(stream.source)}: the stream keeps no wire capture "
                        "(no record has native.ref frames); replay without --wire")
    sid = stream.session_id
    for conn in sorted(refs):
        if conn >= len(wire_paths):
            raise InputError(display_name(stream.source), stream.line,
                             f"the stream's records come from wire log #{conn} (counted from "
                             f"0) but only {len(wire_paths)} --wire log(s) were given")
        wanted = refs[conn]
        path = wire_paths[conn]
        found = 0
        for fr in read_frames(path):
            if fr.get("seq") not in wanted:
                continue
            found += 1
            if (fr.get("dir") == "a2c" and fr.get("method") == "session/update"
                    and fr.get("kind") == "notification" and fr.get("sessionId") == sid):
                yield decode_raw(fr)
        if found < len(wanted):
            raise InputError(path, 0, f"this wire log holds {found} of the {len(wanted)} "
                             f"frames session {sid!r} names: not the capture it was "
                             "recorded from")

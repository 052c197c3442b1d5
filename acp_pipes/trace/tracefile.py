"""A recorded ACP session (a wire log or frames) loaded and indexed for replay, and its
offline emit.

Loading is shared by both replay engines (:mod:`acp_pipes.trace.agent` as the agent,
:mod:`acp_pipes.trace.client` as the client): every frame's bytes decoded once, hashes
taken from a frames stream or computed once by :mod:`acp_pipes.frame` for a wire log,
one stream per trace. :func:`emit` writes one direction's recorded bytes verbatim.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from acp_pipes.frame import Framer, frame_lines
from acp_pipes.jsonl import InputError, Line, display_name, raw_lines, unparsable
from acp_pipes.streams import FRAMES, WIRE, describe, header_format, judge
from acp_pipes.wire import A2C, C2A

__all__ = ["Trace", "emit", "load_trace"]


# -- the trace ---------------------------------------------------------------------------


@dataclass
class Trace:
    """A recorded session, indexed: frame records and their bytes, in recorded order."""

    frames: list[dict[str, Any]]
    raws: list[bytes]
    header: dict[str, Any] | None = None
    source: str = "-"

    @classmethod
    def of(cls, frames: Iterable[dict[str, Any]], source: str = "-") -> Trace:
        """A trace from frame records (e.g. :func:`acp_pipes.frame.frames` output); wire
        records without ``hash`` are framed first."""
        recs: list[dict[str, Any]] = []
        raws: list[bytes] = []
        framer = None
        for rec in frames:
            if "hash" not in rec or "kind" not in rec:
                framer = framer or Framer(source)
                rec = framer.frame(rec)
                if rec is None:
                    continue
            recs.append(rec)
            raws.append(_raw_bytes(rec))
        return cls(recs, raws, None, source)

    def __len__(self) -> int:
        return len(self.frames)

    @property
    def cut(self) -> str | None:
        """Why the recording looks cut off mid-session (None when it looks complete): a
        last frame without LF, or requests that were never answered."""
        if self.frames and self.frames[-1].get("nolf"):
            return "its last frame has no LF"
        # counted, not paired in order: a scripted client may answer before it is asked
        unanswered: dict[tuple, list[dict[str, Any]]] = {}
        answers: dict[tuple, int] = {}
        sessions: set[str] = set()
        for f in self.frames:
            kind = f.get("kind")
            if kind == "notification":
                continue
            if kind == "request":
                rid = f.get("id")
                unanswered.setdefault((f["dir"], rid.__class__, rid), []).append(f)
            elif kind == "response" or kind == "error":
                rid = f.get("id")
                key = (A2C if f["dir"] == C2A else C2A, rid.__class__, rid)
                answers[key] = answers.get(key, 0) + 1
            sid = f.get("sessionId")
            if sid is not None:
                sessions.add(sid)
        waiting = []
        for key, asked in unanswered.items():
            waiting.extend(asked[answers.get(key, 0):])
        if waiting:
            first = min(waiting, key=lambda f: f["seq"])
            return (f"{len(waiting)} recorded request(s) never answered, the first "
                    f"{first.get('method')} (seq {first['seq']}, {first['dir']})")
        busy = self._busy_sessions(sessions)
        if busy:
            sid, state = busy[0]
            return f"session {sid} is still {state} (ACP v2 state_update) at the end"
        return None

    def _busy_sessions(self, sessions: set[str]) -> list[tuple[str, str]]:
        """Of ``sessions`` (those named by requests and responses), the ACP v2 sessions
        whose last ``state_update`` is not ``idle``: a turn was under way when the
        recording stopped (v2 answers a prompt before the turn ends, so no request is
        left open)."""
        busy = []
        for f, raw in zip(reversed(self.frames), reversed(self.raws), strict=True):
            if not sessions:
                break
            sid = f.get("sessionId")
            if sid not in sessions or f.get("method") != "session/update" \
                    or b"state_update" not in raw:
                continue
            try:
                update = orjson.loads(raw)["params"]["update"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                continue
            if not isinstance(update, dict) or update.get("sessionUpdate") != "state_update":
                continue
            sessions.discard(sid)
            if update.get("state") != "idle":
                busy.append((sid, str(update.get("state"))))
        return sorted(busy)


def _raw_bytes(rec: dict[str, Any]) -> bytes:
    r = rec.get("raw")
    if r.__class__ is str:
        return r.encode("utf-8", "surrogatepass")
    return base64.b64decode(rec["raw_b64"], validate=True)


def load_trace(
    path: str,
    *,
    lines: Iterable[bytes] | None = None,
    warn: Callable[[str, int, str], None] | None = None,
) -> Trace:
    """Read and index a trace: a frames stream (hashes taken from its records) or a wire
    log (framed and hashed once by :mod:`acp_pipes.frame`). One stream per trace.
    ``lines`` are the file's lines when the caller already started reading it.

    Raises InputError for anything else (a bare ACP stream has only one direction; an
    ASR stream is replayed by :mod:`acp_pipes.replay`).
    """
    source = display_name(path)
    numbered = enumerate(lines if lines is not None else raw_lines(path), 1)
    first = None
    for number, raw in numbered:
        if raw.strip():
            first = (number, raw)
            break
    if first is None:
        raise InputError(source, 0, "empty trace: expected a wire log or frames")
    try:
        head = orjson.loads(first[1])
    except orjson.JSONDecodeError:
        head = None
    head = judge(head, source, first[0], (WIRE, FRAMES),
                 "a wire log (acp-tee) or frames (acp-frame)")
    if head is None:
        raise InputError(source, first[0], "expected a wire log (acp-tee) or frames "
                         f"(acp-frame), got {describe(None)}: a trace needs both directions")
    fmt = head["format"]
    wire_header = head if fmt == WIRE else head.get("source")
    if fmt == WIRE:
        as_lines = (Line(source, n, r[:-1], True) if r.endswith(b"\n")
                    else Line(source, n, r, False)
                    for n, r in itertools.chain([first], numbered))
        frames = _one_stream(frame_lines(as_lines, source, warn=warn, headers=True), source)
        trace = Trace.of(frames, source)
    else:
        trace = _read_frames_stream(numbered, source, warn)
    trace.header = wire_header if isinstance(wire_header, dict) else None
    return trace


def _one_stream(frames: Iterable[dict[str, Any]], source: str) -> Iterable[dict[str, Any]]:
    headers = 0
    for rec in frames:
        if "format" in rec:
            headers += 1
            if headers > 1:
                raise InputError(source, 0, "a trace is one recorded session, but this "
                                 "file holds several streams; split it first")
            continue
        yield rec


def _read_frames_stream(numbered: Iterable[tuple[int, bytes]], source: str, warn) -> Trace:
    """Frame records as acp-frame wrote them: their hashes are used as they are; a
    record without them is framed again."""
    recs: list[dict[str, Any]] = []
    raws: list[bytes] = []
    append = recs.append
    append_raw = raws.append
    loads = orjson.loads
    JSONDecodeError = orjson.JSONDecodeError
    framer = Framer(source, warn)
    dirs = (C2A, A2C)
    for number, line in numbered:
        try:
            rec = loads(line)
        except JSONDecodeError as e:
            if not line.strip():
                continue
            if warn is not None:
                what = unparsable(line.endswith(b"\n"))
                warn(source, number, f"{what}, frame record skipped: {e}")
            continue
        try:
            raw = rec["raw"].encode("utf-8", "surrogatepass")
            if "hash" not in rec or "kind" not in rec or rec["dir"] not in dirs:
                raise KeyError
        except (KeyError, TypeError, AttributeError):
            if header_format(rec) is not None:
                raise InputError(source, number, "a trace is one recorded session, "
                                 "but this file holds several streams; split it first") from None
            if rec.__class__ is not dict:
                if warn is not None:
                    warn(source, number, "not a frame record, skipped")
                continue
            if "hash" not in rec or "kind" not in rec or "raw_b64" not in rec:
                rec = framer.frame(rec, number)  # not framed yet: frame it here
                if rec is None:
                    continue
            try:
                raw = _raw_bytes(rec)
            except (KeyError, TypeError, ValueError):
                if warn is not None:
                    warn(source, number, "frame record has no valid raw_b64, skipped")
                continue
            if rec.get("dir") not in dirs:
                if warn is not None:
                    warn(source, number, "frame record has no dir c2a/a2c, skipped")
                continue
        append(rec)
        append_raw(raw)
    return Trace(recs, raws, None, source)


# -- offline emit ------------------------------------------------------------------------


def emit(trace: Trace, direction: str, out: BinaryIO) -> int:
    """Write the recorded bytes of one direction verbatim, each frame + LF (a last frame
    recorded without LF stays without). Returns the number of frames written.

    >>> import io
    >>> t = Trace.of([{"seq": 0, "t": 0, "dir": "c2a", "raw": '{"a":1}'},
    ...               {"seq": 1, "t": 0, "dir": "a2c", "raw": '{"b":2}', "nolf": True}])
    >>> buf = io.BytesIO(); emit(t, "a2c", buf), buf.getvalue()
    (1, b'{"b":2}')
    """
    chunks = []
    add = chunks.append
    n = 0
    for rec, raw in zip(trace.frames, trace.raws, strict=True):
        if rec["dir"] == direction:
            add(raw)
            add(b"" if rec.get("nolf") else b"\n")
            n += 1
            if len(chunks) >= 8192:
                out.write(b"".join(chunks))
                chunks.clear()
    out.write(b"".join(chunks))
    out.flush()
    return n

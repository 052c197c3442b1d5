"""A recorded ACP session (a wire log or frames) read for replay, frame by frame, and its
offline emit.

Both replay engines (:mod:`acp_pipes.replay.trace.agent` as the agent,
:mod:`acp_pipes.replay.trace.client` as the client) read a trace as it goes
(:func:`open_trace`): each frame is ``(record, bytes)``, the record as the file holds it
(a wire record, or a frame record with its ``kind`` and ``hash``), the bytes decoded once.
Nothing else is computed up front: what a replay must know of a frame it asks for
(:func:`classify` for its kind, method and id; a canonical hash only for a client frame
whose live bytes differ from the recorded ones), so replaying a wire log costs little
more than reading it, and memory holds what is in flight, not the recording.
:class:`Trace` is the whole trace in memory, for what needs it (``--match any``, the
library's callers with records in hand). :func:`emit` writes one direction's recorded
bytes verbatim.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from acp_pipes.errors import InputError, Warn
from acp_pipes.frame.session import of_session as frames_of_session
from acp_pipes.io.lines import display_name, raw_lines, records
from acp_pipes.io.streams import FRAMES, WIRE, describe, header_format, judge
from acp_pipes.io.wire import A2C, C2A, is_end, is_event

# a frame's value (UNPARSED: its bytes are not JSON): the model's one reading of a frame
from acp_pipes.sameness.events import UNPARSED
from acp_pipes.sameness.events import parse as parsed

__all__ = ["UNPARSED", "CutWatch", "Trace", "TraceReader", "classify", "emit", "load_trace",
           "of_session", "open_trace", "parsed"]

#: One frame of a trace: its record and its bytes (without LF).
Pair = tuple[dict[str, Any], bytes]
#: A request as an answer names it: (the direction it was sent in, its ID's type, its ID).
_Asked = tuple[str, type, Any]

_DIRS = (C2A, A2C)


# -- what a frame is, asked for when needed ------------------------------------------------


def classify(rec: dict[str, Any], raw: bytes) -> dict[str, Any]:
    """``rec`` with ``kind`` (request, notification, response, error, not_jsonrpc,
    invalid_json) and, as they apply, ``method``, ``id``, ``sessionId`` (of the params,
    or of a response's result), as acp-frame gives them; a frame record already has
    them. Set in ``rec`` (which is returned), so each frame is classified once."""
    if "kind" not in rec:
        _classify(rec, parsed(raw))
    return rec


#: :func:`acp_pipes.protocol.jsonrpc.classify`, loaded by the first :func:`_classify`
#: (acp-replay --client reads a trace's header, then starts its agent, then loads the
#: rest; an import statement in the function cost ~10% of a replay as the agent, which
#: classifies every frame that has an id)
_classify_message: Callable[[Any], tuple[str, Any, Any, Any]] | None = None


def _load_classify() -> Callable[[Any], tuple[str, Any, Any, Any]]:
    global _classify_message
    from acp_pipes.protocol.jsonrpc import classify

    _classify_message = classify
    return classify


def _classify(rec: dict[str, Any], value: Any) -> None:
    if value is UNPARSED:
        rec["kind"] = "invalid_json"
        return
    kind, method, rid, sid = (_classify_message or _load_classify())(value)
    rec["kind"] = kind
    if method is not None:
        rec["method"] = method
    if kind in ("request", "response", "error"):
        rec["id"] = rid
    if sid is not None:
        rec["sessionId"] = sid


class CutWatch:
    """Whether a recording looks cut off mid-session, judged frame by frame as it is read
    (:meth:`see`), in memory bounded by the requests still open and the sessions:
    a last frame without LF, requests never answered, or an ACP v2 session whose last
    ``state_update`` is not ``idle`` (v2 answers a prompt before the turn ends).

    Only frames that can be a request or response (their bytes hold ``"id"``, or a
    ``\\u`` escape that could spell it) or a state update are parsed."""

    __slots__ = ("asked", "credit", "sessions", "states", "last_nolf")

    def __init__(self) -> None:
        # counted, not paired in order: a scripted client may answer before it is asked
        # still unanswered: (seq, method, dir) as the frame held them
        self.asked: dict[_Asked, list[tuple[Any, Any, str]]] = {}
        self.credit: dict[_Asked, int] = {}  # answers that came before their request
        self.sessions: set[str] = set()  # named by requests and responses
        self.states: dict[str, str] = {}  # session -> its last state_update's state
        self.last_nolf = False  # the recording's last frame has no LF

    @staticmethod
    def wants(rec: dict[str, Any], raw: bytes) -> bool:
        """Whether :meth:`see` has anything to learn from a frame: only one that can be a
        request or response (its bytes hold ``"id"``, or a ``\\u`` escape that could
        spell it; a frame record says its kind), or a state update, is parsed; the rest
        are notifications."""
        kind = rec.get("kind")
        if kind is None:
            return b'"id"' in raw or b"\\u" in raw or b"state_update" in raw
        return kind != "notification" or b"state_update" in raw

    def see(self, rec: dict[str, Any], raw: bytes) -> None:
        """Take one frame into account (the reader sets :attr:`last_nolf` at the end)."""
        if self.wants(rec, raw):
            self.learn(rec, raw)

    def learn(self, rec: dict[str, Any], raw: bytes) -> None:
        """Take into account a frame :meth:`wants` (a caller that asked it already, inline,
        calls this)."""
        value = None
        if "kind" not in rec:
            value = parsed(raw)
            _classify(rec, value)
        kind = rec["kind"]
        if kind == "notification":
            if rec.get("method") == "session/update" and b"state_update" in raw:
                self._state(rec, raw if value is None else value)
            return
        if kind == "request":
            rid = rec.get("id")
            key = (rec["dir"], rid.__class__, rid)
            credit = self.credit.get(key)
            if credit:
                self.credit[key] = credit - 1
            else:
                self.asked.setdefault(key, []).append(
                    (rec.get("seq"), rec.get("method"), rec["dir"]))
        elif kind == "response" or kind == "error":
            rid = rec.get("id")
            key = (A2C if rec["dir"] == C2A else C2A, rid.__class__, rid)
            waiting = self.asked.get(key)
            if waiting:
                waiting.pop(0)
                if not waiting:
                    del self.asked[key]
            else:
                self.credit[key] = self.credit.get(key, 0) + 1
        else:
            return
        sid = rec.get("sessionId")
        if sid is not None:
            self.sessions.add(sid)

    def _state(self, f: dict[str, Any], value: Any) -> None:
        sid = f.get("sessionId")
        if sid is None:
            return
        try:
            if value.__class__ is bytes:
                value = orjson.loads(value)
            update = value["params"]["update"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return
        if isinstance(update, dict) and update.get("sessionUpdate") == "state_update":
            self.states[sid] = str(update.get("state"))

    def why(self) -> str | None:
        """Why the recording looks cut off (None when it looks complete)."""
        if self.last_nolf:
            return "its last frame has no LF"
        waiting = [w for ws in self.asked.values() for w in ws]
        if waiting:
            seq, method, d = min(waiting, key=lambda w: w[0] if w[0].__class__ is int else 0)
            return (f"{len(waiting)} recorded request(s) never answered, the first "
                    f"{method} (seq {seq}, {d})")
        busy = sorted((sid, state) for sid, state in self.states.items()
                      if sid in self.sessions and state != "idle")
        if busy:
            sid, state = busy[0]
            return f"session {sid} is still {state} (ACP v2 state_update) at the end"
        return None


# -- reading a trace ---------------------------------------------------------------------


def _raw_bytes(rec: dict[str, Any]) -> bytes:
    r = rec.get("raw")
    if r.__class__ is str:
        return r.encode("utf-8", "surrogatepass")
    import base64  # (a frame that is not UTF-8, rare)

    return base64.b64decode(rec["raw_b64"], validate=True)


class TraceReader:
    """A trace file opened for reading: its header judged at once (:func:`open_trace`),
    its frames read as they are iterated, once."""

    def __init__(self, source: str, header: dict[str, Any] | None, fmt: str,
                 lines: Iterator[bytes], first: int, warn: Warn | None) -> None:
        self.source = source
        self.header = header  # the wire log's header (a frames stream names it as source)
        self.fmt = fmt
        self._lines = lines  # those after the header, the first of them line ``first``
        self._first = first
        self._warn = warn
        #: when set, the frames of this session alone are read (:func:`of_session`)
        self.session: str | None = None

    def __iter__(self) -> Iterator[Pair]:
        if self.session is None:
            return self._pairs()
        return of_session(self._pairs(), self.session, self.source)

    def _skip(self, number: int, message: str) -> None:
        if self._warn is not None:
            self._warn(self.source, number, message)

    def _pairs(self) -> Iterator[Pair]:
        """The frames: a wire or frame record, used as the file holds it (a frame
        record's ``kind`` and ``hash`` are trusted), and its bytes."""
        dirs = _DIRS
        source = self.source

        def not_json(number: int, what: str, e: Exception) -> None:
            self._skip(number, f"{what}, record skipped: {e}")

        for number, _line, rec in records(self._lines, source, not_json, first=self._first):
            try:
                raw = rec["raw"].encode("utf-8", "surrogatepass")
                if rec["dir"] not in dirs:
                    raise KeyError
            except (KeyError, TypeError, AttributeError):
                if rec.__class__ is not dict:
                    self._skip(number, "not a frame record, skipped")
                    continue
                if is_end(rec) or is_event(rec):  # the recorder's end, a transport's event
                    continue
                if header_format(rec) is not None:
                    raise InputError(source, number, "a trace is one recorded session, but "
                                     "this file holds several streams; split it first") from None
                if rec.get("dir") not in dirs:
                    self._skip(number, "not a wire record (needs seq, t, dir), skipped")
                    continue
                try:
                    raw = _raw_bytes(rec)
                except (KeyError, TypeError, ValueError):
                    self._skip(number, "record has no raw or valid raw_b64, skipped")
                    continue
            yield rec, raw


def of_session(pairs: Iterable[Pair], sid: str, source: str = "-") -> Iterator[Pair]:
    """The frames of session ``sid`` and the connection's own, as they are read, by the
    rule of every ``--session`` on frames (:func:`acp_pipes.frame.session.of_session`), each
    frame classified as it comes. InputError at the end when no frame names ``sid``."""
    seen: list[bool] = []
    yield from frames_of_session(pairs, sid, seen, _record, _kind)
    if not seen:
        raise InputError(source, 0, f"no session {sid!r} in the trace")


def _record(pair: Pair) -> dict[str, Any]:
    return pair[0]


def _kind(pair: Pair) -> Any:
    return classify(pair[0], pair[1])["kind"]


def open_trace(
    path: str,
    *,
    lines: Iterable[bytes] | None = None,
    warn: Warn | None = None,
) -> TraceReader:
    """Open a trace and judge its header: a frames stream (its records' hashes are used)
    or a wire log. One stream per trace. ``lines`` are the file's lines when the caller
    already started reading it.

    Raises InputError for anything else (a bare ACP stream has only one direction; an
    ASR stream is replayed by :mod:`acp_pipes.replay.asr`).
    """
    source = display_name(path)
    rest = iter(lines if lines is not None else raw_lines(path))
    first = None
    number = 0
    for raw in rest:
        number += 1
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
    return TraceReader(source, wire_header if isinstance(wire_header, dict) else None, fmt,
                       rest, number + 1, warn)


# -- the trace in memory -------------------------------------------------------------------


@dataclass
class Trace:
    """A recorded session in memory: its records and their bytes, in recorded order."""

    frames: list[dict[str, Any]]
    raws: list[bytes]
    header: dict[str, Any] | None = None
    source: str = "-"

    @classmethod
    def of(cls, frames: Iterable[dict[str, Any]], source: str = "-") -> Trace:
        """A trace from wire or frame records (e.g. :func:`acp_pipes.frame.core.frames`
        output); a record with no direction or bytes is skipped."""
        recs: list[dict[str, Any]] = []
        raws: list[bytes] = []
        for rec in frames:
            if rec.get("dir") not in _DIRS:
                continue
            try:
                raw = _raw_bytes(rec)
            except (KeyError, TypeError, ValueError):
                continue
            recs.append(rec)
            raws.append(raw)
        return cls(recs, raws, None, source)

    def __len__(self) -> int:
        return len(self.frames)

    def __iter__(self) -> Iterator[Pair]:
        return zip(self.frames, self.raws, strict=True)

    @property
    def cut(self) -> str | None:
        """Why the recording looks cut off mid-session (see :class:`CutWatch`)."""
        watch = CutWatch()
        for rec, raw in self:
            watch.see(rec, raw)
        watch.last_nolf = bool(self.frames and self.frames[-1].get("nolf"))
        return watch.why()


def load_trace(
    path: str,
    *,
    lines: Iterable[bytes] | None = None,
    warn: Warn | None = None,
) -> Trace:
    """Read a whole trace into memory (:func:`open_trace`, then every frame)."""
    reader = open_trace(path, lines=lines, warn=warn)
    frames: list[dict[str, Any]] = []
    raws: list[bytes] = []
    for rec, raw in reader:
        frames.append(rec)
        raws.append(raw)
    return Trace(frames, raws, reader.header, reader.source)


# -- offline emit ------------------------------------------------------------------------


def emit(trace: Iterable[Pair], direction: str, out: BinaryIO) -> int:
    """Write the recorded bytes of one direction verbatim, each frame + LF (a last frame
    recorded without LF stays without), as the trace is read. Returns the number of
    frames written.

    >>> import io
    >>> t = Trace.of([{"seq": 0, "t": 0, "dir": "c2a", "raw": '{"a":1}'},
    ...               {"seq": 1, "t": 0, "dir": "a2c", "raw": '{"b":2}', "nolf": True}])
    >>> buf = io.BytesIO(); emit(t, "a2c", buf), buf.getvalue()
    (1, b'{"b":2}')
    """
    chunks: list[bytes] = []
    add = chunks.append
    n = 0
    for rec, raw in trace:
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


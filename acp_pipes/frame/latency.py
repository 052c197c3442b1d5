"""How long things took in a recording: each request until its response, per method, and
each prompt turn (time to the first update, and the whole turn).

Times are the receipt times acp-tee logged (``t``, ns), so a bare stream (no times)
has none. A request is answered by the first response or error with its id travelling
the other way (ids matched by JSON type and value, as acp-frame does); its latency is
the time between the two frames, whichever side asked (``session/request_permission``
measures the client, often a person).

A prompt turn starts at a ``session/prompt`` request. Its *first update* is the first
``session/update`` for its session after that, leaving out the echo of the user's own
message (``user_message``, ``user_message_chunk``) and state snapshots
(``state_update``): the agent's first sign of work. It ends, in ACP v1, at the prompt's
response; in ACP v2, where the response only acknowledges the prompt, at the first
``state_update`` with ``state: "idle"`` for the session after the prompt (or at an error
response, which ends it at once). A turn still open at the end of the stream is counted
as unfinished. The protocol version is the one ``initialize`` agreed (v2 when none).

    from acp_pipes.frame.core import read_frames
    from acp_pipes.frame.latency import Latency

    lat = Latency()
    for f in read_frames("wire.jsonl"):
        lat.add(f)
    lat.as_dict()   # {"latency_ms": {"session/prompt": {"count":.., "p50":.., ...}}, "turns": ..}

Statistics are nearest-rank percentiles (the smallest value with at least p% of the
values at or below it), in milliseconds. Memory grows by 8 bytes per answered request
and per turn (the percentiles need every value); requests in flight are remembered up
to 65,536 per direction, oldest forgotten first.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from typing import Any

from acp_pipes.frame.core import frame_field

__all__ = ["Latency", "TURN_QUIET", "deltas", "latency_of", "stats"]

#: Updates that are no sign of the agent's work: the echo of the user's message, state.
TURN_QUIET = frozenset({"user_message", "user_message_chunk", "state_update"})
MAX_PENDING = 1 << 16
_OTHER = {"c2a": "a2c", "a2c": "c2a"}
_MEASURED = frozenset(("request", "response", "error", "notification"))
_ID_TYPES = frozenset((str, int, float))  # ids a request can be answered by
_MS = 1e6


def stats(values: Iterable[float]) -> dict[str, Any]:
    """``count``, ``p50``, ``p90``, ``p99``, ``max`` of ``values`` (ms, rounded to the µs);
    the percentiles are None when there are no values.

    >>> stats([5, 1, 3, 2, 4])
    {'count': 5, 'p50': 3, 'p90': 5, 'p99': 5, 'max': 5}
    """
    v = sorted(values)
    n = len(v)
    if not n:
        return {"count": 0, "p50": None, "p90": None, "p99": None, "max": None}

    def rank(p: float) -> float:
        return v[max(0, math.ceil(p * n) - 1)]

    return {"count": n, "p50": _r(rank(0.5)), "p90": _r(rank(0.9)), "p99": _r(rank(0.99)),
            "max": _r(v[-1])}


def _r(x: float) -> float:
    return round(x, 3) if isinstance(x, float) else x


class _Turn:
    __slots__ = ("first", "id", "seq", "sid", "start", "stop", "stop_reason")

    def __init__(self, seq: int | None, rid: Any, sid: str, start: int):
        self.seq, self.id, self.sid, self.start = seq, rid, sid, start
        self.first: int | None = None
        self.stop: int | None = None
        self.stop_reason: Any = None

    def record(self) -> dict[str, Any]:
        return {"seq": self.seq, "sessionId": self.sid, "id": self.id,
                "first_update_ms": None if self.first is None else _r(
                    (self.first - self.start) / _MS),
                "duration_ms": None if self.stop is None else _r(
                    (self.stop - self.start) / _MS),
                "stopReason": self.stop_reason}


class Latency:
    """Request latencies per method and prompt turns, over one stream's frame records
    (``add`` each, in order)."""

    def __init__(self, *, turns: bool = True) -> None:
        self.track_turns = turns  # False: request latencies alone (no payload is read)
        self.pending: dict[str, dict[tuple[type, Any], tuple[str, int]]] = {
            "c2a": {}, "a2c": {}}
        self.times: dict[str, array] = {}  # method -> ns of each answered request
        self.errors: dict[str, int] = {}  # method -> answers that were errors
        self.turns: list[_Turn] = []
        self.open: dict[str, _Turn] = {}  # sessionId -> its turn still running
        self.by_id: dict[tuple[type, Any], _Turn] = {}  # prompt id -> turn awaiting answer
        self.version: Any = None
        # what the answer to these methods ends, beyond its latency
        self._answered = {"initialize": self._initialized,
                          "session/prompt": self._prompt_answered}

    def new_stream(self) -> None:
        """Another stream (connection) begins: requests and turns in flight are dropped,
        what was measured is kept."""
        for pend in self.pending.values():
            pend.clear()
        self.open.clear()
        self.by_id.clear()
        self.version = None

    def add(self, f: dict[str, Any]) -> None:
        """One frame record, in order. Records as a file holds them (a frames stream read
        as written) may lack fields or hold odd values: such a frame is not measured."""
        t = f.get("t")
        kind = f.get("kind")
        if t.__class__ is not int or kind not in _MEASURED:
            return
        if kind == "notification":
            self._notification(f, t)
            return
        d = f.get("dir")
        rid = f.get("id")
        if rid.__class__ not in _ID_TYPES or d not in _OTHER:
            return
        if kind == "request":
            self._request(f, d, rid, t)
        else:
            self._answer(f, kind, d, (rid.__class__, rid), t)

    def _notification(self, f: dict[str, Any], t: int) -> None:
        if self.track_turns and f.get("dir") == "a2c" and f.get("method") == "session/update":
            # (a sessionId of another type, or none, finds no turn)
            turn = self.open.get(f.get("sessionId"))  # type: ignore[arg-type]
            if turn is not None:
                self._update(turn, f, t)

    def _request(self, f: dict[str, Any], d: str, rid: Any, t: int) -> None:
        method = f.get("method")
        if method.__class__ is not str:
            return
        key = (rid.__class__, rid)
        pend = self.pending[d]
        pend[key] = (method, t)
        if len(pend) > MAX_PENDING:
            del pend[next(iter(pend))]
        if self.track_turns and method == "session/prompt" and d == "c2a":
            sid = f.get("sessionId")
            if isinstance(sid, str):
                turn = _Turn(f.get("seq"), rid, sid, t)
                self.turns.append(turn)
                self.open[sid] = turn
                self.by_id[key] = turn

    def _answer(self, f: dict[str, Any], kind: str, d: str, key: tuple[type, Any],
                t: int) -> None:
        """A response or an error: the latency of the request it answers, and what the
        answer to that method (:attr:`_answered`) ends."""
        asked = self.pending[_OTHER[d]].pop(key, None)
        if asked is None:
            return
        method, since = asked
        times = self.times.get(method)
        if times is None:
            times = self.times[method] = array("q")
        times.append(t - since)
        if kind == "error":
            self.errors[method] = self.errors.get(method, 0) + 1
        if self.track_turns:
            on = self._answered.get(method)
            if on is not None:
                on(f, kind, key, t)

    def _initialized(self, f: dict[str, Any], kind: str, key: tuple[type, Any],
                     t: int) -> None:
        if kind == "response":
            self.version = frame_field(f, "result", "protocolVersion")

    def _prompt_answered(self, f: dict[str, Any], kind: str, key: tuple[type, Any],
                         t: int) -> None:
        """A prompt's answer ends its turn in v1, and when it is an error."""
        turn = self.by_id.pop(key, None)
        if turn is not None and (kind == "error" or self.version == 1):
            turn.stop = t
            if kind == "response":
                turn.stop_reason = frame_field(f, "result", "stopReason")
            if self.open.get(turn.sid) is turn:
                del self.open[turn.sid]

    def _update(self, turn: _Turn, f: dict[str, Any], t: int) -> None:
        if turn.first is not None:  # only the idle state_update of a v2 turn matters now:
            raw = f.get("raw")       # most updates are not one, and are not parsed
            if self.version == 1 or raw is None or (
                    "state_update" not in raw and "\\u" not in raw):
                return
        update = frame_field(f, "params", "update")
        tag = update.get("sessionUpdate") if isinstance(update, dict) else None
        if tag not in TURN_QUIET:
            if turn.first is None:
                turn.first = t
        elif tag == "state_update" and update.get("state") == "idle" and self.version != 1:
            turn.stop = t
            turn.stop_reason = update.get("stopReason")
            del self.open[turn.sid]

    def methods(self) -> dict[str, dict[str, Any]]:
        """Per method (sorted): latency statistics in ms, and ``errors``."""
        out = {}
        for method in sorted(self.times):
            s = stats(x / _MS for x in self.times[method])
            s["errors"] = self.errors.get(method, 0)
            out[method] = s
        return out

    def turn_records(self) -> list[dict[str, Any]]:
        """Every prompt turn in order: ``seq`` and ``id`` of its prompt, ``sessionId``,
        ``first_update_ms``, ``duration_ms`` (None while unfinished), ``stopReason``."""
        return [t.record() for t in self.turns]

    def as_dict(self) -> dict[str, Any]:
        """``{"latency_ms": {method: stats}, "turns": {"count", "unfinished",
        "first_update_ms": stats, "duration_ms": stats, "each": [turn records]}}``."""
        each = self.turn_records()
        return {
            "latency_ms": self.methods(),
            "turns": {
                "count": len(each),
                "unfinished": sum(1 for t in each if t["duration_ms"] is None),
                "first_update_ms": stats(t["first_update_ms"] for t in each
                                         if t["first_update_ms"] is not None),
                "duration_ms": stats(t["duration_ms"] for t in each
                                     if t["duration_ms"] is not None),
                "each": each,
            },
        }


def latency_of(frames: Iterable[dict[str, Any]], session: str | None = None) -> Latency:
    """The :class:`Latency` of frame records (only those of ``session``, when given: its
    requests, their answers and its updates); a stream header starts a new stream."""
    lat = Latency()
    for f in frames:
        if "format" in f:
            lat.new_stream()
            continue
        if session is not None and f.get("sessionId") != session and \
                f.get("method") != "initialize":
            continue
        lat.add(f)
    return lat


def deltas(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]
           ) -> dict[str, dict[str, Any]]:
    """Per method in either run: ``a`` and ``b`` (:meth:`Latency.methods` of each) and
    ``delta``, b minus a for each statistic (None where a run has no value)."""
    out = {}
    empty = stats(())
    for method in sorted(set(a) | set(b)):
        sa, sb = a.get(method, {**empty, "errors": 0}), b.get(method, {**empty, "errors": 0})
        delta = {}
        for key in ("count", "p50", "p90", "p99", "max", "errors"):
            x, y = sa[key], sb[key]
            delta[key] = None if x is None or y is None else _r(y - x)
        out[method] = {"a": sa, "b": sb, "delta": delta}
    return out

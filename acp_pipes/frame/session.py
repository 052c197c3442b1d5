"""The frames of one session: the one rule of ``--session`` on frames (acp-frame,
acp-replay; docs/acp-frame.md).

A rule about frame records and the JSON-RPC kinds a framer gives them (which request an
answer answers, whose session a request of no session turns out to be), so it lives with
the framer rather than with the streams it reads.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["of_session"]

T = TypeVar("T")

#: The state of a held frame: answered for this session (or no answer needed), answered
#: for another (dropped with its answer), not answered yet.
_KEEP, _DROP, _OPEN = "keep", "drop", "open"


def _itself(rec: Any) -> dict:
    return rec


def _own_kind(rec: Any) -> Any:  # a frame record's
    return rec.get("kind")


def of_session(items: Iterable[T], sid: str, seen: list[bool],
               record: Callable[[T], dict] = _itself,
               kind: Callable[[T], Any] = _own_kind) -> Iterator[T]:
    """The frames of session ``sid`` and the connection's own (of no session:
    ``initialize``, ``authenticate``, frames that are not JSON-RPC), without a request
    another session answered (the ``session/new`` that made it).

    A request of no session is held, with the frames after it, until its answer says
    whose it is (a response's ``sessionId``): memory holds what is in flight. An answer
    that names no session follows its request: the one to another session's prompt is
    dropped with it. One never answered is kept, and so is one still open when a stream
    ends (a record with no ``dir``: the next stream's header, which matching restarts
    at). ``items`` are frame records, or anything ``record`` takes one from (its ``dir``,
    ``id``, ``sessionId``) and ``kind`` classifies (request, response, error, ...).
    ``seen`` gets an entry once a frame of ``sid`` went by, so a caller can say the
    session was not there."""
    held = _Held(sid)
    for item in items:
        rec = record(item)
        d = rec.get("dir")
        if d is None:  # a header: the stream before it is over, its open requests kept
            yield from held.end()
            yield item
            continue
        k = kind(item)
        s = rec.get("sessionId")
        if k == "response" or k == "error":
            if held.answer(rec, d, s):
                continue  # the answer to another session's request (a prompt's) is theirs
        elif k == "request" and s is not None and s != sid:
            held.asked_elsewhere(rec, d)
        if s is None or s == sid:
            if s is not None and not seen:
                seen.append(True)
            if not held.hold(item, rec, d, k, s):
                yield item
        yield from held.ready()
    yield from held.end()


class _Held:
    """The frames :func:`of_session` holds until the requests of no session among them
    are answered, and the requests in flight it matches answers to."""

    __slots__ = ("held", "others", "sid", "waiting")

    def __init__(self, sid: str):
        self.sid = sid
        self.held: deque[list] = deque()  # [item, _KEEP | _DROP | _OPEN]
        self.waiting: dict[tuple, list[list]] = {}  # (dir, id type, id) -> its held requests
        self.others: dict[tuple, int] = {}  # (dir, id type, id) -> other sessions' open

    def answer(self, rec: dict, d: str, s: Any) -> bool:
        """An answer settles the held request it answers; True when it answers another
        session's request instead (and is dropped)."""
        rid = rec.get("id")
        key = ("a2c" if d == "c2a" else "c2a", rid.__class__, rid)
        asked = self.waiting.get(key)
        if asked:
            asked.pop(0)[1] = _KEEP if s is None or s == self.sid else _DROP
            if not asked:
                del self.waiting[key]
            return False
        if s is None and key in self.others:
            if self.others[key] == 1:
                del self.others[key]
            else:
                self.others[key] -= 1
            return True
        return False

    def asked_elsewhere(self, rec: dict, d: str) -> None:
        """A request of another session: its answer, which may name none, is theirs."""
        rid = rec.get("id")
        key = (d, rid.__class__, rid)
        self.others[key] = self.others.get(key, 0) + 1

    def hold(self, item: Any, rec: dict, d: str, k: Any, s: Any) -> bool:
        """Hold a frame of this session or of none, when it must wait: a request of no
        session (until answered), or anything behind one. False: it goes out now."""
        if k == "request" and s is None:
            rid = rec.get("id")
            entry = [item, _OPEN]
            self.waiting.setdefault((d, rid.__class__, rid), []).append(entry)
            self.held.append(entry)
            return True
        if self.held:
            self.held.append([item, _KEEP])
            return True
        return False

    def ready(self) -> Iterator[Any]:
        """The held frames no open request is in front of any more."""
        held = self.held
        while held and held[0][1] != _OPEN:
            entry = held.popleft()
            if entry[1] == _KEEP:
                yield entry[0]

    def end(self) -> Iterator[Any]:
        """The end of a stream: what is held goes out but what was dropped; requests in
        flight are forgotten."""
        for entry in self.held:
            if entry[1] != _DROP:
                yield entry[0]
        self.held.clear()
        self.waiting.clear()
        self.others.clear()

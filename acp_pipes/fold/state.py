"""The state of every entity of every session, shared by all the connections of a run.

ACP's patch rule applies to the entity, whatever connection (a resume, a second
client) or fork the update arrives on (ASR-704, ASR-706, ASR-718): so the latest state
of each entity, and where it was first seen, is not the fold of one connection's but
lives here, one :class:`States` for every :class:`~acp_pipes.fold.core.Folder` of a
run. Each state is kept when a record of the entity is made final (live or replayed:
the latest revision is the latest state on the wire), serialised into a
:class:`~acp_pipes.fold.index.FinalStore`, so memory stays flat in the log's size.

A fork's session looks up an entity it has no state of in its parent's: what the fork
copied (ASR-718), which is the parent's state when the fork was made. So the parent's
first change to an entity after a fork first keeps, for that fork, the state it had
(copy on write; "absent" when the parent had none, for an entity the parent made after
the fork, whose ID is then new in the fork). ACP v1's derived message IDs count per
session here too, so a message gets the same ID on every connection that sees it
(ASR-717).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import orjson

from acp_pipes.fold.entities import Entity
from acp_pipes.fold.index import DigestIndex, FinalStore

__all__ = ["State", "StateKey", "States"]

#: An entity's key in the run: (session, kind, ACP ID).
StateKey = tuple[str, str, str]

#: The key prefix of what a fork copied, kept when its parent changed the entity after.
_COPY = "\x00copied"
#: Kept for a fork when its parent had no state of the entity at the fork.
_ABSENT = b""

#: Derived-ID stems counted in memory (~140 bytes each) before the counts spill to disk.
SEEN_IN_MEMORY = 8192


@dataclass(slots=True, eq=False)
class State:
    """One entity's latest state and its first sight (``pos``, ``t``, ``replayed``: the
    superseding record keeps the first sight's ``ts`` or ``observedAt``, ASR-707);
    ``conn``: the connection whose frames ``frames`` are."""

    value: dict[str, Any]
    chunked: bool
    frames: list[int]
    origin: str | None
    output: bytearray | None
    pos: int
    t: int | None
    trace: dict[str, Any] | None
    replayed: bool
    conn: int
    session: str


class States:
    """``put(key, state)`` / ``get(key)`` with ``key`` = (session, kind, ACP ID);
    ``forked(child, parent)`` makes the parent's states the child's fallback."""

    def __init__(self) -> None:
        self.store = FinalStore()
        # states orjson cannot write (integers beyond 64 bits), by key or copy key
        self._unwritable: dict[tuple[str, ...], State] = {}
        self.parents: dict[str, str] = {}  # fork -> the session it was forked from
        self.children: dict[str, list[str]] = {}  # session -> the forks made from it
        # ACP v1: derived-ID occurrence counts per (session, load epoch, stem), and each
        # session's load epoch (a session/load replays the history from its start)
        self.seen = DigestIndex(SEEN_IN_MEMORY)
        self.epochs: dict[str, int] = {}
        # ACP v1 identity (docs/asr.md "One rule for identity"): the entity ID at a
        # message's place when it is not the derived one (an ID of the agent's own), and
        # the entity each ID of the agent's own names: key tuple -> the ID, UTF-8
        self.names = FinalStore()
        self.named: set[str] = set()  # the sessions with a name in it (one entry each)

    def put(self, key: StateKey, ent: Entity, replayed: bool, conn: int) -> None:
        """Keep the state of entity ``ent`` (a :class:`~acp_pipes.fold.entities.Entity`
        whose chunks are settled), first seen as history if ``replayed``; its frames are
        connection ``conn``'s. Serialised at once, from the entity's own fields."""
        if self.children:
            kids = self.children.get(key[0])
            if kids is not None:
                self._keep_copies(key, kids)
        output = ent.output
        try:
            data = orjson.dumps((ent.value, ent.chunked, ent.frames, ent.origin, None
                                 if output is None else base64.b64encode(output).decode(),
                                 ent.pos, ent.t, ent.trace, replayed, conn))
        except TypeError:
            self._unwritable[key] = State(ent.value, ent.chunked, list(ent.frames),
                                          ent.origin, output, ent.pos, ent.t, ent.trace,
                                          replayed, conn, key[0])
            return
        self.store.put(key, data)

    def get(self, key: StateKey) -> State | None:
        """The entity's own state, or None."""
        data = self.store.get(key)
        if data is None:
            return self._unwritable.get(key)
        return self._decode(data, key[0])

    @staticmethod
    def _decode(data: bytes, session: str) -> State:
        value, chunked, frames, origin, output, pos, t, trace, replayed, conn = (
            orjson.loads(data))
        return State(value, chunked, frames, origin,
                     None if output is None else bytearray(base64.b64decode(output)),
                     pos, t, trace, replayed, conn, session)

    def copied(self, key: StateKey) -> State | None:
        """What a fork copied: the state the entity had, when the fork was made, in the
        session the fork (or the fork it came from) was made from; None when it had none."""
        sid, kind, ident = key
        for _ in range(16):  # a chain of forks (and no loop forever on a cycle)
            parent = self.parents.get(sid)
            if parent is None:
                return None
            ck = (_COPY, sid, kind, ident)
            data = self.store.get(ck)
            if data is not None:  # the parent changed it after the fork: as it was then
                return None if data == _ABSENT else self._decode(data, parent)
            if ck in self._unwritable:
                return self._unwritable[ck]
            st = self.get((parent, kind, ident))
            if st is not None:  # unchanged since the fork
                return st
            sid = parent  # the parent's own copy, from the session it was forked from
        return None

    def _keep_copies(self, key: StateKey, kids: list[str]) -> None:
        """The parent's entity ``key`` is about to change: every fork made from the
        parent since its last change keeps the state it copied (ASR-718)."""
        sid, kind, ident = key
        before: Any = None
        looked = False
        for child in kids:
            ck = (_COPY, child, kind, ident)
            if self.store.get(ck) is not None or ck in self._unwritable:
                continue  # kept at an earlier change
            if not looked:
                before = self.store.get(key)
                if before is None:
                    before = self._unwritable.get(key) or self.copied(key) or _ABSENT
                looked = True
            if before.__class__ is State:
                self._unwritable[ck] = before
            else:
                self.store.put(ck, before)

    def forked(self, child: str, parent: Any) -> None:
        """``child`` was forked from ``parent`` now: until the parent changes an entity,
        the fork's copy of it is the parent's state (ASR-718)."""
        if isinstance(parent, str) and parent != child and child not in self.parents:
            self.parents[child] = parent
            self.children.setdefault(parent, []).append(child)

    def close(self) -> None:
        self.store.close()
        self.seen.close()
        self.names.close()

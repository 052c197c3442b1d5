"""The fold's records: made from final (or released) entities, leaving in timeline order.

The :class:`~acp_pipes.fold.core.Folder` reads frames and decides when an entity is
final (ASR-705); it *has* a :class:`Timeline`, which makes the records and decides when
each leaves. It is a module of its own because it is the output's contract (the order
acp-asr relies on, and the bound on memory) and knows nothing of frames.

Each session has a *lane*: every entity and event in the order ACP first showed it (its
timeline position, the ``seq`` of its first frame). An entity's record is made when the
entity becomes final and leaves the lane once everything before it has left, so the
output is in timeline order: a prompt comes before the tool calls of its turn although
the tool calls finish first. At the end of a turn an open tool call leaves as a
non-final record (the call, without a result) so one dangling call cannot hold the
session back; ``--snapshots`` does that for every open entity at each checkpoint
(ASR-705's crash safety). A lane longer than :data:`MAX_HELD` releases its head the
same way, so memory stays bounded by the entities open at once.

Every final state, live or replayed, is kept, so a change after final (ASR-706) folds
onto the whole entity however long ago, on whichever connection, it went final
(:meth:`Timeline.reopen`): serialised when the entity becomes final (while its objects
are still in the CPU's caches: serialising them later costs several times more) into
the run's :class:`~acp_pipes.fold.state.States`, shared by every connection, which keeps
its memory flat and the rest on disk.
"""

from __future__ import annotations

import base64
from collections import deque
from typing import Any

from acp_pipes.fold.entities import Entity, settle
from acp_pipes.fold.state import States

__all__ = ["MAX_HELD", "Lane", "Record", "Timeline"]

#: One record of the fold's output (docs/acp-fold.md), or an event waiting in a lane.
Record = dict[str, Any]
#: A session's entities and events, in timeline order.
Lane = deque[Entity | Record]

MAX_HELD = 4096
_LIST_FIELDS = ("content", "summary")  # copied so a record never shares a growing list
#: Entities built from chunks or upserts: their records say which (ASR-704).
_ASSEMBLED = frozenset({"user_message", "agent_message", "agent_thought", "session_message",
                        "compaction", "terminal", "tool_call"})


class Timeline:
    """Records, in order. A lane (:meth:`lane`) per session holds entities (:meth:`add`)
    and events (:meth:`event`); :meth:`finalize` makes an entity's final record and
    :meth:`flush` lets what reached a lane's head leave; :meth:`take` hands over the
    records made so far."""

    def __init__(self, *, states: States | None = None, connection: int = 0):
        self.out: list[Record] = []
        #: every entity's latest state, shared by the run's connections (memory bounded)
        self.own = states is None
        self.states = States() if states is None else states
        self.conn = connection

    @staticmethod
    def lane() -> Lane:
        return deque()

    def take(self) -> list[Record]:
        """The records made since the last take, in order."""
        out = self.out
        self.out = []
        return out

    def emit(self, rec: Record) -> None:
        """A record that leaves at once, ahead of every lane (a session's start)."""
        self.out.append(rec)

    def add(self, lane: Lane, ent: Entity) -> None:
        """An entity takes its place in its session's lane."""
        lane.append(ent)

    def event(self, lane: Lane, rec: Record, ready: bool = True) -> Record:
        """An event record takes its place in the lane; one not ``ready`` waits there
        (and holds back what follows) until :meth:`ready` or :meth:`drop`."""
        rec["_ready"] = ready
        lane.append(rec)
        if ready:
            self.flush(lane)
        return rec

    @staticmethod
    def ready(rec: Record, frame: int | None = None) -> None:
        """A waiting event may leave (``frame``: one more frame it came from)."""
        if frame is not None:
            rec["frames"].append(frame)
        rec["_ready"] = True

    @staticmethod
    def drop(rec: Record) -> None:
        """A waiting event is not written (a request that failed)."""
        rec["_failed"] = True
        rec["_ready"] = True

    def bound(self, lane: Lane) -> None:
        """Release the head of a lane longer than MAX_HELD (memory stays bounded)."""
        if len(lane) > MAX_HELD:
            self.flush(lane, cap=True)

    def finalize(self, ent: Entity, why: str) -> None:
        """The entity is final: its record is made, and leaves when its turn comes. Its
        state is kept as the entity's latest; a replayed entity seen before keeps that
        first sight's time (ASR-707: the superseding record's ``ts`` or ``observedAt``)."""
        if ent.dead:
            return
        if ent.key is None:  # a prompt never answered: not inserted, no record
            ent.dead = True
            return
        ent.final = True
        ent.why = why
        fk = (ent.session, ent.kind, ent.key)
        if ent.replayed and ent.first_replayed is None:
            old = self.states.get(fk)
            if old is not None:  # replayed history of an entity already seen
                ent.pos, ent.t, ent.first_replayed = old.pos, old.t, old.replayed
        rec = self.record(ent, True, why)
        if ent.parts is not None:
            settle(ent)
        self.states.put(fk, ent, ent.replayed if ent.first_replayed is None else (
            ent.first_replayed), self.conn)
        if ent.released:
            self.out.append(rec)
        else:
            ent.ready = rec

    def reopen(self, ent: Entity) -> None:
        """A new entity of a key whose state was kept before (on this connection or
        another, live or replayed; or in the session a fork was made from): the entity
        starts from that whole state (ASR-704, ASR-706, ASR-718)."""
        key = ent.key
        if key is None:  # never: an entity an update made is keyed by its ACP ID
            raise RuntimeError(f"a {ent.kind} entity without a key cannot be reopened")
        fk = (ent.session, ent.kind, key)
        states = self.states
        old = states.get(fk)
        copied = old is None
        if old is None:
            if not states.parents:  # the common case: a new entity, and no fork
                return
            old = states.copied(fk)
            if old is None:
                return
        ent.value = old.value
        ent.chunked = old.chunked
        ent.origin = old.origin
        ent.output = old.output
        ent.trace = old.trace
        if copied:  # the fork's own entity, from what it copied: its first sight is now
            return
        # frames of another connection are not this record's (native.ref names one)
        ent.frames = list(old.frames) if old.conn == self.conn else []
        ent.pos, ent.t = old.pos, old.t  # ts stays the first update's (ASR-707)
        ent.first_replayed = old.replayed
        ent.after_final = True

    def close(self) -> None:
        """No more entities: release the states (their temporary files), unless they
        are the run's, shared with other connections (their owner closes them)."""
        if self.own:
            self.states.close()

    def record(self, ent: Entity, final: bool, why: str) -> Record:
        """The entity's record as it stands (a copy: later updates do not change it)."""
        if ent.parts is not None:
            settle(ent)
        value = dict(ent.value)
        for f in _LIST_FIELDS:
            v = value.get(f)
            if v.__class__ is list:
                value[f] = v.copy()
        rec: Record = {
            "ev": "entity", "session": ent.session, "entity": ent.kind, "id": ent.key,
            "final": final, "why": why, "pos": ent.pos, "t": ent.t,
            "replayed": ent.replayed}
        if ent.kind == "terminal":
            if ent.output is not None:
                value["output"] = {"data": base64.b64encode(bytes(ent.output)).decode()}
        trace = ent.trace
        if trace is not None:
            # trace context the key-by-key fold left out (it came in a chunk's or the
            # notification's _meta, or a null removed it) is kept (ASR-708)
            meta = value.get("_meta")
            if meta is None:
                value["_meta"] = dict(trace)
            elif not meta.keys() >= trace.keys():
                value["_meta"] = {**meta, **{k: v for k, v in trace.items() if k not in meta}}
        if ent.kind in _ASSEMBLED:
            rec["assembly"] = "chunks" if ent.chunked else "folded"
        if ent.origin:
            rec["origin"] = ent.origin
        if ent.after_final:
            rec["afterFinal"] = True
        first = ent.first_replayed
        if first is not None and first is not ent.replayed:
            rec["firstReplayed"] = first  # t is that first sight's (ASR-707)
        rec["value"] = value
        rec["frames"] = list(ent.frames)
        return rec

    def flush(self, lane: Lane, *, force: bool = False, turn_end: bool = False,
              cap: bool = False) -> None:
        """Write what has reached the head of the lane. ``force`` releases open
        entities as partial records; ``turn_end`` releases open tool calls (their call
        is written, the result follows when they end); ``cap`` releases the head while
        the lane is longer than MAX_HELD."""
        out = self.out
        while lane:
            item = lane[0]
            if type(item) is not Entity:  # an event's record
                if not item["_ready"] and not force:
                    break
                lane.popleft()
                if item.pop("_failed", None):
                    continue
                item.pop("_ready", None)
                out.append(item)
                continue
            ent = item
            if ent.dead or ent.released:
                lane.popleft()
                continue
            if ent.ready is not None:
                lane.popleft()
                out.append(ent.ready)
                ent.ready = None
                ent.released = True
                continue
            if ent.key is None and not (force or cap):
                break  # a prompt waiting for its messageId
            release = force or (cap and len(lane) > MAX_HELD) or (
                turn_end and ent.kind == "tool_call")
            if not release:
                break
            lane.popleft()
            if ent.key is None:
                continue
            ent.released = True
            out.append(self.record(ent, False, "turn_end" if turn_end else "snapshot"))


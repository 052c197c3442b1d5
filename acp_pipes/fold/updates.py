"""The fold's ``session/update``s: each folded into the entity it names (ASR-704..706).

An update of an entity kind (:data:`~acp_pipes.fold.entities.FOLDS`) folds into the
entity its ACP ID names, per session and namespace (live, or a replay window's history);
any other update is an event record of its own. What an update ends is decided here
too: a turn's end (``state_update`` idle or requires_action), a tool call's terminal
status, a subagent at each update (ASR-705).
"""

from __future__ import annotations

from typing import Any

from acp_pipes.fold.connection import Connection
from acp_pipes.fold.entities import FOLDS, Entity, keep_trace, trace_of
from acp_pipes.fold.patch import patch_fields
from acp_pipes.fold.session import EntityKey, Session, Window

__all__ = ["OPEN_TOOL", "SNAPSHOT_FROM", "TERMINAL_TOOL", "TURN_SCOPED", "Updates"]

TERMINAL_TOOL = frozenset({"completed", "failed", "cancelled"})
TERMINAL_COMPACTION = TERMINAL_TOOL
OPEN_TOOL = frozenset({"pending", "in_progress"})
#: Final at the next idle or requires_action, at close, or at stop (ASR-705).
TURN_SCOPED = frozenset({"user_message", "agent_message", "agent_thought", "session_message",
                         "plan", "terminal"})
#: Entity kinds an update itself can make final (a status, or at once).
_ENDS_BY_UPDATE = frozenset({"tool_call", "compaction", "subagent"})
#: With --snapshots, an entity still streaming is also a checkpoint (ASR-705) when its
#: count of updates reaches SNAPSHOT_FROM, then each time it doubles: a watcher sees a
#: long message or tool call grow, and the snapshots of one entity add up to at most
#: twice its final size (acp-pipes choice).
SNAPSHOT_FROM = 64


def _checkpoint(updates: int) -> bool:
    return updates >= SNAPSHOT_FROM and updates & (updates - 1) == 0


#: The fields of a session_info_update that are not the session's.
_NOT_INFO = frozenset({"sessionUpdate"})


class Updates(Connection):
    """The ``session/update``s of one connection."""

    def update(self, seq: int, t: int | None, sid: str, upd: dict[str, Any],
               key: Any = None, meta: Any = None) -> None:
        """Fold one ``session/update``; ``key``: the entity's ID when the update does not
        carry it (a v1 chunk, under the ID the lift derived); ``meta``: the notification's
        ``params._meta``."""
        sess = self.sessions.get(sid) or self.session(sid)
        window = sess.window
        if window is None and self.windows:
            window = self.replays.joins(sess)  # history, whatever session it names (ASR-707)
        kind = upd.get("sessionUpdate")
        spec = FOLDS.get(kind) if kind.__class__ is str else None
        if spec is not None:
            ekind, id_field, how, apply = spec
            if how == "plan":
                plan = upd.get("plan")
                key = plan.get("planId") if plan.__class__ is dict else None
            elif key is None:
                key = upd.get(id_field)
            if key.__class__ is str:  # (a plan's key is None unless the plan is a dict)
                # the entity's fold: most frames are updates of an open entity
                table = sess.open if window is None else sess.replay_open
                k = (ekind, key)
                ent = table.get(k)
                if ent is None:
                    ent = self.new_entity(sess, seq, t, ekind, key, how, id_field, table)
                ent.frames.append(seq)
                problem = apply(ent, upd, id_field)
                if problem:
                    self.warn(f"{ekind} {key}: {problem}")
                if meta is not None:
                    keep_trace(ent, meta)  # ASR-708
                if self.snapshots and window is None and _checkpoint(len(ent.frames)):
                    self._snapshot(sess, ent)
                if ekind in _ENDS_BY_UPDATE:
                    self._ended_by_update(sess, ent, table, k)
                return
            self.warn(f"{kind} without a string {id_field}: kept as an audit record")
        self._event(seq, t, sess, kind, upd, meta, window)

    def _event(self, seq: int, t: int | None, sess: Session, kind: Any, upd: dict[str, Any],
               meta: Any, window: Window | None) -> None:
        """An update that is no entity's: an event record of its own (the session's
        title folded in, ASR-708's trace context kept); a ``state_update`` decides
        whether the session runs and may end its turn."""
        rec = {"ev": "update", "session": sess.sid,
               "kind": kind if isinstance(kind, str) else None,
               "update": upd, "frames": [seq], "t": t, "replayed": window is not None}
        if kind == "session_info_update":
            patch_fields(sess.info, upd, _NOT_INFO)
            rec["folded"] = dict(sess.info)
        if meta is not None:
            trace = trace_of(meta)
            if trace is not None:
                rec["trace"] = trace  # the notification's trace context (ASR-708)
        self.timeline.event(sess.lane, rec)
        if kind == "state_update" and window is None:
            self._state(sess, upd.get("state"))
        self.timeline.bound(sess.lane)

    def _state(self, sess: Session, state: Any) -> None:
        """A live ``state_update``: running or not (a resume deferred until the session
        is not running may start); idle and requires_action end the turn (ASR-705)."""
        sess.running = state == "running"
        if not sess.running:
            self.replays.start_deferred(sess)
        if state in ("idle", "requires_action"):
            self._turn_end(sess, state)
        elif self.snapshots:
            self.timeline.flush(sess.lane, force=True)

    # -- finality (ASR-705) ---------------------------------------------------------------

    def _turn_end(self, sess: Session, state: str) -> None:
        """idle or requires_action: messages, plans and terminals are final (ASR-705);
        at idle a tool call left with status other or a vendor value ends too."""
        finalize = self.timeline.finalize
        for k, ent in list(sess.open.items()):
            if ent.kind in TURN_SCOPED and (ent.key is not None):
                del sess.open[k]
                finalize(ent, state)
            elif state == "idle" and ent.kind == "tool_call":
                st = ent.value.get("status")
                if st is not None and (st.__class__ is not str or st not in OPEN_TOOL):
                    del sess.open[k]
                    finalize(ent, "turn_end")
        self.timeline.flush(sess.lane, turn_end=state == "idle")

    def _snapshot(self, sess: Session, ent: Entity) -> None:
        """ASR-705: a long stream is a checkpoint of its own. The first releases the
        lane as partial records (as at any checkpoint); once the entity is released, a
        snapshot of it leaves at once, as its final record will."""
        timeline = self.timeline
        if ent.released:
            timeline.out.append(timeline.record(ent, False, "snapshot"))
        else:
            timeline.flush(sess.lane, force=True)

    def new_entity(self, sess: Session, seq: int, t: int | None, kind: str, key: str,
                    how: str, id_field: str, table: dict[EntityKey, Entity]) -> Entity:
        """The first update of an entity (in this namespace): a new entity, or one
        re-opened after its final record (ASR-706)."""
        replaying = sess.window is not None
        if kind == "user_message" and not replaying:
            prompt = sess.open.pop(("prompt", key), None)
            if prompt is not None:  # the agent's echo of a prompt (ASR-713)
                if how == "chunk":
                    prompt.value.pop("content", None)  # its chunks are the prompt's content
                table[(kind, key)] = prompt
                return prompt
        ent = Entity(kind, key, sess.sid, seq, t, replayed=replaying)
        if not replaying:
            self.timeline.reopen(ent)  # a change after final (ASR-706), if it is one
        if how != "plan":
            ent.value[id_field] = key
        table[(kind, key)] = ent
        self.timeline.add(sess.lane, ent)
        return ent

    def _ended_by_update(self, sess: Session, ent: Entity, table: dict[EntityKey, Entity],
                         k: EntityKey) -> None:
        """Tool calls and compactions end with a terminal status; a subagent is final at
        each update."""
        kind = ent.kind
        live = sess.window is None
        status = ent.value.get("status")
        if status.__class__ is not str:  # a status of another JSON type ends nothing
            status = None
        if kind == "tool_call" and status in TERMINAL_TOOL:
            if live:
                del table[k]
                self.timeline.finalize(ent, "status")
                self.timeline.flush(sess.lane)
        elif kind == "compaction" and status in TERMINAL_COMPACTION:
            if live:
                del table[k]
                self.timeline.finalize(ent, "status")
                self.timeline.flush(sess.lane)
        elif kind == "subagent":
            # written at first sight, before any child traffic (ASR-721); later updates
            # supersede it. The child's parent decides whether its updates are live.
            self.replays.parents[k[1]] = sess.sid
            if live:
                del table[k]
                self.timeline.finalize(ent, "update")
                self.timeline.flush(sess.lane)

    def elicitation_complete(self, seq: int, t: int | None, params: Any) -> None:
        if params.__class__ is not dict:
            return
        eid = params.get("elicitationId")
        # only string IDs are remembered (an object or array could not even be looked up)
        sid = self.elicitations.get(eid) if eid.__class__ is str else None
        if sid is None:
            return
        sess = self.session(sid)
        self.timeline.event(sess.lane, {"ev": "update", "session": sid,
                                        "kind": "elicitation_complete", "method":
                                        "elicitation/complete", "update": params,
                                        "frames": [seq], "t": t, "replayed": False})

"""The fold's records: when an entity is final (ASR-705) and in which order records leave.

:class:`Timeline` is the half of :class:`~acp_pipes.fold.core.Folder` that makes and
writes records; the Folder reads frames (requests paired with responses, session/update
folded into entities) and hands entities and events to it. It is a module of its own
because it is the output's contract (the order acp-asr relies on, and the bound on
memory) and depends on nothing that reads frames.

Each session keeps its open entities and a *timeline*: every entity and event in the
order ACP first showed it (its timeline position, the ``seq`` of its first frame). An
entity's record is made when the entity becomes final and leaves the timeline once
everything before it has left, so the output is in timeline order: a prompt comes
before the tool calls of its turn although the tool calls finish first. At the end of a
turn an open tool call leaves as a non-final record (the call, without a result) so one
dangling call cannot hold the session back; ``--snapshots`` does that for every open
entity at each checkpoint (ASR-705's crash safety). A timeline longer than
:data:`MAX_HELD` releases its head the same way, so memory stays bounded by the
entities open at once.

Finals are dropped once written; a short LRU (:data:`KEEP_FINAL`) keeps recent final
values so a late patch (ASR-706) folds onto the whole entity; an older one folds onto an
empty entity and says so (``basis: "patch"``).
"""

from __future__ import annotations

import base64
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import blake3
import orjson

from acp_pipes.fold.entities import Entity, settle
from acp_pipes.fold.index import DigestIndex

if TYPE_CHECKING:
    from acp_pipes.fold.core import _Session as Session

__all__ = ["KEEP_FINAL", "MAX_HELD", "OPEN_TOOL", "TURN_SCOPED", "Timeline", "final_digest"]

MAX_HELD = 4096
KEEP_FINAL = 256
OPEN_TOOL = frozenset({"pending", "in_progress"})
#: Final at the next idle or requires_action, at close, or at stop (ASR-705).
TURN_SCOPED = frozenset({"user_message", "agent_message", "agent_thought", "session_message",
                         "plan", "terminal"})
_LIST_FIELDS = ("content", "summary")  # copied so a record never shares a growing list
#: Entities built from chunks or upserts: their records say which (ASR-704).
_ASSEMBLED = frozenset({"user_message", "agent_message", "agent_thought", "session_message",
                        "compaction", "terminal", "tool_call"})


class Timeline:
    """Finality and order: entities are finalized into records, and records leave each
    session's timeline in order into ``out`` (what the current ``feed`` returns)."""

    def __init__(self, *, after_final: bool = True):
        self.out: list[dict] = []
        self.finals: OrderedDict = OrderedDict()
        # digests of (session, kind, id) of every entity whose final record was written:
        # a later update re-opens it as a change after final (ASR-706) and its record says
        # so (afterFinal). acp-asr finds such changes itself (its own index of written
        # records) and asks for none (after_final=False): one index, not two.
        self._final_ids: DigestIndex | None = DigestIndex() if after_final else None

    def _turn_end(self, sess: Session, state: str) -> None:
        """idle or requires_action: messages, plans and terminals are final (ASR-705);
        at idle a tool call left with status other or a vendor value ends too."""
        for k, ent in list(sess.open.items()):
            if ent.kind in TURN_SCOPED and (ent.key is not None):
                del sess.open[k]
                self._finalize(ent, state)
            elif state == "idle" and ent.kind == "tool_call":
                st = ent.value.get("status")
                if st is not None and (st.__class__ is not str or st not in OPEN_TOOL):
                    del sess.open[k]
                    self._finalize(ent, "turn_end")
        self._flush(sess, turn_end=state == "idle")

    def _finalize_all(self, sess: Session, why: str) -> None:
        for ent in list(sess.open.values()):
            self._finalize(ent, why)
        sess.open.clear()

    def _end_replay(self, sess: Session, why: str) -> None:
        if not sess.replaying:
            return
        for ent in sess.replay_open.values():
            self._finalize(ent, "replay")
        sess.replay_open.clear()
        sess.replaying = False
        self._event(sess, -1, None, {"ev": "session", "op": "replay_end", "session": sess.sid,
                                     "kind": sess.replay_kind, "frames": [], "t": None})
        sess.replay_kind = ""

    def _finalize(self, ent: Entity, why: str) -> None:
        if ent.dead:
            return
        if ent.key is None:  # a prompt never answered: not inserted, no record
            ent.dead = True
            return
        ent.final = True
        ent.why = why
        rec = self._record(ent, True, why)
        if not ent.replayed:
            fk = (ent.session, ent.kind, ent.key)
            self.finals[fk] = (ent.value, ent.chunked, ent.frames, ent.origin, ent.output,
                                ent.pos, ent.t)
            if len(self.finals) > KEEP_FINAL:
                self.finals.popitem(last=False)
        if ent.released:
            self.out.append(rec)
        else:
            ent.ready = rec

    def _record(self, ent: Entity, final: bool, why: str) -> dict:
        if ent.parts is not None:
            settle(ent)
        value = dict(ent.value)
        for f in _LIST_FIELDS:
            v = value.get(f)
            if v.__class__ is list:
                value[f] = v.copy()
        rec: dict[str, Any] = {
            "ev": "entity", "session": ent.session, "entity": ent.kind, "id": ent.key,
            "final": final, "why": why, "pos": ent.pos, "t": ent.t,
            "replayed": ent.replayed}
        if ent.kind == "terminal":
            if ent.output is not None:
                value["output"] = {"data": base64.b64encode(bytes(ent.output)).decode()}
        if ent.kind in _ASSEMBLED:
            rec["assembly"] = "chunks" if ent.chunked else "folded"
        if ent.origin:
            rec["origin"] = ent.origin
        if ent.after_final:
            rec["afterFinal"] = True
            if ent.basis != "full":
                rec["basis"] = ent.basis
        rec["value"] = value
        rec["frames"] = list(ent.frames)
        return rec

    def _event(self, sess: Session, seq: int, t, rec: dict, ready: bool = True) -> dict:
        rec.setdefault("frames", [seq] if seq >= 0 else [])
        rec["_ready"] = ready
        sess.timeline.append(rec)
        if ready:
            self._flush(sess)
        return rec

    def _flush(self, sess: Session, *, force: bool = False, turn_end: bool = False,
               cap: bool = False) -> None:
        """Write what has reached the head of the session's timeline. ``force`` releases
        open entities as partial records; ``turn_end`` releases open tool calls (their
        call is written, the result follows when they end); ``cap`` releases the head
        while the timeline is longer than MAX_HELD."""
        tl = sess.timeline
        out = self.out
        while tl:
            item = tl[0]
            if item.__class__ is dict:
                if not item["_ready"] and not force:
                    break
                tl.popleft()
                if item.pop("_failed", None):
                    continue
                item.pop("_ready", None)
                out.append(item)
                continue
            ent: Entity = item
            if ent.dead or ent.released:
                tl.popleft()
                continue
            if ent.ready is not None:
                tl.popleft()
                out.append(ent.ready)
                ent.ready = None
                ent.released = True
                if self._final_ids is not None:
                    self._final_ids.put(final_digest(ent.session, ent.kind, ent.key), 1)
                continue
            if ent.key is None and not (force or cap):
                break  # a prompt waiting for its messageId
            release = force or (cap and len(tl) > MAX_HELD) or (
                turn_end and ent.kind == "tool_call")
            if not release:
                break
            tl.popleft()
            if ent.key is None:
                continue
            ent.released = True
            out.append(self._record(ent, False, "turn_end" if turn_end else "snapshot"))


def final_digest(sid: str, kind: str, key: Any) -> bytes:
    """What is kept of a written entity once its value is gone: 16 bytes (ASR-706)."""
    return blake3.blake3(orjson.dumps((sid, kind, key))).digest(16)

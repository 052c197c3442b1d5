"""What a live frame is when it is not the same as an enabled recorded frame
(:meth:`acp_pipes.sameness.match.Matcher.live`): the recorded frame it stands for
(:func:`pair`) and how it differs (:func:`differs`), a frame that came before what it
follows (:func:`out_of_order`: ``order``, or ``missing`` when the agent ended the turn
without frames recorded in it), one given up as missing that came after all
(:func:`late`), or one the recording does not have (:func:`extra`). Each is one verdict
(:mod:`acp_pipes.sameness.verdicts`); going on after a difference (``keep_going``), the
matcher is told what happened as if the frames had matched."""

from __future__ import annotations

from collections import ChainMap
from typing import TYPE_CHECKING, Any, Protocol

from acp_pipes.sameness.events import A2C, C2A, Event
from acp_pipes.sameness.jsondiff import MAX_DIFF, pointer_diff
from acp_pipes.sameness.minted import learn
from acp_pipes.sameness.slots import Matched, Slot, Trial
from acp_pipes.sameness.verdicts import Difference, Note

if TYPE_CHECKING:
    from acp_pipes.sameness.noise import Noise
    from acp_pipes.sameness.volatile import View

__all__ = ["MatchState", "differs", "extra", "late", "out_of_order", "pair"]


class MatchState(Protocol):
    """What naming a mismatch reads and tells of the matcher
    (:class:`acp_pipes.sameness.match.Matcher`)."""

    names: dict[str, str]  # minted values learned: recorded -> live
    back: dict[str, str]  # and live -> recorded
    view: View
    noise: Noise | None
    keep_going: bool
    slots: dict[int, Slot]  # built and not done
    late: dict[tuple, dict[int, Slot]]  # given up as missing, by class
    matched_by_live: dict[Any, Slot]

    def views(self, slot: Slot, ev: Event, names: Any) -> tuple[Any, Any]: ...

    def commit(self, trial: Trial) -> None: ...

    def mark_done(self, slot: Slot) -> None: ...


def pair(m: MatchState, ev: Event, slots: list[Slot]) -> Slot | None:
    """Of the recorded frames of a live frame's class, the one it stands for: the
    same entity under the renaming, else a new entity for a new one, else the
    first."""
    if not slots:
        return None
    ent = ev.entity
    if ent is not None and ent[1] is not None:
        fresh = ent[1] not in m.back
        new = None
        for s in slots:
            sent = s.event().entity
            if sent is None or sent[0] != ent[0]:
                continue
            if m.names.get(sent[1], sent[1]) == ent[1] and (
                    sent[1] in m.names or not fresh or sent[1] == ent[1]):
                return s
            if new is None and fresh and sent[1] not in m.names:
                new = s
        if new is not None:
            return new
    return slots[0]


def differs(m: MatchState, slot: Slot, ev: Event) -> Difference:
    """How ``ev`` differs from the recorded frame it stands for: the pointers that
    differ under the view, or the renaming it would break."""
    rec = slot.event()
    names, back = ChainMap({}, m.names), ChainMap({}, m.back)
    bad = learn(rec.value, ev.value, names, back)
    r, x = m.views(slot, ev, names if not bad else m.names)
    diff = pointer_diff(r, x, limit=MAX_DIFF)
    kind = "renaming" if bad else "request" if ev.kind == "request" \
        else "result" if ev.is_answer else "content"
    where = ", ".join([d["path"] or "/" for d in diff] + bad)
    d = Difference(kind, f"agent frame seq {rec.seq} ({rec.label}) differs from the "
                   f"recording at {where}", rec, ev, r, x, diff)
    if bad:
        d.extra["renaming_broken"] = bad
    if m.keep_going:
        if not bad:
            m.commit((names.maps[0], back.maps[0]))
        m.mark_done(slot)
        if ev.kind == "request":
            m.matched_by_live[ev.key] = slot
    d.slot = slot
    return d


def out_of_order(m: MatchState, slot: Slot, ev: Event, trial: Trial) -> Difference | Matched:
    """``ev`` is the recorded frame ``slot``, which waits on frames that have not come:
    an order other recordings showed too (a note), the end of a turn that came without
    the turn's frames (``missing``), or a frame before what it follows (``order``)."""
    rec = slot.event()
    if m.noise is not None and slot.index in m.noise.unordered:
        m.commit(trial)
        m.mark_done(slot)
        return Matched(slot, ev, [Note("learned_order", f"agent frame seq {rec.seq} "
                                  f"({rec.label}) came before what it follows in this "
                                  "recording, as in another one", rec, ev)])
    before = [m.slots[p] for p in slot.preds if p in m.slots]
    agents = [s for s in before if s.dir == A2C]
    if agents and (rec.is_answer or rec.update == "state_update"):
        d = _turn_ended(m, rec, ev, agents)
    else:
        d = _before(rec, ev, before, (agents or before)[0] if before else None)
    if m.keep_going:
        for s in agents:
            m.mark_done(s)
            m.late.setdefault(s.cls, {})[s.index] = s
        m.commit(trial)
        m.mark_done(slot)
        if ev.kind == "request":
            m.matched_by_live[ev.key] = slot
    d.slot = slot
    return d


def _turn_ended(m: MatchState, rec: Event, ev: Event, agents: list[Slot]) -> Difference:
    """The agent ended the turn (``rec``, its answer or v2 state) without the turn's
    recorded ``agents`` frames."""
    gone = agents[0].event()  # the first of the turn's frames that did not come
    message = (f"the agent ended the turn (agent frame seq {rec.seq}, {rec.label}) "
               f"without recorded agent frame seq {gone.seq} ({gone.label})"
               + (f" and {len(agents) - 1} more" if len(agents) > 1 else ""))
    d = Difference("missing", message, gone, ev,
                   m.view.recorded(gone.value, m.names, gone.kind == "request"), None)
    d.extra["not_before"] = [s.event().seq for s in agents]
    d.extra["closer_seq"] = rec.seq
    d.related = [s.event() for s in agents[1:]]
    return d


def _before(rec: Event, ev: Event, before: list[Slot], first: Slot | None) -> Difference:
    """``rec`` came before the recorded frames ``before`` it follows (the agent's first,
    ``first``, named)."""
    fe = first.event() if first is not None else None
    message = (f"agent frame seq {rec.seq} ({rec.label}) came before recorded "
               + (f"{'client' if fe.dir == C2A else 'agent'} frame seq {fe.seq} "
                  f"({fe.label}), which it follows" if fe is not None else
                  "what it follows"))
    d = Difference("order", message, rec, ev, None, None)
    d.extra["before"] = [s.event().seq for s in before]
    return d


def late(m: MatchState, slot: Slot, ev: Event, trial: Trial) -> Difference:
    """A frame given up as missing came after all (going on after a difference)."""
    rec = slot.event()
    got = m.late.get(slot.cls)
    if got is not None:
        got.pop(slot.index, None)
        if not got:
            del m.late[slot.cls]
    m.commit(trial)
    d = Difference("order", f"agent frame seq {rec.seq} ({rec.label}) came after the "
                   "frame that ends its turn", rec, ev, None, None)
    d.slot = slot
    return d


def extra(m: MatchState, ev: Event) -> Difference | Note:
    """A frame the recording does not have here: a note when the presets or the noise
    say the agent sends it only sometimes."""
    why = m.view.rules.optional(ev.method, ev.update)
    if why is None and m.noise is not None:
        why = m.noise.extra(ev, m.view)
    if why is not None:
        return Note("optional_extra", f"the agent sent {ev.label} (live seq {ev.seq}), "
                    f"which it sends only sometimes: {why}", None, ev)
    return Difference("extra", f"the agent sent {ev.label} (live seq {ev.seq}), "
                      "which the recording does not have here", None, ev, None,
                      m.view.live(ev.value, ev.kind == "request"))

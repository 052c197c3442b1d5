"""``--strict-order``: a run compared in the recorded order, frame after frame, as every
re-drive compared before the model of the same session (:mod:`acp_pipes.sameness.match`
is the model's partial order; this is the sequence, kept for whoever wants it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from acp_pipes.sameness import mismatch
from acp_pipes.sameness.events import A2C, describe, parse
from acp_pipes.sameness.slots import DONE, Matched, Slot
from acp_pipes.sameness.verdicts import Difference

if TYPE_CHECKING:
    from acp_pipes.sameness.match import Matcher

__all__ = ["in_order", "sendable"]


def in_order(m: Matcher, raw: bytes, seq: Any = None) -> Matched | Difference:
    """A frame of the run against the first recorded agent frame not matched,
    floating or not, as every re-drive compared before the model
    (``--strict-order``)."""
    m.build()
    slot = next(m.unmatched(), None)
    ev = describe(m.live_n, A2C, raw, parse(raw), seq=seq)
    m.live_n += 1
    if slot is None:
        return Difference("extra", f"the agent sent frame live seq {seq}, more than "
                          "was recorded", None, ev, None,
                          m.view.live(ev.value, ev.kind == "request"))
    trial = m.same(slot, ev)
    if trial is not None:
        return m.matched(slot, ev, trial)
    d = mismatch.differs(m, slot, ev)
    if slot.cls != ev.cls():  # another kind of frame where this one was recorded
        rec = slot.event()
        d.kind = "order"
        d.message = (f"agent frame seq {rec.seq} ({rec.label}) was recorded next; the "
                     f"agent sent {ev.label} (live seq {ev.seq})")
    return d


def sendable(m: Matcher, slot: Slot) -> bool:
    """``--strict-order``: the client step ``slot`` goes once every agent frame
    recorded before it came."""
    front = m.front
    while front and front[0].state == DONE:
        front.popleft()
    return not front or front[0].index > slot.index

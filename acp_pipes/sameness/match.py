"""Matching a run against a recording as a partial order (:class:`Matcher`).

The recording's frames are admitted in its order (:meth:`Matcher.admit`) and its
happens-before built from them (:class:`acp_pipes.sameness.order.Order`). A frame of the
run is matched against any recorded frame of its class (:meth:`Event.cls`) whose
predecessors have all matched (*enabled*), under the view both are compared as
(:class:`acp_pipes.sameness.volatile.View`: the renaming learned so far, the presets, the
noise learned); the renaming is learned as frames match. Failing that:

- equal to a recorded frame that is not enabled: ``order`` (or ``missing``, when what
  it waits for is the turn's own frames and the run has ended the turn);
- of the class of an enabled frame (the same entity first): ``content``, ``request``
  or ``result``, with the pointers that differ;
- a floating notification: held until its window closes (below);
- else ``extra``, or a note when the presets or the noise say the agent sends it only
  sometimes.

Floating notifications have no predecessors; each has a *window* instead: the client
steps (requests and notifications the client started, not its answers) around where it
was recorded, from the step before to the step after. A live one matches any recorded
one of its class whose window is open; one left over when its window closes is paired
with an unmatched one of its class from the same window (a ``content`` difference:
the title changed) or, with none, is a note.

The client's side: a re-drive sends the recorded client frames and says so
(:meth:`Matcher.sent`); a client step may go once every recorded agent frame before it
that the run must wait for (not floating, not optional) has matched
(:meth:`Matcher.may_send`): what the client waited for is not in a log, so a step
waits for all it had seen; and after the client frames recorded before it
(:meth:`Matcher.unsent_before`: an answer the agent has not asked for yet).

Most frames of a run that goes as recorded match by their bytes, in the recorded order
(:meth:`Matcher.fast`): a frame matched that way before the order was built past it is
never parsed unless something after it could wait on it (an answer, v2's state).
"""

from __future__ import annotations

from collections import ChainMap, deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from acp_pipes.sameness import mismatch
from acp_pipes.sameness.events import A2C, C2A, Event, describe, parse
from acp_pipes.sameness.jsondiff import pointer_diff
from acp_pipes.sameness.minted import learn
from acp_pipes.sameness.order import Order
from acp_pipes.sameness.slots import (
    DONE,
    ENABLED,
    FLOAT,
    UNBUILT,
    WAITING,
    WINDOW,
    Matched,
    Slot,
    Trial,
    may_float,
    ordered,
)
from acp_pipes.sameness.verdicts import Difference, Note
from acp_pipes.sameness.volatile import Rules, View, agent_name

if TYPE_CHECKING:
    from collections.abc import Callable

    from acp_pipes.sameness.noise import Noise

__all__ = ["Matcher"]

class Matcher:
    """One run matched against one recording (see the module). ``view``: how frames are
    compared; ``rules_for``: the volatile rules for an agent name, asked when the
    recording's ``initialize`` answer names its agent; ``noise``: what other recordings
    of the same script taught; ``keep_going``: after a difference, go on as if the
    frames matched (a content difference), the frame had come (missing) or not
    (extra)."""

    def __init__(self, view: View | None = None, *,
                 rules_for: Callable[[str | None], Rules] | None = None,
                 noise: Noise | None = None, keep_going: bool = False):
        self.view = view or View()
        self.rules_for = rules_for
        self.noise = noise
        self.keep_going = keep_going
        self.order = Order()
        self.admitted = 0
        self.open_a2c = 0  # agent frames admitted and not matched (or given up)
        self.open_c2a = 0  # client frames admitted and not sent
        self.steps_admitted = 0
        self.steps_sent = 0
        self.slots: dict[int, Slot] = {}  # built and not done
        self.unbuilt: deque[Slot] = deque()
        self.front: deque[Slot] = deque()  # recorded agent frames in order, lazily popped
        self.c2a_open: deque[Slot] = deque()  # recorded client frames not sent
        self.gating: deque[Slot] = deque()  # built agent frames a client step waits for
        self.enabled: dict[tuple, dict[int, Slot]] = {}
        self.waiting: dict[tuple, dict[int, Slot]] = {}
        self.floats: dict[tuple, dict[int, Slot]] = {}
        self.held: list[tuple[Event, int]] = []  # live floating frames not matched
        self.names: dict[str, str] = {}  # minted values: recorded -> live
        self.back: dict[str, str] = {}
        self.renamed = False  # some learned name differs
        self.live_n = 0
        self.floating_extra: frozenset[str] = frozenset()
        self.agent: str | None = None
        self.named = False  # the agent's initialize answer was read (its presets chosen)
        self.matched_by_live: dict[Any, Slot] = {}  # a live request's id key -> its slot
        # recorded frames given up as missing (going on after a difference), by class:
        # one that comes after all is late, not new
        self.late: dict[tuple, dict[int, Slot]] = {}

    # -- the recording

    def admit(self, rec: dict[str, Any], raw: bytes, ev: Event | None = None,
              step: bool | None = None) -> Slot:
        """Take the recording's next frame (``ev``: a client frame's event, when the
        caller described it already, :func:`acp_pipes.sameness.events.describe`;
        ``step``: whether a client frame is one the client started, when the caller
        knows it from its bytes: it is described when the order needs it)."""
        d = rec["dir"]
        slot = Slot(self.admitted, rec, raw, d, self.steps_admitted)
        self.admitted += 1
        self.unbuilt.append(slot)
        if d == A2C:
            self.front.append(slot)
            self.open_a2c += 1
        else:
            if ev is not None:
                ev.index = slot.index
                slot.ev = ev
            if step is None:  # a client frame: what it is decides the pacing
                step = not slot.event().is_answer
            slot.step = step
            if step:
                self.steps_admitted += 1
            self.c2a_open.append(slot)
            self.open_c2a += 1
        return slot

    def take(self, rec: dict[str, Any], raw: bytes, ev: Event | None = None) -> Slot:
        """The recording's next frame, an agent frame (``ev``: its event, when the caller
        described it already), matched by its bytes while everything admitted before it
        had happened (:attr:`open_a2c` and :attr:`open_c2a` are 0): admitted as matched;
        the order is built past it later (:meth:`build_some`, while the agent works). A
        caller's fast path, inline; a request's answer is the caller's to send."""
        slot = Slot(self.admitted, rec, raw, A2C, self.steps_admitted)
        self.admitted += 1
        if ev is not None:
            ev.index = slot.index
            slot.ev = ev
        slot.sent = True  # (happened: built as done)
        self.unbuilt.append(slot)
        return slot

    def build_some(self, n: int = 64) -> bool:
        """Build the order over up to ``n`` more frames admitted; whether any are left
        (for a caller with time on its hands)."""
        unbuilt = self.unbuilt
        for _ in range(n):
            if not unbuilt:
                return False
            self._build(unbuilt.popleft())
        return bool(unbuilt)

    def skip(self) -> None:
        """The recording's next frame, an agent frame nothing can wait on (no answer, no
        end of a v2 turn: no ``"id"``, no ``"idle"`` in its bytes), matched by its bytes
        while everything admitted before it had happened (:attr:`open_a2c` and
        :attr:`open_c2a` are 0): taken as matched without being admitted. A caller's
        fast path, inline."""
        self.admitted += 1

    @property
    def plain_rules(self) -> bool:
        """Whether what floats and what is optional is the model's alone (no preset or
        noise adds to it), so a frame's bytes can say it is one a client step waits for
        (:func:`may_float`). The presets are the agent's: its ``initialize`` answer is
        built first, when it is admitted and the presets are not chosen yet."""
        if not self.named and self.rules_for is not None:
            while self.unbuilt and not self.named:
                self._build(self.unbuilt.popleft())
        return not self.floating_extra and self.noise is None \
            and not self.view.rules.has_optional

    def holds(self, raw: bytes) -> bool:
        """Whether a recorded agent frame, by its bytes alone, is one the next client
        step waits for."""
        return self.plain_rules and not may_float(raw)

    def _build_to(self, index: int) -> None:
        """Build the order through admitted frame ``index``."""
        unbuilt = self.unbuilt
        while unbuilt and unbuilt[0].index <= index:
            self._build(unbuilt.popleft())

    def build(self) -> None:
        """Build the order over everything admitted."""
        if self.unbuilt:
            self._build_to(self.unbuilt[-1].index)

    def _build(self, slot: Slot) -> None:
        if slot.sent and slot.ev is None and slot.dir == A2C and self.named:
            self.order.happened(parse(slot.raw))  # taken by its bytes: the cheap half
            slot.state = DONE
            return
        ev = slot.event()
        if ev.dir == A2C and ev.is_answer and not self.named:  # initialize's, first
            self._named(ev)
        if ev.update is not None and ev.update in self.floating_extra and not ev.floating:
            ev.floating, ev.entity = True, None
        if slot.sent:  # a client frame sent, an agent frame taken by its bytes: its
            self.order.add(ev)  # place in the order, nothing waits on it
            self.order.done(slot.index)
            slot.state = DONE
            return
        if ev.dir == A2C:
            slot.optional = self._optional(slot, ev)
        preds = self.order.add(ev, optional=slot.optional is not None)
        slot.cls = ev.cls()
        self._wait_on(slot, preds)
        self.slots[slot.index] = slot
        if ev.dir == C2A:
            slot.state = WAITING
            return
        self._place(slot, ev.floating)

    def _named(self, ev: Event) -> None:
        """The recording's ``initialize`` answer: its agent's presets from here on."""
        self.named = True
        self.agent = agent_name(ev.value)
        if self.agent is not None and self.rules_for is not None:
            self.set_rules(self.rules_for(self.agent))

    def _wait_on(self, slot: Slot, preds: list[int]) -> None:
        """``slot`` waits on those of its predecessors that have not happened."""
        missing = 0
        for p in preds:
            ps = self.slots.get(p)
            if ps is not None:
                missing += 1
                ps.succ.append(slot)
        slot.missing = missing
        if missing:
            slot.preds = preds

    def _place(self, slot: Slot, floating: bool) -> None:
        """A recorded agent frame built: floating in its window, or waiting, or enabled
        (and whether a client step waits for it)."""
        missing = slot.missing
        if floating:
            slot.state = FLOAT
            slot.gates = False
            self.floats.setdefault(slot.cls, {})[slot.index] = slot
            return
        if slot.optional is not None:
            slot.gates = False
        else:
            self.gating.append(slot)
        if missing:
            slot.state = WAITING
            self.waiting.setdefault(slot.cls, {})[slot.index] = slot
        else:
            slot.state = ENABLED
            self.enabled.setdefault(slot.cls, {})[slot.index] = slot

    def _optional(self, slot: Slot, ev: Event) -> str | None:
        if self.noise is not None:
            why = self.noise.optional.get(slot.index)
            if why is not None:
                return why
        return self.view.rules.optional(ev.method, ev.update)

    def set_rules(self, rules: Rules) -> None:
        """The volatile rules from here on (the recording named its agent)."""
        self.view = View(rules, self.view.paths)
        self.floating_extra = rules.floating

    def mark_done(self, slot: Slot) -> None:
        state = slot.state
        if state == DONE:
            return
        slot.state = DONE
        if slot.dir == A2C:
            self.open_a2c -= 1
        table = (self.enabled if state == ENABLED else self.waiting if state == WAITING
                 else self.floats if state == FLOAT else None)
        if table is not None and slot.dir == A2C:
            got = table.get(slot.cls)
            if got is not None:
                got.pop(slot.index, None)
                if not got:
                    del table[slot.cls]
        self.slots.pop(slot.index, None)
        self.order.done(slot.index)
        self._release(slot)

    def _release(self, slot: Slot) -> None:
        for s in slot.succ:
            s.missing -= 1
            if s.missing == 0 and s.state == WAITING and s.dir == A2C:
                got = self.waiting.get(s.cls)
                if got is not None:
                    got.pop(s.index, None)
                    if not got:
                        del self.waiting[s.cls]
                s.state = ENABLED
                self.enabled.setdefault(s.cls, {})[s.index] = s
        slot.succ = []

    # -- the client's side

    def sent(self, slot: Slot) -> list[Difference | Note | Matched]:
        """A recorded client frame was sent (or, comparing two recordings, met); returns
        what the floating windows that closed with it found."""
        slot.sent = True
        self.open_c2a -= 1
        if slot.state != UNBUILT:
            self.mark_done(slot)
        if slot.step:
            self.steps_sent += 1
            return self.settle()
        return []

    def may_send(self, slot: Slot) -> bool:
        """Whether the recorded client step ``slot`` may go: every agent frame recorded
        before it that a client waits for has matched. Asked often while a turn runs,
        so a frame is not even parsed when its bytes name no floating kind."""
        front = self.front
        while front and front[0].state == DONE:
            front.popleft()
        for s in front:
            if s.index > slot.index:
                return True
            if self.gates(s):
                return False
        return True

    def gates(self, s: Slot) -> bool:
        """Whether the recorded agent frame ``s`` is one a client step after it waits for
        and has not come: not floating, not optional, not matched (or given up)."""
        state = s.state
        if state == DONE:
            return False
        if state == UNBUILT:
            if self.holds(s.raw):
                return True
            ev = s.event()
            return not (ev.floating or ev.update in self.floating_extra
                        or self._optional(s, ev) is not None)
        return s.gates

    def unsent_before(self, slot: Slot) -> list[Slot]:
        """The recorded client frames before ``slot`` not sent (a client's bytes are one
        stream: a re-drive sends none after them)."""
        out = []
        for s in self._unsent():
            if s.index >= slot.index:
                break
            if not s.sent:
                out.append(s)
        return out

    def waiting_for(self) -> Slot | None:
        """The first recorded agent frame the run waits for (for a timeout's report)."""
        self.build()
        for s in self.gating:
            if s.state != DONE:
                return s
        return None

    def all_came(self) -> bool:
        """Every recorded agent frame admitted that a client waits for has matched."""
        front = self.front
        while front and front[0].state == DONE:
            front.popleft()
        return not front or self.waiting_for() is None

    # -- the run's frames

    def fast(self, raw: bytes) -> Slot | None:
        """The recorded frame ``raw`` matches by its bytes alone: the first recorded
        agent frame not matched, when its bytes are these, nothing was renamed or
        redacted, and everything recorded before it happened (taken, when the order is
        not built to it yet: :meth:`take`). None: ask :meth:`live`."""
        front = self.front
        while front and front[0].state == DONE:
            front.popleft()
        if not front:
            return None
        slot = front[0]
        if slot.raw != raw or self.renamed or slot.rec.get("redacted"):
            return None
        if not self.fast_clients(slot):
            return None
        if slot.state == UNBUILT:  # taken: the order is built past it later
            slot.sent = True
            self.open_a2c -= 1
            front.popleft()
            return slot
        if slot.state not in (ENABLED, FLOAT):
            return None
        self.mark_done(slot)
        front.popleft()
        return slot

    def fast_clients(self, slot: Slot) -> bool:
        """Whether every recorded client frame before ``slot`` was sent."""
        opened = self._unsent()
        return not opened or opened[0].index > slot.index

    def _unsent(self) -> deque[Slot]:
        """The recorded client frames not sent, the first of them first: those sent
        are let go from its head (one sent later than a frame after it stays till then)."""
        opened = self.c2a_open
        while opened and opened[0].sent:
            opened.popleft()
        return opened

    def live(self, raw: bytes, seq: Any = None) -> Matched | Difference | Note | None:
        """Match one frame of the run: :class:`Matched`, a :class:`Difference`, a
        :class:`Note` (an extra frame tolerated), or None (a floating notification held
        until its window closes)."""
        self.build()
        ev = describe(self.live_n, A2C, raw, parse(raw), seq=seq)
        self.live_n += 1
        if ev.update is not None and ev.update in self.floating_extra:
            ev.floating, ev.entity = True, None
        if ev.floating:
            return self._float(ev)
        cands = ordered(self.enabled.get(ev.cls()))
        if not self.renamed:  # the same bytes first: many frames of one class can be due
            for slot in cands:
                if slot.raw == raw and not slot.rec.get("redacted"):
                    return self.matched(slot, ev, ({}, {}))
        for slot in cands:
            trial = self.same(slot, ev)
            if trial is not None:
                return self.matched(slot, ev, trial)
        return self._not_enabled(ev, cands)

    def _not_enabled(self, ev: Event, cands: list[Slot]) -> Matched | Difference | Note:
        """A live frame the same as no enabled recorded frame (``cands``: those of its
        class): one recorded later, or given up as missing, or the one it differs from
        (:mod:`acp_pipes.sameness.mismatch`)."""
        cls = ev.cls()
        # a frame waiting only on the agent's own frames is one the live frame may stand
        # for; one that waits on a client step still to come (a later turn's) is not:
        # the agent has not been asked for it
        near = [s for s in ordered(self.waiting.get(cls))
                if all(self.slots[p].dir == A2C for p in s.preds if p in self.slots)]
        for slot in near:
            trial = self.same(slot, ev)
            if trial is not None:
                return mismatch.out_of_order(self, slot, ev, trial)
        for slot in ordered(self.late.get(cls)):
            trial = self.same(slot, ev)
            if trial is not None:
                return mismatch.late(self, slot, ev, trial)
        paired = mismatch.pair(self, ev, cands) or mismatch.pair(self, ev, near)
        if paired is None and ev.is_answer:  # an answer to no request of that id: the
            paired = mismatch.pair(self, ev, [s for c, t in self.enabled.items()  # one due
                                     if c[0] == "answer" for s in t.values()])
        if paired is not None:
            return mismatch.differs(self, paired, ev)
        return mismatch.extra(self, ev)

    def same(self, slot: Slot, ev: Event) -> Trial | None:
        """The names a match of ``slot`` with ``ev`` would learn, when they are the same
        frame under the view; None when they are not."""
        rec = slot.event()
        names, back = ChainMap({}, self.names), ChainMap({}, self.back)
        if learn(rec.value, ev.value, names, back):
            return None
        r, x = self.views(slot, ev, names)
        if pointer_diff(r, x, limit=1):
            return None
        return names.maps[0], back.maps[0]

    def views(self, slot: Slot, ev: Event, names: Any) -> tuple[Any, Any]:
        rec = slot.event()
        request = ev.kind == "request"
        r = self.view.recorded(rec.value, names, request)
        x = self.view.live(ev.value, request)
        if self.noise is not None:
            r, x = self.noise.apply(slot.index, r, x)
        return r, x

    def commit(self, trial: Trial) -> None:
        names, back = trial
        if names:
            self.names.update(names)
            self.back.update(back)
            if not self.renamed:
                self.renamed = any(k != v for k, v in names.items())

    def matched(self, slot: Slot, ev: Event, trial: Trial) -> Matched:
        self.commit(trial)
        self.mark_done(slot)
        if ev.kind == "request":
            self.matched_by_live[ev.key] = slot
        return Matched(slot, ev)

    def _float(self, ev: Event) -> Matched | None:
        cls = ev.cls()
        now = self.steps_sent
        for slot in ordered(self.floats.get(cls)):
            if slot.steps - WINDOW <= now <= slot.steps + WINDOW:
                trial = self.same(slot, ev)
                if trial is not None:
                    return self.matched(slot, ev, trial)
        self.held.append((ev, now))
        return None

    # -- windows and the end

    def settle(self, final: bool = False) -> list[Difference | Note | Matched]:
        """Close the floating windows that ended (all of them when ``final``): a recorded
        floating notification left over pairs with a live one of its class from its
        window (a difference when they differ), or is a note; a live one no window can
        take any more is a note."""
        if not self.floats and not self.held:
            return []
        now = self.steps_sent
        out: list[Difference | Note | Matched] = []
        for cls in list(self.floats):
            for slot in ordered(self.floats.get(cls)):
                if not final and now < slot.steps + WINDOW + 1:
                    continue
                rec = slot.event()
                pick = None
                for n, (ev, at) in enumerate(self.held):
                    if ev.cls() == cls and slot.steps - WINDOW <= at <= slot.steps + WINDOW:
                        pick = n
                        break
                if pick is None:
                    out.append(Note("floating_missing", f"agent frame seq {rec.seq} "
                                    f"({rec.label}) did not come: it floats", rec, None))
                    self.mark_done(slot)
                    continue
                ev, _ = self.held.pop(pick)
                trial = self.same(slot, ev)
                if trial is not None:
                    out.append(self.matched(slot, ev, trial))
                    continue
                d = mismatch.differs(self, slot, ev)
                d.message += " (a floating notification, in its window)"
                if slot.state != DONE:
                    self.mark_done(slot)
                out.append(d)
        keep = []
        for ev, at in self.held:
            if final or now > at + 2 * WINDOW:
                out.append(Note("floating_extra", f"the agent sent {ev.label} (live seq "
                                f"{ev.seq}), which the recording does not have in its "
                                "window: it floats", None, ev))
            else:
                keep.append((ev, at))
        self.held = keep
        return out

    def finish(self) -> list[Difference | Note | Matched]:
        """The end of the run (everything recorded admitted, every client frame sent):
        what is left over. Recorded agent frames that never came are ``missing``
        (optional ones a note), floating ones settle."""
        if self.open_a2c == 0:  # everything came: no need to build the order to the end
            self.steps_sent = 1 << 60
            return self.settle(final=True)
        self.build()
        out = self.settle(final=True)
        for slot in list(self.front):
            # (settling may have matched some)
            if slot.state == DONE:
                continue
            rec = slot.event()
            if slot.optional is not None:
                out.append(Note("optional_missing", f"agent frame seq {rec.seq} "
                                f"({rec.label}) did not come: {slot.optional}", rec, None))
            else:
                out.append(Difference(
                    "missing", f"agent frame seq {rec.seq} ({rec.label}) never came",
                    rec, None, self.view.recorded(rec.value, self.names,
                                                  rec.kind == "request"), None))
            self.mark_done(slot)
        self.front.clear()
        return out

    def unmatched(self) -> Iterator[Slot]:
        """The recorded agent frames not matched yet, in order."""
        return (s for s in self.front if s.state != DONE)

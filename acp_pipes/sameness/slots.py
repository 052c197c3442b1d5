"""A recorded frame as the matcher (:mod:`acp_pipes.sameness.match`) holds it
(:class:`Slot`: its place in the order and its state), a live frame matched to one
(:class:`Matched`), and what a frame's bytes say before it is parsed (:func:`may_float`):
the vocabulary the matcher and what names its mismatches
(:mod:`acp_pipes.sameness.mismatch`) share."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from acp_pipes.sameness.events import Event, describe
from acp_pipes.sameness.floating import FLOATING, FLOATING_METHODS
from acp_pipes.sameness.verdicts import Note

__all__ = ["DONE", "ENABLED", "FLOAT", "UNBUILT", "WAITING", "WINDOW", "Matched", "Slot",
           "Trial", "may_float", "ordered"]

#: The names a match would learn: (recorded -> live, live -> recorded).
Trial = tuple[MutableMapping[str, str], MutableMapping[str, str]]

#: A slot's state: not in the order yet, waiting on frames before it, enabled (its
#: predecessors all happened), floating (in its window), done (matched or sent).
UNBUILT, WAITING, ENABLED, FLOAT, DONE = range(5)
#: the bytes of every floating notification name its kind (a frame without them is
#: known not to float without parsing it)
FLOATING_BYTES = tuple(k.encode() for k in (*FLOATING, *FLOATING_METHODS))


def may_float(raw: bytes) -> bool:
    """Whether a frame's bytes name a kind that floats (when they do not, it does not)."""
    for name in FLOATING_BYTES:  # (a memchr each: a regex of them all cost more)
        if name in raw:
            return True
    return False
#: A window's width in client steps on each side of where a floating notification was
#: recorded (one: a title written while a turn ran may come after the next prompt).
WINDOW = 1


class Slot:
    """A recorded frame in the matcher: its record and bytes, its event once built, its
    state, and the frames waiting on it."""

    __slots__ = ("index", "rec", "raw", "dir", "ev", "state", "missing", "succ",
                 "preds", "steps", "gates", "optional", "cls", "sent", "step")

    def __init__(self, index: int, rec: dict[str, Any], raw: bytes, d: str, steps: int):
        self.index = index
        self.rec = rec
        self.raw = raw
        self.dir = d
        self.ev: Event | None = None
        self.state = UNBUILT
        self.missing = 0
        self.succ: list[Slot] = []
        self.preds: list[int] = []
        self.steps = steps  # client steps recorded before it
        self.gates = True  # the client's next step waits for it
        self.optional: str | None = None  # why it is one the agent sends only sometimes
        self.cls: tuple = ()
        self.sent = False  # it happened: a client frame sent, an agent frame taken
        self.step = False  # a client frame the client started (no answer)

    @property
    def done(self) -> bool:
        return self.state == DONE

    def event(self) -> Event:
        if self.ev is None:
            self.ev = describe(self.index, self.dir, self.raw, seq=self.rec.get("seq"))
        return self.ev


class Matched:
    """A live frame (``live``) matched: the recorded frame it matched, and what was
    tolerated."""

    __slots__ = ("slot", "live", "notes")

    def __init__(self, slot: Slot, live: Event, notes: list[Note] | None = None):
        self.slot = slot
        self.live = live
        self.notes = notes or []


def ordered(table: dict[int, Slot] | None) -> list[Slot]:
    """A table's slots in the recording's order."""
    if not table:
        return []
    if len(table) == 1:
        return list(table.values())
    return [table[i] for i in sorted(table)]

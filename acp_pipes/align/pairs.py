"""Who is paired with whom while the model of the same session compares two runs
(:mod:`acp_pipes.align.session`): the state every step of that comparison reads and
amends, and how B's renamed identifiers are shown by A's names.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

from acp_pipes.sameness.floating import FLOATING

__all__ = ["Pairs", "names_b", "typed"]


class Pairs:
    """Who is paired with whom: ``mate_a[i]`` the step of B paired with step ``i`` of A
    (-1: none), ``mate_b`` the other way; ``changed`` the pairs that differ (A step ->
    difference kind); notes per run (step -> note kind)."""

    def __init__(self, n: int, m: int):
        self.mate_a = array("l", [-1]) * n
        self.mate_b = array("l", [-1]) * m
        self.changed: dict[int, str] = {}  # A step -> kind (renaming, content, ...)
        self.note_a: dict[int, str] = {}
        self.note_b: dict[int, str] = {}
        self.why: dict[tuple[int, int], str] = {}  # (side, step) -> why a note is one
        self.order_a: set[int] = set()  # steps only one run has where the other has the
        self.order_b: set[int] = set()  # same step elsewhere in the chain
        #: steps only one run has that are marked (an announcement the other run did not
        #: make of a call both made): step -> why
        self.marks_a: dict[int, str] = {}
        self.marks_b: dict[int, str] = {}
        self.equal = 0
        #: steps of A paired equal as the model sees them, not as written (the pairs
        #: the renaming has to look at)
        self.viewed: list[int] = []
        #: the renaming, B's identifier -> A's: ``(kind, typed value) -> A's value``
        self.back: dict[tuple[str, Any], Any] = {}

    def pair(self, i: int, j: int, kind: str | None = None) -> None:
        self.mate_a[i] = j
        self.mate_b[j] = i
        if kind is None:
            self.equal += 1
        else:
            self.changed[i] = kind

    def floated(self, side: int, x: int, kind: str) -> None:
        """A floating notification of run A (``side`` 0) or B the other run lacks in its
        window: a note, saying why it floats."""
        (self.note_a if side == 0 else self.note_b)[x] = \
            "floating_missing" if side == 0 else "floating_extra"
        self.why[(side, x)] = f"it floats: {FLOATING.get(kind, 'a preset says so')}"

    def unpair(self, i: int) -> None:
        j = self.mate_a[i]
        if j < 0:
            return
        if self.changed.pop(i, None) is None:
            self.equal -= 1
        self.mate_a[i] = -1
        self.mate_b[j] = -1


def typed(value: Any) -> tuple[str, Any]:
    """An identifier as a key: ``1`` and ``"1"`` are two."""
    return (value.__class__.__name__, value)


def names_b(back: dict) -> Callable[[str, Any], Any]:
    def name(kind: str, value: Any) -> Any:
        return back.get((kind, typed(value)), value)
    return name

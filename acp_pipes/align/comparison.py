"""What a comparison of two runs is, whichever comparison made it: the merged order of
their steps (:class:`Comparison`), a changed step's differences (:class:`Change`), and
what both comparisons (``--strict``'s, :mod:`acp_pipes.align.compare`, and the model's,
:mod:`acp_pipes.align.session`) share: which chains pair (:func:`pair_chains`), how the
merged order is built (:func:`merge`), and the bounds of pairing a gap's steps by kind.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from acp_pipes.align.steps import Steps, StepTable
from acp_pipes.sameness.jsondiff import MAX_DIFF, pointer_diff

__all__ = ["Change", "Comparison", "PAIR_COST", "PAIR_LIMIT", "TAGS", "merge", "pair_chains"]

#: What an op of the merged order is.
TAGS = ("equal", "changed", "only-a", "only-b")
#: Gaps larger than this (steps of A plus steps of B) are not searched for changed steps:
#: their steps stay only-a and only-b (the LCS is exact either way).
PAIR_LIMIT = 20_000
#: The edit distance searched when pairing a gap's steps by kind (a bound keeps a huge,
#: mixed gap from costing N*D; past it the pairing is still valid, maybe not maximal).
PAIR_COST = 256


@dataclass(frozen=True, slots=True)
class Change:
    """Step ``a`` of run A and step ``b`` of run B, the same kind of step saying something
    else. ``diff``: ``{"op": "replace"|"remove"|"add", "path": POINTER, "a": VALUE,
    "b": VALUE}`` (one side only for remove/add), at most :data:`MAX_DIFF` of them
    (``cut`` when there were more), over the values as compared (after ``--ignore``,
    MCP secrets redacted)."""

    a: int
    b: int
    diff: list[dict[str, Any]]
    cut: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"a": self.a, "b": self.b, "diff": self.diff}
        if self.cut:
            out["cut"] = True
        return out


class Comparison:
    """Runs A and B in one merged order: op ``k`` is step ``oa[k]`` of A and step
    ``ob[k]`` of B (-1: the run has no step there). Both: equal when the steps are the
    same, else changed; one: only-a or only-b, or, under the model of the same session
    (:mod:`acp_pipes.align.session`), a *note*: a step one run lacks that the model
    tolerates (a floating notification, a frame sent only sometimes). ``differing``
    lists the positions of the ops that differ (not the notes), ascending; :meth:`at`
    gives their steps without building ``oa``/``ob`` (which a summary never needs)."""

    def __init__(self, a: Steps, b: Steps, table: StepTable, n_ops: int, lcs: int,
                 changed: int, approximate: bool, differing: list[int],
                 ops_at: dict[int, tuple[int, int]], build: Callable[[], tuple[array, array]],
                 notes: dict[int, str] | None = None):
        self.a, self.b, self.table = a, b, table
        self.lcs, self.changed, self.approximate = lcs, changed, approximate
        self.differing = differing
        #: the model: op position -> the kind of note (:data:`acp_pipes.sameness.NOTES`)
        self.notes: dict[int, str] = notes or {}
        #: the model: op position -> the kind of difference
        #: (:data:`acp_pipes.sameness.DIFFERENCES`)
        self.kinds: dict[int, str] = {}
        #: the model: op position -> why a difference is one some agents make now and then
        self.marks: dict[int, str] = {}
        #: the model: op position -> why a note's step is tolerated
        self.whys: dict[int, str] = {}
        self._marked = sorted([*differing, *self.notes]) if self.notes else differing
        self._n_ops = n_ops
        self._at = ops_at
        self._build = build
        #: the renaming of minted identifiers the model learned, per kind: A's value ->
        #: B's value (:mod:`acp_pipes.align.minted`); empty under --strict
        self.renamed: dict[str, dict[Any, Any]] = {}
        #: the model: what a comparison ran under and learned, for the summary
        self.rules: dict[str, Any] | None = None
        self.learned: dict[str, Any] | None = None
        #: the model: how B's identifiers are shown (A's name for each one renamed)
        self.name_b: Callable[[str, Any], Any] | None = None
        self._oa: array | None = None
        self._ob: array | None = None

    @property
    def oa(self) -> array:
        if self._oa is None:
            self._oa, self._ob = self._build()
        return self._oa

    @property
    def ob(self) -> array:
        if self._ob is None:
            self._oa, self._ob = self._build()
        return self._ob

    @property
    def n(self) -> int:
        return len(self.a.seq)

    @property
    def m(self) -> int:
        return len(self.b.seq)

    @property
    def distance(self) -> int:
        """Insertions plus deletions (a changed step counts as one of each); the steps
        of notes are not counted: they are no difference."""
        return self.n + self.m - 2 * self.lcs - len(self.notes)

    @property
    def equal(self) -> bool:
        return self.distance == 0

    def __len__(self) -> int:
        return self._n_ops

    def counts(self) -> dict[str, int]:
        c = self.changed
        out = {"equal": self.lcs, "changed": c, "only-a": self.n - self.lcs - c,
               "only-b": self.m - self.lcs - c}
        if self.notes:
            for k in self.notes:
                i, _ = self.at(k)
                out["only-a" if i >= 0 else "only-b"] -= 1
            out["notes"] = len(self.notes)
        return out

    def at(self, k: int) -> tuple[int, int]:
        """``(step of A, step of B)`` of op ``k`` (-1 for none)."""
        got = self._at.get(k)
        return got if got is not None else (self.oa[k], self.ob[k])

    def tag(self, k: int) -> str:
        got = self._at.get(k)
        if got is None:
            return "equal"
        if k in self.notes:
            return "note"
        i, j = got
        return "only-b" if i < 0 else "only-a" if j < 0 else "changed"

    def runs(self) -> Iterator[tuple[str, int, int]]:
        """``(tag, start, stop)``: maximal runs of ops of one tag, in merged order."""
        d = self._marked
        prev = 0
        i = 0
        tag = self.tag
        while i < len(d):
            k = d[i]
            if k > prev:
                yield "equal", prev, k
            t = tag(k)
            j = i + 1
            while j < len(d) and d[j] == d[j - 1] + 1 and tag(d[j]) == t:
                j += 1
            prev = d[j - 1] + 1
            yield t, k, prev
            i = j
        if prev < self._n_ops:
            yield "equal", prev, self._n_ops

    def first_divergence(self) -> int | None:
        """The position of the first op that is not equal (None: the runs are equal)."""
        return self.differing[0] if self.differing else None

    def changes(self, positions: Iterable[int] | None = None) -> dict[int, Change]:
        """The :class:`Change` of each changed op among ``positions`` (default: all),
        by position. Reads both inputs once; holds A's values of the wanted steps
        meanwhile."""
        want = [k for k in (self.differing if positions is None else positions)
                if self.tag(k) == "changed"]
        if not want:
            return {}
        pairs = {k: self._at[k] for k in want}
        by_a = {i: k for k, (i, _) in pairs.items()}
        held: dict[int, Any] = {}
        for i, value in self.a.values(by_a):
            held[by_a[i]] = value
        by_b = {j: k for k, (_, j) in pairs.items()}
        out: dict[int, Change] = {}
        for j, value in self.b.values(by_b, self.name_b):
            k = by_b[j]
            d = pointer_diff(held.pop(k), value, MAX_DIFF + 1, names=("a", "b"))
            out[k] = Change(pairs[k][0], j, d[:MAX_DIFF], len(d) > MAX_DIFF)
        return out


def merge(n: int, mate: array, attached: list[tuple[int, int]]) -> tuple[array, array]:
    """The merged order: A's steps in order (``mate`` gives each its B step), each
    attached B step right after the A step it follows."""
    every = array("l", range(n))
    oa, ob = array("l"), array("l")
    prev = 0
    for anchor, j in attached:
        stop = anchor + 1
        if stop > prev:
            oa.extend(every[prev:stop])
            ob.extend(mate[prev:stop])
            prev = stop
        oa.append(-1)
        ob.append(j)
    oa.extend(every[prev:])
    ob.extend(mate[prev:])
    return oa, ob


def pair_chains(a: Steps, b: Steps, named: bool = False) -> list[Any]:
    """Each chain of A with the chain of B of the same direction and the paired session:
    ``(positions in A, positions in B)``, None for a chain the other run lacks (with
    ``named``, and the two chains' names, ``(dir, session)`` or None).

    Sessions with one id in both runs are paired; the others in the order they first
    appear (so ``--ignore /params/sessionId`` aligns two runs whose agent made up other
    ids, and ``--session X --session Y`` two sessions). No session pairs with no session.
    """
    def sessions(s: Steps) -> list[str]:
        seen: dict[str, None] = {}
        for _, sid in s.chains:
            if sid is not None:
                seen.setdefault(sid, None)
        return list(seen)

    sa, sb = sessions(a), sessions(b)
    in_b = set(sb)
    to_b: dict[str | None, str | None] = {None: None}
    for s in sa:
        if s in in_b:
            to_b[s] = s
    used = set(to_b.values())
    left_b = iter([s for s in sb if s not in used])
    for s in sa:
        if s not in to_b:
            other = next(left_b, None)
            if other is None:
                break
            to_b[s] = other
    b_index = {name: c for c, name in enumerate(b.chains)}
    out: list[Any] = []
    taken: set[int] = set()
    for c, (d, sid) in enumerate(a.chains):
        cb = b_index.get((d, to_b[sid])) if sid in to_b else None
        if cb is None:
            out.append((a.chain_pos[c], None, a.chains[c], None) if named else
                       (a.chain_pos[c], None))
        else:
            taken.add(cb)
            out.append((a.chain_pos[c], b.chain_pos[cb], a.chains[c], b.chains[cb])
                       if named else (a.chain_pos[c], b.chain_pos[cb]))
    for cb, pos in enumerate(b.chain_pos):
        if cb not in taken:
            out.append((None, pos, None, b.chains[cb]) if named else (None, pos))
    return out

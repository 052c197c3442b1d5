"""Two runs compared over the order the protocol fixes, with changed steps paired up.

A recording is one log, but a connection is two streams: the client's frames and the
agent's reach the log through two pipes, and how they interleave there is scheduling.
Within a session, JSON-RPC and ACP fix less than a log's order suggests:

- the client's frames of a session are in the client's order, the agent's in the
  agent's (each direction is one byte stream);
- a response (or error) comes after the request it answers;
- nothing else: where a ``session/close`` lands among the agent's updates, how two
  sessions' frames interleave, is not something either peer chose.

So :func:`compare` aligns *chain with chain* (a chain: one direction of one session, see
:mod:`acp_pipes.align.steps`), each with the exact LCS of :mod:`acp_pipes.align.myers`,
and merges the results. The sum of the chains' LCS is the largest set of steps that can
be matched keeping every order the protocol fixes, so the alignment stays exact while an
order it does not fix is no difference. A reply that answers no request seen before it
has a key of its own (:mod:`acp_pipes.align.steps`), so a run where a response came before
its request still differs.

Sessions are paired by id, and those whose ids differ (two runs of an agent that makes
up its ids, aligned with ``--ignore``) in the order they first appear.

Where a chain's runs part, the steps that are the same *kind* of step (a prompt and a
prompt, a ``usage_update`` and a ``usage_update``: :attr:`StepTable.coarse`) are paired as
*changed*: one step that says something else, shown as the JSON pointers that differ and
both values (:meth:`Comparison.changes`), not as a removed and an added step whose
one-line summaries may read the same. The pairing is a second LCS over the kinds inside
the gap; it changes what is shown, never the LCS.

The merged order, in which every output lists the steps: A's order, each step of B alone
placed right after the step before it in its own chain (before the chain's first step
when it has none), or, for a chain that A does not have, after the last matched step
before it in B.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from acp_pipes.align.myers import align, opcodes
from acp_pipes.align.steps import Steps, StepTable
from acp_pipes.sameness.jsondiff import MAX_DIFF, pointer_diff

__all__ = ["Change", "Comparison", "compare", "TAGS"]

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


def compare(a: Steps, b: Steps, table: StepTable, max_cost: int | None = None,
            learned: Any = None) -> Comparison:
    """Align ``a`` with ``b`` chain by chain and merge (see the module docstring).
    ``max_cost`` bounds each chain's search as :func:`acp_pipes.align.myers.align` does;
    the result is then marked approximate. Two traces read by the model of the same
    session (not ``--strict``) are compared by it (:mod:`acp_pipes.align.session`;
    ``learned``: the noise learned from other recordings,
    :class:`~acp_pipes.align.model.Learned`)."""
    if a.model is not None and b.model is not None:
        from acp_pipes.align.session import compare_model

        return compare_model(a, b, table, max_cost, learned)
    n, m = len(a.seq), len(b.seq)
    sa_all, sb_all = a.seq, b.seq
    pairs = _pair_chains(a, b)
    lcs = 0
    approximate = False
    # 1. each chain of A with its chain of B: the exact LCS
    aligned: list[tuple[array, array, list[tuple[int, int, int]]]] = []
    for pa, pb in pairs:
        if pa is not None and pb is not None:
            al = align(list(map(sa_all.__getitem__, pa)), list(map(sb_all.__getitem__, pb)),
                       max_cost)
            lcs += al.lcs
            approximate |= al.approximate
            aligned.append((pa, pb, [*al.blocks, (len(pa), len(pb), 0)]))
    # 2. what the steps in the gaps are (the update kind is read back, for those only)
    _look_up_updates(a, b, table, aligned)
    # 3. the gaps' steps paired by kind, and where B's own steps go
    changed: list[tuple[int, int]] = []
    attached: list[tuple[int, int]] = []  # (A index it follows, B index): B's steps alone
    only_a: list[int] = []
    coarse = table.coarse
    for pa, pb in pairs:
        if pb is None:
            only_a.extend(pa)  # (no pair is (None, None))
    for pa, pb, blocks in aligned:
        last = pa[0] - 1  # B's steps before the chain's first A step go right before it
        i = j = 0
        for a0, b0, size in blocks:
            if i < a0 or j < b0:
                xa, xb = pa[i:a0], pb[j:b0]
                if _pairable(xa, xb):
                    ca = [coarse(sa_all[x]) for x in xa]
                    cb = [coarse(sb_all[y]) for y in xb]
                    for tag, p0, p1, q0, q1 in opcodes(align(ca, cb, PAIR_COST)):
                        if tag == "equal":
                            changed.extend(zip(xa[p0:p1], xb[q0:q1], strict=True))
                            last = xa[p1 - 1]
                        elif tag == "only-a":
                            only_a.extend(xa[p0:p1])
                            last = xa[p1 - 1]
                        else:
                            attached.extend((last, y) for y in xb[q0:q1])
                else:
                    if xa:
                        only_a.extend(xa)
                        last = xa[-1]
                    attached.extend((last, y) for y in xb)
            if size:
                last = pa[a0 + size - 1]
            i, j = a0 + size, b0 + size

    # no pair is (None, None)
    orphans = sorted(j for pa, pb in pairs if pa is None for j in pb)
    if orphans:  # chains A does not have: after the last matched step before them in B
        bmate = _mates(m, aligned, changed, reverse=True)
        prev = -1
        o = 0
        for j in range(m):
            if o >= len(orphans):
                break
            if j == orphans[o]:
                attached.append((prev, j))
                o += 1
            elif bmate[j] >= 0:
                prev = bmate[j]

    attached.sort()
    anchors = [x for x, _ in attached]
    ops_at: dict[int, tuple[int, int]] = {}
    for i in only_a:
        ops_at[i + bisect_left(anchors, i)] = (i, -1)
    for i, j in changed:
        ops_at[i + bisect_left(anchors, i)] = (i, j)
    for r, (x, j) in enumerate(attached):
        ops_at[x + 1 + r] = (-1, j)

    def build() -> tuple[array, array]:
        return _merge(n, _mates(n, aligned, changed), attached)

    return Comparison(a, b, table, n + len(attached), lcs, len(changed), approximate,
                      sorted(ops_at), ops_at, build)


def _mates(size: int, aligned, changed: list[tuple[int, int]], reverse: bool = False
           ) -> array:
    """For each step of A (of B with ``reverse``), the step of the other run it is
    paired with (equal or changed), or -1."""
    mate = array("l", [-1]) * size
    for pa, pb, blocks in aligned:
        src, dst = (pb, pa) if reverse else (pa, pb)
        for a0, b0, n in blocks:
            if n:
                s0, d0 = (b0, a0) if reverse else (a0, b0)
                for x, y in zip(src[s0:s0 + n], dst[d0:d0 + n], strict=True):
                    mate[x] = y
    for x, y in changed:
        if reverse:
            x, y = y, x
        mate[x] = y
    return mate


def _pairable(xa: array, xb: array) -> bool:
    """Are a gap's steps searched for changed ones (both sides have some, not too many)?"""
    return bool(xa) and bool(xb) and len(xa) + len(xb) <= PAIR_LIMIT


def _look_up_updates(a: Steps, b: Steps, table: StepTable, aligned) -> None:
    """Read back the update kind of the ``session/update`` steps in gaps to be paired,
    so a ``usage_update`` pairs with a ``usage_update``, not with a message chunk."""
    if a.kind != "trace":
        return
    want_a: list[int] = []
    want_b: list[int] = []
    needs = table.needs_update
    sa_all, sb_all = a.seq, b.seq
    for pa, pb, blocks in aligned:
        i = j = 0
        for a0, b0, size in blocks:
            xa, xb = pa[i:a0], pb[j:b0]
            if _pairable(xa, xb):
                want_a += [x for x in xa if needs(sa_all[x])]
                want_b += [y for y in xb if needs(sb_all[y])]
            i, j = a0 + size, b0 + size
    for steps, want in ((a, want_a), (b, want_b)):
        for i, kind in steps.update_kinds(want):
            table.updates[steps.seq[i]] = kind


def _merge(n: int, mate: array, attached: list[tuple[int, int]]) -> tuple[array, array]:
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


def _pair_chains(a: Steps, b: Steps, named: bool = False) -> list[Any]:
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

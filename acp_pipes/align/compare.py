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
from typing import Any

from acp_pipes.align.comparison import PAIR_COST, PAIR_LIMIT, Comparison, merge, pair_chains
from acp_pipes.align.myers import align, opcodes
from acp_pipes.align.session import compare_model
from acp_pipes.align.steps import Steps, StepTable

__all__ = ["compare"]

#: A chain aligned: its positions in A and in B, and the LCS's blocks ``(a0, b0, size)``
#: closed by an empty block at both ends.
Aligned = tuple[array, array, list[tuple[int, int, int]]]


def compare(a: Steps, b: Steps, table: StepTable, max_cost: int | None = None,
            learned: Any = None) -> Comparison:
    """Align ``a`` with ``b`` chain by chain and merge (see the module docstring).
    ``max_cost`` bounds each chain's search as :func:`acp_pipes.align.myers.align` does;
    the result is then marked approximate. Two traces read by the model of the same
    session (not ``--strict``) are compared by it (:mod:`acp_pipes.align.session`;
    ``learned``: the noise learned from other recordings,
    :class:`~acp_pipes.align.model.Learned`)."""
    if a.model is not None and b.model is not None:
        return compare_model(a, b, table, max_cost, learned)
    n, m = len(a.seq), len(b.seq)
    pairs = pair_chains(a, b)
    # 1. each chain of A with its chain of B: the exact LCS
    aligned, lcs, approximate = _align_chains(a, b, pairs, max_cost)
    # 2. what the steps in the gaps are (the update kind is read back, for those only)
    _look_up_updates(a, b, table, aligned)
    # 3. the gaps' steps paired by kind, and where B's own steps go
    changed: list[tuple[int, int]] = []
    attached: list[tuple[int, int]] = []  # (A index it follows, B index): B's steps alone
    only_a: list[int] = []
    for pa, pb in pairs:
        if pb is None:
            only_a.extend(pa)  # (no pair is (None, None))
    for chain in aligned:
        _pair_gaps(a.seq, b.seq, table, chain, changed, attached, only_a)
    # no pair is (None, None)
    orphans = sorted(j for pa, pb in pairs if pa is None for j in pb)
    if orphans:  # chains A does not have: after the last matched step before them in B
        _attach_orphans(orphans, _mates(m, aligned, changed, reverse=True), attached)

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
        return merge(n, _mates(n, aligned, changed), attached)

    return Comparison(a, b, table, n + len(attached), lcs, len(changed), approximate,
                      sorted(ops_at), ops_at, build)


def _align_chains(a: Steps, b: Steps, pairs: list[Any], max_cost: int | None
                  ) -> tuple[list[Aligned], int, bool]:
    """Each chain both runs have, aligned by the exact LCS; with the sum of the LCS and
    whether any search was cut short by ``max_cost``."""
    sa_all, sb_all = a.seq, b.seq
    lcs = 0
    approximate = False
    aligned: list[Aligned] = []
    for pa, pb in pairs:
        if pa is not None and pb is not None:
            al = align(list(map(sa_all.__getitem__, pa)), list(map(sb_all.__getitem__, pb)),
                       max_cost)
            lcs += al.lcs
            approximate |= al.approximate
            aligned.append((pa, pb, [*al.blocks, (len(pa), len(pb), 0)]))
    return aligned, lcs, approximate


def _pair_gaps(sa_all: list[int], sb_all: list[int], table: StepTable, chain: Aligned,
               changed: list[tuple[int, int]], attached: list[tuple[int, int]],
               only_a: list[int]) -> None:
    """The gaps of one aligned chain: steps of one kind paired as changed (a second LCS
    over the kinds), A's others only-a, B's others attached after the A step before."""
    pa, pb, blocks = chain
    coarse = table.coarse
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


def _attach_orphans(orphans: list[int], bmate: array, attached: list[tuple[int, int]]
                    ) -> None:
    """Steps of chains A does not have (ascending), each attached after the A step of the
    last matched step before it in B."""
    prev = -1
    o = 0
    for j in range(len(bmate)):
        if o >= len(orphans):
            break
        if j == orphans[o]:
            attached.append((prev, j))
            o += 1
        elif bmate[j] >= 0:
            prev = bmate[j]


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

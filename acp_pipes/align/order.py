"""The order the model's comparison is printed in (6. of :mod:`acp_pipes.align.session`):
A's order, each step only B has after what it follows in B, and, where B's own order
would still break, both runs' happens-before.
"""

from __future__ import annotations

import heapq
import operator
from array import array
from bisect import bisect_left
from collections.abc import Callable
from itertools import compress, islice, repeat

from acp_pipes.align.comparison import Comparison, merge
from acp_pipes.align.floats import client_positions
from acp_pipes.align.model import happens_before, kind_of
from acp_pipes.align.pairs import Pairs, names_b
from acp_pipes.align.steps import Steps
from acp_pipes.align.table import REPLIES, StepTable

__all__ = ["in_printed_order"]


#: Where each op is: position in the merged order -> ``(step of A, step of B)``.
OpsAt = dict[int, tuple[int, int]]
Build = Callable[[], tuple[array, array]]


def in_printed_order(a: Steps, b: Steps, table: StepTable, p: Pairs, approximate: bool
                     ) -> Comparison:
    """The ops in the order every format prints them (6. of the module), as a
    :class:`~acp_pipes.align.comparison.Comparison`."""
    n, m = len(a.seq), len(b.seq)
    mate_a, mate_b = p.mate_a, p.mate_b
    alone = list(compress(range(m), map(operator.lt, mate_b, repeat(0))))
    anchors = _anchors(a, b, table, p, alone)
    attached = sorted(zip([anchors[j] for j in alone], alone, strict=True))
    marked_a = sorted({*p.changed, *p.note_a,
                       *compress(range(n), map(operator.lt, mate_a, repeat(0)))})
    if _in_b_order(b, table, p, anchors):
        ops_at, build = _ops_in_a_order(n, mate_a, attached, marked_a)
    else:
        ops_at, build = _ops_in_both_orders(a, b, p, attached, marked_a)
    notes: dict[int, str] = {}
    kinds: dict[int, str] = {}
    marks: dict[int, str] = {}
    whys: dict[int, str] = {}
    for k, (i, j) in ops_at.items():
        why = p.marks_a.get(i) if j < 0 else p.marks_b.get(j) if i < 0 else None
        if why is not None:
            marks[k] = why
        if i >= 0 and i in p.note_a:
            notes[k] = p.note_a[i]
            whys[k] = p.why.get((0, i), "")
        elif i < 0 and j in p.note_b:
            notes[k] = p.note_b[j]
            whys[k] = p.why.get((1, j), "")
        else:
            kinds[k] = _kind(a, b, table, p, i, j)
    differing = sorted(k for k in ops_at if k not in notes)
    cmp = Comparison(a, b, table, n + len(attached), p.equal, len(p.changed), approximate,
                     differing, ops_at, build, notes)
    cmp.kinds = kinds
    cmp.marks = marks
    cmp.whys = whys
    if p.back:
        cmp.name_b = names_b(p.back)
    return cmp


def _kind(a: Steps, b: Steps, table: StepTable, p: Pairs, i: int, j: int) -> str:
    """The kind of difference of an op that is no note: ``(i, j)`` its steps."""
    if i >= 0 and j >= 0:
        why = p.changed[i]
        return "renaming" if why == "renaming" else kind_of(table, a.seq[i], "")
    if j < 0:
        return "order" if i in p.order_a else kind_of(table, a.seq[i], "a")
    return "order" if j in p.order_b else kind_of(table, b.seq[j], "b")


def _ops_in_a_order(n: int, mate_a: array, attached: list[tuple[int, int]],
                    marked_a: list[int]) -> tuple[OpsAt, Build]:
    """The ops that are not equal when B's steps keep B's order: A's order, each step
    only B has after its anchor; the whole order built only when asked for."""
    ops_at: OpsAt = {}
    at = [x for x, _ in attached]
    for i in marked_a:
        ops_at[i + bisect_left(at, i)] = (i, mate_a[i])
    for r, (x, j) in enumerate(attached):
        ops_at[x + 1 + r] = (-1, j)
    built: list[tuple[array, array]] = []

    def build() -> tuple[array, array]:
        if not built:
            built.append(merge(n, mate_a, attached))
        return built[0]
    return ops_at, build


def _ops_in_both_orders(a: Steps, b: Steps, p: Pairs, attached: list[tuple[int, int]],
                        marked_a: list[int]) -> tuple[OpsAt, Build]:
    """The ops that are not equal when B's order would break: sorted to respect both
    runs' happens-before (built at once)."""
    oa, ob = _both_orders(a, b, p, *merge(len(a.seq), p.mate_a, attached))
    want = set(marked_a)
    ops_at: OpsAt = {}
    for k in range(len(oa)):
        i = oa[k]
        if i < 0 or i in want:
            ops_at[k] = (i, ob[k])

    def build() -> tuple[array, array]:
        return oa, ob
    return ops_at, build


def _anchors(a: Steps, b: Steps, table: StepTable, p: Pairs, alone: list[int]
             ) -> dict[int, int]:
    """For each step only B has, the step of A it is printed after (-1: first): the
    latest of where what it follows in B is printed: the step before it in its chain,
    the request it answers, and for an agent's frame the client step its turn began
    after (for a client's step, the last answer of the agent before it)."""
    if not alone:
        return {}
    mate_b = p.mate_b
    meta, sb = table.meta, b.seq
    chain_of: dict[int, int] = {}
    rest = set(alone)
    for c, pos in enumerate(b.chain_pos):
        for j in pos if len(pos) < 4 * len(rest) else ():
            if j in rest:
                chain_of[j] = c
        if len(pos) >= 4 * len(rest):
            for j in rest:
                k = bisect_left(pos, j)
                if k < len(pos) and pos[k] == j:
                    chain_of[j] = c
    clients: dict[str | None, list[int]] = {}
    answers: dict[str | None, list[int]] = {}

    def client_steps(sid: str | None) -> list[int]:
        got = clients.get(sid)
        if got is None:
            got = clients[sid] = client_positions(b, table, sid)
        return got

    def agent_answers(sid: str | None) -> list[int]:
        got = answers.get(sid)
        if got is None:
            got = []
            for c, (d, s) in enumerate(b.chains):
                if d == "a2c" and s == sid:
                    got = [j for j in b.chain_pos[c] if meta[sb[j]][1] in REPLIES]
            answers[sid] = got
        return got

    anchor: dict[int, int] = {}

    def where(x: int) -> int:
        i = mate_b[x]
        return i if i >= 0 else anchor.get(x, -1)

    for j in alone:
        cj = chain_of.get(j)
        best = -1
        if cj is not None:
            pos = b.chain_pos[cj]
            k = bisect_left(pos, j)
            if k > 0:
                best = max(best, where(pos[k - 1]))
            d, sid = b.chains[cj]
            kind = meta[sb[j]][1]
            if d == "a2c":
                cs = client_steps(sid)
                k = bisect_left(cs, j)
                if k > 0:
                    best = max(best, where(cs[k - 1]))
            elif kind not in REPLIES:
                ans = agent_answers(sid)
                k = bisect_left(ans, j)
                if k > 0:
                    best = max(best, where(ans[k - 1]))
        q = b.replies.get(j)
        if q is not None:
            best = max(best, where(q))
        anchor[j] = best
    return anchor


def _in_b_order(b: Steps, table: StepTable, p: Pairs, anchors: dict[int, int]) -> bool:
    """Whether B's steps (but the floating ones, which follow nothing) are printed in
    B's own order: then every order B's happens-before fixes is kept."""
    m = len(b.seq)
    if m < 2:
        return True
    at = array("d", p.mate_b)  # where each is printed: its A step's place (in C)
    for j, x in anchors.items():
        at[j] = x + 0.5  # after A step x, before the next
    floating = table.floating
    if floating:
        keep = map(operator.not_, map(floating.__contains__, b.seq))
        at = array("d", compress(at, keep))
    return all(map(operator.le, at, islice(at, 1, None)))


def _both_orders(a: Steps, b: Steps, p: Pairs, oa: array, ob: array
                 ) -> tuple[array, array]:
    """The ops sorted to respect both runs' happens-before, A's order kept where they
    allow (a stable topological sort; where the runs contradict each other, B's order
    gives way)."""
    order = _stable_sort(_op_preds(a, b, oa, ob))
    return array("l", [oa[k] for k in order]), array("l", [ob[k] for k in order])


def _op_preds(a: Steps, b: Steps, oa: array, ob: array) -> list[set[int]]:
    """Each op's predecessors among the ops: its steps' in either run's happens-before."""
    pred_a = happens_before(a)
    pred_b = happens_before(b)
    total = len(oa)
    op_of_a = {i: k for k, i in enumerate(oa) if i >= 0}
    op_of_b = {j: k for k, j in enumerate(ob) if j >= 0}
    preds: list[set[int]] = [set() for _ in range(total)]
    for k in range(total):
        i, j = oa[k], ob[k]
        if i >= 0:
            preds[k].update(op_of_a[x] for x in pred_a[i] if x in op_of_a)
        if j >= 0:
            preds[k].update(op_of_b[y] for y in pred_b[j] if y in op_of_b)
        preds[k].discard(k)
    return preds


def _stable_sort(preds: list[set[int]]) -> list[int]:
    """The ops (0..len-1) in an order that puts each after its predecessors, the lowest
    ready op first; where the predecessors form a cycle, the first op not placed."""
    total = len(preds)
    succ: list[list[int]] = [[] for _ in range(total)]
    waiting = [0] * total
    for k, ps in enumerate(preds):
        waiting[k] = len(ps)
        for q in ps:
            succ[q].append(k)
    ready = [k for k in range(total) if waiting[k] == 0]
    heapq.heapify(ready)
    done = [False] * total
    order: list[int] = []
    left = list(range(total))  # for a contradiction: the first op not placed
    cursor = 0
    while len(order) < total:
        if ready:
            k = heapq.heappop(ready)
            if done[k]:
                continue
        else:  # the runs contradict each other: A's order first
            while done[left[cursor]]:
                cursor += 1
            k = left[cursor]
        done[k] = True
        order.append(k)
        for s in succ[k]:
            waiting[s] -= 1
            if waiting[s] == 0 and not done[s]:
                heapq.heappush(ready, s)
    return order

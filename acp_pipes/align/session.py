"""Two runs of a session compared by the model of the same session: acp-align's default
for traces (:mod:`acp_pipes.sameness`, docs/sameness.md; what acp-align takes from it:
:mod:`acp_pipes.align.model`).

What the model says, and how an alignment keeps it:

1. **Order the protocol fixes, and no other.** Each chain (one direction of one session)
   of A is aligned with its chain of B by an exact LCS (:mod:`acp_pipes.align.myers`),
   as ``--strict`` does, but without the floating notifications, which have no place in
   a turn's order (3. below).
2. **Volatile values are no difference.** A step is first the frame as written (its own
   hash: two runs of one script share most frames byte for byte, and those cost one
   dict lookup each); where the chains part, each step of the gap is compared as the
   model sees it (:class:`~acp_pipes.align.model.Volatile`: identifiers masked, clocks,
   the agents' presets and scrubbers, ``--ignore``) and the gap aligned again on that.
   The identifiers of the equal steps must pair one to one (the renaming, checked in
   A's order: a step that breaks it is changed, of kind ``renaming``).
3. **Floating notifications float.** Each is matched with one of its kind of the other
   run within a window of client steps (the model's, mapped through the aligned client
   steps; a request counted where the agent answered it, so a client that wrote ahead
   moves no window): the same frame first, then the same under the view, then any of its kind (a
   *changed* step: a title that changed is a changed session). One left over is a note
   (``floating_missing``, ``floating_extra``), not a difference.
4. **A reply pairs with a reply only when their requests pair**, so an answer is never
   shown beside another request's.
5. **What else one run lacks** is a difference (``missing``, ``extra``, ``client``, or
   ``order`` when the other run has the same step elsewhere in the chain), unless the
   model tolerates it: a frame a preset says the agent sends only sometimes, or learned
   noise (:class:`~acp_pipes.align.model.Learned`): a note.
6. **The printed order respects both runs' happens-before.** Ops are listed in A's
   order, each step only B has placed after what it follows in B (the step before it in
   its chain, the request it answers, the client step or answer its turn began after).
   When B's own order is still broken somewhere (two runs that interleaved their
   directions otherwise), both runs' happens-before is built
   (:func:`~acp_pipes.align.model.happens_before`) and the ops sorted to respect both,
   A's order kept where they allow.

The changed steps of a gap are paired by kind as ``--strict`` pairs them
(:mod:`acp_pipes.align.compare`).
"""

from __future__ import annotations

import heapq
import operator
from array import array
from bisect import bisect_left
from collections.abc import Callable
from itertools import compress, islice, repeat
from typing import Any

from acp_pipes.align.compare import (
    PAIR_COST,
    PAIR_LIMIT,
    Comparison,
    _merge,
    _pair_chains,
)
from acp_pipes.align.model import WINDOW, _model_of, happens_before, kind_of
from acp_pipes.align.myers import align, opcodes
from acp_pipes.align.steps import Steps
from acp_pipes.align.table import FLOATS, REPLIES, StepTable
from acp_pipes.sameness.floating import FLOATING

__all__ = ["compare_model"]

_NONE = array("L")
#: The edit script a subproblem is first searched for as it is (two runs of one script
#: part in few places): :func:`acp_pipes.align.myers.align`'s ``try_first``
TRY_FIRST = 256


class _Pairs:
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


def compare_model(a: Steps, b: Steps, table: StepTable, max_cost: int | None = None,
                  learned: Any = None) -> Comparison:
    """Compare two traces by the model (see the module)."""
    vol = _model_of(a)
    b.model = vol  # one model for both runs: A's (load_steps was given one, or made it)
    vol.decide([a.agent, b.agent])
    vol.classify(table)
    floating = table.floating
    n, m = len(a.seq), len(b.seq)
    sa, sb = a.seq, b.seq
    p = _Pairs(n, m)
    approximate = False
    chains = _pair_chains(a, b, named=True)
    # (a preset may make more kinds float than the reading set apart: those are split off)
    more = bool(vol.rules.floating - FLOATING.keys())
    # 1. each chain's ordinary steps: the LCS of the frames as written; what is left
    # between its blocks are the chain's gaps
    gaps: list[tuple[list[int], list[int], int]] = []  # (A's steps, B's, chain pair)
    floats: dict[tuple[Any, Any], tuple[list[int], list[int]]] = {}
    ma: dict[int, int] = {}
    mb: dict[int, int] = {}
    for c, (pa, pb, name_a, name_b) in enumerate(chains):
        sessions = (name_a and name_a[1], name_b and name_b[1])
        if (name_a or name_b)[0] == FLOATS:
            got = floats.setdefault(sessions, ([], []))
            got[0].extend(pa or ())
            got[1].extend(pb or ())
            continue
        oa: Any
        ob: Any
        if more:
            oa, fa = _split(pa, sa, floating)
            ob, fb = _split(pb, sb, floating)
            if fa or fb:
                got = floats.setdefault(sessions, ([], []))
                got[0].extend(fa)
                got[1].extend(fb)
        else:
            oa = pa if pa is not None else _NONE
            ob = pb if pb is not None else _NONE
        if not len(oa) or not len(ob):
            if len(oa) or len(ob):
                gaps.append((list(oa), list(ob), c))
            continue
        al = align(list(map(sa.__getitem__, oa)), list(map(sb.__getitem__, ob)), max_cost,
                   TRY_FIRST)
        approximate |= al.approximate
        i = j = 0
        for a0, b0, size in (*al.blocks, (len(oa), len(ob), 0)):
            if i < a0 or j < b0:
                gaps.append((list(oa[i:a0]), list(ob[j:b0]), c))
            if size:  # the pairs in bulk, in C (a dict each way, made arrays below)
                xs, ys = oa[a0:a0 + size], ob[b0:b0 + size]
                ma.update(zip(xs, ys, strict=True))
                mb.update(zip(ys, xs, strict=True))
            p.equal += size
            i, j = a0 + size, b0 + size
    if ma:
        p.mate_a = array("l", map(ma.get, range(n), repeat(-1, n)))
        p.mate_b = array("l", map(mb.get, range(m), repeat(-1, m)))
    # 2. the gaps again, each step as the model sees it
    both = [(xa, xb) for xa, xb, _ in gaps if xa and xb]
    if both:
        _by_view(a, b, table, both, p)
    # 3. floating notifications, in their windows
    for (sid_a, sid_b), (fa, fb) in floats.items():
        fa.sort()
        fb.sort()
        if fa and fb:
            _floats(a, b, table, fa, fb, p, sid_a, sid_b)
        else:
            for i in fa:
                p.floated(0, i, floating[sa[i]])
            for j in fb:
                p.floated(1, j, floating[sb[j]])
    # 2b. the renaming of minted identifiers, over every equal pair
    renamed = _renaming(a, b, table, p)
    # 5. changed steps in what is left of the gaps
    _look_up_kinds(a, b, table, gaps, p)
    for xa, xb, _ in gaps:
        if xa and xb:
            _changed(sa, sb, table, xa, xb, p)
    # 4. replies pair only when their requests do; then what one run lacks
    _replies(a, b, p)
    _one_sided(a, b, table, gaps, p)
    _unannounced(a, b, table, gaps, chains, p)
    if learned is not None:
        _tolerated(a, b, table, p, learned)
    # 6. the printed order
    cmp = _ops(a, b, table, p, approximate)
    cmp.renamed = renamed
    cmp.rules = vol.summary()
    if learned is not None:
        cmp.learned = learned.summary()
    return cmp


def _split(pos: Any, seq: list[int], floating: dict[int, str]) -> tuple[list[int], list[int]]:
    """A chain's positions: the ordinary steps, and the floating ones."""
    if pos is None:
        return [], []
    if not floating:
        return list(pos), []
    flags = list(map(floating.__contains__, map(seq.__getitem__, pos)))
    if not any(flags):
        return list(pos), []
    return (list(compress(pos, map(operator.not_, flags))), list(compress(pos, flags)))


def _left(xa: list[int], xb: list[int], p: _Pairs):
    """Within a gap, the runs of steps between its pairs where both runs have steps:
    ``(steps of A, steps of B)``."""
    mate_a, mate_b = p.mate_a, p.mate_b
    i = j = 0
    while i < len(xa) or j < len(xb):
        i0, j0 = i, j
        while i < len(xa) and mate_a[xa[i]] < 0:
            i += 1
        while j < len(xb) and mate_b[xb[j]] < 0:
            j += 1
        if i > i0 and j > j0:
            yield xa[i0:i], xb[j0:j]
        i += 1
        j += 1


def _by_view(a: Steps, b: Steps, table: StepTable, gaps: list, p: _Pairs) -> None:
    """Align each gap again, each step compared as the model sees it (masked)."""
    want_a = [i for xa, _ in gaps for i in xa]
    want_b = [j for _, xb in gaps for j in xb]
    a.keys(want_a, table)
    b.keys(want_b, table)
    masked = table.masked
    ids: dict[Any, int] = {}

    def key(step: int) -> int:
        h = masked[step][0]
        k = h if h is not None else ("own", step)
        got = ids.get(k)
        if got is None:
            got = ids[k] = len(ids)
        return got

    sa, sb = a.seq, b.seq
    for xa, xb in gaps:
        al = align([key(sa[i]) for i in xa], [key(sb[j]) for j in xb])
        for a0, b0, size in al.blocks:
            for x, y in zip(xa[a0:a0 + size], xb[b0:b0 + size], strict=True):
                p.pair(x, y)
                p.viewed.append(x)


def _coords(steps: Steps, table: StepTable, session: str | None) -> list[int]:
    """The client steps (requests and notifications the client started) of a session,
    by position."""
    for c, (d, sid) in enumerate(steps.chains):
        if d == "c2a" and sid == session:
            pos = steps.chain_pos[c]
            kinds = map(_KIND, map(table.meta.__getitem__, map(steps.seq.__getitem__, pos)))
            return list(compress(pos, map(operator.not_, map(REPLIES.__contains__, kinds))))
    return []


def _answered(steps: Steps, client: list[int]) -> list[tuple[int, int]]:
    """A session's client steps in the agent's time, each ``(where, step)`` sorted by
    where: a request where the agent answered it; a request never answered and a
    notification where it was logged. How far ahead of the agent a client wrote (a
    script piped in whole) is then no position of the agent's notifications."""
    answer = {q: i for i, q in steps.replies.items()}
    return sorted((answer.get(x, x), x) for x in client)


_KIND = operator.itemgetter(1)


def _floats(a: Steps, b: Steps, table: StepTable, fa: list[int], fb: list[int],
            p: _Pairs, sid_a: str | None, sid_b: str | None) -> None:
    """Match one chain pair's floating notifications within their windows (see the
    module): the same frame, then the same as the model sees it, then one of its kind
    (changed). Where each run was is counted in A's client steps: B's client steps
    through their pairs."""
    ca = _answered(a, _coords(a, table, sid_a))
    cb = _answered(b, _coords(b, table, sid_b))
    # B's client steps, counted as A's: the A ordinal after the last paired one
    rank_a = {x: k for k, (_, x) in enumerate(ca)}
    mapped = array("l", [0]) * (len(cb) + 1)
    last = 0
    for k, (_, y) in enumerate(cb):
        x = p.mate_b[y]
        if x >= 0 and x in rank_a:
            last = max(last, rank_a[x] + 1)
        mapped[k + 1] = last
    at_a = [w for w, _ in ca]
    at_b = [w for w, _ in cb]
    where_a = [bisect_left(at_a, i) for i in fa]
    where_b = [mapped[bisect_left(at_b, j)] for j in fb]
    sa, sb = a.seq, b.seq
    floating = table.floating
    # the same frames in the same order first (most of them, in two runs of a script),
    # each pair kept when it is within its window
    mate_a, mate_b = p.mate_a, p.mate_b
    al = align(list(map(sa.__getitem__, fa)), list(map(sb.__getitem__, fb)),
               try_first=TRY_FIRST)
    for a0, b0, size in al.blocks:
        for k, t in zip(range(a0, a0 + size), range(b0, b0 + size), strict=True):
            if -WINDOW <= where_a[k] - where_b[t] <= WINDOW:
                mate_a[fa[k]] = fb[t]
                mate_b[fb[t]] = fa[k]
                p.equal += 1
    left_a = [k for k in range(len(fa)) if mate_a[fa[k]] < 0]
    left_b = [k for k in range(len(fb)) if mate_b[fb[k]] < 0]

    def match(key_a: Callable[[int], Any], key_b: Callable[[int], Any], kind: str | None
              ) -> None:
        nonlocal left_a, left_b
        by: dict[Any, list[int]] = {}
        for k in left_b:
            by.setdefault(key_b(k), []).append(k)
        start: dict[Any, int] = {}
        used_b: set[int] = set()
        keep_a: list[int] = []
        for k in left_a:
            key = key_a(k)
            cands = by.get(key)
            if not cands:
                keep_a.append(k)
                continue
            w = where_a[k]
            s = start.get(key, 0)
            while s < len(cands) and (cands[s] in used_b or where_b[cands[s]] < w - WINDOW):
                s += 1
            start[key] = s
            got = None
            for t in range(s, len(cands)):
                c = cands[t]
                if where_b[c] > w + WINDOW:
                    break
                if c not in used_b:
                    got = c
                    break
            if got is None:
                keep_a.append(k)
                continue
            used_b.add(got)
            p.pair(fa[k], fb[got], kind)
            if kind is None and sa[fa[k]] != sb[fb[got]]:
                p.viewed.append(fa[k])
        left_a = keep_a
        left_b = [k for k in left_b if k not in used_b]

    if left_a and left_b:
        match(lambda k: sa[fa[k]], lambda k: sb[fb[k]], None)
    if left_a and left_b:
        a.keys([fa[k] for k in left_a], table)
        b.keys([fb[k] for k in left_b], table)
        masked = table.masked

        def view_a(k: int) -> Any:
            h = masked[sa[fa[k]]][0]
            return h if h is not None else ("own", sa[fa[k]])

        def view_b(k: int) -> Any:
            h = masked[sb[fb[k]]][0]
            return h if h is not None else ("own", sb[fb[k]])

        match(view_a, view_b, None)
    if left_a and left_b:
        match(lambda k: floating[sa[fa[k]]], lambda k: floating[sb[fb[k]]], "content")
    for k in left_a:
        p.floated(0, fa[k], floating[sa[fa[k]]])
    for k in left_b:
        p.floated(1, fb[k], floating[sb[fb[k]]])


def _renaming(a: Steps, b: Steps, table: StepTable, p: _Pairs) -> dict[str, dict[Any, Any]]:
    """The renaming of minted identifiers over the equal pairs, in A's order: the first
    pairing of a value holds; an equal pair that pairs one otherwise breaks it (it
    becomes changed, of kind ``renaming``). Pairs of one frame text pair each of its
    identifiers with itself: when every pair that is not one text pairs identical
    values too, nothing can break and nothing is read."""
    sa, sb = a.seq, b.seq
    mate_a = p.mate_a
    masked = table.masked
    # the pairs that are not one text (the view made them equal)
    other = [(i, mate_a[i]) for i in p.viewed if mate_a[i] >= 0 and i not in p.changed]
    if not other:
        return {}
    if all(masked[sa[i]][1] == masked[sb[j]][1] for i, j in other):
        return {}
    equal = list(_equal_steps(p, a))
    a.keys(equal, table)
    b.keys([mate_a[i] for i in equal], table)
    fwd: dict[tuple[str, Any], Any] = {}
    back: dict[tuple[str, Any], Any] = {}
    ok: set[tuple[int, int]] = set()
    broken: list[int] = []
    for i in equal:
        j = mate_a[i]
        pair = (sa[i], sb[j])
        if pair in ok:
            continue
        ta, tb = masked[pair[0]][1], masked[pair[1]][1]
        if not ta and not tb:
            ok.add(pair)
            continue
        if len(ta) != len(tb):
            broken.append(i)
            continue
        new: list[tuple[tuple[str, Any], tuple[str, Any]]] = []
        good = True
        for (kx, x), (ky, y) in zip(ta, tb, strict=True):
            xk, yk = (kx, _typed(x)), (ky, _typed(y))
            fx, by = fwd.get(xk), back.get(yk)
            if fx is None and by is None and kx == ky:
                new.append((xk, yk))
                fwd[xk], back[yk] = yk, xk
            elif fx != yk or by != xk:
                good = False
                break
        if good:
            ok.add(pair)
        else:
            for xk, yk in new:
                del fwd[xk], back[yk]
            broken.append(i)
    for i in broken:
        j = mate_a[i]
        p.unpair(i)
        p.pair(i, j, "renaming")
    renamed: dict[str, dict[Any, Any]] = {}
    for (kind, (_, x)), (_, (_, y)) in fwd.items():
        renamed.setdefault(kind, {})[x] = y
        p.back[(kind, _typed(y))] = x
    return renamed


def _typed(value: Any) -> tuple[str, Any]:
    """An identifier as a key: ``1`` and ``"1"`` are two."""
    return (value.__class__.__name__, value)


def _equal_steps(p: _Pairs, a: Steps):
    """The steps of A paired equal, in A's order."""
    changed = p.changed
    return (i for i in compress(range(len(a.seq)), map(operator.ge, p.mate_a, repeat(0)))
            if i not in changed)


def _replies(a: Steps, b: Steps, p: _Pairs) -> None:
    """Unpair replies whose requests are not paired with each other (4. of the
    module)."""
    mate_a, mate_b = p.mate_a, p.mate_b
    for i, q in a.replies.items():
        j = mate_a[i]
        if j >= 0 and (b.replies.get(j, -2) != mate_a[q] or mate_a[q] < 0):
            p.unpair(i)
    for j, q in b.replies.items():
        i = mate_b[j]
        if i >= 0 and a.replies.get(i, -2) != mate_b[q]:
            p.unpair(i)


def _look_up_kinds(a: Steps, b: Steps, table: StepTable, gaps: list, p: _Pairs) -> None:
    """The update kind of each ``session/update`` left unpaired that the reading did not
    learn (a frame whose text names it otherwise), read back: steps pair by kind."""
    needs = table.needs_update
    for steps, mate, side in ((a, p.mate_a, 0), (b, p.mate_b, 1)):
        seq = steps.seq
        want = [x for gap in gaps for x in gap[side] if mate[x] < 0 and needs(seq[x])]
        for i, kind in steps.update_kinds(want):
            table.updates[seq[i]] = kind


def _changed(sa: list[int], sb: list[int], table: StepTable, xa: list[int],
             xb: list[int], p: _Pairs) -> None:
    """In a gap, the steps of one kind paired as changed (as ``--strict`` pairs them: a
    second LCS over the kinds)."""
    coarse = table.coarse
    mate_a = p.mate_a
    for ya, yb in list(_left(xa, xb, p)):
        if len(ya) + len(yb) > PAIR_LIMIT:
            continue
        ca = [coarse(sa[x]) for x in ya]
        cb = [coarse(sb[y]) for y in yb]
        for tag, p0, p1, q0, q1 in opcodes(align(ca, cb, PAIR_COST)):
            if tag == "equal":
                for x, y in zip(ya[p0:p1], yb[q0:q1], strict=True):
                    if mate_a[x] < 0:
                        p.pair(x, y, "changed")


def _one_sided(a: Steps, b: Steps, table: StepTable, gaps: list, p: _Pairs) -> None:
    """What one run lacks: a note when the model tolerates it (a preset's ``optional``),
    else a difference, of kind ``order`` when the other run has the same step elsewhere
    in the chain."""
    vol = _model_of(a)
    sa, sb = a.seq, b.seq
    meta = table.meta
    by_chain: dict[int, tuple[list[int], list[int]]] = {}
    for xa, xb, c in gaps:
        only_a = [i for i in xa if p.mate_a[i] < 0]
        only_b = [j for j in xb if p.mate_b[j] < 0]
        for seq, only, note, why in ((sa, only_a, p.note_a, "optional_missing"),
                                     (sb, only_b, p.note_b, "optional_extra")):
            for x in only:
                said = vol.optional(table, seq[x]) if meta[seq[x]][0] == "a2c" else None
                if said:
                    note[x] = why
                    p.why[(0 if note is p.note_a else 1, x)] = said
        got = by_chain.setdefault(c, ([], []))
        got[0].extend(i for i in only_a if i not in p.note_a)
        got[1].extend(j for j in only_b if j not in p.note_b)
    for only_a, only_b in by_chain.values():
        steps_b = {sb[j] for j in only_b}
        steps_a = {sa[i] for i in only_a}
        p.order_a.update(i for i in only_a if sa[i] in steps_b)
        p.order_b.update(j for j in only_b if sb[j] in steps_a)


#: How far after a tool call's creation its updates are looked for (:func:`_unannounced`).
UPDATES_AFTER = 32
UNANNOUNCED = ("a tool call the other run made without announcing it (its updates are in "
               "both runs): an agent that sends its tool_call only sometimes (codex-acp's "
               "exec calls)")


def _unannounced(a: Steps, b: Steps, table: StepTable, gaps: list, chains: list,
                 p: _Pairs) -> None:
    """Mark a ``tool_call`` only one run has whose tool call both runs made: a later
    update of the same call, in its chain, is paired with the other run's. Still a
    difference (a missing announcement may be real), marked so a reader knows it is the
    one some agents leave out now and then."""
    updates = table.updates
    for side, (steps, seq, mate, marks) in enumerate(
            ((a, a.seq, p.mate_a, p.marks_a), (b, b.seq, p.mate_b, p.marks_b))):
        notes = p.note_a if side == 0 else p.note_b
        for gap in gaps:
            for x in gap[side]:
                if mate[x] >= 0 or x in notes or updates.get(seq[x]) != "tool_call":
                    continue
                pos = chains[gap[2]][side]
                k = bisect_left(pos, x)
                after = [y for y in pos[k + 1:k + 1 + UPDATES_AFTER]
                         if mate[y] >= 0 and updates.get(seq[y]) == "tool_call_update"]
                if not after:
                    continue
                ids = {i: _tool_call_id(v) for i, v in steps.values([x, *after])}
                mine = ids.get(x)
                if mine is not None and any(ids.get(y) == mine for y in after):
                    marks[x] = UNANNOUNCED


def _tool_call_id(value: Any) -> Any:
    try:
        return value["params"]["update"]["toolCallId"]
    except (KeyError, TypeError):
        return None


def _tolerated(a: Steps, b: Steps, table: StepTable, p: _Pairs, learned: Any) -> None:
    """Learned noise (:class:`~acp_pipes.align.model.Learned`): a changed pair that
    differs only as another recording of A's script differed there is equal; a step of
    A another recording lacks, or one of B another recording has, is a note."""
    from acp_pipes.sameness.jsondiff import pointer_diff

    noise = learned.noise
    seq_of = _seqs(a, [i for i in p.changed] + [i for i in range(len(a.seq))
                                               if p.mate_a[i] < 0 and i not in p.note_a])
    index = learned.index_of_seq
    changed = {i: k for i, k in p.changed.items() if k != "renaming"}
    if changed:
        names = _names_b(p.back)
        va = dict(a.values(changed))
        vb = dict(b.values([p.mate_a[i] for i in changed], names))
        for i in changed:
            k = index.get(seq_of.get(i))
            if k is None or k not in noise.frames:
                continue
            r, x = noise.apply(k, va.get(i), vb.get(p.mate_a[i]))
            if not pointer_diff(r, x, limit=1):
                j = p.mate_a[i]
                p.unpair(i)
                p.pair(i, j)
    for i in range(len(a.seq)):
        if p.mate_a[i] >= 0 or i in p.note_a:
            continue
        k = index.get(seq_of.get(i))
        if k is not None and k in noise.optional:
            p.note_a[i] = "optional_missing"
            p.why[(0, i)] = f"learned: {noise.optional[k]}"
            p.order_a.discard(i)
    if noise.extras:
        from acp_pipes.sameness.events import describe

        only_b = [j for j in range(len(b.seq)) if p.mate_b[j] < 0 and j not in p.note_b]
        view = a.model.view if a.model is not None else None
        for got, raw in b.read(only_b):
            from acp_pipes.align.model import _frame_of

            d, frame = _frame_of(raw, b)
            if d is None:
                continue
            ev = describe(got[0], d, frame)
            said = noise.extra(ev, view)
            if said:
                for j in got:
                    p.note_b[j] = "optional_extra"
                    p.why[(1, j)] = f"learned: {said}"
                    p.order_b.discard(j)
    del table


def _names_b(back: dict) -> Callable[[str, Any], Any]:
    def name(kind: str, value: Any) -> Any:
        return back.get((kind, _typed(value)), value)
    return name


def _seqs(steps: Steps, indices: list[int]) -> dict[int, Any]:
    """The ``seq`` of each wanted step's record (what learned noise is indexed by)."""
    import orjson

    out: dict[int, Any] = {}
    for got, raw in steps.read(indices):
        try:
            rec = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(rec, dict):
            for i in got:
                out[i] = rec.get("seq")
    return out


# -- the printed order -------------------------------------------------------------------


def _ops(a: Steps, b: Steps, table: StepTable, p: _Pairs, approximate: bool) -> Comparison:
    """The ops in the order every format prints them (6. of the module), as a
    :class:`~acp_pipes.align.compare.Comparison`."""
    n, m = len(a.seq), len(b.seq)
    mate_a, mate_b = p.mate_a, p.mate_b
    alone = list(compress(range(m), map(operator.lt, mate_b, repeat(0))))
    anchors = _anchors(a, b, table, p, alone)
    attached = sorted(zip([anchors[j] for j in alone], alone, strict=True))
    marked_a = sorted({*p.changed, *p.note_a,
                       *compress(range(n), map(operator.lt, mate_a, repeat(0)))})
    ops_at: dict[int, tuple[int, int]] = {}
    if _in_b_order(b, table, p, anchors):
        at = [x for x, _ in attached]
        for i in marked_a:
            ops_at[i + bisect_left(at, i)] = (i, mate_a[i])
        for r, (x, j) in enumerate(attached):
            ops_at[x + 1 + r] = (-1, j)
        built: list[tuple[array, array]] = []

        def build() -> tuple[array, array]:
            if not built:
                built.append(_merge(n, mate_a, attached))
            return built[0]
    else:
        oa, ob = _both_orders(a, b, p, *_merge(n, mate_a, attached))
        want = set(marked_a)
        for k in range(len(oa)):
            i = oa[k]
            if i < 0 or i in want:
                ops_at[k] = (i, ob[k])

        def build() -> tuple[array, array]:
            return oa, ob
    notes: dict[int, str] = {}
    kinds: dict[int, str] = {}
    marks: dict[int, str] = {}
    sa, sb = a.seq, b.seq
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
        elif i >= 0 and j >= 0:
            why = p.changed[i]
            kinds[k] = "renaming" if why == "renaming" else kind_of(table, sa[i], "")
        elif j < 0:
            kinds[k] = "order" if i in p.order_a else kind_of(table, sa[i], "a")
        else:
            kinds[k] = "order" if j in p.order_b else kind_of(table, sb[j], "b")
    differing = sorted(k for k in ops_at if k not in notes)
    cmp = Comparison(a, b, table, n + len(attached), p.equal, len(p.changed), approximate,
                     differing, ops_at, build, notes)
    cmp.kinds = kinds
    cmp.marks = marks
    cmp.whys = whys
    if p.back:
        cmp.name_b = _names_b(p.back)
    return cmp


def _anchors(a: Steps, b: Steps, table: StepTable, p: _Pairs, alone: list[int]
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
            got = clients[sid] = _coords(b, table, sid)
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


def _in_b_order(b: Steps, table: StepTable, p: _Pairs, anchors: dict[int, int]) -> bool:
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


def _both_orders(a: Steps, b: Steps, p: _Pairs, oa: array, ob: array
                 ) -> tuple[array, array]:
    """The ops sorted to respect both runs' happens-before, A's order kept where they
    allow (a stable topological sort; where the runs contradict each other, B's order
    gives way)."""
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
    return array("l", [oa[k] for k in order]), array("l", [ob[k] for k in order])

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
   model sees it (:class:`~acp_pipes.align.volatile.Volatile`: identifiers masked, clocks,
   the agents' presets and scrubbers, ``--ignore``) and the gap aligned again on that.
   The identifiers of the equal steps must pair one to one (the renaming, checked in
   A's order: a step that breaks it is changed, of kind ``renaming``).
3. **Floating notifications float.** Each is matched with one of its kind of the other
   run within a window of client steps (the model's, mapped through the aligned client
   steps; a request counted where the agent answered it, so a client that wrote ahead
   moves no window): the same frame first, then the same under the view, then any of its
   kind (a *changed* step: a title that changed is a changed session). One left over is a note
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

import operator
from array import array
from bisect import bisect_left
from itertools import compress, repeat
from typing import Any

from acp_pipes.align.comparison import PAIR_COST, PAIR_LIMIT, Comparison, pair_chains
from acp_pipes.align.floats import match_floats
from acp_pipes.align.model import frame_of, model_of
from acp_pipes.align.myers import TRY_FIRST, align, opcodes
from acp_pipes.align.order import in_printed_order
from acp_pipes.align.pairs import Pairs, names_b, typed
from acp_pipes.align.steps import Steps
from acp_pipes.align.table import FLOATS, StepTable
from acp_pipes.sameness.floating import FLOATING

__all__ = ["compare_model"]

_NONE = array("L")


#: A chain's gap: ``(A's steps, B's steps, index of the chain pair)``.
Gap = tuple[list[int], list[int], int]
#: The floating notifications of a pair of sessions ``(A's, B's)``: A's steps, B's.
Floats = dict[tuple[Any, Any], tuple[list[int], list[int]]]


def compare_model(a: Steps, b: Steps, table: StepTable, max_cost: int | None = None,
                  learned: Any = None) -> Comparison:
    """Compare two traces by the model (see the module)."""
    vol = model_of(a)
    b.model = vol  # one model for both runs: A's (load_steps was given one, or made it)
    vol.decide([a.agent, b.agent])
    vol.classify(table)
    sa, sb = a.seq, b.seq
    p = Pairs(len(sa), len(sb))
    chains = pair_chains(a, b, named=True)
    # 1. each chain's ordinary steps: the LCS of the frames as written; what is left
    # between its blocks are the chain's gaps
    gaps, floats, approximate = _align_chains(a, b, table, chains, max_cost, p,
                                              bool(vol.rules.floating - FLOATING.keys()))
    # 2. the gaps again, each step as the model sees it
    both = [(xa, xb) for xa, xb, _ in gaps if xa and xb]
    if both:
        _by_view(a, b, table, both, p)
    # 3. floating notifications, in their windows
    _float(a, b, table, floats, p)
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
    cmp = in_printed_order(a, b, table, p, approximate)
    cmp.renamed = renamed
    cmp.rules = vol.summary()
    if learned is not None:
        cmp.learned = learned.summary()
    return cmp


def _align_chains(a: Steps, b: Steps, table: StepTable, chains: list[Any],
                  max_cost: int | None, p: Pairs, more: bool
                  ) -> tuple[list[Gap], Floats, bool]:
    """1. of the module: each chain pair's ordinary steps aligned by the frames as
    written, the pairs in ``p``; the gaps left, the floating steps set apart (``more``:
    a preset makes kinds float that the reading did not set apart), and whether any
    search was cut short."""
    n, m = len(a.seq), len(b.seq)
    sa, sb = a.seq, b.seq
    floating = table.floating
    approximate = False
    gaps: list[Gap] = []
    floats: Floats = {}
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
        p.equal += _blocks(oa, ob, al.blocks, c, gaps, ma, mb)
    if ma:
        p.mate_a = array("l", map(ma.get, range(n), repeat(-1, n)))
        p.mate_b = array("l", map(mb.get, range(m), repeat(-1, m)))
    return gaps, floats, approximate


def _blocks(oa: Any, ob: Any, blocks: list[tuple[int, int, int]], c: int, gaps: list[Gap],
            ma: dict[int, int], mb: dict[int, int]) -> int:
    """A chain's LCS blocks: the pairs into ``ma``/``mb`` in bulk (in C; made arrays
    once every chain is aligned), what is between them into ``gaps``; the pairs made."""
    equal = 0
    i = j = 0
    for a0, b0, size in (*blocks, (len(oa), len(ob), 0)):
        if i < a0 or j < b0:
            gaps.append((list(oa[i:a0]), list(ob[j:b0]), c))
        if size:
            xs, ys = oa[a0:a0 + size], ob[b0:b0 + size]
            ma.update(zip(xs, ys, strict=True))
            mb.update(zip(ys, xs, strict=True))
        equal += size
        i, j = a0 + size, b0 + size
    return equal


def _float(a: Steps, b: Steps, table: StepTable, floats: Floats, p: Pairs) -> None:
    """3. of the module: each pair of sessions' floating notifications matched in their
    windows; where one run has none, the other's are notes."""
    floating = table.floating
    sa, sb = a.seq, b.seq
    for (sid_a, sid_b), (fa, fb) in floats.items():
        fa.sort()
        fb.sort()
        if fa and fb:
            match_floats(a, b, table, fa, fb, p, sid_a, sid_b)
        else:
            for i in fa:
                p.floated(0, i, floating[sa[i]])
            for j in fb:
                p.floated(1, j, floating[sb[j]])


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


def _left(xa: list[int], xb: list[int], p: Pairs):
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


def _by_view(a: Steps, b: Steps, table: StepTable, gaps: list, p: Pairs) -> None:
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


def _renaming(a: Steps, b: Steps, table: StepTable, p: Pairs) -> dict[str, dict[Any, Any]]:
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
        if len(ta) == len(tb) and _rename(ta, tb, fwd, back):
            ok.add(pair)
        else:
            broken.append(i)
    for i in broken:
        j = mate_a[i]
        p.unpair(i)
        p.pair(i, j, "renaming")
    renamed: dict[str, dict[Any, Any]] = {}
    for (kind, (_, x)), (_, (_, y)) in fwd.items():
        renamed.setdefault(kind, {})[x] = y
        p.back[(kind, typed(y))] = x
    return renamed


def _rename(ta: Any, tb: Any, fwd: dict[tuple[str, Any], Any],
            back: dict[tuple[str, Any], Any]) -> bool:
    """Pair the identifiers of two equal steps (``(kind, value)`` each, as many on both
    sides) into the renaming ``fwd``/``back``: False, and the renaming as it was, when
    one of them is already paired otherwise or the kinds differ."""
    new: list[tuple[tuple[str, Any], tuple[str, Any]]] = []
    for (kx, x), (ky, y) in zip(ta, tb, strict=True):
        xk, yk = (kx, typed(x)), (ky, typed(y))
        fx, by = fwd.get(xk), back.get(yk)
        if fx is None and by is None and kx == ky:
            new.append((xk, yk))
            fwd[xk], back[yk] = yk, xk
        elif fx != yk or by != xk:
            for xk, yk in new:
                del fwd[xk], back[yk]
            return False
    return True


def _equal_steps(p: Pairs, a: Steps):
    """The steps of A paired equal, in A's order."""
    changed = p.changed
    return (i for i in compress(range(len(a.seq)), map(operator.ge, p.mate_a, repeat(0)))
            if i not in changed)


def _replies(a: Steps, b: Steps, p: Pairs) -> None:
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


def _look_up_kinds(a: Steps, b: Steps, table: StepTable, gaps: list, p: Pairs) -> None:
    """The update kind of each ``session/update`` left unpaired that the reading did not
    learn (a frame whose text names it otherwise), read back: steps pair by kind."""
    needs = table.needs_update
    for steps, mate, side in ((a, p.mate_a, 0), (b, p.mate_b, 1)):
        seq = steps.seq
        want = [x for gap in gaps for x in gap[side] if mate[x] < 0 and needs(seq[x])]
        for i, kind in steps.update_kinds(want):
            table.updates[seq[i]] = kind


def _changed(sa: list[int], sb: list[int], table: StepTable, xa: list[int],
             xb: list[int], p: Pairs) -> None:
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


def _one_sided(a: Steps, b: Steps, table: StepTable, gaps: list, p: Pairs) -> None:
    """What one run lacks: a note when the model tolerates it (a preset's ``optional``),
    else a difference, of kind ``order`` when the other run has the same step elsewhere
    in the chain."""
    vol = model_of(a)
    sa, sb = a.seq, b.seq
    by_chain: dict[int, tuple[list[int], list[int]]] = {}
    for xa, xb, c in gaps:
        only_a = [i for i in xa if p.mate_a[i] < 0]
        only_b = [j for j in xb if p.mate_b[j] < 0]
        _optional(vol, table, p, 0, sa, only_a)
        _optional(vol, table, p, 1, sb, only_b)
        got = by_chain.setdefault(c, ([], []))
        got[0].extend(i for i in only_a if i not in p.note_a)
        got[1].extend(j for j in only_b if j not in p.note_b)
    for only_a, only_b in by_chain.values():
        steps_b = {sb[j] for j in only_b}
        steps_a = {sa[i] for i in only_a}
        p.order_a.update(i for i in only_a if sa[i] in steps_b)
        p.order_b.update(j for j in only_b if sb[j] in steps_a)


def _optional(vol: Any, table: StepTable, p: Pairs, side: int, seq: list[int],
              only: list[int]) -> None:
    """Of the steps only run A (``side`` 0) or B has, those a preset says the agent
    sends only sometimes: notes, with why."""
    note, why = (p.note_a, "optional_missing") if side == 0 else (p.note_b, "optional_extra")
    meta = table.meta
    for x in only:
        said = vol.optional(table, seq[x]) if meta[seq[x]][0] == "a2c" else None
        if said:
            note[x] = why
            p.why[(side, x)] = said


#: How far after a tool call's creation its updates are looked for (:func:`_unannounced`).
UPDATES_AFTER = 32
UNANNOUNCED = ("a tool call the other run made without announcing it (its updates are in "
               "both runs): an agent that sends its tool_call only sometimes (codex-acp's "
               "exec calls)")


def _unannounced(a: Steps, b: Steps, table: StepTable, gaps: list, chains: list,
                 p: Pairs) -> None:
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


def _tolerated(a: Steps, b: Steps, table: StepTable, p: Pairs, learned: Any) -> None:
    """Learned noise (:class:`~acp_pipes.align.model.Learned`): a changed pair that
    differs only as another recording of A's script differed there is equal; a step of
    A another recording lacks, or one of B another recording has, is a note."""
    noise = learned.noise
    seq_of = _seqs(a, [i for i in p.changed] + [i for i in range(len(a.seq))
                                               if p.mate_a[i] < 0 and i not in p.note_a])
    index = learned.index_of_seq
    _learned_equal(a, b, p, noise, index, seq_of)
    for i in range(len(a.seq)):
        if p.mate_a[i] >= 0 or i in p.note_a:
            continue
        k = index.get(seq_of.get(i))
        if k is not None and k in noise.optional:
            p.note_a[i] = "optional_missing"
            p.why[(0, i)] = f"learned: {noise.optional[k]}"
            p.order_a.discard(i)
    if noise.extras:
        _learned_extras(a, b, p, noise)
    del table


def _learned_equal(a: Steps, b: Steps, p: Pairs, noise: Any, index: dict[Any, int],
                   seq_of: dict[int, Any]) -> None:
    """A changed pair (not of the renaming) whose values differ only as learned: equal."""
    from acp_pipes.sameness.jsondiff import pointer_diff

    changed = {i: k for i, k in p.changed.items() if k != "renaming"}
    if not changed:
        return
    names = names_b(p.back)
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


def _learned_extras(a: Steps, b: Steps, p: Pairs, noise: Any) -> None:
    """A step only B has that another recording of A's script has too: a note."""
    from acp_pipes.sameness.events import describe

    only_b = [j for j in range(len(b.seq)) if p.mate_b[j] < 0 and j not in p.note_b]
    view = a.model.view if a.model is not None else None
    for got, raw in b.read(only_b):
        d, frame = frame_of(raw, b)
        if d is None:
            continue
        ev = describe(got[0], d, frame)
        said = noise.extra(ev, view)
        if said:
            for j in got:
                p.note_b[j] = "optional_extra"
                p.why[(1, j)] = f"learned: {said}"
                p.order_b.discard(j)


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

"""Floating notifications matched within their windows (3. of
:mod:`acp_pipes.align.session`): a notification the protocol gives no place in a turn's
order is matched with one of its kind of the other run near where it was recorded,
counted in client steps.
"""

from __future__ import annotations

import operator
from array import array
from bisect import bisect_left
from collections.abc import Callable
from itertools import compress
from typing import Any

from acp_pipes.align.model import WINDOW
from acp_pipes.align.myers import TRY_FIRST, align
from acp_pipes.align.pairs import Pairs
from acp_pipes.align.steps import Steps
from acp_pipes.align.table import REPLIES, StepTable

__all__ = ["client_positions", "match_floats"]


def client_positions(steps: Steps, table: StepTable, session: str | None) -> list[int]:
    """The client steps (requests and notifications the client started) of a session,
    by position."""
    for c, (d, sid) in enumerate(steps.chains):
        if d == "c2a" and sid == session:
            pos = steps.chain_pos[c]
            kinds = map(_KIND, map(table.meta.__getitem__, map(steps.seq.__getitem__, pos)))
            return list(compress(pos, map(operator.not_, map(REPLIES.__contains__, kinds))))
    return []


_KIND = operator.itemgetter(1)


def match_floats(a: Steps, b: Steps, table: StepTable, fa: list[int], fb: list[int],
            p: Pairs, sid_a: str | None, sid_b: str | None) -> None:
    """Match one chain pair's floating notifications within their windows (see the
    module): the same frame, then the same as the model sees it, then one of its kind
    (changed). Where each run was is counted in A's client steps: B's client steps
    through their pairs."""
    ca = client_positions(a, table, sid_a)
    cb = client_positions(b, table, sid_b)
    # B's client steps, counted as A's: the A ordinal after the last paired one
    rank_a = {x: k for k, x in enumerate(ca)}
    mapped = array("l", [0]) * (len(cb) + 1)
    last = 0
    for k, y in enumerate(cb):
        x = p.mate_b[y]
        if x >= 0 and x in rank_a:
            last = max(last, rank_a[x] + 1)
        mapped[k + 1] = last
    where_a = [bisect_left(ca, i) for i in fa]
    where_b = [mapped[bisect_left(cb, j)] for j in fb]
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

"""Floating notifications matched within their windows (3. of
:mod:`acp_pipes.align.session`): a notification the protocol gives no place in a turn's
order is matched with one of its kind of the other run near where it was recorded,
counted in client steps, each request where the agent answered it.
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

__all__ = ["answered", "client_positions", "match_floats"]


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
    where_a, where_b = _where(a, b, table, fa, fb, p, sid_a, sid_b)
    sa, sb = a.seq, b.seq
    floating = table.floating
    m = _Matching(p, fa, fb, where_a, where_b, sa, sb)
    m.same_frames()
    if m.left_a and m.left_b:
        m.match(lambda k: sa[fa[k]], lambda k: sb[fb[k]], None)
    if m.left_a and m.left_b:
        a.keys([fa[k] for k in m.left_a], table)
        b.keys([fb[k] for k in m.left_b], table)
        masked = table.masked

        def view_a(k: int) -> Any:
            h = masked[sa[fa[k]]][0]
            return h if h is not None else ("own", sa[fa[k]])

        def view_b(k: int) -> Any:
            h = masked[sb[fb[k]]][0]
            return h if h is not None else ("own", sb[fb[k]])

        m.match(view_a, view_b, None)
    if m.left_a and m.left_b:
        m.match(lambda k: floating[sa[fa[k]]], lambda k: floating[sb[fb[k]]], "content")
    for k in m.left_a:
        p.floated(0, fa[k], floating[sa[fa[k]]])
    for k in m.left_b:
        p.floated(1, fb[k], floating[sb[fb[k]]])


def answered(steps: Steps, client: list[int]) -> list[tuple[int, int]]:
    """A session's client steps in the agent's time, each ``(where, step)`` sorted by
    where: a request where the agent answered it; a request never answered and a
    notification where it was logged. How far ahead of the agent a client wrote (a
    script piped in whole) is then no position of the agent's notifications."""
    answer = {q: i for i, q in steps.replies.items()}
    return sorted((answer.get(x, x), x) for x in client)


def _where(a: Steps, b: Steps, table: StepTable, fa: list[int], fb: list[int], p: Pairs,
           sid_a: str | None, sid_b: str | None) -> tuple[list[int], list[int]]:
    """Where each floating notification was, in A's client steps taken in the agent's
    time (:func:`answered`; B's client steps counted as A's: the A ordinal after the
    last paired one)."""
    ca = answered(a, client_positions(a, table, sid_a))
    cb = answered(b, client_positions(b, table, sid_b))
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
    return ([bisect_left(at_a, i) for i in fa], [mapped[bisect_left(at_b, j)] for j in fb])


class _Matching:
    """One chain pair's floating notifications being matched: ``left_a``, ``left_b``
    (indices into ``fa``, ``fb``) are those not matched yet."""

    def __init__(self, p: Pairs, fa: list[int], fb: list[int], where_a: list[int],
                 where_b: list[int], sa: list[int], sb: list[int]):
        self.p, self.fa, self.fb = p, fa, fb
        self.where_a, self.where_b = where_a, where_b
        self.sa, self.sb = sa, sb
        self.left_a: list[int] = []
        self.left_b: list[int] = []

    def same_frames(self) -> None:
        """The same frames in the same order first (most of them, in two runs of a
        script), each pair kept when it is within its window."""
        p, fa, fb, where_a, where_b = self.p, self.fa, self.fb, self.where_a, self.where_b
        mate_a, mate_b = p.mate_a, p.mate_b
        al = align(list(map(self.sa.__getitem__, fa)), list(map(self.sb.__getitem__, fb)),
                   try_first=TRY_FIRST)
        for a0, b0, size in al.blocks:
            for k, t in zip(range(a0, a0 + size), range(b0, b0 + size), strict=True):
                if -WINDOW <= where_a[k] - where_b[t] <= WINDOW:
                    mate_a[fa[k]] = fb[t]
                    mate_b[fb[t]] = fa[k]
                    p.equal += 1
        self.left_a = [k for k in range(len(fa)) if mate_a[fa[k]] < 0]
        self.left_b = [k for k in range(len(fb)) if mate_b[fb[k]] < 0]

    def match(self, key_a: Callable[[int], Any], key_b: Callable[[int], Any],
              kind: str | None) -> None:
        """Pair those left whose keys are equal, each A one with the first B one in its
        window (``kind``: the pairs are changed, of this kind)."""
        by: dict[Any, list[int]] = {}
        for k in self.left_b:
            by.setdefault(key_b(k), []).append(k)
        start: dict[Any, int] = {}
        used_b: set[int] = set()
        keep_a: list[int] = []
        fa, fb, sa, sb = self.fa, self.fb, self.sa, self.sb
        for k in self.left_a:
            key = key_a(k)
            cands = by.get(key)
            got = self._candidate(cands, key, self.where_a[k], start, used_b) \
                if cands else None
            if got is None:
                keep_a.append(k)
                continue
            used_b.add(got)
            self.p.pair(fa[k], fb[got], kind)
            if kind is None and sa[fa[k]] != sb[fb[got]]:
                self.p.viewed.append(fa[k])
        self.left_a = keep_a
        self.left_b = [k for k in self.left_b if k not in used_b]

    def _candidate(self, cands: list[int], key: Any, w: int, start: dict[Any, int],
                   used_b: set[int]) -> int | None:
        """The first of ``cands`` (B's, in order) not used and within ``w``'s window;
        ``start[key]`` skips those behind every later A one's window for good."""
        where_b = self.where_b
        s = start.get(key, 0)
        while s < len(cands) and (cands[s] in used_b or where_b[cands[s]] < w - WINDOW):
            s += 1
        start[key] = s
        for t in range(s, len(cands)):
            c = cands[t]
            if where_b[c] > w + WINDOW:
                return None
            if c not in used_b:
                return c
        return None

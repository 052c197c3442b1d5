"""Exact longest common subsequence of two int sequences: Myers' O((N+M)D) algorithm.

Why this shape:

- Myers' greedy D-path search with the *middle snake* divide and conquer (the paper's
  linear-space refinement, section 4b): time O((N+M)D), memory O(N+M), where D is the
  size of the minimal edit script. Recursion is an explicit stack, so no depth limit.
- Every subproblem first trims its common prefix and suffix. A "snake" (a run of equal
  elements along a diagonal) is followed by galloping over the sequences' fixed-width
  byte encodings, so a run of 10,000 equal steps costs a few ``memcmp`` calls, not
  10,000 Python compares.
- Before the search, elements that occur in only one sequence are set aside: they can
  never be matched, so removing them keeps the LCS (and its length) exact while often
  shrinking D a lot (inserted and changed steps are usually new content). GNU diff does
  the same.
- ``max_cost`` bounds the D searched per subproblem. Past it, the subproblem is split at
  the furthest-reaching forward point instead (GNU diff's "too expensive" heuristic): the
  script stays a valid edit script but may not be minimal, and ``approximate`` is set.

The result is a list of matching blocks ``(a_start, b_start, length)``, increasing in
both indices, adjacent blocks merged; :func:`opcodes` turns it into an edit script.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import compress

__all__ = ["Alignment", "align", "opcodes"]

_W = 4  # bytes per element in the galloping encoding (array 'I' or 'L', whichever is 4)
_TYPECODE = "I" if array("I").itemsize == 4 else "L"


@dataclass
class Alignment:
    """Matching blocks of an alignment of ``a`` (length ``n``) with ``b`` (length ``m``)."""

    blocks: list[tuple[int, int, int]]
    n: int
    m: int
    approximate: bool = False

    @property
    def lcs(self) -> int:
        return sum(block[2] for block in self.blocks)

    @property
    def distance(self) -> int:
        """Insertions plus deletions (the edit distance without substitutions)."""
        return self.n + self.m - 2 * self.lcs


def opcodes(al: Alignment) -> Iterator[tuple[str, int, int, int, int]]:
    """``(tag, a0, a1, b0, b1)`` runs in order, tags ``equal``/``only-a``/``only-b``;
    in a gap between equal runs the ``only-a`` run comes first."""
    i = j = 0
    for a0, b0, size in (*al.blocks, (al.n, al.m, 0)):
        if i < a0:
            yield ("only-a", i, a0, j, j)
        if j < b0:
            yield ("only-b", a0, a0, j, b0)
        if size:
            yield ("equal", a0, a0 + size, b0, b0 + size)
        i, j = a0 + size, b0 + size


class _Costly(Exception):
    """The search went past its budget (:func:`align`'s ``try_first``)."""


#: The edit script a subproblem is first searched for as it is, by callers comparing two
#: runs of one script (they part in few places): :func:`align`'s ``try_first``.
TRY_FIRST = 256


def align(a: Sequence[int], b: Sequence[int], max_cost: int | None = None,
          try_first: int = 0) -> Alignment:
    """Align two sequences of small non-negative ints (steps mapped through a dict).
    ``try_first``: first search the sequences as they are, giving up when a subproblem
    needs an edit script longer than this, before setting aside what cannot match
    (which costs more than the search itself when two long runs differ in few places:
    three times as much at 175,000 steps and 130 differences, measured). Either way the
    result is exact; where several are, which one may differ.

    >>> align([1, 2, 3, 4], [1, 3, 4, 5]).blocks
    [(0, 0, 1), (2, 1, 2)]
    """
    if max_cost is not None and max_cost < 1:
        raise ValueError("max_cost must be at least 1")
    n, m = len(a), len(b)
    if n == m and a == b:  # one compare in C; two runs of one session often are
        return Alignment([(0, 0, n)] if n else [], n, m)
    if try_first and max_cost is None:
        try:
            raw, _ = _lcs_blocks(list(a), list(b), None, try_first)
        except _Costly:
            pass
        else:
            return Alignment(_merge(raw), n, m)
    # Set aside what cannot match (exactness is kept: such elements are never in an LCS).
    # The filtering runs in C (compress, map): at a million steps it is most of the work.
    in_b = set(b)
    in_a = set(a)
    ia = ib = None
    if in_a != in_b:
        ia = list(compress(range(n), map(in_b.__contains__, a)))
        ib = list(compress(range(m), map(in_a.__contains__, b)))
        fa = list(map(a.__getitem__, ia))
        fb = list(map(b.__getitem__, ib))
    else:
        fa, fb = list(a), list(b)
    del in_a, in_b
    raw, approximate = _lcs_blocks(fa, fb, max_cost)
    if ia is not None and ib is not None:  # (both or neither)
        raw = _unmap(raw, ia, ib)
    return Alignment(_merge(raw), n, m, approximate)


def _unmap(blocks: list[tuple[int, int, int]], ia: list[int], ib: list[int]):
    """Blocks over the filtered sequences -> blocks over the originals (split where the
    filtered indices were not contiguous)."""
    out: list[tuple[int, int, int]] = []
    push = out.append
    stack: list[tuple[int, int, int]] = []
    for blk in reversed(blocks):
        stack.append(blk)
    pop = stack.pop
    while stack:
        i, j, size = pop()
        x, y = ia[i], ib[j]
        if ia[i + size - 1] - x == size - 1 and ib[j + size - 1] - y == size - 1:
            push((x, y, size))
            continue
        half = size // 2
        stack.append((i + half, j + half, size - half))
        stack.append((i, j, half))
    return out


def _merge(blocks: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    blocks.sort()
    out: list[tuple[int, int, int]] = []
    for i, j, size in blocks:
        if not size:
            continue
        if out:
            pi, pj, ps = out[-1]
            if pi + ps == i and pj + ps == j:
                out[-1] = (pi, pj, ps + size)
                continue
        out.append((i, j, size))
    return out


def _fwd(ab: bytes, bb: bytes, x: int, y: int, xe: int, ye: int) -> int:
    """The end of the snake from (x, y) (given a[x] == b[y])."""
    return x + 1 + _common(ab, bb, x + 1, y + 1, min(xe - x, ye - y) - 1, False)


def _bwd(ab: bytes, bb: bytes, x: int, y: int, xs: int, ys: int) -> int:
    """The start of the snake ending at (x, y) (given a[x-1] == b[y-1])."""
    return x - 1 - _common(ab, bb, x - 1, y - 1, min(x - xs, y - ys) - 1, True)


def _common(ab: bytes, bb: bytes, x: int, y: int, lim: int, back: bool) -> int:
    """How many elements ``a`` and ``b`` (packed in ``ab``, ``bb``) have in common from
    x and y on (``back``: up to x and y), at most ``lim``: a gallop with memcmp, then a
    bisection of the last step."""
    got = 0
    k = 16
    while True:
        if lim - got <= 0:
            return got
        if k > lim - got:
            k = lim - got
        i, j = (x - got - k, y - got - k) if back else (x + got, y + got)
        if ab[i * _W : (i + k) * _W] == bb[j * _W : (j + k) * _W]:
            got += k
            k <<= 1
            continue
        lo, hi = 0, k  # lo elements in common, hi not
        while hi - lo > 1:
            mid = (lo + hi) >> 1
            i, j = (x - got - mid, y - got - mid) if back else (x + got, y + got)
            if ab[i * _W : (i + mid) * _W] == bb[j * _W : (j + mid) * _W]:
                lo = mid
            else:
                hi = mid
        return got + lo


def _lcs_blocks(a: list[int], b: list[int], max_cost: int | None, budget: int = 0):
    """Matching blocks (unsorted) of a and b, and whether max_cost cut a search short;
    with a ``budget``, :class:`_Costly` when a subproblem needs a longer edit script."""
    ab = array(_TYPECODE, a).tobytes()
    bb = array(_TYPECODE, b).tobytes()
    blocks: list[tuple[int, int, int]] = []
    approximate = False
    stack = [(0, len(a), 0, len(b))]
    while stack:
        a0, a1, b0, b1 = stack.pop()
        # common prefix and suffix of this subproblem
        if a0 < a1 and b0 < b1 and a[a0] == b[b0]:
            x = _fwd(ab, bb, a0, b0, a1, b1)
            blocks.append((a0, b0, x - a0))
            b0 += x - a0
            a0 = x
        if a0 < a1 and b0 < b1 and a[a1 - 1] == b[b1 - 1]:
            x = _bwd(ab, bb, a1, b1, a0, b0)
            size = a1 - x
            blocks.append((x, b1 - size, size))
            a1 = x
            b1 -= size
        if a0 == a1 or b0 == b1:
            continue
        if a1 - a0 == 1 or b1 - b0 == 1:
            _small(a, b, a0, a1, b0, b1, blocks)
            continue
        x, y, cut = _middle(a, b, ab, bb, a0, a1, b0, b1, max_cost, budget)
        approximate |= cut
        stack.append((x, a1, y, b1))
        stack.append((a0, x, b0, y))
    return blocks, approximate


def _small(a, b, a0, a1, b0, b1, blocks) -> None:
    """One side has a single element: it matches its first occurrence, if any."""
    if a1 - a0 == 1:
        v = a[a0]
        for j in range(b0, b1):
            if b[j] == v:
                blocks.append((a0, j, 1))
                return
    else:
        v = b[b0]
        for i in range(a0, a1):
            if a[i] == v:
                blocks.append((i, b0, 1))
                return


def _middle(a, b, ab, bb, a0, a1, b0, b1, max_cost, budget=0):
    """A split point (x, y) on a minimal edit path of a[a0:a1] vs b[b0:b1] (absolute
    indices), with a cost of at least one on each side; ``cut`` when max_cost stopped
    the search and the split is only the furthest-reaching forward point.

    Forward D-paths are kept in ``vf`` (furthest x per diagonal k = x - y), reverse
    D-paths in ``vr`` in mirrored coordinates (distance from the end); diagonals that left
    the box are pruned from both ends, as the paper allows.
    """
    n = a1 - a0
    m = b1 - b0
    dmax = (n + m + 1) // 2
    cap = min(dmax + 1, 64)
    # Indexed by diagonal with Python's negative wrap-around; -1 = not reached yet.
    vf = [-1] * (2 * cap + 3)
    vr = [-1] * (2 * cap + 3)
    vf[1] = 0
    vr[1] = 0
    box = (a, b, ab, bb, a0, a1, b0, b1)
    fs = fe = rs = re_ = 0  # diagonals pruned at the start/end of each pass
    for d in range(dmax + 1):
        if d + 1 >= cap:
            new = min(2 * cap, dmax + 2)
            if new > cap:
                pad = [-1] * (2 * (new - cap))
                vf = vf[: cap + 2] + pad + vf[cap + 2 :]
                vr = vr[: cap + 2] + pad + vr[cap + 2 :]
                cap = new
        if max_cost is not None and d > max_cost:
            return _furthest(vf, d, n, m, a0, b0)
        if budget and d > budget:
            raise _Costly
        hit, fs, fe = _pass(box, vf, vr, d, fs, fe, False)
        if hit is not None:
            return hit
        hit, rs, re_ = _pass(box, vr, vf, d, rs, re_, True)
        if hit is not None:
            return hit
    raise AssertionError("middle snake not found")  # pragma: no cover


def _pass(box, v, other, d, s, e, back):
    """The D-paths of cost ``d`` one way into ``v`` (forward; ``back``: reverse, in
    mirrored coordinates, distance from the end): the split point where one meets a
    path of the other way (``other``; forward when the lengths differ by an odd number,
    reverse when even), or None; and the diagonals pruned at the start and the end."""
    a, b, ab, bb, a0, a1, b0, b1 = box
    n = a1 - a0
    m = b1 - b0
    delta = n - m
    meets = not (delta & 1) if back else delta & 1
    wide = 1 if back else 0  # the reverse pass meets on the end diagonals too
    for k in range(-d + s, d + 1 - e, 2):
        if k == -d or (k != d and v[k - 1] < v[k + 1]):
            x = v[k + 1]
        else:
            x = v[k - 1] + 1
        y = x - k
        if x < n and y < m:
            if back:
                if a[a1 - 1 - x] == b[b1 - 1 - y]:
                    x = a1 - _bwd(ab, bb, a1 - x, b1 - y, a0, b0)
                    y = x - k
            elif a[a0 + x] == b[b0 + y]:
                x = _fwd(ab, bb, a0 + x, b0 + y, a1, b1) - a0
                y = x - k
        v[k] = x
        if x > n:
            e += 2
        elif y > m:
            s += 2
        elif meets:
            c = delta - k
            if -d - wide < c < d + wide:
                r = other[c]
                if r != -1 and x >= n - r:
                    # reverse: the middle snake is the reverse path's last snake; its
                    # lower end lies on a minimal path
                    return ((a1 - x, b1 - y, False) if back else (a0 + x, b0 + y, False)), s, e
    return None, s, e


def _furthest(vf, d, n, m, a0, b0):
    """Too expensive: split at the forward point that got furthest (max x + y)."""
    best = best_x = best_y = -1
    for k in range(-d + 1, d, 2):
        x = vf[k]
        if x < 0:
            continue
        y = x - k
        if 0 <= x <= n and 0 <= y <= m and 0 < x + y < n + m and x + y > best:
            best, best_x, best_y = x + y, x, y
    if best <= 0:  # only when the search had nowhere to go: split off one element
        return a0 + 1, b0, True
    return a0 + best_x, b0 + best_y, True

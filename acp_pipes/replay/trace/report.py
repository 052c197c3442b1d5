"""Why a frame did not match: JSON-pointer diffs and the nearest recorded candidate.

A miss is reported as one JSON line, so the user (or a harness) sees the pointers that
differ between what came and the recorded frame it most resembles, after the declared
normalisers were applied (an ``--ignore``d value never shows up as a difference).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from acp_pipes.sameness.jsondiff import MAX_DIFF, escape, pointer_diff

__all__ = ["MAX_DIFF", "escape", "nearest", "pointer_diff"]

#: At most this many recorded candidates are compared when looking for the nearest.
MAX_CANDIDATES = 2000


def nearest(received: Any,
            candidates: Iterable[tuple[int, Any]]) -> tuple[int, list[dict[str, Any]]] | None:
    """The candidate ``(index, value)`` whose diff to ``received`` is smallest, as
    ``(index, diff)``; the first of equals wins, so the expected frame (given first) is
    preferred. None when there are no candidates."""
    best: tuple[int, list[dict[str, Any]]] | None = None
    for n, (index, value) in enumerate(candidates):
        if n >= MAX_CANDIDATES:
            break
        d = pointer_diff(value, received, limit=MAX_DIFF + 1)
        if best is None or len(d) < len(best[1]):
            best = (index, d)
            if not d:
                break
    if best is not None:
        best = (best[0], best[1][:MAX_DIFF])
    return best

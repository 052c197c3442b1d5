"""Why a frame did not match: JSON-pointer diffs and the nearest recorded candidate.

A miss is reported as one JSON line, so the user (or a harness) sees the pointers that
differ between what came and the recorded frame it most resembles, after the declared
normalisers were applied (an ``--ignore``d value never shows up as a difference).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["MAX_DIFF", "escape", "nearest", "pointer_diff"]

#: At most this many differences per report: the first ones say enough.
MAX_DIFF = 20
#: At most this many recorded candidates are compared when looking for the nearest.
MAX_CANDIDATES = 2000


def escape(segment: str) -> str:
    """One RFC 6901 pointer segment."""
    return segment.replace("~", "~0").replace("/", "~1")


def pointer_diff(recorded: Any, received: Any, limit: int = MAX_DIFF) -> list[dict[str, Any]]:
    """The differences from ``recorded`` to ``received`` as ``{op, path, ...}`` entries:
    ``replace`` (both values), ``remove`` (only recorded), ``add`` (only received).

    >>> for d in pointer_diff({"a": [1, 2], "b": 1}, {"a": [1, 3, 4], "c": 1}):
    ...     print(d)
    {'op': 'replace', 'path': '/a/1', 'recorded': 2, 'received': 3}
    {'op': 'add', 'path': '/a/2', 'received': 4}
    {'op': 'remove', 'path': '/b', 'recorded': 1}
    {'op': 'add', 'path': '/c', 'received': 1}
    """
    out: list[dict[str, Any]] = []
    _diff(recorded, received, "", out, limit)
    return out


def _same(a: Any, b: Any) -> bool:
    # JSON equality: True is not 1, 1 is 1.0 (JCS reads numbers as doubles)
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b and (type(a) is type(b) or (isinstance(a, (int, float))
                                               and isinstance(b, (int, float))))


def _diff(a: Any, b: Any, path: str, out: list, limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a:
            if k in b:
                _diff(a[k], b[k], path + "/" + escape(k), out, limit)
            else:
                out.append({"op": "remove", "path": path + "/" + escape(k), "recorded": a[k]})
            if len(out) >= limit:
                return
        for k in b:
            if k not in a:
                out.append({"op": "add", "path": path + "/" + escape(k), "received": b[k]})
                if len(out) >= limit:
                    return
        return
    if isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            p = f"{path}/{i}"
            if i >= len(b):
                out.append({"op": "remove", "path": p, "recorded": a[i]})
            elif i >= len(a):
                out.append({"op": "add", "path": p, "received": b[i]})
            else:
                _diff(a[i], b[i], p, out, limit)
            if len(out) >= limit:
                return
        return
    if not _same(a, b):
        out.append({"op": "replace", "path": path, "recorded": a, "received": b})


def nearest(received: Any, candidates: Iterable[tuple[int, Any]]) -> tuple[int, list] | None:
    """The candidate ``(index, value)`` whose diff to ``received`` is smallest, as
    ``(index, diff)``; the first of equals wins, so the expected frame (given first) is
    preferred. None when there are no candidates."""
    best: tuple[int, list] | None = None
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

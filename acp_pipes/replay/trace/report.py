"""What a re-drive reports: how it ended (:class:`DriveResult`), and why a frame did not
match (JSON-pointer diffs and the nearest recorded candidate).

A miss is reported as one JSON line, so the user (or a harness) sees the pointers that
differ between what came and the recorded frame it most resembles, after the declared
normalisers were applied (an ``--ignore``d value never shows up as a difference).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from acp_pipes.sameness.jsondiff import MAX_DIFF, escape, pointer_diff

__all__ = ["MAX_DIFF", "DriveResult", "escape", "nearest", "pointer_diff"]

@dataclass
class DriveResult:
    """``status``: ``ok`` (no difference; notes may say what was tolerated),
    ``stopped`` (at the first difference, or with ``--keep-going`` after the last:
    each is reported), ``agent_exited`` (the agent ended before the recorded session
    did) or ``agent_failed`` (it exited before it sent anything: it did not start).
    ``sent`` and ``received`` count the frames of the run each way."""

    status: str
    differences: int
    sent: int
    received: int
    returncode: int | None
    reports: list[dict[str, Any]] = field(default_factory=list)
    notes: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


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

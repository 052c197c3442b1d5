"""How long a re-drive waits for a silent agent. ``--timeout`` is only for an agent that
goes silent, and the recording took its time too (an agent's start-up, a slow tool): so
once the timeout has passed, the wait for the agent frame due next may last
:data:`PATIENCE` times as long as the recording waited for it after the client frame sent
last (a loaded CI machine is slower, not wrong)."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["PATIENCE", "Patience", "allowance"]

#: How many times as long as the recording waited for the next agent frame a re-drive
#: waits for it when that is longer than --timeout.
PATIENCE = 4


def allowance(due: Any, since: Any, timeout: float) -> float:
    """Seconds more than ``timeout`` to wait for the agent frame recorded at ``due`` (ns)
    after the client frame recorded at ``since`` (0 when either has no time).

    >>> allowance(12 * 10**9, 10**9, 10.0), allowance(2 * 10**9, 10**9, 10.0)
    (34.0, 0.0)
    """
    if not isinstance(due, int) or not isinstance(since, int) or due <= since:
        return 0.0
    return max(0.0, PATIENCE * (due - since) / 1e9 - timeout)


class Patience:
    """The deadline of the present silence: :meth:`reset` when bytes moved, stretched at
    most once (:meth:`stretch`) before the silence is a difference."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.reset()

    def reset(self) -> None:
        self.since = time.monotonic()
        self.deadline = self.since + self.timeout
        self.patient = False  # stretched already

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def waited(self) -> float:
        """How long the silence has lasted, once the deadline is reached."""
        return self.deadline - self.since

    def stretch(self, due: Any, since: Any) -> bool:
        """Once a silence: move the deadline by :func:`allowance`; True when it moved."""
        self.patient = True
        more = allowance(due, since, self.timeout)
        if more > 0:
            self.deadline += more
            return True
        return False

"""acp-replay's reports on stderr (a miss, a difference, the loss report of an ASR
replay): one JSON line each for a program, readable lines for a person at a terminal.

Which one is decided once, by the run's :class:`~acp_pipes.io.terminal.Terminal`
(``ctx.term.err_tty``), like everything else that adapts to a terminal. Every string
that came from a recording or a live peer goes through
:func:`~acp_pipes.io.terminal.printable`.
"""

from __future__ import annotations

import sys
from typing import Any

from acp_pipes.errors import say
from acp_pipes.io.terminal import Terminal

__all__ = ["Reporter"]

#: Events that end a run badly, painted as errors; the others as warnings.
_STOPS = frozenset({"miss", "trace_ended", "trace_cut", "client_ended"})


class Reporter:
    """The callable a replay reports through. ``quiet``: hold back the loss report
    (``replay_losses``) of a run that succeeds; :meth:`release` says what was held,
    for a run that did not."""

    def __init__(self, prog: str, term: Terminal, quiet: bool = False):
        self.prog = prog
        self.term = term
        self.quiet = quiet
        self.held: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any]) -> None:
        if self.quiet and event.get("event") == "replay_losses":
            self.held.append(event)
            return
        self._say(event)

    def release(self) -> None:
        for event in self.held:
            self._say(event)
        self.held.clear()

    def _say(self, event: dict[str, Any]) -> None:
        # imported when there is something to say (acp-replay --client starts its agent
        # before it loads them)
        from acp_pipes.protocol.jsontext import dumps
        from acp_pipes.replay.reports import readable

        if not self.term.err_tty:
            err = sys.stderr
            if err is None:
                return
            try:
                err.buffer.write(dumps(event) + b"\n")  # lone surrogates escaped
                err.buffer.flush()
            except (OSError, ValueError, AttributeError):
                pass
            return
        lines = readable(event)
        role = "error" if event.get("event") in _STOPS else "warning"
        say(self.term.paint_err(f"{self.prog}: {lines[0]}", role))
        for line in lines[1:]:
            say("  " + line)

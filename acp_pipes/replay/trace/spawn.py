"""The agent under test of ``acp-replay --client`` as a process: started with its stdin
and stdout on pipes (:func:`start_agent`), and ended (:func:`end_agent`) when a run that
started it stops before driving it.

A module of its own, light to import: the CLI starts the agent as soon as its arguments
and the trace's header are known good, before it loads the driver
(:mod:`acp_pipes.replay.trace.client`), so the agent's start-up overlaps its own."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from acp_pipes.errors import UsageError

__all__ = ["end_agent", "start_agent"]


def start_agent(argv: Sequence[str]) -> subprocess.Popen[bytes]:
    """``argv`` started with its stdin and stdout on pipes (stderr is ours); a UsageError
    naming the command when it cannot be started."""
    if not argv:
        raise ValueError("no agent command")
    try:
        return subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    except OSError as e:
        raise UsageError(f"cannot start {argv[0]}: {e.strerror or e}") from None


def end_agent(proc: subprocess.Popen[bytes], grace: float = 2.0) -> None:
    """End an agent that was never driven: its input closed (an agent ends at its
    input's end), then SIGTERM after ``grace`` s, SIGKILL after as long again; its
    output is not read (nothing was sent, nothing is owed)."""
    for pipe in (proc.stdin, proc.stdout):
        try:
            if pipe is not None:
                pipe.close()
        except OSError:  # a broken pipe: the agent is gone already
            pass
    for stop in (None, proc.terminate, proc.kill):
        if stop is not None:
            stop()
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue
    proc.wait()

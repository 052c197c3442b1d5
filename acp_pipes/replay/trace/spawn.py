"""The agent under test of ``acp-replay --client`` as a process: started with its stdin
and stdout on pipes, in a process group of its own (:func:`start_agent`), so that ending
it ends what it started too (a shell, a language server, a model process: a re-drive
leaves nothing behind), and ended (:func:`end_agent`, :func:`signal_agent`).

A module of its own, light to import: the CLI starts the agent as soon as its arguments
and the trace's header are known good, before it loads the driver
(:mod:`acp_pipes.replay.trace.client`), so the agent's start-up overlaps its own."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Sequence

from acp_pipes.errors import UsageError

__all__ = ["end_agent", "exited", "signal_agent", "start_agent", "stop_agent"]


def start_agent(argv: Sequence[str]) -> subprocess.Popen[bytes]:
    """``argv`` started with its stdin and stdout on pipes (stderr is ours), in a new
    process group; a UsageError naming the command when it cannot be started."""
    if not argv:
        raise ValueError("no agent command")
    try:
        return subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                process_group=0)
    except OSError as e:
        raise UsageError(f"cannot start {argv[0]}: {e.strerror or e}") from None


def signal_agent(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` to the agent's process group (what it started with it), or to the
    agent alone when it leads no group (started by a caller). Safe while the agent is
    not reaped (a zombie still holds its group's number), so callers reap it after."""
    if proc.returncode is not None:
        return  # reaped: its number may be another process's now
    try:
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, sig)
            return
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.send_signal(sig)
    except ProcessLookupError:
        pass


def exited(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Whether the agent exits within ``timeout`` s; it is not reaped (``WNOWAIT``), so
    its group can still be signalled. Waits on a pidfd (readable at the exit) where
    the system has them, else looks every few ms."""
    if proc.returncode is not None:
        return True
    deadline = time.monotonic() + timeout
    fd = -1
    try:
        while True:
            try:
                if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
                    return True
            except ChildProcessError:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if fd < 0 and hasattr(os, "pidfd_open"):
                try:
                    fd = os.pidfd_open(proc.pid)
                except OSError:
                    fd = -2  # none here: look every few ms
            if fd >= 0:
                select.select([fd], [], [], left)
            else:
                time.sleep(min(0.005, left))
    finally:
        if fd >= 0:
            os.close(fd)


def stop_agent(proc: subprocess.Popen[bytes], grace: float) -> None:
    """The agent's input is closed: give it ``grace`` s to exit, then SIGTERM its group,
    as long again, then SIGKILL; what it left running in its group is killed once it
    exited; then it is reaped."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if exited(proc, grace):
            break
        signal_agent(proc, sig)
    else:
        exited(proc, grace)
    group = _leads_group(proc)
    signal_agent(proc, signal.SIGKILL)  # what is left of its group
    proc.wait()
    if group:  # the rest of it dies of the SIGKILL: a moment for it to be gone
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except (ProcessLookupError, PermissionError):
                break
            time.sleep(0.005)


def _leads_group(proc: subprocess.Popen[bytes]) -> bool:
    try:
        return os.getpgid(proc.pid) == proc.pid
    except (ProcessLookupError, PermissionError):
        return False


def end_agent(proc: subprocess.Popen[bytes], grace: float = 2.0) -> None:
    """End an agent that was never driven: its input closed (an agent ends at its
    input's end), then :func:`stop_agent`; its output is not read (nothing was sent,
    nothing is owed)."""
    for pipe in (proc.stdin, proc.stdout):
        try:
            if pipe is not None:
                pipe.close()
        except OSError:  # a broken pipe: the agent is gone already
            pass
    stop_agent(proc, grace)

"""The recording proxy behind ``acp-tee``: run an ACP agent, forward both directions of
its stdio byte for byte, and log every frame to a wire log (:mod:`acp_pipes.io.wire`).

Use it from a test harness as well as from the CLI::

    from acp_pipes.tee import record

    status = record(["my-agent", "--acp"], "/tmp/session.jsonl",
                    clock="epoch", host=False)   # forwards fds 0 and 1 until the agent ends

Design choices, and why:

- The agent is started first, before the proxy imports what it needs to log (orjson,
  the wire format, threads: :mod:`acp_pipes.tee.pump`), so the agent's start-up and the
  proxy's overlap: in front of an agent that answers in microseconds, the proxy's own
  start-up would otherwise be most of what it adds to a session. This module therefore
  imports nothing beyond the interpreter's core at load time.
- Two threads, one per direction, copy raw fds and log each frame *before* forwarding it
  (see :mod:`acp_pipes.tee.pump` for how, and why a crash never loses a forwarded frame).
- The bytes forwarded are never changed; secrets are redacted only in the log
  (:mod:`acp_pipes.protocol.redact`).
- The log never stops the session: if it cannot be opened or written (bad path, disk
  full), the proxy says so once through ``note`` and goes on forwarding.
- SIGINT, SIGTERM and SIGHUP sent to the proxy are passed on to the agent (when
  ``record`` runs in the main thread); the proxy then waits for the agent as usual. The
  exit status is the agent's (128+N when a signal N killed it).
"""

from __future__ import annotations

import os

from acp_pipes.errors import Note, say
from acp_pipes.io.wire import make_clock

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal  # typeshed has no _signal: its names are typed in signal
    from collections.abc import Iterable, Sequence

    from acp_pipes.tee.pump import Session
else:
    try:  # the C module under signal.py, whose enums (~3 ms) need not delay the agent's start
        import _signal as signal
    except ImportError:  # pragma: no cover - an interpreter without it
        import signal

__all__ = ["Agent", "record", "start_agent"]

_FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _stderr_note(message: str) -> None:
    say(f"acp-tee: {message}")


def _occupy_stdio() -> None:
    """Put /dev/null on any of fds 0-2 that is closed, before the proxy opens anything:
    else a pipe or the log would be handed that number, and be taken for the client's
    stdin or stdout, or be dup2'ed onto itself (keeping close-on-exec) for the agent."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # the lowest free fd: this one


def _inherited_fds_close_on_exec() -> None:
    """Mark every fd above 2 close-on-exec, so the agent gets its stdio and nothing else
    (as ``subprocess``'s ``close_fds`` does): fds the proxy was started with, by an
    editor or a shell, are none of the agent's business."""
    for listing in ("/proc/self/fd", "/dev/fd"):
        try:
            fds = [int(name) for name in os.listdir(listing)]
        except (OSError, ValueError):
            continue
        for fd in fds:
            if fd > 2:
                try:
                    os.set_inheritable(fd, False)
                except OSError:  # the listing's own fd, closed by now
                    pass
        return


def spawn(argv: Sequence[str], stderr_fd: int | None = None) -> tuple[int, int, int]:
    """Start the agent on two new pipes: returns its pid, the write end of its stdin
    and the read end of its stdout. ``posix_spawnp`` rather than :mod:`subprocess`, which
    would cost the import it exists to save. The agent gets SIGPIPE and SIGXFSZ back at
    their defaults (Python ignores them, and an ignored signal survives exec), an empty
    signal mask, and no fd but its stdio. Fds 0-2 must be open (see ``_occupy_stdio``).
    Raises OSError when ``argv[0]`` cannot be run, ValueError when it is empty."""
    if not argv or not argv[0]:
        raise ValueError("empty command name")
    _inherited_fds_close_on_exec()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    # stderr first: stderr_fd may be 0 or 1, which the next two actions replace
    actions = [] if stderr_fd is None else [(os.POSIX_SPAWN_DUP2, stderr_fd, 2)]
    actions += [(os.POSIX_SPAWN_DUP2, in_r, 0), (os.POSIX_SPAWN_DUP2, out_w, 1)]
    defaults = [signal.SIGPIPE] + ([signal.SIGXFSZ] if hasattr(signal, "SIGXFSZ") else [])
    try:
        # setpgroup=0: a process group of its own, so a launcher's children (npx, a
        # native binary exec'd by a script) are signalled with it, never left holding
        # the pipes (see ``end_agent``)
        pid = os.posix_spawnp(argv[0], list(argv), os.environ, file_actions=actions,
                              setsigdef=defaults, setsigmask=(), setpgroup=0)
    except BaseException:
        for fd in (in_w, out_r):
            os.close(fd)
        raise
    finally:
        os.close(in_r)
        os.close(out_w)
    return pid, in_w, out_r


class Agent:
    """An agent started by :func:`start_agent`, not yet served: its pid, the write end of
    its stdin, the read end of its stdout, and when it was started (by the log's clock).

    With ``forward_signals``, SIGINT, SIGTERM and SIGHUP sent to this process are passed
    on to the agent from the moment it exists (they are blocked while it is spawned, so
    none falls between its start and the handlers), until :meth:`restore_signals`. A
    signal this process ignores stays ignored, and so the agent inherits it ignored.
    """

    def __init__(self, argv: Sequence[str], clock: str, stderr_fd: int | None = None,
                 forward_signals: bool = False):
        self.argv = list(argv)
        self.clock = clock
        self.tick = make_clock(clock)
        self.started_ns = self.tick()
        self.taken = False
        self.reaped = False
        self.stopped: float | None = None  # when a signal told this process to stop
        self._saved: dict[int, object] = {}
        _occupy_stdio()
        if not forward_signals:
            self.pid, self.stdin, self.stdout = spawn(self.argv, stderr_fd)
            return
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _FORWARDED_SIGNALS)
        try:
            self.pid, self.stdin, self.stdout = spawn(self.argv, stderr_fd)
            self.forward_signals()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)  # pending ones arrive now

    def send_signal(self, signum: int, _frame: object = None) -> None:
        """Pass ``signum`` on to the agent and its process group (a signal handler),
        unless it has been reaped: its pid may then belong to another process."""
        if self.stopped is None:
            import time

            self.stopped = time.monotonic()
        if not self.reaped:
            self.signal_group(signum)

    def signal_group(self, signum: int) -> None:
        """``signum`` to the agent's process group (the agent alone where it left it).
        Safe after the agent is reaped while its group has members: a pid still in use
        as a process group ID is never given to a new process."""
        try:
            os.killpg(self.pid, signum)
        except OSError:
            try:
                if not self.reaped:
                    os.kill(self.pid, signum)
            except OSError:
                pass

    def forward_signals(self) -> None:
        """Pass SIGINT, SIGTERM and SIGHUP sent to this process on to the agent (again,
        if something took one over since). Nothing outside the main thread."""
        for sig in _FORWARDED_SIGNALS:
            try:
                current = signal.getsignal(sig)
                if current == signal.SIG_IGN or current == self.send_signal:
                    continue
                previous = signal.signal(sig, self.send_signal)
            except (OSError, ValueError):  # ValueError: not the main thread
                return
            self._saved.setdefault(sig, previous)

    def restore_signals(self) -> None:
        """Put back the handlers :meth:`forward_signals` replaced."""
        saved, self._saved = self._saved, {}
        for sig, handler in saved.items():
            try:
                signal.signal(sig, handler)  # type: ignore[arg-type]  # what signal.signal gave
            except (OSError, ValueError):
                pass

    def abandon(self) -> None:
        """Undo a start that will not be served (a usage error found after it, or a
        failure while setting up): close its pipes, end it and reap it. Nothing once
        it has been reaped."""
        self.taken = True
        if self.reaped:
            return
        for fd in (self.stdin, self.stdout):
            try:
                os.close(fd)
            except OSError:
                pass
        self.send_signal(signal.SIGTERM)
        os.waitpid(self.pid, 0)
        self.reaped = True
        self.restore_signals()


def start_agent(argv: Sequence[str], *, clock: str = "system",
                stderr_fd: int | None = None, forward_signals: bool = False) -> Agent:
    """Start the agent now, to be served by ``record(..., agent=)``: acp-tee's CLI does so
    before it has even imported its argument parser. Raises OSError when ``argv[0]``
    cannot be run, ValueError for an empty command name, a bad ``clock`` or an empty
    ``argv``."""
    if not argv:
        raise ValueError("no agent command given")
    return Agent(argv, clock, stderr_fd, forward_signals)


def record(
    argv: Sequence[str],
    log_path: str | None,
    *,
    clock: str = "system",
    host: bool = True,
    capture_env: Sequence[str] = (),
    keep_secrets: bool = False,
    stdin_fd: int = 0,
    stdout_fd: int = 1,
    stderr_fd: int | None = None,
    note: Note | None = None,
    forward_signals: bool = True,
    agent: Agent | None = None,
    script: Iterable[bytes] | None = None,
    on_log: Note | None = None,
    grace: float | None = None,
) -> int:
    """Run ``argv`` as the agent between ``stdin_fd``/``stdout_fd`` and log to ``log_path``.

    ``log_path`` is what acp-tee's ``-o`` takes (:mod:`acp_pipes.tee.logfile`): a file
    (overwritten), ``DIR/`` or a name template with ``{agent}``, ``{start}``, ``{pid}``
    (a new file per session); ``.gz`` compresses; a FIFO is never waited for. ``on_log``
    gets the path of the log once it is open. None forwards without logging. The agent's
    stderr goes to ``stderr_fd``
    (default: inherited) and is not logged. ``capture_env`` names the environment
    variables to record in the header (an unset one is recorded as null). ``agent``, from
    :func:`start_agent` with the same ``argv`` and ``clock``, is served instead of
    starting one. ``script`` (lines of client frames) replaces the client on
    ``stdin_fd``: each frame is sent once the agent is done with the previous one, as an
    editor waits (:mod:`acp_pipes.tee.script`), and the agent's stdin is closed after the
    last. ``grace`` (default :data:`GRACE`) is how long an agent that outlives its
    input, or a child of it that holds its stdout, is waited for at each step of its
    ending. Returns the agent's exit status (128+N if signal N killed it; 127/126 if
    it could not be started, as a shell would). Raises ValueError for a bad ``clock``, a
    bad ``log_path`` template (both an OptionError, said by the CLI as a usage error) or
    an empty ``argv``. ``note`` gets what the proxy says about the run (a log it cannot
    write, an agent it cannot run).
    """
    from acp_pipes.tee.logfile import check

    note = note or _stderr_note
    if not argv:
        raise ValueError("no agent command given")
    make_clock(clock)  # a bad clock is the caller's ValueError, not the agent's failure
    check(log_path)
    if agent is None or agent.taken or agent.argv != list(argv) or agent.clock != clock:
        if agent is not None and not agent.taken:
            agent.abandon()  # not the agent asked for: never serve the wrong one
        try:
            agent = start_agent(argv, clock=clock, stderr_fd=stderr_fd,
                                forward_signals=forward_signals)
        except OSError as e:
            note(f"cannot run {argv[0]}: {e.strerror or e}")
            return 127 if isinstance(e, FileNotFoundError) else 126
        except ValueError as e:  # an empty name (`-- "$AGENT"` unset), a NUL in argv
            note(f"cannot run {argv[0]!r}: {e}")
            return 127
    agent.taken = True
    if forward_signals:
        agent.forward_signals()  # again: the CLI's runner took SIGINT in between
    try:
        from acp_pipes.tee.pump import Session  # while the agent starts (see above)

        session = Session(agent.stdin, agent.stdout, stdin_fd=stdin_fd, stdout_fd=stdout_fd,
                          note=note, script=script)
        session.open_log(log_path, argv, agent.tick, redact=not keep_secrets, on_open=on_log)
        env = {name: os.environ.get(name) for name in capture_env}
        session.write_header(argv, started_ns=agent.started_ns, clock=clock, host=host,
                             env=env, keep_secrets=keep_secrets)
        session.start()
    except BaseException:  # a bug or no fds left: end the agent rather than orphan it
        agent.abandon()
        raise
    try:
        grace = GRACE if grace is None else grace
        wait_status = end_agent(agent, session, grace)
        code = os.waitstatus_to_exitcode(wait_status)
        status = 128 - code if code < 0 else code
        drain_output(agent, session, grace)  # what the agent wrote before it ended
        session.finish(status, -code if code < 0 else None)
    finally:
        agent.restore_signals()
    return status


#: Seconds acp-tee waits, at a session's end, for an agent that does not end by itself:
#: after the client's input has ended and nothing has been sent either way (then SIGTERM
#: to the agent's process group, and SIGKILL as long again later); and after the agent
#: has exited, for a child of it that still holds its stdout (the same two steps).
#: ``--grace`` sets it (an agent that saves its state at exit may need longer).
GRACE = 5.0
#: Seconds acp-tee gives its agent once a signal told acp-tee itself to stop (passed on
#: to the agent's group): then SIGKILL, and the end record. Editors allow a stopped
#: agent little time before they kill it (the official Python SDK: 2 s), and a log
#: without its end record reads as a recording cut short.
STOP_GRACE = 0.5


def drain_output(agent: Agent, session: Session, grace: float = GRACE) -> None:
    """After the agent has exited: forward what it wrote, to the end of its stdout. A
    child of the agent that still holds its stdout gets ``grace`` seconds, then SIGTERM
    to the group, ``grace`` again, then SIGKILL and ``grace`` more. Once a signal has
    told acp-tee to stop, the rest is bounded at ``STOP_GRACE`` from the signal, or from
    the agent's exit if that came later (then SIGKILL to the group), even when the agent
    was reaped before the signal came: the editor that sends it may have stopped
    reading (the Python SDK does, before it closes acp-tee's stdin), so a forward
    blocked on the client never ends, and the log's end record must be written before
    the editor's SIGKILL. What is left unsent then was logged: every frame is logged
    before it is forwarded."""
    import time

    start = time.monotonic()
    step, since = 0, start
    while not session.drain(0.05):
        now = time.monotonic()
        if agent.stopped is not None and now - max(agent.stopped, start) >= STOP_GRACE:
            agent.signal_group(signal.SIGKILL)
            session.drain(0.05)  # a pipe the kill closed is read to its end
            return
        if now - since >= grace:
            if step == 2:
                return
            agent.signal_group(signal.SIGTERM if step == 0 else signal.SIGKILL)
            step, since = step + 1, now


def end_agent(agent: Agent, session: Session, grace: float = GRACE) -> int:
    """Wait for the agent to exit and return its wait status; an agent that outlives
    the client's input (codex-acp, for one, does not end at EOF), silent for ``grace``
    seconds, is ended: SIGTERM to its process group, then SIGKILL; after a signal told
    acp-tee to stop (passed on to the agent), SIGKILL once ``STOP_GRACE`` has passed.
    Waiting is a blocking ``waitpid`` in a thread, so an agent that exits is seen at
    once."""
    import threading
    import time

    done = threading.Event()
    result: list[int] = []

    def reap() -> None:
        try:
            result.append(os.waitpid(agent.pid, 0)[1])
        finally:
            done.set()

    threading.Thread(target=reap, name="acp-tee wait", daemon=True).start()
    step, since, seen = 0, 0.0, -1
    killed = False
    while not done.wait(0.1 if agent.stopped is not None else 0.25):
        if agent.stopped is not None and not killed and (
                time.monotonic() - agent.stopped >= STOP_GRACE):
            agent.signal_group(signal.SIGKILL)  # told to stop, and the agent did not
            killed = True
        ended = session.input_ended
        if ended is None:
            continue
        now = time.monotonic()
        frames = session.log.said
        if frames != seen:
            seen, since = frames, now  # something was said: the silence starts again
            continue
        if now - since < grace:
            continue
        if step == 0:
            agent.signal_group(signal.SIGTERM)
        elif step == 1:
            agent.signal_group(signal.SIGKILL)
        step, since = step + 1, now
    agent.reaped = True
    if not result:  # waitpid failed (ECHILD: someone else reaped it)
        return 0
    return result[0]


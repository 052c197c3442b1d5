"""The agent's pipes in a re-drive (:mod:`acp_pipes.replay.trace.client`): its output read,
and its input written, as :func:`select.poll` says they are ready, on the run's thread,
between the comparisons (a thread reading the agent cost more in handing the interpreter
lock back and forth than the comparisons themselves). A frame too big for the pipe goes
in pieces while the agent's output is still read, so an agent writing while it is sent
one never waits on the run. Every frame each way gets its seq and ``t`` in the run's
wire log (:func:`open_log`: acp-tee's writer, :class:`acp_pipes.tee.logfile.WireLog`)
as it comes or goes. At the end the agent's input is closed and, after a grace, its
process group ended (:meth:`AgentPipes.end`)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import BinaryIO

from acp_pipes.io.wire import A2C, C2A, header
from acp_pipes.replay.trace.options import ReplayOptions
from acp_pipes.replay.trace.recording import Ahead
from acp_pipes.replay.trace.spawn import exited, signal_agent, stop_agent
from acp_pipes.tee.logfile import FileSink, WireLog

__all__ = ["AgentPipes", "end_log", "open_log"]

_READ = 65536  # a pipe's default capacity: one read takes what the agent has written
#: Reads of the agent whose log records may wait for the run to wait (at most 1 MiB of
#: frames): an agent that writes faster than the run compares never lets it wait, and
#: its frames' records would wait in memory to the end of the session.
_LOG_BACKLOG = 16


class AgentPipes:
    """The agent's stdout (its frames split at LF into :attr:`live`, ``(seq, raw)``, as
    they come) and stdin (bytes not taken yet in :attr:`out`)."""

    def __init__(self, proc: subprocess.Popen[bytes], log: WireLog):
        if proc.stdout is None or proc.stdin is None:
            raise ValueError("the agent must be started with stdin and stdout on pipes")
        self.proc = proc
        self.log = log
        self.rfd = proc.stdout.fileno()
        self.wfd: int | None = proc.stdin.fileno()
        os.set_blocking(self.rfd, False)
        os.set_blocking(self.wfd, False)
        self.poll = select.poll()
        self.poll.register(self.rfd, select.POLLIN)
        self.live: deque[tuple[int, bytes]] = deque()  # (seq, raw), not yet compared
        self.arrived = 0  # frames read
        self.sent = 0  # frames written whole
        self.eof = False
        self.tail: list[bytes] = []  # the agent's frame still without its LF
        self.out = bytearray()  # bytes for the agent not written yet
        self.written = 0  # bytes written to the agent since out was last empty
        self.ends: deque[int] = deque()  # where each frame in out ends (as written counts)
        self.broken = False  # the agent's input is closed
        self.moved = False  # the last wait read or wrote something

    def wait(self, timeout: float | None, idle: Callable[[], bool] | None = None,
             ahead: Ahead | None = None) -> None:
        """Take what the pipes have ready; when nothing is, write the log and call
        ``idle`` (True: the pipes became ready meanwhile, and were taken), then wait up
        to ``timeout`` s (None: no limit) for the agent's output, room in its input when
        bytes wait to go, or ``ahead``'s trace read. :attr:`moved` says whether bytes
        went either way."""
        self.moved = False
        ready = self.poll.poll(0)
        if not ready:
            self.log.flush()  # all of it before the run waits
            if idle is not None and idle():
                return
            if ahead is not None:
                self.poll.register(ahead.fd, select.POLLIN)
            try:
                ready = self.poll.poll(None if timeout is None
                                       else max(0, int(timeout * 1000) + 1))
            finally:
                if ahead is not None:
                    self.poll.unregister(ahead.fd)
        self.ready(ready, ahead)

    def took(self) -> bool:
        """Take what the pipes have ready now; True when they had something."""
        events = self.poll.poll(0)
        if events:
            self.ready(events)
            return True
        return False

    def ready(self, events: list[tuple[int, int]], ahead: Ahead | None = None) -> None:
        for fd, _ in events:
            if fd == self.rfd:
                self.read()
            elif fd == self.wfd:
                self.write()
            elif ahead is not None:
                ahead.drained()

    def read(self) -> None:
        """Read what the agent has written and give its frames their seqs as they
        come."""
        try:
            chunk = os.read(self.rfd, _READ)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        self.moved = True
        if not chunk:
            self.eof = True
            self.poll.unregister(self.rfd)
            if self.tail:  # the last frame, without LF
                raw = b"".join(self.tail)
                self.tail = []
                self.live.append((self.log.note_frames(A2C, [raw], nolf=True), raw))
                self.arrived += 1
            return
        end = chunk.rfind(b"\n")
        if end < 0:
            self.tail.append(chunk)
            return
        if self.tail:
            self.tail.append(chunk[:end])
            raws = b"".join(self.tail).split(b"\n")
        else:
            raws = chunk[:end].split(b"\n")
        self.tail = [chunk[end + 1:]] if end + 1 < len(chunk) else []
        log = self.log
        seq = log.note_frames(A2C, raws)
        self.live.extend(zip(range(seq, seq + len(raws)), raws, strict=True))
        self.arrived += len(raws)
        if len(log.noted) >= _LOG_BACKLOG:
            log.flush()

    def write(self) -> None:
        """Write what the agent's input pipe has room for."""
        wfd = self.wfd
        if wfd is None:
            return
        try:
            n = os.write(wfd, self.out)
        except BlockingIOError:
            return
        except (OSError, ValueError):
            self.close_input(broken=True)
            return
        self.moved = True
        del self.out[:n]
        self.written += n
        while self.ends and self.ends[0] <= self.written:
            self.ends.popleft()
            self.sent += 1
        if not self.out:
            self.written = 0
            self.poll.unregister(wfd)

    def send(self, raw: bytes, nolf: bool) -> bool:
        """Log a frame, then send it: written at once as far as the pipe has room, the
        rest as the agent reads (:meth:`wait`). False when the agent's input is closed."""
        # what the agent wrote before this frame goes is logged before it (seq is receipt
        # order), and the frame gets its seq before it is sent: the answer follows it
        self.took()
        if self.wfd is None:
            return False
        self.log.note_frames(C2A, [raw], nolf)
        data = raw if nolf else raw + b"\n"
        if not self.out:
            try:
                n = os.write(self.wfd, data)
            except BlockingIOError:
                n = 0
            except (OSError, ValueError):
                self.close_input(broken=True)
                return False
            if n == len(data):
                self.sent += 1
                return True
            self.poll.register(self.wfd, select.POLLOUT)
            self.written = n
            self.out += memoryview(data)[n:]
        else:
            self.out += data
        self.ends.append(self.written + len(self.out))
        return True

    def close_input(self, broken: bool = False) -> None:
        wfd = self.wfd
        if wfd is None:
            return
        if self.out:
            self.poll.unregister(wfd)
            self.out.clear()
            self.ends.clear()
        self.wfd = None
        self.broken = broken
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass

    def drain(self, seconds: float, until_exit: bool = False) -> None:
        """Read the agent's output, up to its EOF (``until_exit``: or its exit) or for
        ``seconds``."""
        until = time.monotonic() + seconds
        while not self.eof and (left := until - time.monotonic()) > 0:
            if until_exit and exited(self.proc, 0):
                return
            self.wait(min(left, 0.05) if until_exit else left)

    def end(self, grace: float, stopped: bool) -> None:
        """The agent's input closed (SIGTERM first when the run ``stopped``), ``grace``
        to exit while its output is read, then its process group ended
        (:func:`acp_pipes.replay.trace.spawn.stop_agent`) and what it wrote last read."""
        proc = self.proc
        self.close_input()
        if stopped:
            signal_agent(proc, signal.SIGTERM)
        until = time.monotonic() + grace
        self.drain(grace, until_exit=True)  # the agent ends once its input does
        self.log.flush()
        if not exited(proc, max(0.0, until - time.monotonic())):
            signal_agent(proc, signal.SIGTERM)
            self.drain(grace, until_exit=True)
        stop_agent(proc, grace)  # SIGKILL what is left of its group, reaped
        self.drain(0.2)  # what it wrote last (a child of its own may hold the pipe)
        self.log.flush()


def open_log(out: BinaryIO | None, argv: Sequence[str], opt: ReplayOptions) -> WireLog:
    """The run's wire log, its header written: its secrets redacted as acp-tee redacts
    them (a key of the run's own: the agent's frames are live, and a run's log is shared
    as a recording is); write errors are the caller's."""
    clock = opt.tick()
    log = WireLog(FileSink(out) if out is not None else None, clock, redact=True)
    if out is not None:
        log.write_header(header(argv, started_ns=clock(), clock=opt.clock, host=opt.host,
                                recorder="acp-replay --client"))
    return log


def end_log(log: WireLog, returncode: int | None) -> None:
    """The log's end record: the agent's exit status (128+N, ``signal`` N, when a
    signal ended it)."""
    log.flush()
    if returncode is None:
        return
    signum = -returncode if returncode < 0 else None
    log.end(128 + signum if signum is not None else returncode, signum)

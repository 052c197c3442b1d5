"""The recording proxy behind ``acp-tee``: run an ACP agent, forward both directions of
its stdio byte for byte, and log every frame to a wire log (:mod:`acp_pipes.wire`).

Use it from a test harness as well as from the CLI::

    from acp_pipes.tee import record

    status = record(["my-agent", "--acp"], "/tmp/session.jsonl",
                    clock="epoch", host=False)   # forwards fds 0 and 1 until the agent ends

Design choices, and why:

- Two threads, one per direction, each ``os.read`` on the raw fd (no Python buffering)
  then ``os.write``. A frame's log record is written *before* the frame is forwarded, with
  one ``os.write`` on an ``O_APPEND`` fd (no user-space buffer), so a crash of the proxy,
  the agent or the client never loses a frame the peer got. Everything up to the last LF
  of each read is forwarded at once; only an unfinished frame is held back until its LF
  arrives (or EOF: then it is forwarded and logged with ``nolf``).
- ``seq`` is the global receipt order across both directions: one lock hands out seq and
  ``t`` (taken under the lock, so ``t`` never goes back as seq grows) and writes the log.
- The bytes forwarded are never changed; secrets are redacted only in the log
  (:mod:`acp_pipes.redact`; only c2a frames mentioning ``mcpServers`` are parsed).
- The log never stops the session: if it cannot be opened or written (bad path, disk
  full), the proxy says so once through ``warn`` and goes on forwarding.
- A peer that goes away is treated as it would be without the proxy. Client stops reading
  (EPIPE on stdout): the agent's stdout is closed too, so the agent sees its own EPIPE.
  Agent stops reading (EPIPE on its stdin): later client input is drained unlogged so the
  client never blocks. The proxy ends when the agent has exited and its stdout is
  drained; client EOF closes the agent's stdin.
- SIGINT, SIGTERM and SIGHUP sent to the proxy are passed on to the agent (when
  ``record`` runs in the main thread); the proxy then waits for the agent as usual. The
  exit status is the agent's (128+N when a signal N killed it).
"""

from __future__ import annotations

import os
import select
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Sequence

import orjson

from acp_pipes.wire import A2C, C2A, frame_record, header, make_clock

__all__ = ["open_log", "record"]

_READ = 65536  # a pipe's default capacity; larger reads only allocate more per read
_FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

Warn = Callable[[str], None]


def _stderr_warn(message: str) -> None:
    try:
        print(f"acp-tee: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def open_log(path: str) -> int:
    """Open (create or truncate) a wire log for appending, mode 0600.

    An existing regular file is tightened to 0600 too: the log holds a whole session.
    Raises OSError.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_mode & 0o077:
            os.fchmod(fd, 0o600)
    except OSError:
        pass
    return fd


def _write_all(fd: int, data: bytes) -> None:
    n = os.write(fd, data)
    if n < len(data):  # a pipe or a nearly full disk may take less
        view = memoryview(data)[n:]
        while view:
            n = os.write(fd, view)
            view = view[n:]


class _Log:
    """The wire log writer shared by both directions: seq, clock, redaction, one write
    per read chunk. Never raises: a write error disables it with one warning."""

    def __init__(self, fd: int | None, path: str, clock: Callable[[], int],
                 redact: bool, warn: Warn):
        self.fd = fd
        self.path = path
        self.clock = clock
        self.redact = redact
        self.warn = warn
        self.lock = threading.Lock()
        self.seq = 0

    def write_header(self, record: dict) -> None:
        self._write(orjson.dumps(record) + b"\n")

    def frames(self, direction: str, frames: Iterable[bytes], nolf: bool = False) -> None:
        """Log complete frames (bytes without LF) received together, in order."""
        if self.fd is None:
            return
        redact_here = self.redact and direction == C2A
        dumps = orjson.dumps
        with self.lock:
            t = self.clock()
            seq = self.seq
            out = []
            for raw in frames:
                rec = None
                if redact_here and b"mcpServers" in raw:
                    from acp_pipes.redact import UNCHECKED, redact

                    try:
                        logged, original_hash = redact(raw)
                    except Exception:  # a bug: never log what could not be checked
                        logged, original_hash = UNCHECKED, None
                    if logged is not None:
                        rec = frame_record(seq, t, direction, raw, nolf=nolf,
                                           redacted=logged, original_hash=original_hash)
                if rec is None:
                    try:  # the common case, inline: frame_record's shape for UTF-8
                        rec = {"seq": seq, "t": t, "dir": direction, "raw": raw.decode()}
                        if nolf:
                            rec["nolf"] = True
                    except UnicodeDecodeError:
                        rec = frame_record(seq, t, direction, raw, nolf=nolf)
                out.append(dumps(rec))
                seq += 1
            self.seq = seq
            out.append(b"")
            self._write(b"\n".join(out))

    def _write(self, data: bytes) -> None:
        if self.fd is None:
            return
        try:
            _write_all(self.fd, data)
        except OSError as e:
            self.fd_failed(e)

    def fd_failed(self, e: OSError) -> None:
        self.warn(f"cannot write the log {self.path}: {e.strerror or e}; "
                  "the session goes on, no longer recorded")
        self.close()

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


def _pump(src: int, dst: int, direction: str, log: _Log, *, wake: int | None = None,
          on_dst_gone: Callable[[], None] | None = None, stop: threading.Event | None = None
          ) -> None:
    """Copy ``src`` to ``dst`` until EOF, logging each frame before forwarding it.

    ``wake`` (a pipe read end) ends the loop early when it becomes readable. When ``dst``
    goes away, ``on_dst_gone`` runs; without one, the rest of ``src`` is drained unlogged.
    """
    pending = bytearray()  # an unfinished frame, held until its LF
    forwarding = True
    poller = None
    if wake is not None:
        poller = select.poll()
        poller.register(src, select.POLLIN | select.POLLHUP | select.POLLERR)
        poller.register(wake, select.POLLIN)
    while True:
        if poller is not None:
            ready = poller.poll()
            if any(fd == wake for fd, _ in ready):
                return
        try:
            chunk = os.read(src, _READ)
        except OSError:  # EIO, EBADF: the source is gone; treat as EOF
            chunk = b""
        if not chunk:
            break
        if not forwarding:
            continue  # draining a source whose destination is gone
        end = chunk.rfind(b"\n")
        if end < 0:
            pending += chunk
            continue
        end += 1
        if pending:
            pending += chunk[:end]
            block = bytes(pending)
            pending = bytearray(chunk[end:])
        else:
            block = chunk if end == len(chunk) else chunk[:end]
            if end < len(chunk):
                pending = bytearray(chunk[end:])
        frames = block.split(b"\n")
        frames.pop()
        log.frames(direction, frames)
        try:
            _write_all(dst, block)
        except OSError:
            forwarding = False
            if on_dst_gone is not None:
                on_dst_gone()
                return
    if pending and forwarding:
        tail = bytes(pending)
        log.frames(direction, [tail], nolf=True)
        try:
            _write_all(dst, tail)
        except OSError:
            pass


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
    warn: Warn | None = None,
    forward_signals: bool = True,
) -> int:
    """Run ``argv`` as the agent between ``stdin_fd``/``stdout_fd`` and log to ``log_path``.

    ``log_path`` None forwards without logging. The agent's stderr goes to ``stderr_fd``
    (default: inherited) and is not logged. ``capture_env`` names the environment
    variables to record in the header (an unset one is recorded as null). Returns the
    agent's exit status (128+N if signal N killed it; 127/126 if it could not be started,
    as a shell would). Raises ValueError for a bad ``clock`` or an empty ``argv``.
    """
    if not argv:
        raise ValueError("no agent command given")
    warn = warn or _stderr_warn
    tick = make_clock(clock)
    started = tick()
    try:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_fd,
            bufsize=0, close_fds=True,
        )
    except OSError as e:
        warn(f"cannot run {argv[0]}: {e.strerror or e}")
        return 127 if isinstance(e, FileNotFoundError) else 126
    assert proc.stdin is not None and proc.stdout is not None

    log_fd = None
    if log_path is not None:
        try:
            log_fd = open_log(log_path)
        except OSError as e:
            warn(f"cannot write the log {log_path}: {e.strerror or e}; "
                 "the session goes on unrecorded")
    log = _Log(log_fd, log_path or "", tick, not keep_secrets, warn)
    env = {name: os.environ.get(name) for name in capture_env}
    log.write_header(header(argv, started_ns=started, clock=clock, host=host,
                            env=env, keep_secrets=keep_secrets))  # type: ignore[arg-type]

    agent_in = proc.stdin.fileno()
    agent_out = proc.stdout.fileno()
    wake_r, wake_w = os.pipe()

    def client_to_agent() -> None:
        try:
            _pump(stdin_fd, agent_in, C2A, log, wake=wake_r)
        except Exception as e:  # a bug: say so, and let the agent see EOF rather than hang
            warn(f"internal error forwarding to the agent: {type(e).__name__}: {e}")
        try:
            proc.stdin.close()  # client EOF (or shutdown): the agent sees EOF too
        except OSError:
            pass

    def agent_to_client() -> None:
        try:
            _pump(agent_out, stdout_fd, A2C, log, on_dst_gone=agent_gone_reader)
        except Exception as e:
            warn(f"internal error forwarding to the client: {type(e).__name__}: {e}")
            agent_gone_reader()

    def agent_gone_reader() -> None:
        # The client stopped reading: let the agent see a closed pipe, as it would
        # without the proxy in between.
        try:
            proc.stdout.close()
        except OSError:
            pass

    c2a = threading.Thread(target=client_to_agent, name="acp-tee c2a", daemon=True)
    a2c = threading.Thread(target=agent_to_client, name="acp-tee a2c", daemon=True)

    saved: dict[int, object] = {}
    if forward_signals and threading.current_thread() is threading.main_thread():
        def forward(signum: int, _frame: object) -> None:
            if proc.returncode is None:
                try:
                    os.kill(proc.pid, signum)
                except OSError:
                    pass

        for sig in _FORWARDED_SIGNALS:
            try:
                saved[sig] = signal.signal(sig, forward)
            except (OSError, ValueError):
                pass
    try:
        c2a.start()
        a2c.start()
        status = proc.wait()
        a2c.join()  # drain what the agent wrote before it ended
        try:
            os.write(wake_w, b"x")
        except OSError:
            pass
        c2a.join(timeout=1.0)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
    if not c2a.is_alive():
        for fd in (wake_r, wake_w):
            os.close(fd)
        for f in (proc.stdin, proc.stdout):
            try:
                f.close()
            except OSError:
                pass
    log.close()
    return 128 - status if status < 0 else status

"""The two directions of an acp-tee session: copy each pipe byte for byte, logging every
frame before it is forwarded (imported by :func:`acp_pipes.tee.record` once the agent
is running).

- Two threads, one per direction, each ``os.read`` on the raw fd (no Python buffering)
  then ``os.write``. A frame's log record is written *before* the frame is forwarded, with
  one ``os.write`` on an ``O_APPEND`` fd (no user-space buffer), so a crash of the proxy,
  the agent or the client never loses a frame the peer got. Everything up to the last LF
  of each read is forwarded at once; only an unfinished frame is held back until its LF
  arrives (or EOF: then it is forwarded and logged with ``nolf``).
- ``seq`` is the global receipt order across both directions: one lock hands out seq and
  ``t`` (taken under the lock, so ``t`` never goes back as seq grows) and writes the log.
- Only frames whose bytes may hold a secret (:meth:`acp_pipes.protocol.redact.Redactor.wants`: a
  few substring tests a frame, or a ``\\u`` escape that could spell a key) are parsed, to
  redact them in the log; one key per recording, drawn when the first frame is logged.
- A peer that goes away is treated as it would be without the proxy. Client stops reading
  (EPIPE on stdout): the agent's stdout is closed too, so the agent sees its own EPIPE.
  Agent stops reading (EPIPE on its stdin): later client input is drained unlogged so the
  client never blocks. The session ends when the agent has exited and its stdout is
  drained; client EOF closes the agent's stdin.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from acp_pipes.errors import Note
from acp_pipes.io.wire import A2C, C2A, header
from acp_pipes.tee.logfile import WireLog, open_sink
from acp_pipes.tee.logfile import write_all as _write_all

TYPE_CHECKING = False
if TYPE_CHECKING:
    from acp_pipes.tee.script import Lockstep

__all__ = ["Session", "header_record"]

_READ = 65536  # a pipe's default capacity; larger reads only allocate more per read


def header_record(log: WireLog, argv: Sequence[str], **fields) -> dict:
    """The log's header, its credentials (the agent's command line, captured variables,
    the URLs of the remote sides: :mod:`acp_pipes.tee.secrets`) as tokens unless
    secrets are kept."""
    if log.redact:
        from acp_pipes.tee.secrets import logged_argv, logged_env, logged_url

        argv = logged_argv(argv, log.token)
        if fields.get("env"):
            fields["env"] = logged_env(fields["env"], log.token)
        if fields.get("transport"):
            fields["transport"] = {k: logged_url(v, log.token) if isinstance(v, str) else v
                                   for k, v in fields["transport"].items()}
    return header(argv, **fields)


def _pump(src: int, dst: int, direction: str, log: WireLog, *, wake: int | None = None,
          on_dst_gone: Callable[[], None] | None = None,
          observe: Callable[[list[bytes]], None] | None = None) -> None:
    """Copy ``src`` to ``dst`` until EOF, logging each frame before forwarding it.

    ``wake`` (a pipe read end) ends the loop early when it becomes readable. When ``dst``
    goes away, ``on_dst_gone`` runs; without one, the rest of ``src`` is drained unlogged.
    ``observe`` gets the frames of each read once they are forwarded.
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
        if observe is not None:
            observe(frames)
    if pending and forwarding:
        tail = bytes(pending)
        log.frames(direction, [tail], nolf=True)
        try:
            _write_all(dst, tail)
        except OSError:
            pass
        if observe is not None:
            observe([tail])


class Session:
    """The proxy's side of one agent: both pumps and the log, between ``start`` and
    ``finish`` (the caller owns the agent process and waits for it in between)."""

    def __init__(self, agent_in: int, agent_out: int, *, stdin_fd: int, stdout_fd: int,
                 note: Note, script: Iterable[bytes] | None = None):
        self.agent_in = agent_in
        self.agent_out = agent_out
        self.stdin_fd = stdin_fd
        self.stdout_fd = stdout_fd
        self.note = note
        self.log = WireLog(None, lambda: 0, False, note)
        self._open = {agent_in, agent_out}
        self._wake_r, self._wake_w = os.pipe()
        #: when the client's input ended (time.monotonic()), None while it goes on
        self.input_ended: float | None = None
        self.lockstep = None
        if script is None:
            self._c2a = threading.Thread(target=self._client_to_agent, name="acp-tee c2a",
                                         daemon=True)
        else:
            from acp_pipes.tee.script import Lockstep

            self.lockstep = Lockstep()
            self._c2a = threading.Thread(target=self._script_to_agent,
                                         args=(script, self.lockstep), name="acp-tee c2a",
                                         daemon=True)
        self._a2c = threading.Thread(target=self._agent_to_client, name="acp-tee a2c",
                                     daemon=True)

    def open_log(self, spec: str | None, argv: Sequence[str], clock: Callable[[], int], *,
                 redact: bool, on_open: Note | None = None) -> None:
        """Start logging where ``spec`` (``-o``) says (None: forward only); ``on_open``
        gets the path of the log opened. Failing to open it is said once and the session
        goes on unrecorded."""
        sink = None
        if spec is not None:
            try:
                sink = open_sink(spec, argv)
            except OSError as e:
                self.note(f"cannot write the log {e.filename or spec}: {e.strerror or e}; "
                          "the session goes on unrecorded")
            else:
                if on_open is not None:
                    on_open(sink.path)
        self.log = WireLog(sink, clock, redact, self.note)

    def write_header(self, argv: Sequence[str], **fields: object) -> None:
        self.log.write_header(header_record(self.log, argv, **fields))

    def start(self) -> None:
        self._c2a.start()
        self._a2c.start()

    def drain(self, timeout: float | None = None) -> bool:
        """After the agent has exited: read what it wrote to the end of its stdout, for
        at most ``timeout`` seconds (None: however long); True once it is read."""
        self._a2c.join(timeout)
        return not self._a2c.is_alive()

    def finish(self, status: int | None = None, signal: int | None = None) -> None:
        """After the agent has exited and its output was drained (:meth:`drain`; what
        a process it left behind still sends is not the session's): stop reading the
        client; the log ends with an end record of exit ``status`` (None: no end
        record)."""
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
        self._c2a.join(timeout=1.0)
        # a thread still in a read keeps its fds: closing them could hit a reused number
        if not self._c2a.is_alive() and not self._a2c.is_alive():
            for fd in (self._wake_r, self._wake_w):
                os.close(fd)
            for fd in tuple(self._open):
                self._close(fd)
        if status is None:
            self.log.close()
        else:
            self.log.end(status, signal)

    def _close(self, fd: int) -> None:
        """Close one of the agent's pipes once (a second close could hit a reused fd)."""
        if fd in self._open:
            self._open.discard(fd)
            try:
                os.close(fd)
            except OSError:
                pass

    def _client_to_agent(self) -> None:
        try:
            _pump(self.stdin_fd, self.agent_in, C2A, self.log, wake=self._wake_r)
        except Exception as e:  # a bug: say so, and let the agent see EOF rather than hang
            self.note(f"internal error forwarding to the agent: {type(e).__name__}: {e}")
        self._close(self.agent_in)  # client EOF (or shutdown): the agent sees EOF too
        self.input_ended = time.monotonic()

    def _script_to_agent(self, script: Iterable[bytes], lockstep: Lockstep) -> None:
        """The client side from the script, each frame once the agent is done with the
        previous one (:mod:`acp_pipes.tee.script`)."""
        from acp_pipes.tee.script import script_frames

        frames, sent = None, 0
        try:
            frames = script_frames(script)
            for frame in frames:
                if not lockstep.wait():
                    self._unsent(1 + sum(1 for _ in frames), sent)
                    break
                lockstep.sending(frame)  # before the agent can answer it
                self.log.frames(C2A, [frame])
                sent += 1  # logged: the log and the note count the same frames
                try:
                    _write_all(self.agent_in, frame + b"\n")
                except OSError:  # the agent stopped reading
                    self._unsent(sum(1 for _ in frames), sent, unread=True)
                    break
            else:
                lockstep.wait()  # the last frame answered too, as an editor ends a session
        except OSError as e:
            self.note(f"cannot read the script: {e.strerror or e}; sent {sent} frames")
        except Exception as e:
            self.note(f"internal error sending the script: {type(e).__name__}: {e}")
        self._close(self.agent_in)  # the script is over: the agent sees EOF
        self.input_ended = time.monotonic()

    def _unsent(self, count: int, sent: int, unread: bool = False) -> None:
        """Say how far the script got; ``unread``: the last frame counted as sent (it is
        logged, as a client's frame is once the client wrote it) met a closed input."""
        last = ", the last after the agent had closed its input" if unread else ""
        self.note(f"the agent ended before the script did: {sent} of its {sent + count} "
                  f"frames were sent{last}")

    def _agent_to_client(self) -> None:
        lockstep = self.lockstep
        try:
            _pump(self.agent_out, self.stdout_fd, A2C, self.log,
                  on_dst_gone=self._client_gone,
                  observe=lockstep.received if lockstep is not None else None)
        except Exception as e:
            self.note(f"internal error forwarding to the client: {type(e).__name__}: {e}")
            self._client_gone()
        if lockstep is not None:
            lockstep.close()  # nothing more will answer the script

    def _client_gone(self) -> None:
        # The client stopped reading: let the agent see a closed pipe, as it would
        # without the proxy in between.
        self._close(self.agent_out)

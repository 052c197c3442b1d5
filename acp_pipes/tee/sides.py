"""The sides a relay joins (:mod:`acp_pipes.tee.relay`), but for the WebSocket one
(:mod:`acp_pipes.tee.websocket`): each receives frames (``(bytes, nolf)``, a
:class:`Binary`, at its end a :class:`Closed`) and sends them. Here: the client on
stdio or a script (``--connect``), and a local agent process behind a listener.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Sequence
from typing import Any, BinaryIO

from acp_pipes.errors import Note
from acp_pipes.tee.logfile import write_all
from acp_pipes.tee.options import GRACE, Options

__all__ = ["Binary", "Closed", "ProcessAgent", "ScriptClient", "StdioClient", "stdio_client"]

_READ = 65536


class Closed:
    """The end of a side: how it ended (a WebSocket close code and reason, or EOF)."""

    def __init__(self, code: int | None = None, reason: str = "", how: str = "eof"):
        self.code = code
        self.reason = reason
        self.how = how


class Binary:
    """A binary WebSocket frame: no ACP message, passed on as it is."""

    def __init__(self, data: bytes):
        self.data = data


class _FdReader:
    """Frames (lines without LF) read from a fd by a thread into an asyncio queue: a
    regular file, a pipe or a tty alike (asyncio's pipe transports take pipes only).
    Items: ``(bytes, nolf)``, then a :class:`Closed`."""

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop):
        self.fd = fd
        self.queue: asyncio.Queue = asyncio.Queue()
        self.loop = loop
        threading.Thread(target=self._run, name=f"acp-tee read {fd}", daemon=True).start()

    def _put(self, item) -> None:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: the session is over
            pass

    def _run(self) -> None:
        pending = bytearray()  # an unfinished line (a bytearray: a long one grows cheaply)
        while True:
            try:
                chunk = os.read(self.fd, _READ)
            except OSError:
                chunk = b""
            if not chunk:
                break
            end = chunk.rfind(b"\n")
            if end < 0:
                pending += chunk
                continue
            pending += chunk[:end]
            for line in bytes(pending).split(b"\n"):
                self._put((line, False))
            pending = bytearray(chunk[end + 1:])
        if pending:
            self._put((bytes(pending), True))
        self._put(Closed())

    async def recv(self):
        return await self.queue.get()


class StdioClient:
    """The client on stdin/stdout (``--connect`` without ``--listen``)."""

    kind = "stdio"

    def __init__(self, in_fd: int, out_fd: int, note: Note):
        self.reader = _FdReader(in_fd, asyncio.get_running_loop())
        self.out_fd = out_fd
        self.note = note
        self.gone = False
        self._binary_said = False

    async def recv(self):
        return await self.reader.recv()

    async def send(self, item) -> bool:
        if isinstance(item, Binary):
            if not self._binary_said:
                self._binary_said = True
                self.note("the agent sent a binary WebSocket frame: stdio cannot carry it "
                          "(logged, not passed on)")
            return False
        if self.gone:
            return False
        data, nolf = item
        try:
            await asyncio.to_thread(write_all, self.out_fd, data if nolf else data + b"\n")
        except OSError:
            self.gone = True
            return False
        return True

    async def close(self, code: int | None = None, reason: str = "") -> None:
        return None


class ScriptClient(StdioClient):
    """``--script FILE`` with ``--connect``: the client's frames come from a script, each
    sent once the agent is done with the previous one, as an editor waits (the
    :class:`~acp_pipes.tee.script.Lockstep` the relay feeds, ``track``); the agent's
    frames go to stdout, as with a stdio agent."""

    def __init__(self, script: BinaryIO, out_fd: int, note: Note, track: Any):
        from acp_pipes.tee.script import script_frames

        self.frames = script_frames(script)
        self.script = script
        self.track = track
        self.out_fd = out_fd
        self.note = note
        self.gone = False
        self._binary_said = False
        self.sent = 0

    async def recv(self):
        if self.sent and not await _in_thread(self.track.wait):
            return Closed()  # the agent's side ended: nothing more will answer
        frame = await _in_thread(next, self.frames, None)
        if frame is None:
            self.script.close()
            return Closed()
        self.sent += 1
        return frame, False


async def _in_thread(fn, *args):
    """``fn(*args)`` in a daemon thread: one blocked in a wait (a Lockstep's) never
    holds up the end of the process as the default executor's threads would."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if not done.done():
            done.set_result(value) if error is None else done.set_exception(error)

    def run() -> None:
        try:
            value = fn(*args)
        except BaseException as e:  # passed to the awaiting task
            loop.call_soon_threadsafe(settle, None, e)
        else:
            loop.call_soon_threadsafe(settle, value, None)

    threading.Thread(target=run, name="acp-tee script", daemon=True).start()
    return await done


def stdio_client(opts: Options, stdin_fd: int, stdout_fd: int, track: Any) -> StdioClient:
    """The client of ``--connect``: stdin, or the script of ``--script``."""
    if opts.script is not None:
        return ScriptClient(opts.script, stdout_fd, opts.note, track)
    return StdioClient(stdin_fd, stdout_fd, opts.note)


class ProcessAgent:
    """A local stdio agent behind a listener: started in its own process group, its
    stdin closed at the end, then signalled and killed after bounded waits."""

    kind = "stdio"

    def __init__(self, argv: Sequence[str], note: Note, stderr_fd: int | None = None,
                 grace: float = GRACE):
        from acp_pipes.tee import spawn

        self.pid, self.stdin, self.stdout = spawn(argv, stderr_fd)
        self.grace = grace  # --grace
        self.reader = _FdReader(self.stdout, asyncio.get_running_loop())
        self.note = note
        self.status: int | None = None
        self.signal: int | None = None
        self._stdin_open = True
        self._ending: asyncio.Future | None = None

    async def recv(self):
        return await self.reader.recv()

    async def send(self, item) -> bool:
        if isinstance(item, Binary) or not self._stdin_open:
            return False
        data, nolf = item
        try:
            await asyncio.to_thread(write_all, self.stdin, data if nolf else data + b"\n")
        except OSError:
            return False
        return True

    async def close(self, code: int | None = None, reason: str = "") -> None:
        if self._stdin_open:
            self._stdin_open = False
            os.close(self.stdin)

    async def end(self) -> None:
        """Wait for the agent to exit after its stdin was closed (``grace``, then SIGTERM
        to its group, ``grace``, then SIGKILL); its exit status in ``status``. Started
        once, when its client goes (:func:`acp_pipes.tee.relay.relay`: an agent that
        outlives its input would hold the connection open), and awaited as often as
        asked."""
        if self._ending is None:
            self._ending = asyncio.ensure_future(self._end())
        await asyncio.shield(self._ending)

    async def _end(self) -> None:
        await self.close()
        # one waitpid for the whole ending: a second one, after the first timed out,
        # would find the agent reaped by the first (ECHILD) and lose its status
        waited = asyncio.ensure_future(asyncio.to_thread(os.waitpid, self.pid, 0))
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                try:
                    os.killpg(self.pid, sig)
                except OSError:
                    pass
            try:
                status = await asyncio.wait_for(asyncio.shield(waited),
                                                self.grace if sig != signal.SIGKILL
                                                else None)
            except TimeoutError:
                continue
            code = os.waitstatus_to_exitcode(status[1])
            self.status = 128 - code if code < 0 else code
            self.signal = -code if code < 0 else None
            break
        await self._end_group()
        try:
            os.close(self.stdout)
        except OSError:
            pass

    async def _end_group(self) -> None:
        """What the agent left in its process group (a tool it started, an MCP server)
        ends with its connection: SIGTERM to the group, SIGKILL ``grace`` seconds later
        (a listener serves connection after connection: none may leave processes
        behind). Safe after the agent was reaped: a pid in use as a process group ID is
        given to no new process."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.pid, sig)
            except OSError:
                return  # nothing is left in it
            deadline = loop.time() + self.grace
            while loop.time() < deadline:
                await asyncio.sleep(0.05)
                try:
                    os.killpg(self.pid, 0)
                except OSError:
                    return

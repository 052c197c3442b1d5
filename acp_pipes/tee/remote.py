"""acp-tee's remote sides: the client or the agent (or both) reached over WebSocket or
Streamable HTTP (the RFD "Streamable HTTP & WebSocket Transport") instead of stdio.

=================  ===================  ============================================
client side        agent side           what it is for
=================  ===================  ============================================
stdio              ``--connect URL``    an editor that speaks stdio reaches a remote
                                        agent
``--listen URL``   ``--connect URL``    a recording reverse proxy
``--listen URL``   ``-- AGENT ARGS``    a local stdio agent served remotely
=================  ===================  ============================================

Design choices, and why:

- aiohttp for both sides of both transports: one well-kept library with a WebSocket
  client and server and an HTTP client and server (SSE is a response body), on asyncio.
  It is imported only here, so the stdio path (:mod:`acp_pipes.tee`) keeps its start-up.
- HTTP/2, which aiohttp lacks, is :mod:`acp_pipes.tee.h2` (h2, the protocol without
  I/O, on asyncio): the listener's socket is asyncio's, and each connection's first
  bytes hand it to aiohttp (HTTP/1.1, WebSocket) or, the HTTP/2 preface, to h2
  (:class:`acp_pipes.tee.accept.Guard`); the HTTP/2 code is imported by the first such
  connection, or by ``--http2``.
- Who may use a listener and how much of it (Host, Origin, a token, the agents running,
  a message's size, how long a connection may idle) is :mod:`acp_pipes.tee.policy`,
  checked for every request and upgrade before anything is read whole or started.
- A frame is relayed as it came: a WebSocket text frame's payload is sent on as the
  same bytes (aiohttp checks that a text frame is UTF-8; ``str.encode`` of that text
  gives the bytes back exactly), a stdio line becomes one text frame without its LF and
  a text frame one stdio line. Binary frames are no ACP messages (the RFD: ignored):
  they are logged as ``ws-binary`` events and passed on as binary frames between two
  WebSocket sides, never to stdio.
- The log is :mod:`acp_pipes.tee.pump`'s writer: each frame is logged before it is
  forwarded, a log failure is said once and the session goes on, secrets are redacted
  in the log only. Handshakes, closes (code and reason), HTTP requests and statuses are
  event records (:func:`acp_pipes.io.wire.event_record`); header values that carry
  credentials are logged as tokens.
- Headers pass through a proxy both ways but for the hop-by-hop ones and the WebSocket
  handshake's own: ``Authorization``, cookies, API keys and ``Acp-*`` reach the agent,
  ``Acp-Connection-Id`` and ``Set-Cookie`` the client; subprotocols are offered upstream
  as the client offered them and the one the agent chose is the one the client gets.
- One log per connection to a listener (a listener serves many): ``-o FILE`` is the
  first connection's log, and later ones go to FILE-1, FILE-2, ... (as a taken name
  does for ``DIR/`` and templates).
- Where stdio input ends (``--connect`` with a stdio client), the agent's connection is
  closed (1000) once every request sent has been answered and every prompt turn is over
  (:class:`acp_pipes.tee.script.Lockstep`), or after ``GRACE`` seconds without a frame.
"""

from __future__ import annotations

import asyncio
import os
import signal
import struct
import sys
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO
from urllib.parse import urlsplit, urlunsplit

import aiohttp
from aiohttp import WSMsgType, web

from acp_pipes.errors import Note, OptionError
from acp_pipes.io.wire import A2C, C2A, event_record, make_clock
from acp_pipes.tee.logfile import WireLog, open_sink, write_all
from acp_pipes.tee.policy import Limits
from acp_pipes.tee.pump import header_record
from acp_pipes.tee.secrets import logged_header
from acp_pipes.tee.secrets import logged_url as _logged_url

__all__ = ["GRACE", "connect_stdio", "listen", "parse_url"]

#: Seconds of silence after which a session whose client input ended is closed anyway,
#: and a closing agent process is signalled (then killed as long again later).
GRACE = 5.0
_READ = 65536

#: Request and response headers never passed on: hop-by-hop, or the handshake's own.
_HOP = frozenset({
    "host", "connection", "keep-alive", "proxy-connection", "te", "trailer",
    "transfer-encoding", "upgrade", "content-length", "content-encoding",
    "sec-websocket-key", "sec-websocket-version", "sec-websocket-accept",
    "sec-websocket-extensions", "sec-websocket-protocol", "accept-encoding", "date",
    "server",
})
class UrlError(OptionError):
    """A --listen or --connect URL acp-tee cannot use."""


def parse_url(url: str, *, listening: bool) -> tuple[str, str, int, str]:
    """``(scheme, host, port, path)`` of a ``ws://`` or ``http://`` URL (``wss``/``https``
    to connect only). A listener binds loopback or the host named; port 0 picks one."""
    parts = urlsplit(url)
    schemes = ("ws", "http") if listening else ("ws", "wss", "http", "https")
    if parts.scheme not in schemes:
        raise UrlError(f"{url!r}: expected a {' or '.join(s + '://' for s in schemes)} URL")
    if not parts.hostname:
        raise UrlError(f"{url!r}: no host")
    try:
        port = parts.port
    except ValueError as e:
        raise UrlError(f"{url!r}: {e}") from None
    if port is None:
        port = 443 if parts.scheme in ("wss", "https") else 80
    return parts.scheme, parts.hostname, port, parts.path or "/"


def logged_headers(headers, log: WireLog) -> list[list[str]]:
    """Headers as the log keeps them: ``[name, value]`` pairs in order, credentials as
    tokens (unless secrets are kept: :func:`acp_pipes.tee.secrets.logged_header`)."""
    if not log.redact:
        return [[k, v] for k, v in headers.items()]
    return [[k, logged_header(k, v, log.token)] for k, v in headers.items()]


def logged_url(url: str, log: WireLog) -> str:
    """``url`` with its user's password (or a user alone) and the values of
    credential-named query parameters as tokens (unless secrets are kept)."""
    return _logged_url(url, log.token) if log.redact else url


def passed_headers(headers) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers.items() if k.lower() not in _HOP]


# -- the sides: each receives and sends frames -----------------------------------------


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
        once, when its client goes (:func:`relay`: an agent that outlives its input would
        hold the connection open), and awaited as often as asked."""
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


class WsSide:
    """One WebSocket, either end (aiohttp's client and server sockets share the API).

    A close acp-tee starts while the relay reads this side is its own handshake, not
    aiohttp's ``close()``: that one reads on to the peer's close frame and drops every
    frame before it, and a proxy must log and pass on every frame it received. So the
    close frame is sent, the relay's reader takes the peer's frames up to its answering
    close frame (GRACE seconds at most, then the connection is dropped), and the socket
    is let go without a second close frame (sockets are made with ``autoclose=False``;
    :meth:`recv` answers a peer's close as aiohttp would). Where the relay no longer
    reads (acp-tee is shutting down), the close reads the peer's frames itself and hands
    them to ``on_late``, which logs them.
    """

    kind = "ws"

    def __init__(self, ws, side: str, note: Note):
        self.ws = ws
        self.side = side  # who is at the other end: "client" or "agent"
        self.note = note
        self._closing: asyncio.Event | None = None  # set once acp-tee's close is done
        self._reading = False  # a relay's recv takes this side's frames
        self._sent_close = False  # acp-tee's close frame is out
        self._dropped = False  # no answer to it came in time: the connection was dropped
        self._ended = asyncio.Event()  # recv has returned the side's end
        #: where frames go that arrive while acp-tee closes a side nobody reads any
        #: more (the relay was stopped: acp-tee is shutting down): the log, set by relay
        self.on_late: Callable[[object], None] | None = None

    async def recv(self):
        self._reading = True
        try:
            msg = await self.ws.receive()
        except BaseException:
            self._reading = False
            raise
        if msg.type is WSMsgType.TEXT:
            return msg.data.encode("utf-8"), False
        if msg.type is WSMsgType.BINARY:
            return Binary(msg.data)
        self._reading = False
        try:
            return await self._end(msg)
        finally:
            self._ended.set()

    async def _end(self, msg) -> Closed:
        if msg.type is WSMsgType.CLOSE:  # code null: a close frame that carried none
            if self._sent_close:
                _let_go(self.ws)  # the answer to acp-tee's close: the handshake is done
            else:
                await self._answer()
            return Closed(msg.data or None, msg.extra or "", "close")
        if msg.type is WSMsgType.ERROR:
            # a malformed frame (aiohttp's WebSocketError) closed it with its own code:
            # 1002 a protocol error, 1007 text that is not UTF-8, 1009 too large
            code = getattr(msg.data, "code", None)
            return Closed(code if isinstance(code, int) and 1000 <= code < 5000 else 1006,
                          f"{type(msg.data).__name__}: {msg.data}", "error")
        if self._dropped:
            return Closed(1006, "no close frame came in answer", "closed")
        # CLOSING/CLOSED: acp-tee closed it (the peer's answering close frame is read
        # by that close: its code once it is done), or the transport went away
        if self._closing is not None:
            try:
                await asyncio.wait_for(self._closing.wait(), GRACE)
            except TimeoutError:
                pass
        return Closed(self.ws.close_code, "", "closed")

    async def _answer(self) -> None:
        """Answer the peer's close frame as aiohttp's autoclose does (code 1000)."""
        try:
            if isinstance(self.ws, web.WebSocketResponse):
                await self.ws.close(drain=False)  # the peer is about to go
            else:
                await self.ws.close()
        except (ConnectionError, RuntimeError, aiohttp.ClientError):
            pass

    async def send(self, item) -> bool:
        if self.ws.closed or self._sent_close:
            return False
        try:
            if isinstance(item, Binary):
                await self.ws.send_frame(item.data, WSMsgType.BINARY)
                return True
            data, _nolf = item
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                self.note(f"a frame for the {self.side} is not UTF-8: a WebSocket text "
                          "frame cannot carry it (logged, not passed on)")
                return False
            await self.ws.send_frame(data, WSMsgType.TEXT)
        except (ConnectionError, RuntimeError, aiohttp.ClientError):
            return False
        return True

    async def close(self, code: int | None = None, reason: str = "") -> None:
        if code in (None, 1005, 1006, 1015) or not (1000 <= code < 5000):
            code = 1000  # not to be sent in a close frame: the end was not a clean close
        message = reason.encode("utf-8")[:123]
        if self.ws.closed or self._sent_close:
            return
        if self._reading:
            await self._handshake(code, message)
            return
        if self.on_late is not None:  # nobody reads it any more: acp-tee shuts down
            await self._read_to_close(code, message, self.on_late)
            return
        if self._closing is None:
            self._closing = asyncio.Event()
        try:
            await self.ws.close(code=code, message=message)
        except (ConnectionError, RuntimeError, aiohttp.ClientError):
            pass
        finally:
            self._closing.set()

    async def _handshake(self, code: int, message: bytes) -> None:
        """Send the close frame; the relay's reader logs and passes on what the peer
        still sends, up to its close frame; no answer in GRACE seconds drops it."""
        self._sent_close = True
        try:
            await self.ws.send_frame(struct.pack("!H", code) + message, WSMsgType.CLOSE)
        except (ConnectionError, RuntimeError, aiohttp.ClientError):
            pass
        else:
            try:
                await asyncio.wait_for(self._ended.wait(), GRACE)
                return
            except TimeoutError:
                pass
        if not self._ended.is_set():
            self._dropped = True
            _let_go(self.ws)


    async def _read_to_close(self, code: int, message: bytes,
                             on_late: Callable[[object], None]) -> None:
        """The close handshake where the relay no longer reads: the peer's frames up
        to its close frame go to ``on_late`` (logged), GRACE seconds at most."""
        self._sent_close = True
        try:
            await self.ws.send_frame(struct.pack("!H", code) + message, WSMsgType.CLOSE)
            async with asyncio.timeout(GRACE):
                while True:
                    msg = await self.ws.receive()
                    if msg.type is WSMsgType.TEXT:
                        on_late((msg.data.encode("utf-8"), False))
                    elif msg.type is WSMsgType.BINARY:
                        on_late(Binary(msg.data))
                    else:
                        break
        except (TimeoutError, ConnectionError, RuntimeError, aiohttp.ClientError):
            pass
        finally:
            self._ended.set()
            if not self.ws.closed:
                _let_go(self.ws)


def _let_go(ws) -> None:
    """Close a WebSocket's connection without sending (another) close frame: aiohttp
    has no public call for it, ``close()`` always sends one."""
    ws._set_closed()
    if isinstance(ws, web.WebSocketResponse):
        ws._close_transport()
    else:
        ws._response.close()


# -- a session: two sides and the log ---------------------------------------------------


def open_log(spec: str | None, name: Sequence[str], nth: int, note: Note, tick,
             redact: bool, on_open: Note | None):
    """The log of a listener's ``nth`` connection (see the module's docstring)."""
    sink = None
    if spec is not None:
        try:
            sink = open_sink(spec, name, nth=nth)
        except OSError as e:
            note(f"cannot write the log {e.filename or spec}: {e.strerror or e}; "
                 "the session goes on unrecorded")
        else:
            if on_open is not None:
                on_open(sink.path)
    return WireLog(sink, tick, redact, note)


async def relay(client, agent, log: WireLog, *, input_ends_session: bool) -> Closed:
    """Relay frames both ways until one side ends; returns how the agent side ended.

    ``input_ends_session`` (a stdio client): the client's EOF closes the agent's side
    once every request is answered (or after GRACE seconds of silence); otherwise a
    client's close is passed on at once, with its code and reason.
    """
    from acp_pipes.tee.script import Lockstep

    track = getattr(client, "track", None) or Lockstep()  # a script's waits on this one
    ended: list[Closed] = []

    async def client_to_agent() -> None:
        while True:
            item = await client.recv()
            if isinstance(item, Closed):
                break
            if isinstance(item, Binary):
                log.event(event_record(0, "ws-binary", "client", **_bytes_field(item.data)))
            else:
                log.frames(C2A, [item[0]], nolf=item[1])
                track.sending(item[0])
            await agent.send(item)
        if client.kind == "ws":
            log.event(event_record(0, "ws-close", "client", code=item.code,
                                   reason=item.reason))
        if input_ends_session:
            await _answered(track)
        # a side that broke the protocol was closed with its code (1002, 1007, 1009);
        # the other side is told of no error of its own: closed as after a lost peer
        await agent.close(None if item.how == "error" else item.code, item.reason)
        if isinstance(agent, ProcessAgent):
            await agent.end()  # bounded: its output ends with it, and the relay with that

    async def agent_to_client() -> Closed:
        while True:
            item = await agent.recv()
            if isinstance(item, Closed):
                break
            if isinstance(item, Binary):
                log.event(event_record(0, "ws-binary", "agent", **_bytes_field(item.data)))
            else:
                log.frames(A2C, [item[0]], nolf=item[1])
                track.received([item[0]])
            await client.send(item)
        track.close()
        if agent.kind == "ws":
            log.event(event_record(0, "ws-close", "agent", code=item.code,
                                   reason=item.reason))
        ended.append(item)
        await client.close(None if item.how == "error" else item.code, item.reason)
        return item

    def late(direction: str, side: str):
        def log_it(item) -> None:
            if isinstance(item, Binary):
                log.event(event_record(0, "ws-binary", side, **_bytes_field(item.data)))
            else:
                log.frames(direction, [item[0]], nolf=item[1])
        return log_it

    if client.kind == "ws":
        client.on_late = late(C2A, "client")
    if agent.kind == "ws":
        agent.on_late = late(A2C, "agent")
    up = asyncio.ensure_future(client_to_agent())
    down = asyncio.ensure_future(agent_to_client())
    try:
        await down
    finally:
        if not up.done():
            up.cancel()
        try:
            await up
        except (asyncio.CancelledError, Exception):
            pass
    return ended[0]


async def _answered(track) -> None:
    """Until every request sent is answered and every turn is over (then the agent's
    side may close), or GRACE seconds pass without a frame from the agent."""
    while True:
        heard = track.heard
        if await asyncio.to_thread(track.settled, GRACE) or track.heard == heard:
            return


def _bytes_field(data: bytes) -> dict:
    """A binary frame's bytes as the log keeps them: base64, whatever they hold."""
    import base64

    return {"raw_b64": base64.b64encode(data).decode("ascii")}


# -- stdio client, remote agent -----------------------------------------------------------


class Options:
    """What a remote acp-tee run was asked for (the CLI's options)."""

    def __init__(self, *, log_path: str | None, clock: str = "system", host: bool = True,
                 env: dict | None = None, keep_secrets: bool = False,
                 note: Note | None = None, on_log: Note | None = None,
                 headers: Sequence[tuple[str, str]] = (), protocols: Sequence[str] = (),
                 stderr_fd: int | None = None, on_listen: Note | None = None,
                 http2: bool = False, grace: float = GRACE,
                 script: BinaryIO | None = None,
                 allow_origins: Sequence[str] = (), allow_hosts: Sequence[str] = (),
                 token: bytes | None = None, limits: Limits | None = None):
        self.log_path = log_path
        self.clock = clock
        self.tick = make_clock(clock)
        self.host = host
        self.env = env or {}
        self.keep_secrets = keep_secrets
        self.note = note or (lambda m: print(f"acp-tee: {m}", file=sys.stderr))
        self.on_log = on_log
        self.headers = list(headers)
        self.protocols = list(protocols)
        self.stderr_fd = stderr_fd
        self.on_listen = on_listen
        self.http2 = http2  # --http2: HTTP/2 to an http(s):// agent
        self.grace = grace  # --grace: for a local agent behind a listener to end
        self.script = script  # --script: the client's frames, with --connect from stdio
        # a listener's policy (acp_pipes.tee.policy): who may use it, and how much
        self.allow_origins = list(allow_origins)  # --allow-origin
        self.allow_hosts = list(allow_hosts)  # --allow-host
        self.token = token  # --token-file, or ACP_LISTEN_TOKEN
        self.limits = limits or Limits()  # --max-agents, --max-message, the timeouts

    def log(self, argv: Sequence[str], nth: int, transport: dict) -> WireLog:
        log = open_log(self.log_path, argv or ["remote"], nth, self.note, self.tick,
                       not self.keep_secrets, self.on_log)
        log.write_header(header_record(log, argv, started_ns=self.tick(), clock=self.clock,
                                       host=self.host, env=self.env,
                                       keep_secrets=self.keep_secrets, transport=transport))
        return log


def connect_stdio(url: str, opts: Options, stdin_fd: int = 0, stdout_fd: int = 1) -> int:
    """``acp-tee --connect URL``: the client on stdio, the agent at ``url``. Returns the
    exit status: 0 when the agent's side closed cleanly (1000, or after the client's
    input ended), 1 when it closed otherwise, 126 when it could not be reached."""
    scheme = parse_url(url, listening=False)[0]
    if scheme in ("http", "https"):
        from acp_pipes.tee.http import connect_stdio as http_connect

        return asyncio.run(_with_signals(http_connect(url, opts, stdin_fd, stdout_fd)))
    return asyncio.run(_with_signals(_connect_ws_stdio(url, opts, stdin_fd, stdout_fd)))


#: The signal that stopped this process's remote session, if one did.
_SIGNALLED: list[int] = []


def _stopped_by() -> int | None:
    return _SIGNALLED[0] if _SIGNALLED else None


async def _with_signals(work):
    """Run ``work`` until it ends or SIGINT/SIGTERM/SIGHUP arrives (then it is
    cancelled, and ends its log); the status is 128+N for signal N."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    got = _SIGNALLED

    def stop(sig: int) -> None:
        if not got:
            got.append(sig)
        task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(sig, stop, sig)
        except (ValueError, RuntimeError):  # not the main thread
            pass
    try:
        return await task
    except asyncio.CancelledError:
        if got:
            return 128 + got[0]
        raise


async def _connect_ws_stdio(url: str, opts: Options, stdin_fd: int, stdout_fd: int) -> int:
    transport = {"client": "stdio", "agent": "ws", "connect": url}
    log = opts.log([], 0, transport)
    status = 126
    try:
        async with aiohttp.ClientSession() as http:
            agent = await _open_ws(http, url, opts.headers, opts.protocols, log, opts.note)
            if agent is None:
                return status
            from acp_pipes.tee.script import Lockstep

            client = stdio_client(opts, stdin_fd, stdout_fd, Lockstep())
            try:
                closed = await relay(client, agent, log, input_ends_session=True)
            except asyncio.CancelledError:
                status = 128 + (_stopped_by() or signal.SIGINT)
                await agent.close(1001, "acp-tee was interrupted")
                raise
            status = 0 if closed.code in (1000, 1001, None) else 1
    finally:
        log.end(status, None)
    return status


async def _open_ws(http: aiohttp.ClientSession, url: str, headers, protocols, log: WireLog,
                   note: Note) -> WsSide | None:
    """Connect to the agent's WebSocket, logging the handshake (``ws-open``, or the
    status it was refused with); None, said, when it cannot be reached."""
    shown = logged_url(url, log)
    try:
        if conflicting_credentials(url, headers):
            raise ValueError(CREDENTIALS_CLASH)  # (aiohttp refuses them too, less clearly)
        ws = await http.ws_connect(url, headers=headers, protocols=protocols,
                                   max_msg_size=0, autoping=True, autoclose=False,
                                   compress=0)
    except aiohttp.WSServerHandshakeError as e:
        log.event(event_record(0, "ws-open", "agent", url=shown, status=e.status,
                               request=logged_headers(_headers(headers), log),
                               response=logged_headers(e.headers or {}, log)))
        note(f"cannot connect to {shown}: the agent answered {e.status} {e.message}")
        return None
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as e:
        # ValueError: a request aiohttp will not make (the URL's user:password beside an
        # Authorization header: a client's, behind a listener)
        why = str(e) if isinstance(e, ValueError) else _why(e)
        log.event(event_record(0, "ws-open", "agent", url=shown, status=None,
                               error=why if isinstance(e, ValueError)
                               else str(e) or type(e).__name__))
        note(f"cannot connect to {shown}: {why}")
        return None
    log.event(event_record(0, "ws-open", "agent", url=shown, status=101,
                           protocol=ws.protocol,
                           request=logged_headers(_headers(headers), log),
                           response=logged_headers(ws._response.headers, log)))
    return WsSide(ws, "agent", note)


#: Why a request to an agent whose URL carries ``user:password`` was not sent: the
#: client's ``Authorization`` would be a second set of credentials (aiohttp refuses to
#: send both, and the agent could not tell which is meant).
CREDENTIALS_CLASH = ("the --connect URL's user:password and the client's Authorization "
                     "header cannot both be sent")


def conflicting_credentials(url: str, headers) -> bool:
    """Whether ``url`` carries user information and ``headers`` an Authorization."""
    return urlsplit(url).username is not None and any(
        k.lower() == "authorization" for k, _v in headers)


def _headers(pairs):
    from multidict import CIMultiDict

    return CIMultiDict(pairs)


def _why(e: BaseException) -> str:
    inner = getattr(e, "os_error", None) or e.__cause__ or e
    return getattr(inner, "strerror", None) or str(inner) or type(inner).__name__


# -- the listener ---------------------------------------------------------------------------


def listen(url: str, opts: Options, *, connect: str | None = None,
           argv: Sequence[str] = ()) -> int:
    """``acp-tee --listen URL``: serve clients at ``url`` (WebSocket; and Streamable HTTP
    for an ``http://`` URL), each connection relayed to ``connect`` or to a new
    ``argv`` agent process, and logged. Runs until SIGINT, SIGTERM or SIGHUP (then
    every open connection is closed with 1001 and its log ended); returns 0 then."""
    return asyncio.run(_with_signals(_listen(url, opts, connect, list(argv))))


class Listener:
    """The state of one listener: its policy (:mod:`acp_pipes.tee.policy`), its
    connections (each behind a :class:`acp_pipes.tee.accept.Guard`), counted for their
    logs' names."""

    def __init__(self, url: str, opts: Options, connect: str | None, argv: list[str]):
        from acp_pipes.tee.policy import Policy, check_bind

        self.url = url
        self.opts = opts
        self.connect = connect
        self.argv = argv
        self.count = 0
        self.http: aiohttp.ClientSession | None = None
        self.tasks: set[asyncio.Task] = set()
        self.live: set = set()  # WsSide of clients still connected
        self.h2: set = set()  # HTTP/2 connections of clients (acp_pipes.tee.h2.H2Server)
        self.guards: dict = {}  # transport -> its Guard
        self.scheme, host, _port, self.path = parse_url(url, listening=True)
        check_bind(url, host, opts.token)
        self.policy = Policy(host, allow_origins=opts.allow_origins,
                             allow_hosts=opts.allow_hosts, token=opts.token,
                             limits=opts.limits, note=opts.note)

    def transport(self, kind: str) -> dict:
        t = {"client": kind, "listen": self.url}
        if self.connect is not None:
            t["agent"] = "http" if self.connect.startswith("http") else "ws"
            t["connect"] = self.connect
        else:
            t["agent"] = "stdio"
        return t

    def next_log(self, kind: str) -> WireLog:
        nth = self.count
        self.count += 1
        return self.opts.log(self.argv, nth, self.transport(kind))

    # -- what a client sends, as the log keeps it and as it is passed on

    def logged_headers(self, headers, log: WireLog) -> list[list[str]]:
        """A client's headers as the log keeps them: credentials as tokens, and the
        listener's own token never (not even with --keep-secrets)."""
        out = logged_headers(headers, log)
        if self.policy.token is not None:
            from acp_pipes.tee.policy import TOKEN_LOGGED

            out = [[k, TOKEN_LOGGED if k.lower() == "authorization" else v] for k, v in out]
        return out

    def passed_headers(self, headers) -> list[tuple[str, str]]:
        """A client's headers as a proxy passes them on: the listener's token is its
        own, not the agent's."""
        out = passed_headers(headers)
        if self.policy.token is not None:
            out = [(k, v) for k, v in out if k.lower() != "authorization"]
        return out

    # -- requests

    def refused(self, method: str, path: str, host: str | None, headers, guard,
                version: str):
        """The refusal of a request the policy turns away (said on stderr), or None."""
        origins = headers.getall("Origin", [])
        refusal = self.policy.check(host, ", ".join(origins) if origins else None,
                                    headers.getall("Authorization", []),
                                    guard.local if guard is not None else None,
                                    preflight=_preflight(method, headers))
        if refusal is not None:
            self.policy.refused(guard.peer if guard is not None else "?",
                                f"{method} {path} (HTTP/{version})", refusal)
        return refusal

    async def handle(self, request: web.Request) -> web.StreamResponse:
        guard = self.guards.get(request.transport)
        if guard is not None:
            guard.started()
        try:
            return await self._handle(request, guard)
        finally:
            if guard is not None:
                guard.finished()

    async def _handle(self, request: web.Request, guard) -> web.StreamResponse:
        refusal = self.refused(request.method, request.path, request.headers.get("Host"),
                               request.headers, guard, "1.1")
        if refusal is not None:
            return _refuse(refusal)
        if request.path != self.path:
            return web.Response(status=404, text="404: Not Found")
        if request.method == "GET" and request.headers.get("Upgrade", "").lower() == "websocket":
            return await self.websocket(request, guard)
        if self.scheme == "http":
            from acp_pipes.tee.http import AioExchange
            from acp_pipes.tee.http import handle as http_handle

            ex = AioExchange(request, self.policy, guard)
            await self.streamable(ex, http_handle)
            return ex.response  # type: ignore[return-value]  # (every handler answers)
        return web.Response(status=426, text="this endpoint speaks WebSocket only\n",
                            headers={"Upgrade": "websocket"})

    async def h2_request(self, ex) -> None:
        """One request that came over HTTP/2 (:mod:`acp_pipes.tee.h2`): Streamable HTTP,
        as over HTTP/1.1 (WebSocket has no HTTP/2 form here: it upgrades HTTP/1.1)."""
        refusal = self.refused(ex.method, ex.path, ex.host, ex.headers, ex.guard, "2")
        if refusal is not None:
            return await ex.respond(refusal.status, text=refusal.text,
                                    headers=refusal.headers)
        if ex.path != self.path:
            return await ex.respond(404, text="404: Not Found")
        if self.scheme == "http":
            from acp_pipes.tee.http import handle as http_handle

            return await self.streamable(ex, http_handle)
        return await ex.respond(426, text="this endpoint speaks WebSocket only\n",
                                headers=[("Upgrade", "websocket")])

    async def streamable(self, ex, http_handle) -> None:
        """A Streamable HTTP request that passed the policy, over either HTTP version.
        A page of an allowed origin (``--allow-origin``) is answered with CORS headers,
        its preflight by the listener itself when it serves a local agent (a proxy
        passes it on: the agent's server answers it)."""
        origin = ex.headers.get("Origin")
        if self.connect is None and origin is not None:
            if _preflight(ex.method, ex.headers):
                return await ex.respond(204, headers=self.policy.preflight(
                    origin, ex.headers.get("Access-Control-Request-Headers")))
            ex.cors = self.policy.cors(origin)
        return await http_handle(self, ex)

    async def websocket(self, request: web.Request, guard) -> web.StreamResponse:
        refusal = self.policy.take_agent()
        if refusal is not None:
            self.policy.refused(guard.peer if guard is not None else "?",
                                "a WebSocket upgrade", refusal)
            return _refuse(refusal)
        task = asyncio.current_task()
        self.tasks.add(task)  # type: ignore[arg-type]  # (a handler runs in a task)
        try:
            return await self._websocket(request)
        finally:
            self.tasks.discard(task)
            self.policy.agent_ended()

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        opts = self.opts
        log = self.next_log("ws")
        offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")
                   if p.strip()]
        here = urlunsplit((self.scheme.replace("http", "ws"), request.host,
                           request.path, request.query_string, ""))
        log.event(event_record(0, "ws-open", "client", url=logged_url(here, log),
                               status=None, protocols=_logged_protocols(offered, log),
                               request=self.logged_headers(request.headers, log)))
        agent: WsSide | ProcessAgent | None
        agent, chosen, extra = None, None, {}
        status: int = 0
        sig = None
        try:
            if self.connect is not None:
                up = self.connect
                if request.query_string:
                    up += ("&" if "?" in up else "?") + request.query_string
                # (self.http: opened with --connect)
                agent = await _open_ws(self.http,  # type: ignore[arg-type]
                                       up, self.passed_headers(request.headers)
                                       + opts.headers, offered or opts.protocols, log,
                                       opts.note)
                if agent is None:
                    status = 126
                    return web.Response(status=502, text="the agent cannot be reached\n")
                chosen = agent.ws.protocol
                extra = {k: v for k, v in passed_headers(agent.ws._response.headers)
                         if k.lower().startswith("acp-") or k.lower() == "set-cookie"}
            else:
                try:
                    agent = ProcessAgent(self.argv, opts.note, opts.stderr_fd, opts.grace)
                except (OSError, ValueError) as e:
                    opts.note(f"cannot run {self.argv[0]}: {getattr(e, 'strerror', None) or e}")
                    status = 127 if isinstance(e, FileNotFoundError) else 126
                    return web.Response(status=502, text="the agent cannot be run\n")
                extra = {"Acp-Connection-Id": str(uuid.uuid4())}
                # a local agent speaks the subprotocols --protocol names: the first the
                # client offers of them is chosen
                chosen = next((p for p in offered if p in opts.protocols), None)
            limits = self.policy.limits
            ws = _ClientWs(protocols=[chosen] if chosen else (),
                           max_msg_size=limits.max_message, autoping=True, autoclose=False,
                           compress=False, heartbeat=limits.idle_timeout)
            for k, v in extra.items():
                ws.headers.add(k, v)
            await ws.prepare(request)
            log.event(event_record(0, "ws-accept", "client", status=101,
                                   protocol=_logged_protocols([ws.ws_protocol], log)[0]
                                   if ws.ws_protocol else None,
                                   response=logged_headers(ws.headers, log)))
            client = WsSide(ws, "client", opts.note)
            self.live.add(client)
            try:
                closed = await relay(client, agent, log, input_ends_session=False)
                status = 0 if closed.code in (1000, 1001, None) else 1
            except asyncio.CancelledError:
                status = 128 + (_stopped_by() or signal.SIGINT)
                await client.close(1001, "acp-tee is shutting down")
                await agent.close(1001, "acp-tee is shutting down")
                raise
            finally:
                self.live.discard(client)
            return ws
        finally:
            if isinstance(agent, ProcessAgent):
                await agent.close()
                await asyncio.shield(agent.end())
                status, sig = agent.status if agent.status is not None else status, agent.signal
            log.end(status, sig)


def _preflight(method: str, headers) -> bool:
    """Whether a request is a browser's CORS preflight (an OPTIONS that asks whether
    a request may be sent: it sends nothing itself)."""
    return method == "OPTIONS" and "Access-Control-Request-Method" in headers


def _refuse(refusal) -> web.Response:
    """A refused HTTP/1.1 request's answer; the connection is not kept (a refused
    client gets no second request on it)."""
    resp = web.Response(status=refusal.status, text=refusal.text,
                        headers=refusal.headers or None)
    resp.force_close()
    return resp


def _logged_protocols(offered: list[str], log: WireLog) -> list[str]:
    """The subprotocols a client offered as the log keeps them: a bearer token carried
    there (as browsers must, and Kubernetes does) as a redaction token."""
    if not log.redact:
        return offered
    from acp_pipes.tee.secrets import logged_protocols

    return logged_protocols(offered, log.token)


class _ClientWs(web.WebSocketResponse):
    """aiohttp's server side of a WebSocket, holding clients to RFC 6455's rule that a
    client masks every frame it sends (5.1: the server closes the connection at one it
    did not mask, 1002), as aiohttp itself does not. Its frame reader is fed through
    :class:`_Masked`, which reads each frame's header and passes the bytes on."""

    def _post_start(self, request, protocol, writer) -> None:
        handler = request.protocol
        tail, handler._message_tail = handler._message_tail, b""  # bytes after the head
        super()._post_start(request, protocol, writer)
        masked = _Masked(handler._payload_parser, self._reader)
        handler._payload_parser = masked
        if tail:
            masked.feed_data(tail)  # as aiohttp's set_parser feeds them


class _Masked:
    """A WebSocket frame reader's stand-in that checks each client frame's mask bit
    and passes the bytes to the reader: at an unmasked frame, the bytes before it go
    on, then the reader's queue gets a protocol error (the close is 1002, as for any
    malformed frame). It reads headers only: a payload is skipped by its length."""

    def __init__(self, reader, queue):
        self.reader = reader
        self.queue = queue
        self.head = bytearray()  # the header read so far
        self.skip = 0  # payload bytes of the current frame still to come
        self.failed = False

    def feed_eof(self) -> None:
        self.reader.feed_eof()

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if self.failed:
            return True, b""
        at = self._unmasked_at(data)
        if at is None:
            return self.reader.feed_data(data)
        self.failed = True
        if at:
            self.reader.feed_data(data[:at])
        from aiohttp.http_websocket import WebSocketError, WSCloseCode

        self.queue.set_exception(WebSocketError(
            WSCloseCode.PROTOCOL_ERROR, "a client frame was not masked (RFC 6455, 5.1)"))
        return True, b""

    def _unmasked_at(self, data: bytes) -> int | None:
        """Where in ``data`` the first unmasked frame starts (0 also when its header
        began in an earlier read), or None."""
        head = self.head
        pos, n = 0, len(data)
        if not self.skip and not head:  # the common read: whole frames, each header whole
            while pos + 2 <= n:
                second = data[pos + 1]
                if not second & 0x80:
                    return pos
                size = second & 0x7F
                start = pos + _head_size(second)
                if start > n:
                    break
                if size == 126:
                    size = int.from_bytes(data[pos + 2:pos + 4], "big")
                elif size == 127:
                    size = int.from_bytes(data[pos + 2:pos + 10], "big")
                if start + size > n:
                    self.skip = start + size - n
                    return None
                pos = start + size
            if pos == n:
                return None
        while pos < n:
            if self.skip:
                step = min(self.skip, n - pos)
                self.skip -= step
                pos += step
                continue
            need = 2 if len(head) < 2 else _head_size(head[1])
            take = min(need - len(head), n - pos)
            head += data[pos:pos + take]
            pos += take
            if len(head) < 2:
                continue
            if not head[1] & 0x80:
                return max(pos - len(head), 0)
            if len(head) < _head_size(head[1]):
                continue
            size = head[1] & 0x7F
            self.skip = (int.from_bytes(head[2:4], "big") if size == 126 else
                         int.from_bytes(head[2:10], "big") if size == 127 else size)
            head.clear()
        return None


def _head_size(second: int) -> int:
    """A masked frame's header length, from its second byte (RFC 6455, 5.2)."""
    size = second & 0x7F
    return 2 + (2 if size == 126 else 8 if size == 127 else 0) + 4


async def _listen(url: str, opts: Options, connect: str | None, argv: list[str]) -> int:
    from acp_pipes.tee.accept import Guard

    listener = Listener(url, opts, connect, argv)
    _scheme, host, port, path = parse_url(url, listening=True)
    app = web.Application(client_max_size=0)  # bodies are read by the handlers, capped
    app.router.add_route("*", "/{anything:.*}", listener.handle)  # a 404 passes the guard
    # aiohttp's keep-alive timer is a backstop only: the Guard closes idle connections
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0,
                           keepalive_timeout=opts.limits.idle_timeout)
    await runner.setup()
    # aiohttp's protocol factory: a handler per HTTP/1.1 connection (set up by now)
    http1: Callable[[], asyncio.Protocol] = runner.server  # type: ignore[assignment]
    loop = asyncio.get_running_loop()
    quiet = _one_line_errors(loop, listener.policy.say)
    _more_descriptors()
    try:
        server = await loop.create_server(lambda: Guard(http1, listener), host, port,
                                          backlog=128)
    except OSError as e:
        opts.note(f"cannot listen on {url}: {e.strerror or e}")
        await runner.cleanup()
        quiet()
        return 2
    real = server.sockets[0].getsockname()[1]  # port 0: the one the system chose
    listener.policy.bound(real)
    shown = urlunsplit((_scheme, f"{host}:{real}", path, "", ""))
    (opts.on_listen or opts.note)(f"listening on {shown}")
    http: aiohttp.ClientSession
    if connect is not None and connect.startswith("http"):
        from acp_pipes.tee.http import client_for

        http = client_for(connect, opts)  # aiohttp's, or its calls over HTTP/2
    else:
        http = aiohttp.ClientSession()
    listener.http = http
    try:
        await asyncio.Event().wait()  # until a signal cancels it: the listener's end
    except asyncio.CancelledError:
        if not _SIGNALLED:
            raise
    finally:
        server.close()
        for task in list(listener.tasks):
            task.cancel()
        for conn in list(listener.h2):
            conn.shut()
        if listener.tasks:
            await asyncio.wait(list(listener.tasks), timeout=GRACE * 2 + 2)
        await http.close()
        await runner.cleanup()
        for conn in getattr(listener, "http_conns", {}).values():  # never DELETEd
            conn.end()
        for served in list(getattr(listener, "served", {}).values()):
            await served.end()
        listener.policy.flush()
        quiet()
    return 0


def _one_line_errors(loop: asyncio.AbstractEventLoop, say: Callable[[str], None]
                     ) -> Callable[[], None]:
    """While a listener runs, what asyncio and aiohttp report (a request aiohttp could
    not parse, an accept() without descriptors left, a connection reset) is one line
    through ``say``, never a traceback on the terminal. Returns what puts it back."""
    import logging

    def line(message: str, e: BaseException | None) -> None:
        text = " ".join((message + (f": {type(e).__name__}: {e}" if e else "")).split())
        say(text if len(text) <= 300 else text[:297] + "...")

    def handle(_loop, context: dict) -> None:
        line(context.get("message") or "error", context.get("exception"))

    class OneLine(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            line(record.getMessage(), record.exc_info[1] if record.exc_info else None)

    handler = OneLine(logging.WARNING)
    loggers = [logging.getLogger(name) for name in ("aiohttp", "asyncio")]
    saved = [(lg.propagate, lg.level) for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.propagate = False
        if lg.level == logging.NOTSET:
            lg.setLevel(logging.WARNING)
    previous = loop.get_exception_handler()
    loop.set_exception_handler(handle)

    def restore() -> None:
        loop.set_exception_handler(previous)
        for lg, (propagate, level) in zip(loggers, saved, strict=True):
            lg.removeHandler(handler)
            lg.propagate = propagate
            lg.setLevel(level)

    return restore


def _more_descriptors() -> None:
    """Raise the soft limit on open files to the hard one: every connection is a
    descriptor, and an agent two more; the default soft limit (often 1024) would let a
    few hundred idle sockets lock real clients out before their timeouts end them."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            want = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ImportError, ValueError, OSError):
        pass


def headers_from(values: Sequence[str]) -> list[tuple[str, str]]:
    """``--header 'Name: value'`` options as pairs; OptionError for one without a colon.

    So that a secret never sits on the command line (where ``ps`` shows it to every
    user), the value's last word may name where it is: ``@FILE`` (the file's first
    line) or ``$VAR`` (an environment variable): ``--header 'Authorization: Bearer
    $AGENT_TOKEN'``, ``--header X-Api-Key:@key.txt``. OptionError for a file that
    cannot be read or a variable that is not set."""
    out = []
    for v in values:
        name, colon, value = v.partition(":")
        if not colon or not name.strip():
            raise OptionError(f"--header needs 'Name: value', got {v!r}")
        out.append((name.strip(), _header_value(name.strip(), value.strip())))
    return out


def _header_value(name: str, value: str) -> str:
    head, space, last = value.rpartition(" ")
    if last.startswith("@") and len(last) > 1:
        path = os.path.expanduser(last[1:])
        try:
            with open(path, "rb") as f:
                found = f.read(65536).decode("utf-8", "replace").split("\n", 1)[0].strip()
        except OSError as e:
            raise OptionError(f"--header {name}: cannot read {path}: {e.strerror or e}"
                              ) from None
    elif last.startswith("$") and len(last) > 1:
        found = os.environ.get(last[1:], "")
        if not found:
            raise OptionError(f"--header {name}: ${last[1:]} is not set")
    else:
        return value
    if "\r" in found or "\n" in found:
        raise OptionError(f"--header {name}: a header value is one line")
    return head + space + found

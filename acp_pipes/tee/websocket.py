"""The WebSocket side of acp-tee: one WebSocket, either end (:class:`WsSide`), acp-tee's
handshake with an agent's WebSocket (:func:`open_ws`), and a client's upgrade at the
listener relayed to an agent (:func:`serve_upgrade`, once the listener's policy let it
in: :meth:`acp_pipes.tee.listener.Listener.websocket`).

A frame is relayed as it came: a text frame's payload is sent on as the same bytes
(aiohttp checks that a text frame is UTF-8; ``str.encode`` of that text gives the bytes
back exactly). The handshake, a close (code and reason) and a binary frame are event
records of the log.
"""

from __future__ import annotations

import asyncio
import signal
import struct
import uuid
from collections.abc import Callable
from urllib.parse import urlunsplit

import aiohttp
from aiohttp import WSMsgType, web

from acp_pipes.errors import Note
from acp_pipes.io.wire import event_record
from acp_pipes.tee.headers import (
    CREDENTIALS_CLASH,
    conflicting_credentials,
    failure_reason,
    header_dict,
    logged_headers,
    logged_protocols,
    logged_url,
    passed_headers,
)
from acp_pipes.tee.masking import ClientWs
from acp_pipes.tee.options import GRACE
from acp_pipes.tee.relay import relay, stopped_by
from acp_pipes.tee.sides import Binary, Closed, ProcessAgent

TYPE_CHECKING = False
if TYPE_CHECKING:
    from acp_pipes.tee.logfile import WireLog

__all__ = ["WsSide", "open_ws", "serve_upgrade"]


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


async def open_ws(http: aiohttp.ClientSession, url: str, headers, protocols, log: WireLog,
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
                               request=logged_headers(header_dict(headers), log),
                               response=logged_headers(e.headers or {}, log)))
        note(f"cannot connect to {shown}: the agent answered {e.status} {e.message}")
        return None
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as e:
        # ValueError: a request aiohttp will not make (the URL's user:password beside an
        # Authorization header: a client's, behind a listener)
        why = str(e) if isinstance(e, ValueError) else failure_reason(e)
        log.event(event_record(0, "ws-open", "agent", url=shown, status=None,
                               error=why if isinstance(e, ValueError)
                               else str(e) or type(e).__name__))
        note(f"cannot connect to {shown}: {why}")
        return None
    log.event(event_record(0, "ws-open", "agent", url=shown, status=101,
                           protocol=ws.protocol,
                           request=logged_headers(header_dict(headers), log),
                           response=logged_headers(ws._response.headers, log)))
    return WsSide(ws, "agent", note)


# -- a client's upgrade at the listener ---------------------------------------------------


class _NoAgent(Exception):
    """The agent of an upgrade could not be reached or run: the exit status its log
    ends with, and the text of the client's 502."""

    def __init__(self, status: int, text: str):
        super().__init__(text)
        self.status = status
        self.text = text


async def serve_upgrade(listener, request: web.Request) -> web.StreamResponse:
    """A client's WebSocket upgrade, let in by the listener's policy: its agent reached
    (``--connect``) or started (``-- AGENT``), the upgrade answered with the subprotocol
    the agent chose, the two relayed and logged until one side ends."""
    log = listener.next_log("ws")
    offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")
               if p.strip()]
    here = urlunsplit((listener.scheme.replace("http", "ws"), request.host,
                       request.path, request.query_string, ""))
    log.event(event_record(0, "ws-open", "client", url=logged_url(here, log),
                           status=None, protocols=logged_protocols(offered, log),
                           request=listener.logged_headers(request.headers, log)))
    agent: WsSide | ProcessAgent | None = None
    status: int = 0
    sig = None
    try:
        try:
            agent, chosen, extra = await (
                _agent_at(listener, request, offered, log) if listener.connect is not None
                else _agent_run(listener, offered))
        except _NoAgent as e:
            status = e.status
            return web.Response(status=502, text=e.text)
        ws = await _accept(listener, request, chosen, extra, log)
        client = WsSide(ws, "client", listener.opts.note)
        listener.live.add(client)
        try:
            closed = await relay(client, agent, log, input_ends_session=False)
            status = 0 if closed.code in (1000, 1001, None) else 1
        except asyncio.CancelledError:
            status = 128 + (stopped_by() or signal.SIGINT)
            await client.close(1001, "acp-tee is shutting down")
            await agent.close(1001, "acp-tee is shutting down")
            raise
        finally:
            listener.live.discard(client)
        return ws
    finally:
        if isinstance(agent, ProcessAgent):
            await agent.close()
            await asyncio.shield(agent.end())
            status, sig = agent.status if agent.status is not None else status, agent.signal
        log.end(status, sig)


async def _agent_at(listener, request: web.Request, offered: list[str], log: WireLog
                    ) -> tuple[WsSide, str | None, dict[str, str]]:
    """``--connect``: the agent's WebSocket, offered the client's subprotocols (or
    ``--protocol``'s); the one it chose, and its ``Acp-*`` and cookies for the client."""
    opts = listener.opts
    # (listener.http: opened with --connect)
    agent = await open_ws(listener.http, listener.upstream(request.query_string),
                          listener.passed_headers(request.headers) + opts.headers,
                          offered or opts.protocols, log, opts.note)
    if agent is None:
        raise _NoAgent(126, "the agent cannot be reached\n")
    extra = {k: v for k, v in passed_headers(agent.ws._response.headers)
             if k.lower().startswith("acp-") or k.lower() == "set-cookie"}
    return agent, agent.ws.protocol, extra


async def _agent_run(listener, offered: list[str]
                     ) -> tuple[ProcessAgent, str | None, dict[str, str]]:
    """``-- AGENT``: a new agent process, and a new Acp-Connection-Id; a local agent
    speaks the subprotocols ``--protocol`` names: the first the client offers of them
    is chosen."""
    opts = listener.opts
    try:
        agent = ProcessAgent(listener.argv, opts.note, opts.stderr_fd, opts.grace)
    except (OSError, ValueError) as e:
        opts.note(f"cannot run {listener.argv[0]}: {getattr(e, 'strerror', None) or e}")
        raise _NoAgent(127 if isinstance(e, FileNotFoundError) else 126,
                       "the agent cannot be run\n") from None
    chosen = next((p for p in offered if p in opts.protocols), None)
    return agent, chosen, {"Acp-Connection-Id": str(uuid.uuid4())}


async def _accept(listener, request: web.Request, chosen: str | None, extra: dict[str, str],
                  log: WireLog) -> ClientWs:
    """The client's upgrade answered (101), within the listener's limits, and logged."""
    limits = listener.policy.limits
    ws = ClientWs(protocols=[chosen] if chosen else (),
                  max_msg_size=limits.max_message, autoping=True, autoclose=False,
                  compress=False, heartbeat=limits.idle_timeout)
    for k, v in extra.items():
        ws.headers.add(k, v)
    await ws.prepare(request)
    log.event(event_record(0, "ws-accept", "client", status=101,
                           protocol=logged_protocols([ws.ws_protocol], log)[0]
                           if ws.ws_protocol else None,
                           response=logged_headers(ws.headers, log)))
    return ws

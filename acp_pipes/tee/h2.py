"""HTTP/2 for acp-tee's Streamable HTTP, both ends: the listener's server side for a
client that speaks HTTP/2 (:class:`H2Server`, h2c with prior knowledge, on the port that
serves HTTP/1.1 and WebSocket) and a client to an agent's server (:class:`H2Client`,
``--http2``: h2c with prior knowledge for ``http://``, ALPN ``h2`` for ``https://``).

The RFD asks for HTTP/2 (one connection carries the POSTs in flight beside the
long-lived SSE streams); aiohttp, acp-tee's HTTP stack, has none. ``h2`` (python-hyper)
is the protocol without I/O: it turns bytes into events and calls into frames, and this
module runs it on asyncio's transports, one connection per :class:`_H2` protocol, one
:class:`_Stream` per request. The handlers of :mod:`acp_pipes.tee.http` see an HTTP/2
request as they see an HTTP/1.1 one (:class:`H2Exchange`), and the client answers the
calls of aiohttp's that they make, so each request is logged as over HTTP/1.1 (with
``"http": "2"``). Imported only when HTTP/2 is used: a listener's first HTTP/2
connection, or ``--http2``.

Flow control: a body is sent as the peer's windows allow (a stream waits for its
WINDOW_UPDATE); what is received is acknowledged as the handler takes it, so a slow
reader holds its peer back rather than filling acp-tee's memory. Header names are
lower case on the wire (HTTP/2 has no other), and are logged so.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import ssl
from urllib.parse import unquote, urlsplit

import aiohttp
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
from multidict import CIMultiDict

#: The connection-level receive window acp-tee offers (the default, 64 KiB, would make
#: a peer wait for each acknowledgement on a busy connection).
_WINDOW = 1 << 24

#: The receive window of each stream acp-tee offers (the default is 64 KiB too).
_STREAM_WINDOW = 1 << 20

#: How many streams a peer may have open at once on one connection.
_STREAMS = 1000

#: Headers HTTP/2 forbids (RFC 9113, 8.2.2): a request or an answer carries them never.
_CONNECTION_SPECIFIC = frozenset({"connection", "keep-alive", "proxy-connection",
                                  "transfer-encoding", "upgrade", "host"})


class H2Error(aiohttp.ClientError):
    """The agent's HTTP/2 connection failed, refused a stream or reset it (an
    aiohttp.ClientError, as the handlers take the HTTP/1.1 client's errors)."""


class _Stream:
    """One stream's state: the headers received, the body as it comes, the end."""

    def __init__(self, sid: int):
        self.id = sid
        self.headers: list[tuple[str, str]] | None = None
        self.chunks: collections.deque[tuple[bytes, int]] = collections.deque()
        self.ended = False  # the peer's END_STREAM
        self.reset: str | None = None  # why the stream cannot go on (RST_STREAM, loss)
        self.sent_end = False
        self.changed = asyncio.Event()  # headers, data, the end, a reset
        self.window = asyncio.Event()  # the peer's flow control window grew

    def wake(self) -> None:
        self.changed.set()
        self.window.set()


class _H2(asyncio.Protocol):
    """One HTTP/2 connection on an asyncio transport, either side."""

    def __init__(self, client_side: bool):
        config = h2.config.H2Configuration(client_side=client_side, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config=config)
        self.streams: dict[int, _Stream] = {}
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.goaway = False
        self.writable = asyncio.Event()
        self.writable.set()

    # -- asyncio's calls

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.conn.initiate_connection()
        self.conn.update_settings({
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: _STREAM_WINDOW,
            # h2's default, 100, would refuse the streams of a client with ~100 sessions
            # open (a GET each, beside the POSTs in flight)
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: _STREAMS})
        self.conn.increment_flow_control_window(_WINDOW - 65535)
        self.flush()

    def data_received(self, data: bytes) -> None:
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError as e:
            self.flush()  # h2's GOAWAY, then the end
            self.broken(e)
            return
        for event in events:
            self.on_event(event)
        self.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.writable.set()
        for st in self.streams.values():
            if not st.ended or not st.sent_end:
                st.reset = st.reset or "the connection was lost"
            st.wake()

    def pause_writing(self) -> None:
        # What the peer sends may need an answer (h2 acknowledges each PING and SETTINGS
        # itself): read nothing more while the peer reads nothing, so those answers
        # queue up to one read's worth, never without end.
        self.writable.clear()
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.writable.set()
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    # -- events

    def on_event(self, event) -> None:
        st = self.streams.get(getattr(event, "stream_id", 0) or 0)
        if isinstance(event, (h2.events.RequestReceived, h2.events.ResponseReceived)):
            if isinstance(event, h2.events.RequestReceived):
                st = self.request(event.stream_id)
            if st is not None:
                st.headers = list(event.headers)  # type: ignore[arg-type]  # (str: utf-8)
                st.wake()
        elif isinstance(event, h2.events.DataReceived):
            if st is not None:
                st.chunks.append((event.data, event.flow_controlled_length))
                st.wake()
            else:  # nobody reads it: give the window back at once
                self._ack(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            if st is not None:
                st.ended = True
                st.wake()
        elif isinstance(event, h2.events.StreamReset):
            if st is not None:
                st.reset = f"the stream was reset ({_code(event.error_code)})"
                st.wake()
        elif isinstance(event, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
            for s in self.streams.values():
                s.window.set()
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.goaway = True
            last = event.last_stream_id or 0
            for sid, s in self.streams.items():
                if sid > last or event.error_code:
                    s.reset = f"the connection was ended ({_code(event.error_code)})"
                    s.wake()

    def request(self, sid: int) -> _Stream:
        """A request came in (server side)."""
        st = self.streams[sid] = _Stream(sid)
        return st

    # -- sending and receiving

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data and self.transport is not None and not self.closed:
            self.transport.write(data)

    def broken(self, e: Exception) -> None:
        """The peer broke the protocol: the connection is closed (h2's GOAWAY, when the
        peer reads it; no waiting on one that reads nothing)."""
        self._lose("the peer broke the HTTP/2 protocol")

    def _lose(self, why: str) -> None:
        for st in self.streams.values():
            st.reset = st.reset or why
            st.wake()
        if self.transport is not None:
            if self.writable.is_set():
                self.transport.close()
            else:
                self.transport.abort()

    def _ack(self, n: int, sid: int) -> None:
        if n:
            with contextlib.suppress(h2.exceptions.StreamClosedError,
                                     h2.exceptions.ProtocolError):
                self.conn.acknowledge_received_data(n, sid)
            self.flush()

    def send_headers(self, st: _Stream, headers: list[tuple[str, str]], end: bool) -> None:
        if st.reset or self.closed:
            raise ConnectionResetError(st.reset or "the connection was lost")
        try:
            self.conn.send_headers(st.id, headers, end_stream=end)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError) as e:
            raise ConnectionResetError(str(e) or type(e).__name__) from None
        st.sent_end = end
        self.flush()

    async def send_data(self, st: _Stream, data: bytes, end: bool = False) -> None:
        """``data`` on stream ``st`` as the peer's windows let it go; a
        ConnectionResetError once the stream or the connection is gone."""
        view = memoryview(data)
        while True:
            if st.reset or self.closed:
                raise ConnectionResetError(st.reset or "the connection was lost")
            if not view:
                break
            try:
                n = min(self.conn.local_flow_control_window(st.id),
                        self.conn.max_outbound_frame_size, len(view))
                if n <= 0:
                    st.window.clear()
                    await st.window.wait()
                    continue
                self.conn.send_data(st.id, bytes(view[:n]))
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError) as e:
                raise ConnectionResetError(str(e) or type(e).__name__) from None
            view = view[n:]
            self.flush()
            if not self.writable.is_set():
                await self.writable.wait()
        if end:
            self.end_stream(st)

    def end_stream(self, st: _Stream) -> None:
        if st.reset or self.closed:
            raise ConnectionResetError(st.reset or "the connection was lost")
        try:
            self.conn.end_stream(st.id)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError) as e:
            raise ConnectionResetError(str(e) or type(e).__name__) from None
        st.sent_end = True
        self.flush()

    def cancel(self, st: _Stream) -> None:
        """Reset a stream acp-tee no longer wants (CANCEL), unless it is over; what it
        received and nobody read is given back to the connection's window."""
        unread = sum(n for _data, n in st.chunks)
        st.chunks.clear()
        if unread:
            self._ack(unread, st.id)
        if not (st.ended and st.sent_end) and not st.reset and not self.closed:
            # answered whole before the request was: "stop sending", without an error
            # (RFC 9113, 8.1), as for a body refused with 413
            code = h2.errors.ErrorCodes.NO_ERROR if st.sent_end else h2.errors.ErrorCodes.CANCEL
            with contextlib.suppress(h2.exceptions.StreamClosedError,
                                     h2.exceptions.ProtocolError):
                self.conn.reset_stream(st.id, code)
                self.flush()
        self.streams.pop(st.id, None)

    async def chunk(self, st: _Stream) -> bytes:
        """The next piece of the body as it came (b"" at its end); raises
        ConnectionResetError when the stream is reset first."""
        while True:
            if st.chunks:
                data, n = st.chunks.popleft()
                self._ack(n, st.id)
                if data:
                    return data
                continue
            if st.ended:
                return b""
            if st.reset:
                raise ConnectionResetError(st.reset)
            st.changed.clear()
            await st.changed.wait()

    async def body(self, st: _Stream, limit: int = 0) -> bytes:
        """The whole body; with a ``limit``, :class:`acp_pipes.tee.http.TooLarge` as
        soon as it has more bytes than that."""
        parts, size = [], 0
        while chunk := await self.chunk(st):
            size += len(chunk)
            if limit and size > limit:
                from acp_pipes.tee.http import TooLarge

                raise TooLarge(None)
            parts.append(chunk)
        return b"".join(parts)


def _code(code) -> str:
    try:
        return h2.errors.ErrorCodes(code).name
    except ValueError:
        return str(code)


def _outbound(headers) -> list[tuple[str, str]]:
    """Headers as HTTP/2 carries them: names in lower case, none it forbids."""
    out = []
    for k, v in headers:
        name = k.lower()
        if name in _CONNECTION_SPECIFIC or (name == "te" and v.lower() != "trailers"):
            continue
        out.append((name, v))
    return out


# -- the listener's side: a client speaks HTTP/2 to acp-tee ---------------------------------


class H2Server(_H2):
    """A client's HTTP/2 connection to acp-tee's listener: each request a task that runs
    the listener's handler (``listener.h2_request``) on an :class:`H2Exchange`, counted
    by the connection's guard (:class:`acp_pipes.tee.accept.Guard`: its header timeout
    runs while no stream is in flight)."""

    def __init__(self, listener, guard=None):
        super().__init__(client_side=False)
        self.listener = listener
        self.guard = guard
        self.tasks: set[asyncio.Task] = set()

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.listener.h2.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.listener.h2.discard(self)

    def broken(self, e: Exception) -> None:
        peer = self.guard.peer if self.guard is not None else "?"
        self.listener.policy.say(f"dropped {peer}: it broke the HTTP/2 protocol "
                                 f"({type(e).__name__}: {e})")
        super().broken(e)

    def on_event(self, event) -> None:
        super().on_event(event)
        if isinstance(event, h2.events.RequestReceived):
            st = self.streams[event.stream_id]
            st.ended = event.stream_ended is not None
            if self.guard is not None:
                self.guard.started()
            task = asyncio.ensure_future(self._serve(H2Exchange(self, st)))
            for where in (self.tasks, self.listener.tasks):
                where.add(task)
                task.add_done_callback(where.discard)

    async def _serve(self, ex: H2Exchange) -> None:
        try:
            await self.listener.h2_request(ex)
            if not ex.answered:
                await ex.respond(500, text="no answer\n")
        except ConnectionError:
            pass  # the client is gone: the handler has logged what it knew
        except Exception as e:  # a bug: said, the stream ended, the connection goes on
            self.listener.opts.note(f"HTTP/2 request {ex.method} {ex.path}: "
                                    f"{type(e).__name__}: {e}")
            if not ex.answered:
                with contextlib.suppress(ConnectionError):
                    await ex.respond(500, text="acp-tee failed on this request\n")
        finally:
            self.cancel(ex.stream)
            if self.guard is not None:
                self.guard.finished()

    def shut(self) -> None:
        """The listener's end: its requests cancelled, a GOAWAY, the connection closed."""
        for task in list(self.tasks):
            task.cancel()
        if not self.closed:
            with contextlib.suppress(h2.exceptions.ProtocolError):
                self.conn.close_connection()
            self.flush()
            if self.transport is not None:
                self.transport.close()


class H2Exchange:
    """One HTTP/2 request to the listener and its answer, with the calls of
    :class:`acp_pipes.tee.http.AioExchange`."""

    version = "2"

    def __init__(self, conn: H2Server, st: _Stream):
        self.conn = conn
        self.stream = st
        pseudo = {k: v for k, v in st.headers or () if k.startswith(":")}
        self.headers: CIMultiDict[str] = CIMultiDict(
            (k, v) for k, v in st.headers or () if not k.startswith(":"))
        self.method = pseudo.get(":method", "")
        target = pseudo.get(":path", "/")
        self.path, _q, self.query_string = target.partition("?")
        self.host = pseudo.get(":authority") or self.headers.get("host")
        self.url = f"{pseudo.get(':scheme', 'http')}://{self.host or ''}{target}"
        self.answered = False
        self.guard = conn.guard
        self.peer = conn.guard.peer if conn.guard is not None else "?"
        self.limit: int = conn.listener.policy.limits.max_message
        self.cors: list[tuple[str, str]] = []  # added to every answer (a page's origin)

    async def read(self) -> bytes:
        from acp_pipes.tee.http import TooLarge

        declared = self.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.limit:
            raise TooLarge(int(declared))
        return await self.conn.body(self.stream, self.limit)

    async def lost(self) -> None:
        """Returns once the stream is reset or the connection lost."""
        st = self.stream
        while not (st.reset or self.conn.closed):
            st.changed.clear()
            await st.changed.wait()

    @property
    def gone(self) -> bool:
        return bool(self.stream.reset) or self.conn.closed

    async def respond(self, status: int, *, text: str | None = None, body: bytes = b"",
                      headers=(), reason: str | None = None, close: bool = False) -> None:
        data = text.encode("utf-8") if text is not None else body
        out = [(":status", str(status))]
        if text is not None:
            out.append(("content-type", "text/plain; charset=utf-8"))
        out += _outbound([*headers, *self.cors])
        if data:
            out.append(("content-length", str(len(data))))
        self.answered = True
        self.conn.send_headers(self.stream, out, end=not data)
        if data:
            await self.conn.send_data(self.stream, data, end=True)

    async def start(self, status: int, headers, reason: str | None = None) -> None:
        self.answered = True
        self.conn.send_headers(self.stream, [(":status", str(status)),
                                             *_outbound([*headers, *self.cors])], end=False)

    async def write(self, data: bytes) -> None:
        await self.conn.send_data(self.stream, data)

    async def finish(self) -> None:
        with contextlib.suppress(ConnectionError):
            self.conn.end_stream(self.stream)


# -- the connector's side: acp-tee speaks HTTP/2 to an agent's server -------------------------


class H2Client:
    """``--http2``: acp-tee's HTTP client to the agent's origin over one HTTP/2
    connection (opened at the first request, again once it has ended), a stream per
    request. The calls are aiohttp.ClientSession's that acp-tee makes (``request``,
    ``get``, ``post``, ``delete``, ``close``, ``async with``); errors are
    :class:`H2Error`. ``http://``: h2c with prior knowledge; ``https://``: TLS offering
    ``h2`` by ALPN, an error when the server does not choose it."""

    http_version = "2"  # (aiohttp's ClientSession has a ``version``: HTTP/1.1's)

    def __init__(self, url: str):
        parts = urlsplit(url)
        self.tls = parts.scheme in ("https", "wss")
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.tls else 80)
        self.scheme = "https" if self.tls else "http"
        self.authority = parts.netloc.rpartition("@")[2]
        self.auth: str | None = None
        if parts.username is not None:  # as aiohttp does: a URL's user is Basic auth
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            self.auth = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
        self.proto: _H2 | None = None
        self.lock = asyncio.Lock()

    async def __aenter__(self) -> H2Client:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        proto, self.proto = self.proto, None
        if proto is not None and not proto.closed:
            with contextlib.suppress(h2.exceptions.ProtocolError):
                proto.conn.close_connection()
            proto.flush()
            if proto.transport is not None:
                proto.transport.close()

    async def _connection(self) -> _H2:
        async with self.lock:
            proto = self.proto
            if proto is not None and not proto.closed and not proto.goaway:
                return proto
            loop = asyncio.get_running_loop()
            context = None
            if self.tls:
                context = ssl.create_default_context()
                context.set_alpn_protocols(["h2"])
            try:
                transport, proto = await loop.create_connection(
                    lambda: _H2(client_side=True), self.host, self.port, ssl=context,
                    server_hostname=self.host if self.tls else None)
            except ssl.SSLError as e:
                from acp_pipes.tee.http import no_protocol_alert

                why = e.reason or str(e)
                if no_protocol_alert(e):
                    why = "the server speaks no HTTP/2 (acp-tee offered h2 only, by ALPN)"
                raise H2Error(f"TLS: {why}") from None
            if self.tls:
                chosen = transport.get_extra_info("ssl_object").selected_alpn_protocol()
                if chosen != "h2":
                    transport.close()
                    raise H2Error(f"{self.authority} did not agree to HTTP/2 "
                                  f"(ALPN: {chosen or 'none chosen'})")
            self.proto = proto
            return proto

    def request(self, method: str, url: str, *, headers=(), data: bytes | None = None,
                **_aiohttp_options) -> _Call:
        return _Call(self, method, url, list(headers), data)

    def get(self, url: str, **kw) -> _Call:
        return self.request("GET", url, **kw)

    def post(self, url: str, **kw) -> _Call:
        return self.request("POST", url, **kw)

    def delete(self, url: str, **kw) -> _Call:
        return self.request("DELETE", url, **kw)

    async def send(self, method: str, url: str, headers: list, data: bytes | None
                   ) -> H2Response:
        proto = await self._connection()
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        out = [(":method", method), (":scheme", self.scheme),
               (":authority", self.authority), (":path", target)]
        if self.auth and not any(k.lower() == "authorization" for k, _v in headers):
            out.append(("authorization", self.auth))
        out += _outbound(headers)
        if data:
            out.append(("content-length", str(len(data))))
        st = None
        try:
            sid = proto.conn.get_next_available_stream_id()
            st = proto.streams[sid] = _Stream(sid)
            proto.send_headers(st, out, end=not data)
            if data:
                try:
                    await proto.send_data(st, data, end=True)
                except ConnectionError:
                    if st.headers is None:
                        raise
                    # answered before the body was all sent (a 413, then "stop
                    # sending": RFC 9113, 8.1): the answer stands
            while st.headers is None:
                if st.reset:
                    raise ConnectionResetError(st.reset)
                if st.ended:
                    raise ConnectionResetError("the stream ended without an answer")
                st.changed.clear()
                await st.changed.wait()
        except (ConnectionError, h2.exceptions.H2Error) as e:
            if st is not None:
                proto.cancel(st)
            raise H2Error(str(e) or type(e).__name__) from None
        except asyncio.CancelledError:
            if st is not None:
                proto.cancel(st)
            raise
        return H2Response(proto, st)


class _Call:
    """A request under way: awaited, or ``async with``, it is the response."""

    def __init__(self, client: H2Client, method: str, url: str, headers: list,
                 data: bytes | None):
        self.args = (method, url, headers, data)
        self.client = client
        self.response: H2Response | None = None

    def __await__(self):
        return self.client.send(*self.args).__await__()

    async def __aenter__(self) -> H2Response:
        self.response = await self.client.send(*self.args)
        return self.response

    async def __aexit__(self, *exc) -> None:
        if self.response is not None:
            self.response.release()


class H2Response:
    """An agent's answer over HTTP/2, with the calls of aiohttp's ClientResponse that
    acp-tee makes (``status``, ``reason``, ``headers``, ``read()``,
    ``content.iter_any()``, ``async with``)."""

    reason = None  # HTTP/2 has no reason phrase

    def __init__(self, proto: _H2, st: _Stream):
        self.proto = proto
        self.stream = st
        headers = st.headers or []
        self.status = int(next((v for k, v in headers if k == ":status"), "0"))
        self.headers: CIMultiDict[str] = CIMultiDict(
            (k, v) for k, v in headers if not k.startswith(":"))
        self.content = self

    async def __aenter__(self) -> H2Response:
        return self

    async def __aexit__(self, *exc) -> None:
        self.release()

    def release(self) -> None:
        self.proto.cancel(self.stream)

    async def read(self) -> bytes:
        try:
            return await self.proto.body(self.stream)
        except ConnectionError as e:
            raise H2Error(str(e)) from None

    async def iter_any(self):
        while True:
            try:
                chunk = await self.proto.chunk(self.stream)
            except ConnectionError as e:
                raise H2Error(str(e)) from None
            if not chunk:
                return
            yield chunk

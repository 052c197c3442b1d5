"""HTTP/2 for acp-tee's Streamable HTTP: the engine both ends run on (the listener's
server side, :mod:`acp_pipes.tee.h2_server`; the client to an agent's server,
:mod:`acp_pipes.tee.h2_client`).

The RFD asks for HTTP/2 (one connection carries the POSTs in flight beside the
long-lived SSE streams); aiohttp, acp-tee's HTTP stack, has none. ``h2`` (python-hyper)
is the protocol without I/O: it turns bytes into events and calls into frames, and this
module runs it on asyncio's transports, one connection per :class:`H2Protocol`, one
:class:`H2Stream` per request. Imported only when HTTP/2 is used: a listener's first
HTTP/2 connection, or ``--http2``.

Flow control: a body is sent as the peer's windows allow (a stream waits for its
WINDOW_UPDATE); what is received is acknowledged as the handler takes it, so a slow
reader holds its peer back rather than filling acp-tee's memory. Header names are
lower case on the wire (HTTP/2 has no other), and are logged so.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib

import aiohttp
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from acp_pipes.tee.policy import TooLarge

__all__ = ["H2Error", "H2Protocol", "H2Stream", "outbound_headers"]

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


class H2Stream:
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


class H2Protocol(asyncio.Protocol):
    """One HTTP/2 connection on an asyncio transport, either side."""

    def __init__(self, client_side: bool):
        config = h2.config.H2Configuration(client_side=client_side, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config=config)
        self.streams: dict[int, H2Stream] = {}
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
        """One of h2's events, to its handler (:data:`_ON_EVENT`: the others, a PING or
        a SETTINGS h2 acknowledges itself, need nothing of acp-tee)."""
        handle = _ON_EVENT.get(type(event))
        if handle is not None:
            handle(self, event, self.streams.get(getattr(event, "stream_id", 0) or 0))

    def _on_request(self, event, st: H2Stream | None) -> None:
        self._on_headers(event, self.request(event.stream_id))

    def _on_headers(self, event, st: H2Stream | None) -> None:
        if st is not None:
            st.headers = list(event.headers)  # (str: utf-8)
            st.wake()

    def _on_data(self, event, st: H2Stream | None) -> None:
        if st is not None:
            st.chunks.append((event.data, event.flow_controlled_length))
            st.wake()
        else:  # nobody reads it: give the window back at once
            self._ack(event.flow_controlled_length, event.stream_id)

    def _on_end(self, event, st: H2Stream | None) -> None:
        if st is not None:
            st.ended = True
            st.wake()

    def _on_reset(self, event, st: H2Stream | None) -> None:
        if st is not None:
            st.reset = f"the stream was reset ({_code(event.error_code)})"
            st.wake()

    def _on_window(self, event, st: H2Stream | None) -> None:
        for s in self.streams.values():
            s.window.set()

    def _on_goaway(self, event, st: H2Stream | None) -> None:
        self.goaway = True
        last = event.last_stream_id or 0
        for sid, s in self.streams.items():
            if sid > last or event.error_code:
                s.reset = f"the connection was ended ({_code(event.error_code)})"
                s.wake()

    def request(self, sid: int) -> H2Stream:
        """A request came in (server side)."""
        st = self.streams[sid] = H2Stream(sid)
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

    def send_headers(self, st: H2Stream, headers: list[tuple[str, str]], end: bool) -> None:
        if st.reset or self.closed:
            raise ConnectionResetError(st.reset or "the connection was lost")
        try:
            self.conn.send_headers(st.id, headers, end_stream=end)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError) as e:
            raise ConnectionResetError(str(e) or type(e).__name__) from None
        st.sent_end = end
        self.flush()

    async def send_data(self, st: H2Stream, data: bytes, end: bool = False) -> None:
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

    def end_stream(self, st: H2Stream) -> None:
        if st.reset or self.closed:
            raise ConnectionResetError(st.reset or "the connection was lost")
        try:
            self.conn.end_stream(st.id)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError) as e:
            raise ConnectionResetError(str(e) or type(e).__name__) from None
        st.sent_end = True
        self.flush()

    def cancel(self, st: H2Stream) -> None:
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

    async def chunk(self, st: H2Stream) -> bytes:
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

    async def body(self, st: H2Stream, limit: int = 0) -> bytes:
        """The whole body; with a ``limit``, :class:`acp_pipes.tee.policy.TooLarge` as
        soon as it has more bytes than that."""
        parts, size = [], 0
        while chunk := await self.chunk(st):
            size += len(chunk)
            if limit and size > limit:
                raise TooLarge(None)
            parts.append(chunk)
        return b"".join(parts)


#: What each of h2's events does to a connection and its streams (by the event's own
#: class: h2's events have no subclasses).
_ON_EVENT = {
    h2.events.RequestReceived: H2Protocol._on_request,
    h2.events.ResponseReceived: H2Protocol._on_headers,
    h2.events.DataReceived: H2Protocol._on_data,
    h2.events.StreamEnded: H2Protocol._on_end,
    h2.events.StreamReset: H2Protocol._on_reset,
    h2.events.WindowUpdated: H2Protocol._on_window,
    h2.events.RemoteSettingsChanged: H2Protocol._on_window,
    h2.events.ConnectionTerminated: H2Protocol._on_goaway,
}


def _code(code) -> str:
    try:
        return h2.errors.ErrorCodes(code).name
    except ValueError:
        return str(code)


def outbound_headers(headers) -> list[tuple[str, str]]:
    """Headers as HTTP/2 carries them: names in lower case, none it forbids."""
    out = []
    for k, v in headers:
        name = k.lower()
        if name in _CONNECTION_SPECIFIC or (name == "te" and v.lower() != "trailers"):
            continue
        out.append((name, v))
    return out

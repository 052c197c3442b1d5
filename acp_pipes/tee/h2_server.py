"""HTTP/2 at acp-tee's listener: a client that speaks it (h2c with prior knowledge, on the
port that serves HTTP/1.1 and WebSocket: :class:`acp_pipes.tee.accept.Guard` hands the
connection over at the preface). Each request is a task that runs the listener's
handler on an :class:`H2Exchange`, which has the calls of the HTTP/1.1 one
(:class:`acp_pipes.tee.http_exchange.AioExchange`): the Streamable HTTP handlers see
both alike, and log a request over HTTP/2 as over HTTP/1.1 (with ``"http": "2"``).
"""

from __future__ import annotations

import asyncio
import contextlib

import h2.events
import h2.exceptions
from multidict import CIMultiDict

from acp_pipes.tee.h2_engine import H2Protocol, H2Stream, outbound_headers
from acp_pipes.tee.policy import TooLarge

__all__ = ["H2Exchange", "H2Server"]


class H2Server(H2Protocol):
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
    :class:`acp_pipes.tee.http_exchange.AioExchange`."""

    version = "2"

    def __init__(self, conn: H2Server, st: H2Stream):
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
        out += outbound_headers([*headers, *self.cors])
        if data:
            out.append(("content-length", str(len(data))))
        self.answered = True
        self.conn.send_headers(self.stream, out, end=not data)
        if data:
            await self.conn.send_data(self.stream, data, end=True)

    async def start(self, status: int, headers, reason: str | None = None) -> None:
        self.answered = True
        self.conn.send_headers(self.stream, [(":status", str(status)),
                                             *outbound_headers([*headers, *self.cors])], end=False)

    async def write(self, data: bytes) -> None:
        await self.conn.send_data(self.stream, data)

    async def finish(self) -> None:
        with contextlib.suppress(ConnectionError):
            self.conn.end_stream(self.stream)

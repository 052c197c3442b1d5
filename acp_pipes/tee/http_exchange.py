"""One request to acp-tee's listener over HTTP/1.1 (aiohttp's) and its answer, with the
calls every Streamable HTTP handler makes of a request whatever its HTTP version (the
HTTP/2 one is :class:`acp_pipes.tee.h2_server.H2Exchange`): so the proxy and the server
in front of a local agent are written once for both.
"""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import web

from acp_pipes.tee.policy import TooLarge

__all__ = ["AioExchange"]


class AioExchange:
    """One HTTP/1.1 request to acp-tee's listener (aiohttp's) and its answer, as the
    Streamable HTTP handlers see a request whatever its HTTP version (the HTTP/2 one:
    :class:`acp_pipes.tee.h2_server.H2Exchange`): ``method``, ``headers``, ``host``,
    ``url``, ``query_string``, ``version``, ``peer``; :meth:`read` the body (at most
    the policy's ``max_message`` bytes: :class:`~acp_pipes.tee.policy.TooLarge` beyond,
    as soon as that is known), then either :meth:`respond` with a whole answer or :meth:`start` a
    streamed one, :meth:`write` to it (a ConnectionError once the client is gone) and
    :meth:`finish` it; :meth:`lost` returns once the client has gone."""

    version = "1.1"

    def __init__(self, request: web.Request, policy, guard=None):
        self.request = request
        self.method = request.method
        self.path = request.path
        self.headers = request.headers
        self.host = request.headers.get("Host")
        self.url = str(request.url)
        self.query_string = request.query_string
        self.response: web.StreamResponse | None = None
        self.limit: int = policy.limits.max_message
        self.guard = guard
        self.peer = guard.peer if guard is not None else "?"
        self.cors: list[tuple[str, str]] = []  # added to every answer (a page's origin)

    async def read(self) -> bytes:
        if self.request.content_length is not None and self.request.content_length > self.limit:
            raise TooLarge(self.request.content_length)
        parts, size = [], 0
        async for chunk in self.request.content.iter_any():
            size += len(chunk)
            if size > self.limit:
                raise TooLarge(None)
            parts.append(chunk)
        return b"".join(parts)

    async def lost(self) -> None:
        if self.guard is not None:
            await asyncio.shield(self.guard.lost)
        else:
            await asyncio.Event().wait()

    @property
    def gone(self) -> bool:
        transport = self.request.transport
        return transport is None or transport.is_closing()

    async def respond(self, status: int, *, text: str | None = None, body: bytes = b"",
                      headers=(), reason: str | None = None, close: bool = False) -> None:
        self.response = web.Response(status=status, reason=reason, text=text,
                                     body=None if text is not None else body,
                                     headers=[*headers, *self.cors] or None)
        if close:  # the rest of the request is not read: the connection goes with it
            self.response.force_close()

    async def start(self, status: int, headers, reason: str | None = None) -> None:
        out = self.response = web.StreamResponse(status=status, reason=reason)
        for k, v in [*headers, *self.cors]:
            out.headers.add(k, v)
        await out.prepare(self.request)

    async def write(self, data: bytes) -> None:
        await self.response.write(data)  # type: ignore[union-attr]  # (after start)

    async def finish(self) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.response.write_eof()  # type: ignore[union-attr]  # (after start)

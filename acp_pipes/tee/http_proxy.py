"""The recording reverse proxy of Streamable HTTP: an HTTP client at acp-tee's listener,
an HTTP agent at ``--connect http(s)://...``. Each request is relayed as its bytes came
and logged in its connection's log (:mod:`acp_pipes.tee.http_streams` says what);
each connection is one of the listener's agents while it lasts.
"""

from __future__ import annotations

import asyncio

import aiohttp

from acp_pipes.io.wire import A2C, C2A
from acp_pipes.tee.headers import (
    CREDENTIALS_CLASH,
    conflicting_credentials,
    failure_reason,
    logged_headers,
    logged_url,
    passed_headers,
)
from acp_pipes.tee.http_client import http_version
from acp_pipes.tee.http_streams import CONNECTION, SseParser, Streams, idle_timeout, sse_fields

__all__ = ["proxy"]


class _Conn:
    """One ACP connection through the proxy (keyed by its Acp-Connection-Id): one of
    the listener's agents (:meth:`acp_pipes.tee.policy.Policy.take_agent`) until its
    DELETE, its idle timeout or the listener's end (:meth:`end`)."""

    def __init__(self, listener, conns: dict):
        self.listener = listener
        self.conns = conns
        self.log = listener.next_log("http")
        self.streams = Streams(self.log)
        self.deleted = False
        self.ended = False
        self.idle = idle_timeout(listener, self._expire)

    async def _expire(self, wait: float) -> None:
        if not self.ended:
            self.listener.policy.say(f"ended a Streamable HTTP connection idle for "
                                     f"{wait:g} s (--idle-timeout)")
            self.end()

    def end(self) -> None:
        if self.ended:
            return
        self.ended = True
        self.idle.stop()
        for key in [k for k, c in self.conns.items() if c is self]:
            del self.conns[key]
        self.log.end(0, None)
        self.listener.policy.agent_ended()


async def proxy(listener, ex, body: bytes) -> None:
    """One Streamable HTTP request, its body read, relayed to ``--connect``'s HTTP agent
    on the connection its Acp-Connection-Id names (a new one, when the policy has room
    for another agent, for a request that names none or one unknown)."""
    conns: dict[str, _Conn] = listener.http_conns
    cid = ex.headers.get(CONNECTION)
    conn = conns.get(cid) if cid else None
    if conn is None:
        refusal = listener.policy.take_agent()
        if refusal is not None:
            listener.policy.refused(ex.peer, f"{ex.method} {ex.path} (HTTP/{ex.version})",
                                    refusal)
            return await ex.respond(refusal.status, text=refusal.text, headers=refusal.headers)
        conn = _Conn(listener, conns)
        if cid:
            conns[cid] = conn
    conn.idle.begin()
    try:
        await _relay(listener, conn, conns, ex, body)
    finally:
        conn.idle.done()
        if (conn.deleted or conn not in conns.values()) and conn.idle.open == 0:
            conn.end()  # DELETEd, or a connection the agent never named: its log ends


async def _relay(listener, conn: _Conn, conns: dict, ex, body: bytes) -> None:
    """The request sent on to the agent, and its answer to the client: whole, or an
    SSE stream relayed event by event."""
    streams = conn.streams
    stream = streams.request(ex, listener)
    if ex.method == "POST" and body:
        streams.frame(C2A, stream, body)
    resp = await _send(listener, conn, ex, body, stream)
    if resp is None:
        return None
    async with resp:
        streams.event("http-response", "agent", stream=stream, status=resp.status,
                      headers=logged_headers(resp.headers, conn.log),
                      http=http_version(listener.http))
        cid = resp.headers.get(CONNECTION)
        if cid and cid not in conns:
            conns[cid] = conn
        if not resp.headers.get("Content-Type", "").startswith("text/event-stream"):
            return await _whole(conn, ex, resp, stream)
        return await _events(streams, ex, resp, stream)


async def _send(listener, conn: _Conn, ex, body: bytes, stream: str):
    """The agent's response to the request, or None once the client was answered 502
    (the agent could not be reached; said, and logged as the response)."""
    up = listener.upstream(ex.query_string)
    headers = listener.passed_headers(ex.headers) + listener.opts.headers
    http = listener.http
    try:
        if conflicting_credentials(up, headers):
            raise ValueError(CREDENTIALS_CLASH)  # (aiohttp refuses them too, less clearly)
        return await http.request(ex.method, up, headers=headers, data=body or None,
                                  allow_redirects=False, auto_decompress=False,
                                  timeout=aiohttp.ClientTimeout(total=None))
    except (aiohttp.ClientError, OSError, ValueError) as e:
        why = str(e) if isinstance(e, ValueError) else failure_reason(e)
        conn.streams.event("http-response", "agent", stream=stream, status=None, error=why,
                           http=http_version(http))
        listener.opts.note(f"cannot reach {logged_url(listener.connect, conn.log)}: {why}")
        await ex.respond(502, text="the agent cannot be reached\n")
        return None


async def _whole(conn: _Conn, ex, resp, stream: str) -> None:
    """An answer that is no SSE stream: read whole, logged, passed on."""
    data = await resp.read()
    if data:
        conn.streams.frame(A2C, stream, data)
    if ex.method == "DELETE" and resp.status < 300:
        conn.deleted = True
    return await ex.respond(resp.status, reason=resp.reason, body=data,
                            headers=passed_headers(resp.headers))


async def _events(streams: Streams, ex, resp, stream: str) -> None:
    """An SSE answer: passed on up to the end of its last complete event, each event
    logged before the client has it; the unfinished rest at the stream's end."""
    await ex.start(resp.status, passed_headers(resp.headers), reason=resp.reason)
    parser = SseParser()
    try:
        async for chunk in resp.content.iter_any():
            events, done = parser.feed(chunk)
            for raw, data in events:
                if data is not None:
                    streams.frame(A2C, stream, data, **sse_fields(raw))
            if done:
                await ex.write(done)
        raw, data = parser.rest()
        if data is not None:
            streams.frame(A2C, stream, data, **sse_fields(raw))
        if raw:
            await ex.write(raw)
        streams.event("http-end", "agent", stream=stream)
    except (ConnectionError, aiohttp.ClientError, asyncio.CancelledError) as e:
        streams.event("http-end", "client" if isinstance(e, ConnectionError) else "agent",
                      stream=stream, error=type(e).__name__)
        if isinstance(e, asyncio.CancelledError):
            raise
    await ex.finish()

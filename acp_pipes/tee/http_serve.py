"""The RFD's Streamable HTTP server in front of a local stdio agent (``acp-tee --listen
http://... -- AGENT``): an agent process per ACP connection, started by its
``initialize``; what the agent sends goes to the stream it belongs to (a request's
answer to the stream the request came on, the rest to its session's GET stream or the
connection's), and everything is logged as the proxy logs it
(:mod:`acp_pipes.tee.http_streams`).
"""

from __future__ import annotations

import asyncio
import contextlib

from acp_pipes.io.wire import A2C, C2A
from acp_pipes.protocol.jsonrpc import IdKey, id_key
from acp_pipes.tee.http_streams import (
    CONNECTION,
    SESSION,
    Streams,
    idle_timeout,
    parse_message,
    session_of,
    sse_fields,
)
from acp_pipes.tee.options import GRACE
from acp_pipes.tee.sides import Closed, ProcessAgent

__all__ = ["serve"]


class _Served:
    """One ACP connection to a local agent process: its log, its streams' queues (what
    the agent sent for a stream no client has opened yet waits there), where each
    request came from (its answer goes back there), and the initialize in flight. One
    of the listener's agents (:meth:`acp_pipes.tee.policy.Policy.take_agent`) until its
    DELETE, its idle timeout or the listener's end (:meth:`end`)."""

    def __init__(self, listener, cid: str, served: dict):
        self.listener = listener
        self.cid = cid
        self.served = served
        self.agent = ProcessAgent(listener.argv, listener.opts.note, listener.opts.stderr_fd,
                                  listener.opts.grace)
        self.log = listener.next_log("http")
        self.streams = Streams(self.log)
        self.queues: dict[str, asyncio.Queue] = {}
        self.origin: dict[IdKey, str] = {}  # request id -> stream
        self.waiting: dict[IdKey, asyncio.Future] = {}  # initialize
        self.ended = False
        self.reader = asyncio.ensure_future(self._read())
        self.idle = idle_timeout(listener, self._expire)

    def queue(self, stream: str) -> asyncio.Queue:
        q = self.queues.get(stream)
        if q is None:
            q = self.queues[stream] = asyncio.Queue()
        return q

    async def _read(self) -> None:
        while True:
            item = await self.agent.recv()
            if isinstance(item, Closed):
                break
            raw = item[0]
            msg = parse_message(raw)
            key = id_key(msg.get("id")) if msg is not None and "method" not in msg else None
            future = self.waiting.pop(key, None) if key is not None else None
            if future is not None:  # initialize's answer: the body of its 200
                if not future.done():
                    future.set_result(raw)
                continue
            if key is not None:
                stream = self.origin.pop(key, "get")
            else:
                sid = session_of(msg)
                stream = f"get:{sid}" if sid else "get"
            event = b"data: " + raw + b"\n\n"
            self.streams.frame(A2C, stream, raw, **sse_fields(event))
            self.queue(stream).put_nowait(event)
        for q in self.queues.values():
            q.put_nowait(None)  # every open stream ends with the agent
        for future in self.waiting.values():
            if not future.done():
                future.set_result(None)

    async def _expire(self, wait: float) -> None:
        if not self.ended:
            self.listener.policy.say(f"ended Streamable HTTP connection {self.cid}, idle "
                                     f"for {wait:g} s (--idle-timeout), and its agent")
            await self.end()

    async def end(self) -> None:
        """The connection's end: no longer served, its agent ended (stdin closed, then
        its process group signalled: :meth:`ProcessAgent.end`), its log ended."""
        if self.ended:
            return
        self.ended = True
        self.idle.stop()
        if self.served.get(self.cid) is self:
            del self.served[self.cid]
        try:
            await self.agent.close()
            await asyncio.shield(self.agent.end())
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self.reader, GRACE)
        finally:
            self.listener.policy.agent_ended()
            self.log.end(self.agent.status if self.agent.status is not None else 0,
                         self.agent.signal)


async def serve(listener, ex, body: bytes) -> None:
    """The RFD's Streamable HTTP server in front of a local agent: POST (200 with the
    body for initialize, 202 otherwise), GET (the connection's or a session's SSE
    stream), DELETE; each request and status logged, as acp-tee logs a proxy's. An
    initialize starts an agent only when the policy has room for one (else 503); one
    whose client is gone before its answer leaves none behind."""
    served: dict[str, _Served] = listener.served
    cid = ex.headers.get(CONNECTION)
    conn = served.get(cid) if cid else None
    method = ex.method
    if method != "POST":
        body = b""  # (a GET or DELETE has none; whatever came is not ACP's)
    msg = parse_message(body) if body else None
    json_body = ex.headers.get("Content-Type", "").startswith("application/json")
    if method == "POST" and conn is None and not json_body:
        return await ex.respond(415, text="POST needs Content-Type: application/json\n")
    if method == "POST" and conn is None and cid is None and msg is not None \
            and msg.get("method") == "initialize":
        conn = await _start(listener, ex, served)
        if conn is None:
            return None
    if conn is None:
        status = 400 if not cid else 404
        return await ex.respond(status, text=("no Acp-Connection-Id" if status == 400
                                              else "unknown Acp-Connection-Id") + "\n")
    conn.idle.begin()
    try:
        return await _serve(listener, ex, conn, body, msg, json_body)
    finally:
        conn.idle.done()


async def _start(listener, ex, served: dict) -> _Served | None:
    """A new connection and its agent, for an initialize; None once it was refused."""
    import uuid

    refusal = listener.policy.take_agent()
    if refusal is not None:
        listener.policy.refused(ex.peer, f"initialize (HTTP/{ex.version})", refusal)
        await ex.respond(refusal.status, text=refusal.text, headers=refusal.headers)
        return None
    cid = str(uuid.uuid4())
    try:
        conn = served[cid] = _Served(listener, cid, served)
    except (OSError, ValueError) as e:
        listener.policy.agent_ended()
        listener.opts.note(f"cannot run {listener.argv[0]}: "
                           f"{getattr(e, 'strerror', None) or e}")
        await ex.respond(502, text="the agent cannot be run\n")
        return None
    return conn


async def _serve(listener, ex, conn: _Served, body: bytes, msg, json_body: bool) -> None:
    method = ex.method
    streams = conn.streams
    stream = streams.request(ex, listener)

    def logged(status: int, headers: list[tuple[str, str]]) -> None:
        streams.event("http-response", "agent", stream=stream, status=status,
                      headers=[[k, v] for k, v in headers], http=ex.version)

    async def answer(status: int, text: str = "", **fields: str) -> None:
        headers = list(fields.items())
        logged(status, headers)
        await ex.respond(status, text=text or None, headers=headers)

    if method == "POST":
        if body:
            streams.frame(C2A, stream, body)
        if not json_body:
            return await answer(415, "POST needs Content-Type: application/json\n")
        if body.lstrip()[:1] == b"[":
            return await answer(501, "ACP has no JSON-RPC batches\n")
        if msg is not None and "id" in msg and "method" in msg:
            params_sid = session_of(msg)
            sid = ex.headers.get(SESSION) or params_sid
            route = f"get:{sid}" if sid else "get"
            if msg.get("method") == "initialize":
                return await _initialize(ex, conn, body, msg, stream, logged, answer)
            conn.origin[id_key(msg["id"])] = route
        if not await conn.agent.send((body, False)):
            return await answer(410, "the agent has ended\n")
        return await answer(202)
    if method == "DELETE":  # answered once the agent has ended (and its log with it)
        logged(202, [])
        await conn.end()
        return await ex.respond(202)
    if method != "GET":
        return await answer(405, "POST, GET or DELETE\n")
    if "text/event-stream" not in ex.headers.get("Accept", ""):
        return await answer(406, "GET needs Accept: text/event-stream\n")
    headers = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"),
               (CONNECTION, conn.cid)]
    logged(200, headers)
    q = conn.queue(stream)
    try:
        await ex.start(200, headers)
        while True:
            event = await q.get()
            if event is None:
                break
            await ex.write(event)
        streams.event("http-end", "agent", stream=stream)
        await ex.finish()
    except ConnectionError:
        streams.event("http-end", "client", stream=stream)
    return None


async def _initialize(ex, conn: _Served, body: bytes, msg: dict, stream: str, logged,
                      answer) -> None:
    """initialize: sent to the agent, its answer the 200's body with the new
    Acp-Connection-Id. A client gone before the answer (its connection closed, its
    HTTP/2 stream reset) never learns that id: the connection is ended with its agent,
    not left for the idle timeout."""
    future = asyncio.get_running_loop().create_future()
    conn.waiting[id_key(msg["id"])] = future
    await conn.agent.send((body, False))
    lost = asyncio.ensure_future(ex.lost())
    try:
        await asyncio.wait({future, lost}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        lost.cancel()
    if not future.done() or ex.gone:
        conn.streams.event("http-end", "client", stream=stream)
        await conn.end()
        return None
    raw = future.result()
    if raw is None:
        return await answer(502, "the agent ended before it answered\n")
    conn.streams.frame(A2C, stream, raw)
    headers = [("Content-Type", "application/json"), (CONNECTION, conn.cid)]
    logged(200, headers)
    try:
        await ex.respond(200, body=raw, headers=headers)
    except ConnectionError:
        await conn.end()
        raise
    return None

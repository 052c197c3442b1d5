"""``acp-tee --connect http(s)://...`` with the client on stdio (or a script): the client's
frames POSTed to the agent, the agent's SSE streams read and written to stdout, all of
it logged as the listener's proxy logs it (:mod:`acp_pipes.tee.http_streams`).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp

from acp_pipes.io.wire import A2C, C2A
from acp_pipes.protocol.jsonrpc import id_key
from acp_pipes.tee.headers import failure_reason, header_dict, logged_headers
from acp_pipes.tee.http_client import client_for, http_version
from acp_pipes.tee.http_streams import (
    CONNECTION,
    SESSION,
    SseParser,
    Streams,
    parse_message,
    session_of,
    sse_fields,
)
from acp_pipes.tee.options import GRACE, Options
from acp_pipes.tee.relay import answered, stopped_by
from acp_pipes.tee.sides import Closed, stdio_client

__all__ = ["connect_stdio"]


async def connect_stdio(url: str, opts: Options, stdin_fd: int, stdout_fd: int) -> int:
    """``acp-tee --connect http://...`` with the client on stdio: POST each client
    frame (``initialize`` first: its answer is the 200's body), open the connection's
    SSE stream and a session's stream before its first message (or once a response
    names a new session), write every frame of every stream to stdout as it arrives,
    and DELETE the connection once the client's input has ended and its requests are
    answered. Returns 0, 1 when the agent refused a message, 126 when it could not be
    reached."""
    from acp_pipes.tee.script import Lockstep

    log = opts.log([], 0, {"client": "stdio", "agent": "http", "connect": url})
    streams = Streams(log)
    track = Lockstep()
    client = stdio_client(opts, stdin_fd, stdout_fd, track)
    state: dict[str, Any] = {"cid": None, "status": 0}
    readers: dict[str, asyncio.Task] = {}
    asked: dict[Any, str | None] = {}  # the agent's requests: which session asked
    out_lock = asyncio.Lock()
    base = list(opts.headers)

    changed = asyncio.Event()

    async def _until(test) -> None:
        while not test():
            changed.clear()
            await changed.wait()

    async def deliver(stream: str, raw: bytes, extra: dict) -> None:
        streams.frame(A2C, stream, raw, **extra)
        track.received([raw])
        msg = parse_message(raw)
        if msg is not None:
            if "method" in msg and "id" in msg:
                asked[id_key(msg["id"])] = session_of(msg)
                changed.set()
            result = msg.get("result")
            if isinstance(result, dict) and isinstance(result.get("sessionId"), str):
                open_session(result["sessionId"])
        async with out_lock:
            await client.send((raw, False))

    def open_session(sid: str) -> None:
        name = f"get:{sid}"
        if name not in readers and state["cid"]:
            readers[name] = asyncio.ensure_future(read_stream(name, sid))

    async def read_stream(name: str, sid: str | None) -> None:
        headers = base + [(CONNECTION, state["cid"]), ("Accept", "text/event-stream")]
        if sid:
            headers.append((SESSION, sid))
        streams.event("http-request", "client", stream=name, method="GET",
                      headers=logged_headers(header_dict(headers), log), http=http_version(http))
        try:
            async with http.get(url, headers=headers,
                                timeout=aiohttp.ClientTimeout(total=None)) as resp:
                streams.event("http-response", "agent", stream=name, status=resp.status,
                              headers=logged_headers(resp.headers, log), http=http_version(http))
                if resp.status != 200:
                    opts.note(f"{url}: GET {name} answered {resp.status}")
                    return
                parser = SseParser()
                async for chunk in resp.content.iter_any():
                    events, _done = parser.feed(chunk)
                    for raw, data in events:
                        if data is not None:
                            await deliver(name, data, sse_fields(raw))
                streams.event("http-end", "agent", stream=name)
        except (aiohttp.ClientError, OSError) as e:
            streams.event("http-end", "agent", stream=name, error=failure_reason(e))

    async def post(raw: bytes) -> bool:
        msg = parse_message(raw)
        stream = streams.post()
        headers = base + [("Content-Type", "application/json"),
                          ("Accept", "application/json, text/event-stream")]
        sid = session_of(msg) if msg is not None else None
        if msg is not None and sid is None and "method" not in msg and "id" in msg:
            # an answer goes to the session that asked: one read ahead of the question
            # (a client's input given at once) waits for it, GRACE seconds at most
            key = id_key(msg["id"])
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_until(lambda: key in asked), GRACE)
            sid = asked.pop(key, None)
        if state["cid"]:
            headers.append((CONNECTION, state["cid"]))
            if sid:
                headers.append((SESSION, sid))
                open_session(sid)
        streams.event("http-request", "client", stream=stream, method="POST",
                      headers=logged_headers(header_dict(headers), log), http=http_version(http))
        streams.frame(C2A, stream, raw)
        track.sending(raw)
        try:
            async with http.post(url, data=raw, headers=headers) as resp:
                body = await resp.read()
                streams.event("http-response", "agent", stream=stream, status=resp.status,
                              headers=logged_headers(resp.headers, log), http=http_version(http))
                if resp.status >= 300:
                    opts.note(f"{url}: POST {stream} answered {resp.status} "
                              f"{body[:200].decode('utf-8', 'replace')!r}")
                    state["status"] = 1
                    if resp.status in (401, 403, 404, 410):
                        return False  # the connection is unusable or gone
                    return True
                cid = resp.headers.get(CONNECTION)
                if cid and not state["cid"]:
                    state["cid"] = cid
                    readers["get"] = asyncio.ensure_future(read_stream("get", None))
                if body:
                    await deliver(stream, body, {})
        except (aiohttp.ClientError, OSError) as e:
            streams.event("http-response", "agent", stream=stream, status=None,
                          error=failure_reason(e), http=http_version(http))
            opts.note(f"cannot reach {url}: {failure_reason(e)}")
            state["status"] = 126 if not state["cid"] else 1
            return False
        return True

    status = 0
    try:
        async with client_for(url, opts) as http:
            try:
                while True:
                    item = await client.recv()
                    if isinstance(item, Closed):
                        break
                    if not await post(item[0]):
                        break
                if state["cid"]:
                    await answered(track)
                    headers = base + [(CONNECTION, state["cid"])]
                    streams.event("http-request", "client", stream="delete", method="DELETE",
                                  headers=logged_headers(header_dict(headers), log),
                                  http=http_version(http))
                    try:
                        async with http.delete(url, headers=headers) as resp:
                            streams.event("http-response", "agent", stream="delete",
                                          status=resp.status, http=http_version(http),
                                          headers=logged_headers(resp.headers, log))
                    except (aiohttp.ClientError, OSError) as e:
                        streams.event("http-response", "agent", stream="delete",
                                      status=None, error=failure_reason(e), http=http_version(http))
                status = state["status"]
            except asyncio.CancelledError:
                status = 128 + (stopped_by() or 2)
                raise
            finally:
                for task in readers.values():
                    task.cancel()
                for task in readers.values():
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await asyncio.wait_for(task, GRACE)
    finally:
        log.end(status, None)
    return status

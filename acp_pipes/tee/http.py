"""acp-tee over Streamable HTTP (the RFD's POST/GET/DELETE profile): a stdio client to
an agent at an ``http://`` URL (:func:`connect_stdio`), a recording reverse proxy
between an HTTP client and an HTTP agent (:func:`handle`, behind acp-tee's listener),
and the RFD's server in front of a local stdio agent (:func:`serve`).

What is logged (:mod:`acp_pipes.io.wire`, version 3): each request as an ``http-request``
event and its status as an ``http-response`` event (headers in order, credentials as
tokens); a POST body as a c2a frame and a response body (``initialize``'s 200) as an
a2c frame, both on the POST's stream ``post:N`` with ``sseq`` 0 and 1; every SSE event
that carries ``data`` as an a2c frame of its GET stream (``get``: connection-scoped,
``get:SESSION``: session-scoped), whose ``raw`` is the event's joined ``data`` and whose
``sse`` the event's own bytes, with its ``sseq`` in that stream. The log is in arrival
order; order holds only within a stream, as the RFD says. ``http`` on a request or
response event says which HTTP version carried it (``"1.1"``, ``"2"``): both are
served and spoken (:mod:`acp_pipes.tee.h2`), with the same statuses, headers and
records.

The proxy relays bytes: a request's body and a response's body (an SSE stream too) are
passed on as they came, up to the end of the last complete SSE event (the unfinished
rest once it is complete, or at the stream's end), so an event is logged before the
client has it, as a stdio frame is.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from acp_pipes.errors import Note
from acp_pipes.io.wire import A2C, C2A, event_record
from acp_pipes.tee.accept import Quiet
from acp_pipes.tee.logfile import WireLog
from acp_pipes.tee.remote import (
    CREDENTIALS_CLASH,
    GRACE,
    Closed,
    Options,
    _answered,
    _stopped_by,
    _why,
    conflicting_credentials,
    logged_headers,
    logged_url,
    passed_headers,
    stdio_client,
)

CONNECTION, SESSION = "Acp-Connection-Id", "Acp-Session-Id"


class SseParser:
    """Splits an SSE byte stream into events: ``feed`` returns the complete events of
    what it was given as ``(event bytes, joined data or None)`` and how many bytes of
    the input those events end at (what may be forwarded)."""

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, chunk: bytes) -> tuple[list[tuple[bytes, bytes | None]], bytes]:
        self.buf += chunk
        events: list[tuple[bytes, bytes | None]] = []
        start = 0
        buf = self.buf
        while True:
            end = _event_end(buf, start)
            if end < 0:
                break
            raw = buf[start:end]
            events.append((raw, _data(raw)))
            start = end
        done, self.buf = buf[:start], buf[start:]
        return events, done

    def rest(self) -> tuple[bytes, bytes | None]:
        """What is left at the stream's end: an unfinished event, and its data."""
        raw, self.buf = self.buf, b""
        return raw, (_data(raw) if raw.strip() else None)


def _event_end(buf: bytes, start: int) -> int:
    """Where the event starting at ``start`` ends (after its blank line), or -1."""
    best = -1
    for sep in (b"\n\n", b"\r\n\r\n", b"\r\r"):
        i = buf.find(sep, start)
        if i >= 0 and (best < 0 or i + len(sep) < best):
            best = i + len(sep)
    return best


def _data(event: bytes) -> bytes | None:
    """An event's ``data`` lines joined with LF (None when it has none: a comment, a
    keep-alive)."""
    lines = event.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    data = [line[5:] for line in lines if line.startswith(b"data:")]
    if not data:
        return None
    return b"\n".join(d[1:] if d.startswith(b" ") else d for d in data)


def _sse_fields(raw: bytes) -> dict[str, str]:
    try:
        return {"sse": raw.decode("utf-8")}
    except UnicodeDecodeError:
        import base64

        return {"sse_b64": base64.b64encode(raw).decode("ascii")}


class Streams:
    """Per-stream sequence numbers of one connection's log."""

    def __init__(self, log: WireLog):
        self.log = log
        self.next: dict[str, int] = {}
        self.posts = 0

    def post(self) -> str:
        name = f"post:{self.posts}"
        self.posts += 1
        return name

    def frame(self, direction: str, stream: str, raw: bytes, **extra: Any) -> None:
        n = self.next.get(stream, 0)
        self.next[stream] = n + 1
        self.log.frames(direction, [raw], extra={"stream": stream, "sseq": n, **extra})

    def event(self, name: str, side: str, **fields: Any) -> None:
        self.log.event(event_record(0, name, side, **fields))


def _get_stream(headers) -> str:
    sid = headers.get(SESSION)
    return f"get:{sid}" if sid else "get"


class AioExchange:
    """One HTTP/1.1 request to acp-tee's listener (aiohttp's) and its answer, as the
    handlers below see a request whatever its HTTP version (the HTTP/2 one:
    :class:`acp_pipes.tee.h2.H2Exchange`): ``method``, ``headers``, ``host``, ``url``,
    ``query_string``, ``version``, ``peer``; :meth:`read` the body (at most the
    policy's ``max_message`` bytes: :class:`TooLarge` beyond, as soon as that is
    known), then either :meth:`respond` with a whole answer or :meth:`start` a
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


class TooLarge(Exception):
    """A request's body is over the listener's ``max_message``: ``size`` when its
    Content-Length said so, None when it was found out while reading."""

    def __init__(self, size: int | None):
        super().__init__(size)
        self.size = size


def _idle(listener, end) -> Quiet:
    """A Streamable HTTP connection's idle timeout: ``end(seconds)`` runs (a task of
    the listener's) once it has had no request in flight and no stream open
    (``begin``/``done`` count them) for ``--idle-timeout`` seconds; its agent is ended
    with it."""
    def then(wait: float) -> None:
        task = asyncio.ensure_future(end(wait))
        listener.tasks.add(task)
        task.add_done_callback(listener.tasks.discard)

    quiet = Quiet(lambda: listener.policy.limits.idle_timeout, then)
    quiet.start()
    return quiet


# -- the reverse proxy: HTTP client, HTTP agent ------------------------------------------


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
        self.idle = _idle(listener, self._expire)

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


async def handle(listener, ex) -> None:
    """One Streamable HTTP request to acp-tee's listener (an :class:`AioExchange` or an
    HTTP/2 one), its body read first (at most ``--max-message`` bytes, else 413):
    relayed to ``--connect``'s HTTP agent and logged in its connection's log, or
    served (:func:`serve`)."""
    try:
        body = await ex.read()
    except ConnectionError:
        listener.policy.say(f"dropped {ex.peer}: it went before its {ex.method} body was "
                            "whole")
        return await ex.respond(400, text="the body was cut short\n", close=True)
    except TooLarge as e:
        refusal = listener.policy.too_large(e.size if e.size is not None else ex.limit + 1)
        listener.policy.refused(ex.peer, f"{ex.method} {ex.path} (HTTP/{ex.version})",
                                refusal)
        return await ex.respond(413, text=refusal.text, close=True)
    if listener.connect is None:
        return await serve(listener, ex, body)
    if not listener.connect.startswith("http"):
        return await ex.respond(501, text="acp-tee relays Streamable HTTP to an HTTP "
                                          "agent (--connect http://...) or a local one "
                                          "(-- AGENT); WebSocket upgrades are served here\n")
    conns: dict[str, _Conn] = listener.__dict__.setdefault("http_conns", {})
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
    log, streams = conn.log, conn.streams
    method = ex.method
    stream = streams.post() if method == "POST" else (
        _get_stream(ex.headers) if method == "GET" else "delete")
    streams.event("http-request", "client", stream=stream, method=method,
                  url=logged_url(ex.url, log), headers=listener.logged_headers(ex.headers, log),
                  http=ex.version)
    if method == "POST" and body:
        streams.frame(C2A, stream, body)
    up = listener.connect
    if ex.query_string:
        up += ("&" if "?" in up else "?") + ex.query_string
    headers = listener.passed_headers(ex.headers) + listener.opts.headers
    http = listener.http
    try:
        if conflicting_credentials(up, headers):
            raise ValueError(CREDENTIALS_CLASH)  # (aiohttp refuses them too, less clearly)
        resp = await http.request(method, up, headers=headers, data=body or None,
                                  allow_redirects=False, auto_decompress=False,
                                  timeout=aiohttp.ClientTimeout(total=None))
    except (aiohttp.ClientError, OSError, ValueError) as e:
        why = str(e) if isinstance(e, ValueError) else _why(e)
        streams.event("http-response", "agent", stream=stream, status=None, error=why,
                      http=_version(http))
        listener.opts.note(f"cannot reach {logged_url(listener.connect, log)}: {why}")
        return await ex.respond(502, text="the agent cannot be reached\n")
    async with resp:
        streams.event("http-response", "agent", stream=stream, status=resp.status,
                      headers=logged_headers(resp.headers, log), http=_version(http))
        cid = resp.headers.get(CONNECTION)
        if cid and cid not in conns:
            conns[cid] = conn
        sse = resp.headers.get("Content-Type", "").startswith("text/event-stream")
        if not sse:
            data = await resp.read()
            if data:
                streams.frame(A2C, stream, data)
            if method == "DELETE" and resp.status < 300:
                conn.deleted = True
            return await ex.respond(resp.status, reason=resp.reason, body=data,
                                    headers=passed_headers(resp.headers))
        await ex.start(resp.status, passed_headers(resp.headers), reason=resp.reason)
        parser = SseParser()
        try:
            async for chunk in resp.content.iter_any():
                events, done = parser.feed(chunk)
                for raw, data in events:
                    if data is not None:
                        streams.frame(A2C, stream, data, **_sse_fields(raw))
                if done:
                    await ex.write(done)
            raw, data = parser.rest()
            if data is not None:
                streams.frame(A2C, stream, data, **_sse_fields(raw))
            if raw:
                await ex.write(raw)
            streams.event("http-end", "agent", stream=stream)
        except (ConnectionError, aiohttp.ClientError, asyncio.CancelledError) as e:
            streams.event("http-end", "client" if isinstance(e, ConnectionError) else "agent",
                          stream=stream, error=type(e).__name__)
            if isinstance(e, asyncio.CancelledError):
                raise
        await ex.finish()


def _version(http) -> str:
    """The HTTP version a client to the agent speaks: 2 for acp-tee's HTTP/2 one."""
    return getattr(http, "http_version", "1.1")


# -- a stdio client to an HTTP agent -------------------------------------------------------


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
        msg = _parse(raw)
        if msg is not None:
            if "method" in msg and "id" in msg:
                asked[_key(msg["id"])] = _sid(msg)
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
                      headers=logged_headers(_multi(headers), log), http=_version(http))
        try:
            async with http.get(url, headers=headers,
                                timeout=aiohttp.ClientTimeout(total=None)) as resp:
                streams.event("http-response", "agent", stream=name, status=resp.status,
                              headers=logged_headers(resp.headers, log), http=_version(http))
                if resp.status != 200:
                    opts.note(f"{url}: GET {name} answered {resp.status}")
                    return
                parser = SseParser()
                async for chunk in resp.content.iter_any():
                    events, _done = parser.feed(chunk)
                    for raw, data in events:
                        if data is not None:
                            await deliver(name, data, _sse_fields(raw))
                streams.event("http-end", "agent", stream=name)
        except (aiohttp.ClientError, OSError) as e:
            streams.event("http-end", "agent", stream=name, error=_why(e))

    async def post(raw: bytes) -> bool:
        msg = _parse(raw)
        stream = streams.post()
        headers = base + [("Content-Type", "application/json"),
                          ("Accept", "application/json, text/event-stream")]
        sid = _sid(msg) if msg is not None else None
        if msg is not None and sid is None and "method" not in msg and "id" in msg:
            # an answer goes to the session that asked: one read ahead of the question
            # (a client's input given at once) waits for it, GRACE seconds at most
            key = _key(msg["id"])
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_until(lambda: key in asked), GRACE)
            sid = asked.pop(key, None)
        if state["cid"]:
            headers.append((CONNECTION, state["cid"]))
            if sid:
                headers.append((SESSION, sid))
                open_session(sid)
        streams.event("http-request", "client", stream=stream, method="POST",
                      headers=logged_headers(_multi(headers), log), http=_version(http))
        streams.frame(C2A, stream, raw)
        track.sending(raw)
        try:
            async with http.post(url, data=raw, headers=headers) as resp:
                body = await resp.read()
                streams.event("http-response", "agent", stream=stream, status=resp.status,
                              headers=logged_headers(resp.headers, log), http=_version(http))
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
                          error=_why(e), http=_version(http))
            opts.note(f"cannot reach {url}: {_why(e)}")
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
                    await _answered(track)
                    headers = base + [(CONNECTION, state["cid"])]
                    streams.event("http-request", "client", stream="delete", method="DELETE",
                                  headers=logged_headers(_multi(headers), log), http=_version(http))
                    try:
                        async with http.delete(url, headers=headers) as resp:
                            streams.event("http-response", "agent", stream="delete",
                                          status=resp.status, http=_version(http),
                                          headers=logged_headers(resp.headers, log))
                    except (aiohttp.ClientError, OSError) as e:
                        streams.event("http-response", "agent", stream="delete",
                                      status=None, error=_why(e), http=_version(http))
                status = state["status"]
            except asyncio.CancelledError:
                status = 128 + (_stopped_by() or 2)
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


def client_for(url: str, opts: Options):
    """The HTTP client acp-tee reaches an agent's ``url`` with: with ``--http2``
    :class:`acp_pipes.tee.h2.H2Client` (aiohttp's calls, over HTTP/2), else
    :class:`AutoClient` (aiohttp's, HTTP/1.1, unless the server speaks only HTTP/2)."""
    if opts.http2:
        from acp_pipes.tee.h2 import H2Client

        return H2Client(url)
    return AutoClient(url, opts.note)


class AutoClient:
    """aiohttp's HTTP/1.1 client to an agent's server, until that server shows it
    speaks HTTP/2 only: its first answer is no HTTP/1.1 (an HTTP/2 frame, or nothing)
    and a probe over h2c with prior knowledge gets its SETTINGS. Then the request is
    sent again, and every later one, over HTTP/2 (:class:`acp_pipes.tee.h2.H2Client`),
    said once. Over TLS (``https://``) the sign is the server's alert that it speaks
    no protocol offered (aiohttp offers none by ALPN: a server that chooses by ALPN
    and has h2 only refuses it so); then acp-tee offers h2."""

    def __init__(self, url: str, note: Note):
        self.url = url
        self.note = note
        self.h1 = aiohttp.ClientSession()
        self.h2: Any = None
        self.proven = False  # an HTTP/1.1 answer came: no probing any more

    @property
    def http_version(self) -> str:
        return "2" if self.h2 is not None else "1.1"

    async def __aenter__(self) -> AutoClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        await self.h1.close()
        if self.h2 is not None:
            await self.h2.close()

    def request(self, method: str, url: str, **kw) -> _AutoCall:
        return _AutoCall(self, method, url, kw)

    def get(self, url: str, **kw) -> _AutoCall:
        return self.request("GET", url, **kw)

    def post(self, url: str, **kw) -> _AutoCall:
        return self.request("POST", url, **kw)

    def delete(self, url: str, **kw) -> _AutoCall:
        return self.request("DELETE", url, **kw)

    async def send(self, method: str, url: str, kw: dict):
        if self.h2 is not None:
            return await self.h2.request(method, url, **kw)
        try:
            resp = await self.h1.request(method, url, **kw)
        except (aiohttp.ClientResponseError, aiohttp.ServerDisconnectedError,
                aiohttp.ClientSSLError) as e:
            if self.proven or not await _only_h2(url, e):
                raise
            from acp_pipes.tee.h2 import H2Client

            if self.h2 is None:
                self.h2 = H2Client(self.url)
                how = "h2c" if url.startswith("http://") else "ALPN h2"
                self.note(f"{self.url} speaks HTTP/2 only: acp-tee speaks HTTP/2 ({how}) "
                          "to it (--http2 says so from the start)")
            return await self.h2.request(method, url, **kw)
        self.proven = True
        return resp


class _AutoCall:
    """A request of :class:`AutoClient` under way: awaited, or ``async with``."""

    def __init__(self, client: AutoClient, method: str, url: str, kw: dict):
        self.client = client
        self.args = (method, url, kw)
        self.response: Any = None

    def __await__(self):
        return self.client.send(*self.args).__await__()

    async def __aenter__(self):
        self.response = await self.client.send(*self.args)
        return self.response

    async def __aexit__(self, *exc) -> None:
        if self.response is not None:
            self.response.release()


async def _only_h2(url: str, e: Exception) -> bool:
    """Whether the failure ``e`` of an HTTP/1.1 request to ``url`` says its server
    speaks HTTP/2 only: over TLS, its alert that no protocol acp-tee's client offered
    is one it speaks (a server choosing by ALPN, h2 only); in clear, an answer that is
    no HTTP/1.1 and a server that answers the HTTP/2 preface (:func:`speaks_h2c`)."""
    if url.startswith("https://"):
        return no_protocol_alert(getattr(e, "os_error", None) or e)
    if isinstance(e, aiohttp.ClientSSLError):
        return False
    return url.startswith("http://") and await speaks_h2c(url)


def no_protocol_alert(e: BaseException) -> bool:
    """Whether a TLS failure is the server's no_application_protocol alert (RFC 7301:
    it speaks none of the protocols offered by ALPN). Python's ``reason`` for it is
    empty with some OpenSSL versions: its text is what says it."""
    return (getattr(e, "reason", None) == "TLSV1_ALERT_NO_APPLICATION_PROTOCOL"
            or "no application protocol" in str(e).lower())


async def speaks_h2c(url: str) -> bool:
    """Whether the server at ``url`` answers the HTTP/2 preface (h2c, prior knowledge)
    with a SETTINGS frame, as an HTTP/2 server must first (RFC 9113, 3.4)."""
    from urllib.parse import urlsplit

    from acp_pipes.tee.accept import PREFACE

    parts = urlsplit(url)
    writer = None
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(parts.hostname, parts.port or 80), GRACE)
        writer.write(PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")  # SETTINGS
        head = await asyncio.wait_for(reader.readexactly(9), GRACE)
    except (OSError, TimeoutError, asyncio.IncompleteReadError):
        return False
    finally:
        if writer is not None:
            writer.close()
    return head[3] == 0x04 and head[5:9] == b"\x00\x00\x00\x00"


def _parse(raw: bytes) -> dict | None:
    try:
        msg = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return msg if isinstance(msg, dict) else None


def _sid(msg: dict | None) -> str | None:
    params = msg.get("params") if msg else None
    sid = params.get("sessionId") if isinstance(params, dict) else None
    return sid if isinstance(sid, str) else None


def _key(value: object) -> tuple[bool, object]:
    return isinstance(value, str), value


def _multi(pairs):
    from multidict import CIMultiDict

    return CIMultiDict(pairs)


# -- serving a stdio agent over Streamable HTTP ---------------------------------------------


class _Served:
    """One ACP connection to a local agent process: its log, its streams' queues (what
    the agent sent for a stream no client has opened yet waits there), where each
    request came from (its answer goes back there), and the initialize in flight. One
    of the listener's agents (:meth:`acp_pipes.tee.policy.Policy.take_agent`) until its
    DELETE, its idle timeout or the listener's end (:meth:`end`)."""

    def __init__(self, listener, cid: str, served: dict):
        from acp_pipes.tee.remote import ProcessAgent

        self.listener = listener
        self.cid = cid
        self.served = served
        self.agent = ProcessAgent(listener.argv, listener.opts.note, listener.opts.stderr_fd,
                                  listener.opts.grace)
        self.log = listener.next_log("http")
        self.streams = Streams(self.log)
        self.queues: dict[str, asyncio.Queue] = {}
        self.origin: dict[tuple[bool, object], str] = {}  # request id -> stream
        self.waiting: dict[tuple[bool, object], asyncio.Future] = {}  # initialize
        self.ended = False
        self.reader = asyncio.ensure_future(self._read())
        self.idle = _idle(listener, self._expire)

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
            msg = _parse(raw)
            key = _key(msg.get("id")) if msg is not None and "method" not in msg else None
            future = self.waiting.pop(key, None) if key is not None else None
            if future is not None:  # initialize's answer: the body of its 200
                if not future.done():
                    future.set_result(raw)
                continue
            if key is not None:
                stream = self.origin.pop(key, "get")
            else:
                sid = _sid(msg)
                stream = f"get:{sid}" if sid else "get"
            event = b"data: " + raw + b"\n\n"
            self.streams.frame(A2C, stream, raw, **_sse_fields(event))
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
    served: dict[str, _Served] = listener.__dict__.setdefault("served", {})
    cid = ex.headers.get(CONNECTION)
    conn = served.get(cid) if cid else None
    method = ex.method
    if method != "POST":
        body = b""  # (a GET or DELETE has none; whatever came is not ACP's)
    msg = _parse(body) if body else None
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
    log, streams = conn.log, conn.streams
    stream = streams.post() if method == "POST" else (
        _get_stream(ex.headers) if method == "GET" else "delete")
    streams.event("http-request", "client", stream=stream, method=method,
                  url=logged_url(ex.url, log), headers=listener.logged_headers(ex.headers, log),
                  http=ex.version)

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
            params_sid = _sid(msg)
            sid = ex.headers.get(SESSION) or params_sid
            route = f"get:{sid}" if sid else "get"
            if msg.get("method") == "initialize":
                return await _initialize(ex, conn, body, msg, stream, logged, answer)
            conn.origin[_key(msg["id"])] = route
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
    conn.waiting[_key(msg["id"])] = future
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

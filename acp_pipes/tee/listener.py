"""acp-tee's listener (``--listen URL``): the socket it serves, and what it lets in.

Every accepted connection is behind a :class:`acp_pipes.tee.accept.Guard` (its first
bytes say HTTP/1.1, aiohttp's, or HTTP/2, :mod:`acp_pipes.tee.h2_server`); every
request and upgrade is checked against the listener's policy
(:mod:`acp_pipes.tee.policy`: Host, Origin, a token, the agents running, a message's
size, how long a connection may idle) before anything is read whole or started. What
passes goes to the WebSocket side (:func:`acp_pipes.tee.websocket.serve_upgrade`) or to
Streamable HTTP: the reverse proxy (:mod:`acp_pipes.tee.http_proxy`) or the server in
front of a local agent (:mod:`acp_pipes.tee.http_serve`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from urllib.parse import urlunsplit

import aiohttp
from aiohttp import web

from acp_pipes.tee.headers import logged_headers, passed_headers
from acp_pipes.tee.options import GRACE, Options, parse_url
from acp_pipes.tee.policy import TOKEN_LOGGED, Policy, TooLarge, check_bind
from acp_pipes.tee.relay import stopped_by

TYPE_CHECKING = False
if TYPE_CHECKING:
    from acp_pipes.tee.logfile import WireLog

__all__ = ["Listener", "serve"]


class Listener:
    """The state of one listener: its policy (:mod:`acp_pipes.tee.policy`), its
    connections (each behind a :class:`acp_pipes.tee.accept.Guard`), counted for their
    logs' names."""

    def __init__(self, url: str, opts: Options, connect: str | None, argv: list[str]):
        self.url = url
        self.opts = opts
        self.connect = connect
        self.argv = argv
        self.count = 0
        self.http: aiohttp.ClientSession | None = None
        self.tasks: set[asyncio.Task] = set()
        self.live: set = set()  # WsSide of clients still connected
        self.h2: set = set()  # HTTP/2 connections of clients (h2_server.H2Server)
        self.guards: dict = {}  # transport -> its Guard
        # Streamable HTTP connections by Acp-Connection-Id: proxied ones
        # (acp_pipes.tee.http_proxy), served ones (acp_pipes.tee.http_serve)
        self.http_conns: dict = {}
        self.served: dict = {}
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

    def upstream(self, query_string: str) -> str:
        """The ``--connect`` URL a client's request goes to: with the client's query."""
        up = self.connect or ""
        if query_string:
            up += ("&" if "?" in up else "?") + query_string
        return up

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
            from acp_pipes.tee.http_exchange import AioExchange

            ex = AioExchange(request, self.policy, guard)
            await self.streamable(ex)
            return ex.response  # type: ignore[return-value]  # (every handler answers)
        return web.Response(status=426, text="this endpoint speaks WebSocket only\n",
                            headers={"Upgrade": "websocket"})

    async def h2_request(self, ex) -> None:
        """One request that came over HTTP/2 (:mod:`acp_pipes.tee.h2_server`): Streamable HTTP,
        as over HTTP/1.1 (WebSocket has no HTTP/2 form here: it upgrades HTTP/1.1)."""
        refusal = self.refused(ex.method, ex.path, ex.host, ex.headers, ex.guard, "2")
        if refusal is not None:
            return await ex.respond(refusal.status, text=refusal.text,
                                    headers=refusal.headers)
        if ex.path != self.path:
            return await ex.respond(404, text="404: Not Found")
        if self.scheme == "http":
            return await self.streamable(ex)
        return await ex.respond(426, text="this endpoint speaks WebSocket only\n",
                                headers=[("Upgrade", "websocket")])

    async def streamable(self, ex) -> None:
        """A Streamable HTTP request that passed the policy, over either HTTP version
        (an :class:`acp_pipes.tee.http_exchange.AioExchange` or an HTTP/2 one). A page
        of an allowed origin (``--allow-origin``) is answered with CORS headers, its
        preflight by the listener itself when it serves a local agent (a proxy passes
        it on: the agent's server answers it). Then its body is read whole (at most
        ``--max-message`` bytes, else 413) and the request relayed to ``--connect``'s
        HTTP agent (:mod:`acp_pipes.tee.http_proxy`) or served
        (:mod:`acp_pipes.tee.http_serve`)."""
        origin = ex.headers.get("Origin")
        if self.connect is None and origin is not None:
            if _preflight(ex.method, ex.headers):
                return await ex.respond(204, headers=self.policy.preflight(
                    origin, ex.headers.get("Access-Control-Request-Headers")))
            ex.cors = self.policy.cors(origin)
        body = await self._body(ex)
        if body is None:
            return None
        if self.connect is None:
            from acp_pipes.tee.http_serve import serve as serve_http

            return await serve_http(self, ex, body)
        if not self.connect.startswith("http"):
            return await ex.respond(501, text="acp-tee relays Streamable HTTP to an HTTP "
                                              "agent (--connect http://...) or a local one "
                                              "(-- AGENT); WebSocket upgrades are served here\n")
        from acp_pipes.tee.http_proxy import proxy

        return await proxy(self, ex, body)

    async def _body(self, ex) -> bytes | None:
        """A request's body, read whole; None once the request was answered: 400 for a
        client gone before its body was, 413 for one over ``--max-message`` (as soon as
        that is known), neither keeping the connection."""
        try:
            return await ex.read()
        except ConnectionError:
            self.policy.say(f"dropped {ex.peer}: it went before its {ex.method} body was "
                            "whole")
            await ex.respond(400, text="the body was cut short\n", close=True)
        except TooLarge:
            refusal = self.policy.too_large()
            self.policy.refused(ex.peer, f"{ex.method} {ex.path} (HTTP/{ex.version})",
                                refusal)
            await ex.respond(413, text=refusal.text, close=True)
        return None

    async def websocket(self, request: web.Request, guard) -> web.StreamResponse:
        """A WebSocket upgrade, when the policy has room for one more agent."""
        refusal = self.policy.take_agent()
        if refusal is not None:
            self.policy.refused(guard.peer if guard is not None else "?",
                                "a WebSocket upgrade", refusal)
            return _refuse(refusal)
        task = asyncio.current_task()
        self.tasks.add(task)  # type: ignore[arg-type]  # (a handler runs in a task)
        try:
            from acp_pipes.tee.websocket import serve_upgrade

            return await serve_upgrade(self, request)
        finally:
            self.tasks.discard(task)
            self.policy.agent_ended()


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


async def serve(url: str, opts: Options, connect: str | None, argv: list[str]) -> int:
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
        from acp_pipes.tee.http_client import client_for

        http = client_for(connect, opts)  # aiohttp's, or its calls over HTTP/2
    else:
        http = aiohttp.ClientSession()
    listener.http = http
    try:
        await asyncio.Event().wait()  # until a signal cancels it: the listener's end
    except asyncio.CancelledError:
        if stopped_by() is None:
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
        for conn in list(listener.http_conns.values()):  # never DELETEd
            conn.end()
        for served in list(listener.served.values()):
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

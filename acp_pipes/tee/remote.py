"""acp-tee's remote sides: the client or the agent (or both) reached over WebSocket or
Streamable HTTP (the RFD "Streamable HTTP & WebSocket Transport") instead of stdio.

=================  ===================  ============================================
client side        agent side           what it is for
=================  ===================  ============================================
stdio              ``--connect URL``    an editor that speaks stdio reaches a remote
                                        agent
``--listen URL``   ``--connect URL``    a recording reverse proxy
``--listen URL``   ``-- AGENT ARGS``    a local stdio agent served remotely
=================  ===================  ============================================

Design choices, and why:

- aiohttp for both sides of both transports: one well-kept library with a WebSocket
  client and server and an HTTP client and server (SSE is a response body), on asyncio.
  It is imported only here, so the stdio path (:mod:`acp_pipes.tee`) keeps its start-up.
- HTTP/2, which aiohttp lacks, is :mod:`acp_pipes.tee.h2_engine` (h2, the protocol
  without I/O, on asyncio): the listener's socket is asyncio's, and each connection's
  first bytes hand it to aiohttp (HTTP/1.1, WebSocket) or, the HTTP/2 preface, to h2
  (:class:`acp_pipes.tee.accept.Guard`); the HTTP/2 code is imported by the first such
  connection, or by ``--http2``.
- Who may use a listener and how much of it (Host, Origin, a token, the agents running,
  a message's size, how long a connection may idle) is :mod:`acp_pipes.tee.policy`,
  checked for every request and upgrade before anything is read whole or started.
- A frame is relayed as it came: a WebSocket text frame's payload is sent on as the
  same bytes (aiohttp checks that a text frame is UTF-8; ``str.encode`` of that text
  gives the bytes back exactly), a stdio line becomes one text frame without its LF and
  a text frame one stdio line. Binary frames are no ACP messages (the RFD: ignored):
  they are logged as ``ws-binary`` events and passed on as binary frames between two
  WebSocket sides, never to stdio.
- The log is :class:`acp_pipes.tee.logfile.WireLog`: each frame is logged before it is
  forwarded, a log failure is said once and the session goes on, secrets are redacted
  in the log only. Handshakes, closes (code and reason), HTTP requests and statuses are
  event records (:func:`acp_pipes.io.wire.event_record`); header values that carry
  credentials are logged as tokens.
- Headers pass through a proxy both ways but for the hop-by-hop ones and the WebSocket
  handshake's own: ``Authorization``, cookies, API keys and ``Acp-*`` reach the agent,
  ``Acp-Connection-Id`` and ``Set-Cookie`` the client; subprotocols are offered upstream
  as the client offered them and the one the agent chose is the one the client gets.
- One log per connection to a listener (a listener serves many): ``-o FILE`` is the
  first connection's log, and later ones go to FILE-1, FILE-2, ... (as a taken name
  does for ``DIR/`` and templates).
- Where stdio input ends (``--connect`` with a stdio client), the agent's connection is
  closed (1000) once every request sent has been answered and every prompt turn is over
  (:class:`acp_pipes.tee.script.Lockstep`), or after ``GRACE`` seconds without a frame.

Where each part is (this module holds the two entry points, :func:`connect_stdio` and
:func:`listen`, and the stdio client's WebSocket session):

- what a run was asked for, its URLs and each connection's log: :mod:`~acp_pipes.tee.options`;
  headers, URLs and subprotocols as logged and passed on: :mod:`~acp_pipes.tee.headers`
- the relay of two sides, and the signals that stop a run: :mod:`~acp_pipes.tee.relay`;
  the sides on stdio and a local agent process: :mod:`~acp_pipes.tee.sides`
- WebSocket: :mod:`~acp_pipes.tee.websocket` (a side, the handshakes, a client's
  upgrade), :mod:`~acp_pipes.tee.masking` (RFC 6455's mask rule for clients)
- the listener and its policy: :mod:`~acp_pipes.tee.listener`,
  :mod:`~acp_pipes.tee.accept`, :mod:`~acp_pipes.tee.policy`
- Streamable HTTP: :mod:`~acp_pipes.tee.http_streams` (what is logged, SSE),
  :mod:`~acp_pipes.tee.http_exchange`, :mod:`~acp_pipes.tee.http_proxy`,
  :mod:`~acp_pipes.tee.http_serve`, :mod:`~acp_pipes.tee.http_connect`,
  :mod:`~acp_pipes.tee.http_client`, :mod:`~acp_pipes.tee.http_calls`
- HTTP/2: :mod:`~acp_pipes.tee.h2_engine`, :mod:`~acp_pipes.tee.h2_server`,
  :mod:`~acp_pipes.tee.h2_client`
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Sequence

import aiohttp

from acp_pipes.tee.options import Options, parse_url
from acp_pipes.tee.relay import relay, stopped_by, with_signals
from acp_pipes.tee.sides import stdio_client
from acp_pipes.tee.websocket import open_ws

__all__ = ["connect_stdio", "listen"]


def connect_stdio(url: str, opts: Options, stdin_fd: int = 0, stdout_fd: int = 1) -> int:
    """``acp-tee --connect URL``: the client on stdio, the agent at ``url``. Returns the
    exit status: 0 when the agent's side closed cleanly (1000, or after the client's
    input ended), 1 when it closed otherwise, 126 when it could not be reached."""
    scheme = parse_url(url, listening=False)[0]
    if scheme in ("http", "https"):
        from acp_pipes.tee.http_connect import connect_stdio as http_connect

        return asyncio.run(with_signals(http_connect(url, opts, stdin_fd, stdout_fd)))
    return asyncio.run(with_signals(_connect_ws_stdio(url, opts, stdin_fd, stdout_fd)))


async def _connect_ws_stdio(url: str, opts: Options, stdin_fd: int, stdout_fd: int) -> int:
    transport = {"client": "stdio", "agent": "ws", "connect": url}
    log = opts.log([], 0, transport)
    status = 126
    try:
        async with aiohttp.ClientSession() as http:
            agent = await open_ws(http, url, opts.headers, opts.protocols, log, opts.note)
            if agent is None:
                return status
            from acp_pipes.tee.script import Lockstep

            client = stdio_client(opts, stdin_fd, stdout_fd, Lockstep())
            try:
                closed = await relay(client, agent, log, input_ends_session=True)
            except asyncio.CancelledError:
                status = 128 + (stopped_by() or signal.SIGINT)
                await agent.close(1001, "acp-tee was interrupted")
                raise
            status = 0 if closed.code in (1000, 1001, None) else 1
    finally:
        log.end(status, None)
    return status


def listen(url: str, opts: Options, *, connect: str | None = None,
           argv: Sequence[str] = ()) -> int:
    """``acp-tee --listen URL``: serve clients at ``url`` (WebSocket; and Streamable HTTP
    for an ``http://`` URL), each connection relayed to ``connect`` or to a new
    ``argv`` agent process, and logged. Runs until SIGINT, SIGTERM or SIGHUP (then
    every open connection is closed with 1001 and its log ended); returns 0 then."""
    from acp_pipes.tee.listener import serve

    return asyncio.run(with_signals(serve(url, opts, connect, list(argv))))

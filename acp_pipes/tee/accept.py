"""A connection to acp-tee's listener, from its accept to its end: what it speaks, and
how long it may take to say what it wants.

:class:`Guard` is the protocol of every accepted socket, for its whole life. Its first
bytes tell what the client speaks: the HTTP/2 preface (h2c with prior knowledge) hands
it to :mod:`acp_pipes.tee.h2_server`, any other byte to aiohttp's HTTP/1.1 server (which
serves the WebSocket upgrade too); the guard then passes every call of the transport
on to that protocol (a Python call a read, nothing beside a network round trip).

It stays in between for the header timeout (:class:`acp_pipes.tee.policy.Limits`): a
connection must complete a request head within ``header_timeout`` seconds of its
start, or of the end of its last request while none is in flight (an idle keep-alive
connection too), else it is dropped: with one line on stderr when it had said nothing
or half a request (an idle keep-alive connection is closed unsaid, as servers do). The
listener says when a request starts and ends (:meth:`Guard.started`,
:meth:`Guard.finished`): aiohttp's handler by the request's transport
(``Listener.guards``), the HTTP/2 server for each of its streams. A silent socket,
half a request head, a byte every few seconds: each is gone after the timeout,
whatever it sends in between.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

#: What an HTTP/2 client with prior knowledge sends first (RFC 9113, 3.4).
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

__all__ = ["PREFACE", "Guard", "Quiet"]


class Quiet:
    """Calls ``then(seconds)`` once nothing has been in flight for ``wait()`` seconds:
    :meth:`begin` and :meth:`done` count what is, :meth:`start` starts the wait with
    nothing in flight, :meth:`stop` ends it. A connection's header timeout
    (:class:`Guard`) and a Streamable HTTP connection's idle timeout are each one.

    A request moves a deadline, not a timer: the one timer, when it fires early (the
    deadline moved on since), is set again for the deadline, as aiohttp's keep-alive
    timer is (a timer cancelled and made again at each request cost ~10 µs of a
    request's few hundred)."""

    def __init__(self, wait: Callable[[], float], then: Callable[[float], None]):
        self.wait = wait
        self.then = then
        self.open = 0
        self.deadline = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.stopped = True

    def begin(self) -> None:
        self.open += 1

    def done(self) -> None:
        self.open = max(0, self.open - 1)
        if self.open == 0 and not self.stopped:
            self._until(asyncio.get_running_loop().time() + self.wait())

    def start(self) -> None:
        self.stopped = False
        self._until(asyncio.get_running_loop().time() + self.wait())

    def stop(self) -> None:
        self.stopped = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _until(self, deadline: float) -> None:
        self.deadline = deadline
        if self.timer is None:
            self.timer = asyncio.get_running_loop().call_at(deadline, self._fire)

    def _fire(self) -> None:
        self.timer = None
        if self.open or self.stopped:
            return  # a request in flight: its end sets the deadline again
        loop = asyncio.get_running_loop()
        if loop.time() < self.deadline:
            self.timer = loop.call_at(self.deadline, self._fire)
            return
        self.stopped = True
        self.then(self.wait())


def _address(info) -> str:
    if isinstance(info, tuple) and len(info) >= 2:
        host = str(info[0])
        return f"[{host}]:{info[1]}" if ":" in host else f"{host}:{info[1]}"
    return str(info or "?")


class Guard(asyncio.Protocol):
    """One accepted connection (see the module's docstring). ``http1`` makes aiohttp's
    protocol for it; ``listener`` has the policy, the guards and the HTTP/2 server."""

    def __init__(self, http1: Callable[[], asyncio.Protocol], listener):
        self.http1 = http1
        self.listener = listener
        self.inner: asyncio.Protocol | None = None
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        #: requests in flight; the header timeout runs while there are none
        self.quiet = Quiet(lambda: listener.policy.limits.header_timeout, self._timed_out)
        self.served = 0  # requests ended
        self.heard = False  # bytes came since the last request ended (or the start)
        self.peer = "?"
        self.local: str | None = None  # the address the connection came in on
        self.lost: asyncio.Future = asyncio.get_running_loop().create_future()

    # -- asyncio's calls, passed on once the protocol is known

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.peer = _address(transport.get_extra_info("peername"))
        sock = transport.get_extra_info("sockname")
        self.local = str(sock[0]) if isinstance(sock, tuple) else None
        self.listener.guards[transport] = self
        self.quiet.start()

    def data_received(self, data: bytes) -> None:
        if not self.quiet.open:
            self.heard = True
        if self.inner is not None:
            self.inner.data_received(data)
            return
        self.buf += data
        n = min(len(self.buf), len(PREFACE))
        if self.buf[:n] != PREFACE[:n]:
            self._hand_to(self.http1())
        elif len(self.buf) >= len(PREFACE):
            from acp_pipes.tee.h2_server import H2Server

            self._hand_to(H2Server(self.listener, self))

    def _hand_to(self, protocol: asyncio.Protocol) -> None:
        buf, self.buf = self.buf, b""
        self.inner = protocol
        protocol.connection_made(self.transport)  # type: ignore[arg-type]  # (connected)
        protocol.data_received(buf)

    def eof_received(self) -> bool | None:
        if self.inner is not None:
            return self.inner.eof_received()
        return False  # nothing said yet, or half a preface: the connection is closed

    def connection_lost(self, exc: Exception | None) -> None:
        self.quiet.stop()
        self.listener.guards.pop(self.transport, None)
        if not self.lost.done():
            self.lost.set_result(None)
        if self.inner is not None:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()

    # -- the header timeout

    def started(self) -> None:
        """A request's head is complete: no timeout while it is in flight."""
        self.quiet.begin()

    def finished(self) -> None:
        """A request has ended: with none left in flight, the next must come in time."""
        self.served += 1
        if self.quiet.open == 1:
            self.heard = False  # what comes from now on is the next request's
        if self.lost.done():
            self.quiet.stop()  # (no wait for a connection that is gone)
        self.quiet.done()

    def _timed_out(self, wait: float) -> None:
        if self.transport is None:
            return
        if self.transport.is_closing():  # still writing to a peer that reads nothing
            self.transport.abort()
            return
        shut = getattr(self.inner, "shut", None)  # HTTP/2: a GOAWAY first
        if self.served and (not self.heard or shut is not None):
            # an idle keep-alive connection: closed as servers close them, unsaid
            if shut is not None:
                shut()
            else:
                self.transport.close()
            return
        self.listener.policy.say(f"dropped {self.peer}: no complete request within "
                                 f"{wait:g} s (--header-timeout)")
        self.transport.abort()

"""Streamable HTTP as acp-tee logs it, on each of its HTTP sides (the proxy, the server
in front of a local agent, the stdio client): the RFD's headers, SSE events split as
they come (:class:`SseParser`), the streams of a connection's log (:class:`Streams`),
the little of a JSON-RPC message that routes it, and a connection's idle timeout.

What is logged (:mod:`acp_pipes.io.wire`, version 3): each request as an ``http-request``
event and its status as an ``http-response`` event (headers in order, credentials as
tokens); a POST body as a c2a frame and a response body (``initialize``'s 200) as an
a2c frame, both on the POST's stream ``post:N`` with ``sseq`` 0 and 1; every SSE event
that carries ``data`` as an a2c frame of its GET stream (``get``: connection-scoped,
``get:SESSION``: session-scoped), whose ``raw`` is the event's joined ``data`` and whose
``sse`` the event's own bytes, with its ``sseq`` in that stream. The log is in arrival
order; order holds only within a stream, as the RFD says. ``http`` on a request or
response event says which HTTP version carried it (``"1.1"``, ``"2"``): both are
served and spoken (:mod:`acp_pipes.tee.h2_engine`), with the same statuses, headers and
records.

The proxy relays bytes: a request's body and a response's body (an SSE stream too) are
passed on as they came, up to the end of the last complete SSE event (the unfinished
rest once it is complete, or at the stream's end), so an event is logged before the
client has it, as a stdio frame is.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from acp_pipes.io.wire import event_record
from acp_pipes.tee.accept import Quiet
from acp_pipes.tee.headers import logged_url

TYPE_CHECKING = False
if TYPE_CHECKING:
    from acp_pipes.tee.logfile import WireLog

__all__ = ["CONNECTION", "SESSION", "SseParser", "Streams", "get_stream",
           "idle_timeout", "parse_message", "session_of", "sse_fields"]

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


def sse_fields(raw: bytes) -> dict[str, str]:
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

    def request(self, ex, listener) -> str:
        """The stream a request to the listener is on (``post:N``, ``get``,
        ``get:SESSION``, ``delete``), its ``http-request`` event logged (the client's
        headers as the listener logs them)."""
        method = ex.method
        stream = self.post() if method == "POST" else (
            get_stream(ex.headers) if method == "GET" else "delete")
        self.event("http-request", "client", stream=stream, method=method,
                   url=logged_url(ex.url, self.log),
                   headers=listener.logged_headers(ex.headers, self.log), http=ex.version)
        return stream


def get_stream(headers) -> str:
    sid = headers.get(SESSION)
    return f"get:{sid}" if sid else "get"


def idle_timeout(listener, end) -> Quiet:
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


def parse_message(raw: bytes) -> dict | None:
    """A frame's JSON-RPC message (an object), or None."""
    try:
        msg = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return msg if isinstance(msg, dict) else None


def session_of(msg: dict | None) -> str | None:
    """The session a message's ``params.sessionId`` names, or None."""
    params = msg.get("params") if msg else None
    sid = params.get("sessionId") if isinstance(params, dict) else None
    return sid if isinstance(sid, str) else None



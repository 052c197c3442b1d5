"""HTTP/2 from acp-tee to an agent's server (``--http2``, or a server that speaks nothing
else: :class:`acp_pipes.tee.http_client.AutoClient`): h2c with prior knowledge for
``http://``, ALPN ``h2`` for ``https://``. The calls are aiohttp's that acp-tee makes,
so the code that makes requests is the same for both HTTP versions.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
from urllib.parse import unquote, urlsplit

import h2.exceptions
from multidict import CIMultiDict

from acp_pipes.tee.h2_engine import H2Error, H2Protocol, H2Stream, outbound_headers
from acp_pipes.tee.http_calls import Call, Verbs

__all__ = ["H2Client", "H2Response", "no_protocol_alert"]


class H2Client(Verbs):
    """``--http2``: acp-tee's HTTP client to the agent's origin over one HTTP/2
    connection (opened at the first request, again once it has ended), a stream per
    request. The calls are aiohttp.ClientSession's that acp-tee makes (``request``,
    ``get``, ``post``, ``delete``, ``close``, ``async with``); errors are
    :class:`H2Error`. ``http://``: h2c with prior knowledge; ``https://``: TLS offering
    ``h2`` by ALPN, an error when the server does not choose it."""

    http_version = "2"  # (aiohttp's ClientSession has a ``version``: HTTP/1.1's)

    def __init__(self, url: str):
        parts = urlsplit(url)
        self.tls = parts.scheme in ("https", "wss")
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.tls else 80)
        self.scheme = "https" if self.tls else "http"
        self.authority = parts.netloc.rpartition("@")[2]
        self.auth: str | None = None
        if parts.username is not None:  # as aiohttp does: a URL's user is Basic auth
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            self.auth = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
        self.proto: H2Protocol | None = None
        self.lock = asyncio.Lock()

    async def close(self) -> None:
        proto, self.proto = self.proto, None
        if proto is not None and not proto.closed:
            with contextlib.suppress(h2.exceptions.ProtocolError):
                proto.conn.close_connection()
            proto.flush()
            if proto.transport is not None:
                proto.transport.close()

    async def _connection(self) -> H2Protocol:
        async with self.lock:
            proto = self.proto
            if proto is not None and not proto.closed and not proto.goaway:
                return proto
            loop = asyncio.get_running_loop()
            context = None
            if self.tls:
                context = ssl.create_default_context()
                context.set_alpn_protocols(["h2"])
            try:
                transport, proto = await loop.create_connection(
                    lambda: H2Protocol(client_side=True), self.host, self.port, ssl=context,
                    server_hostname=self.host if self.tls else None)
            except ssl.SSLError as e:
                why = e.reason or str(e)
                if no_protocol_alert(e):
                    why = "the server speaks no HTTP/2 (acp-tee offered h2 only, by ALPN)"
                raise H2Error(f"TLS: {why}") from None
            if self.tls:
                chosen = transport.get_extra_info("ssl_object").selected_alpn_protocol()
                if chosen != "h2":
                    transport.close()
                    raise H2Error(f"{self.authority} did not agree to HTTP/2 "
                                  f"(ALPN: {chosen or 'none chosen'})")
            self.proto = proto
            return proto

    def request(self, method: str, url: str, *, headers=(), data: bytes | None = None,
                **_aiohttp_options) -> Call:
        return Call(self, method, url, list(headers), data)

    async def send(self, method: str, url: str, headers: list, data: bytes | None
                   ) -> H2Response:
        proto = await self._connection()
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        out = [(":method", method), (":scheme", self.scheme),
               (":authority", self.authority), (":path", target)]
        if self.auth and not any(k.lower() == "authorization" for k, _v in headers):
            out.append(("authorization", self.auth))
        out += outbound_headers(headers)
        if data:
            out.append(("content-length", str(len(data))))
        st = None
        try:
            sid = proto.conn.get_next_available_stream_id()
            st = proto.streams[sid] = H2Stream(sid)
            proto.send_headers(st, out, end=not data)
            if data:
                try:
                    await proto.send_data(st, data, end=True)
                except ConnectionError:
                    if st.headers is None:
                        raise
                    # answered before the body was all sent (a 413, then "stop
                    # sending": RFC 9113, 8.1): the answer stands
            while st.headers is None:
                if st.reset:
                    raise ConnectionResetError(st.reset)
                if st.ended:
                    raise ConnectionResetError("the stream ended without an answer")
                st.changed.clear()
                await st.changed.wait()
        except (ConnectionError, h2.exceptions.H2Error) as e:
            if st is not None:
                proto.cancel(st)
            raise H2Error(str(e) or type(e).__name__) from None
        except asyncio.CancelledError:
            if st is not None:
                proto.cancel(st)
            raise
        return H2Response(proto, st)


class H2Response:
    """An agent's answer over HTTP/2, with the calls of aiohttp's ClientResponse that
    acp-tee makes (``status``, ``reason``, ``headers``, ``read()``,
    ``content.iter_any()``, ``async with``)."""

    reason = None  # HTTP/2 has no reason phrase

    def __init__(self, proto: H2Protocol, st: H2Stream):
        self.proto = proto
        self.stream = st
        headers = st.headers or []
        self.status = int(next((v for k, v in headers if k == ":status"), "0"))
        self.headers: CIMultiDict[str] = CIMultiDict(
            (k, v) for k, v in headers if not k.startswith(":"))
        self.content = self

    async def __aenter__(self) -> H2Response:
        return self

    async def __aexit__(self, *exc) -> None:
        self.release()

    def release(self) -> None:
        self.proto.cancel(self.stream)

    async def read(self) -> bytes:
        try:
            return await self.proto.body(self.stream)
        except ConnectionError as e:
            raise H2Error(str(e)) from None

    async def iter_any(self):
        while True:
            try:
                chunk = await self.proto.chunk(self.stream)
            except ConnectionError as e:
                raise H2Error(str(e)) from None
            if not chunk:
                return
            yield chunk


def no_protocol_alert(e: BaseException) -> bool:
    """Whether a TLS failure is the server's no_application_protocol alert (RFC 7301:
    it speaks none of the protocols offered by ALPN). Python's ``reason`` for it is
    empty with some OpenSSL versions: its text is what says it."""
    return (getattr(e, "reason", None) == "TLSV1_ALERT_NO_APPLICATION_PROTOCOL"
            or "no application protocol" in str(e).lower())

"""The HTTP client acp-tee reaches an agent's server with (``--connect http(s)://...``):
aiohttp's, over HTTP/1.1, until the server shows it speaks HTTP/2 only, then acp-tee's
own over HTTP/2 (:mod:`acp_pipes.tee.h2_client`, imported only then, or with
``--http2``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from acp_pipes.errors import Note
from acp_pipes.tee.http_calls import Call, Verbs
from acp_pipes.tee.options import GRACE, Options

__all__ = ["AutoClient", "client_for", "http_version", "speaks_h2c"]


def client_for(url: str, opts: Options):
    """The HTTP client acp-tee reaches an agent's ``url`` with: with ``--http2``
    :class:`acp_pipes.tee.h2_client.H2Client` (aiohttp's calls, over HTTP/2), else
    :class:`AutoClient` (aiohttp's, HTTP/1.1, unless the server speaks only HTTP/2)."""
    if opts.http2:
        from acp_pipes.tee.h2_client import H2Client

        return H2Client(url)
    return AutoClient(url, opts.note)


class AutoClient(Verbs):
    """aiohttp's HTTP/1.1 client to an agent's server, until that server shows it
    speaks HTTP/2 only: its first answer is no HTTP/1.1 (an HTTP/2 frame, or nothing)
    and a probe over h2c with prior knowledge gets its SETTINGS. Then the request is
    sent again, and every later one, over HTTP/2 (:class:`acp_pipes.tee.h2_client.H2Client`),
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

    async def close(self) -> None:
        await self.h1.close()
        if self.h2 is not None:
            await self.h2.close()

    def request(self, method: str, url: str, **kw) -> Call:
        return Call(self, method, url, kw)

    async def send(self, method: str, url: str, kw: dict):
        if self.h2 is not None:
            return await self.h2.request(method, url, **kw)
        try:
            resp = await self.h1.request(method, url, **kw)
        except (aiohttp.ClientResponseError, aiohttp.ServerDisconnectedError,
                aiohttp.ClientSSLError) as e:
            if self.proven or not await _only_h2(url, e):
                raise
            from acp_pipes.tee.h2_client import H2Client

            if self.h2 is None:
                self.h2 = H2Client(self.url)
                how = "h2c" if url.startswith("http://") else "ALPN h2"
                self.note(f"{self.url} speaks HTTP/2 only: acp-tee speaks HTTP/2 ({how}) "
                          "to it (--http2 says so from the start)")
            return await self.h2.request(method, url, **kw)
        self.proven = True
        return resp


async def _only_h2(url: str, e: Exception) -> bool:
    """Whether the failure ``e`` of an HTTP/1.1 request to ``url`` says its server
    speaks HTTP/2 only: over TLS, its alert that no protocol acp-tee's client offered
    is one it speaks (a server choosing by ALPN, h2 only); in clear, an answer that is
    no HTTP/1.1 and a server that answers the HTTP/2 preface (:func:`speaks_h2c`)."""
    if url.startswith("https://"):
        from acp_pipes.tee.h2_client import no_protocol_alert

        return no_protocol_alert(getattr(e, "os_error", None) or e)
    if isinstance(e, aiohttp.ClientSSLError):
        return False
    return url.startswith("http://") and await speaks_h2c(url)


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


def http_version(http) -> str:
    """The HTTP version a client to the agent speaks: 2 for acp-tee's HTTP/2 one."""
    return getattr(http, "http_version", "1.1")

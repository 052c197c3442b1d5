"""The shape of aiohttp's client calls, for acp-tee's own HTTP clients (the one that
turns to HTTP/2 when a server speaks nothing else, :mod:`acp_pipes.tee.http_client`;
the HTTP/2 one, :mod:`acp_pipes.tee.h2_client`): the code that makes requests is
written once, for aiohttp's ClientSession and for them alike.
"""

from __future__ import annotations

from typing import Any, Self

__all__ = ["Call", "Verbs"]


class Call:
    """A request under way: awaited, it is the response; with ``async with`` too, the
    response released at the block's end. ``args`` are the client's ``send``'s."""

    def __init__(self, client: Any, *args: Any):
        self.client = client
        self.args = args
        self.response: Any = None

    def __await__(self):
        return self.client.send(*self.args).__await__()

    async def __aenter__(self) -> Any:
        self.response = await self.client.send(*self.args)
        return self.response

    async def __aexit__(self, *exc) -> None:
        if self.response is not None:
            self.response.release()


class Verbs:
    """The calls of aiohttp's ClientSession that acp-tee makes, on a client's own
    ``request`` and ``close``: ``get``, ``post``, ``delete``, ``async with``."""

    def request(self, method: str, url: str, **kw: Any) -> Call:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    def get(self, url: str, **kw: Any) -> Call:
        return self.request("GET", url, **kw)

    def post(self, url: str, **kw: Any) -> Call:
        return self.request("POST", url, **kw)

    def delete(self, url: str, **kw: Any) -> Call:
        return self.request("DELETE", url, **kw)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

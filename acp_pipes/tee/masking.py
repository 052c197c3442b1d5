"""RFC 6455's rule that a client masks every frame it sends (5.1), as acp-tee's listener
holds its WebSocket clients to it and aiohttp does not: :class:`ClientWs` is aiohttp's
server side of a WebSocket with its frame reader fed through :class:`Masked`, which
reads each frame's header and passes the bytes on.
"""

from __future__ import annotations

from aiohttp import web

__all__ = ["ClientWs", "Masked"]


class ClientWs(web.WebSocketResponse):
    """aiohttp's server side of a WebSocket, holding clients to RFC 6455's rule that a
    client masks every frame it sends (5.1: the server closes the connection at one it
    did not mask, 1002), as aiohttp itself does not. Its frame reader is fed through
    :class:`Masked`, which reads each frame's header and passes the bytes on."""

    def _post_start(self, request, protocol, writer) -> None:
        handler = request.protocol
        tail, handler._message_tail = handler._message_tail, b""  # bytes after the head
        super()._post_start(request, protocol, writer)
        masked = Masked(handler._payload_parser, self._reader)
        handler._payload_parser = masked
        if tail:
            masked.feed_data(tail)  # as aiohttp's set_parser feeds them


class Masked:
    """A WebSocket frame reader's stand-in that checks each client frame's mask bit
    and passes the bytes to the reader: at an unmasked frame, the bytes before it go
    on, then the reader's queue gets a protocol error (the close is 1002, as for any
    malformed frame). It reads headers only: a payload is skipped by its length."""

    def __init__(self, reader, queue):
        self.reader = reader
        self.queue = queue
        self.head = bytearray()  # the header read so far
        self.skip = 0  # payload bytes of the current frame still to come
        self.failed = False

    def feed_eof(self) -> None:
        self.reader.feed_eof()

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if self.failed:
            return True, b""
        at = self._unmasked_at(data)
        if at is None:
            return self.reader.feed_data(data)
        self.failed = True
        if at:
            self.reader.feed_data(data[:at])
        from aiohttp.http_websocket import WebSocketError, WSCloseCode

        self.queue.set_exception(WebSocketError(
            WSCloseCode.PROTOCOL_ERROR, "a client frame was not masked (RFC 6455, 5.1)"))
        return True, b""

    def _unmasked_at(self, data: bytes) -> int | None:
        """Where in ``data`` the first unmasked frame starts (0 also when its header
        began in an earlier read), or None."""
        head = self.head
        pos, n = 0, len(data)
        if not self.skip and not head:  # the common read: whole frames, each header whole
            while pos + 2 <= n:
                second = data[pos + 1]
                if not second & 0x80:
                    return pos
                size = second & 0x7F
                start = pos + _head_size(second)
                if start > n:
                    break
                if size == 126:
                    size = int.from_bytes(data[pos + 2:pos + 4], "big")
                elif size == 127:
                    size = int.from_bytes(data[pos + 2:pos + 10], "big")
                if start + size > n:
                    self.skip = start + size - n
                    return None
                pos = start + size
            if pos == n:
                return None
        while pos < n:
            if self.skip:
                step = min(self.skip, n - pos)
                self.skip -= step
                pos += step
                continue
            need = 2 if len(head) < 2 else _head_size(head[1])
            take = min(need - len(head), n - pos)
            head += data[pos:pos + take]
            pos += take
            if len(head) < 2:
                continue
            if not head[1] & 0x80:
                return max(pos - len(head), 0)
            if len(head) < _head_size(head[1]):
                continue
            size = head[1] & 0x7F
            self.skip = (int.from_bytes(head[2:4], "big") if size == 126 else
                         int.from_bytes(head[2:10], "big") if size == 127 else size)
            head.clear()
        return None


def _head_size(second: int) -> int:
    """A masked frame's header length, from its second byte (RFC 6455, 5.2)."""
    size = second & 0x7F
    return 2 + (2 if size == 126 else 8 if size == 127 else 0) + 4

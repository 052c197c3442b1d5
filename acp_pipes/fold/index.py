"""A compact index of what was written: 16-byte digest -> int.

ASR-706 (a change after final) and ASR-717 (no second record on resume) need to know,
for every entity ever written, that it was written and where. One dict keyed by fixed
16-byte digests (of session and entity key) holds it; the value packs what the caller
needs into one int.
"""

from __future__ import annotations

__all__ = ["LIMIT", "DigestIndex"]

#: Entries kept in memory.
LIMIT = 1 << 62


class DigestIndex:
    """``get(digest)`` / ``put(digest, value)``; digests are 16-byte ``bytes``, values ints."""

    __slots__ = ("mem", "limit", "db")

    def __init__(self, limit: int = LIMIT):
        self.mem: dict[bytes, int] = {}
        self.limit = limit
        self.db = None

    def get(self, digest: bytes) -> int | None:
        return self.mem.get(digest)

    def __contains__(self, digest: bytes) -> bool:
        return digest in self.mem

    def put(self, digest: bytes, value: int) -> None:
        self.mem[digest] = value

    def spill(self) -> None:
        """Nothing to do while everything is in memory."""

"""A digest index whose memory does not grow with the recording: 16-byte digest -> int.

ASR-706 (a change after final) and ASR-717 (no second record on resume) need to know,
for every entity ever written, that it was written and where. The newest entries live in
a dict; past :data:`LIMIT` entries the dict moves, in one batch, to a private temporary
sqlite database (stdlib; deleted when closed, its page cache bounded) and a fixed-size
Bloom filter remembers which digests went to disk, so a miss (the common case: an entity
never seen) almost never touches the disk. Memory: at most LIMIT entries (~140 B each)
plus the 2 MB filter and sqlite's page cache, whatever the recording's length; a
lookup past the first spill is correct for any number of entries (the filter only
decides whether the disk is asked).
"""

from __future__ import annotations

import sqlite3

__all__ = ["LIMIT", "DigestIndex"]

#: Entries kept in memory before the index spills to disk.
LIMIT = 1 << 15
_BLOOM_BITS = 1 << 24  # 2 MB, two probes: ~1% false positives at 1M entries on disk
_MASK = _BLOOM_BITS - 1


class DigestIndex:
    """``get(digest)`` / ``put(digest, value)``; digests are 16-byte ``bytes``, values ints."""

    __slots__ = ("mem", "limit", "db", "bloom", "on_disk")

    def __init__(self, limit: int = LIMIT):
        self.mem: dict[bytes, int] = {}
        self.limit = limit
        self.db: sqlite3.Connection | None = None
        self.bloom: bytearray | None = None
        self.on_disk = 0

    def get(self, digest: bytes) -> int | None:
        v = self.mem.get(digest)
        if v is not None or self.db is None:
            return v
        h = int.from_bytes(digest[:8], "little")
        bloom = self.bloom
        b = h & _MASK
        if not bloom[b >> 3] >> (b & 7) & 1:
            return None
        b = (h >> 32) & _MASK
        if not bloom[b >> 3] >> (b & 7) & 1:
            return None
        row = self.db.execute("SELECT v FROM k WHERE d = ?", (digest,)).fetchone()
        return None if row is None else row[0]

    def __contains__(self, digest: bytes) -> bool:
        return self.get(digest) is not None

    def put(self, digest: bytes, value: int) -> None:
        mem = self.mem
        mem[digest] = value
        if len(mem) > self.limit:
            self.spill()

    def spill(self) -> None:
        """Move the memory entries to disk (the caller found more than ``limit``)."""
        if self.db is None:
            # "": a private temporary on-disk database, removed when closed
            self.db = sqlite3.connect("", isolation_level=None)
            self.db.execute("PRAGMA journal_mode = OFF")
            self.db.execute("PRAGMA synchronous = OFF")
            self.db.execute("CREATE TABLE k (d BLOB PRIMARY KEY, v INTEGER) WITHOUT ROWID")
            self.bloom = bytearray(_BLOOM_BITS >> 3)
        bloom = self.bloom
        frombytes = int.from_bytes
        for d in self.mem:
            h = frombytes(d[:8], "little")
            b = h & _MASK
            bloom[b >> 3] |= 1 << (b & 7)
            b = (h >> 32) & _MASK
            bloom[b >> 3] |= 1 << (b & 7)
        db = self.db
        db.execute("BEGIN")
        # in key order: B-tree inserts that land next to each other
        db.executemany("INSERT OR REPLACE INTO k VALUES (?, ?)", sorted(self.mem.items()))
        db.execute("COMMIT")
        self.on_disk += len(self.mem)
        self.mem = {}

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

"""Tables whose memory does not grow with the recording: the newest entries in a dict,
the rest in a private temporary sqlite database (stdlib; deleted when closed, its page
cache bounded) behind a fixed-size Bloom filter that remembers which keys went to disk,
so a miss (the common case: an entity never seen) almost never touches the disk. A
lookup past the first spill is correct for any number of entries (the filter only
decides whether the disk is asked).

:class:`DigestIndex` (16-byte digest -> int): ASR-706 (a change after final) and
ASR-717 (no second record on resume) need to know, for every entity ever written, that
it was written and where. Past :data:`LIMIT` entries the dict moves to disk in one
batch. Memory: at most LIMIT entries (~140 B each) plus the 2 MB filter.

:class:`FinalStore` (an entity's (session, kind, ID) -> its final state, as bytes): a
change after final must fold onto the whole entity however long ago it went final
(ASR-706). States go to a temporary file in batches of :data:`STORE_BYTES`; where each
one is, to a dict of at most :data:`STORE_LIMIT` entries and then to sqlite, as above.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Hashable
from typing import BinaryIO, Generic, TypeVar

import blake3
import orjson

__all__ = ["LIMIT", "STORE_BYTES", "STORE_LIMIT", "DigestIndex", "FinalStore", "KeyIndex",
           "key_digest"]

#: Entries kept in memory before the index spills to disk.
LIMIT = 1 << 15
#: Bytes of final states kept in memory before they are written to a temporary file.
STORE_BYTES = 1 << 20
#: Entries of where final states are kept in memory before they move to disk (a key
#: tuple costs more memory than a digest).
STORE_LIMIT = 1 << 13
_BLOOM_BITS = 1 << 24  # 2 MB, two probes: ~1% false positives at 1M entries on disk
_MASK = _BLOOM_BITS - 1


def _database() -> sqlite3.Connection:
    # "": a private temporary on-disk database, removed when closed
    db = sqlite3.connect("", isolation_level=None)
    db.execute("PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = OFF")
    db.execute("CREATE TABLE k (d BLOB PRIMARY KEY, v) WITHOUT ROWID")
    return db


def _bloom_add(bloom: bytearray, h: int) -> None:
    b = h & _MASK
    bloom[b >> 3] |= 1 << (b & 7)
    b = (h >> 32) & _MASK
    bloom[b >> 3] |= 1 << (b & 7)


def _bloom_has(bloom: bytearray, h: int) -> bool:
    b = h & _MASK
    if not bloom[b >> 3] >> (b & 7) & 1:
        return False
    b = (h >> 32) & _MASK
    return bool(bloom[b >> 3] >> (b & 7) & 1)


def _spill(db: sqlite3.Connection, rows: dict[bytes, int]) -> None:
    db.execute("BEGIN")
    # in key order: B-tree inserts that land next to each other
    db.executemany("INSERT OR REPLACE INTO k VALUES (?, ?)", sorted(rows.items()))
    db.execute("COMMIT")


K = TypeVar("K", bound=Hashable)


class _Index(Generic[K]):
    """``get(key)`` / ``put(key, value)``, values ints; a subclass says which 64 bits of
    a key the Bloom filter takes (:meth:`_hash`) and what names it on disk
    (:meth:`_disk_key`)."""

    __slots__ = ("mem", "limit", "db", "bloom", "on_disk")

    def __init__(self, limit: int = LIMIT):
        self.mem: dict[K, int] = {}
        self.limit = limit
        self.db: sqlite3.Connection | None = None
        self.bloom = bytearray()  # the filter, made with the database (first spill)
        self.on_disk = 0

    def _hash(self, key: K) -> int:
        raise NotImplementedError

    def _disk_key(self, key: K) -> bytes:
        raise NotImplementedError

    def get(self, key: K) -> int | None:
        v = self.mem.get(key)
        if v is not None or self.db is None:
            return v
        if not _bloom_has(self.bloom, self._hash(key)):
            return None
        row = self.db.execute("SELECT v FROM k WHERE d = ?", (self._disk_key(key),)).fetchone()
        return None if row is None else int(row[0])

    def __contains__(self, key: K) -> bool:
        return self.get(key) is not None

    def put(self, key: K, value: int) -> None:
        mem = self.mem
        mem[key] = value
        if len(mem) > self.limit:
            self.spill()

    def spill(self) -> None:
        """Move the memory entries to disk (the caller found more than ``limit``)."""
        if self.db is None:
            self.db = _database()
            self.bloom = bytearray(_BLOOM_BITS >> 3)
        bloom = self.bloom
        hash_, disk_key = self._hash, self._disk_key
        rows = {}
        for k, v in self.mem.items():
            _bloom_add(bloom, hash_(k))
            rows[disk_key(k)] = v
        _spill(self.db, rows)
        self.on_disk += len(self.mem)
        self.mem = {}

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None


class DigestIndex(_Index[bytes]):
    """Keys are 16-byte digests (``bytes``): the filter takes their first 64 bits, and
    the disk keeps them as they are."""

    __slots__ = ()

    def _hash(self, key: bytes) -> int:
        return int.from_bytes(key[:8], "little")

    def _disk_key(self, key: bytes) -> bytes:
        return key


def key_digest(key: Hashable) -> bytes:
    """16 bytes naming a JSON-serialisable key on disk (the same in every process)."""
    return blake3.blake3(orjson.dumps(key)).digest(16)


class KeyIndex(_Index[Hashable]):
    """An index whose keys are hashable JSON values (tuples of strings) kept as they
    are: the filter takes Python's ``hash`` (stable within the process), so a key never
    stored costs no digest; the digest is made only for the disk."""

    __slots__ = ()

    def _hash(self, key: Hashable) -> int:
        return hash(key)

    def _disk_key(self, key: Hashable) -> bytes:
        return key_digest(key)


class FinalStore:
    """``put(key, state)`` / ``get(key)``: ``key`` a hashable JSON value (a tuple of
    strings), ``state`` bytes. States are appended to a buffer that goes, past
    :data:`STORE_BYTES`, to a temporary file in one write; where each state is
    (offset, length) is kept by a :class:`KeyIndex` of :data:`STORE_LIMIT` entries in
    memory."""

    __slots__ = ("where", "buf", "buf_limit", "flushed", "file")

    def __init__(self, limit: int = STORE_LIMIT, buf_limit: int = STORE_BYTES):
        self.where = KeyIndex(limit)  # key -> offset << 32 | length
        self.buf = bytearray()
        self.buf_limit = buf_limit
        self.flushed = 0  # bytes in the file; buf continues from there
        self.file: BinaryIO | None = None

    def get(self, key: Hashable) -> bytes | None:
        at = self.where.get(key)
        if at is None:
            return None
        start, n = at >> 32, at & 0xFFFFFFFF
        if start >= self.flushed:
            start -= self.flushed
            return bytes(self.buf[start:start + n])
        if self.file is None:  # what was flushed went to the file: never
            raise RuntimeError("state store: bytes flushed to no file")
        return os.pread(self.file.fileno(), n, start)

    def put(self, key: Hashable, state: bytes) -> None:
        buf = self.buf
        self.where.put(key, (self.flushed + len(buf)) << 32 | len(state))
        buf += state
        if len(buf) > self.buf_limit:
            if self.file is None:
                self.file = tempfile.TemporaryFile()
            self.file.write(buf)
            self.file.flush()
            self.flushed += len(buf)
            self.buf = bytearray()

    def close(self) -> None:
        self.where.close()
        if self.file is not None:
            self.file.close()
            self.file = None

"""Writing ASR streams: spooled per session, each written header first.

Sessions interleave on a connection and a header depends on the whole stream, so each
stream's records are spooled (in memory up to :data:`SPOOL_MEMORY` bytes, then in a
temporary file) and written when the input is done: to ``DIR/<name>.asr.jsonl`` or back
to back on one output. File names are the session ID percent-encoded (everything but
ASCII letters, digits, ``-``, ``_`` and ``~``), so any ID gives one safe name and
:func:`session_from_name` gives the ID back.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Iterable
from typing import BinaryIO
from urllib.parse import quote, unquote

import orjson

__all__ = ["SUFFIX", "Spool", "file_name", "session_from_name"]

SUFFIX = ".asr.jsonl"
SPOOL_MEMORY = 1 << 20
_dumps = orjson.dumps
_NL = orjson.OPT_APPEND_NEWLINE  # one C call a record: the JSON and its LF


def file_name(sid: str) -> str:
    """``<percent-encoded session ID>.asr.jsonl`` (acp-pipes choice)."""
    return quote(sid, safe="-_~").replace(".", "%2E") + SUFFIX


def session_from_name(name: str) -> str:
    base = os.path.basename(name)
    if base.endswith(SUFFIX):
        base = base[: -len(SUFFIX)]
    return unquote(base)


class Spool:
    """Per-session spools; ``add`` records, then ``write_to``/``write_dir``.

    Each session's bytes grow in a ``bytearray`` (appending is one C call per record);
    past :data:`SPOOL_MEMORY` they move to an unnamed temporary file in one write, so
    memory stays bounded by the sessions' tails, not by the recording."""

    def __init__(self, only: str | None = None):
        self.only = only
        self.files: dict[str, _SessionSpool] = {}

    def add(self, pairs: Iterable[tuple[str, dict]]) -> None:
        files = self.files
        only = self.only
        dumps = orjson.dumps
        nl = _NL
        for sid, rec in pairs:
            if only is not None and sid != only:
                continue
            f = files.get(sid)
            if f is None:
                f = files[sid] = _SessionSpool()
            buf = f.buf
            buf += dumps(rec, option=nl)
            if len(buf) > SPOOL_MEMORY:
                f.spill()

    def put(self, sid: str, rec: dict) -> int:
        """Spool one record of every session (``only`` applies when writing, so a
        record stays readable by :meth:`get`); returns its offset in its session."""
        f = self.files.get(sid)
        if f is None:
            f = self.files[sid] = _SessionSpool()
        buf = f.buf
        pos = f.spilled + len(buf)
        buf += _dumps(rec, option=_NL)
        if len(buf) > SPOOL_MEMORY:
            f.spill()
        return pos

    def get(self, sid: str, pos: int) -> dict:
        """The record :meth:`put` spooled at ``pos`` (read back from memory or disk)."""
        return orjson.loads(self.files[sid].line_at(pos))

    def _emit(self, out: BinaryIO, sid: str, header: dict) -> None:
        out.write(orjson.dumps(header) + b"\n")
        f = self.files.get(sid)
        if f is not None:
            f.copy_to(out)

    def write_to(self, out: BinaryIO, headers: dict[str, dict]) -> int:
        n = 0
        for sid, h in headers.items():
            if self.only is not None and sid != self.only:
                continue
            self._emit(out, sid, h)
            n += 1
        return n

    def write_dir(self, directory: str, headers: dict[str, dict]) -> list[str]:
        os.makedirs(directory, exist_ok=True)
        written = []
        for sid, h in headers.items():
            if self.only is not None and sid != self.only:
                continue
            path = os.path.join(directory, file_name(sid))
            tmp = path + ".part"
            with open(tmp, "wb") as out:
                self._emit(out, sid, h)
            os.replace(tmp, path)
            written.append(path)
        return written


class _SessionSpool:
    """One session's records: a memory tail, and a temporary file once it grew."""

    __slots__ = ("buf", "file", "spilled")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.file: BinaryIO | None = None
        self.spilled = 0  # bytes in the file

    def spill(self) -> None:
        if self.file is None:
            self.file = tempfile.TemporaryFile()
        self.file.seek(0, os.SEEK_END)
        self.file.write(self.buf)
        self.spilled += len(self.buf)
        self.buf.clear()

    def line_at(self, pos: int) -> bytes:
        """The line starting at ``pos`` (without its LF)."""
        if pos >= self.spilled:
            start = pos - self.spilled
            return bytes(self.buf[start:self.buf.index(b"\n", start)])
        f = self.file
        f.flush()
        f.seek(pos)
        line = f.readline()
        if not line.endswith(b"\n"):  # continues in the memory tail
            line += self.buf[:self.buf.index(b"\n")]
        return line.rstrip(b"\n")

    def copy_to(self, out: BinaryIO) -> None:
        f = self.file
        if f is not None:
            f.flush()
            if not _send(f, out):
                f.seek(0)
                while chunk := f.read(1 << 20):
                    out.write(chunk)
            f.close()
            self.file = None
        out.write(self.buf)
        self.buf = bytearray()


def _send(f: BinaryIO, out: BinaryIO) -> bool:
    """Copy the whole temporary file to ``out`` in the kernel (``os.sendfile``), not
    through Python buffers. Only for a plain file or pipe (a ``BufferedWriter`` or
    ``FileIO``: a wrapper such as ``GzipFile`` has the descriptor of what it encodes
    into); False, with nothing written, where that does not apply or the system
    refuses at once (then the caller copies). What is left after a later error is
    copied through Python."""
    if out.__class__ is not io.BufferedWriter and out.__class__ is not io.FileIO:
        return False
    src = f.fileno()
    size = os.fstat(src).st_size
    out.flush()
    fd = out.fileno()
    offset = 0
    try:
        while offset < size:
            sent = os.sendfile(fd, src, offset, size - offset)
            if sent == 0:
                break
            offset += sent
    except OSError:
        if offset == 0:
            return False
    if offset < size:
        f.seek(offset)
        while chunk := f.read(1 << 20):
            out.write(chunk)
    return True

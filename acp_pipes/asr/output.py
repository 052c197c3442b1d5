"""Writing ASR streams: spooled per session, each written header first.

Sessions interleave on a connection and a header depends on the whole stream, so each
stream's records are spooled (in memory up to :data:`SPOOL_MEMORY` bytes, then in a
temporary file) and written when the input is done: to ``DIR/<name>.asr.jsonl`` or back
to back on one output. File names are the session ID percent-encoded (everything but
ASCII letters, digits, ``-``, ``_`` and ``~``), so any ID gives one safe name and
:func:`session_from_name` gives the ID back.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from typing import BinaryIO
from urllib.parse import quote, unquote

import orjson

__all__ = ["SUFFIX", "Spool", "file_name", "session_from_name"]

SUFFIX = ".asr.jsonl"
SPOOL_MEMORY = 1 << 20


def file_name(sid: str) -> str:
    """``<percent-encoded session ID>.asr.jsonl`` (acp-pipes choice)."""
    return quote(sid, safe="-_~").replace(".", "%2E") + SUFFIX


def session_from_name(name: str) -> str:
    base = os.path.basename(name)
    if base.endswith(SUFFIX):
        base = base[: -len(SUFFIX)]
    return unquote(base)


class Spool:
    """Per-session spools; ``add`` records, then ``write_to``/``write_dir``."""

    def __init__(self, only: str | None = None):
        self.only = only
        self.files: dict[str, tempfile.SpooledTemporaryFile] = {}

    def add(self, pairs: Iterable[tuple[str, dict]]) -> None:
        files = self.files
        only = self.only
        dumps = orjson.dumps
        for sid, rec in pairs:
            if only is not None and sid != only:
                continue
            f = files.get(sid)
            if f is None:
                f = files[sid] = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)
            f.write(dumps(rec) + b"\n")

    def _emit(self, out: BinaryIO, sid: str, header: dict) -> None:
        out.write(orjson.dumps(header) + b"\n")
        f = self.files.get(sid)
        if f is not None:
            f.seek(0)
            while chunk := f.read(1 << 16):
                out.write(chunk)
            f.close()

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

"""The manifest: ``DEST/manifest.jsonl``, one JSON line per input done, appended as each
is done. The last line of an input is its state: its content hash, the version and
options that made its outputs, the outputs, status, error and duration.

A local manifest is appended line by line (one ``write`` of a whole line on an
``O_APPEND`` file), so a batch killed at any point leaves every finished input in it;
a torn last line is skipped when read. An object store cannot append: there the whole
manifest is written again at most every :data:`FLUSH_SECONDS` and at the end, and a
batch killed in between does the inputs of its last seconds again.

A manifest is input like any other (edited by hand, cut short, another program's):
an entry is relied on only as far as it holds (:func:`trusted`), so no manifest makes a
rerun remove or write a file outside DEST, or stops the batch.
"""

from __future__ import annotations

import os
import time
from typing import Any

import orjson

from acp_pipes.batch.places import Dest, inside
from acp_pipes.errors import UsageError

__all__ = ["MANIFEST", "Manifest", "trusted"]

MANIFEST = "manifest.jsonl"
FLUSH_SECONDS = 2.0


class Manifest:
    """The entries of ``dest``'s manifest (``entries``: the last one of each input), and
    the appending of new ones; ``shown`` is its name in messages."""

    def __init__(self, dest: Dest, shown: str | None = None):
        self.dest = dest
        self.entries: dict[str, dict[str, Any]] = {}
        try:
            data = dest.read(MANIFEST) or b""
            self._fd = dest.append_handle(MANIFEST)
        except OSError as e:
            raise UsageError(f"{shown or dest.where(MANIFEST)}: cannot read or append to the "
                             f"manifest: {e.strerror or e}") from None
        for line in data.splitlines():
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:  # torn by a kill while it was written
                continue
            if isinstance(entry, dict) and isinstance(entry.get("input"), str):
                self.entries[entry["input"]] = trusted(entry)
        self._whole = self._fd is None  # written whole, not appended
        self._lines: list[bytes] = []
        self._flushed = time.monotonic()
        if self._whole:
            self._lines = [data if not data or data.endswith(b"\n") else data + b"\n"]
        elif data and not data.endswith(b"\n"):
            # the torn line ends here; the next starts clean (not whole: _fd is open)
            os.write(self._fd, b"\n")  # type: ignore[arg-type]

    def add(self, entry: dict[str, Any]) -> None:
        self.entries[entry["input"]] = entry
        line = orjson.dumps(entry, option=orjson.OPT_APPEND_NEWLINE)
        if self._fd is not None:  # one write of the whole line: never two lines mixed
            view = memoryview(line)
            while view:
                view = view[os.write(self._fd, view):]
            return
        self._lines.append(line)
        if time.monotonic() - self._flushed >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self._whole:
            self.dest.write(MANIFEST, b"".join(self._lines))
            self._flushed = time.monotonic()

    def close(self) -> None:
        if self._whole:
            self.flush()
        elif self._fd is not None:
            os.close(self._fd)
            self._fd = None


def trusted(entry: dict[str, Any]) -> dict[str, Any]:
    """``entry`` as far as it can be relied on: ``outputs`` a list of files under DEST
    (an entry whose outputs are anything else keeps the files it names there and is
    no longer done: its input is done again), ``status`` a string, ``info`` an object."""
    outputs = entry.get("outputs")
    kept = [o for o in outputs if inside(o)] if isinstance(outputs, list) else []
    status = entry.get("status")
    if not isinstance(status, str) or not isinstance(outputs, list) \
            or len(kept) != len(outputs):
        status = "failed"
    clean = {**entry, "outputs": kept, "status": status}
    if not isinstance(clean.get("info"), dict):
        clean.pop("info", None)
    return clean

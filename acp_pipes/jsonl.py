"""Record I/O at the edges: opening inputs, reading lines with their numbers, writing JSONL.

Every tool reads JSONL the same way, so a bad line is reported the same way everywhere:
``InputError`` carries the source name and the 1-based line number, and readers yield
what came before it untouched. Lines are bytes without the final LF (a CR before the LF
is kept: it belongs to the line).
"""

from __future__ import annotations

import io
import sys
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from acp_pipes.errors import InputError  # re-exported: readers raise it

GZIP_MAGIC = b"\x1f\x8b"

#: What reading an input can raise besides our own errors: I/O errors (gzip.BadGzipFile
#: is one), a .gz cut short (EOFError), a corrupt .gz body (zlib.error). Every reader
#: turns these into an InputError naming the file and line.
READ_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error)
STDIN = "-"


@dataclass(frozen=True, slots=True)
class Line:
    """One input line: where it came from, and its bytes without the LF."""

    source: str
    number: int
    raw: bytes
    terminated: bool = True  # False for a last line that had no LF


def display_name(path: str) -> str:
    return "stdin" if path == STDIN else path


def open_source(path: str) -> BinaryIO:
    """Open a path (``-`` is stdin) for binary reading, gunzipping ``.gz`` transparently.

    Compression is detected by its magic bytes, not the name, so ``zcat``-less pipes
    such as ``cat log.jsonl.gz | acp-frame`` work too.
    """
    if path == STDIN:
        raw: BinaryIO = sys.stdin.buffer
    else:
        try:
            raw = open(path, "rb")  # noqa: SIM115 - the caller closes it
        except OSError as e:
            raise InputError(path, 0, f"cannot open: {e.strerror or e}") from None
    reader = raw if hasattr(raw, "peek") else io.BufferedReader(raw)  # type: ignore[arg-type]
    try:
        head = reader.peek(2)[:2]
    except OSError as e:
        raise InputError(display_name(path), 0, f"cannot read: {e.strerror or e}") from None
    if head == GZIP_MAGIC:
        import gzip  # only for .gz input: kept off every tool's start-up path

        return gzip.GzipFile(fileobj=reader, mode="rb")  # type: ignore[return-value]
    return reader


def iter_lines(stream: BinaryIO, source: str) -> Iterator[Line]:
    """Yield the lines of a binary stream, numbered from 1, without their LF."""
    number = 0
    try:
        for chunk in stream:
            number += 1
            if chunk.endswith(b"\n"):
                yield Line(source, number, chunk[:-1])
            else:
                yield Line(source, number, chunk, terminated=False)
    except READ_ERRORS as e:
        raise InputError(source, number + 1, f"cannot read: {e}") from None


def read_lines(path: str) -> Iterator[Line]:
    """Open ``path`` and yield its lines; the file is closed when the iterator ends."""
    source = display_name(path)
    stream = open_source(path)
    try:
        yield from iter_lines(stream, source)
    finally:
        if path != STDIN:
            stream.close()


def raw_lines(path: str) -> Iterator[bytes]:
    """Open ``path`` and yield its lines as bytes, each with its LF (the fast form for a
    reader that parses them itself); the file is closed when the iterator ends."""
    stream = open_source(path)
    try:
        yield from stream
    except READ_ERRORS as e:
        raise InputError(display_name(path), 0, f"cannot read: {e}") from None
    finally:
        if path != STDIN:
            stream.close()


def unparsable(terminated: bool) -> str:
    """What to call a line that is not JSON: a last line without LF is most likely one
    cut short by a crash, and every reader says so the same way."""
    return "not JSON" if terminated else "torn last line (no LF)"


def parse_line(line: Line) -> Any:
    """Parse a line as JSON, raising InputError naming the source and line."""
    try:
        return orjson.loads(line.raw)
    except orjson.JSONDecodeError as e:
        raise InputError(line.source, line.number, f"{unparsable(line.terminated)}: {e}") from None


def dumps(record: Any) -> bytes:
    """One JSONL line (with its LF). Key order is the record's own: tools build records
    in a fixed order, so the same input gives byte-identical output."""
    return orjson.dumps(record) + b"\n"


def write_records(records: Iterable[Any], out: BinaryIO) -> int:
    """Write records as JSONL; returns how many were written."""
    n = 0
    write = out.write
    for record in records:
        write(orjson.dumps(record) + b"\n")
        n += 1
    return n

"""JSONL lines and records: opening inputs, reading their lines with their numbers,
parsing them, writing records as lines.

Every tool reads JSONL the same way, so a bad line is reported the same way everywhere:
``InputError`` carries the source name and the 1-based line number, and readers yield
what came before it untouched. Lines are bytes without the final LF (a CR before the LF
is kept: it belongs to the line). An input still being written (a pipe behind a live
acp-tee, ``--follow``) is read through :mod:`acp_pipes.io.live`; outputs are written
through :mod:`acp_pipes.io.output`.
"""

from __future__ import annotations

import codecs
import io
import sys
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, cast

import orjson

from acp_pipes.errors import InputError
from acp_pipes.io.live import Followed, GzipLines, Live, is_live, open_live
from acp_pipes.io.settings import RUN, LineTooLong

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


def stdin() -> BinaryIO:
    """Standard input, binary; an InputError when the process was started without one
    (``<&-``: ``sys.stdin`` is None)."""
    if sys.stdin is None:
        raise InputError("stdin", 0, "closed: nothing to read (name a file, or redirect "
                         "one with <)")
    return sys.stdin.buffer


def open_source(path: str, live: Live | None = None) -> BinaryIO:
    """Open a path (``-`` is stdin) for binary reading, gunzipping ``.gz`` transparently.

    Compression is detected by its magic bytes, not the name, so ``zcat``-less pipes
    such as ``cat log.jsonl.gz | acp-frame`` work too. With ``live``, an input that may
    still be written (a pipe, a FIFO, a terminal; a regular file with ``live.follow``)
    is read as :class:`Live` says; iterating the result gives its lines.
    """
    if path == STDIN:
        raw: BinaryIO = stdin()
        if live is not None:
            raw = open_live(None, live, raw)
    elif live is not None:
        raw = open_live(path, live)
    else:
        try:
            raw = open(path, "rb")  # noqa: SIM115 - the caller closes it
        except OSError as e:
            raise InputError(path, 0, f"cannot open: {e.strerror or e}") from None
    # (a BinaryIO without peek is a raw stream: what BufferedReader wraps)
    reader = raw if hasattr(raw, "peek") else io.BufferedReader(raw)  # type: ignore[type-var]
    try:
        head = reader.peek(2)[:2]
    except OSError as e:
        raise InputError(display_name(path), 0, f"cannot read: {e.strerror or e}") from None
    limit = RUN.max_line_bytes
    if head == GZIP_MAGIC:
        import gzip  # only for .gz input: kept off every tool's start-up path

        if is_live(reader):  # still being written
            reader = GzipLines(reader, limit)  # type: ignore[assignment]  # read for its lines
        else:
            # (_Capped needs read1, fileno and close of it, which a GzipFile has)
            reader = _capped(gzip.GzipFile(fileobj=reader, mode="rb"),  # type: ignore[arg-type]
                             limit)
    else:
        reader = _capped(reader, limit)
    if hasattr(reader, "peek"):  # (a growing .gz is judged by its readers, line by line)
        try:
            judge_start(reader.peek(SNIFF_BYTES), display_name(path))
        except READ_ERRORS as e:
            raise InputError(display_name(path), 0, f"cannot read: {e}") from None
    if live is not None and live.follow and path != STDIN:
        return Followed(reader)  # type: ignore[return-value]  # read for its lines
    return reader


class _Capped(io.RawIOBase):
    """The bytes of a buffered input, read a chunk at a time, refused past a line longer
    than ``limit``: a reader never holds more than that of one line (and a chunk), where
    reading a line whole would take all of it into memory, however big. Only the first
    and the last LF of each chunk are looked for (``bytes.find`` and ``rfind``, in C):
    counting lines would cost a third of a nanosecond a byte, and a reader knows its line
    numbers itself. With ``source``, lines are counted and the error is an InputError
    naming the line (for stdin read as a stream, by loops that do not count)."""

    def __init__(self, inner: BinaryIO, limit: int, source: str | None = None):
        super().__init__()
        self.inner = inner
        # read1, not readinto1: with bytes buffered (a peek), readinto1 of a buffer
        # bigger than its own reads the raw stream for more, and a pipe waits there
        self.read1 = inner.read1  # type: ignore[attr-defined]  # buffered: BinaryIO has no read1
        self.limit = limit
        self.chunk = min(1 << 16, limit + 1)  # no line of more than limit within a chunk
        self.run = 0  # bytes of the line being read, before this chunk
        self.source = source
        self.lines = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        data = self.read1(min(len(buf), self.chunk))
        n = len(data)
        if not n:
            return n
        buf[:n] = data
        first = data.find(b"\n")
        if first < 0:
            self.run += n
            if self.run > self.limit:
                self._refuse()
            return n
        if self.run + first > self.limit:
            self._refuse()
        if self.source is not None:
            self.lines += data.count(b"\n")
        self.run = n - data.rfind(b"\n") - 1
        return n

    def _refuse(self) -> None:
        if self.source is None:
            raise LineTooLong(self.limit)
        e = LineTooLong(self.limit)
        raise InputError(self.source, self.lines + 1, f"cannot read: {e}")  # as readers say

    def fileno(self) -> int:
        return self.inner.fileno()

    def close(self) -> None:
        if not self.closed:
            self.inner.close()
        super().close()


def _capped(inner: BinaryIO, limit: int, source: str | None = None) -> BinaryIO:
    return io.BufferedReader(_Capped(inner, limit, source), 1 << 16)


def stdin_stream() -> BinaryIO:
    """Standard input read as a stream of lines by a loop of its own (a client on
    stdin: ``acp-replay --serve``, the echo agent), its lines capped as every reader's
    are; the error names the line. A client that sends no UTF-8 JSONL at all is refused
    as a file is (:func:`judge_start`); one that sends nothing ended its session, which
    is each tool's own business."""
    stream = _capped(stdin(), RUN.max_line_bytes, "stdin")
    head = first_bytes(stream)
    if head:
        judge_start(head, "stdin")
    return stream


def first_bytes(stream: BinaryIO) -> bytes:
    """What a buffered input holds at its start (one read at most: a pipe is not waited
    on for more), without consuming it: for :func:`judge_start`."""
    return cast(io.BufferedReader, stream).peek(SNIFF_BYTES)


#: How much of an input's start :func:`judge_start` looks at: what one read gives, at
#: most this (a pipe's first write; a file's first block).
SNIFF_BYTES = 1 << 16


def judge_start(head: bytes, source: str) -> None:
    r"""The one answer of every tool to an input that is empty or is no UTF-8 JSONL at
    all, judged from its first bytes before anything is read: an InputError (exit 2)
    naming the source, ``empty input (0 bytes)``, or ``not UTF-8 JSONL`` with the byte
    offset of the first byte that no JSON text holds (a NUL, or a byte that is not
    UTF-8) in the first line that is not blank. JSON text is UTF-8 (RFC 8259 8.1) and
    never holds a raw NUL, so no JSONL input is refused; a wire log keeps an agent's
    non-UTF-8 bytes as base64, and a later line that is not JSON is each reader's to
    report (at most 20 of an input are said: :class:`acp_pipes.cli.runner.Said`).

    >>> judge_start(b'{"format":"acp-pipes/wire"}\n', "w.jsonl")
    >>> judge_start(b"", "w.jsonl")
    Traceback (most recent call last):
    acp_pipes.errors.InputError: w.jsonl: empty input (0 bytes)
    >>> judge_start(b'{"a":1}\x8f\n', "w.bin")
    Traceback (most recent call last):
    acp_pipes.errors.InputError: w.bin: not UTF-8 JSONL: byte 7 (0x8f) is not UTF-8
    """
    if not head:
        raise InputError(source, 0, "empty input (0 bytes)")
    start = len(head) - len(head.lstrip(b" \t\r\n"))  # blank lines: no line at all
    end = head.find(b"\n", start)
    first = head[start:] if end < 0 else head[start:end]
    nul = first.find(b"\0")
    try:  # a first line cut at the end of what was read may end inside a character
        codecs.getincrementaldecoder("utf-8")().decode(first, final=end >= 0)
    except UnicodeDecodeError as e:
        bad = e.start if nul < 0 else min(e.start, nul)
    else:
        if nul < 0:
            return
        bad = nul
    what = "is a NUL" if first[bad] == 0 else f"(0x{first[bad]:02x}) is not UTF-8"
    raise InputError(source, 0, f"not UTF-8 JSONL: byte {start + bad} {what}")


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


def read_lines(path: str) -> Generator[Line, None, None]:
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
    number = 0
    try:
        for number, line in enumerate(stream, 1):  # noqa: B007 - the line of an error
            yield line
    except READ_ERRORS as e:
        raise InputError(display_name(path), number + 1, f"cannot read: {e}") from None
    finally:
        if path != STDIN:
            stream.close()


def unparsable(terminated: bool, error: BaseException | None = None) -> str:
    """What to call a line (or a frame) that does not parse, every reader alike: a last
    line without LF is most likely one cut short by a crash; one nested deeper than the
    parsers read (``error`` says so: :func:`too_deep`) may well be JSON, and is said to
    be too deep; the rest is not JSON."""
    if not terminated:
        return "torn last line (no LF)"
    return "too deep to parse" if error is not None and too_deep(error) else "not JSON"


def too_deep(error: BaseException) -> bool:
    """Whether a parser's refusal is for nesting beyond its depth (orjson's "depth limit
    exceeded" at 1024 levels, the json module's RecursionError, or
    :class:`acp_pipes.protocol.canonical.TooDeep`), not for what the text holds."""
    return (isinstance(error, RecursionError) or type(error).__name__ == "TooDeep"
            or str(error).startswith(("depth limit exceeded", "recursion limit exceeded")))


def json_error(raw: bytes, error: Exception) -> str:
    r"""Why ``raw`` is not JSON, as every reader says it: orjson's words, except for a
    line that is not UTF-8, which orjson calls a string with surrogates: the byte that
    is not, by its offset in the line.

    >>> json_error(b'{"a":"\xff"}', orjson.JSONDecodeError("not valid UTF-8", "", 0))
    'byte 6 of the line (0xff) is not UTF-8'
    """
    if "not valid UTF-8" in str(error):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as e:
            return f"byte {e.start} of the line (0x{raw[e.start]:02x}) is not UTF-8"
    return str(error)


#: What a reader does with a line that is not JSON: ``bad(number, what, error)``, what
#: being :func:`unparsable`'s word for it and error orjson's; it raises, or reports the
#: line (which is then skipped).
Bad = Callable[[int, str, Exception], None]


def records(lines: Iterable[bytes], source: str, bad: Bad | None = None, *,
            first: int = 1, strip: bool = False,
            fallback: Callable[[int, bytes], Any] | None = None,
            ) -> Iterator[tuple[int, bytes, Any]]:
    """``(number, raw, value)`` for each line of ``lines`` that is JSON: the one record
    reader of every tool that reads JSONL line by line (the measured fast paths of
    acp-frame and acp-fold keep a loop of their own, and say so).

    ``lines`` are bytes as a stream gives them, with their LF (``strip``: parsed and
    given without it); they are numbered from ``first``; blank lines are passed over. A
    line orjson refuses goes to ``fallback(number, raw)`` when there is one (the JSON
    orjson cannot hold: a lone-surrogate escape, ``1e400``), whose ValueError says it is
    not JSON either; then to ``bad`` as "not JSON", or "torn last line (no LF)" when it
    has no LF and the line before it had one (a crash cut it short; lines given without
    any LF are torn only at the first). Without ``bad`` such a line is an InputError
    naming ``source`` and its number, as is a read error (the line after the last read).
    """
    loads = orjson.loads
    JSONDecodeError = orjson.JSONDecodeError
    number = first - 1
    prev = line = b"\n"
    it = iter(lines)
    while True:
        prev = line
        try:
            line = next(it)
        except StopIteration:
            return
        except READ_ERRORS as e:
            raise InputError(source, number + 1, f"cannot read: {e}") from None
        number += 1
        raw = line[:-1] if strip and line[-1:] == b"\n" else line
        try:
            value = loads(raw)
        except JSONDecodeError as e:
            error = e
        else:
            yield number, raw, value
            continue
        if not raw.strip():
            continue
        if fallback is not None:
            try:
                value = fallback(number, raw)
            except ValueError:
                pass
            else:
                yield number, raw, value
                continue
        what = unparsable(line[-1:] == b"\n" or prev[-1:] != b"\n", error)
        if bad is None:
            raise InputError(source, number, f"{what}: {json_error(raw, error)}")
        bad(number, what, ValueError(json_error(raw, error)))


def parse_line(line: Line) -> Any:
    """Parse a line as JSON, raising InputError naming the source and line."""
    try:
        return orjson.loads(line.raw)
    except orjson.JSONDecodeError as e:
        raise InputError(line.source, line.number,
                         f"{unparsable(line.terminated, e)}: {json_error(line.raw, e)}") from None


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

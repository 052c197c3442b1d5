"""Record I/O at the edges: opening inputs, reading lines with their numbers, writing JSONL.

Every tool reads JSONL the same way, so a bad line is reported the same way everywhere:
``InputError`` carries the source name and the 1-based line number, and readers yield
what came before it untouched. Lines are bytes without the final LF (a CR before the LF
is kept: it belongs to the line).

Every output a user names is written the same way too (:class:`Output`): into a
temporary file beside it, renamed over it only when the run succeeds, so a failed run
leaves the file that was there; and never onto one of the run's inputs. An output is as
private as the most private input it was made from (:func:`output_mode`): a page or a
stream made from a wire log only its owner may read (acp-tee writes them 0600) is 0600
too, whatever the umask.
"""

from __future__ import annotations

import io
import os
import select
import stat
import sys
import tempfile
import time
import zlib
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, TypeVar

import orjson

from acp_pipes.errors import AcpPipesError, InputError, UsageError  # InputError: re-exported

GZIP_MAGIC = b"\x1f\x8b"
T = TypeVar("T")

#: What reading an input can raise besides our own errors: I/O errors (gzip.BadGzipFile
#: is one), a .gz cut short (EOFError), a corrupt .gz body (zlib.error). Every reader
#: turns these into an InputError naming the file and line.
READ_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error)
STDIN = "-"


class RunSettings:
    """What the CLI runner decides once for every input and output of a run: the
    program's name (for a note said deep in a reader), the longest line a reader takes
    (``--max-line-bytes``), and whether an input is private (then so is every output).
    Kept here rather than passed down: the readers are many and deep, and each one
    honours them without a parameter of its own. A library caller that sets nothing
    gets the defaults."""

    __slots__ = ("max_line_bytes", "private", "prog")

    def __init__(self) -> None:
        self.prog = "acp-pipes"
        self.max_line_bytes = MAX_LINE_BYTES
        self.private = False


#: The longest line (bytes, without its LF) a reader takes unless told otherwise.
MAX_LINE_BYTES = 64 << 20
#: The settings of this run (:class:`RunSettings`).
RUN = RunSettings()


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
            raw = _live(raw, 0, None, live, closefd=False)
    elif live is not None:
        raw = _live(None, _open_fd(path, live), path, live, closefd=True)
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

        if isinstance(getattr(reader, "raw", None), _LiveRaw):  # still being written
            reader = _GzipLines(reader, limit)  # type: ignore[assignment]  # read for its lines
        else:
            # (_Capped needs read1, fileno and close of it, which a GzipFile has)
            reader = _capped(gzip.GzipFile(fileobj=reader, mode="rb"),  # type: ignore[arg-type]
                             limit)
    else:
        reader = _capped(reader, limit)
    if live is not None and live.follow and path != STDIN:
        return _Followed(reader)  # type: ignore[return-value]  # read for its lines
    return reader


def is_private(path: str) -> bool:
    """Is ``path`` (``-``: the file stdin was redirected from) a regular file that
    neither its group nor others may read? A pipe or a terminal says nothing of what
    flows through it: it is not."""
    st = _stat(path)
    return (st is not None and stat.S_ISREG(st.st_mode)
            and not st.st_mode & (stat.S_IRGRP | stat.S_IROTH))


def made_from(paths: Iterable[str]) -> None:
    """Say what this run's outputs are made from: when any of ``paths`` is private
    (:func:`is_private`), so is every output written from now on (:func:`output_mode`).
    The CLI runner calls it with a run's inputs; acp-batch, per job, with its input."""
    RUN.private = any(is_private(p) for p in paths)


def output_mode(mode: int) -> int:
    """The mode a new output file gets where ``mode`` is what it would get otherwise
    (the umask's, or the mode of the file it replaces): without the group's and others'
    bits when an input of the run is private. The one rule for every output: ``-o``,
    acp-asr's streams in ``-o DIR``, acp-view's pages, acp-batch's outputs, reports."""
    return mode & ~0o077 if RUN.private else mode


def keep_private(fd: int) -> None:
    """Apply :func:`output_mode` to a file already open (made with ``open()``, or one
    truncated and written again, which keeps its mode)."""
    if RUN.private:
        os.fchmod(fd, output_mode(stat.S_IMODE(os.fstat(fd).st_mode)))


class LineTooLong(OSError):
    """A line longer than the limit (``--max-line-bytes``): the input is read no further,
    as at any read error (what came before it is kept; the reader names its line)."""

    def __init__(self, limit: int):
        super().__init__(f"line of more than {limit} bytes (limit --max-line-bytes {limit})")
        self.limit = limit


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
    are; the error names the line."""
    return _capped(stdin(), RUN.max_line_bytes, "stdin")


def _open_fd(path: str, live: Live) -> int:
    """The file descriptor of ``path``; followed, a file not there yet is waited for."""
    while True:
        try:
            return os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            if not live.follow:
                raise InputError(path, 0, "cannot open: No such file or directory") from None
            time.sleep(live.poll)
        except OSError as e:
            raise InputError(path, 0, f"cannot open: {e.strerror or e}") from None


def _live(raw: BinaryIO | None, fd: int, path: str | None, live: Live, closefd: bool
          ) -> BinaryIO:
    """``raw`` (or ``fd``) as :class:`Live` reads it: a regular file not followed as it
    is, anything else through :class:`_LiveRaw`."""
    regular = stat.S_ISREG(os.fstat(fd).st_mode)
    if regular and not live.follow:
        return raw if raw is not None else open(fd, "rb", closefd=closefd)  # noqa: SIM115
    return io.BufferedReader(_LiveRaw(fd, live, path if regular else None, closefd),
                             1 << 16)


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


def unparsable(terminated: bool) -> str:
    """What to call a line that is not JSON: a last line without LF is most likely one
    cut short by a crash, and every reader says so the same way."""
    return "not JSON" if terminated else "torn last line (no LF)"


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
        what = unparsable(line[-1:] == b"\n" or prev[-1:] != b"\n")
        if bad is None:
            raise InputError(source, number, f"{what}: {error}")
        bad(number, what, error)


def parse_line(line: Line) -> Any:
    """Parse a line as JSON, raising InputError naming the source and line."""
    try:
        return orjson.loads(line.raw)
    except orjson.JSONDecodeError as e:
        raise InputError(line.source, line.number, f"{unparsable(line.terminated)}: {e}") from None


def _itself(rec: Any) -> dict:
    return rec


def _own_kind(rec: Any) -> Any:  # a frame record's
    return rec.get("kind")


def of_session(items: Iterable[T], sid: str, seen: list[bool],
               record: Callable[[T], dict] = _itself,
               kind: Callable[[T], Any] = _own_kind) -> Iterator[T]:
    """The frames of session ``sid`` and the connection's own (of no session:
    ``initialize``, ``authenticate``, frames that are not JSON-RPC), without a request
    another session answered (the ``session/new`` that made it): the one rule of
    ``--session`` on frames (acp-frame, acp-replay; docs/acp-frame.md).

    A request of no session is held, with the frames after it, until its answer says
    whose it is (a response's ``sessionId``): memory holds what is in flight. One never
    answered is kept, and so is one still open when a stream ends (a record with no
    ``dir``: the next stream's header, which matching restarts at). ``items`` are frame
    records, or anything ``record`` takes one from (its ``dir``, ``id``, ``sessionId``)
    and ``kind`` classifies (request, response, error, ...). ``seen`` gets an entry once
    a frame of ``sid`` went by, so a caller can say the session was not there."""
    held: deque[list] = deque()  # [item, "keep" | "drop" | "open" (not answered yet)]
    waiting: dict[tuple, list[list]] = {}  # (dir, id type, id) -> its held requests
    for item in items:
        rec = record(item)
        d = rec.get("dir")
        if d is None:  # a header: the stream before it is over, its open requests kept
            for entry in held:
                if entry[1] != "drop":
                    yield entry[0]
            held.clear()
            waiting.clear()
            yield item
            continue
        k = kind(item)
        s = rec.get("sessionId")
        if k == "response" or k == "error":
            rid = rec.get("id")
            key = ("a2c" if d == "c2a" else "c2a", rid.__class__, rid)
            asked = waiting.get(key)
            if asked:
                asked.pop(0)[1] = "keep" if s is None or s == sid else "drop"
                if not asked:
                    del waiting[key]
        if s is None or s == sid:
            if s is not None and not seen:
                seen.append(True)
            if k == "request" and s is None:
                rid = rec.get("id")
                entry = [item, "open"]
                waiting.setdefault((d, rid.__class__, rid), []).append(entry)
                held.append(entry)
            elif held:
                held.append([item, "keep"])
            else:
                yield item
        while held and held[0][1] != "open":
            entry = held.popleft()
            if entry[1] == "keep":
                yield entry[0]
    for entry in held:
        if entry[1] != "drop":
            yield entry[0]


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


# -- inputs still being written: a pipe behind a live acp-tee, a growing log (--follow) --


class Live:
    """How to read inputs that are still being written.

    ``idle`` is called when an input has no more bytes ready, before waiting for more:
    the tool writes and flushes what it has made so far, so a pipeline behind a live
    ``acp-tee`` shows records as they are made, while batching stays as it was as long
    as input is ready (a regular file is always ready: reading one costs nothing more).
    With ``follow``, a regular file is read as it grows, like ``tail -F`` (waited for
    when it does not exist yet, read again from the start as a new input when rewritten:
    truncated, replaced, or written over whatever its new size, see :class:`_LiveRaw`),
    until a wire log's end record (:func:`acp_pipes.wire.end_record`) or Ctrl-C; a torn
    last line is waited on. ``poll`` is the longest wait, in seconds, between looks at
    a followed file that has not grown.

    Ctrl-C ends following as the input's end would: the first SIGINT while a file is
    followed sets ``interrupted``, and the reader ends once it has handed over every
    byte it read (a KeyboardInterrupt raised wherever the tool happened to be would lose
    the lines read but not yet processed); a second Ctrl-C interrupts as usual."""

    __slots__ = ("follow", "idle", "interrupted", "poll")

    def __init__(self, idle: Callable[[], None] | None = None, follow: bool = False,
                 poll: float = 0.005):
        self.idle = idle
        self.follow = follow
        self.poll = poll
        self.interrupted = False

    def _catch_sigint(self) -> None:
        """The first Ctrl-C while following ends the input; the second one is Python's."""
        import signal  # here: acp-tee reads through this module and starts in a hurry
        import threading

        if threading.current_thread() is not threading.main_thread():
            return  # signals reach the main thread alone: Ctrl-C interrupts as usual

        def stop(signum, frame) -> None:
            self.interrupted = True
            signal.signal(signal.SIGINT, signal.default_int_handler)

        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, stop)


class _LiveRaw(io.RawIOBase):
    """An input's file descriptor that calls ``live.idle`` before a read that would
    wait, and (following a regular file) waits at its end for it to grow.

    Followed, a file that is rewritten is noticed whatever its new size (acp-tee
    ``-o FILE`` truncates its log and writes a new session into it): after every read
    and at every look while waiting, the name must still be the file open (device,
    inode), at least as big as what was read, and hold the bytes it held: its first line
    (the header: a new log has a new start time) and the bytes just before the offset.
    A file that fails one is a new input: read from its start (a file replaced is
    opened anew), with a note on stderr, its header starting the next stream as in a
    file holding several (line numbers count on); what was read of the old one in that
    read is dropped; an old last line without its LF is ended there, so the new header
    starts a line of its own. Each check is a few system calls, made only when
    following."""

    #: How much of the first line (the header) and of the bytes before the offset are
    #: kept to tell the file read from a new one under its name.
    HEAD = 4096
    TAIL = 256

    def __init__(self, fd: int, live: Live, path: str | None, closefd: bool):
        super().__init__()
        self.fd = fd
        self.live = live
        self.hook = live.idle
        self.follow = live.follow and path is not None
        if self.follow:
            live._catch_sigint()
        self.poll = live.poll
        self.path = path
        self.closefd = closefd
        self.pos = 0
        self.head = b""  # the file's first bytes, up to its first LF (or HEAD of them)
        self.tail = b""  # the last bytes read, up to TAIL of them, ending at pos
        self.lf = True  # the last byte handed on was a LF (or none was)

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def idle(self) -> None:
        """The tool's idle hook. A closed pipe downstream (``| head``) is not this
        input's error: the tool's next write meets it again and ends it quietly (as
        ``tail -f | head`` does), where a reader would report it as unreadable input."""
        if self.hook is not None:
            try:
                self.hook()
            except BrokenPipeError:
                pass

    def readinto(self, buf) -> int:
        if not self.follow:
            if not select.select((self.fd,), (), (), 0)[0]:
                self.idle()  # nothing ready: what was made of the input so far goes out
            return os.readv(self.fd, (buf,))
        if self.live.interrupted:
            return 0  # Ctrl-C: the end of this input, after all that was read of it
        n = self._read(buf)
        if n:
            return n
        self.idle()
        wait = 0.0005
        while True:
            time.sleep(wait)
            if self.live.interrupted:
                return 0
            wait = min(wait * 2, self.poll)
            if self._rewritten():
                return self._restart(buf)
            n = self._read(buf)
            if n:
                return n

    def _read(self, buf) -> int:
        """Read at the offset; bytes that turn out to come from a new file under the
        name (rewritten while they were read) are dropped and the new one read from its
        start."""
        n = os.readv(self.fd, (buf,))
        if not n:
            return 0
        if self._rewritten(replaced=False):  # what was read from a file replaced is its
            return self._restart(buf)       # own: its end is read before the new one
        data = bytes(buf[:n])
        if len(self.head) < self.HEAD and b"\n" not in self.head:
            cut = data.find(b"\n", 0, self.HEAD - len(self.head))
            self.head += data[: cut + 1 if cut >= 0 else self.HEAD - len(self.head)]
        self.tail = (self.tail + data)[-self.TAIL:] if n < self.TAIL else data[-self.TAIL:]
        self.pos += n
        self.lf = data[-1:] == b"\n"
        return n

    def _rewritten(self, replaced: bool = True) -> bool:
        """Is the name no longer the file read so far, as far as read (above)? With
        ``replaced`` False, only a file rewritten in place counts."""
        mine = os.fstat(self.fd)
        if replaced:
            try:
                st = os.stat(self.path)  # type: ignore[arg-type]  # followed: a path
            except OSError:
                return False  # gone for now (being replaced): keep waiting
            if (st.st_ino, st.st_dev) != (mine.st_ino, mine.st_dev):
                return True
        if mine.st_size < self.pos:
            return True
        try:
            if self.head and os.pread(self.fd, len(self.head), 0) != self.head:
                return True
            tail = self.tail
            return bool(tail) and os.pread(self.fd, len(tail), self.pos - len(tail)) != tail
        except OSError:
            return False

    def _restart(self, buf) -> int:
        """Read the new file under the name from its start; returns what goes on."""
        st = None
        try:
            st = os.stat(self.path)  # type: ignore[arg-type]  # followed: a path
        except OSError:
            pass
        mine = os.fstat(self.fd)
        if st is not None and (st.st_ino, st.st_dev) != (mine.st_ino, mine.st_dev):
            try:
                fd = os.open(self.path, os.O_RDONLY)  # type: ignore[arg-type]  # (as above)
            except OSError:
                fd = None
            if fd is not None:
                if self.closefd:
                    os.close(self.fd)
                self.fd, self.closefd = fd, True
        os.lseek(self.fd, 0, os.SEEK_SET)
        self.pos, self.head, self.tail = 0, b"", b""
        from acp_pipes.errors import say

        say(f"{RUN.prog}: {self.path}: rewritten (a new log under the name): read again "
            "from its start")
        if not self.lf:  # the old last line, torn: it ends here
            self.lf = True
            buf[0] = 10
            return 1
        return self.readinto(buf)

    def close(self) -> None:
        if not self.closed and self.closefd:
            os.close(self.fd)
        super().close()


class _GzipLines:
    """The lines (with their LF) of a gzip input that may still be written: what one
    read gives is decompressed at once (``gzip.GzipFile`` waits for whole blocks, and at
    a member's end for the next member's header, which a log being written does not
    have yet). acp-tee flushes its ``.gz`` log with every record."""

    def __init__(self, reader: BinaryIO, limit: int):
        self.reader = reader
        self.limit = limit

    def __iter__(self) -> Iterator[bytes]:
        read1 = self.reader.read1  # type: ignore[attr-defined]  # buffered (peeked at)
        member = zlib.decompressobj(wbits=31)
        begun = False  # a member has begun and not ended
        rest = b""
        while True:
            data = read1(1 << 16)
            if not data:
                if begun:
                    raise EOFError("Compressed file ended before the end-of-stream "
                                   "marker was reached")
                if rest:
                    yield rest
                return
            while data:
                begun = True
                rest += member.decompress(data)
                data = b""
                if member.eof:
                    data, begun = member.unused_data, False
                    member = zlib.decompressobj(wbits=31)
                    if not data.strip(b"\0"):  # trailing padding, as gzip allows
                        data = b""
            if b"\n" in rest:
                *lines, rest = rest.split(b"\n")
                for line in lines:
                    if len(line) > self.limit:
                        raise LineTooLong(self.limit)
                    yield line + b"\n"
            if len(rest) > self.limit:
                raise LineTooLong(self.limit)

    def close(self) -> None:
        self.reader.close()


class _Followed:
    """A followed input's lines, up to and with a wire log's end record.

    The end record is told by its parsed value (:func:`acp_pipes.wire.is_end`), as every
    reader tells it, not by its bytes: ``{"end": true, ...}`` written with spaces, or
    with its key escaped, ends the input too. Only a line that can hold the key ``end``
    is parsed: one with ``"end"`` in it, or a ``\\u006`` escape (``e``, ``n`` and ``d``
    are ``\\u0065``, ``\\u006e`` and ``\\u0064``); a frame's bytes are in a JSON
    string, where a quote is escaped, so frame records are not parsed twice."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream

    def __iter__(self) -> Iterator[bytes]:
        from acp_pipes.wire import is_end

        for line in self.stream:
            yield line
            if b'"end"' in line or b"\\u006" in line:
                try:
                    if is_end(orjson.loads(line)):
                        return
                except orjson.JSONDecodeError:
                    pass

    def close(self) -> None:
        self.stream.close()


class OutputError(AcpPipesError):
    """An output that cannot be written (a full disk, ``>/dev/full``, an I/O error)."""


class _Sink(io.FileIO):
    """A file descriptor whose write errors name the output: ``cannot write NAME: No
    space left on device``, not an OSError from deep inside a tool. A broken pipe stays
    a BrokenPipeError: the reader has gone, which ends a tool quietly."""

    name_for_errors = "stdout"

    def write(self, b):
        try:
            return super().write(b)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise OutputError(f"cannot write {self.name_for_errors}: "
                              f"{e.strerror or e}") from None


def _sink(fd: int, name: str, closefd: bool) -> BinaryIO:
    raw = _Sink(fd, "wb", closefd=closefd)
    raw.name_for_errors = name
    return io.BufferedWriter(raw)


def stdout_sink() -> BinaryIO:
    """Standard output, binary and buffered, its write errors named ``stdout`` (as it is
    where it has no descriptor: a tool run in-process, under a test's capture)."""
    fd = _fileno(sys.stdout)
    return sys.stdout.buffer if fd is None else _sink(fd, "stdout", closefd=False)


def create(path: str) -> BinaryIO:
    """``path`` created (or truncated) for a file a tool writes besides ``-o`` (a report,
    a remap log), written in place and as private as the run's inputs; ``cannot write
    PATH: reason`` when it cannot be opened or written, as ``-o`` says (exit 2)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        keep_private(fd)
    except OSError as e:
        os.close(fd)
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
    return _sink(fd, path, closefd=True)


def stdout_fd() -> int | None:
    """The descriptor of standard output, None where it has none."""
    return _fileno(sys.stdout)


def _fileno(stream: Any) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None


def file_id(path: str | int | None) -> tuple[int, int] | None:
    """``(device, inode)`` of the regular file at ``path`` (``-``: stdin; an int: that
    descriptor); None for anything else (a pipe, a terminal, ``/dev/null``, nothing)."""
    st = None if path is None else _stat(path)
    return (st.st_dev, st.st_ino) if st is not None and stat.S_ISREG(st.st_mode) else None


def _stat(path: str | int) -> os.stat_result | None:
    """``os.stat`` of ``path`` (``-``: what stdin is; an int: that descriptor), None
    when there is nothing to stat."""
    try:
        if path == STDIN:
            fd = _fileno(sys.stdin)
            return None if fd is None else os.fstat(fd)
        return os.fstat(path) if isinstance(path, int) else os.stat(path)
    except (OSError, ValueError):
        return None


def refuse_input_as_output(output: str, output_id: tuple[int, int] | None,
                           inputs: Iterable[str]) -> None:
    """A UsageError when the output is one of the inputs, judged by device and inode
    (a link or another spelling of the path is the same file), before anything is
    read or written: the run would read what it writes, or replace its own input."""
    if output_id is None:
        return
    for path in inputs:
        if file_id(path) == output_id:
            raise UsageError(f"{display_name(output)} is also an input "
                             f"({display_name(path)}): write the output elsewhere")


class Output:
    """``-o FILE``: written to a temporary file beside FILE (same directory, so the
    rename cannot cross file systems), renamed over FILE by :meth:`commit`; a run that
    fails calls :meth:`discard` and the file that was there stays as it was. The new file
    gets the mode of the one it replaces (else the usual ``0666`` less the umask), less
    the group's and others' bits when an input is private (:func:`output_mode`). A
    symbolic link is followed (the file it names is replaced, the link stays). What is
    not a regular file (``/dev/null``, a FIFO, a terminal) is written in place."""

    def __init__(self, path: str):
        self.path = path
        self.target = os.path.realpath(path)
        self.tmp: str | None = None
        try:
            st: os.stat_result | None = os.stat(self.target)
        except FileNotFoundError:
            st = None
        except OSError as e:
            raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
        try:
            if st is not None and not stat.S_ISREG(st.st_mode):
                fd = os.open(self.target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            else:
                directory, base = os.path.split(self.target)
                # ".<name>.XXXXXXXX.part", the name cut to stay within 255 bytes
                short = os.fsdecode(os.fsencode(base)[:224])
                fd, self.tmp = tempfile.mkstemp(prefix=f".{short}.", suffix=".part",
                                                dir=directory)
                os.fchmod(fd, output_mode(stat.S_IMODE(st.st_mode) if st is not None
                                          else _new_mode()))
        except OSError as e:
            raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
        self.stream = _sink(fd, path, closefd=True)

    def commit(self) -> None:
        """Flush, close and put the file in place; on an error, as :meth:`discard`."""
        try:
            self.stream.close()  # flushes: a full disk shows here at the latest
            if self.tmp is not None:
                try:
                    os.replace(self.tmp, self.target)
                except OSError as e:
                    raise OutputError(f"cannot write {self.path}: {e.strerror or e}") from None
                self.tmp = None
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        """Drop what was written; the file that was there stays."""
        try:
            self.stream.close()
        except (OSError, AcpPipesError):
            pass
        if self.tmp is not None:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass
            self.tmp = None


def _new_mode() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask

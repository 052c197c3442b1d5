"""Record I/O at the edges: opening inputs, reading lines with their numbers, writing JSONL.

Every tool reads JSONL the same way, so a bad line is reported the same way everywhere:
``InputError`` carries the source name and the 1-based line number, and readers yield
what came before it untouched. Lines are bytes without the final LF (a CR before the LF
is kept: it belongs to the line).

Every output a user names is written the same way too (:class:`Output`): into a
temporary file beside it, renamed over it only when the run succeeds, so a failed run
leaves the file that was there; and never onto one of the run's inputs.
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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from acp_pipes.errors import AcpPipesError, InputError, UsageError  # InputError: re-exported

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
            raw = _live(raw, 0, None, live, closefd=False)
    elif live is not None:
        raw = _live(None, _open_fd(path, live), path, live, closefd=True)
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

        if isinstance(getattr(reader, "raw", None), _LiveRaw):  # still being written
            reader = _GzipLines(reader)  # type: ignore[assignment]
        else:
            reader = gzip.GzipFile(fileobj=reader, mode="rb")  # type: ignore[assignment]
    if live is not None and live.follow and path != STDIN:
        return _Followed(reader)  # type: ignore[return-value]
    return reader


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
                             1 << 16)  # type: ignore[return-value]


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


def of_session(records: Iterable[dict], key: str, sid: str, seen: list[bool]
               ) -> Iterator[dict]:
    """The records whose ``key`` is ``sid`` and those without one (headers, and what
    belongs to the connection, not a session: ``--session ID``). ``seen`` gets an entry
    once a record of ``sid`` went by, so a caller can say the session was not there."""
    for rec in records:
        s = rec.get(key)
        if s is None or s == sid:
            if s is not None and not seen:
                seen.append(True)
            yield rec


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
    when it does not exist yet, read again from the start when truncated or replaced),
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


#: The first bytes of a wire log's end record as acp-pipes writes it.
_END = b'{"end":true'


class _LiveRaw(io.RawIOBase):
    """An input's file descriptor that calls ``live.idle`` before a read that would
    wait, and (following a regular file) waits at its end for it to grow."""

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

    def readinto(self, buf) -> int:  # type: ignore[override]
        if not self.follow:
            if not select.select((self.fd,), (), (), 0)[0]:
                self.idle()  # nothing ready: what was made of the input so far goes out
            return os.readv(self.fd, (buf,))
        if self.live.interrupted:
            return 0  # Ctrl-C: the end of this input, after all that was read of it
        n = os.readv(self.fd, (buf,))
        if n:
            self.pos += n
            return n
        self.idle()
        wait = 0.0005
        while True:
            time.sleep(wait)
            if self.live.interrupted:
                return 0
            wait = min(wait * 2, self.poll)
            n = os.readv(self.fd, (buf,))
            if n:
                self.pos += n
                return n
            self._reopen_if_replaced()

    def _reopen_if_replaced(self) -> None:
        """tail -F: a file truncated is read again from its start; a file replaced (a
        new file under the name) is read from the start of the new one."""
        try:
            st = os.stat(self.path)  # type: ignore[arg-type]
        except OSError:
            return  # gone for now (being replaced): keep waiting
        mine = os.fstat(self.fd)
        if (st.st_ino, st.st_dev) != (mine.st_ino, mine.st_dev):
            try:
                fd = os.open(self.path, os.O_RDONLY)  # type: ignore[arg-type]
            except OSError:
                return
            if self.closefd:
                os.close(self.fd)
            self.fd, self.closefd, self.pos = fd, True, 0
        elif mine.st_size < self.pos:
            os.lseek(self.fd, 0, os.SEEK_SET)
            self.pos = 0

    def close(self) -> None:
        if not self.closed and self.closefd:
            os.close(self.fd)
        super().close()


class _GzipLines:
    """The lines (with their LF) of a gzip input that may still be written: what one
    read gives is decompressed at once (``gzip.GzipFile`` waits for whole blocks, and at
    a member's end for the next member's header, which a log being written does not
    have yet). acp-tee flushes its ``.gz`` log with every record."""

    def __init__(self, reader: BinaryIO):
        self.reader = reader

    def __iter__(self) -> Iterator[bytes]:
        read1 = self.reader.read1  # type: ignore[attr-defined]
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
                    yield line + b"\n"

    def close(self) -> None:
        self.reader.close()


class _Followed:
    """A followed input's lines, up to and with a wire log's end record."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream

    def __iter__(self) -> Iterator[bytes]:
        for line in self.stream:
            yield line
            if line.startswith(_END) and line.endswith(b"\n"):
                try:
                    if orjson.loads(line).get("end") is True:
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

    def write(self, b):  # type: ignore[override]
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
    return io.BufferedWriter(raw)  # type: ignore[return-value]


def stdout_sink() -> BinaryIO:
    """Standard output, binary and buffered, its write errors named ``stdout`` (as it is
    where it has no descriptor: a tool run in-process, under a test's capture)."""
    fd = _fileno(sys.stdout)
    return sys.stdout.buffer if fd is None else _sink(fd, "stdout", closefd=False)


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
    if path is None:
        return None
    try:
        if path == STDIN:
            fd = _fileno(sys.stdin)
            if fd is None:
                return None
            st = os.fstat(fd)
        elif isinstance(path, int):
            st = os.fstat(path)
        else:
            st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


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
    gets the mode of the one it replaces (else the usual ``0666`` less the umask). A
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
                os.fchmod(fd, stat.S_IMODE(st.st_mode) if st is not None else _new_mode())
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

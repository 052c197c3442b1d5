"""Inputs still being written: a pipe behind a live acp-tee, a growing log (``--follow``).

:class:`Live` says how to read them; :func:`acp_pipes.io.lines.open_source` opens an input
through :func:`open_live` when given one (then :class:`GzipLines` reads a ``.gz`` log
being written, and :class:`Followed` stops at a followed wire log's end record). Below
:mod:`acp_pipes.io.lines`, which opens every input: the line limit and the program's
name are the run's (:data:`acp_pipes.io.settings.RUN`).
"""

from __future__ import annotations

import io
import os
import select
import stat
import time
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO

import orjson

from acp_pipes.errors import InputError, say
from acp_pipes.io.settings import RUN, LineTooLong


class Live:
    """How to read inputs that are still being written.

    ``idle`` is called when an input has no more bytes ready, before waiting for more:
    the tool writes and flushes what it has made so far, so a pipeline behind a live
    ``acp-tee`` shows records as they are made, while batching stays as it was as long
    as input is ready (a regular file is always ready: reading one costs nothing more).
    With ``follow``, a regular file is read as it grows, like ``tail -F`` (waited for
    when it does not exist yet, read again from the start as a new input when rewritten:
    truncated, replaced, or written over whatever its new size, see :class:`_LiveRaw`),
    until a wire log's end record (:func:`acp_pipes.io.wire.end_record`) or Ctrl-C; a torn
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


def open_live(path: str | None, live: Live, stdin: BinaryIO | None = None) -> BinaryIO:
    """An input as :class:`Live` reads it: the file at ``path`` (followed, waited for
    until it exists), or with ``path`` None the process's ``stdin`` (file descriptor 0,
    left open at the end)."""
    if path is None:
        return _live(stdin, 0, None, live, closefd=False)
    return _live(None, _open_fd(path, live), path, live, closefd=True)


def is_live(reader: BinaryIO) -> bool:
    """Was ``reader`` opened by :func:`open_live` as an input still being written (not a
    regular file read as it is)?"""
    return isinstance(getattr(reader, "raw", None), _LiveRaw)


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


class GzipLines:
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


class Followed:
    """A followed input's lines, up to and with a wire log's end record.

    The end record is told by its parsed value (:func:`acp_pipes.io.wire.is_end`), as every
    reader tells it, not by its bytes: ``{"end": true, ...}`` written with spaces, or
    with its key escaped, ends the input too. Only a line that can hold the key ``end``
    is parsed: one with ``"end"`` in it, or a ``\\u006`` escape (``e``, ``n`` and ``d``
    are ``\\u0065``, ``\\u006e`` and ``\\u0064``); a frame's bytes are in a JSON
    string, where a quote is escaped, so frame records are not parsed twice."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream

    def __iter__(self) -> Iterator[bytes]:
        from acp_pipes.io.wire import is_end

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

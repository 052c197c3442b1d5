"""Where acp-tee's wire log goes (``-o``), and the sink that writes it.

``-o`` takes four forms:

- ``FILE``: that file, created or overwritten (mode 0600), as ``tee FILE`` does;
- ``DIR/`` (a trailing slash, or a directory that exists): a new file in it named
  ``{agent}-{start}-{pid}.jsonl``, so each session gets its own log;
- a template with ``{agent}`` (the agent command's name), ``{start}`` (the UTC start
  time, ``20261130T171528Z``) or ``{pid}`` (acp-tee's process id), such as
  ``~/acp-logs/{agent}-{start}-{pid}.jsonl``: a new file of that name (``{{``/``}}``
  for literal braces);
- nothing (the CLI): ``acp-tee-{start}-{pid}.jsonl`` in the current directory
  (:data:`DEFAULT`).

All but ``FILE`` never overwrite: if the name is taken, ``-1``, ``-2``, ... is added
before its extension. Their directory is created (mode 0700) when missing. A leading
``~`` is the home directory in every form (editor settings are JSON: no shell expands
it). A name ending in ``.gz`` is written gzip-compressed, flushed with every write so a
reader (or a crash) sees every frame written so far.

A FIFO is opened without blocking (with no reader yet, the session goes on unrecorded)
and written without blocking: a reader that takes nothing for ``FIFO_PATIENCE``
seconds loses the log, and the session goes on unrecorded, rather than stall the agent
and the client behind it.

The records go through :class:`WireLog`, the one writer of a wire log: acp-tee's (a
record written before its frame is forwarded) and ``acp-replay --client``'s (records
noted as frames come and go, written before the run waits).

This module imports nothing that acp-tee's start-up does not already have: the CLI
checks ``-o`` with :func:`check` before it starts the agent.
"""

from __future__ import annotations

import errno
import os
import stat
import time

from acp_pipes.errors import OptionError
from acp_pipes.io.wire import end_record, frame_lines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import BinaryIO

    from acp_pipes.errors import Note
    from acp_pipes.protocol.redact import Redactor

__all__ = ["DEFAULT", "FIFO_PATIENCE", "FileSink", "Sink", "WireLog", "check", "open_sink",
           "write_all"]

#: Seconds a FIFO's reader may take nothing before the log is given up.
FIFO_PATIENCE = 1.0
#: A FIFO's buffer is raised to this (best effort; Linux caps it for unprivileged users at
#: /proc/sys/fs/pipe-max-size, 1 MiB by default), so a reader may lag that far behind.
FIFO_BUFFER = 1 << 20
_FIELDS = ("agent", "start", "pid")
_IN_DIR = "{agent}-{start}-{pid}.jsonl"
#: Where acp-tee's CLI logs without -o: a new file in the current directory.
DEFAULT = "acp-tee-{start}-{pid}.jsonl"
_TRIES = 1000


def check(spec: str | None) -> None:
    """Raise OptionError (a ValueError) if ``-o`` ``spec`` is a template that names an
    unknown field or has an unmatched brace."""
    if spec is None or ("{" not in spec and "}" not in spec):
        return
    try:
        spec.format_map(dict.fromkeys(_FIELDS, "x"))
    except KeyError as e:
        raise OptionError(f"-o {spec}: no field {{{e.args[0]}}} (there are {{agent}}, "
                          "{start} and {pid})") from None
    except (ValueError, IndexError, AttributeError) as e:
        raise OptionError(f"-o {spec}: not a name template ({e}); write {{{{ and }}}} for "
                          "braces") from None


def agent_name(argv: Sequence[str]) -> str:
    """The agent command's name, made safe for a file name."""
    base = os.path.basename(argv[0]) if argv else ""
    safe = "".join(c if c.isalnum() or c in "._+-" else "_" for c in base).lstrip(".")
    return safe or "agent"


def resolve(spec: str, argv: Sequence[str], *, now: float | None = None,
            pid: int | None = None) -> tuple[str, bool]:
    """The log's path for ``-o spec``, and whether it must be a new file (every form but
    a plain ``FILE``)."""
    fields = {"agent": agent_name(argv),
              "start": time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now)),
              "pid": str(os.getpid() if pid is None else pid)}
    if "{" in spec or "}" in spec:
        check(spec)
        return os.path.abspath(os.path.expanduser(spec.format_map(fields))), True
    path = os.path.expanduser(spec)
    if path.endswith(os.sep) or os.path.isdir(path):
        return os.path.abspath(os.path.join(path, _IN_DIR.format_map(fields))), True
    return path, False


def _numbered(path: str, n: int) -> str:
    """``path`` with ``-n`` before its extension: logs/a.jsonl.gz -> logs/a-2.jsonl.gz."""
    head, name = os.path.split(path)
    dot = name.find(".", 1)
    stem, ext = (name, "") if dot < 0 else (name[:dot], name[dot:])
    return os.path.join(head, f"{stem}-{n}{ext}")


def _open(path: str, new: bool) -> tuple[int, str]:
    """Open the log for appending, mode 0600, without blocking on a FIFO; a new file
    under a free name when ``new``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NONBLOCK
    if not new:
        return os.open(path, flags | os.O_TRUNC, 0o600), path
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    for n in range(_TRIES):
        name = path if n == 0 else _numbered(path, n)
        try:
            return os.open(name, flags | os.O_EXCL, 0o600), name
        except FileExistsError:
            continue
    raise OSError(errno.EEXIST, f"{path} and {_TRIES - 1} numbered names are taken")


def write_all(fd: int, data: bytes | bytearray) -> None:
    """Write all of ``data`` to a blocking ``fd``."""
    n = os.write(fd, data)
    if n < len(data):  # a pipe or a nearly full disk may take less
        view = memoryview(data)[n:]
        while view:
            n = os.write(fd, view)
            view = view[n:]


class Sink:
    """A log file or device: ``write`` raises OSError when the log is lost."""

    def __init__(self, fd: int, path: str):
        self.fd = fd
        self.path = path

    def write(self, data: bytes | bytearray) -> None:
        write_all(self.fd, data)

    def close(self) -> None:
        os.close(self.fd)


class _FifoSink(Sink):
    """A FIFO written without blocking: waits for its reader at most FIFO_PATIENCE at a
    time, then gives up (OSError), so the session never stalls behind it."""

    def __init__(self, fd: int, path: str):
        import select

        super().__init__(fd, path)
        try:
            import fcntl

            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, FIFO_BUFFER)
        except (ImportError, AttributeError, OSError):
            pass  # not Linux, or above the system's cap: the default buffer will do
        self._poller = select.poll()
        self._poller.register(fd, select.POLLOUT)

    def write(self, data: bytes | bytearray) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view):]
            except BlockingIOError:
                if not self._poller.poll(int(FIFO_PATIENCE * 1000)):
                    raise OSError(errno.EAGAIN, f"its reader took nothing for "
                                                f"{FIFO_PATIENCE:g} s") from None


class _GzipSink(Sink):
    """gzip over another sink, each write compressed and sync-flushed: what was written
    is readable at once, and a log cut short (a crash) still decompresses up to there."""

    def __init__(self, inner: Sink):
        import zlib

        super().__init__(inner.fd, inner.path)
        self._inner = inner
        self._z = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: gzip header and trailer
        self._sync = zlib.Z_SYNC_FLUSH

    def write(self, data: bytes | bytearray) -> None:
        z = self._z
        self._inner.write(z.compress(data) + z.flush(self._sync))

    def close(self) -> None:
        try:
            self._inner.write(self._z.flush())  # the gzip trailer
        finally:
            self._inner.close()


def open_sink(spec: str, argv: Sequence[str], *, now: float | None = None,
              nth: int = 0) -> Sink:
    """Open the log ``-o spec`` names (see the module's docstring); ``nth`` > 0 is a
    listener's later connection, whose log a plain FILE names FILE-nth (a new file).
    Raises OSError, with a message that says what to do for a FIFO nobody reads, and
    ValueError for a bad template."""
    path, new = resolve(spec, argv, now=now)
    if nth and not new:
        path, new = _numbered(path, nth), True
    try:
        fd, path = _open(path, new)
    except OSError as e:
        if e.errno == errno.ENXIO:  # O_NONBLOCK on a FIFO with no reader
            raise OSError(e.errno, "a FIFO that nothing reads yet (open it for reading "
                                   "first)", path) from None
        raise
    try:
        st = os.fstat(fd)
        if stat.S_ISFIFO(st.st_mode):
            sink: Sink = _FifoSink(fd, path)
        else:
            os.set_blocking(fd, True)  # a file, or a device that may block: as tee does
            if stat.S_ISREG(st.st_mode) and st.st_mode & 0o077:
                os.fchmod(fd, 0o600)  # the log holds a whole session
            sink = Sink(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return _GzipSink(sink) if path.endswith(".gz") else sink


class FileSink:
    """A binary file the caller owns (stdout, a file it opened) as a log's sink: each
    write flushed, never closed here."""

    def __init__(self, f: BinaryIO):
        self.f = f
        self.path = str(getattr(f, "name", "<stream>"))

    def write(self, data: bytes | bytearray) -> None:
        self.f.write(data)
        self.f.flush()

    def close(self) -> None:
        self.f.flush()


class WireLog:
    """The one writer of a wire log (:mod:`acp_pipes.io.wire`): seq, clock and redaction
    (one key per recording, drawn on the first frame), into ``sink`` (None: no log).

    Two ways to log frames: :meth:`frames` writes their records at once, with one write
    for what was read together (acp-tee: a record before its frame is forwarded, from
    either direction's thread, under the lock); :meth:`note` gives frames their seq and
    ``t`` as they come or go and :meth:`flush` writes the records later (``acp-replay
    --client``, one thread: written before the run waits, so what stands between the
    agent's frame and the next prompt is no write).

    With ``note`` (a callable), a failed write is said once and the log given up: the
    session goes on, no longer recorded; without, the OSError is the caller's."""

    def __init__(self, sink: Sink | FileSink | None, clock: Callable[[], int], redact: bool,
                 note: Note | None = None):
        import threading

        self.sink = sink
        self.path = sink.path if sink is not None else ""
        self.clock = clock
        self.redact = redact
        self.redactor: Redactor | None = None  # made on the first frame
        self.note = note
        # reentrant: a failed write closes the log from inside frames(), under the lock
        self.lock = threading.RLock()
        self.seq = 0
        self.said = 0  # reads of frames, logged or not: how acp-tee tells a silent agent
        self.noted: list[tuple[str, int, int, Sequence[bytes], bool]] = []  # not written

    def write_header(self, record: dict) -> None:
        import orjson

        self._write(orjson.dumps(record) + b"\n")

    def frames(self, direction: str, frames: Iterable[bytes], nolf: bool = False,
               extra: dict | None = None) -> None:
        """Log complete frames (bytes without LF) received together, in order; ``extra``
        (a remote transport's ``stream``, ``sseq``, ``sse``) is added to each record."""
        self.said += 1
        if self.sink is None:
            return
        with self.lock:
            redactor = self.redactor
            if redactor is None and self.redact:  # under the lock: one key per recording
                redactor = self._redactor()
            # One buffer for the whole read, each record formatted straight into it: a
            # list of per-record dumps() results cost ~4x as much (every result a fresh
            # heap block, and glibc hands the freed batch back to the OS between reads).
            out = bytearray()
            seq = frame_lines(out, self.seq, self.clock(), direction, frames, nolf, redactor,
                              extra)
            self.seq = seq
            self._write(out)

    def note_frames(self, direction: str, raws: Sequence[bytes], nolf: bool = False) -> int:
        """Give frames received (or sent) together their seqs and one ``t``, their records
        written by the next :meth:`flush`; returns the first seq."""
        seq = self.seq
        self.seq += len(raws)
        if self.sink is not None:
            self.noted.append((direction, seq, self.clock(), raws, nolf))
        return seq

    def flush(self) -> None:
        """Write the records of the frames noted (:meth:`note_frames`), in one write."""
        if not self.noted:
            return
        with self.lock:
            noted, self.noted = self.noted, []
            if self.sink is None:
                return
            redactor = self.redactor
            if redactor is None and self.redact:
                redactor = self._redactor()
            out = bytearray()
            for direction, seq, t, raws, nolf in noted:
                frame_lines(out, seq, t, direction, raws, nolf, redactor)
            self._write(out)

    def _redactor(self) -> Redactor:  # made once (call under the lock)
        if self.redactor is None:
            from acp_pipes.protocol.redact import Redactor  # light: its heavy parts load on use

            self.redactor = Redactor()
        return self.redactor

    def token(self, value: str) -> str:
        """``value`` as the log shows a credential: a redaction token of this recording's
        key, or as it is when secrets are kept."""
        if not self.redact:
            return value
        with self.lock:
            return self._redactor().token(value)

    def event(self, record: dict) -> None:
        """Log an event record (:func:`acp_pipes.io.wire.event_record`) in its place among
        the frames. ``record["t"]`` is taken from the log's clock, under the lock."""
        if self.sink is None:
            return
        import orjson

        with self.lock:
            record["t"] = self.clock()
            self._write(orjson.dumps(record) + b"\n")

    def _write(self, data: bytes | bytearray) -> None:
        if self.sink is None:
            return
        try:
            self.sink.write(data)
        except OSError as e:
            if self.note is None:
                raise
            self.failed(e)

    def failed(self, e: OSError) -> None:
        if self.note is not None:
            self.note(f"cannot write the log {self.path}: {e.strerror or e}; "
                      "the session goes on, no longer recorded")
        self.close()

    def end(self, status: int, signal: int | None) -> None:
        """Write the frames noted, the end record, and close the log, under the lock:
        nothing is logged after it."""
        import orjson

        self.flush()
        with self.lock:
            if self.sink is not None:
                self._write(orjson.dumps(end_record(self.clock(), status, self.seq, signal))
                            + b"\n")
            self.close()

    def close(self) -> None:
        """Close the log once, under the lock: a writer still at work (a client thread
        that outlived the session's end) never writes to a closed, reused fd number."""
        with self.lock:
            sink, self.sink = self.sink, None
            if sink is not None:
                try:
                    sink.close()  # gzip: its trailer, written under the lock too
                except OSError:
                    pass

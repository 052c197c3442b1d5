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

This module imports nothing that acp-tee's start-up does not already have: the CLI
checks ``-o`` with :func:`check` before it starts the agent.
"""

from __future__ import annotations

import errno
import os
import stat
import time

from acp_pipes.errors import OptionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["DEFAULT", "FIFO_PATIENCE", "Sink", "check", "open_sink", "write_all"]

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

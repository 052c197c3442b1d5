"""Outputs: every output a user names is written the same way (:class:`Output`): into a
temporary file beside it, renamed over it only when the run succeeds, so a failed run
leaves the file that was there; and never onto one of the run's inputs
(:func:`refuse_input_as_output`). An output is as private as the most private input it
was made from (:func:`output_mode`): a page or a stream made from a wire log only its
owner may read (acp-tee writes them 0600) is 0600 too, whatever the umask. Write errors
name the output (:class:`OutputError`).
"""

from __future__ import annotations

import io
import os
import stat
import sys
import tempfile
from collections.abc import Iterable
from typing import Any, BinaryIO

from acp_pipes.errors import AcpPipesError, UsageError
from acp_pipes.io.lines import STDIN, display_name
from acp_pipes.io.settings import RUN


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

"""Writing ASR streams: spooled per session, each written header first.

Sessions interleave on a connection and a header depends on the whole stream, so each
stream's records are spooled (in memory up to :data:`SPOOL_MEMORY` bytes, then in a
file) and written when the input is done: to ``DIR/<name>.asr.jsonl`` or back to back
on one output. File names are the session ID percent-encoded (everything but ASCII
letters, digits, ``-``, ``_`` and ``~``), so any ID gives one safe name and
:func:`session_from_name` gives the ID back. An ID whose encoded name would pass the
255 bytes a file name may have is named by the start of its encoding, a ``.`` (which
an encoded ID never holds) and 32 hex digits of its blake3 hash: still one name per ID,
and the ID is in the stream's header. Where a file system ignores case (macOS, Windows)
two IDs that differ only by case would be one file: the IDs of a conversion whose names
are equal but for case each have their capital letters percent-encoded too (``Sess`` ->
``%53ess``, ``sess`` stays), still reversible (:func:`session_names`, the rule of
:mod:`acp_pipes.io.filenames`); an ID that is a Windows device name (``CON``, ``nul``)
has its first character encoded.

Into a directory the streams are also written live: a session's spool file *is*
``DIR/<name>.asr.jsonl``, started with a provisional header (the header as known then,
``native.provisional: true``) and appended to whenever the spool is flushed (its memory
is full, or :meth:`Spool.flush` when the input has no more bytes ready). When the input
is done, the final header and the records go to a file beside it, renamed over it (as
``-o FILE`` writes): a watcher sees records as they are made, a killed converter leaves
a provisional stream whose lines are a prefix of the final one, and the finished file
is the bytes a one-shot conversion writes.
"""

from __future__ import annotations

import io
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO
from urllib.parse import quote, unquote

import blake3
import orjson

from acp_pipes.errors import AcpPipesError, UsageError
from acp_pipes.io.filenames import distinct, fold, is_device
from acp_pipes.io.output import Output, keep_private

__all__ = ["SUFFIX", "Spool", "file_name", "is_provisional", "make_dir", "provisional_header",
           "session_from_name", "session_names"]

SUFFIX = ".asr.jsonl"
SPOOL_MEMORY = 1 << 20
_dumps = orjson.dumps
_NL = orjson.OPT_APPEND_NEWLINE  # one C call a record: the JSON and its LF


#: The longest file name most file systems take (NAME_MAX), in bytes.
NAME_MAX = 255
_HASHED = 32  # hex digits of the hash in a long ID's name


def file_name(sid: str, caseless: bool = False) -> str:
    """``<percent-encoded session ID>.asr.jsonl`` (acp-pipes choice); for an ID too long
    for that, ``<start of the encoding>.<32 hex digits of blake3(ID)>.asr.jsonl``.
    ``caseless`` also encodes capital letters (a name no other ID's name equals when
    case is ignored); a Windows device name has its first character encoded.

    >>> file_name("sess-1/a.b")
    'sess-1%2Fa%2Eb.asr.jsonl'
    >>> file_name("Sess", caseless=True), file_name("NUL")
    ('%53ess.asr.jsonl', '%4EUL.asr.jsonl')
    >>> name = file_name("x" * 300)
    >>> len(name), name[-45:]
    (255, 'xx.296a7bce08325b75b90d23204fd50b75.asr.jsonl')
    """
    encoded = quote(sid, safe="-_~", errors="surrogatepass").replace(".", "%2E")
    if caseless:
        encoded = _CAPITAL.sub(_escape_capital, encoded)
    if is_device(encoded):
        encoded = f"%{ord(encoded[0]):02X}{encoded[1:]}"
    if len(encoded) + len(SUFFIX) <= NAME_MAX:
        return encoded + SUFFIX
    digest = blake3.blake3(sid.encode("utf-8", "surrogatepass")).hexdigest()[:_HASHED]
    keep = NAME_MAX - len(SUFFIX) - 1 - _HASHED
    cut = encoded[:keep]
    if "%" in cut[-2:]:  # do not end inside a %XX escape
        cut = cut[:cut.rindex("%")]
    return f"{cut}.{digest}{SUFFIX}"


_CAPITAL = re.compile(r"%[0-9A-F]{2}|[A-Z]")


def _escape_capital(m: re.Match[str]) -> str:
    got = m.group()
    return got if got[0] == "%" else f"%{ord(got):02X}"


def session_names(sids: Iterable[str]) -> dict[str, str]:
    """The file name of each session of one conversion: :func:`file_name`, and where
    two are equal but for case, each :func:`file_name` ``caseless``: no two fold alike
    (:mod:`acp_pipes.io.filenames`), so none replaces another where case is ignored."""
    return distinct(sids, file_name, lambda sid: file_name(sid, caseless=True))


def session_from_name(name: str) -> str | None:
    """The session ID a file name was made from; None for a long ID's hashed name (the
    ID is in the stream's header)."""
    base = os.path.basename(name)
    if base.endswith(SUFFIX):
        base = base[: -len(SUFFIX)]
    if "." in base:
        return None
    return unquote(base, errors="surrogatepass")


class Spool:
    """Per-session spools; ``add`` records, then ``write_to``/``write_dir``.

    Each session's bytes grow in a ``bytearray`` (appending is one C call per record);
    past :data:`SPOOL_MEMORY` they move to a file in one write (an unnamed temporary
    file; with ``directory``, the session's live output file, started with the header
    ``provisional(sid)`` returns), so memory stays bounded by the sessions' tails, not
    by the recording."""

    def __init__(self, only: str | None = None, directory: str | None = None,
                 provisional: Callable[[str], dict[str, Any]] | None = None):
        self.only = only
        self.files: dict[str, _SessionSpool] = {}
        self.directory = directory  # made by the caller
        self.provisional = provisional
        self.names: dict[str, str] = {}  # each session seen: its file name
        self._folds: dict[str, list[str]] = {}  # fold(file_name): the sessions

    def name(self, sid: str) -> str:
        """``sid``'s file name, as :func:`session_names` names the sessions seen so far.
        A session whose name folds like an earlier one's takes its caseless name, and
        so does the earlier one: its live file is renamed at once, before the new one
        is made (where case is ignored the two would be one file)."""
        got = self.names.get(sid)
        if got is not None:
            return got
        group = self._folds.setdefault(fold(file_name(sid)), [])
        group.append(sid)
        if len(group) == 2:
            first = group[0]
            self.names[first] = renamed = file_name(first, caseless=True)
            f = self.files.get(first)
            if f is not None and f.live is not None:
                path, _, provisional = f.live
                # (a live file is in the directory)
                f.live = (os.path.join(self.directory, renamed), first,  # type: ignore[arg-type]
                          provisional)
                if f.fd is not None:
                    os.replace(path, f.live[0])
        got = self.names[sid] = file_name(sid, caseless=len(group) > 1)
        return got

    def _new(self, sid: str) -> _SessionSpool:
        name = self.name(sid)
        f = self.files[sid] = _SessionSpool()
        if self.directory is not None and (self.only is None or sid == self.only):
            f.live = (os.path.join(self.directory, name), sid, self.provisional)
        return f

    def flush(self) -> None:
        """Write every session's spooled records to its live output file now (the input
        has no more bytes ready: a watcher sees what was made so far)."""
        for f in self.files.values():
            if f.live is not None and f.buf:
                f.spill()

    def add(self, pairs: Iterable[tuple[str, dict[str, Any]]]) -> None:
        files = self.files
        only = self.only
        dumps = orjson.dumps
        nl = _NL
        for sid, rec in pairs:
            if only is not None and sid != only:
                if sid not in self.names:  # named all the same: as without ``only``
                    self.name(sid)
                continue
            f = files.get(sid)
            if f is None:
                f = self._new(sid)
            buf = f.buf
            buf += dumps(rec, option=nl)
            if len(buf) > SPOOL_MEMORY:
                f.spill()

    def put(self, sid: str, rec: dict[str, Any]) -> int:
        """Spool one record of every session (``only`` applies when writing, so a
        record stays readable by :meth:`get`); returns its offset in its session."""
        f = self.files.get(sid)
        if f is None:
            f = self._new(sid)
        buf = f.buf
        pos = f.spilled + len(buf)
        buf += _dumps(rec, option=_NL)
        if len(buf) > SPOOL_MEMORY:
            f.spill()
        return pos

    def get(self, sid: str, pos: int) -> dict[str, Any]:
        """The record :meth:`put` spooled at ``pos`` (read back from memory or disk)."""
        rec: dict[str, Any] = orjson.loads(self.files[sid].line_at(pos))
        return rec

    def _emit(self, out: BinaryIO, sid: str, header: dict[str, Any]) -> None:
        out.write(orjson.dumps(header) + b"\n")
        f = self.files.get(sid)
        if f is not None:
            f.copy_to(out)

    def write_to(self, out: BinaryIO, headers: dict[str, dict[str, Any]]) -> int:
        n = 0
        for sid, h in headers.items():
            if self.only is not None and sid != self.only:
                continue
            self._emit(out, sid, h)
            n += 1
        return n

    def write_dir(self, directory: str, headers: dict[str, dict[str, Any]]
                  ) -> tuple[list[str], list[tuple[str, str]]]:
        """Each stream to ``directory/<file_name>`` as ``-o FILE`` writes (beside it,
        then renamed over it, and over the live file if there is one: atomically);
        returns the paths written and, for each session that could not be, ``(session
        ID, why)``: one that fails does not stop the others. Raises a UsageError when
        ``directory`` cannot be made (:func:`make_dir`)."""
        make_dir(directory)
        written: list[str] = []
        failed: list[tuple[str, str]] = []
        names = {sid: self.name(sid) for sid in headers}  # every one, before any is written
        for sid, h in headers.items():
            if self.only is not None and sid != self.only:
                continue
            path = os.path.join(directory, names[sid])
            try:
                sink = Output(path)
                try:
                    self._emit(sink.stream, sid, h)
                    sink.commit()
                finally:
                    sink.discard()
            except (OSError, AcpPipesError) as e:
                failed.append((sid, str(e)))
            else:
                written.append(path)
        return written, failed


def make_dir(directory: str) -> None:
    """``directory`` and its parents made where missing; ``cannot write DIR: reason``, the
    UsageError ``-o`` says for a file, when it cannot be."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot write {directory}: {e.strerror or e}") from None


def provisional_header(header: dict[str, Any]) -> dict[str, Any]:
    """A stream's header as known before its input is done: ``native.provisional``
    says a later header replaces it (acp-pipes choice, docs/asr.md)."""
    native = header.get("native")
    return {**header, "native": {**(native if isinstance(native, dict) else {}),
                                 "provisional": True}}


def is_provisional(header: dict[str, Any]) -> bool:
    native = header.get("native")
    return isinstance(native, dict) and native.get("provisional") is True


class _SessionSpool:
    """One session's records: a memory tail, and a file once it grew (a temporary one,
    or with ``live`` = (path, sid, provisional) the live output file, its records
    after the provisional header's ``base`` bytes)."""

    __slots__ = ("base", "buf", "fd", "live", "spilled")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.fd: int | None = None
        self.spilled = 0  # bytes of records in the file
        self.base = 0  # bytes before them (the provisional header)
        self.live: tuple[str, str, Callable[[str], dict[str, Any]] | None] | None = None

    def spill(self) -> None:
        """Append the memory tail to the file, whole lines in one write."""
        if self.fd is None:
            if self.live is not None:
                path, sid, provisional = self.live
                try:
                    self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
                    keep_private(self.fd)  # as private as the input
                except OSError:  # not live then; write_dir names what stops the file
                    self.live = None
                else:
                    head = b""
                    if provisional is not None:
                        head = _dumps(provisional_header(provisional(sid)), option=_NL)
                    self.buf[:0] = head  # one write with the first records
                    self.base = len(head)
                    self.spilled = -len(head)
            if self.fd is None:
                self.fd = _temporary_fd()
        _write_all(self.fd, self.buf)
        self.spilled += len(self.buf)
        self.buf.clear()

    def line_at(self, pos: int) -> bytes:
        """The line starting at ``pos`` (without its LF)."""
        if pos >= self.spilled:
            start = pos - self.spilled
            return bytes(self.buf[start:self.buf.index(b"\n", start)])
        line = b""
        at = self.base + pos
        end = self.base + self.spilled
        while at < end:
            # (spilled: the file is open)
            chunk = os.pread(self.fd, min(1 << 16, end - at), at)  # type: ignore[arg-type]
            cut = chunk.find(b"\n")
            if cut >= 0:
                return line + chunk[:cut]
            line += chunk
            at += len(chunk)
        return line + self.buf[:self.buf.index(b"\n")]  # continues in the memory tail

    def copy_to(self, out: BinaryIO) -> None:
        fd = self.fd
        if fd is not None:
            if not _send(fd, self.base, self.base + self.spilled, out):
                at, end = self.base, self.base + self.spilled
                while at < end:
                    chunk = os.pread(fd, min(1 << 20, end - at), at)
                    out.write(chunk)
                    at += len(chunk)
            os.close(fd)
            self.fd = None
        out.write(self.buf)
        self.buf = bytearray()


def _temporary_fd() -> int:
    with tempfile.TemporaryFile() as f:  # unnamed: gone when its last descriptor closes
        return os.dup(f.fileno())


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _send(src: int, start: int, size: int, out: BinaryIO) -> bool:
    """Copy bytes ``start`` to ``size`` of the spool file ``src`` to ``out`` in the
    kernel (``os.sendfile``), not through Python buffers. Only for a plain file or pipe
    (a ``BufferedWriter`` or ``FileIO``: a wrapper such as ``GzipFile`` has the
    descriptor of what it encodes into); False, with nothing written, where that does
    not apply or the system refuses at once (then the caller copies). What is left
    after a later error is copied through Python."""
    if out.__class__ is not io.BufferedWriter and out.__class__ is not io.FileIO:
        return False
    out.flush()
    fd = out.fileno()
    offset = start
    try:
        while offset < size:
            sent = os.sendfile(fd, src, offset, size - offset)
            if sent == 0:
                break
            offset += sent
    except OSError:
        if offset == start:
            return False
    while offset < size:
        chunk = os.pread(src, min(1 << 20, size - offset), offset)
        out.write(chunk)
        offset += len(chunk)
    return True

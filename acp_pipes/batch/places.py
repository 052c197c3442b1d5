"""Where a batch reads and writes: local paths, or fsspec URLs (``s3://``, ``gs://``,
``file://``, ``memory://``, ...).

A local path needs nothing beyond the standard library; a URL imports fsspec (the
``cluster`` extra) only when one is given. :func:`find_inputs` turns the SRC arguments
into :class:`Input` s; :class:`Dest` writes outputs so that none is ever seen half
written: a local file is written in ``DEST/.acp-batch-tmp/`` and renamed into place,
an object store's object appears whole when its upload ends.
"""

from __future__ import annotations

import contextlib
import glob
import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any, BinaryIO

import blake3

from acp_pipes.errors import UsageError
from acp_pipes.jsonl import output_mode

__all__ = ["Dest", "Input", "absolute", "find_inputs", "is_url", "stem_of"]

#: A directory given as SRC holds recordings under these names (acp-tee writes both).
RECORDING_SUFFIXES = (".jsonl", ".jsonl.gz")
#: The temporary files of a local DEST, renamed into place when whole.
TMP_DIR = ".acp-batch-tmp"
_GLOB = frozenset("*?[")
_CHUNK = 1 << 20


def is_url(text: str) -> bool:
    """``scheme://...`` (fsspec's protocol syntax); a plain path otherwise."""
    head, sep, _ = text.partition("://")
    return bool(sep) and head.replace("+", "").replace("-", "").isalnum()


def _fsspec(url: str) -> tuple[Any, str]:
    try:
        from fsspec.core import url_to_fs
    except ImportError:
        raise UsageError(f"{url}: URLs need fsspec: pip install 'acp-pipes[cluster]'") from None
    try:
        return url_to_fs(url)
    except (ImportError, ValueError) as e:  # a protocol whose package is not installed
        raise UsageError(f"{url}: {e}") from None


def _local_fs(fs: Any) -> bool:
    return "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,))


class Input:
    """One recording: ``name`` is how it is shown (the path or URL as SRC gave it, as
    the single-file tools would be given it), ``key`` its path under the SRC it was
    found in, from which its outputs are named, and ``location`` where a worker reads
    it, whatever directory it runs in (an absolute path, or the URL)."""

    __slots__ = ("key", "location", "name")

    def __init__(self, name: str, key: str):
        self.name = name
        self.key = key
        self.location = absolute(name)

    def __repr__(self) -> str:
        return f"Input({self.name!r}, key={self.key!r})"


def absolute(name: str) -> str:
    """A path made absolute (a URL as it is): what a worker in another directory, or on
    another machine that shares the file system, can open."""
    return name if is_url(name) else os.path.abspath(name)


def stem_of(key: str) -> str:
    """The key without its recording suffix: ``a/run.jsonl.gz`` -> ``a/run``."""
    for suffix in (".jsonl.gz", ".jsonl", ".gz"):
        if key.endswith(suffix) and len(key) > len(suffix):
            return key[: -len(suffix)]
    return key


def find_inputs(sources: list[str], exclude: str | None = None) -> list[Input]:
    """The recordings SRC names: a file, a directory (its ``*.jsonl`` and
    ``*.jsonl.gz``, recursively, hidden ones and ``exclude`` left out), or a glob;
    each as a path or a URL. Two inputs whose outputs would have one name are refused."""
    found: list[Input] = []
    skip = os.path.realpath(exclude) if exclude and not is_url(exclude) else None
    for src in sources:
        got = _find_url(src) if is_url(src) else _find_local(src, skip)
        if not got:
            raise UsageError(f"{src}: no recordings there")
        found.extend(got)
    seen: dict[str, str] = {}
    unique: list[Input] = []
    for inp in found:
        stem = stem_of(inp.key)
        other = seen.get(stem)
        if other == inp.name:
            continue  # named twice (a file and its directory): once is enough
        if other is not None:
            raise UsageError(f"{other} and {inp.name} would write the same outputs "
                             f"({stem}): give the directory that holds both as SRC")
        seen[stem] = inp.name
        unique.append(inp)
    return unique


def _is_recording(name: str) -> bool:
    return name.endswith(RECORDING_SUFFIXES) and not name.startswith(".")


def _find_local(src: str, skip: str | None) -> list[Input]:
    if os.path.isdir(src):
        out = []
        for root, dirs, files in os.walk(src):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                             and os.path.realpath(os.path.join(root, d)) != skip)
            for f in sorted(files):
                if _is_recording(f):
                    path = os.path.join(root, f)
                    out.append(Input(path, os.path.relpath(path, src).replace(os.sep, "/")))
        return out
    if _GLOB & set(src):
        return [Input(p, os.path.basename(p)) for p in sorted(glob.glob(src, recursive=True))
                if os.path.isfile(p)]
    if not os.path.exists(src):
        raise UsageError(f"{src}: no such file or directory")
    return [Input(src, os.path.basename(src))]


def _find_url(src: str) -> list[Input]:
    fs, path = _fsspec(src)
    root = path.rstrip("/")
    if _GLOB & set(path):
        return [Input(fs.unstrip_protocol(p), os.path.basename(p.rstrip("/")))
                for p in sorted(fs.glob(path)) if fs.isfile(p)]
    if fs.isdir(path):
        out = []
        for p in sorted(fs.find(path)):
            rel = p[len(root):].lstrip("/")
            if _is_recording(os.path.basename(p)) and not any(
                    part.startswith(".") for part in rel.split("/")):
                out.append(Input(fs.unstrip_protocol(p), rel))
        return out
    if not fs.exists(path):
        raise UsageError(f"{src}: no such file or directory")
    return [Input(src, os.path.basename(root))]


@contextlib.contextmanager
def local_copy(name: str) -> Iterator[tuple[str, str]]:
    """``(path, blake3 hex of the content)`` of an input: a local file as it is (its
    path), a URL's object copied to a temporary file that is removed afterwards."""
    h = blake3.blake3()
    fs, path = (None, name) if not is_url(name) else _fsspec(name)
    if fs is None or _local_fs(fs):
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
        yield path, h.hexdigest()
        return
    tmp = _download(fs, path, h)
    try:
        yield tmp, h.hexdigest()
    finally:
        os.unlink(tmp)


def fetch(name: str) -> tuple[str, bool]:
    """A local path of an input, and whether it is a temporary copy (the caller removes
    it): a local file's own path, or a URL's object copied."""
    fs, path = (None, name) if not is_url(name) else _fsspec(name)
    if fs is None or _local_fs(fs):
        return path, False
    return _download(fs, path, blake3.blake3()), True


def _download(fs: Any, path: str, h: Any) -> str:
    """``path`` of ``fs`` copied to a temporary file named with the same ending (so a
    ``.gz`` reads as one), hashed into ``h`` on the way."""
    base = os.path.basename(path.rstrip("/"))
    fd, tmp = tempfile.mkstemp(prefix="acp-batch-", suffix="-" + base[-60:])
    try:
        with os.fdopen(fd, "wb") as out, fs.open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
                out.write(chunk)
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def content_hash(name: str) -> str:
    """blake3 hex of an input's bytes (a path or a URL)."""
    with local_copy(name) as (_, digest):
        return digest


class Dest:
    """The output root, a directory or a URL; outputs are named by their path under it
    (``/``-separated). Picklable: a worker opens the file system itself."""

    def __init__(self, root: str):
        self.root = root
        self._fs: Any = None
        self._path = root
        self.local = not is_url(root)
        if not self.local:
            fs, path = _fsspec(root)
            if _local_fs(fs):
                self.local, self._path = True, path
            else:
                self._fs, self._path = fs, path.rstrip("/")

    def __getstate__(self) -> dict:
        return {"root": self.root}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["root"])  # type: ignore[misc]

    def where(self, rel: str) -> str:
        """The path or URL of output ``rel``, for messages."""
        if self.local:
            return os.path.join(self._path, rel)
        return self._fs.unstrip_protocol(f"{self._path}/{rel}")

    def _local(self, rel: str) -> str:
        return os.path.join(self._path, *rel.split("/"))

    def prepare(self) -> None:
        """Make the root; drop the temporary files a killed run left."""
        if self.local:
            os.makedirs(self._path, exist_ok=True)
            self.tidy()
        else:
            self._fs.makedirs(self._path, exist_ok=True)

    def tidy(self) -> None:
        """Once every job is done: drop what a worker lost mid-write left (its job was
        done again by another, whose output is in place)."""
        if self.local:
            shutil.rmtree(os.path.join(self._path, TMP_DIR), ignore_errors=True)

    @contextlib.contextmanager
    def create(self, rel: str) -> Iterator[BinaryIO]:
        """A file to write output ``rel`` to; it replaces ``rel`` when the block ends
        without an exception, and is dropped otherwise."""
        if not self.local:
            buf = io.BytesIO()
            yield buf
            self._fs.pipe_file(f"{self._path}/{rel}", buf.getvalue())
            return
        final = self._local(rel)
        tmpdir = os.path.join(self._path, TMP_DIR)
        os.makedirs(tmpdir, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=tmpdir, suffix=".part")
        try:
            os.fchmod(fd, output_mode(0o666 & ~_umask()))  # as private as the input
            with os.fdopen(fd, "wb") as f:
                yield f  # type: ignore[misc]
            os.makedirs(os.path.dirname(final), exist_ok=True)
            os.replace(tmp, final)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def write(self, rel: str, data: bytes) -> None:
        with self.create(rel) as f:
            f.write(data)

    def read(self, rel: str) -> bytes | None:
        """Output ``rel``'s bytes, None when there is none."""
        try:
            if self.local:
                with open(self._local(rel), "rb") as f:
                    return f.read()
            return self._fs.cat_file(f"{self._path}/{rel}")
        except FileNotFoundError:
            return None

    def exists(self, rel: str) -> bool:
        if self.local:
            return os.path.isfile(self._local(rel))
        return self._fs.isfile(f"{self._path}/{rel}")

    def remove(self, rel: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            if self.local:
                os.unlink(self._local(rel))
            else:
                self._fs.rm_file(f"{self._path}/{rel}")

    def append_handle(self, rel: str) -> int | None:
        """An O_APPEND descriptor of local output ``rel`` (None for a URL: objects are
        written whole)."""
        if not self.local:
            return None
        path = self._local(rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)


_UMASK: list[int] = []


def _umask() -> int:
    """The process's umask (read once: reading it means setting it), so an output made
    with mkstemp (0600) gets the mode a plain open() would give it."""
    if not _UMASK:
        mask = os.umask(0o022)
        os.umask(mask)
        _UMASK.append(mask)
    return _UMASK[0]

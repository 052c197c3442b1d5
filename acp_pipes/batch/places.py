"""Where a batch reads and writes: local paths, or fsspec URLs (``s3://``, ``gs://``,
``file://``, ``memory://``, ...).

A local path needs nothing beyond the standard library; a URL imports fsspec (the
``cluster`` extra) only when one is given. :func:`find_inputs` turns the SRC arguments
into :class:`Input` s; :class:`Dest` writes outputs so that none is ever seen half
written: a local file is written in ``DEST/.acp-batch-tmp/`` and renamed into place,
an object store's object appears whole when its upload ends. Nothing is read, written
or removed outside DEST (:func:`inside`), whatever a manifest says; and no two inputs'
outputs have names equal but for case (:func:`output_stems`).
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
from acp_pipes.io.filenames import distinct, fold, is_device
from acp_pipes.io.output import output_mode

__all__ = ["LOCK", "TMP_DIR", "Dest", "Input", "absolute", "find_inputs", "inside", "is_url",
           "output_stems", "stem_of"]

#: A directory given as SRC holds recordings under these names (acp-tee writes both).
RECORDING_SUFFIXES = (".jsonl", ".jsonl.gz")
#: The temporary files of a local DEST, renamed into place when whole.
TMP_DIR = ".acp-batch-tmp"
#: The file a running batch holds locked (:meth:`Dest.lock`).
LOCK = ".acp-batch-lock"
#: Hex digits of the hash in a marked output name (:func:`output_stems`).
_HASHED = 12
#: Bytes of the name kept before the hash in a marked output name.
_KEPT = 64
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
        from acp_pipes.extras import install_hint

        raise UsageError(f"{url}: URLs need fsspec (acp-pipes' extra 'cluster'): "
                         f"{install_hint('cluster')}") from None
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

    __slots__ = ("key", "location", "name", "stem")

    def __init__(self, name: str, key: str):
        self.name = name
        self.key = key
        self.location = absolute(name)
        self.stem = stem_of(key)  # its outputs' name (find_inputs may mark it)

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


def inside(rel: str) -> bool:
    """``rel`` names a file under DEST: ``/``-separated, relative, no empty, ``.`` or
    ``..`` part, no NUL, no separator of this system's own (a backslash on Windows),
    and none of DEST's own files (the manifest's word cannot make a rerun remove them)."""
    if not isinstance(rel, str) or not rel or "\0" in rel or (_ALTSEP and _ALTSEP in rel):
        return False
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return False
    return fold(parts[0]) not in _OWN


_ALTSEP = "\\" if "\\" in (os.sep, os.altsep) else ""
#: DEST's own files under :func:`fold` (the manifest, the align table, the lock, the
#: temporary files).
_OWN_NAMES = ("manifest.jsonl", "align.tsv", TMP_DIR, LOCK)
_OWN = frozenset(fold(n) for n in _OWN_NAMES)


def output_stems(stems: list[str]) -> dict[str, str]:
    """The name each input's outputs take under DEST: its stem, part by part, where that
    part is unique in its folder when case and Unicode normalisation are ignored (and
    is not ``.``, ``..``, a Windows device name or one of DEST's own files); else the
    part with a hash of it, ``Run~<12 hex>`` (:mod:`acp_pipes.io.filenames`): two inputs
    never write one file on a file system that ignores case. Raises UsageError when
    two still would (a hash collision)."""
    tree: dict[str, dict] = {}
    for stem in stems:
        node = tree
        for part in stem.split("/"):
            node = node.setdefault(part, {})
    named: dict[str, str] = {}

    def walk(node: dict[str, dict], raw: str, out: str) -> None:
        try:
            names = distinct(node, str, _marked, taken=() if raw else _OWN_NAMES)
        except ValueError as e:
            raise UsageError(f"{raw or 'DEST'}: {e}") from None
        for part, child in node.items():
            named[raw + part] = out + names[part]
            if child:
                walk(child, raw + part + "/", out + names[part] + "/")

    walk(tree, "", "")
    return {stem: named[stem] for stem in stems}



def _marked(part: str) -> str:
    """``part`` less its leading dots, cut to :data:`_KEPT` bytes, then ``~`` and a
    hash of the whole: a name of its own, never hidden, never ``..``, never a device
    (``_`` before one that would be)."""
    digest = blake3.blake3(part.encode("utf-8", "surrogatepass")).hexdigest()[:_HASHED]
    kept = part.lstrip(".").encode("utf-8", "surrogatepass")[:_KEPT]
    name = kept.decode("utf-8", "ignore") + "~" + digest
    return "_" + name if is_device(name) else name  # NUL.x~...: a device still


def find_inputs(sources: list[str], exclude: str | None = None) -> list[Input]:
    """The recordings SRC names: a file, a directory (its ``*.jsonl`` and
    ``*.jsonl.gz``, recursively, hidden ones and ``exclude`` left out), or a glob;
    each as a path or a URL, its outputs named by :func:`output_stems`. Two inputs whose
    outputs would have one name are refused."""
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
    stems = output_stems(list(seen))
    for inp in unique:
        inp.stem = stems[inp.stem]
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
        self.__init__(state["root"])  # type: ignore[misc]  # unpickled: this class's own

    def where(self, rel: str) -> str:
        """The path or URL of output ``rel``, for messages."""
        if self.local:
            return os.path.join(self._path, rel)
        return self._fs.unstrip_protocol(f"{self._path}/{rel}")

    def _local(self, rel: str) -> str:
        return os.path.join(self._path, *_checked(rel).split("/"))

    def _key(self, rel: str) -> str:
        return f"{self._path}/{_checked(rel)}"

    def prepare(self) -> None:
        """Make the root; drop the temporary files a killed run left."""
        if self.local:
            os.makedirs(self._path, exist_ok=True)
            self.tidy()
        else:
            self._fs.makedirs(self._path, exist_ok=True)

    def lock(self, shown: str) -> int | None:
        """Hold ``DEST/.acp-batch-lock`` locked (``flock``) while the batch runs, its pid
        in it: a second batch on this DEST would drop the first's temporary files and
        append to its manifest, so it is refused (UsageError naming the holder) before
        it touches anything (``shown``: DEST as given, for the message). Returns the
        descriptor for :meth:`unlock`; None for a URL
        (an object store has no locks) or a system without ``flock``."""
        try:
            import fcntl
        except ImportError:  # Windows
            return None
        if not self.local:
            return None
        os.makedirs(self._path, exist_ok=True)
        path = self._local(LOCK)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                os.close(fd)
                if not isinstance(e, BlockingIOError):
                    raise UsageError(f"{shown}: cannot lock {LOCK}: "
                                     f"{e.strerror or e}") from None
                who = f"pid {holder}" if holder.isdigit() else "a process"
                raise UsageError(f"{shown}: another acp-batch ({who}) is writing "
                                 "there; wait for it to end, or give another -o") from None
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # locked a file its holder removed as it ended: the new one
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return fd

    def unlock(self, fd: int | None) -> None:
        """Remove the lock file, then let it go (one that opened it meanwhile sees it
        removed and takes a new one): DEST is left as the outputs make it."""
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self._local(LOCK))
        os.close(fd)

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
            self._fs.pipe_file(self._key(rel), buf.getvalue())
            return
        final = self._local(rel)
        tmpdir = os.path.join(self._path, TMP_DIR)
        os.makedirs(tmpdir, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=tmpdir, suffix=".part")
        try:
            os.fchmod(fd, output_mode(0o666 & ~_umask()))  # as private as the input
            with os.fdopen(fd, "wb") as f:
                yield f
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
            return self._fs.cat_file(self._key(rel))
        except FileNotFoundError:
            return None

    def exists(self, rel: str) -> bool:
        if not inside(rel):
            return False
        if self.local:
            return os.path.isfile(self._local(rel))
        return self._fs.isfile(self._key(rel))

    def same(self, a: str, b: str) -> bool:
        """Outputs ``a`` and ``b`` are one file (names equal but for case, where the
        file system ignores it); never for a URL (object stores tell case apart)."""
        if not self.local:
            return False
        try:
            return os.path.samefile(self._local(a), self._local(b))
        except (OSError, ValueError):
            return False

    def remove(self, rel: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            if self.local:
                os.unlink(self._local(rel))
            else:
                self._fs.rm_file(self._key(rel))

    def append_handle(self, rel: str) -> int | None:
        """An O_APPEND descriptor of local output ``rel`` (None for a URL: objects are
        written whole)."""
        if not self.local:
            return None
        path = self._local(rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)


def _checked(rel: str) -> str:
    """``rel``, when it names a file under DEST or is one of DEST's own files;
    ValueError otherwise (the batch writes nothing else)."""
    if inside(rel) or rel in _OWN_NAMES:
        return rel
    raise ValueError(f"{rel!r} is not a file under DEST")


_UMASK: list[int] = []


def _umask() -> int:
    """The process's umask (read once: reading it means setting it), so an output made
    with mkstemp (0600) gets the mode a plain open() would give it."""
    if not _UMASK:
        mask = os.umask(0o022)
        os.umask(mask)
        _UMASK.append(mask)
    return _UMASK[0]

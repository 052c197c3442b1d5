"""One input's job, as a worker runs it (a local process or a Dask worker): read the
recording (a URL's is copied locally), hash it, skip it when the manifest says it was
done from the same bytes, else run the mode and write its outputs.

:func:`run_job` never raises for a bad input or a failed write: the error is in the
entry it returns, so one input cannot stop a batch. It is a plain module-level function
of plain arguments, so it pickles by reference to any worker with acp-pipes installed.
"""

from __future__ import annotations

import contextlib
import os
import time
from multiprocessing.util import Finalize
from typing import Any

from acp_pipes import __version__
from acp_pipes.batch.modes import MODES, input_error
from acp_pipes.batch.places import Dest, fetch, local_copy
from acp_pipes.errors import AcpPipesError, InputError, Warn
from acp_pipes.io.filenames import fold
from acp_pipes.io.output import made_from
from acp_pipes.io.settings import MAX_LINE_BYTES, RUN

__all__ = ["Job", "run_job", "run_jobs"]

#: What made an output: a rerun by another version does it again.
VERSION = f"acp-pipes {__version__}"
#: Warnings (skipped lines) kept in an entry; the count is always whole.
KEPT_WARNINGS = 20


#: An entry of one of these was done: a rerun with the same bytes, version and options
#: skips it. A failed input is tried again.
DONE = frozenset({"ok", "invalid", "differs"})


class Job:
    """What a worker needs: the mode, the input's ``name`` (as shown), ``location`` (as
    read: an absolute path or a URL) and output ``stem``, the ``dest`` root (absolute),
    the mode's ``options`` and their fingerprint ``config`` (with the version), and
    ``prev``, the input's last manifest entry (or None)."""

    __slots__ = ("config", "dest", "location", "mode", "name", "options", "prev", "stem")

    def __init__(self, mode: str, name: str, location: str, stem: str, dest: str,
                 options: dict[str, Any], config: str, prev: dict[str, Any] | None = None):
        self.mode = mode
        self.name = name
        self.location = location
        self.stem = stem
        self.dest = dest
        self.options = options
        self.config = config
        self.prev = prev

    def __getstate__(self) -> tuple:
        return (self.mode, self.name, self.location, self.stem, self.dest, self.options,
                self.config, self.prev)

    def __setstate__(self, state: tuple) -> None:
        (self.mode, self.name, self.location, self.stem, self.dest, self.options,
         self.config, self.prev) = state

    def reusable(self, digest: str, dest: Dest) -> bool:
        """The previous entry stands: same bytes, same version and options, done, and
        every output it wrote is there, under the name this input's outputs have now."""
        prev = self.prev
        owns = MODES[self.mode].owns
        return (prev is not None and prev.get("hash") == digest
                and prev.get("status") in DONE and prev.get("config") == self.config
                and prev.get("version") == VERSION
                and all(owns(self.stem, rel) and dest.exists(rel)
                        for rel in prev.get("outputs", ())))


_DESTS: dict[str, Dest] = {}
_BASELINES: dict[str, str] = {}


def _dest(root: str) -> Dest:
    d = _DESTS.get(root)
    if d is None:
        d = _DESTS[root] = Dest(root)
    return d


def _baseline(location: str) -> str:
    """A local path of the baseline: a URL's object is copied once per worker process,
    and the copy removed when the process ends."""
    got = _BASELINES.get(location)
    if got is None:
        got, copied = fetch(location)
        _BASELINES[location] = got
        if copied:  # at the worker's exit (a pool's workers skip atexit; this runs)
            Finalize(None, os.unlink, args=(got,), exitpriority=0)
    return got


def run_job(job: Job) -> dict[str, Any]:
    """The manifest entry of ``job`` (with ``"skipped": True`` when it was done before
    and its outputs are all there)."""
    started = time.perf_counter()
    entry: dict[str, Any] = {"input": job.name, "hash": None, "version": VERSION,
                             "config": job.config, "outputs": [], "status": "failed",
                             "error": None}
    warned = _Warned(job)
    dest = _dest(job.dest)
    # the driver's --max-line-bytes, in a worker that did not fork from it (Dask)
    RUN.max_line_bytes = job.options.get("max_line_bytes", MAX_LINE_BYTES)
    try:
        with local_copy(job.location) as (path, digest):
            entry["hash"] = digest
            if job.reusable(digest, dest):
                return {**job.prev, "skipped": True}  # type: ignore[dict-item]  # reusable: a prev
            warned.path = path
            _run_mode(job, path, dest, entry, warned.warn)
    except Exception as e:  # said in the entry: the batch goes on with the next input
        entry["error"] = _error_of(e)
    if job.prev is not None:
        _drop_stale(job, job.prev, entry, dest)
    if warned.count:
        entry["warnings"] = warned.count
        entry["warned"] = warned.kept
    entry["duration"] = round(time.perf_counter() - started, 6)
    return entry


class _Warned:
    """A job's warnings: how many, and the first :data:`KEPT_WARNINGS` as said (the
    input named as the job names it, not as its local copy)."""

    def __init__(self, job: Job):
        self.job = job
        self.path = ""  # the local copy read
        self.count = 0
        self.kept: list[str] = []

    def warn(self, source: str, line: int, message: str) -> None:
        self.count += 1
        if len(self.kept) < KEPT_WARNINGS:
            shown = self.job.name if source == self.path else source
            self.kept.append(f"{shown}:{line}: {message}" if line else f"{shown}: {message}")


def _run_mode(job: Job, path: str, dest: Dest, entry: dict[str, Any], warn: Warn) -> None:
    """Run the job's mode on the local copy ``path``; what it made into ``entry``."""
    options = job.options
    if job.mode == "align":
        options = {**options, "baseline_path": _baseline(options["baseline_at"])}
    made_from([job.location, options.get("baseline_at", "")])  # a URL: not private
    try:
        done = MODES[job.mode].run(path, job.name, job.stem, dest, options, warn)
    except InputError as e:
        entry["error"] = input_error(e, path, job.name)
        return
    error = done.error
    if error is not None and path != job.name and error.startswith(path + ":"):
        error = job.name + error[len(path):]  # the input as it was given
    entry.update(outputs=done.outputs, status=done.status, error=error)
    if done.info is not None:
        entry["info"] = done.info


def _error_of(e: Exception) -> str:
    """What a job's entry says of the error that ended it."""
    if isinstance(e, AcpPipesError):
        return str(e)
    if isinstance(e, OSError):
        where = f" {e.filename}" if e.filename else ""
        return f"cannot read or write{where}: {e.strerror or e}"
    if isinstance(e, (ValueError, RecursionError, MemoryError)):  # input the readers refuse
        return f"{type(e).__name__}: {e}"
    return f"internal error: {type(e).__name__}: {e}"  # a bug


def _drop_stale(job: Job, prev: dict[str, Any], entry: dict[str, Any], dest: Dest) -> None:
    """Remove the outputs the previous run (``prev``) wrote that this one did not, and
    only this input's: a manifest is input too."""
    owns = MODES[job.mode].owns
    written = {fold(rel): rel for rel in entry["outputs"]}
    for rel in set(prev.get("outputs", ())) - set(entry["outputs"]):
        now = written.get(fold(rel))  # where case is ignored, the same file?
        if owns(job.stem, rel) and not (now is not None and dest.same(rel, now)):
            with contextlib.suppress(OSError):
                dest.remove(rel)


def run_jobs(jobs: list[Job]) -> list[dict[str, Any]]:
    """Several jobs in one task: a worker's wake-up and a result's trip back are paid
    once for all of them (on a busy machine each costs milliseconds)."""
    return [run_job(job) for job in jobs]

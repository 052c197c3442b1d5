"""The engines a batch runs on; neither is ours to write, only to drive.

- :class:`LocalWorkers`: worker processes on this machine (``concurrent.futures``), at
  most a few jobs queued ahead per worker, so a corpus of any size is never all in
  memory at once.
- :class:`DaskWorkers`: a Dask distributed cluster (``--scheduler ADDRESS``); its
  workers need acp-pipes installed and the inputs and DEST within their reach.

Both take jobs in chunks (a list of jobs is one task: see :func:`chunked`) and yield
``(job, entry)`` as chunks finish, in the order they finish. A worker that
dies takes its job with it: locally the pool is started again and the jobs it held are
given once more (a job that kills a worker twice is failed); on a cluster Dask moves
them to the workers left.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from acp_pipes.batch.jobs import Job, run_job, run_jobs
from acp_pipes.errors import Note, UsageError

__all__ = ["DaskWorkers", "LocalWorkers", "chunked", "default_jobs"]


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def chunked(jobs: Iterable[Job], total: int, slots: int) -> Iterator[list[Job]]:
    """``jobs`` in tasks of up to 32, fewer when there are few: every worker slot gets
    four tasks or more, so the last ones end close together. A task costs a worker's
    wake-up and a result's trip back (measured: milliseconds each on a loaded machine,
    more than converting a small recording); a chunk pays them once. A batch killed
    mid-chunk redoes that chunk's finished inputs (not yet in the manifest)."""
    size = max(1, min(32, total // (slots * 4)))
    chunk: list[Job] = []
    for job in jobs:
        chunk.append(job)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _failed(job: Job, error: str) -> dict[str, Any]:
    return {"input": job.name, "hash": None, "outputs": [], "status": "failed",
            "error": error, "duration": 0.0}


#: prctl(2) option: the signal a process gets when its parent ends (Linux).
PR_SET_PDEATHSIG = 1
#: Seconds between a worker's looks at whether its driver is still there.
WATCH_SECONDS = 0.5


#: A local worker's stop flag (the driver's Event): set, the chunk ends at the next job.
_stop: Any = None


def _worker_start(driver: int, stop: Any) -> None:
    """A local worker's start. Ctrl-C is the driver's to handle: it stops giving out
    jobs, sets ``stop`` and ends the pool; a worker finishes the job it has, never
    half-writes an output, and drops the rest of its chunk (:func:`_run_chunk`): a
    Ctrl-C costs one job a worker, not a chunk of 32 (the driver would not keep their
    results, and a signal to the driver's pid alone reaches no worker). And a worker
    dies with its driver, however that ends (a
    ``kill -9`` runs no clean-up): on Linux the kernel kills it (``PR_SET_PDEATHSIG``);
    everywhere a thread of its own ends it once the driver is gone. What it was
    writing stays in ``DEST/.acp-batch-tmp``, dropped by the next run."""
    global _stop
    _stop = stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the thread below still ends it
    parent = os.getppid()
    if not _alive(driver, parent):  # gone before the kernel was told: now
        os._exit(1)
    threading.Thread(target=_watch, args=(driver, parent), name="acp-batch-driver-watch",
                     daemon=True).start()


def _run_chunk(jobs: list[Job]) -> list[dict[str, Any]]:
    """:func:`run_jobs` in a local worker, up to the job in hand once the driver stops."""
    entries = []
    for job in jobs:
        if _stop is not None and _stop.is_set():
            break
        entries.append(run_job(job))
    return entries


def _alive(driver: int, parent: int) -> bool:
    """The driver is there: this process's parent is still the one it started with (an
    orphan's parent changes), and the driver's pid still names a process."""
    if os.getppid() != parent:
        return False
    try:
        os.kill(driver, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # there, and not ours: another process with its pid
        return False
    return True


def _watch(driver: int, parent: int) -> None:
    while _alive(driver, parent):
        time.sleep(WATCH_SECONDS)
    os._exit(1)


class LocalWorkers:
    """``jobs`` worker processes on this machine."""

    #: Worker processes of their own: a memory:// file system is not theirs to see.
    shares_memory = False
    #: Jobs queued per worker beyond the one it runs: enough that none waits for the next.
    AHEAD = 3

    def __init__(self, jobs: int, note: Note | None = None):
        if jobs < 1:
            raise UsageError("-j must be at least 1")
        self.jobs = jobs
        self.note = note
        self.pool: Any = None
        self.stop: Any = None  # the workers' stop flag (a multiprocessing Event)

    def describe(self) -> str:
        return f"{self.jobs} local worker{'s' if self.jobs != 1 else ''}"

    def _start(self) -> Any:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context()
        self.stop = context.Event()
        self.pool = ProcessPoolExecutor(max_workers=self.jobs, mp_context=context,
                                        initializer=_worker_start,
                                        initargs=(os.getpid(), self.stop))
        return self.pool

    @property
    def slots(self) -> int:
        return self.jobs

    def run(self, chunks: Iterable[list[Job]]) -> Iterator[tuple[Job, dict[str, Any]]]:
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

        pool = self.pool or self._start()
        todo = iter(chunks)
        again: list[list[Job]] = []  # chunks a dead worker's pool held, to give once more
        tried: set[int] = set()
        pending: dict[Any, list[Job]] = {}
        window = self.jobs * (1 + self.AHEAD)
        while True:
            while len(pending) < window:
                chunk = again.pop() if again else next(todo, None)
                if chunk is None:
                    break
                pending[pool.submit(_run_chunk, chunk)] = chunk
            if not pending:
                return
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            broken = False
            for fut in done:
                chunk = pending.pop(fut)
                try:
                    entries = fut.result()
                except BrokenProcessPool:
                    broken = True
                    if id(chunk) not in tried:
                        tried.add(id(chunk))
                        again.append(chunk)
                        continue
                    entries = [_failed(job, "a worker process died while it ran (twice: "
                                       "killed, or out of memory?)") for job in chunk]
                yield from zip(chunk, entries, strict=True)
            if broken:  # every chunk still pending went down with the pool
                for fut, chunk in pending.items():
                    fut.cancel()
                    again.append(chunk)
                pending.clear()
                if self.note is not None:
                    self.note(f"a worker process died; its pool is started again and "
                              f"{sum(map(len, again))} inputs given once more")
                pool.shutdown(wait=True)
                pool = self._start()

    def close(self) -> None:
        """Jobs not started are dropped; each worker finishes the job it has (after
        Ctrl-C: a moment), so none is ended mid-write, and drops the rest of its chunk.
        Not ``wait=False``: the pool's thread would then race the interpreter's exit (a
        traceback from its wake-up pipe, on Python 3.11)."""
        if self.pool is not None:
            self.stop.set()
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


class DaskWorkers:
    """The workers of the Dask cluster whose scheduler is at ``address``."""

    #: An in-process cluster's workers share this process's memory:// file system.
    shares_memory = True

    def __init__(self, address: str):
        try:
            from distributed import Client
        except ImportError:
            from acp_pipes.extras import install_hint

            raise UsageError("--scheduler needs Dask (acp-pipes' extra 'cluster'): "
                             f"{install_hint('cluster')}") from None
        try:
            self.client = Client(address, timeout="20s")
        except OSError as e:
            raise UsageError(f"--scheduler {address}: cannot connect: {e}") from None
        self.address = address
        self.futures: list[Any] = []

    def describe(self) -> str:
        n = len(self.client.scheduler_info().get("workers", {}))
        return f"the Dask cluster at {self.address} ({n} worker{'s' if n != 1 else ''})"

    @property
    def slots(self) -> int:
        workers = self.client.scheduler_info().get("workers", {}).values()
        return max(1, sum(w.get("nthreads", 1) for w in workers))

    def run(self, chunks: Iterable[list[Job]]) -> Iterator[tuple[Job, dict[str, Any]]]:
        from distributed import as_completed

        by_future: dict[Any, list[Job]] = {}
        for chunk in chunks:
            by_future[self.client.submit(run_jobs, chunk, pure=False)] = chunk
        self.futures = list(by_future)
        for fut in as_completed(self.futures):
            chunk = by_future.pop(fut)
            try:
                entries = fut.result()
            except Exception as e:  # KilledWorker (it killed workers), CancelledError
                entries = [_failed(job, f"lost on the cluster: {type(e).__name__}: {e}")
                           for job in chunk]
            fut.release()
            yield from zip(chunk, entries, strict=True)

    def close(self) -> None:
        try:
            if self.futures:
                self.client.cancel(self.futures)
        finally:
            self.futures = []
            self.client.close()

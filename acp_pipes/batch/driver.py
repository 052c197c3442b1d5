"""The batch itself: inputs found, jobs given to an engine, the manifest kept, and (align)
the table of every run against the baseline written at the end."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import blake3
import orjson

from acp_pipes.batch.jobs import Job
from acp_pipes.batch.manifest import MANIFEST, Manifest
from acp_pipes.batch.modes import MODES
from acp_pipes.batch.places import (
    Dest,
    Input,
    absolute,
    content_hash,
    find_inputs,
    is_url,
)
from acp_pipes.batch.workers import LocalWorkers, chunked
from acp_pipes.errors import UsageError
from acp_pipes.io.settings import MAX_LINE_BYTES, RUN
from acp_pipes.io.terminal import printable

__all__ = ["ALIGN_TABLE", "Batch", "Tally"]

ALIGN_TABLE = "align.tsv"
#: URLs of a file system that exists in one process only.
PROCESS_LOCAL = "memory://"
TABLE_COLUMNS = ("run", "status", "first_a", "first_b", "first_op", "only_a", "only_b",
                 "changed", "same", "distance", "first_step", "error")


class Tally:
    """How the inputs went: counts by status, the failures, the time taken."""

    def __init__(self, total: int):
        self.total = total
        self.counts: dict[str, int] = {}
        self.skipped = 0
        self.failures: list[tuple[str, str]] = []
        self.started = time.monotonic()
        self.elapsed = 0.0
        self.interrupted = False

    @property
    def finished(self) -> int:
        return sum(self.counts.values())

    def add(self, entry: dict[str, Any]) -> None:
        status = entry["status"]
        self.counts[status] = self.counts.get(status, 0) + 1
        if entry.get("skipped"):
            self.skipped += 1
        if status == "failed":
            self.failures.append((entry["input"], entry.get("error") or "failed"))
        self.elapsed = time.monotonic() - self.started


class Batch:
    """``mode`` over the recordings ``sources`` name, outputs under ``dest``.

    ``options`` are the mode's (CLI dest names; others are ignored). Raises UsageError
    for a mode, source or baseline that cannot be used, before anything is written."""

    def __init__(self, mode: str, sources: list[str], dest: str, options: dict[str, Any]):
        if mode not in MODES:
            raise UsageError(f"no mode {mode!r}: one of {', '.join(MODES)}")
        self.mode = mode
        self.dest_name = dest
        self.dest = Dest(absolute(dest))
        self.inputs: list[Input] = find_inputs(sources,
                                               exclude=None if is_url(dest) else dest)
        wanted = MODES[mode].options
        self.options = {k: v for k, v in options.items() if k in wanted}
        # every mode's reader stops at a longer line (the input fails), so the limit
        # makes outputs too; at the default it is left out, where no batch put it before
        limit = options.get("max_line_bytes") or RUN.max_line_bytes
        if limit != MAX_LINE_BYTES:
            self.options["max_line_bytes"] = limit
        if mode == "align":
            baseline = self.options.get("baseline")
            if not baseline:
                raise UsageError("align needs --baseline FILE: the run every input is "
                                 "aligned against")
            try:
                self.options["baseline_hash"] = content_hash(baseline)
            except OSError as e:
                raise UsageError(f"--baseline {baseline}: {e.strerror or e}") from None
        self.config = blake3.blake3(orjson.dumps(
            {"mode": mode, **self.options}, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]
        if mode == "align":  # where workers read it (not part of the config)
            self.options["baseline_at"] = absolute(self.options["baseline"])

    def run(self, workers: Any, on_entry: Callable[[dict[str, Any]], None] | None = None
            ) -> Tally:
        """Every input through ``workers`` (LocalWorkers or DaskWorkers); ``on_entry`` is
        called with each input's entry as it finishes. A KeyboardInterrupt stops it with
        the manifest holding every input finished so far (``Tally.interrupted``)."""
        if not workers.shares_memory:
            local = [n for n in [self.dest_name, *(i.name for i in self.inputs),
                                 self.options.get("baseline") or ""]
                     if n.startswith(PROCESS_LOCAL)]
            if local:
                raise UsageError(f"{local[0]}: a memory:// file system lives in this process "
                                 "alone; worker processes cannot see it (an in-process Dask "
                                 "cluster can)")
        lock = self.dest.lock(self.dest_name)  # before anything in DEST is touched
        try:
            return self._run(workers, on_entry)
        finally:
            self.dest.unlock(lock)

    def _run(self, workers: Any, on_entry: Callable[[dict[str, Any]], None] | None
             ) -> Tally:
        if isinstance(workers, LocalWorkers):
            MODES[self.mode].warm()  # before the pool forks
        self.dest.prepare()
        manifest = Manifest(self.dest, self.manifest_path)
        tally = Tally(len(self.inputs))
        jobs = (Job(self.mode, inp.name, inp.location, inp.stem, self.dest.root,
                    self.options, self.config, manifest.entries.get(inp.name))
                for inp in self.inputs)
        try:
            for _job, entry in workers.run(chunked(jobs, len(self.inputs), workers.slots)):
                if not entry.get("skipped"):
                    manifest.add(entry)
                tally.add(entry)
                if on_entry is not None:
                    on_entry(entry)
        except KeyboardInterrupt:
            tally.interrupted = True
        finally:
            try:
                workers.close()
            finally:
                manifest.close()
        if not tally.interrupted:
            if self.mode == "align":
                self._table(manifest)
            self.dest.tidy()
        tally.elapsed = time.monotonic() - tally.started
        return tally

    @property
    def manifest_path(self) -> str:
        return self._shown(MANIFEST)

    @property
    def table_path(self) -> str:
        return self._shown(ALIGN_TABLE)

    def _shown(self, rel: str) -> str:
        """Output ``rel`` as DEST was given (relative stays relative)."""
        if is_url(self.dest_name):
            return self.dest.where(rel)
        return os.path.join(self.dest_name, rel)

    def _table(self, manifest: Manifest) -> None:
        """One row per run, in the order of the inputs: where it first diverged from the
        baseline (the step index in each, the op, the step) and by how much."""
        rows = ["\t".join(TABLE_COLUMNS)]
        for inp in self.inputs:
            entry = manifest.entries.get(inp.name, {})
            info = entry.get("info") or {}
            cells = {"run": inp.name, "status": entry.get("status", "failed"),
                     "error": entry.get("error"), **info}
            rows.append("\t".join(_cell(cells.get(c)) for c in TABLE_COLUMNS))
        self.dest.write(ALIGN_TABLE, ("\n".join(rows) + "\n").encode("utf-8"))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return printable(str(value))  # a tab or newline in a step's text stays in its cell

"""acp-batch's library: a corpus of recordings through one tool's library functions, on
local worker processes or a Dask cluster, resumable.

- :mod:`~acp_pipes.batch.places`: the inputs SRC names and the DEST outputs go to, local
  or fsspec URLs; outputs appear whole or not at all.
- :mod:`~acp_pipes.batch.modes`: asr, validate, view, align, each the bytes its
  single-file tool writes.
- :mod:`~acp_pipes.batch.jobs`: one input's job, as a worker runs it (hash, skip, run).
- :mod:`~acp_pipes.batch.manifest`: ``DEST/manifest.jsonl``, what a rerun skips.
- :mod:`~acp_pipes.batch.workers`: the engines (concurrent.futures, dask.distributed).
- :mod:`~acp_pipes.batch.driver`: :class:`Batch`, which ties them together.

Only the engines and URLs need more than the base install (the ``cluster`` extra), and
they import it only when used.
"""

from acp_pipes.batch.driver import Batch, Tally
from acp_pipes.batch.jobs import Job, run_job, run_jobs
from acp_pipes.batch.modes import MODES
from acp_pipes.batch.workers import DaskWorkers, LocalWorkers, default_jobs

__all__ = ["MODES", "Batch", "DaskWorkers", "Job", "LocalWorkers", "Tally", "default_jobs",
           "run_job", "run_jobs"]

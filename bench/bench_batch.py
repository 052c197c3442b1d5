"""acp-batch over 1,000 recordings of the echo session: files/s on 1 and 2 local workers,
against `make -j 2` of examples/batch (one acp-asr process per log) and against a Dask
LocalCluster of two worker processes, interleaved in one run; and the driver's cost per
file against converting the same files in one process.

The recording is examples/hello's session, recorded once with acp-tee --script against
the echo agent (42 frames), copied 1,000 times, each copy with its own session ID. Every
subject converts the same corpus to ASR into a fresh DEST (acp-batch asr; make runs
acp-asr -o per log). The in-process
baseline is one Python process calling, per file, the same mode function a worker calls
(convert and write the streams): the difference is the driver's own work (finding the
inputs, the pool, hashing each input, the manifest), per file, in wall and CPU time.
The LocalCluster is started before the runs and is not timed.

The machine has 2 cores shared with other work: the load average before and after is
part of the report, and the ratios (same run, interleaved) are the figures to read.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench.common import (
    REPO,
    Run,
    env,
    median_cpu,
    median_wall,
    run_cmd,
    side_by_side,
    table,
    tool,
    workdir,
)

INPROC = """\
import os, sys
from acp_pipes.batch.modes import MODES
from acp_pipes.batch.places import Dest
corpus, out = sys.argv[1], sys.argv[2]
dest = Dest(out)
run = MODES["asr"].run
def warn(source, line, message):
    raise SystemExit(f"{source}:{line}: {message}")
for name in sorted(os.listdir(corpus)):
    run(os.path.join(corpus, name), name, name[:-6], dest, {}, warn)
"""


def _corpus(work: Path, n: int) -> Path:
    corpus = work / f"corpus-{n}"
    if corpus.is_dir() and len(os.listdir(corpus)) == n:
        return corpus
    wire = work / "echo.jsonl"
    if not wire.exists():
        subprocess.run(tool("tee", "--script", str(REPO / "examples/hello/client.jsonl"),
                            "-o", str(wire), "--clock", "epoch", "--no-host", "--",
                            *tool("echo-agent")),
                       check=True, env=env(), stdout=subprocess.DEVNULL,
                       stdin=subprocess.DEVNULL)
    shutil.rmtree(corpus, ignore_errors=True)
    corpus.mkdir()
    data = wire.read_bytes()
    for i in range(n):  # each run its own session ID, as in a real corpus (and for make:
        # two acp-asr -o writing one stream file at once would trip over each other)
        (corpus / f"run-{i:04d}.jsonl").write_bytes(data.replace(b"sess-1", b"sess-%04d" % i))
    return corpus


def _fresh(out: Path) -> Path:
    shutil.rmtree(out, ignore_errors=True)
    return out


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main(quick: bool) -> str:
    n, repeat = (100, 1) if quick else (1000, 3)
    work = workdir("batch")
    corpus = _corpus(work, n)
    out = work / "out"
    load_before = _load()
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        address = cluster.scheduler_address

        def batch(*args: str):
            return lambda: run_cmd(tool("batch", "asr", str(corpus), "-o",
                                        str(_fresh(out)), *args))

        subjects = {
            "acp-batch -j 1": batch("-j", "1"),
            "acp-batch -j 2": batch("-j", "2"),
            "make -j 2 (examples/batch)": lambda: run_cmd(
                ["make", "-s", "-j", "2", "-C", str(REPO / "examples/batch"),
                 f"WIRE_DIR={corpus}", f"OUT_DIR={_fresh(out)}",
                 "ACP_ASR=" + " ".join(tool("asr"))]),
            "acp-batch --scheduler (LocalCluster, 2 workers)": batch("--scheduler", address),
            "in-process (the mode function, a loop)": lambda: run_cmd(
                [sys.executable, "-c", INPROC, str(corpus), str(_fresh(out))]),
        }
        runs: dict[str, list[Run]] = side_by_side(subjects, repeat=repeat)
    load_after = _load()

    j1 = median_wall(runs["acp-batch -j 1"])
    rows = []
    for name, rs in runs.items():
        wall = median_wall(rs)
        rows.append([name, f"{wall:.2f}", f"{median_cpu(rs):.2f}", f"{n / wall:.0f}",
                     f"{j1 / wall:.2f}x"])
    inproc = runs["in-process (the mode function, a loop)"]
    over_wall = (j1 - median_wall(inproc)) / n * 1000
    over_cpu = (median_cpu(runs["acp-batch -j 1"]) - median_cpu(inproc)) / n * 1000
    speedup = j1 / median_wall(runs["acp-batch -j 2"])
    text = [
        f"### acp-batch: {n:,} recordings of the echo session (asr), median of {repeat}",
        "",
        f"`python -m bench batch{' --quick' if quick else ''}`; load average (1, 5, 15 "
        f"min) {load_before} before, {load_after} after.",
        "",
        table(["subject", "wall s", "CPU s", "files/s", "vs -j 1"], rows),
        "",
        f"- `-j 2` vs `-j 1`: **{speedup:.2f}x** (target >= 1.7x: "
        f"{'met' if speedup >= 1.7 else '**missed**'})",
        f"- driver overhead per file (`-j 1` minus in-process): {over_wall:.2f} ms wall, "
        f"{over_cpu:.2f} ms CPU (target < 5 ms: "
        f"{'met' if over_wall < 5 else '**missed**'})",
    ]
    return "\n".join(text)


if __name__ == "__main__":
    print(main("--quick" in sys.argv))

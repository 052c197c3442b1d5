"""What every benchmark shares: same-run baselines, medians, peak memory, tables.

The machines are shared and noisy, so a figure on its own means little: each benchmark
runs its subject and a baseline side by side, alternating, several times, and reports
medians and the ratio of medians.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "out" / "bench"


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    return e


def tool(name: str, *args: str) -> list[str]:
    """argv of the real executable acp-<name>, as a user runs it: the console script
    ``make install`` puts beside this Python (``python -m`` when there is none, which
    costs ~7 ms more start-up: runpy)."""
    script = Path(sys.executable).parent / f"acp-{name}"
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-m", f"acp_pipes.cli.{name.replace('-', '_')}", *args]


@dataclass
class Run:
    wall: float  # seconds
    peak_rss_mb: float  # of the command's own process (0 for in-process runs)
    cpu: float = 0.0  # user + system seconds of the command's process tree


def run_cmd(
    argv: Sequence[str],
    *,
    stdin: Path | None = None,
    stdout: Path | None = None,
) -> Run:
    """Run a command once with files for stdin/stdout: its wall time, peak RSS and CPU
    time, measured by ``bench._measure`` so the parent's size does not leak into them."""
    fin = open(stdin, "rb") if stdin else subprocess.DEVNULL
    fout = open(stdout, "wb") if stdout else subprocess.DEVNULL
    with tempfile.NamedTemporaryFile("r", suffix=".measure") as report:
        try:
            p = subprocess.run(
                [sys.executable, "-m", "bench._measure", report.name, "--", *map(str, argv)],
                stdin=fin, stdout=fout, env=env(), cwd=REPO,
            )
        finally:
            for f in (fin, fout):
                if hasattr(f, "close"):
                    f.close()
        if p.returncode not in (0, 1):
            raise RuntimeError(f"{' '.join(map(str, argv))} exited {p.returncode}")
        wall, rss_kb, cpu = report.read().split()
    return Run(float(wall), int(rss_kb) / 1024, float(cpu))


def run_fn(fn: Callable[[], object]) -> Run:
    t0 = time.perf_counter()
    fn()
    return Run(time.perf_counter() - t0, 0.0)


def side_by_side(subjects: dict[str, Callable[[], Run]], repeat: int = 5) -> dict[str, list[Run]]:
    """Run each subject ``repeat`` times, interleaved, so drift hits all alike."""
    runs: dict[str, list[Run]] = {name: [] for name in subjects}
    for _ in range(repeat):
        for name, fn in subjects.items():
            runs[name].append(fn())
    return runs


def median_wall(runs: list[Run]) -> float:
    return statistics.median(r.wall for r in runs)


def median_cpu(runs: list[Run]) -> float:
    """Median CPU seconds (user + system): steadier than wall time on a busy host."""
    return statistics.median(r.cpu for r in runs)


def max_rss(runs: list[Run]) -> float:
    return max(r.peak_rss_mb for r in runs)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table."""
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def workdir(name: str) -> Path:
    d = WORK / name
    d.mkdir(parents=True, exist_ok=True)
    return d

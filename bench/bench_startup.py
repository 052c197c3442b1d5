"""Start-up: how long each tool takes to start and end with nothing to do.

Each tool runs ``--version`` (its modules imported, its parser built, one line printed)
through a launcher shaped like the console script ``pip`` writes, beside a bare
``python -c pass``, the floor of any Python tool; interleaved, medians of N (CPU = user
+ system, steadier than wall time on a shared host).

``ACP_BENCH_AGAINST=TREE`` adds the same tools from another checkout (say, the previous
commit), run in the same interleaved rounds, to compare two versions of the code.
"""

from __future__ import annotations

import compileall
import os
import sys
from pathlib import Path

from bench.common import REPO, median_cpu, median_wall, run_cmd, side_by_side, table, workdir

TOOLS = ("tee", "frame", "fold", "asr", "replay", "align", "echo-agent")


def launcher(d: Path, tree: Path, name: str) -> Path:
    """An ``acp-<name>`` script importing the package from ``tree``, as pip's does."""
    path = d / f"acp-{name}"
    path.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"sys.path.insert(0, {str(tree)!r})\n"
        f"from acp_pipes.cli.{name.replace('-', '_')} import main\n"
        "if __name__ == '__main__':\n"
        "    sys.exit(main())\n"
    )
    path.chmod(0o755)
    return path


def main(quick: bool) -> str:
    repeat = 5 if quick else 31
    trees = {"this tree": REPO}
    against = os.environ.get("ACP_BENCH_AGAINST")
    if against:
        trees["against"] = Path(against).resolve()
    d = workdir("startup")
    subjects = {"python -c pass": lambda: run_cmd([sys.executable, "-c", "pass"])}
    for tag, tree in trees.items():
        compileall.compile_dir(tree / "acp_pipes", quiet=1)  # as an install does
        sub = d / ("this" if tag == "this tree" else "against")
        sub.mkdir(exist_ok=True)
        for name in TOOLS:
            script = launcher(sub, tree, name)
            subjects[f"acp-{name} ({tag})"] = lambda s=script: run_cmd([str(s), "--version"])
    runs = side_by_side(subjects, repeat)
    floor = median_cpu(runs["python -c pass"])
    rows = []
    for name, r in runs.items():
        cpu, wall = median_cpu(r), median_wall(r)
        rows.append([name, f"{wall * 1e3:.1f}", f"{cpu * 1e3:.1f}",
                     f"+{(cpu - floor) * 1e3:.1f}" if name != "python -c pass" else ""])
    return (
        f"## Start-up (`--version`, medians of {repeat} interleaved runs)\n\n"
        + table(["command", "wall ms", "CPU ms", "CPU over the bare interpreter, ms"], rows)
    )

"""Start-up: how long each tool takes to start and end with nothing to do, and what
acp-tee's start-up costs a session.

Each tool runs ``--version`` (its modules imported, its parser built, one line printed)
through a launcher shaped like the console script ``pip`` writes, beside a bare
``python -c pass``, the floor of any Python tool. acp-tee's own cost is measured where
a user pays it: a piped 1000-prompt echo session through it (as ``bench tee``), and how
much later the agent starts behind it. Interleaved, medians of N (CPU = user + system,
steadier than wall time on a shared host).

``ACP_BENCH_AGAINST=TREE`` adds the same rows from another checkout (say, the previous
commit), run in the same interleaved rounds, to compare two versions of the code.
"""

from __future__ import annotations

import compileall
import os
import sys
from pathlib import Path

from bench.bench_tee import PROBE, started_after
from bench.common import (
    REPO,
    median_cpu,
    median_wall,
    run_cmd,
    side_by_side,
    table,
    tool,
    workdir,
)

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
    from acp_pipes.echo.client import client_session

    client = d / "client.jsonl"
    client.write_bytes(b"".join(f + b"\n" for f in client_session(50 if quick else 1000)))
    agent = tool("echo-agent")
    subjects = {"python -c pass": lambda: run_cmd([sys.executable, "-c", "pass"]),
                "echo agent alone": lambda: run_cmd(agent, stdin=client, stdout=d / "a.out"),
                "probe alone": lambda: started_after(PROBE)}
    for tag, tree in trees.items():
        compileall.compile_dir(tree / "acp_pipes", quiet=1)  # as an install does
        sub = d / ("this" if tag == "this tree" else "against")
        sub.mkdir(exist_ok=True)
        for name in TOOLS:
            script = launcher(sub, tree, name)
            subjects[f"acp-{name} ({tag})"] = lambda s=script: run_cmd([str(s), "--version"])
        tee = str(launcher(sub, tree, "tee"))
        subjects[f"session through acp-tee ({tag})"] = lambda t=tee, w=sub / "w.jsonl": run_cmd(
            [t, "-o", str(w), "--", *agent], stdin=client, stdout=d / "t.out")
        subjects[f"probe behind acp-tee ({tag})"] = lambda t=tee, w=sub / "p.jsonl": (
            started_after([t, "-o", str(w), "--", *PROBE]))
    runs = side_by_side(subjects, repeat)
    floor = median_cpu(runs["python -c pass"])
    rows = []
    for name, r in runs.items():
        if "session" in name or "probe" in name or name == "echo agent alone":
            continue
        cpu, wall = median_cpu(r), median_wall(r)
        rows.append([name, f"{wall * 1e3:.1f}", f"{cpu * 1e3:.1f}",
                     f"+{(cpu - floor) * 1e3:.1f}" if name != "python -c pass" else ""])
    alone, probe = median_wall(runs["echo agent alone"]), median_wall(runs["probe alone"])
    cpu_alone = median_cpu(runs["echo agent alone"])
    tee_rows = [["echo agent alone", f"{alone * 1e3:.1f}", "", f"{cpu_alone * 1e3:.1f}", "", ""]]
    for tag in trees:
        session = runs[f"session through acp-tee ({tag})"]
        through, cpu = median_wall(session), median_cpu(session)
        later = median_wall(runs[f"probe behind acp-tee ({tag})"]) - probe
        tee_rows.append([f"through acp-tee ({tag})", f"{through * 1e3:.1f}",
                         f"{(through - alone) / alone:+.0%}", f"{cpu * 1e3:.1f}",
                         f"{(cpu - cpu_alone) * 1e3:+.1f}", f"{later * 1e3:.1f}"])
    return (
        f"## Start-up (`--version`, medians of {repeat} interleaved runs)\n\n"
        + table(["command", "wall ms", "CPU ms", "CPU over the bare interpreter, ms"], rows)
        + f"\n\nacp-tee in front of the echo agent, {'50' if quick else '1000'} prompts piped, "
        "same rounds:\n\n"
        + table(["session", "wall ms", "vs alone", "CPU ms (agent and proxy)",
                 "CPU added, ms", "the agent starts later by, ms"], tee_rows)
    )

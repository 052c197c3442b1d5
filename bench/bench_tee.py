"""acp-tee overhead: the echo agent alone vs the same session through acp-tee.

Workload (the seed's): one session of 1000 prompts (quick: 50) from
``acp_pipes.echo.client.client_session``, stdin from a file, stdout to a file. Both runs
are whole processes as a user starts them, interleaved, medians of N. That piped session is the
worst case for a proxy: the agent does almost nothing per frame, so the proxy's own
start-up and per-frame work are the whole difference. The second workload is the same
session driven turn by turn as an editor does (the editor is played by
``acp-tee --script CLIENT -o /dev/null``, which sends each frame once the agent has
answered the previous one), which is what acp-tee sits in front of in real use.

The log's other forms are measured beside the plain ``-o FILE`` in the same run: a
directory (a new file per session) and ``.gz`` (compressed, flushed with every write).
With ``ACP_TEE_BASELINE=/path/to/another/checkout``, that checkout's acp-tee runs the
same session in the same run, both started the same way (``python -c``, as bin/acp-tee
does), to show what a change costs; ``ACP_TEE_REPEAT=N`` runs each subject N times
(default 9, quick 3), as a busy host needs for a difference of a few percent.

Besides the totals, two fixed costs are measured in the same run: how much later the
agent starts behind acp-tee than on its own (a probe agent prints the time it started),
which is the part of the proxy's start-up the session waits for (acp-tee imports the
rest while the agent starts), and a bare ``python -c pass``, the floor of that delay for
any proxy written in Python. The per-frame figure is given with and without the delay.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
import time
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

PROBE = ["sh", "-c", "date +%s%N"]  # an agent that says when it started, in ns


def started_after(argv: list[str]) -> Run:
    """Time from starting ``argv`` until the probe agent at its end starts running."""
    t0 = time.time_ns()
    out = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, env=env(),
                         check=True).stdout
    return Run((int(out.split()[-1]) - t0) / 1e9, 0.0)


def tee_of(checkout: Path, *args: str) -> list[str]:
    """argv of ``checkout``'s acp-tee, started as its bin/acp-tee starts it."""
    code = (f"import sys; sys.path.insert(0, {str(checkout)!r}); sys.argv[0] = 'acp-tee'; "
            "from acp_pipes.cli.tee import main; main()")
    return [sys.executable, "-c", code, *args]


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def main(quick: bool) -> str:
    from acp_pipes.echo.client import client_session

    prompts = 50 if quick else 1000
    repeat = int(os.environ.get("ACP_TEE_REPEAT") or (3 if quick else 9))
    d = workdir("tee")
    client = d / "client.jsonl"
    client.write_bytes(b"".join(f + b"\n" for f in client_session(prompts)))
    direct_out, tee_out, wire = d / "direct.out", d / "tee.out", d / "wire.jsonl"
    agent = tool("echo-agent")
    proxied = tool("tee", "-o", str(wire), "--", *agent)
    lockstep = tool("tee", "--script", str(client), "-o", os.devnull, "--")
    logs, gz = d / "logs", d / "wire.jsonl.gz"
    shutil.rmtree(logs, ignore_errors=True)
    subjects = {
        "direct": lambda: run_cmd(agent, stdin=client, stdout=direct_out),
        "tee": lambda: run_cmd(proxied, stdin=client, stdout=tee_out),
        "probe": lambda: started_after(PROBE),
        "tee-probe": lambda: started_after(tool("tee", "-o", str(d / "probe.jsonl"), "--",
                                                *PROBE)),
        "python": lambda: run_cmd([sys.executable, "-c", "pass"]),
        "lockstep": lambda: run_cmd(lockstep + agent, stdout=direct_out),
        "lockstep-tee": lambda: run_cmd(lockstep + proxied, stdout=tee_out),
        "tee-dir": lambda: run_cmd(tool("tee", "-o", f"{logs}/", "--", *agent), stdin=client,
                                   stdout=tee_out),
        "tee-gz": lambda: run_cmd(tool("tee", "-o", str(gz), "--", *agent), stdin=client,
                                  stdout=tee_out),
    }
    baseline = os.environ.get("ACP_TEE_BASELINE")
    if baseline:
        checkouts = {"this": REPO, "base": Path(baseline).resolve()}
        for name, checkout in checkouts.items():
            subjects[f"c-{name}"] = (lambda c=checkout: run_cmd(
                tee_of(c, "-o", str(wire), "--", *agent), stdin=client, stdout=tee_out))
            subjects[f"c-{name}-probe"] = (lambda c=checkout: started_after(
                tee_of(c, "-o", str(d / "probe.jsonl"), "--", *PROBE)))
    runs = side_by_side(subjects, repeat=repeat)
    if direct_out.read_bytes() != tee_out.read_bytes():
        raise RuntimeError("acp-tee changed the agent's output")
    frames = sum(1 for _ in wire.open("rb")) - 1
    base, sub = median_wall(runs["direct"]), median_wall(runs["tee"])
    fixed = median_wall(runs["tee-probe"]) - median_wall(runs["probe"])
    floor = median_wall(runs["python"])
    added = sub - base
    cpu_base, cpu_sub = median_cpu(runs["direct"]), median_cpu(runs["tee"])
    cpu_added = cpu_sub - cpu_base
    rows = [
        ["echo agent alone", f"{base * 1e3:.1f}", "", "", f"{cpu_base * 1e3:.1f}", ""],
        ["through acp-tee -o", f"{sub * 1e3:.1f}", f"{sub / base:.2f}x (+{added / base:.0%})",
         f"{added / frames * 1e6:.1f}", f"{cpu_sub * 1e3:.1f}",
         f"{cpu_added / frames * 1e6:.1f}"],
        ["of which: the agent starts later by", f"{fixed * 1e3:.1f}",
         f"+{fixed / base:.0%}", "", "", ""],
        ["(floor: a bare Python interpreter starting)", f"{floor * 1e3:.1f}",
         f"+{floor / base:.0%}", "", "", ""],
        ["the rest: frames, drain, exit", f"{(added - fixed) * 1e3:.1f}",
         f"+{(added - fixed) / base:.0%}", f"{(added - fixed) / frames * 1e6:.1f}", "", ""],
    ]
    for name, what in (("tee-dir", "through acp-tee -o DIR/ (a new log each run)"),
                       ("tee-gz", "through acp-tee -o wire.jsonl.gz")):
        wall, cpu = median_wall(runs[name]), median_cpu(runs[name])
        rows.append([what, ms(wall), f"{wall / base:.2f}x (+{(wall - base) / base:.0%})",
                     f"{(wall - base) / frames * 1e6:.1f}", ms(cpu),
                     f"{(cpu - cpu_base) / frames * 1e6:.1f}"])
    if gzip.decompress(gz.read_bytes()).count(b"\n") != frames + 1:
        raise RuntimeError("the .gz log does not hold every frame")
    if len(list(logs.iterdir())) != repeat:
        raise RuntimeError("-o DIR/ did not write a new log for each run")
    lock, lock_tee = median_wall(runs["lockstep"]), median_wall(runs["lockstep-tee"])
    rows += [
        ["turn by turn (editor-like client), alone", f"{lock * 1e3:.1f}", "", "", "", ""],
        ["turn by turn, through acp-tee -o", f"{lock_tee * 1e3:.1f}",
         f"{lock_tee / lock:.2f}x (+{(lock_tee - lock) / lock:.0%})",
         f"{(lock_tee - lock) / frames * 1e6:.1f}", "", ""],
    ]
    if baseline:
        this, base_tee = median_wall(runs["c-this"]), median_wall(runs["c-base"])
        start_this = median_wall(runs["c-this-probe"]) - median_wall(runs["probe"])
        start_base = median_wall(runs["c-base-probe"]) - median_wall(runs["probe"])
        cpu_this, cpu_base_tee = median_cpu(runs["c-this"]), median_cpu(runs["c-base"])
        rows += [
            [f"python -c acp-tee -o, {baseline}", ms(base_tee),
             f"{base_tee / base:.2f}x (+{(base_tee - base) / base:.0%})", "",
             ms(cpu_base_tee), f"{(cpu_base_tee - cpu_base) / frames * 1e6:.1f}"],
            ["python -c acp-tee -o, this checkout", ms(this),
             f"{this / base:.2f}x (+{(this - base) / base:.0%}); "
             f"{this / base_tee:.3f}x the baseline's", "", ms(cpu_this),
             f"{(cpu_this - cpu_base) / frames * 1e6:.1f}"],
            [f"the agent starts later by, {baseline}", ms(start_base), "", "", "", ""],
            ["the agent starts later by, this checkout", ms(start_this), "", "", "", ""],
        ]
    return (
        f"## acp-tee: recording overhead\n\n"
        f"{prompts} prompts, {frames} frames ({client.stat().st_size} bytes in, "
        f"{tee_out.stat().st_size} out, log {wire.stat().st_size} bytes); "
        f"median of {repeat} interleaved runs; outputs byte-identical.\n\n"
        + table(["run", "wall ms", "vs alone", "us/frame added", "CPU ms", "CPU us/frame added"],
                rows)
    )


if __name__ == "__main__":
    print(main("--quick" in sys.argv))

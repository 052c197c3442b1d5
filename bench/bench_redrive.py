"""``acp-replay --client``: re-driving a live agent from its recording, beside the agent's
own time in the same run.

The session: the 1000-prompt echo session (every 10th prompt asks permission, every 25th
elicits), recorded by the real acp-tee turn by turn (``--script``). Three subjects,
interleaved:

- the agent alone, the recorded client frames piped in at once: what the agent costs
  with nobody waiting on it (the least time the session can take);
- the agent driven turn by turn by a bare client: a loop that sends each recorded
  client frame once the agent has sent as many frames as were recorded before it, and
  does nothing else (no comparison, no renaming, no log): the least a client pacing by
  the protocol adds;
- ``acp-replay --client WIRE -o LOG -- acp-echo-agent``: the same pacing, every agent
  frame compared with the recording under the renaming, its requests answered from the
  recording, the run's wire log written.

Each run's output is checked: the re-drive must exit 0 and its log hold the recorded
agent bytes.

With ``ACP_PIPES_BENCH_BASELINE=DIR`` (a directory holding another ``acp_pipes``
package: ``git archive main acp_pipes | tar -x -C DIR``), the re-drive of that code runs
in the same rounds, both started the same way (``python -c`` of ``cli.replay.main``
with the package's directory first on the path): before and after, one run.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

import orjson

from bench.common import (
    REPO,
    env,
    median_cpu,
    median_wall,
    run_cmd,
    side_by_side,
    table,
    tool,
    workdir,
)

#: A client that paces by the recording and does nothing else.
LOCKSTEP = """
import subprocess, sys
import orjson
with open(sys.argv[1], "rb") as f:
    recs = [orjson.loads(line) for line in f][1:]
agent = subprocess.Popen(sys.argv[3:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
seen = owed = 0
for r in recs:
    d = r.get("dir")
    if d == "a2c":
        owed += 1
    elif d == "c2a":
        while seen < owed:
            agent.stdout.readline()
            seen += 1
        agent.stdin.write(r["raw"].encode() + b"\\n")
        agent.stdin.flush()
agent.stdin.close()
for _ in agent.stdout:
    pass
sys.exit(agent.wait())
"""


def prepare(prompts: int, d: Path) -> dict:
    client = d / f"echo-{prompts}.client.jsonl"
    run_cmd(tool("echo-agent", "--client-session", str(prompts), "--permission-every", "10",
                 "--elicit-every", "25"), stdout=client)
    wire = d / f"echo-{prompts}.wire.jsonl"
    got = subprocess.run(tool("tee", "--script", str(client), "-o", str(wire), "--clock",
                              "epoch", "--no-host", "--", *tool("echo-agent")),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env())
    if got.returncode != 0:
        raise RuntimeError("acp-tee --script failed")
    frames = sum(1 for line in wire.read_bytes().splitlines() if b'"dir"' in line)
    return {"client": client, "wire": wire, "frames": frames, "prompts": prompts}


def _a2c(log: Path) -> list[str]:
    return [r["raw"] for r in map(orjson.loads, log.read_bytes().splitlines()[1:])
            if r.get("dir") == "a2c"]


#: ``acp-replay`` of the package in the directory ``sys.argv[1]``
LAUNCH = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
          "from acp_pipes.cli.replay import main; main()")


def main(quick: bool) -> str:
    d = workdir("redrive")
    prompts = 50 if quick else 1000
    repeat = 1 if quick else 7
    case = prepare(prompts, d)
    wire, log = str(case["wire"]), d / "rerun.wire.jsonl"
    agent = tool("echo-agent")
    subjects = {
        "agent": lambda: run_cmd(agent, stdin=case["client"]),
        "lockstep": lambda: run_cmd([sys.executable, "-c", LOCKSTEP, wire, "--", *agent]),
        "redrive": lambda: run_cmd(tool("replay", "--client", wire, "-o", str(log), "--",
                                        *agent)),
    }
    baseline = os.environ.get("ACP_PIPES_BENCH_BASELINE")
    labels = [("the agent alone, client piped at once", "agent"),
              ("the agent, turn by turn (a bare pacing client)", "lockstep"),
              ("acp-replay --client (re-drive)", "redrive")]
    if baseline:
        for name, where in (("this", str(REPO)), ("baseline", baseline)):
            subjects[name] = (lambda where=where: run_cmd(
                [sys.executable, "-c", LAUNCH, where, "--client", wire, "-o", str(log),
                 "--", *agent]))
        labels += [("acp-replay --client, this checkout (python -c)", "this"),
                   (f"acp-replay --client, baseline {baseline} (python -c)", "baseline")]
    load = os.getloadavg()[0]
    runs = side_by_side(subjects, repeat=repeat)
    load = (load + os.getloadavg()[0]) / 2  # the host's, before and after: read ratios
    # a fast wrong re-drive is no result: it must pass, with the recorded agent bytes
    check = subprocess.run(tool("replay", "--client", wire, "-o", str(log), "--", *agent),
                           stdin=subprocess.DEVNULL, capture_output=True, env=env())
    if check.returncode != 0 or _a2c(log) != _a2c(case["wire"]):
        raise RuntimeError(f"the re-drive did not pass: {check.stderr[-500:]!r}")
    base, base_cpu = median_wall(runs["agent"]), median_cpu(runs["agent"])
    step, step_cpu = median_wall(runs["lockstep"]), median_cpu(runs["lockstep"])
    rows = []
    for label, name in labels:
        wall, cpu = median_wall(runs[name]), median_cpu(runs[name])
        rows.append([label, f"{wall:.3f}", f"{wall / base:.2f}", f"{wall / step:.2f}",
                     f"{cpu:.3f}", f"{cpu / base_cpu:.2f}", f"{cpu / step_cpu:.2f}"])
    versus = ""
    if baseline:
        ratios = [a.wall / b.wall for a, b in zip(runs["this"], runs["baseline"], strict=True)]
        cpus = [a.cpu / b.cpu for a, b in zip(runs["this"], runs["baseline"], strict=True)]
        versus = (f"\nThis checkout against the baseline, run by run (pairs of the same "
                  f"round): wall {statistics.median(ratios):.2f}x (median of the ratios; "
                  f"{min(ratios):.2f}-{max(ratios):.2f}), CPU {statistics.median(cpus):.2f}x "
                  f"({min(cpus):.2f}-{max(cpus):.2f}).\n")
    return (f"## acp-replay --client, re-driving the echo agent: `python -m bench redrive`\n\n"
            f"{case['prompts']} prompts, {case['frames']:,} frames; medians of {repeat} "
            f"interleaved runs; CPU: user + system of the process tree; host load average "
            f"~{load:.1f} on {os.cpu_count()} cores.\n\n") + table(
        ["run", "median s", "vs agent alone", "vs turn by turn", "CPU s",
         "CPU vs agent alone", "CPU vs turn by turn"], rows) + "\n" + versus


if __name__ == "__main__":
    print(main("--quick" in sys.argv))

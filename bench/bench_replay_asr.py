"""acp-replay on an ASR stream, through the CLI, beside a bare parse loop.

The stream: >= 100,000 records of echo-like turns (user message, thought, agent message,
tool call + result with a file change, plan + superseding plan, usage, states; each record
with ts and native refs, as acp-asr writes them). Baseline, same run: a bare loop that
reads the same file and parses every line with orjson.loads (what any replay must at
least do). Target: replay within 4x of parsing alone.
"""

from __future__ import annotations

import compileall
import os
import statistics
import sys
from pathlib import Path

import orjson

from bench.common import REPO, median_wall, run_cmd, side_by_side, table, tool, workdir

BASELINE = """
import sys, orjson
loads = orjson.loads
with open(sys.argv[1], "rb") as f:
    for line in f:
        loads(line)
"""


def make_stream(path: Path, turns: int) -> int:
    """A synthetic acp-pipes-shaped stream with ``turns`` turns (11 records each)."""
    out = [orjson.dumps({
        "type": "header", "asr": "1.0", "sessionId": "bench",
        "agent": {"name": "org.agent-session.acp.bench", "version": "1"},
        "workspace": {"roots": [{"id": "root0", "path": "/ws"}]},
        "producer": {"name": "acp-pipes", "version": "0.1.0", "method": "recorder",
                     "source": {"format": "acp", "formatVersion": "2.0.0-alpha.9"},
                     "lossy": ["message.author", "inference", "usage", "timestamps"]},
        "native": {"connections": [0]}})]
    n = 0

    def rec(type_, **f):
        nonlocal n
        n += 1
        out.append(orjson.dumps({"type": type_, "seq": n, "id": f"r{n}",
                                 "ts": "2025-11-24T16:00:00.000000Z", "tsSource": "recorder",
                                 **f, "native": {"ref": {"connection": 0, "frames": [n]}}}))
        return f"r{n}"

    for t in range(turns):
        rec("message", messageId=f"u{t}", role="user", origin="prompt",
            content=[{"type": "text", "text": f"please edit file {t}"}], assembly="folded")
        rec("state", state="running")
        plan = rec("plan", planId=f"p{t}", planType="items",
                   entries=[{"content": "edit", "priority": "high", "status": "pending"}])
        rec("message", messageId=f"th{t}", role="assistant",
            content=[{"type": "reasoning", "text": "thinking about it " * 3}])
        rec("message", messageId=f"a{t}", role="assistant",
            content=[{"type": "text", "text": f"Editing file {t} now."}], assembly="chunks")
        rec("tool_call", callId=f"c{t}", callIdSource="native", name="edit", kind="edit",
            title="Edit", input={"path": f"/ws/f{t}.py"},
            locations=[{"path": {"root": "root0", "path": f"f{t}.py"}}])
        rec("tool_result", callId=f"c{t}", status="completed", linkage="exact",
            displayContent=[{"type": "text", "text": "ok"}], raw={"ok": True},
            capture={"content": {"state": "absent"}})
        rec("file_change", cause={"callId": f"c{t}"},
            changes=[{"op": "modify", "path": {"root": "root0", "path": f"f{t}.py"}}],
            patch={"format": "git_patch", "text": "@@ -1 +1 @@\n-a\n+b\n"},
            precision="hunks", status="applied")
        rec("plan", planId=f"p{t}", planType="items", supersedes=plan,
            entries=[{"content": "edit", "priority": "high", "status": "completed"}])
        rec("usage_summary", scope="session", cumulative=True, includesChildren=None,
            contextWindow={"used": t, "size": 200000})
        rec("state", state="idle", stopReason="end_turn")
    path.write_bytes(b"\n".join(out) + b"\n")
    return n


def main(quick: bool) -> str:
    d = workdir("replay_asr")
    turns = 200 if quick else 9_200  # 11 records a turn: 101,200 records
    stream = d / "bench.asr.jsonl"
    records = make_stream(stream, turns)
    # as installed (pip compiles bytecode): with PYTHONDONTWRITEBYTECODE set and no
    # __pycache__, every run would recompile each acp_pipes module it imports (~17 ms a
    # run here), a cost of the checkout, not of the tool; the baseline's modules have theirs
    compileall.compile_dir(REPO / "acp_pipes", quiet=1)
    os.sync()  # the stream's write-back would otherwise land in the first timed runs
    out = d / "out.acp.jsonl"
    subjects = {
        "parse": lambda: run_cmd([sys.executable, "-c", BASELINE, str(stream)]),
        "replay": lambda: run_cmd(tool("replay", str(stream), "--report", str(d / "r.json")),
                                  stdout=out),
    }
    runs = side_by_side(subjects, repeat=1 if quick else 5)
    lines = out.read_bytes().count(b"\n")
    if lines != turns * 5 + 2:  # a fast wrong replay is no result
        raise RuntimeError(f"replay wrote {lines} notifications, expected {turns * 5 + 2}")
    base = median_wall(runs["parse"])
    wall = median_wall(runs["replay"])
    base_cpu = statistics.median(r.cpu for r in runs["parse"])
    cpu = statistics.median(r.cpu for r in runs["replay"])
    rows = [[f"{records:,}", f"{lines:,}", f"{wall:.3f}", f"{base:.3f}",
             f"{wall / base:.2f} (<= 4x)", f"{cpu:.3f}", f"{base_cpu:.3f}",
             f"{cpu / base_cpu:.2f}", f"{records / wall:,.0f}"]]
    return "## acp-replay (ASR stream)\n\n" + table(
        ["records", "notifications", "replay median s", "parse median s", "ratio",
         "replay CPU s", "parse CPU s", "CPU ratio", "records/s"], rows) + (
        "\n\nThrough the CLI (`acp-replay STREAM --report FILE`, the console script), "
        "output to a file; baseline: `orjson.loads` over the same lines in a bare Python "
        "loop (interpreter start-up in both; acp_pipes bytecode compiled beforehand, as an "
        "install does); medians of interleaved runs; CPU = user + system of the child, "
        "steadier than wall time on a shared host.\n")


if __name__ == "__main__":
    print(main("--quick" in sys.argv))

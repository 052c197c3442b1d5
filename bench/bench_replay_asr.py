"""acp-replay on an ASR stream, through the CLI, beside a bare parse loop.

The stream: >= 100,000 records of echo-like turns (user message, thought, agent message,
tool call + result with a file change, plan + superseding plan, usage, states; each record
with ts and native refs, as acp-asr writes them). Baseline, same run: a bare loop that
reads the same file and parses every line with orjson.loads (what any replay must at
least do). Target: replay within 4x of parsing alone.

``--serve``: a 10,000-record stream of the same shape served to a client over real pipes
(the console script as an editor starts it). Timed: from the start of the process to the
answer to ``initialize`` (the stream read), and from sending ``session/load`` (ACP v1)
or ``session/resume`` with ``replayFrom`` (v2) to its response, every update before it
read. Target: the load well under a second.
"""

from __future__ import annotations

import compileall
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import orjson

from bench.common import REPO, env, median_wall, run_cmd, side_by_side, table, tool, workdir

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


def _request(rid: int, method: str, params: dict) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def serve_once(stream: Path, protocol: int) -> tuple[float, float, int]:
    """One ``acp-replay --serve`` connection: (seconds from start to the initialize
    answer, seconds from the load request to its response, updates received)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(tool("replay", "--serve", str(stream)), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env())
    assert p.stdin is not None and p.stdout is not None

    def ask(rid: int, method: str, params: dict) -> int:
        p.stdin.write(_request(rid, method, params) + b"\n")
        p.stdin.flush()
        n = 0
        for line in p.stdout:
            msg = orjson.loads(line)
            if msg.get("id") == rid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return n
            n += 1
        raise RuntimeError(f"{method}: no answer")

    ask(0, "initialize", {"protocolVersion": protocol})
    started = time.perf_counter() - t0
    t1 = time.perf_counter()
    if protocol == 1:
        n = ask(1, "session/load", {"sessionId": "bench", "cwd": "/ws", "mcpServers": []})
    else:
        n = ask(1, "session/resume", {"sessionId": "bench", "cwd": "/ws",
                                      "replayFrom": {"type": "start"}})
    loaded = time.perf_counter() - t1
    p.stdin.close()
    p.wait()
    return started, loaded, n


def serve_section(d: Path, quick: bool) -> str:
    stream = d / "serve.asr.jsonl"
    records = make_stream(stream, 30 if quick else 909)  # 11 a turn: 9,999 records
    rows = []
    for protocol in (1, 2):
        runs = [serve_once(stream, protocol) for _ in range(1 if quick else 7)]
        counts = {n for _, _, n in runs}
        if len(counts) != 1 or not counts.pop():
            raise RuntimeError("--serve sent no updates, or not the same each time")
        rows.append([f"{records:,}", f"v{protocol}", f"{runs[0][2]:,}",
                     f"{statistics.median(r[0] for r in runs):.3f}",
                     f"{statistics.median(r[1] for r in runs):.3f}",
                     f"{max(r[1] for r in runs):.3f}"])
    return "### acp-replay --serve\n\n" + table(
        ["records", "client", "updates", "start to initialize answer, median s",
         "load to response, median s", "load, slowest s"], rows) + (
        "\n\nOver real pipes, the console script (`acp-replay --serve STREAM`) as an editor "
        "starts it; load = `session/load` for v1, `session/resume` with `replayFrom` for v2, "
        "timed from the request to its response with every update before it read; "
        "medians of 7 connections. Target: load well under a second.\n")


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
        "steadier than wall time on a shared host.\n\n") + serve_section(d, quick)


if __name__ == "__main__":
    print(main("--quick" in sys.argv))

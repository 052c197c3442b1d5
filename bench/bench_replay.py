"""acp-replay on traces, through the CLI: interactive replay, offline emit, and --client.

Traces: the 1000-prompt echo session and a >= 300,000-frame one (echo sessions recorded
in-process turn by turn), each as the raw wire log acp-tee writes and as frames (acp-frame
once: replay reads the frames' hashes). The client side is the recorded c2a stream fed
through a pipe at once (all frames available, which measures throughput; the replay still
matches each frame and flushes each burst).

Baseline, same run: a bare loop that reads the same file (orjson per line, raw encoded)
and writes the agent bytes; it does what any replay must at least do.

Memory: the peak RSS of each run, at both sizes; a replay reads its trace as it goes, so
it must stay flat. ``--client`` (the recorded client driving a live agent, every agent
frame compared) is run once per size for its peak RSS and wall time; the agent is
acp-replay of the same trace, as the peak RSS of a command counts its children too.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

from acp_pipes.echo.agent import echo_agent
from acp_pipes.echo.client import client_session
from bench.common import (
    max_rss,
    median_cpu,
    median_wall,
    run_cmd,
    side_by_side,
    table,
    tool,
    workdir,
)

BASELINE = """
import sys, orjson
out = sys.stdout.buffer
buf = []
with open(sys.argv[1], "rb") as f:
    next(f)
    for line in f:
        r = orjson.loads(line)
        if r["dir"] == "a2c":
            buf.append(r["raw"].encode("utf-8", "surrogatepass"))
            buf.append(b"\\n")
out.write(b"".join(buf))
"""


def record(prompts: int, path: Path) -> tuple[Path, int]:
    """A wire log of an echo session with ``prompts`` prompts, interleaved turn by turn
    (each client frame is logged, then what the agent answers to it)."""
    wire: list[bytes] = [orjson.dumps({
        "format": "acp-pipes/wire", "version": 1, "recorder": "bench", "argv": [],
        "started": "1970-01-01T00:00:00.000000Z", "clock": "epoch", "env": {}})]

    def log(direction: str, raw: bytes) -> None:
        wire.append(orjson.dumps({"seq": len(wire) - 1, "t": 0, "dir": direction,
                                  "raw": raw.decode()}))

    def fed():
        for line in client_session(prompts, permission_every=10, elicit_every=25):
            log("c2a", line)
            yield line

    for frame in echo_agent(fed()):
        log("a2c", frame)
    path.write_bytes(b"\n".join(wire) + b"\n")
    return path, len(wire) - 1


def prepare(name: str, prompts: int, d: Path) -> dict:
    wire, n = record(prompts, d / f"{name}.wire.jsonl")
    frames = d / f"{name}.frames.jsonl"
    run_cmd(tool("frame", str(wire)), stdout=frames)
    client = d / f"{name}.client.jsonl"
    run_cmd(tool("replay", "--emit", "c2a", str(wire)), stdout=client)
    expected = d / f"{name}.agent.jsonl"
    run_cmd(tool("replay", "--emit", "a2c", str(frames)), stdout=expected)
    return {"name": name, "wire": wire, "frames": frames, "client": client,
            "expected": expected, "n": n}


def measure(case: dict, d: Path, repeat: int) -> tuple[list[list[object]], dict]:
    out = d / f"{case['name']}.out"
    wire, frames = str(case["wire"]), str(case["frames"])
    subjects = {
        "baseline": lambda: run_cmd([sys.executable, "-c", BASELINE, wire], stdout=out),
        "replay wire": lambda: run_cmd(tool("replay", wire), stdin=case["client"],
                                       stdout=out),
        "replay frames": lambda: run_cmd(tool("replay", frames), stdin=case["client"],
                                         stdout=out),
        "emit": lambda: run_cmd(tool("replay", "--emit", "a2c", wire), stdout=out),
    }
    runs = side_by_side(subjects, repeat=repeat)
    # each subject's output is checked once more: a fast wrong replay is no result
    for name, fn in subjects.items():
        fn()
        if out.read_bytes() != case["expected"].read_bytes():
            raise RuntimeError(f"{case['name']}: {name}: output differs from the recording")
    base = median_wall(runs["baseline"])
    base_cpu = median_cpu(runs["baseline"])
    rows = []
    for label, target, limit in (("replay, raw wire log", "replay wire", "3x"),
                                 ("replay, frames", "replay frames", "3x"),
                                 ("--emit a2c, raw wire log", "emit", "2x"),
                                 ("baseline", "baseline", "")):
        wall = median_wall(runs[target])
        cpu = median_cpu(runs[target])
        ratio = f"{wall / base:.2f}" + (f" (<= {limit})" if limit else "")
        rows.append([case["name"], f"{case['n']:,}", label, f"{wall:.3f}", ratio,
                     f"{cpu / base_cpu:.2f}", f"{case['n'] / wall:,.0f}",
                     f"{max_rss(runs[target]):.0f}"])
    # the agent driven is acp-replay of the same trace: a peak RSS counts the waited-for
    # children too, and acp-echo-agent keeps every session's history (for resume)
    client = run_cmd(tool("replay", "--client", wire, "--", *tool("replay", wire)),
                     stdout=d / f"{case['name']}.rerun.jsonl")
    mem = {"client": client, "replay": max_rss(runs["replay wire"]),
           "log_mb": case["wire"].stat().st_size / 2**20}
    return rows, mem


def main(quick: bool) -> str:
    d = workdir("replay")
    sizes = [("echo-1000", 1000), ("echo-300k", 21_500)] if not quick else [("echo-50", 50)]
    repeat = 1 if quick else 5
    rows = []
    mems = []
    for name, prompts in sizes:
        case = prepare(name, prompts, d)
        r, mem = measure(case, d, repeat)
        rows += r
        mems.append([name, f"{case['n']:,}", f"{mem['log_mb']:.1f}", f"{mem['replay']:.0f}",
                     f"{mem['client'].peak_rss_mb:.0f}", f"{mem['client'].wall:.1f}"])
    return "## acp-replay on a trace: `python -m bench replay`\n\n" + table(
        ["trace", "frames", "run", "median s", "vs baseline (wall)", "vs baseline (CPU)",
         "frames/s", "peak RSS MB"], rows) + (
        "\n\nThrough the CLI (the `acp-replay` console script), client frames piped in at "
        "once; baseline: a bare loop reading the same wire log and writing the agent bytes; "
        "medians of interleaved runs.\n\n") + table(
        ["trace", "frames", "wire log MB", "replay peak RSS MB", "--client peak RSS MB",
         "--client s"], mems) + (
        "\n\nMemory at two sizes: the replay as the agent (its largest run above) and "
        "`acp-replay --client TRACE -- acp-replay TRACE`, every agent frame compared, one "
        "run (the peak of both processes).\n")


if __name__ == "__main__":
    print(main("--quick" in sys.argv))

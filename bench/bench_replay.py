"""acp-replay on traces, through the CLI: interactive replay and offline emit.

Traces: the 1000-prompt echo session and a >= 300,000-frame one (echo sessions recorded
in-process turn by turn, framed by acp-frame once: replay reads the frames' hashes). The
client side is the recorded c2a stream fed through a pipe at once (all frames available,
which measures throughput; the replay still matches each frame and flushes each burst).

Baseline, same run: a bare loop that reads the same frames file (orjson per line, raw
decoded) and writes the agent bytes; it does what any replay must at least do.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

from acp_pipes.echo_agent import echo_agent
from acp_pipes.echo_client import client_session
from bench.common import median_wall, run_cmd, side_by_side, table, tool, workdir

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
    run_cmd(tool("replay", "--emit", "c2a", str(frames)), stdout=client)
    expected = d / f"{name}.agent.jsonl"
    run_cmd(tool("replay", "--emit", "a2c", str(frames)), stdout=expected)
    return {"name": name, "frames": frames, "client": client, "expected": expected, "n": n}


def measure(case: dict, d: Path, repeat: int) -> list[list[object]]:
    out = d / f"{case['name']}.out"
    subjects = {
        "baseline": lambda: run_cmd([sys.executable, "-c", BASELINE, str(case["frames"])],
                                    stdout=out),
        "replay": lambda: run_cmd(tool("replay", str(case["frames"])), stdin=case["client"],
                                  stdout=out),
        "emit": lambda: run_cmd(tool("replay", "--emit", "a2c", str(case["frames"])),
                                stdout=out),
    }
    runs = side_by_side(subjects, repeat=repeat)
    # the last run's output is checked: a fast wrong replay is no result
    if out.read_bytes() != case["expected"].read_bytes():
        raise RuntimeError(f"{case['name']}: replay output differs from the recording")
    run_cmd(tool("replay", str(case["frames"])), stdin=case["client"], stdout=out)
    if out.read_bytes() != case["expected"].read_bytes():
        raise RuntimeError(f"{case['name']}: replay output differs from the recording")
    base = median_wall(runs["baseline"])
    rows = []
    for name, target in (("replay (interactive)", "replay"), ("--emit a2c", "emit")):
        wall = median_wall(runs[target])
        limit = "3x" if target == "replay" else "2x"
        rows.append([case["name"], f"{case['n']:,}", name, f"{wall:.3f}", f"{base:.3f}",
                     f"{wall / base:.2f} (<= {limit})", f"{case['n'] / wall:,.0f}"])
    return rows


def main(quick: bool) -> str:
    d = workdir("replay")
    sizes = [("echo-1000", 1000), ("echo-300k", 21_500)] if not quick else [("echo-50", 50)]
    repeat = 1 if quick else 5
    rows = []
    for name, prompts in sizes:
        rows += measure(prepare(name, prompts, d), d, repeat)
    return "## acp-replay (trace)\n\n" + table(
        ["trace", "frames", "run", "median s", "baseline s", "ratio", "frames/s"], rows) + (
        "\n\nThrough the CLI (the `acp-replay` console script), frames trace, client "
        "frames piped in at once; baseline: a bare loop reading the same frames file and "
        "writing the agent bytes; medians of interleaved runs.\n")


if __name__ == "__main__":
    print(main("--quick" in sys.argv))

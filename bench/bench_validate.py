"""acp-frame --validate over large recordings, against framing alone in the same run.

The subject is the real CLI, `acp-frame --validate LOG`, as CI runs it; two baselines
in the same run: a bare orjson loop (a fresh Python parsing each wire line and the frame
it holds, the least any checker of the log does), and `acp-frame LOG` (frame records
written to /dev/null), which --validate does first: the difference is what checking
costs. Two valid recordings: the echo agent's session shape
(ACP v2: prompts answered at once, streamed chunks, tool calls, plans, permission
requests; one connection, one session) and a v1 session of the shape the official Python
SDK writes (chunks, tool calls, permission requests and file reads, prompts answered at
the end of their turn). Both deterministic, written once and reused.

For scale, the same checks done with the reference `jsonschema` package (the per-method
definitions, as tests/acp_schema.py does) on the first frames of the log.
"""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import orjson

from bench.common import (
    max_rss,
    median_cpu,
    median_wall,
    run_cmd,
    run_fn,
    side_by_side,
    table,
    tool,
    workdir,
)

#: frames per second --validate must reach, start-up and all.
TARGET = 20_000

#: The bare loop: each wire line parsed, and the frame it holds.
BARE = """\
import sys, orjson
loads = orjson.loads
for line in open(sys.argv[1], "rb"):
    raw = loads(line).get("raw")
    if raw is not None:
        loads(raw)
"""
T0 = 1764522928000000000


def _write(path: Path, frames) -> Path:
    from acp_pipes.io.wire import frame_record, header

    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as out:
        hdr = header(["agent"], started_ns=T0, clock="epoch", host=False)
        out.write(orjson.dumps(hdr) + b"\n")
        for seq, (d, raw) in enumerate(frames):
            out.write(orjson.dumps(frame_record(seq, T0 + seq * 250_000, d, raw)) + b"\n")
    tmp.replace(path)
    return path


def v2_log(frames: int) -> Path:
    """One echo agent session of ``frames`` frames (cut there; the end of the cut turn
    is unanswered, so the log ends on its last full turn)."""
    from acp_pipes.echo.agent import EchoAgent
    from acp_pipes.echo.client import client_session

    path = workdir("validate") / f"v2-{frames}.jsonl"
    if path.exists():
        return path
    agent = EchoAgent()
    out: list[tuple[str, bytes]] = []
    turn_start = 0
    for line in client_session(frames // 10, permission_every=4):
        msg = orjson.loads(line)
        if msg.get("method") == "session/prompt":
            turn_start = len(out)
        out.append(("c2a", line))
        out.extend(("a2c", f) for f in agent.feed(line))
        if len(out) >= frames:
            out = out[:turn_start]
            break
    return _write(path, out)


def v1_log(frames: int) -> Path:
    """A v1 session as the Python SDK writes one: every turn streams chunks and a tool
    call, every second one asks permission and reads a file through the client."""
    path = workdir("validate") / f"v1-{frames}.jsonl"
    if path.exists():
        return path

    def m(**kw) -> bytes:
        return orjson.dumps({"jsonrpc": "2.0", **kw})

    sid = "v1-sess-1"

    def update(u: dict) -> tuple[str, bytes]:
        return ("a2c", m(method="session/update", params={"sessionId": sid, "update": u}))

    out = [
        ("c2a", m(id=0, method="initialize", params={
            "protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}},
            "clientInfo": {"name": "bench", "version": "1"}})),
        ("a2c", m(id=0, result={"protocolVersion": 1, "agentCapabilities": {},
                                "authMethods": []})),
        ("c2a", m(id=1, method="session/new", params={"cwd": "/tmp", "mcpServers": []})),
        ("a2c", m(id=1, result={"sessionId": sid})),
    ]
    asked = itertools.count()
    for turn in itertools.count(1):
        if len(out) >= frames:
            break
        call = f"call-{turn}"
        out.append(("c2a", m(id=turn + 1, method="session/prompt", params={
            "sessionId": sid, "prompt": [{"type": "text", "text": f"hello {turn}"}]})))
        for text in ("Echo:", f" hello {turn}", " and more"):
            out.append(update({"sessionUpdate": "agent_message_chunk",
                               "content": {"type": "text", "text": text}}))
        out.append(update({"sessionUpdate": "tool_call", "toolCallId": call,
                           "title": "Read the notes", "kind": "read", "status": "pending"}))
        if turn % 2 == 0:
            p, r = next(asked), next(asked)
            out.append(("a2c", m(id=p, method="session/request_permission", params={
                "sessionId": sid, "toolCall": {"toolCallId": call},
                "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}]})))
            out.append(("c2a", m(id=p, result={"outcome": {"outcome": "selected",
                                                            "optionId": "allow"}})))
            out.append(("a2c", m(id=r, method="fs/read_text_file", params={
                "sessionId": sid, "path": "/tmp/notes.txt"})))
            out.append(("c2a", m(id=r, result={"content": "remember the milk\n"})))
        out.append(update({"sessionUpdate": "tool_call_update", "toolCallId": call,
                           "status": "completed"}))
        out.append(("a2c", m(id=turn + 1, result={"stopReason": "end_turn"})))
    return _write(path, out)


def bad_log(frames: int, blocks: int) -> Path:
    """A v2 session whose ``frames`` prompts each hold ``blocks`` bad content blocks
    (``{"type": "text"}``, no text): each frame fails the schema ``blocks`` times."""
    path = workdir("validate") / f"bad-{frames}x{blocks}.jsonl"
    if path.exists():
        return path

    def m(**kw) -> bytes:
        return orjson.dumps({"jsonrpc": "2.0", **kw})

    out = [
        ("c2a", m(id=0, method="initialize", params={
            "protocolVersion": 2, "info": {"name": "bench", "version": "1"},
            "capabilities": {}})),
        ("a2c", m(id=0, result={"protocolVersion": 2, "info": {"name": "a", "version": "1"},
                                "capabilities": {"session": {}}})),
        ("c2a", m(id=1, method="session/new", params={"cwd": "/tmp", "mcpServers": []})),
        ("a2c", m(id=1, result={"sessionId": "s1"})),
    ]
    prompt = [{"type": "text"}] * blocks
    for i in range(frames):
        out.append(("c2a", m(id=2 + i, method="session/prompt",
                             params={"sessionId": "s1", "prompt": prompt})))
        out.append(("a2c", m(id=2 + i, result={"stopReason": "end_turn"})))
    return _write(path, out)


def breakdown(log: Path, repeat: int) -> tuple[dict[str, float], int]:
    """Where a frame's time goes, in-process, median seconds; and the frame count."""
    from acp_pipes.frame.core import read_frames
    from acp_pipes.frame.validate import reports

    frames = list(read_frames(log, headers=True))
    n = len(frames) - 1

    def parse() -> None:
        loads = orjson.loads
        for f in frames[1:]:
            loads(f["raw"])

    def check() -> None:
        for _ in reports(frames):
            pass

    def framing() -> None:
        for _ in read_frames(log, headers=True):
            pass

    runs = side_by_side({
        "read_frames (framing, in memory)": lambda: run_fn(framing),
        "orjson.loads of every frame": lambda: run_fn(parse),
        "the checks (frame.validate.reports over framed records)": lambda: run_fn(check),
    }, repeat=repeat)
    return {name: median_wall(r) for name, r in runs.items()}, n


def reference_rate(log: Path, count: int) -> float:
    """Frames/s of the same per-method schema checks done by the reference `jsonschema`
    package (the test suite's checker), on the first ``count`` frames."""
    import jsonschema

    from acp_pipes.frame.core import read_frames
    from acp_pipes.frame.validate.schema import schema

    s = schema("v2.0.0-alpha.9" if "v2" in log.name else "v1", True)
    validators: dict[str, jsonschema.Draft202012Validator] = {}
    sides = {"c2a": "agent", "a2c": "client"}
    work = []
    for f in itertools.islice(read_frames(log), count):
        msg = orjson.loads(f["raw"])
        kind = {"request": "Request", "notification": "Notification"}.get(f["kind"])
        if kind:
            name, value = s.definition(f["method"], sides[f["dir"]], kind), msg.get("params")
        else:
            side = sides["a2c" if f["dir"] == "c2a" else "c2a"]
            name, value = s.definition(f["method"], side, "Response"), msg.get("result")
        work.append((name, value))
    t0 = time.perf_counter()
    for name, value in work:
        v = validators.get(name)
        if v is None:
            v = validators[name] = jsonschema.Draft202012Validator(
                {"$defs": s.defs, "$ref": f"#/$defs/{name}"})
        v.is_valid(value)
    return len(work) / (time.perf_counter() - t0)


def main(quick: bool) -> str:
    n = 5_000 if quick else 100_000
    repeat = 1 if quick else 5
    logs = {"v2 (echo agent)": v2_log(n), "v1 (SDK-shaped)": v1_log(n)}
    rows = []
    verdicts = []
    for label, log in logs.items():
        frames = sum(1 for _ in open(log, "rb")) - 1
        check = run_cmd(tool("frame", "--validate", str(log)))
        assert check.wall > 0
        runs = side_by_side({
            "validate": lambda log=log: run_cmd(tool("frame", "--validate", str(log))),
            "frame": lambda log=log: run_cmd(tool("frame", str(log))),
            "bare": lambda log=log: run_cmd([sys.executable, "-c", BARE, str(log)]),
        }, repeat=repeat)
        v, f, b = (median_wall(runs[k]) for k in ("validate", "frame", "bare"))
        vc, fc, bc = (median_cpu(runs[k]) for k in ("validate", "frame", "bare"))
        rate = frames / v
        verdicts.append(rate >= TARGET)
        rows.append([label, f"{frames:,}", f"{v:.3f} s", f"{b:.3f} s", f"{v / b:.2f}x",
                     f"{f:.3f} s", f"{vc:.3f} s", f"{bc:.3f} s", f"{fc:.3f} s",
                     f"{rate:,.0f} frames/s", f"{frames / b:,.0f} frames/s",
                     f"{frames / (v - f):,.0f} frames/s" if v > f else "-",
                     f"{max_rss(runs['validate']):.1f} MB"])
    bad_frames, bad_blocks = (2, 2_000) if quick else (20, 20_000)
    bad = bad_log(bad_frames, bad_blocks)
    bad_runs = [run_cmd(tool("frame", "--validate", str(bad))) for _ in range(repeat)]
    bad_mb = bad.stat().st_size / 1e6
    parts, count = breakdown(logs["v2 (echo agent)"], repeat)
    split = table(["in-process, v2 log", "median", "per frame"], [
        [name, f"{sec:.3f} s", f"{sec / count * 1e6:.2f} us"] for name, sec in parts.items()])
    sample = 500 if quick else 2_000
    ref = {label: reference_rate(log, sample) for label, log in logs.items()}
    verdict = "met" if all(verdicts) else "missed"
    if quick:
        verdict = "no verdict on a quick run"
    return "\n".join([
        "## acp-frame --validate: check a recording against the ACP spec",
        "",
        f"Median of {repeat} interleaved runs, each a fresh process: `acp-frame --validate "
        "LOG`, the bare orjson loop (`python -c BARE LOG`: each wire line and the frame it "
        "holds parsed, nothing else) and `acp-frame LOG > /dev/null` (framing alone, which "
        "--validate does first); throughput counts start-up and compiling the schemas.",
        "",
        table(["recording", "frames", "--validate wall", "bare loop wall", "ratio",
               "framing wall", "--validate CPU", "bare loop CPU", "framing CPU",
               "--validate throughput", "bare loop throughput", "the checks alone",
               "--validate peak RSS"], rows),
        "",
        f"Target: at least {TARGET:,} frames/s: {verdict}.",
        "",
        f"A recording of {bad_frames} prompts of {bad_blocks:,} bad content blocks each "
        f"({bad_mb:.1f} MB; each frame fails the schema {bad_blocks:,} times, 20 reported): "
        f"--validate wall {median_wall(bad_runs):.3f} s, CPU {median_cpu(bad_runs):.3f} s, "
        f"peak RSS {max_rss(bad_runs):.1f} MB (median of {repeat}).",
        "",
        "Where the time goes (in-process, the v2 log already read; the checks include "
        "their own parse of each frame):",
        "",
        split,
        "",
        f"For scale: the same per-method checks with the reference `jsonschema` package "
        f"(compiled once per definition) on the first {sample:,} frames: "
        + ", ".join(f"{label} {rate:,.0f} frames/s" for label, rate in ref.items()) + ".",
    ])


if __name__ == "__main__":
    print(main("--quick" in sys.argv))

"""acp-align on big traces: exact LCS at 1M steps beside framing the same inputs.

Inputs are synthetic but real-shaped wire logs: the echo agent (in-process, deterministic)
answering a scripted client, written as wire records; B is A with scattered edits
(a third each: a frame deleted, a new frame inserted, a frame replaced by a changed one).
Inserted and changed frames are new content, so the exact LCS length is known:
N - deletions - replacements; the bench checks acp-align finds exactly that.

Subjects, same run, interleaved (bench.common.side_by_side):
- ``acp-align A B --format json`` through the CLI (frames and hashes both inputs itself);
- baseline ``acp-frame A`` plus ``acp-frame B`` (the framing alone, both inputs);
- the LCS alone, in-process, beside ``difflib.SequenceMatcher(autojunk=False)`` on the
  same step keys (difflib on 1M steps runs under a time cap and is reported as such).
"""

from __future__ import annotations

import difflib
import random
import subprocess
import sys
import time
from pathlib import Path

import orjson

from bench.common import Run, env, max_rss, median_wall, run_cmd, side_by_side, table, tool, workdir


def _trace(steps: int) -> list[bytes]:
    """Wire records (JSON lines without LF) of echo-agent sessions, ``steps`` frames."""
    from acp_pipes.echo_agent import EchoAgent
    from acp_pipes.echo_client import client_session
    from acp_pipes.wire import frame_record

    out: list[bytes] = []
    dumps = orjson.dumps
    session = 0
    while len(out) < steps:
        session += 1
        agent = EchoAgent()
        for line in client_session(200, text=f"run {session} prompt"):
            out.append(dumps(frame_record(0, 0, "c2a", line)))
            for frame in agent.feed(line):
                out.append(dumps(frame_record(0, 0, "a2c", frame)))
    return out[:steps]


def _edit(records: list[bytes], edits: int, seed: int) -> tuple[list[bytes], int]:
    """B = A with ``edits`` scattered edits; returns B and the exact LCS length."""
    from acp_pipes.wire import frame_record

    rng = random.Random(seed)
    b = list(records)
    lost = 0
    for k, pos in enumerate(sorted(rng.sample(range(len(records)), edits), reverse=True)):
        op = k % 3
        new = orjson.dumps(frame_record(0, 0, "a2c", orjson.dumps(
            {"jsonrpc": "2.0", "method": "session/update",
             "params": {"sessionId": "sess-1", "update": {
                 "sessionUpdate": "agent_message_chunk", "messageId": f"edit-{seed}-{k}",
                 "content": {"type": "text", "text": f"edited {k}"}}}})))
        if op == 0:
            del b[pos]
            lost += 1
        elif op == 1:
            b.insert(pos, new)
        else:
            b[pos] = new
            lost += 1
    return b, len(records) - lost


def _write(path: Path, records: list[bytes]) -> None:
    from acp_pipes.wire import header

    with open(path, "wb") as f:
        f.write(orjson.dumps(header(["acp-echo-agent"], started_ns=0, clock="epoch",
                                    host=False)) + b"\n")
        for seq, rec in enumerate(records):
            # renumber seq in place: records start with {"seq":0,
            f.write(b'{"seq":' + str(seq).encode() + rec[8:] + b"\n")


def _keys(path: Path) -> list[str]:
    """Step keys as acp-align sees them (dir + canonical hash), for the in-process runs."""
    from acp_pipes.frame import read_frames

    return [f["dir"] + f["hash"] for f in read_frames(path)]


def _child(fn: str, *args: object, timeout: float | None = None) -> dict:
    """Run ``fn(*args)`` of this module in a child process (so the parent stays small and
    the children's peak RSS is their own); its result is JSON on stdout."""
    code = (f"import orjson,sys; from bench.bench_align import {fn}; "
            f"sys.stdout.buffer.write(orjson.dumps({fn}(*{list(args)!r})))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=timeout,
                       env=env(), check=True)
    return orjson.loads(p.stdout)


def prepare(steps: int, edits: int, d: str) -> dict:
    a = _trace(steps)
    b, lcs = _edit(a, edits, seed=steps + edits)
    _write(Path(d) / f"a{steps}.jsonl", a)
    _write(Path(d) / f"b{steps}.jsonl", b)
    return {"lcs": lcs}


def lcs_alone(steps: int, d: str) -> dict:
    """The Myers step alone, in process, on the step keys of both inputs."""
    from acp_pipes.align.myers import align

    ka, kb = _keys(Path(d) / f"a{steps}.jsonl"), _keys(Path(d) / f"b{steps}.jsonl")
    ids: dict[str, int] = {}
    t = time.perf_counter()
    ia = [ids.setdefault(k, len(ids)) for k in ka]
    ib = [ids.setdefault(k, len(ids)) for k in kb]
    al = align(ia, ib)
    return {"seconds": time.perf_counter() - t, "lcs": al.lcs}


def difflib_alone(steps: int, d: str) -> dict:
    ka, kb = _keys(Path(d) / f"a{steps}.jsonl"), _keys(Path(d) / f"b{steps}.jsonl")
    t = time.perf_counter()
    sm = difflib.SequenceMatcher(None, ka, kb, autojunk=False)
    lcs = sum(m.size for m in sm.get_matching_blocks())
    return {"seconds": time.perf_counter() - t, "lcs": lcs}


def _case(steps: int, edits: int, repeat: int, d: Path, difflib_cap: float | None):
    lcs = _child("prepare", steps, edits, str(d))["lcs"]
    pa, pb = d / f"a{steps}.jsonl", d / f"b{steps}.jsonl"
    out_json = d / f"align{steps}.json"

    def align_cli() -> Run:
        return run_cmd(tool("align", str(pa), str(pb), "--format", "json"), stdout=out_json)

    def frame_both() -> Run:
        r1 = run_cmd(tool("frame", str(pa)))
        r2 = run_cmd(tool("frame", str(pb)))
        return Run(r1.wall + r2.wall, max(r1.peak_rss_mb, r2.peak_rss_mb))

    runs = side_by_side({"align": align_cli, "frame": frame_both}, repeat=repeat)
    got = orjson.loads(out_json.read_bytes())
    alone = _child("lcs_alone", steps, str(d))
    exact = got["lcs"] == lcs and not got["approximate"] and alone["lcs"] == lcs
    try:
        dl = _child("difflib_alone", steps, str(d), timeout=difflib_cap)
        t_diff = f"{dl['seconds']:.2f} s (LCS {dl['lcs']:,})"
    except subprocess.TimeoutExpired:
        t_diff = f"> {difflib_cap:.0f} s incl. reading (stopped at the cap)"
    return runs, exact, lcs, got, alone["seconds"], t_diff


def main(quick: bool) -> str:
    d = workdir("align")
    cases = [(20_000, 20, 1, None), (5_000, 250, 1, None)] if quick else [
        (1_000_000, 100, 3, 120.0), (100_000, 5_000, 3, None)]
    rows = []
    notes = []
    for steps, edits, repeat, cap in cases:
        runs, exact, lcs, got, t_lcs, t_diff = _case(steps, edits, repeat, d, cap)
        ma, mf = median_wall(runs["align"]), median_wall(runs["frame"])
        rows.append([f"{steps:,} steps, {edits:,} edits", f"{ma:.2f} s", f"{mf:.2f} s",
                     f"{ma / mf:.2f}x", f"{max_rss(runs['align']):.0f} MB",
                     f"{max_rss(runs['frame']):.0f} MB",
                     f"{got['lcs']:,} / {lcs:,} {'exact' if exact else 'NOT EXACT'}",
                     f"{t_lcs:.2f} s", t_diff])
    notes.append("align: `acp-align A B --format json` (CLI; frames, hashes and aligns "
                 "both inputs). frame: `acp-frame A` + `acp-frame B` (CLI, same run). "
                 f"Median of {cases[0][2]} interleaved runs; RSS = peak of the process. "
                 "LCS alone: the Myers step in process, on the same step keys as difflib. "
                 "difflib and the LCS alone run in child processes on the same step keys; "
                 "difflib on the 1M case under a time cap (reading the inputs included).")
    return "## acp-align\n\n" + table(
        ["case", "align (CLI)", "frame A + B (CLI)", "ratio", "align peak RSS",
         "frame peak RSS", "LCS found / exact", "LCS alone", "difflib.SequenceMatcher"],
        rows) + "\n\n" + "\n".join(notes)

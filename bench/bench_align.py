"""acp-align: exact at 1M steps, fast on frames, order-blind where the protocol is, bounded SVG.

Inputs are real-shaped: the echo agent answering a scripted client.

- **The piped pair**: a 1000-prompt session recorded through acp-tee with the client
  script piped in whole (``acp-tee -o A -- acp-echo-agent < client.jsonl``), so how the
  two directions interleave in the log is up to the scheduler; recorded twice (A, A')
  and once with prompt 500 changed (B). ``acp-align A B`` and ``acp-align A A'`` through
  the CLI, beside the same commands of acp-align as it was before the comparison over
  the protocol's order (commit :data:`BEFORE`, run from a ``git archive`` of it).
- **Frames**: two 200,000-step frames streams (``acp-frame`` of synthetic wire logs, B
  with scattered edits) aligned, beside a bare loop that parses both files with orjson
  (the floor for anything that reads them), and before.
- **Wire logs at scale**: 1,000,000 steps with 100 edits and 100,000 with 5,000, beside
  ``acp-frame`` of both inputs and ``difflib.SequenceMatcher(autojunk=False)``; B's
  inserted and changed frames are new content, so the exact LCS is known and checked.
- **SVG**: ``--format svg`` of 20,000- and 100,000-step pairs with many scattered edits,
  after and before (before under a time cap).

Every subject is a whole process as a user starts it; subjects of one case run
interleaved (bench.common.side_by_side); medians; RSS is the peak of the process.

``BENCH_CASES=frames,svg`` runs some of the cases (piped, frames, wire, svg; default
all); ``BENCH_REPEAT=N`` runs the frames case N times (default 5).
``BENCH_BASELINE=<checkout>`` runs that checkout's acp-align (its ``acp_pipes`` first
on ``sys.path``) beside this one in the frames case, and checks their outputs are the
same bytes: the before and after of one change, in one run.
"""

from __future__ import annotations

import difflib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench.common import (
    REPO,
    Run,
    env,
    max_rss,
    median_cpu,
    median_wall,
    run_cmd,
    side_by_side,
    table,
    tool,
    workdir,
)

#: acp-align before it compared over the protocol's order, trusted frames streams and
#: bounded its drawing: the "before" of every case.
BEFORE = "d6ca992"


def _trace(steps: int) -> list[bytes]:
    """Wire records (JSON lines without LF) of echo-agent sessions, ``steps`` frames."""
    from acp_pipes.echo.agent import EchoAgent
    from acp_pipes.echo.client import client_session
    from acp_pipes.io.wire import frame_record

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
    from acp_pipes.io.wire import frame_record

    rng = random.Random(seed)
    b = list(records)
    lost = 0
    # Edits fall on the agent's updates only: deleting or replacing a request would also
    # make its response one that answers no request seen (a step of its own, by design),
    # and the LCS known here would be off by those.
    updates = [i for i, rec in enumerate(records) if b'session/update' in rec]
    for k, pos in enumerate(sorted(rng.sample(updates, edits), reverse=True)):
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
    from acp_pipes.io.wire import header

    with open(path, "wb") as f:
        f.write(orjson.dumps(header(["acp-echo-agent"], started_ns=0, clock="epoch",
                                    host=False)) + b"\n")
        for seq, rec in enumerate(records):
            # renumber seq in place: records start with {"seq":0,
            f.write(b'{"seq":' + str(seq).encode() + rec[8:] + b"\n")


def _keys(path: Path) -> list[str]:
    """Step keys as acp-align sees them (dir + canonical hash), for the in-process runs."""
    from acp_pipes.frame.core import read_frames

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


def frames_floor(steps: int, d: str, repeat: int) -> dict:
    """Where acp-align's time on two frames streams goes, in process (CPU seconds,
    minimum of ``repeat``): parsing every line; parsing and making each record a step
    the least way there is (its direction and hash one dict key, the step id appended:
    the per-line work no reader of these files can skip); acp-align's reading of both
    (:func:`acp_pipes.align.steps.load_steps`); the comparison and its JSON summary."""
    from acp_pipes.align import render
    from acp_pipes.align.compare import compare
    from acp_pipes.align.steps import StepTable, load_steps
    from acp_pipes.io.lines import dumps

    files = [str(Path(d) / f"{x}{steps}.frames.jsonl") for x in "ab"]
    loads = orjson.loads

    def parse() -> None:
        for p in files:
            with open(p, "rb") as f:
                for line in f:
                    loads(line)

    def step_each() -> None:
        ids: dict[str, int] = {}
        seq: list[int] = []
        push = seq.append
        for p in files:
            with open(p, "rb") as f:
                for line in f:
                    rec = loads(line)
                    key = rec.get("dir", "") + (rec.get("hash") or "")
                    step = ids.get(key)
                    if step is None:
                        step = ids[key] = len(ids)
                    push(step)

    got: dict[str, list[float]] = {"parse": [], "step": [], "load": [], "compare": []}
    for _ in range(repeat):
        for name, fn in (("parse", parse), ("step", step_each)):
            t = time.process_time()
            fn()
            got[name].append(time.process_time() - t)
        t = time.process_time()
        table = StepTable()
        a, b = (load_steps(p, table, keep_cut=True) for p in files)
        t1 = time.process_time()
        dumps(render.summary(compare(a, b, table, None)))
        got["load"].append(t1 - t)
        got["compare"].append(time.process_time() - t1)
    return {k: min(v) for k, v in got.items()}


# -- acp-align as it was ---------------------------------------------------------------


def _before_tree(d: Path) -> Path | None:
    """acp_pipes as of :data:`BEFORE`, unpacked beside the bench's work (None: no git
    history here, so no before)."""
    root = d / f"before-{BEFORE}"
    if (root / "acp_pipes").is_dir():
        return root
    root.mkdir(parents=True, exist_ok=True)
    try:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", BEFORE, "acp_pipes"],
                                 capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    return root


def _before(root: Path, *args: str) -> list[str]:
    """argv running acp-align from ``root`` (its acp_pipes first on sys.path)."""
    code = (f"import sys; sys.path.insert(0, {str(root)!r}); sys.argv[0] = 'acp-align'; "
            "from acp_pipes.cli.align import main; main()")
    return [sys.executable, "-c", code, *args]


def _reads(root: Path, wire: Path) -> bool:
    """Whether the acp-align of ``root`` reads ``wire`` at all (one written by a newer
    acp-tee may be of a version it does not know)."""
    p = subprocess.run(_before(root, str(wire), str(wire), "--format", "json"),
                       capture_output=True, env=env(), cwd=REPO)
    return p.returncode in (0, 1)


def _capped(argv: list[str], cap: float, stdout: Path | None = None) -> Run | None:
    """Run ``argv`` measured as run_cmd does, but stop it (its whole process group) after
    ``cap`` seconds: None then."""
    fout = open(stdout, "wb") if stdout else subprocess.DEVNULL  # noqa: SIM115
    with tempfile.NamedTemporaryFile("r", suffix=".measure") as report:
        p = subprocess.Popen([sys.executable, "-m", "bench._measure", report.name, "--",
                              *argv], stdout=fout, env=env(), cwd=REPO,
                             start_new_session=True)
        try:
            p.wait(timeout=cap)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            return None
        finally:
            if stdout:
                fout.close()  # type: ignore[union-attr]
        wall, rss_kb, cpu = report.read().split()
    return Run(float(wall), int(rss_kb) / 1024, float(cpu))


# -- the cases ---------------------------------------------------------------------------


def _piped(d: Path, prompts: int, repeat: int, before: Path | None) -> str:
    """The piped pair (see the module docstring)."""
    from acp_pipes.echo.client import client_session

    client = list(client_session(prompts))
    mid = prompts // 2
    changed = [line.replace(f'"hello {mid}"'.encode(), f'"bye {mid}"'.encode())
               for line in client]
    scripts = {"a": client, "a2": client, "b": changed}
    wires = {}
    for name, script in scripts.items():
        src = d / f"piped-{name}.client.jsonl"
        src.write_bytes(b"".join(line + b"\n" for line in script))
        wires[name] = d / f"piped-{name}.wire.jsonl"
        run_cmd(tool("tee", "-o", str(wires[name]), "--clock", "epoch", "--no-host", "--",
                     *tool("echo-agent")), stdin=src)
    out = {k: d / f"piped-{k}.json" for k in ("after-ab", "after-aa", "before-ab", "before-aa")}
    subjects = {
        "after-ab": lambda: run_cmd(tool("align", str(wires["a"]), str(wires["b"]),
                                         "--format", "json"), stdout=out["after-ab"]),
        "after-aa": lambda: run_cmd(tool("align", str(wires["a"]), str(wires["a2"]),
                                         "--format", "json"), stdout=out["after-aa"]),
    }
    if before is not None and not _reads(before, wires["a"]):
        before = None  # (wire logs newer than it reads)
    if before is not None:
        subjects["before-ab"] = lambda: run_cmd(
            _before(before, str(wires["a"]), str(wires["b"]), "--format", "json"),
            stdout=out["before-ab"])
        subjects["before-aa"] = lambda: run_cmd(
            _before(before, str(wires["a"]), str(wires["a2"]), "--format", "json"),
            stdout=out["before-aa"])
    runs = side_by_side(subjects, repeat=repeat)
    rows = []
    frames = sum(1 for _ in open(wires["a"], "rb")) - 1
    for who in ("before", "after"):
        if f"{who}-ab" not in runs:
            continue
        ab = orjson.loads(out[f"{who}-ab"].read_bytes())
        aa = orjson.loads(out[f"{who}-aa"].read_bytes())
        rows.append([
            f"{who} ({BEFORE})" if who == "before" else "after",
            f"{median_wall(runs[f'{who}-ab']):.2f} s", f"{max_rss(runs[f'{who}-ab']):.0f} MB",
            _reported(ab), _reported(aa)])
    return (f"### The piped pair: {prompts} prompts, {frames:,} frames a recording\n\n"
            + table(["acp-align", "A B --format json", "peak RSS",
                     "A vs B (prompt changed): reported", "A vs A' (same script): reported"],
                    rows)
            + f"\n\nMedian of {repeat} interleaved runs. A, A' and B are recorded once, "
            "through acp-tee with the client script piped in whole, so where the "
            "client's frames land among the agent's differs between A and A'. "
            "\"Reported\": steps that differ (before: only-a + only-b ops; after: changed "
            "steps, and steps only in one run). For scale, from the same pair (not "
            "measurable here: it is not installable offline): acp-devtools' diff reports "
            "509 changed frames in 3.3 s and 1.1 GB.")


def _reported(summary: dict) -> str:
    c = summary["counts"]
    if "changed" not in c:
        return f"{c['only-a']:,} only-a + {c['only-b']:,} only-b"
    return (f"{c['changed']:,} changed, {c['only-a']:,} only-a, {c['only-b']:,} only-b")


def _frames(d: Path, steps: int, edits: int, repeat: int, before: Path | None) -> str:
    """Two frames streams: acp-align beside a bare orjson loop over both files."""
    _child("prepare", steps, edits, str(d))
    fa, fb = d / f"a{steps}.frames.jsonl", d / f"b{steps}.frames.jsonl"
    for src, dst in ((d / f"a{steps}.jsonl", fa), (d / f"b{steps}.jsonl", fb)):
        run_cmd(tool("frame", str(src)), stdout=dst)
    loop = [sys.executable, "-c",
            "import orjson, sys\nfor p in sys.argv[1:]:\n"
            "    with open(p, 'rb') as f:\n        for line in f:\n            orjson.loads(line)",
            str(fa), str(fb)]
    out = {who: d / f"frames-{who}.json"
           for who in ("after", "strict", "baseline", "baseline-strict")}
    subjects = {
        "after": lambda: run_cmd(tool("align", str(fa), str(fb), "--format", "json"),
                                 stdout=out["after"]),
        "strict": lambda: run_cmd(tool("align", str(fa), str(fb), "--format", "json",
                                       "--strict"), stdout=out["strict"]),
        "loop": lambda: run_cmd(loop),
    }
    if before is not None:
        subjects["before"] = lambda: run_cmd(_before(before, str(fa), str(fb), "--format",
                                                     "json"))
    baseline = os.environ.get("BENCH_BASELINE")
    if baseline:
        import compileall  # as the installed tree is: no compiling inside a timed run

        compileall.compile_dir(Path(baseline) / "acp_pipes", quiet=1)
        subjects["baseline"] = lambda: run_cmd(
            _before(Path(baseline), str(fa), str(fb), "--format", "json"),
            stdout=out["baseline"])
        subjects["baseline-strict"] = lambda: run_cmd(
            _before(Path(baseline), str(fa), str(fb), "--format", "json", "--strict"),
            stdout=out["baseline-strict"])
    runs = side_by_side(subjects, repeat=repeat)
    floor = _child("frames_floor", steps, str(d), repeat)
    base = median_wall(runs["loop"])
    rows = [["bare loop: orjson.loads of every line of both", f"{base:.2f} s", "1.00x",
             f"{max_rss(runs['loop']):.0f} MB", f"{median_cpu(runs['loop']):.2f} s", "1.00x"]]
    names = {"before": f"before, {BEFORE}", "baseline": f"baseline, {baseline}",
             "baseline-strict": f"--strict, baseline, {baseline}",
             "after": "after: the model of the same session", "strict": "--strict, after"}
    cpu = median_cpu(runs["loop"])
    for who in ("before", "baseline", "baseline-strict", "strict", "after"):
        if who in runs:
            w, c = median_wall(runs[who]), median_cpu(runs[who])
            rows.append([f"acp-align A B --format json ({names[who]})", f"{w:.2f} s",
                         f"{w / base:.2f}x", f"{max_rss(runs[who]):.0f} MB", f"{c:.2f} s",
                         f"{c / cpu:.2f}x"])
    same = ""
    if baseline:
        same = (" Output of --strict, the baseline's and after: "
                + ("the same bytes." if out["strict"].read_bytes() == out["baseline-strict"]
                   .read_bytes() else "DIFFERENT."))
    return (f"### Frames: two {steps:,}-step frames streams, {edits:,} edits\n\n"
            + table(["run", "wall", "vs the bare loop", "peak RSS", "CPU", "CPU vs the loop"],
                    rows)
            + f"\n\nMedian of {repeat} interleaved runs; targets: the default (the model of "
            "the same session: its presets chosen from the agents' initialize answers) "
            "within 3x of the bare loop, --strict within 2x. A frames stream's records "
            "are trusted (hash, kind, method, session used as written; one parse a line, "
            "and by default a notification seen before is read by its layout, not "
            "parsed); a wire log is framed." + same
            + "\n\nWhere the time goes, in process (bench.bench_align.frames_floor; CPU, "
            f"minimum of {repeat}):\n\n"
            + table(["work", "CPU", "vs parsing"], [
                [what, f"{floor[k]:.3f} s", f"{floor[k] / floor['parse']:.2f}x"]
                for k, what in (
                    ("parse", "parse every line of both (orjson.loads)"),
                    ("step", "parse, and make each record a step the least way (one "
                     "dict key of dir + hash, one append)"),
                    ("load", "acp-align reading both (load_steps: steps, chains, line "
                     "numbers, latency)"),
                    ("compare", "acp-align comparing, and the JSON summary (lines read "
                     "back)"))]))


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


def _wire(d: Path, cases) -> str:
    rows = []
    for steps, edits, repeat, cap in cases:
        runs, exact, lcs, got, t_lcs, t_diff = _case(steps, edits, repeat, d, cap)
        ma, mf = median_wall(runs["align"]), median_wall(runs["frame"])
        rows.append([f"{steps:,} steps, {edits:,} edits", f"{ma:.2f} s", f"{mf:.2f} s",
                     f"{ma / mf:.2f}x", f"{max_rss(runs['align']):.0f} MB",
                     f"{max_rss(runs['frame']):.0f} MB",
                     f"{got['lcs']:,} / {lcs:,} {'exact' if exact else 'NOT EXACT'}",
                     f"{t_lcs:.2f} s", t_diff])
    return ("### Wire logs at scale\n\n" + table(
        ["case", "align (CLI)", "frame A + B (CLI)", "ratio", "align peak RSS",
         "frame peak RSS", "LCS found / exact", "LCS alone", "difflib.SequenceMatcher"],
        rows) + "\n\n"
        "align: `acp-align A B --format json` (CLI; frames, hashes and aligns both "
        "inputs). frame: `acp-frame A` + `acp-frame B` (CLI, same run). "
        f"Median of {cases[0][2]} interleaved runs. LCS alone: the Myers step in "
        "process, on the same step keys as difflib. difflib and the LCS alone run in "
        "child processes on the same step keys; difflib on the 1M case under a time cap "
        "(reading the inputs included).")


def _svg(d: Path, cases, repeat: int, before: Path | None, cap: float) -> str:
    rows = []
    for steps, edits in cases:
        _child("prepare", steps, edits, str(d))
        pa, pb = d / f"a{steps}.jsonl", d / f"b{steps}.jsonl"
        svg = d / f"align{steps}.svg"
        after = [run_cmd(tool("align", str(pa), str(pb), "--format", "svg"), stdout=svg)
                 for _ in range(repeat)]
        ok = svg.read_bytes().rstrip().endswith(b"</svg>")
        row = [f"{steps:,} steps, {edits:,} edits", f"{median_wall(after):.2f} s",
               f"{max_rss(after):.0f} MB", f"{svg.stat().st_size / 1e3:.0f} kB"
               + ("" if ok else " (NOT AN SVG)")]
        if before is not None:
            if not _reads(before, pa):
                row.append("cannot read these logs (a newer wire version)")
            else:
                b = _capped(_before(before, str(pa), str(pb), "--format", "svg"), cap)
                row.append(f"{b.wall:.2f} s" if b else f"> {cap:.0f} s (stopped at the cap)")
        rows.append(row)
    heads = ["case", "--format svg (after)", "peak RSS", "SVG size"]
    if before is not None:
        heads.append(f"before ({BEFORE})")
    return ("### SVG\n\n" + table(heads, rows)
            + f"\n\nAfter: median of {repeat} runs, Graphviz's dot included; at most 40 "
            "places where the runs differ are drawn and the rest summed up in one node. "
            "Before: one run, stopped at the cap.")


def main(quick: bool) -> str:
    d = workdir("align")
    before = _before_tree(d)
    if quick:
        cases = {"piped": lambda: _piped(d, 100, 1, before),
                 "frames": lambda: _frames(d, 20_000, 20, 1, before),
                 "wire": lambda: _wire(d, [(20_000, 20, 1, None)]),
                 "svg": lambda: _svg(d, [(5_000, 250)], 1, before, 30.0)}
    else:
        cases = {"piped": lambda: _piped(d, 1000, 5, before),
                 "frames": lambda: _frames(d, 200_000, 100,
                                           int(os.environ.get("BENCH_REPEAT") or 5), before),
                 "wire": lambda: _wire(d, [(1_000_000, 100, 3, 120.0),
                                           (100_000, 5_000, 3, None)]),
                 "svg": lambda: _svg(d, [(20_000, 2_000), (100_000, 5_000)], 3, before,
                                     120.0)}
    chosen = os.environ.get("BENCH_CASES", "").split(",") if os.environ.get(
        "BENCH_CASES") else list(cases)
    unknown = [c for c in chosen if c not in cases]
    if unknown:
        raise SystemExit(f"bench align: no case {', '.join(unknown)}; have: "
                         f"{', '.join(cases)}")
    return "## acp-align\n\n" + "\n\n".join(cases[c]() for c in chosen)

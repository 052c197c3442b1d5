"""How the comparison tools judge five real agents: the regression-testing table.

For each agent (tests/agents/harness.py: its script, its offline set-up), with the tools
of a checkout (``--bin``, default this checkout's .venv/bin) at their default options:

- self re-drive: ``acp-replay --client same-1.wire.jsonl -- AGENT``, ``--runs`` times
  (5), each on a fresh home and workspace at the recording's root: how many pass (exit 0);
- planted changes: each change the harness can plant in the agent's script, re-driven
  once; caught (exit 1), and caught *at the change* (the first difference reported is
  the planted one: the model's changed reply is the recorded frame named; the live frame
  named shows the client's planted text; the first difference follows the planted
  permission answer in its turn). ``planted-reply`` is re-driven as recorded, against the
  plain model; the client and permission changes are planted in a copy of same-1 (its
  answers rewritten as the planted run's client answered), since a re-drive answers the
  agent from the recording;
- same-script align: ``acp-align same-1 same-2`` (and 1-3): hunks, each a run of steps
  that are not equal in its ops output;
- a passing re-drive's wall time (median) against the recording's span (first to last
  frame), and the issue's bound 1.5 x span + 1 s.

Recordings come from ``--recordings DIR`` (DIR/AGENT/same-1.wire.jsonl ..., as
``python -m tests.agents.harness`` writes them), or are made afresh in a temporary
directory. Run from a checkout with the agents installed (``make test-agents`` installs
them): ``.venv/bin/python -m bench.agents [AGENT ...] [--bin DIR] [--recordings DIR]``.
It prints a Markdown table and the details of each run (``--json FILE`` for all of it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.agents import harness  # noqa: E402  (the checkout's harness, by path)

#: acp-replay's own --timeout is left at its default; this bounds a hung run.
RUN_LIMIT = 300


def frames(wire: Path) -> list[dict[str, Any]]:
    out = []
    for line in wire.read_bytes().splitlines():
        rec = json.loads(line)
        if "raw" in rec:
            rec["msg"] = json.loads(rec["raw"])
            out.append(rec)
    return out


def workspace_of(wire: Path) -> Path:
    for f in frames(wire):
        if f["msg"].get("method") == "session/new":
            return Path(f["msg"]["params"]["cwd"])
    raise ValueError(f"{wire}: no session/new")


def span_s(wire: Path) -> float:
    fs = frames(wire)
    return (fs[-1]["t"] - fs[0]["t"]) / 1e9


def _update_text(msg: dict) -> str:
    content = msg.get("params", {}).get("update", {}).get("content")
    return content.get("text", "") if isinstance(content, dict) else ""


def planted_reply_seq(wire: Path) -> int:
    """The recorded frame that carries the planted reply: the first chunk of the
    closing reply that says "changed" (canned_llm.py --variant reply)."""
    for f in frames(wire):
        if f["dir"] == "a2c" and _update_text(f["msg"]).startswith("chang"):
            return f["seq"]
    raise ValueError(f"{wire}: no planted reply in it")


def plant_into(same: Path, plant: str, out: Path) -> int:
    """A copy of recording ``same`` with the client's answers changed as the harness's
    ``plant`` answers (client: fs/read_text_file and terminal/output say "planted";
    permission: the permission prompt's answers pick the reject option); returns the
    seq of the first changed frame."""
    lines = same.read_bytes().splitlines()
    asked: dict[Any, dict] = {}
    prompts = 0
    first = -1
    last_prompt = sum(1 for f in frames(same) if f["msg"].get("method") == "session/prompt")
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if "raw" not in rec:
            continue
        msg = json.loads(rec["raw"])
        if rec["dir"] == "c2a" and msg.get("method") == "session/prompt":
            prompts += 1
        if rec["dir"] == "a2c" and "method" in msg and "id" in msg:
            asked[json.dumps(msg["id"])] = msg
            continue
        if rec["dir"] != "c2a" or "method" in msg or "result" not in msg:
            continue
        request = asked.get(json.dumps(msg.get("id")))
        if request is None:
            continue
        method, result = request["method"], msg["result"]
        if plant == "client" and method == "fs/read_text_file":
            result["content"] = harness.PLANTED_TEXT
        elif plant == "client" and method == "terminal/output":
            result["output"] = harness.PLANTED_TEXT
        elif plant == "permission" and method == "session/request_permission" \
                and prompts == last_prompt:
            reject = next(o for o in request["params"]["options"]
                          if o["kind"].startswith("reject"))
            result["outcome"] = {"outcome": "selected", "optionId": reject["optionId"]}
        else:
            continue
        rec["raw"] = json.dumps(msg, separators=(",", ":"))
        lines[i] = json.dumps(rec, separators=(",", ":")).encode()
        if first < 0:
            first = rec["seq"]
    if first < 0:
        raise ValueError(f"{same}: nothing to plant a {plant} change in")
    out.write_bytes(b"\n".join(lines) + b"\n")
    return first


def redrive(bin_dir: Path, name: str, trace: Path, llm_url: str, log: Path,
            options: list[str] | None = None) -> dict[str, Any]:
    """One ``acp-replay --client TRACE -- AGENT`` on a fresh home and workspace at the
    recording's root: exit status, wall seconds, the report (stderr's JSON line: the
    first difference), the notes. ``options``: acp-replay's (the workspace, with tools
    that take ``--workspace``; noise)."""
    ws = workspace_of(trace)
    with harness.holding(ws.parent):
        return _redrive(bin_dir, name, trace, llm_url, log, ws, options)


def _redrive(bin_dir: Path, name: str, trace: Path, llm_url: str, log: Path,
             ws: Path, options: list[str] | None) -> dict[str, Any]:
    argv, env, _ = harness.prepare(name, ws.parent, llm_url)
    cmd = [str(bin_dir / "acp-replay"), "--client", str(trace), "-o", str(log),
           *(options or []), "--", *argv]
    errlog = log.with_suffix(".stderr")
    started = time.monotonic()
    with open(errlog, "wb") as err_file:
        proc = subprocess.Popen(cmd, cwd=ws, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err_file,
                                start_new_session=True)
        try:
            proc.wait(timeout=RUN_LIMIT)
        except subprocess.TimeoutExpired:
            harness.end_session(proc.pid)
            proc.wait()
    wall = time.monotonic() - started
    # what acp-replay left running of its session (the agent, its children)
    left = harness.session_members(proc.pid)
    harness.end_session(proc.pid)
    err = errlog.read_bytes()
    report = None
    notes = []
    for line in err.decode(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            got = json.loads(line)
            if not isinstance(got, dict) or "event" not in got:
                continue
            if got["event"] in ("note", "learned"):  # tolerated, or what was learned
                notes.append(got)
            elif report is None:
                report = got
    return {"exit": proc.returncode, "wall": wall, "report": report, "notes": notes,
            "left_running": left,
            "stderr_tail": err.decode(errors="replace")[-600:] if report is None else ""}


#: what acp-replay says at a difference: the model's one event (kinds), or before it
#: one event a kind
_DIFFERENCES = ("difference", "diverged", "unanswerable", "extra")


def workspace_options(bin_dir: Path, trace: Path) -> list[str]:
    """``--workspace WS`` (the recording's workspace, where the recorded client's writes
    went) when these tools take it: the re-drive then performs them, as the recorded
    client did."""
    got = subprocess.run([str(bin_dir / "acp-replay"), "--help"], capture_output=True)
    return ["--workspace", str(workspace_of(trace))] if b"--workspace" in got.stdout else []


def at_change(plant: str, planted_seq: int, trace: Path, run: dict[str, Any]) -> bool:
    report = run["report"] or {}
    if run["exit"] != 1 or report.get("event") not in _DIFFERENCES:
        return False
    seq = report.get("seq")
    if plant == "reply":
        return seq == planted_seq
    if plant == "client":
        return harness.PLANTED_TEXT.strip() in json.dumps(
            report.get("live", report.get("received")))
    # permission: the first difference follows the planted answer, in its turn
    if seq is None or seq <= planted_seq:
        return False
    between = [f for f in frames(trace) if planted_seq < f["seq"] < seq]
    return not any(f["msg"].get("method") == "session/prompt" for f in between)


def align_hunks(bin_dir: Path, a: Path, b: Path) -> dict[str, Any]:
    got = subprocess.run([str(bin_dir / "acp-align"), "--format", "ops", str(a), str(b)],
                         capture_output=True, timeout=RUN_LIMIT)
    if got.returncode not in (0, 1):
        return {"exit": got.returncode, "hunks": None, "error": got.stderr.decode()[-400:]}
    ops = [json.loads(line) for line in got.stdout.splitlines() if line.strip()]
    hunks, inside, first = 0, False, None
    for op in ops:
        if op["op"] == "note":  # (acp-align's: a step one run lacks that the model of
            continue            # the same session tolerates: no difference, no hunk)
        if op["op"] != "equal":
            if not inside:
                hunks += 1
                if first is None:
                    first = op
            inside = True
        else:
            inside = False
    return {"exit": got.returncode, "hunks": hunks, "steps": len(ops), "first": first}


def measure(name: str, recs: Path, bin_dir: Path, runs: int, work: Path) -> dict[str, Any]:
    agent = harness.AGENTS[name]
    same = recs / "same-1.wire.jsonl"
    out: dict[str, Any] = {"agent": name, "span": span_s(same), "self": [], "planted": {},
                           "align": {}, "self_noise": []}
    ws = workspace_options(bin_dir, same)
    other = recs / "same-2.wire.jsonl"
    noise = ["--noise", str(other)] if ws and other.exists() else []
    with contextlib.ExitStack() as stack:
        url = ""
        if agent.uses_llm:
            url = stack.enter_context(harness.canned_llm(work / f"{name}.llm")).url
        for i in range(runs):
            run = redrive(bin_dir, name, same, url, work / f"{name}.self-{i + 1}.wire.jsonl",
                          ws)
            out["self"].append(run)
            print(f"{name}: self re-drive {i + 1}: exit {run['exit']} "
                  f"{run['wall']:.1f} s {_said(run)}", file=sys.stderr)
        for i in range(runs if noise else 0):  # given two recordings: same-2 as noise
            run = redrive(bin_dir, name, same, url,
                          work / f"{name}.noise-{i + 1}.wire.jsonl", ws + noise)
            out["self_noise"].append(run)
            print(f"{name}: self re-drive given same-2 {i + 1}: exit {run['exit']} "
                  f"{run['wall']:.1f} s {_said(run)}", file=sys.stderr)
        for plant in harness.plants_for(agent):
            if plant == "reply":
                trace = recs / "planted-reply.wire.jsonl"
                seq = planted_reply_seq(trace)
            else:
                trace = work / f"{name}.planted-{plant}.redrive.wire.jsonl"
                seq = plant_into(same, plant, trace)
            run = redrive(bin_dir, name, trace, url, work / f"{name}.planted-{plant}.run.jsonl",
                          ws)
            run.update(planted_seq=seq, trace=str(trace),
                       at_change=at_change(plant, seq, trace, run))
            out["planted"][plant] = run
            print(f"{name}: planted {plant} at seq {seq}: exit {run['exit']}, "
                  f"at the change: {run['at_change']} {_said(run)}", file=sys.stderr)
    for other in ("same-2", "same-3"):
        path = recs / f"{other}.wire.jsonl"
        if path.exists():
            out["align"][other] = align_hunks(bin_dir, same, path)
    out["planted_frames"] = {}
    for plant in harness.plants_for(agent):
        path = recs / f"planted-{plant}.wire.jsonl"
        if path.exists():
            out["align"][f"planted-{plant}"] = align_hunks(bin_dir, same, path)
            out["planted_frames"][plant] = planted_frame(path, plant)
    return out


def planted_frame(wire: Path, plant: str) -> int:
    """The planted frame's seq in a planted recording (README of the recordings)."""
    if plant == "reply":
        return planted_reply_seq(wire)
    fs = frames(wire)
    asked = {json.dumps(f["msg"]["id"]): f["msg"]["method"] for f in fs
             if f["dir"] == "a2c" and "method" in f["msg"] and "id" in f["msg"]}
    methods = ("fs/read_text_file", "terminal/output") if plant == "client" else (
        "session/request_permission",)
    seqs = [f["seq"] for f in fs if f["dir"] == "c2a" and "method" not in f["msg"]
            and asked.get(json.dumps(f["msg"].get("id"))) in methods]
    return seqs[0] if plant == "client" else seqs[-1]


def _said(run: dict[str, Any]) -> str:
    r = run["report"]
    if not r:
        return run["stderr_tail"].strip().replace("\n", " ")[-200:]
    paths = [f"{d.get('op')} {d.get('path')}" for d in r.get("diff") or []]
    shown = ", ".join(paths[:6]) + (f" (+{len(paths) - 6})" if len(paths) > 6 else "")
    what = f"{r.get('event')} {r.get('kind')}" if r.get("kind") else r.get("event")
    return (f"{what} at recorded seq {r.get('seq')} ({r.get('method')}): "
            f"{shown or r.get('message', '')}")


def _notes(run: dict[str, Any]) -> str:
    notes = [n for n in run.get("notes") or [] if n.get("event") == "note"]
    if not notes:
        return ""
    kinds: dict[str, int] = {}
    for n in notes:
        kinds[n.get("kind", "?")] = kinds.get(n.get("kind", "?"), 0) + 1
    return "; notes: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))


def _left(run: dict[str, Any]) -> str:
    left = run.get("left_running") or []
    return f"; acp-replay exited leaving {len(left)} process(es) running: {left[0][:80]}" \
        if left else ""


def align_finds_plant(r: dict[str, Any], plant: str) -> bool | None:
    """Whether acp-align same-1 planted-PLANT's first difference is the planted frame
    (None where there is no such recording)."""
    got = r["align"].get(f"planted-{plant}")
    if not got or not got.get("first"):
        return None if not got else False
    return got["first"].get("b") == r["planted_frames"].get(plant)


def table(results: list[dict[str, Any]]) -> str:
    rows = ["| agent | self re-drive | self re-drive given two | planted changes caught "
            "(at the change) | unchanged traces failing | same-script `acp-align` hunks "
            "(1-2, 1-3) | `acp-align` finds the plant first | passing re-drive wall / span |",
            "|---|---|---|---|---|---|---|---|"]
    for r in results:
        passed = [x for x in r["self"] if x["exit"] == 0]
        planted = r["planted"]
        caught = sum(1 for x in planted.values() if x["exit"] == 1)
        at = sum(1 for x in planted.values() if x["at_change"])
        hunks = ", ".join(str(r["align"][k]["hunks"]) for k in ("same-2", "same-3")
                          if k in r["align"])
        if passed:
            wall = statistics.median(x["wall"] for x in passed)
            bound = 1.5 * r["span"] + 1
            timing = (f"{wall:.1f} s / {r['span']:.1f} s "
                      f"({'within' if wall <= bound else 'over'} {bound:.1f} s)")
        else:
            timing = f"no pass / {r['span']:.1f} s"
        found = [align_finds_plant(r, p) for p in planted]
        known = [f for f in found if f is not None]
        noisy = r.get("self_noise") or []
        given_two = (f"{sum(1 for x in noisy if x['exit'] == 0)}/{len(noisy)}" if noisy
                     else "-")
        unchanged = r["self"] + noisy
        failing = sum(1 for x in unchanged if x["exit"] != 0)
        rows.append(f"| {r['agent']} | {len(passed)}/{len(r['self'])} | {given_two} | "
                    f"{caught}/{len(planted)} ({at}/{len(planted)}) | "
                    f"{failing}/{len(unchanged)} | {hunks} | "
                    f"{sum(known)}/{len(known)} | {timing} |")
    return "\n".join(rows)


def details(results: list[dict[str, Any]]) -> str:
    out = []
    for r in results:
        out.append(f"\n### {r['agent']}\n")
        for i, run in enumerate(r["self"], 1):
            out.append(f"- self re-drive {i}: exit {run['exit']}, {run['wall']:.1f} s; "
                       f"{_said(run) if run['exit'] else 'same'}{_notes(run)}{_left(run)}")
        for i, run in enumerate(r.get("self_noise") or [], 1):
            out.append(f"- self re-drive given same-2 {i}: exit {run['exit']}, "
                       f"{run['wall']:.1f} s; {_said(run) if run['exit'] else 'same'}"
                       f"{_notes(run)}{_left(run)}")
        for plant, run in r["planted"].items():
            out.append(f"- planted {plant} (frame seq {run['planted_seq']}): exit "
                       f"{run['exit']}, at the change: {'yes' if run['at_change'] else 'no'}; "
                       f"{_said(run)}{_left(run)}")
        for other, got in r["align"].items():
            first = got.get("first") or {}
            out.append(f"- `acp-align same-1 {other}`: exit {got['exit']}, {got['hunks']} "
                       f"hunks in {got.get('steps')} steps; first: {first.get('op')} "
                       f"a={first.get('a')} b={first.get('b')} {first.get('kind') or ''} "
                       f"{first.get('method') or ''}".rstrip())
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.agents", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("agent", nargs="*", choices=sorted(harness.AGENTS) + [[]],
                        help="agents to measure (default: all five)")
    parser.add_argument("--bin", type=Path, default=REPO / ".venv" / "bin",
                        help="directory of the acp-replay and acp-align to measure "
                             "(default: this checkout's .venv/bin)")
    parser.add_argument("--recordings", type=Path,
                        help="DIR/AGENT/same-1.wire.jsonl ... (default: record afresh)")
    parser.add_argument("--runs", type=int, default=5, help="self re-drives (default 5)")
    parser.add_argument("--json", type=Path, help="write every result here too")
    args = parser.parse_args(argv)
    names = args.agent or sorted(harness.AGENTS)
    results = []
    with tempfile.TemporaryDirectory(prefix="acp-agents-bench-") as tmp:
        work = Path(tmp)
        for name in names:
            recs = args.recordings / name if args.recordings else work / "recordings" / name
            if not args.recordings:
                harness.record_set(name, recs, Path("/tmp/acp-pipes-agents") / name)
            results.append(measure(name, recs, args.bin, args.runs, work))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    print(f"`python -m bench.agents {' '.join(argv if argv is not None else sys.argv[1:])}`"
          f" with {args.bin}\n")
    print(table(results))
    print(details(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""acp-asr (fold + ASR mapping) over a large wire log, against a bare parse loop.

The baseline is the floor of any converter: ``orjson.loads`` of every line of the same
wire log, in a subprocess like the subject. acp-asr runs through the real CLI: it reads
the wire log, parses every frame, folds the updates (ASR-704), maps every entity and
writes the stream (``-o DIR``). The recording is one echo-agent session with prompts,
permission requests, elicitations, streamed chunks and tool calls, deterministic and
cached. Peak RSS at two sizes, to show it flat: acp-asr keeps, per written entity, one
16-byte key digest -> (seq, spool position) in a dict of at most 32,768 entries (~140 B
each); past that the entries move to a temporary sqlite database behind a fixed 2 MB
Bloom filter (acp_pipes/fold/index.py), and ASR-717's content digest is recomputed from
the spooled record only when the same entity comes again. The fold keeps every final
state, serialised into a temporary file as the entity becomes final (where each is: a
dict of at most 8,192 keys, then sqlite), so a change after final folds onto the whole
entity (ASR-706); records wait in 1 MB per-session spools, then temporary files.

Peak RSS is each command's own: on Linux a child's ``ru_maxrss`` starts from the
high-water mark of the process that spawned it, so :func:`bench.common.run_cmd` starts
commands from a small intermediary, and the logs are generated in a subprocess so this
process stays small too. CPU time (user + system) is reported beside wall time: the
machines are shared and wall time moves with their load.
"""

from __future__ import annotations

import compileall
import os
import shutil
import subprocess
import sys
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
    run_fn,
    side_by_side,
    table,
    tool,
    workdir,
)

BARE = """\
import sys, orjson
loads = orjson.loads
for line in open(sys.argv[1], "rb"):
    loads(line)
"""
#: acp-asr of the checkout named first (before and after a change, same launcher): the
#: checkout goes first on sys.path, ahead of this one (PYTHONPATH)
CHECKOUT = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
            "from acp_pipes.cli.asr import main; main()")


def wire_log_in_child(updates: int, make: str = "wire_log") -> tuple[Path, int, int]:
    """:func:`wire_log` (or ``make``, :func:`v1_wire_log`) in a subprocess, so this
    process stays small."""
    code = f"import orjson; from bench.bench_asr import {make}; p, n, l = {make}({updates}); " \
           "print(orjson.dumps([str(p), n, l]).decode())"
    p = subprocess.run([sys.executable, "-c", code], env=env(), capture_output=True,
                       check=True)
    path, n, lines = orjson.loads(p.stdout)
    return Path(path), n, lines


def _cached(name: str) -> tuple[Path, list | None]:
    """Where a generated log lives, and its [updates, lines] if it is there already."""
    path = workdir("asr") / name
    meta = path.with_suffix(".json")
    return path, (orjson.loads(meta.read_bytes()) if path.exists() and meta.exists() else None)


def wire_log(updates: int) -> tuple[Path, int, int]:
    """A wire log holding at least ``updates`` session/update frames (cached by size);
    returns the path, the number of updates and the number of lines."""
    from acp_pipes.echo.agent import EchoAgent
    from acp_pipes.echo.client import client_session
    from acp_pipes.io.wire import frame_record, header

    path, known = _cached(f"wire-{updates}.jsonl")
    if known:
        return path, *known
    tmp = path.with_suffix(".tmp")
    prompts = updates // 13 + 1
    n = lines = 0
    with open(tmp, "wb") as out:
        hdr = header(["acp-echo-agent"], started_ns=1764522928000000000, clock="epoch",
                     host=False)
        out.write(orjson.dumps(hdr) + b"\n")
        lines = 1
        seq = 0
        t = 1764522928000000000
        agent = EchoAgent()
        for line in client_session(prompts, permission_every=4, elicit_every=7):
            for d, raw in (("c2a", line), *(("a2c", f) for f in agent.feed(line))):
                out.write(orjson.dumps(frame_record(seq, t + seq * 250_000, d, raw)) + b"\n")
                if b'"session/update"' in raw[:60]:
                    n += 1
                seq += 1
                lines += 1
    tmp.replace(path)
    path.with_suffix(".json").write_bytes(orjson.dumps([n, lines]))
    return path, n, lines


def v1_wire_log(updates: int) -> tuple[Path, int, int]:
    """The session of :func:`wire_log` as an ACP v1 agent and client send it (cached):
    ``clientInfo``/``agentInfo``, chunks without ``messageId``, ``tool_call`` first,
    tool content as ``tool_call_update``s of the whole list, ``plan``, the permission's
    ``toolCall``, and the turn ended by the ``session/prompt`` response (its
    ``stopReason``) where v2 sends idle; v2's ``user_message`` echo and ``state_update``
    have no v1 form and are left out."""
    src, _, _ = wire_log(updates)
    path, known = _cached(f"wire-v1-{updates}.jsonl")
    if known:
        return path, *known
    tmp = path.with_suffix(".tmp")
    n = lines = 0
    calls: dict[str, list] = {}
    turns: dict[str, object] = {}  # session -> the prompt's id, answered at idle
    with open(src, "rb") as inp, open(tmp, "wb") as out:
        for line in inp:
            rec = orjson.loads(line)
            if "raw" not in rec:
                out.write(line)
                lines += 1
                continue
            for msg in _to_v1(orjson.loads(rec["raw"]), rec["dir"], calls, turns):
                raw = orjson.dumps(msg).decode()
                out.write(orjson.dumps({**rec, "raw": raw}) + b"\n")
                lines += 1
                n += msg.get("method") == "session/update"
    tmp.replace(path)
    path.with_suffix(".json").write_bytes(orjson.dumps([n, lines]))
    return path, n, lines


def _to_v1(msg: dict, d: str, calls: dict, turns: dict) -> list[dict]:
    method, params = msg.get("method"), msg.get("params") or {}
    result = msg.get("result")
    if method == "initialize":
        p = {k: v for k, v in params.items() if k not in ("info", "capabilities")}
        return [{**msg, "params": {**p, "protocolVersion": 1, "clientInfo": params["info"],
                                   "clientCapabilities": {}}}]
    if isinstance(result, dict) and result.get("protocolVersion") == 2:
        return [{**msg, "result": {"protocolVersion": 1, "agentInfo": result["info"],
                                   "agentCapabilities": {"loadSession": True}}}]
    if method == "session/prompt":
        turns[params["sessionId"]] = msg["id"]
    if d == "a2c" and isinstance(result, dict) and "messageId" in result:
        return []  # the prompt's response comes at the end of the turn
    if method == "session/request_permission":
        call = params["subject"]["toolCall"]
        return [{**msg, "params": {"sessionId": params["sessionId"], "toolCall": call,
                                   "options": params["options"]}}]
    if method != "session/update":
        return [msg]
    sid, u = params["sessionId"], params["update"]
    kind = u["sessionUpdate"]
    if kind == "state_update":
        if u["state"] != "idle" or sid not in turns:
            return []
        return [{"jsonrpc": "2.0", "id": turns.pop(sid),
                 "result": {"stopReason": u.get("stopReason", "end_turn")}}]
    if kind == "user_message":
        return []
    if kind.endswith("_message_chunk") or kind == "agent_thought_chunk":
        u = {k: v for k, v in u.items() if k != "messageId"}
    elif kind == "tool_call_update" and u["toolCallId"] not in calls:
        calls[u["toolCallId"]] = []
        u = {**u, "sessionUpdate": "tool_call"}
    elif kind == "tool_call_content_chunk":
        content = calls.setdefault(u["toolCallId"], [])
        content.append(u["content"])
        u = {"sessionUpdate": "tool_call_update", "toolCallId": u["toolCallId"],
             "content": list(content)}
    elif kind == "plan_update":
        u = {"sessionUpdate": "plan", "entries": u["plan"]["entries"]}
    return [{**msg, "params": {"sessionId": sid, "update": u}}]


LIFT = """\
import sys, time, gc, orjson
from bench.bench_asr import v1_wire_log, wire_log
from acp_pipes.fold import Folder
from acp_pipes.fold.v1_lift import V1Lift

def frames(path):
    out = []
    for line in open(path, "rb"):
        r = orjson.loads(line)
        if "raw" in r:
            out.append((r["seq"], r["t"], r["dir"], orjson.loads(r["raw"])))
    return out

v1, v2 = frames(v1_wire_log(int(sys.argv[1]))[0]), frames(wire_log(int(sys.argv[1]))[0])
noop = lambda *a: None

def lift():
    lifted = V1Lift(0, frame=noop, update=noop, mark=noop, declare=noop)
    for f in v1[2:]:
        lifted.feed(*f)
    lifted.finish()

def fold(fs):
    folder = Folder()
    for f in fs:
        folder.feed(*f)
    folder.finish()

gc.freeze()
best = {}
for _ in range(5):
    for name, fn in (("lift", lift), ("v1", lambda: fold(v1)), ("v2", lambda: fold(v2))):
        t = time.process_time()
        fn()
        best[name] = min(best.get(name, 1e9), time.process_time() - t)
print(orjson.dumps([best["lift"] / (len(v1) - 2), best["v1"] / len(v1),
                    best["v2"] / len(v2)]).decode())
"""


def lift_cost(updates: int) -> list[float]:
    """In a child, parsed frames in memory, best of 5 CPU: the v1 lift alone (its fold
    calls do nothing) per v1 frame, and the whole fold per frame of each log."""
    p = subprocess.run([sys.executable, "-c", LIFT, str(updates)], env=env(),
                       capture_output=True, check=True)
    return orjson.loads(p.stdout)


def streamed_message(chunks: int) -> Run:
    """Fold one agent message streamed in ``chunks`` text chunks (in-process, parsed
    messages prepared beforehand): linear in the chunks if the time per chunk stays flat."""
    from acp_pipes.fold import Folder

    msgs = [{"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "messageId": "m",
                                     "content": {"type": "text", "text": f"token{i} "}}}}
            for i in range(chunks)]
    idle = {"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": "s", "update": {"sessionUpdate": "state_update",
                                                    "state": "idle"}}}

    def go() -> None:
        f = Folder()
        for i, m in enumerate(msgs):
            f.feed(i, None, "a2c", m)
        assert f.feed(chunks, None, "a2c", idle)

    return run_fn(go)


def streaming_rows(quick: bool) -> list[list[str]]:
    rows = []
    for chunks in ((1_000, 4_000) if quick else (10_000, 40_000, 160_000)):
        runs = [streamed_message(chunks) for _ in range(1 if quick else 3)]
        best = min(r.wall for r in runs)
        rows.append([f"{chunks:,}", f"{best * 1e3:.1f} ms", f"{best / chunks * 1e6:.2f} µs"])
    return rows


def main(quick: bool) -> str:
    sizes = (2_000, 6_000) if quick else (100_000, 300_000)
    repeat = 1 if quick else 5
    rows = []
    out_dir = workdir("asr") / "out"
    # as installed (pip compiles bytecode): with PYTHONDONTWRITEBYTECODE set and a stale
    # __pycache__, every run would recompile the acp_pipes modules it imports (~15 ms a
    # run here), a cost of the checkout, not of the tool
    compileall.compile_dir(REPO / "acp_pipes", quiet=1)
    v1_rows = []
    # BENCH_BASELINE=<another checkout>: that acp-asr (before) against this one (after)
    baseline = os.environ.get("BENCH_BASELINE")
    if baseline:
        compileall.compile_dir(Path(baseline) / "acp_pipes", quiet=1)
    ab_rows = []
    for size in sizes:
        log, n, lines = wire_log_in_child(size)
        v1_log, v1_n, _ = wire_log_in_child(size, "v1_wire_log")

        def subject(log=log) -> Run:
            shutil.rmtree(out_dir, ignore_errors=True)
            return run_cmd(tool("asr", str(log), "-o", str(out_dir)))

        def checkout(path: str, log=log) -> Run:
            shutil.rmtree(out_dir, ignore_errors=True)
            return run_cmd([sys.executable, "-c", CHECKOUT, path, str(log), "-o",
                            str(out_dir)])

        subjects = {"acp-asr": subject,
                    "acp-asr v1": lambda v1_log=v1_log: subject(v1_log),
                    "bare parse": lambda log=log: run_cmd([sys.executable, "-c", BARE,
                                                           str(log)])}
        if baseline:
            subjects["before"] = lambda: checkout(baseline)
            subjects["after"] = lambda: checkout(str(REPO))
        runs = side_by_side(subjects, repeat=repeat)
        if baseline:
            b, a = runs["before"], runs["after"]
            ab_rows.append([
                f"{n:,}", f"{median_wall(b):.3f} s / {median_wall(a):.3f} s",
                f"{median_wall(a) / median_wall(b):.3f}x",
                f"{median_cpu(b):.2f} s / {median_cpu(a):.2f} s",
                f"{median_cpu(a) / median_cpu(b):.3f}x",
                f"{max_rss(b):.1f} MB / {max_rss(a):.1f} MB"])
        v1 = median_wall(runs["acp-asr v1"])
        v1_cpu = median_cpu(runs["acp-asr v1"])
        asr, bare = median_wall(runs["acp-asr"]), median_wall(runs["bare parse"])
        cpu_asr = median_cpu(runs["acp-asr"])
        cpu_bare = median_cpu(runs["bare parse"])
        mb = log.stat().st_size / 1e6
        rows.append([
            f"{n:,}", f"{lines:,}", f"{mb:.0f} MB", f"{asr:.3f} s", f"{bare:.3f} s",
            f"{asr / bare:.2f}x", f"{cpu_asr:.2f} s / {cpu_bare:.2f} s = "
            f"{cpu_asr / cpu_bare:.1f}x", f"{n / asr / 1e3:.0f}k updates/s",
            f"{max_rss(runs['acp-asr']):.1f} MB", f"{max_rss(runs['bare parse']):.1f} MB",
        ])
        per2, per1 = cpu_asr / n * 1e6, v1_cpu / v1_n * 1e6
        v1_rows.append([
            f"{n:,} / {v1_n:,}", f"{asr:.3f} s / {v1:.3f} s", f"{v1 / asr:.2f}x",
            f"{per2:.2f} µs / {per1:.2f} µs", f"{per1 / per2:.2f}x",
            f"{max_rss(runs['acp-asr v1']):.1f} MB",
        ])
    shutil.rmtree(out_dir, ignore_errors=True)
    head = ["updates", "lines", "wire log", "acp-asr (median)", "bare parse (median)",
            "ratio", "CPU (median, ratio)", "throughput", "acp-asr peak RSS", "bare peak RSS"]
    return (
        "## acp-asr: fold + ASR mapping vs a bare parse loop\n\n"
        f"Same wire log, same run, interleaved, median of {repeat}; target: within 5x of "
        "parsing alone; memory: bounded by the open entities (the index of written "
        "entities holds at most 32,768 in memory, the rest in a temporary sqlite file "
        "behind a 2 MB Bloom filter; spools hold 1 MB per session); peak RSS of each "
        "command alone (wait4, from a small launcher).\n\n" + table(head, rows)
        + "\n\nOne agent message streamed in N text chunks, folded in-process (best of 3): "
        "the time per chunk stays flat, so a long streamed message folds in linear time "
        "(chunks append in place; text pieces are joined once, when the record is made).\n\n"
        + table(["chunks", "fold time", "per chunk"], streaming_rows(quick))
        + "\n\nThe same sessions recorded from ACP v1 (the v2 log as a v1 agent and client "
        "send it: chunks without messageId, tool_call, plan, the turn ended by the prompt "
        "response; no user_message echo or state_update), same run, interleaved with the "
        "rows above; target: v1 at least as fast per update as v2 (CPU per update: v1/v2 "
        "at most 1.00x).\n\n"
        + table(["updates v2 / v1", "acp-asr v2 / v1 (median)", "v1/v2 wall",
                 "CPU per update v2 / v1", "v1/v2 per update", "v1 peak RSS"], v1_rows)
        + ("" if not baseline else
           f"\n\nBefore and after: the acp-asr of {baseline} against this checkout's, the "
           "same v2 wire log, both started by the same launcher (`python -c`, the checkout "
           "first on sys.path), interleaved with the rows above.\n\n"
           + table(["updates", "wall before / after (median)", "after/before",
                    "CPU before / after (median)", "after/before", "peak RSS before / after"],
                   ab_rows))
        + "\n\nWhere v1's time goes (in-process, frames parsed beforehand, best of 5 CPU, "
        f"{sizes[0]:,}-update logs): the v1 lift alone (its calls into the fold do "
        "nothing) {:.2f} µs a v1 frame; the fold with the lift {:.2f} µs a v1 frame; the "
        "fold of the v2 log {:.2f} µs a v2 frame.".format(
            *(x * 1e6 for x in lift_cost(sizes[0])))
    )


if __name__ == "__main__":
    print(main("--quick" in sys.argv))

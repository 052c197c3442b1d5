"""acp-export otlp against a real OTLP receiver: Arize Phoenix, on loopback.

`make test-export` installs Phoenix in an environment of its own (scripts/install-phoenix,
~850 MB: for this target alone) and runs this file with ACP_PIPES_PHOENIX=1; a missing
Phoenix then fails, it does not skip. Plain `make test` does not collect it
(tests/conftest.py).

Each recording is sent to /v1/traces (OTLP/HTTP, protobuf, the SDK's own exporter) into
a Phoenix project of its own (``--resource openinference.project.name=...``), read back
through Phoenix's REST API (/v1/projects/{project}/spans), and checked against the ASR
stream of the same recording, computed here from its records: one trace per session,
the session span at its root, a turn span per prompt turn from its prompt (or `running`)
to its `idle`, with its stop reason, a tool span per live tool call under the turn it
ran in, from the call's first frame, with its name, kind and status, permissions as
events at their times. The recordings: the bundled example session (examples/hello, as
`make demo` records it), fixtures of the mapping's rules, and a real agent (fast-agent)
recorded here through acp-tee.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import time
import urllib.request
from datetime import datetime
from pathlib import Path

import orjson
import pytest

from tests.conftest import REPO, run_tool, tool_argv, tool_env

PHOENIX = REPO / ".peers" / "phoenix" / "bin" / "phoenix"
FIXTURES = REPO / "tests" / "fixtures" / "asr"
#: Fixtures whose sessions hold what the mapping maps: v1 turns with every stop reason
#: and an error, permissions, subagents, forks with replayed history, usage and cost,
#: elicitations, trace context.
RULES = ["ASR-705-v1-turn-end", "ASR-716-v1-permission", "ASR-714-v1-tool-calls",
         "ASR-721-subagents", "ASR-718-fork-lineage", "ASR-720-usage",
         "ASR-734-elicitation", "ASR-708-trace-context", "ASR-717-v1-load-replays-history"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return orjson.loads(r.read())


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    if not PHOENIX.exists():
        pytest.fail(f"{PHOENIX} is missing: `make test-export` installs Phoenix "
                    "(scripts/install-phoenix)")
    work = tmp_path_factory.mktemp("phoenix")
    port = _free_port()
    env = {**os.environ, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(_free_port()), "PHOENIX_WORKING_DIR": str(work),
           "PHOENIX_TELEMETRY_ENABLED": "false"}
    log = open(work / "phoenix.log", "wb")
    proc = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 240
    try:
        while True:
            assert proc.poll() is None, (work / "phoenix.log").read_text()[-3000:]
            try:
                _get(base + "/v1/projects")
                break
            except OSError:
                assert time.monotonic() < deadline, "Phoenix never answered"
                time.sleep(0.5)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> dict[str, Path]:
    """name -> a recording (wire log or ASR stream) to export."""
    tmp = tmp_path_factory.mktemp("recordings")
    got: dict[str, Path] = {}
    hello = tmp / "hello.wire.jsonl"  # as scripts/demo records it
    r = subprocess.run(tool_argv("tee", "--script", str(REPO / "examples/hello/client.jsonl"),
                                 "-o", str(hello), "--clock", "epoch", "--no-host", "--",
                                 *tool_argv("echo-agent")),
                       capture_output=True, env=tool_env(), timeout=120,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    got["hello"] = hello
    for rule in RULES:
        got[rule] = FIXTURES / rule / "wire.jsonl"
    from tests.test_fast_agent import _session  # the real agent, as its own tests drive it

    ws = tmp / "ws"
    ws.mkdir()
    wire = tmp / "fast-agent.wire.jsonl"
    asyncio.run(asyncio.wait_for(_session(wire, ws), 120))
    got["fast-agent"] = wire
    return got


def _project(name: str) -> str:
    return "acp-" + name.lower().replace("_", "-")


def _spans(base: str, project: str) -> list[dict]:
    spans: list[dict] = []
    cursor = None
    while True:
        url = f"{base}/v1/projects/{project}/spans?limit=1000"
        if cursor:
            url += f"&cursor={cursor}"
        page = _get(url)
        spans.extend(page["data"])
        cursor = page.get("next_cursor")
        if not cursor:
            return spans


@pytest.fixture(scope="module")
def exported(phoenix, recordings, tmp_path_factory) -> dict[str, tuple[list[dict], list[dict]]]:
    """name -> (the ASR records of the recording, header lines included; the spans
    Phoenix holds for it, once it holds as many as acp-export wrote as OTLP/JSON)."""
    tmp = tmp_path_factory.mktemp("otlp")
    out = {}
    for name, path in recordings.items():
        project = _project(name)
        as_json = tmp / f"{name}.json"
        # the fixtures share session IDs ("s"): each its own IDs, as Phoenix keys spans by ID
        keep_apart = ["--id-namespace", name]
        r = run_tool("export", "otlp", str(path), "-o", str(as_json), *keep_apart,
                     timeout=120)
        assert r.returncode == 0, (name, r.stderr.decode())
        written = sum(len(ss["spans"]) for line in as_json.read_bytes().splitlines()
                      for rs in orjson.loads(line)["resourceSpans"] for ss in rs["scopeSpans"])
        r = run_tool("export", "otlp", str(path), "--endpoint", phoenix, *keep_apart,
                     "--resource", f"openinference.project.name={project}", timeout=120)
        assert r.returncode == 0, (name, r.stderr.decode())
        spans = f"{written} span{'s' * (written != 1)}"  # as acp-export counts them
        assert r.stderr.decode().endswith(f"{spans} sent to {phoenix}/v1/traces\n")
        asr = run_tool("asr", str(path))
        assert asr.returncode == 0, asr.stderr
        records = [orjson.loads(x) for x in asr.stdout.splitlines()]
        deadline = time.monotonic() + 60
        while True:  # Phoenix stores what it was sent in the background
            try:
                spans = _spans(phoenix, project)
            except OSError:  # the project is not there yet
                spans = []
            if len(spans) >= written:
                break
            assert time.monotonic() < deadline, (name, len(spans), written)
            time.sleep(0.5)
        assert len(spans) == written, name
        out[name] = (records, spans)
    return out


def _t(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _streams(records: list[dict]) -> list[tuple[dict, list[dict]]]:
    out: list[tuple[dict, list[dict]]] = []
    for r in records:
        if r.get("type") == "header":
            out.append((r, []))
        else:
            out[-1][1].append(r)
    return out


def _expected_turns(records: list[dict]) -> list[dict]:
    """The prompt turns of one session's records, as docs/acp-export.md defines them:
    from the prompt (v2: its `running`) to the next `idle`; a turn with no prompt from
    the first thing that happened since the last; replayed history (no ts) is none."""
    turns: list[dict] = []
    cur: dict | None = None
    pending: str | None = None
    orphans: list[dict] = []  # calls since the last turn, no turn open
    for r in records:
        if "ts" not in r:
            continue
        t, typ = r["ts"], r["type"]
        if typ == "message" and r.get("role") == "user" and r.get("origin") == "prompt":
            if cur is not None:
                turns.append(cur)
            cur = {"start": t, "end": None, "stop": None, "tools": [], "prompted": True}
            continue
        if typ == "state" and r["state"] == "running" and cur is not None and not cur.get("run"):
            cur["start"], cur["run"] = t, True
            continue
        if typ == "state" and r["state"] == "idle":
            if cur is None:
                cur = {"start": pending or t, "tools": orphans, "prompted": False}
            cur["end"], cur["stop"] = t, r.get("stopReason")
            turns.append(cur)
            cur, pending, orphans = None, None, []
            continue
        if cur is None and pending is None and typ in ("message", "tool_call", "permission",
                                                       "input_request", "plan", "terminal",
                                                       "subagent"):
            pending = t
        if typ == "tool_call" and "supersedes" not in r:
            (cur["tools"] if cur is not None else orphans).append(r)
    if cur is not None:
        turns.append(cur)
    return turns


@pytest.mark.parametrize("name", ["hello", "fast-agent", *RULES])
def test_phoenix_holds_every_session_turn_and_call_as_the_asr_stream_says(exported, name):
    records, spans = exported[name]
    assert spans, name
    by_id = {s["context"]["span_id"]: s for s in spans}
    for header, recs in _streams(records):
        sid = header["sessionId"]
        agent = header["agent"]["name"]
        mine = [s for s in spans if s["attributes"].get("gen_ai.conversation.id") == sid]
        traces = {s["context"]["trace_id"] for s in mine}
        assert len(traces) == 1, (name, sid, traces)  # one trace per session
        (root,) = [s for s in mine if s["name"] == f"session {agent}"]
        assert root["attributes"]["acp.session.id"] == sid
        live = [r for r in recs if "ts" in r]
        if live:
            assert _t(root["start_time"]) == min(_t(r["ts"]) for r in live)
        # the turns: one invoke_agent span each, children of the session span
        turns = sorted((s for s in mine if s["name"] == f"invoke_agent {agent}"),
                       key=lambda s: s["attributes"]["acp.turn.number"])
        want = _expected_turns(recs)
        assert len(turns) == len(want), (name, sid)
        for span, turn in zip(turns, want, strict=True):
            a = span["attributes"]
            assert span["parent_id"] == root["context"]["span_id"]
            assert a["gen_ai.operation.name"] == "invoke_agent"
            assert _t(span["start_time"]) == _t(turn["start"])
            if turn["end"] is not None:
                assert _t(span["end_time"]) >= _t(turn["end"])
            if turn["stop"] is not None:
                assert a["gen_ai.response.finish_reasons"] == [turn["stop"]]
                assert a["acp.stop_reason"] == turn["stop"]
                assert span["status_code"] == ("ERROR" if turn["stop"] == "refusal" else "OK")
            # the tool calls of the turn: execute_tool spans under it
            kids = [s for s in mine if s["parent_id"] == span["context"]["span_id"]]
            assert len(kids) == len(turn["tools"]), (name, sid, turn)
            for call in turn["tools"]:
                (tool,) = [k for k in kids
                           if k["attributes"]["gen_ai.tool.call.id"] == call["callId"]
                           and _t(k["start_time"]) == _t(call["ts"])]
                ta = tool["attributes"]
                assert ta["gen_ai.operation.name"] == "execute_tool"
                label = call.get("name") or call.get("title") or "tool"
                assert tool["name"] == f"execute_tool {label}"
                assert ta["gen_ai.tool.name"] == label
                if "kind" in call:
                    assert ta["acp.tool.kind"] == call["kind"]
                results = [r for r in recs if r["type"] == "tool_result"
                           and r["callId"] == call["callId"] and "ts" in r]
                if results:
                    assert ta["acp.tool.status"] == results[-1]["status"]
                    assert tool["status_code"] == {"completed": "OK", "failed": "ERROR"}.get(
                        results[-1]["status"], "UNSET")
                assert _t(span["start_time"]) <= _t(tool["start_time"])
                assert _t(tool["end_time"]) <= _t(span["end_time"])
        # permissions: an event each, at the permission's time, on a span of the session
        perms = [r for r in live if r["type"] == "permission"]
        events = [(e, s) for s in mine for e in s["events"] if e["name"] == "acp.permission"]
        assert len(events) == len(perms), (name, sid)
        for p in perms:
            (got, on), = [(e, s) for e, s in events
                          if e["attributes"]["acp.permission.request_id"] == p["requestId"]]
            assert _t(got["timestamp"]) == _t(p["ts"])
            if "decision" in p:
                assert got["attributes"]["acp.permission.decision"] == p["decision"]
            call = (p.get("subject") or {}).get("callId")
            if call is not None and on["name"].startswith("execute_tool"):
                assert on["attributes"]["gen_ai.tool.call.id"] == call
        # every span's parent is in the session's trace, but the root's
        for s in mine:
            if s is not root:
                assert s["parent_id"] in by_id, (name, s["name"])
                assert by_id[s["parent_id"]]["context"]["trace_id"] in traces


def test_phoenix_a_session_with_trace_context_joins_its_trace(exported):
    """ASR-708: the first traceparent the session's records carry is the parent of the
    session span, so the session is one trace with what the agent's caller traced."""
    records, spans = exported["ASR-708-trace-context"]
    first = next(r["_meta"]["traceparent"] for r in records if "traceparent" in r.get("_meta", {}))
    _, trace, parent, _ = first.split("-")
    roots = [s for s in spans if s["name"].startswith("session ")]
    assert [(s["context"]["trace_id"], s["parent_id"]) for s in roots] == [(trace, parent)]
    assert {s["context"]["trace_id"] for s in spans} == {trace}


def test_phoenix_usage_and_cost_are_gen_ai_usage(exported):
    """ASR-720: the last usage_update of a session (context window, cost) on its span."""
    records, spans = exported["ASR-720-usage"]
    last = [r for r in records if r["type"] == "usage_summary"][-1]
    (root,) = [s for s in spans if s["name"].startswith("session ")]
    a = root["attributes"]
    assert a["gen_ai.usage.context_window.used"] == last["contextWindow"]["used"]
    assert a["gen_ai.usage.context_window.size"] == last["contextWindow"]["size"]
    assert a["gen_ai.usage.cost.amount"] == last["cost"]["amount"]
    assert a["gen_ai.usage.cost.currency"] == last["cost"]["currency"]


def test_phoenix_a_real_agents_session(exported):
    """fast-agent's five prompts are five turns, its three tools ran in turns 2-4, one
    span each (the shell call's permission, asked under `pending`, an ID fast-agent never
    announces, names no call of its own: docs/asr.md, the v1 mapping), each permission
    on its turn."""
    records, spans = exported["fast-agent"]
    turns = [s for s in spans if s["name"].startswith("invoke_agent ")]
    assert len(turns) == 5
    tools = sorted(s["attributes"]["gen_ai.tool.name"] for s in spans
                   if s["name"].startswith("execute_tool "))
    assert tools == ["execute", "read_text_file", "write_text_file"]
    asked = [e for s in spans for e in s["events"] if e["name"] == "acp.permission"]
    assert len(asked) == sum(1 for r in records if r["type"] == "permission") >= 2


def test_phoenix_export_again_gives_the_same_ids(exported, phoenix, recordings, tmp_path):
    """IDs come from the session: the spans a second export writes have the IDs Phoenix
    already holds (written to OTLP/JSON here, to compare without sending twice)."""
    out = tmp_path / "again.json"
    r = run_tool("export", "otlp", str(recordings["fast-agent"]), "-o", str(out),
                 "--id-namespace", "fast-agent")
    assert r.returncode == 0, r.stderr
    ids = {s["spanId"] for line in out.read_bytes().splitlines()
           for rs in orjson.loads(line)["resourceSpans"]
           for ss in rs["scopeSpans"] for s in ss["spans"]}
    _, spans = exported["fast-agent"]
    assert ids == {s["context"]["span_id"] for s in spans}


def test_phoenix_takes_a_corpus_from_acp_batch(phoenix, tmp_path):
    """acp-batch export --endpoint: every recording's spans reach the collector (as many
    as acp-export writes for each), and a rerun sends nothing again."""
    corpus = REPO / "examples" / "batch" / "wire"
    project = "acp-batch-corpus"
    args = ["export", str(corpus), "--endpoint", phoenix, "-o", str(tmp_path / "sent"),
            "--resource", f"openinference.project.name={project}", "--id-namespace", "batch"]
    r = run_tool("batch", *args, "-j", "2", timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    want = 0
    for wire in sorted(corpus.rglob("*.jsonl")):
        out = run_tool("export", "otlp", str(wire), "--id-namespace", "batch").stdout
        want += sum(len(ss["spans"]) for line in out.splitlines()
                    for rs in orjson.loads(line)["resourceSpans"] for ss in rs["scopeSpans"])
    deadline = time.monotonic() + 60
    while len(_spans(phoenix, project) if _has(phoenix, project) else []) < want:
        assert time.monotonic() < deadline
        time.sleep(0.5)
    assert len(_spans(phoenix, project)) == want
    again = run_tool("batch", *args, timeout=300)
    assert again.returncode == 0 and b"0 done" in again.stderr, again.stderr


def _has(base: str, project: str) -> bool:
    return any(p["name"] == project for p in _get(base + "/v1/projects")["data"])


def test_phoenix_missing_is_a_failure_not_a_skip():
    """The module is collected only with ACP_PIPES_PHOENIX; then no Phoenix fails."""
    assert os.environ.get("ACP_PIPES_PHOENIX")
    assert Path(PHOENIX).exists(), "make test-export installs Phoenix"

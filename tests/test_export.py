"""acp-export otlp: OTLP/JSON out of any stage, the GenAI mapping rule by rule.

The receiver side (spans sent over OTLP/HTTP and read back from a real collector) is
tests/test_export_phoenix.py (`make test-export`); here the OTLP/JSON output, which is
the same spans through the same encoder, is read back and checked.
"""

from __future__ import annotations

import base64
import gzip
import socket
import sys

import orjson
import pytest

from tests.conftest import REPO, run_tool

FIX = REPO / "tests" / "fixtures" / "asr"


def _value(v: dict):
    (kind, x), = v.items()
    if kind == "intValue":
        return int(x)
    if kind == "arrayValue":
        return [_value(i) for i in x.get("values", [])]
    return x


def _attrs(obj: dict) -> dict:
    return {a["key"]: _value(a["value"]) for a in obj.get("attributes", [])}


def spans_of(out: bytes) -> list[dict]:
    """Every span of OTLP/JSON lines, its attributes as a dict, its resource beside it."""
    got = []
    for line in out.splitlines():
        for rs in orjson.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    got.append({**s, "attrs": _attrs(s), "resource": _attrs(rs["resource"]),
                                "scope": ss["scope"]})
    return got


def export(*args: str, input: bytes | None = None) -> bytes:
    r = run_tool("export", "otlp", *args, input=input, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


def _named(spans: list[dict], prefix: str) -> list[dict]:
    return [s for s in spans if s["name"].startswith(prefix)]


def test_the_output_is_otlp_json_the_protobuf_reads_back(tmp_path):
    """Each line is an ExportTraceServiceRequest in OTLP/JSON: the protobuf JSON mapping
    with hex IDs; with the IDs as the mapping wants them (base64) it parses into the
    protobuf message, and that message gives the same JSON again."""
    from google.protobuf.json_format import MessageToDict, ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    out = export(str(FIX / "ASR-716-v1-permission" / "wire.jsonl"))
    lines = out.splitlines()
    assert lines and out.endswith(b"\n")
    for line in lines:
        doc = orjson.loads(line)
        b64 = orjson.loads(line)
        for rs in b64["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    assert len(s["traceId"]) == 32 and len(s["spanId"]) == 16
                    for k in ("traceId", "spanId", "parentSpanId"):
                        if k in s:
                            s[k] = base64.b64encode(bytes.fromhex(s[k])).decode()
        msg = ParseDict(b64, ExportTraceServiceRequest())
        again = MessageToDict(msg, use_integers_for_enums=True)
        assert again == b64
        assert doc["resourceSpans"][0]["scopeSpans"][0]["scope"]["name"] == "acp-pipes.acp-export"


def test_every_stage_gives_the_same_spans(tmp_path):
    """A wire log, its frames, its folded entities and its ASR stream export to the same
    bytes: the export reads the ASR stream acp-asr would write (DESIGN: any stage in)."""
    wire = FIX / "ASR-705-v1-turn-end" / "wire.jsonl"
    stages = {}
    for tool in ("frame", "fold", "asr"):
        r = run_tool(tool, str(wire))
        assert r.returncode == 0
        stages[tool] = tmp_path / f"{tool}.jsonl"
        stages[tool].write_bytes(r.stdout)
    direct = export(str(wire))
    for tool, path in stages.items():
        assert export(str(path)) == direct, tool
    assert export(input=stages["asr"].read_bytes()) == direct  # stdin too
    assert export(str(wire)) == direct  # and again: IDs and times from the recording


def test_turns_v1_request_to_response_with_the_stop_reason():
    """One invoke_agent span per prompt turn under the session span, from the prompt's
    receipt to its answer; the stop reason as gen_ai.response.finish_reasons; a refusal
    and a JSON-RPC error are errors; a call still open when its turn ends ends there."""
    asr = run_tool("asr", str(FIX / "ASR-705-v1-turn-end" / "wire.jsonl")).stdout
    recs = [orjson.loads(x) for x in asr.splitlines()]
    spans = spans_of(export(str(FIX / "ASR-705-v1-turn-end" / "wire.jsonl")))
    (root,) = _named(spans, "session ")
    turns = sorted(_named(spans, "invoke_agent "), key=lambda s: s["attrs"]["acp.turn.number"])
    assert {s["traceId"] for s in spans} == {root["traceId"]}
    assert "parentSpanId" not in root
    assert all(t["parentSpanId"] == root["spanId"] for t in turns)
    assert all(t["kind"] == 3 for t in turns)  # CLIENT: the agent is another process
    assert root["attrs"]["gen_ai.conversation.id"] == "s"
    assert [t["attrs"].get("gen_ai.response.finish_reasons") for t in turns] == [
        ["end_turn"], ["refusal"], ["cancelled"], None]
    assert [t.get("status", {}).get("code") for t in turns] == [1, 2, 1, 2]
    assert turns[3]["status"]["message"] == "Authentication required"
    assert turns[3]["attrs"]["error.type"] == "-32000"
    prompts = [r for r in recs if r.get("origin") == "prompt"]
    idles = [r for r in recs if r.get("state") == "idle"]
    from acp_pipes.export.fields import ts_ns

    for turn, prompt, idle in zip(turns, prompts, idles, strict=False):
        assert int(turn["startTimeUnixNano"]) == ts_ns(prompt["ts"])
        assert int(turn["endTimeUnixNano"]) == ts_ns(idle["ts"])
        assert turn["attrs"]["acp.prompt.message_id"] == prompt["messageId"]
    (build,) = _named(spans, "execute_tool ")
    assert build["parentSpanId"] == turns[2]["spanId"]
    assert build["endTimeUnixNano"] == turns[2]["endTimeUnixNano"]  # open at the turn's end
    assert build["attrs"]["acp.tool.kind"] == "execute"
    assert "acp.tool.status" not in build["attrs"]


def test_turns_v2_running_to_idle(tmp_path):
    """v2: the turn runs from the agent's `running` to its `idle` (the prompt request
    came before; its time stays the prompt message's)."""
    header = {"type": "header", "asr": "1.0", "sessionId": "v2", "agent": {"name": "a"}}
    recs = [
        {"type": "message", "seq": 1, "id": "r1", "ts": "2025-01-01T00:00:01.000000Z",
         "messageId": "u", "role": "user", "origin": "prompt", "content": []},
        {"type": "state", "seq": 2, "id": "r2", "ts": "2025-01-01T00:00:01.500000Z",
         "state": "running"},
        {"type": "state", "seq": 3, "id": "r3", "ts": "2025-01-01T00:00:04.250000Z",
         "state": "idle", "stopReason": "max_tokens",
         "usage": {"inputTokens": 10, "outputTokens": 3, "cachedReadTokens": 2}},
    ]
    from acp_pipes.export import spans_of as mapped

    (turn,) = [s for s in mapped(header, recs) if s.name == "invoke_agent a"]
    assert (turn.start, turn.end) == (1735689601_500000000, 1735689604_250000000)
    assert turn.attributes["gen_ai.response.finish_reasons"] == ["max_tokens"]
    assert turn.attributes["gen_ai.usage.input_tokens"] == 10
    assert turn.attributes["gen_ai.usage.output_tokens"] == 3
    assert turn.attributes["gen_ai.usage.cache_read.input_tokens"] == 2


def test_tool_calls_name_kind_status_input_output_capped():
    """ASR-714: an execute_tool span per call with its name, kind, status, input and
    output; --max-attribute-bytes cuts both, their whole size kept beside them."""
    wire = str(FIX / "ASR-714-tool-result" / "wire.jsonl")
    tools = {s["attrs"]["gen_ai.tool.call.id"]: s for s in _named(spans_of(export(wire)),
                                                                  "execute_tool ")}
    run = tools["c1"]
    assert run["name"] == "execute_tool run"
    assert run["attrs"]["gen_ai.tool.name"] == "run"
    assert run["attrs"]["acp.tool.kind"] == "execute"
    assert run["attrs"]["gen_ai.tool.call.arguments"] == '{"cmd":"pytest"}'
    assert run["attrs"]["gen_ai.tool.call.result"] == '{"exit":1}'
    assert run["attrs"]["acp.tool.status"] == "failed"
    assert run["status"]["code"] == 2 and run["attrs"]["error.type"] == "tool_call_failed"
    assert tools["c2"]["name"] == "execute_tool tool"  # no name, no title (capture: absent)
    assert tools["c2"]["status"]["code"] == 1
    small = {s["attrs"]["gen_ai.tool.call.id"]: s for s in _named(
        spans_of(export(wire, "--max-attribute-bytes", "5")), "execute_tool ")}
    assert small["c1"]["attrs"]["gen_ai.tool.call.arguments"] == '{"cmd'
    assert small["c1"]["attrs"]["acp.tool.call.arguments.size"] == 16


def test_permissions_and_elicitations_are_events():
    """ASR-716 and ASR-734: a permission about a call is an event on the call's span, one
    about nothing in a turn on the session; an elicitation likewise, with its status."""
    spans = spans_of(export(str(FIX / "ASR-716-permission" / "wire.jsonl")))
    (rm,) = _named(spans, "execute_tool rm")
    (ev,) = rm["events"]
    assert ev["name"] == "acp.permission"
    assert _attrs(ev)["acp.permission.decision"] == "reject_always"
    assert _attrs(ev)["gen_ai.tool.call.id"] == "c1"
    (root,) = _named(spans, "session ")
    assert [_attrs(e).get("acp.permission.status") for e in root["events"]
            if e["name"] == "acp.permission"] == ["resolved", "pending"]
    spans = spans_of(export(str(FIX / "ASR-734-elicitation" / "wire.jsonl")))
    asked = [_attrs(e) for s in spans for e in s["events"] if e["name"] == "acp.elicitation"]
    assert [(a["acp.elicitation.mode"], a["acp.elicitation.status"]) for a in asked] == [
        ("form", "answered"), ("url", "answered"), ("form", "cancelled"),
        ("_acme_voice", "pending")]
    assert "acp.elicitation.response" not in str(asked)  # the answers stay in the stream


def test_usage_and_cost():
    """ASR-720: usage_update's context window and cost, the last of the session."""
    (root,) = _named(spans_of(export(str(FIX / "ASR-720-usage" / "wire.jsonl"))), "session ")
    a = root["attrs"]
    assert (a["gen_ai.usage.context_window.used"], a["gen_ai.usage.context_window.size"]) == (
        5400, 200000)
    assert (a["gen_ai.usage.cost.amount"], a["gen_ai.usage.cost.currency"]) == (0.12, "USD")


def test_subagents_and_forks_are_links():
    """ASR-721: the parent's turn links to the subagent's session span, the subagent's
    session span links back; ASR-718: a fork links to its parent, and the history
    replayed into it is no turn."""
    spans = spans_of(export(str(FIX / "ASR-721-subagents" / "wire.jsonl")))
    roots = {s["attrs"]["acp.session.id"]: s for s in _named(spans, "session ")}
    (turn,) = [s for s in _named(spans, "invoke_agent ")
               if s["attrs"]["gen_ai.conversation.id"] == "parent"]
    (link,) = turn["links"]
    assert (link["traceId"], link["spanId"]) == (roots["kid"]["traceId"], roots["kid"]["spanId"])
    assert _attrs(link)["acp.link.type"] == "subagent"
    (back,) = roots["kid"]["links"]
    assert (back["traceId"], back["spanId"]) == (roots["parent"]["traceId"],
                                                 roots["parent"]["spanId"])
    assert roots["kid"]["traceId"] != roots["parent"]["traceId"]  # one trace per session
    spans = spans_of(export(str(FIX / "ASR-718-fork-lineage" / "wire.jsonl")))
    roots = {s["attrs"]["acp.session.id"]: s for s in _named(spans, "session ")}
    (fork,) = roots["child"]["links"]
    assert _attrs(fork) == {"acp.link.type": "forked_from", "gen_ai.conversation.id": "parent"}
    assert fork["spanId"] == roots["parent"]["spanId"]
    child_turns = [s for s in _named(spans, "invoke_agent ")
                   if s["attrs"]["gen_ai.conversation.id"] == "child"]
    assert [t["attrs"]["acp.prompt.message_id"] for t in child_turns] == ["u2"]
    assert roots["child"]["attrs"]["acp.session.replayed_records"] == 3


def test_a_traceparent_is_the_parent():
    """ASR-708: the first traceparent the session's records carry: the session joins that
    trace, its span a child of the remote span."""
    spans = spans_of(export(str(FIX / "ASR-708-trace-context" / "wire.jsonl")))
    assert {s["traceId"] for s in spans} == {"1" * 32}
    (root,) = _named(spans, "session ")
    assert root["parentSpanId"] == "1" * 16
    assert root["flags"] == 0x300  # has-is-remote, is-remote


def test_id_namespace_keeps_sessions_of_the_same_id_apart():
    wire = str(FIX / "ASR-705-v1-turn-end" / "wire.jsonl")
    plain = {s["spanId"] for s in spans_of(export(wire))}
    other = {s["spanId"] for s in spans_of(export(wire, "--id-namespace", "run-2"))}
    assert plain and other and not plain & other


def test_resources_are_the_agent():
    spans = spans_of(export(str(FIX / "ASR-705-v1-turn-end" / "wire.jsonl"),
                            "--resource", "deployment.environment.name=ci"))
    assert {orjson.dumps(s["resource"]) for s in spans} == {orjson.dumps(
        {"service.name": "org.agent-session.acp.fixture-agent", "service.version": "1.2.3",
         "deployment.environment.name": "ci"})}


def test_o_writes_the_file_stdout_would_get(tmp_path):
    wire = str(FIX / "ASR-705-v1-turn-end" / "wire.jsonl")
    out = tmp_path / "spans.json"
    r = run_tool("export", "otlp", wire, "-o", str(out))
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    assert out.read_bytes() == export(wire)


def test_bad_input_is_named_and_what_came_before_is_kept(tmp_path):
    """A line that is not JSON is reported with file and line and skipped; an input cut
    short exports what was read, then says where it stopped (exit 2)."""
    asr = run_tool("asr", str(FIX / "ASR-705-v1-turn-end" / "wire.jsonl")).stdout
    lines = asr.splitlines(keepends=True)
    bad = tmp_path / "bad.asr.jsonl"
    bad.write_bytes(b"".join(lines[:3]) + b"{not json\n" + b"".join(lines[3:]))
    r = run_tool("export", "otlp", str(bad))
    assert r.returncode == 0
    assert r.stderr.decode().startswith(f"acp-export: {bad}:4: ")
    assert len(_named(spans_of(r.stdout), "invoke_agent ")) == 4
    cut = tmp_path / "cut.asr.jsonl.gz"
    cut.write_bytes(gzip.compress(asr)[:-12])
    r = run_tool("export", "otlp", str(cut))
    assert r.returncode == 2 and str(cut) in r.stderr.decode(), r.stderr
    assert b"Traceback" not in r.stderr and _named(spans_of(r.stdout), "session ")
    nope = run_tool("export", "otlp", str(tmp_path / "nope.jsonl"))
    assert nope.returncode == 2 and b"nope.jsonl" in nope.stderr
    bare = tmp_path / "client.jsonl"
    bare.write_bytes((REPO / "examples" / "hello" / "client.jsonl").read_bytes())
    r = run_tool("export", "otlp", str(bare))
    assert r.returncode == 2
    assert r.stderr.decode().startswith(f"acp-export: {bare}:1: ")
    assert b"one direction" in r.stderr


def test_a_collector_that_is_not_there_is_said_at_once_and_retried():
    """Nothing listening: the reason on the first try, each retry said, the last line
    the verdict (it used to be 7 s of silence, then "did not take the spans")."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1/traces"
    r = run_tool("export", "otlp", str(FIX / "ASR-705-v1-turn-end" / "wire.jsonl"),
                 "--endpoint", f"http://127.0.0.1:{port}", "--retries", "1", timeout=120)
    why = "connection refused (is a collector listening there?)"
    assert (r.returncode, r.stderr.decode()) == (2, (
        f"acp-export: {url}: {why}; retrying in 1 s (try 2 of 2)\n"
        f"acp-export: {url}: {why}; 2 tries (0 spans sent before)\n"))


class _Collector:
    """A real HTTP server on 127.0.0.1 answering each POST with the next of ``answers``
    (status, headers, body), keeping the request bodies (OTLP protobuf)."""

    def __init__(self, answers: list[tuple[int, dict[str, str], bytes]]):
        import http.server
        import threading

        self.answers, self.bodies = list(answers), []
        me = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                me.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
                status, headers, body = me.answers.pop(0)
                self.send_response(status)
                for k, v in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _export_to(collector: _Collector, *args: str):
    return run_tool("export", "otlp", str(FIX / "ASR-705-v1-turn-end" / "wire.jsonl"),
                    "--endpoint", collector.url, *args, timeout=120)


def test_a_refusal_is_said_at_once_with_the_collectors_words():
    """HTTP 501 is no answer to wait out: one request, its status and the start of its
    body, exit 2."""
    collector = _Collector([(501, {"Content-Type": "text/plain"}, b"traces\x1b[31m: not here\n")])
    try:
        r = _export_to(collector)
    finally:
        collector.close()
    assert len(collector.bodies) == 1
    assert (r.returncode, r.stderr.decode()) == (2, (
        f"acp-export: {collector.url}: HTTP 501 Not Implemented: traces\\u001b[31m: not "
        "here (0 spans sent before)\n"))


def test_a_busy_collector_is_retried_as_it_asks_then_takes_the_spans():
    """503 with Retry-After 0, then 200: one line says the retry, and the spans the
    collector finally took are the ones refused before (real protobuf, parsed)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    collector = _Collector([(503, {"Retry-After": "0"}, b"busy"), (200, {}, b"")])
    try:
        r = _export_to(collector)
    finally:
        collector.close()
    assert r.returncode == 0, r.stderr
    assert r.stderr.decode() == (
        f"acp-export: {collector.url}: HTTP 503 Service Unavailable: busy; retrying in 0 s "
        "(try 2 of 5)\n"
        f"acp-export: 1 session, 6 spans sent to {collector.url}\n")
    first, second = collector.bodies
    assert first == second
    request = ExportTraceServiceRequest.FromString(second)
    spans = [sp for rs in request.resource_spans for ss in rs.scope_spans for sp in ss.spans]
    assert len(spans) == 6


def test_without_the_sdk_the_error_names_the_extra(tmp_path):
    """The OpenTelemetry SDK is the optional extra ``export``: where it is not installed
    (a package of that name that cannot be imported, shadowing the real one) acp-export
    says what to install, before reading anything."""
    shadow = tmp_path / "site" / "opentelemetry"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('not installed')\n")
    import os
    import subprocess

    from tests.conftest import tool_argv, tool_env

    env = tool_env()
    env["PYTHONPATH"] = str(tmp_path / "site") + os.pathsep + env["PYTHONPATH"]
    r = subprocess.run(tool_argv("export", "otlp", str(FIX / "ASR-705-v1-turn-end" /
                                                        "wire.jsonl")),
                       capture_output=True, env=env, timeout=60)
    assert (r.returncode, r.stdout) == (2, b"")
    from acp_pipes.extras import install_hint

    hint = install_hint("export")  # the checkout's .venv: its python, its pip
    assert hint.startswith(f"{sys.executable} -m pip install 'opentelemetry-sdk>=")
    assert r.stderr.decode() == (
        "acp-export: the OpenTelemetry SDK is not installed (acp-export otlp needs it, "
        f"acp-pipes' extra 'export'): {hint}\n")


@pytest.mark.parametrize("bad", ["--endpoint", "ftp://x", "--header", "nokey"])
def test_usage_errors(bad):
    args = ["--endpoint", "ftp://x"] if bad == "ftp://x" else (
        ["--header", "x"] if bad == "nokey" else ["--endpoint"])
    r = run_tool("export", "otlp", str(FIX / "ASR-705-v1-turn-end" / "wire.jsonl"), *args)
    assert r.returncode == 2 and b"Traceback" not in r.stderr




def test_a_recording_without_a_session_is_said_and_exports_nothing(tmp_path):
    """As acp-asr: the agent never answered session/new, so there is nothing to export;
    read correctly (exit 0), said on stderr naming the input."""
    wire = tmp_path / "nosession.jsonl"
    lines = (FIX / "ASR-705-v1-turn-end" / "wire.jsonl").read_bytes().splitlines(keepends=True)
    wire.write_bytes(b"".join(lines[:3]))
    for args in (["otlp"], ["agent-trail", "-o", str(tmp_path / "trails")]):
        r = run_tool("export", *args, str(wire))
        assert (r.returncode, r.stdout) == (0, b"")
        assert r.stderr.decode() == (f"acp-export: {wire}: the recording holds no session: "
                                     "no session/new was answered\n")

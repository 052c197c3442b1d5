"""acp-replay --serve: a read-only ACP v2 agent on stdio that serves stored sessions.

Over real pipes: initialize, session/list, session/resume with replayFrom start (history,
then the current state_update, then the response, as the v2 schema requires), a refused
prompt, -32601 for unknown methods, session/close; every frame it sends checked against
the official schema. Then the official TypeScript SDK client opens a recorded session.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.acp_schema import check_conversation
from tests.conftest import REPO, record_lockstep, run_tool, tool_argv, tool_env

pytestmark = pytest.mark.process  # processes are the point: real pipes, signals, exits

FIXTURES = REPO / "tests" / "fixtures" / "replay"
CLIENTS = REPO / "tests" / "clients"
NODE = shutil.which("node")


def req(rid, method, params):
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def converse(client: list[bytes], *streams: Path,
             extra=()) -> tuple[list, subprocess.CompletedProcess]:
    r = run_tool("replay", "--serve", *map(str, streams), *extra,
                 input=b"".join(c + b"\n" for c in client), timeout=60)
    return [orjson.loads(x) for x in r.stdout.splitlines()], r


def test_serve_conversation_is_valid_acp_v2():
    a = FIXTURES / "ASR-724-725-path-order-latest-revision" / "stream.asr.jsonl"
    b = FIXTURES / "ASR-728-tool-status-mapping" / "stream.asr.jsonl"
    client = [
        req(0, "initialize", {"protocolVersion": 2, "info": {"name": "t", "version": "1"},
                              "capabilities": {}}),
        req(1, "session/list", {}),
        req(2, "session/resume", {"sessionId": "s", "cwd": "/ws/app",
                                  "replayFrom": {"type": "start"}}),
        req(3, "session/prompt", {"sessionId": "s", "prompt": [{"type": "text", "text": "x"}]}),
        req(4, "session/close", {"sessionId": "s"}),
        orjson.dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}),
    ]
    frames, r = converse(client, a)
    assert r.returncode == 0, r.stderr
    client_kinds, agent_kinds = check_conversation([orjson.loads(c) for c in client], frames)
    assert frames[0]["result"]["protocolVersion"] == 2
    assert frames[1]["result"]["sessions"] == [{"sessionId": "s", "cwd": "/ws/app",
                                                "title": "Planning"}]
    # history, then the current state_update, then the response to session/resume
    resume_at = next(i for i, f in enumerate(frames) if f.get("id") == 2)
    history = frames[2:resume_at]
    expected = (FIXTURES / "ASR-724-725-path-order-latest-revision" /
                "expected.acp.jsonl").read_bytes().splitlines()
    assert history == [orjson.loads(x) for x in expected]
    assert history[-1]["params"]["update"]["sessionUpdate"] == "state_update"
    prompt = next(f for f in frames if f.get("id") == 3)
    assert prompt["error"]["data"] == {"readOnly": True}
    assert "read-only" in prompt["error"]["message"]
    assert next(f for f in frames if f.get("id") == 4) == {"jsonrpc": "2.0", "id": 4,
                                                            "result": {}}
    assert len(frames) == resume_at + 3  # the cancel notification gets no answer
    # ASR-731 on resume: the loss report on stderr
    assert b'"complete":false' in r.stderr
    del b


def test_serve_several_streams_errors_and_no_replay():
    a = FIXTURES / "ASR-724-725-path-order-latest-revision" / "stream.asr.jsonl"
    renamed = ["--session-id", "other"]
    client = [
        req(1, "session/list", {"cwd": "/nowhere"}),
        req(2, "session/resume", {"sessionId": "nope", "cwd": "/ws/app"}),
        req(3, "session/resume", {"sessionId": "other", "cwd": "/ws/app"}),
        req(4, "session/resume", {"sessionId": "other", "cwd": "/ws/app",
                                  "replayFrom": {"type": "_later"}}),
        req(5, "no/such", {}),
        req(6, "session/new", {"cwd": "/ws/app"}),
        b"{not json",
    ]
    frames, r = converse(client, a, extra=renamed)
    assert r.returncode == 0, r.stderr
    assert frames[0]["result"] == {"sessions": []}
    assert frames[1]["error"]["code"] == -32002
    # no replayFrom: only the current state_update, then the response
    assert frames[2]["params"]["update"] == {"sessionUpdate": "state_update", "state": "idle",
                                             "stopReason": "end_turn"}
    assert frames[2]["params"]["sessionId"] == "other"
    assert frames[3] == {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert frames[4]["error"]["code"] == -32602
    assert frames[5]["error"]["code"] == -32601
    assert frames[6]["error"]["code"] == -32603
    assert frames[7]["error"]["code"] == -32700 and frames[7]["id"] is None


def test_serve_usage_errors(tmp_path: Path):
    r = run_tool("replay", "--serve", input=b"")
    assert r.returncode == 2 and b"--serve needs" in r.stderr
    r = run_tool("replay", "--serve", str(tmp_path / "missing.asr.jsonl"), input=b"")
    assert r.returncode == 2 and b"Traceback" not in r.stderr


pytestmark_sdk = pytest.mark.skipif(
    not os.environ.get("CI")
    and (NODE is None or not (CLIENTS / "node_modules" / "@agentclientprotocol" / "sdk").is_dir()),
    reason="needs node and `npm ci` in tests/clients (make install)",
)


@pytest.mark.slow  # the official TypeScript SDK on node
@pytestmark_sdk
def test_official_sdk_client_opens_a_recorded_session(tmp_path: Path):
    """Record an echo-agent session (acp-tee), convert it (acp-asr), serve it: the SDK
    client lists it, resumes it, gets the history it parsed and validated, is refused a
    prompt, and closes it."""
    from acp_pipes.echo.client import client_session

    wire = tmp_path / "w.jsonl"
    record_lockstep(list(client_session(3, permission_every=2)), wire, tmp=tmp_path)
    stream = tmp_path / "s.asr.jsonl"
    r = run_tool("asr", str(wire), "-o", str(stream))
    if not stream.is_file():  # -o may name a directory of streams
        stream = next(stream.glob("*.asr.jsonl"))
    assert r.returncode == 0, r.stderr
    proc = subprocess.run(
        [NODE, str(CLIENTS / "sdk_serve_client.mjs"), "sess-1", "--",
         *tool_argv("replay", "--serve", str(stream))],
        capture_output=True, env=tool_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    steps = {x.get("step", "done"): x for x in map(orjson.loads, proc.stdout.splitlines())}
    assert steps["initialize"] == {"step": "initialize", "protocolVersion": 2,
                                   "agent": "acp-replay"}
    assert steps["list"]["sessions"] == [{"sessionId": "sess-1", "cwd": "/tmp/acp-echo"}]
    assert steps["resume"]["response"] == {}
    updates = steps["updates"]["updates"]
    assert all(u["sessionId"] == "sess-1" for u in updates)
    kinds = [u["update"]["sessionUpdate"] for u in updates]
    assert kinds.count("user_message") == 3 and kinds.count("agent_message") == 3
    assert kinds.count("tool_call_update") == 3 and kinds[-1] == "state_update"
    texts = [u["update"]["content"][0]["text"] for u in updates
             if u["update"]["sessionUpdate"] == "agent_message"]
    assert texts == ["Echo: hello 1", "Echo: /permission hello 2", "Echo: hello 3"]
    assert updates[-1]["update"]["state"] == "idle"
    assert steps["prompt"]["refused"] is True and steps["prompt"]["code"] == -32603
    assert "close" in steps and steps["done"]["done"] is True


def test_serve_answers_ids_as_sent_and_refuses_ids_json_rpc_does_not_allow():
    """An object, array or boolean id is -32600 with a null id (never echoed); integers
    past 2^53, and past 64 bits, come back exactly (never as floats); a lone surrogate in
    a string id comes back as sent."""
    a = FIXTURES / "ASR-724-725-path-order-latest-revision" / "stream.asr.jsonl"
    lines = [b'{"jsonrpc":"2.0","id":{"a":1},"method":"session/list","params":{}}',
             b'{"jsonrpc":"2.0","id":[1],"method":"session/list","params":{}}',
             b'{"jsonrpc":"2.0","id":true,"method":"session/list","params":{}}',
             b'{"jsonrpc":"2.0","id":9007199254740993,"method":"session/list","params":{}}',
             b'{"jsonrpc":"2.0","id":-36893488147419103233,"method":"session/list"}',
             b'{"jsonrpc":"2.0","id":"\\ud800x","method":"session/list","params":{}}']
    r = run_tool("replay", "--serve", str(a), input=b"".join(x + b"\n" for x in lines),
                 timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert len(out) == len(lines)
    for line in out[:3]:
        frame = orjson.loads(line)
        assert frame["id"] is None and frame["error"]["code"] == -32600, line
    assert out[3].startswith(b'{"jsonrpc":"2.0","id":9007199254740993,"result":')
    assert out[4].startswith(b'{"jsonrpc":"2.0","id":-36893488147419103233,"result":')
    assert out[5].startswith(b'{"jsonrpc":"2.0","id":"\\ud800x","result":')


def test_serve_warns_of_two_streams_with_one_session_id(tmp_path: Path):
    a = FIXTURES / "ASR-724-725-path-order-latest-revision" / "stream.asr.jsonl"
    b = tmp_path / "copy.asr.jsonl"
    b.write_bytes(a.read_bytes().replace(b'"Planning"', b'"Planning again"'))
    frames, r = converse([req(1, "session/list", {})], a, b)
    assert r.returncode == 0, r.stderr
    assert f"acp-replay: {b}:1: session 's' is also the stream at {a}:1".encode() in r.stderr
    assert frames[0]["result"]["sessions"] == [{"sessionId": "s", "cwd": "/ws/app",
                                                "title": "Planning again"}]


def _with_bad_ids(src: Path, dst: Path) -> list[int]:
    """``src`` with an array messageId and an object callId; their line numbers."""
    out, bad = [], []
    for n, line in enumerate(src.read_bytes().splitlines(), 1):
        rec = orjson.loads(line)
        if rec.get("type") == "message" and not bad:
            rec["messageId"] = [rec["messageId"]]
            bad.append(n)
        elif rec.get("type") == "tool_call" and len(bad) == 1:
            rec["callId"] = {"id": rec["callId"]}
            bad.append(n)
        out.append(orjson.dumps(rec) + b"\n")
    dst.write_bytes(b"".join(out))
    assert len(bad) == 2
    return bad


def test_a_record_whose_id_is_no_string_is_reported_and_skipped(tmp_path: Path):
    """ASR identifiers are strings: an array messageId or an object callId is reported
    with its file and line and the record skipped, in every ASR mode; never an internal
    error."""
    src = REPO / "tests/fixtures/asr/ASR-702-identifiers-verbatim/expected.asr.jsonl"
    bad = tmp_path / "bad.asr.jsonl"
    msg_line, call_line = _with_bad_ids(src, bad)
    runs = [run_tool("replay", str(bad)),
            run_tool("replay", "--compare", str(bad), str(src)),
            run_tool("replay", "--serve", str(bad), input=b"", timeout=60)]
    # --compare exits 1: the skipped records are missing, the other stream has them
    for r, status in zip(runs, (0, 1, 0), strict=True):
        assert r.returncode == status, r.stderr
        assert b"internal error" not in r.stderr and b"Traceback" not in r.stderr
        assert (f"{bad}:{msg_line}: message record whose messageId is not a string, "
                "skipped").encode() in r.stderr, r.stderr
        assert (f"{bad}:{call_line}: tool_call record whose callId is not a string, "
                "skipped").encode() in r.stderr, r.stderr
    assert runs[0].stdout  # what else the stream holds is replayed


# -- ACP v1: today's editors --------------------------------------------------------------

ALL_STREAMS = sorted([*FIXTURES.glob("*/stream.asr.jsonl"),
                      *(REPO / "tests" / "fixtures" / "asr").glob("*/expected.asr.jsonl")])


def every_stream_once(tmp_path: Path) -> tuple[Path, list[tuple[str, list[bytes]]]]:
    """Every fixture stream in one file, each under a session ID of its own (the
    fixtures reuse "s"); with the session IDs and each stream's lines."""
    from acp_pipes.asr.reader import read_streams

    out, streams = [], []
    for path in ALL_STREAMS:
        for n, s in enumerate(read_streams(path.read_bytes().splitlines(), str(path))):
            sid = f"{path.parent.name}/{n}/{s.session_id}"
            lines = [orjson.dumps({**s.header, "sessionId": sid}),
                     *map(orjson.dumps, s.records)]
            streams.append((sid, lines))
            out.extend(lines)
    combined = tmp_path / "all.asr.jsonl"
    combined.write_bytes(b"".join(x + b"\n" for x in out))
    return combined, streams


def test_serve_v1_conversation_is_valid_acp_v1(tmp_path: Path):
    """A v1 client (protocol version 1) gets loadSession, session/list, and session/load
    with the history before its response; every frame valid against the v1 schema, its
    stable features alone and with the unstable ones; a prompt is refused."""
    a = FIXTURES / "ASR-724-725-path-order-latest-revision" / "stream.asr.jsonl"
    client = [
        req(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {},
                              "clientInfo": {"name": "t", "version": "1"}}),
        req(1, "session/list", {}),
        req(2, "session/load", {"sessionId": "s", "cwd": "/ws/app", "mcpServers": []}),
        req(3, "session/prompt", {"sessionId": "s", "prompt": [{"type": "text", "text": "x"}]}),
        req(4, "session/resume", {"sessionId": "s", "cwd": "/ws/app"}),
        req(5, "session/close", {"sessionId": "s"}),
    ]
    frames, r = converse(client, a)
    assert r.returncode == 0, r.stderr
    for unstable in (False, True):
        check_conversation([orjson.loads(c) for c in client], frames, "v1", unstable)
    assert frames[0]["result"]["protocolVersion"] == 1
    assert frames[0]["result"]["agentCapabilities"]["loadSession"] is True
    assert "list" in frames[0]["result"]["agentCapabilities"]["sessionCapabilities"]
    assert frames[1]["result"]["sessions"] == [{"sessionId": "s", "cwd": "/ws/app",
                                                "title": "Planning"}]
    load_at = next(i for i, f in enumerate(frames) if f.get("id") == 2)
    expected = (FIXTURES / "ASR-724-725-path-order-latest-revision" /
                "expected.v1.acp.jsonl").read_bytes().splitlines()
    assert frames[2:load_at] == [orjson.loads(x) for x in expected]
    assert frames[load_at]["result"] == {}
    prompt = frames[load_at + 1]
    assert prompt["error"]["data"] == {"readOnly": True}
    assert frames[load_at + 2] == {"jsonrpc": "2.0", "id": 4, "result": {}}  # no history
    assert frames[load_at + 3] == {"jsonrpc": "2.0", "id": 5, "result": {}}
    assert b'"protocol":1' in r.stderr  # the load's loss report


def test_serve_sends_compactions_to_a_v1_client_that_declared_session_compaction():
    """ACP v1 has compaction_update, and an agent "MUST only send this update when the
    Client advertised the `session.compaction` Client capability" (v1 schema): a client
    that declares it gets each compaction as one whole upsert (ASR-725), valid v1; one
    that does not gets none, and the loss report counts them (ASR-731)."""
    stream = REPO / "tests" / "fixtures" / "asr" / "ASR-719-compaction" / "expected.asr.jsonl"
    compactions = [
        {"sessionUpdate": "compaction_update", "compactionId": "k1", "status": "completed",
         "summary": [{"type": "text", "text": "User asked; agent answered."}]},
        {"sessionUpdate": "compaction_update", "compactionId": "k2", "status": "failed",
         "error": "model refused"}]
    for caps, sent in (({"session": {"compaction": {}}}, compactions),
                       ({}, []), ({"session": {"compaction": None}}, [])):
        client = [req(0, "initialize", {"protocolVersion": 1, "clientCapabilities": caps}),
                  req(1, "session/load", {"sessionId": "s", "cwd": "/ws/app",
                                          "mcpServers": []})]
        frames, r = converse(client, stream)
        assert r.returncode == 0, r.stderr
        check_conversation([orjson.loads(c) for c in client], frames, "v1", unstable=False)
        updates = [f["params"]["update"] for f in frames if f.get("method") == "session/update"]
        assert [u for u in updates if u["sessionUpdate"].startswith("compaction")] == sent
        (report,) = [orjson.loads(x) for x in r.stderr.splitlines()]
        assert report["losses"].get("compaction") == (None if sent else 2), caps


def test_serve_v2_client_still_gets_v2(tmp_path: Path):
    """session/load is v1's: a v2 client is told it does not exist."""
    a = FIXTURES / "ASR-724-725-path-order-latest-revision" / "stream.asr.jsonl"
    frames, r = converse([req(0, "initialize", {"protocolVersion": 2}),
                          req(1, "session/load", {"sessionId": "s", "cwd": "/ws/app",
                                                  "mcpServers": []})], a)
    assert frames[0]["result"]["protocolVersion"] == 2
    assert frames[1]["error"]["code"] == -32601


@pytest.mark.slow  # the official Python SDK
def test_official_v1_sdk_client_lists_and_loads_every_stored_session(tmp_path: Path):
    """The official ACP v1 Python SDK as the client: it lists every stream of every
    fixture (v1 and v2 recordings), loads each, and receives every update acp-replay
    --protocol 1 writes for it, with no validation error."""
    from acp_pipes.asr.reader import read_streams
    from acp_pipes.replay.asr.v1 import V1Replay

    combined, streams = every_stream_once(tmp_path)
    proc = subprocess.run(
        [sys.executable, str(CLIENTS / "sdk_v1_load_client.py"), "--",
         *tool_argv("replay", "--serve", str(combined))],
        capture_output=True, env=tool_env(), timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr).decode(errors="replace")
    steps = [orjson.loads(x) for x in proc.stdout.splitlines()]
    assert steps[0] == {"step": "initialize", "protocolVersion": 1, "loadSession": True,
                        "agent": "acp-replay"}
    assert [s["sessionId"] for s in steps[1]["sessions"]] == [sid for sid, _ in streams]
    loads = {s["sessionId"]: s for s in steps if s.get("step") == "load"}
    assert len(loads) == len(streams) > 40
    for sid, lines in streams:
        (stream,) = read_streams(lines, sid)
        sent = list(V1Replay(stream).updates())  # what --protocol 1 writes
        got = [u["update"] for u in loads[sid]["updates"]]
        assert all(u["sessionId"] == sid for u in loads[sid]["updates"])
        assert [u["sessionUpdate"] for u in got] == [u["sessionUpdate"] for u in sent], sid
    assert steps[-2]["step"] == "close" and steps[-1] == {"done": True}
    prompt = next(s for s in steps if s.get("step") == "prompt")
    assert prompt["refused"] is True and prompt["code"] == -32603


# -- hostile lines: each is answered (or, a notification, ignored), and the server goes on --

HOSTILE_STREAM = FIXTURES / "ASR-724-725-path-order-latest-revision" / "stream.asr.jsonl"
CLOSE = b'{"jsonrpc":"2.0","id":"next","method":"session/close","params":{"sessionId":"s"}}'
CLOSED = b'{"jsonrpc":"2.0","id":"next","result":{}}'


def serve_each(lines: list[bytes]) -> list[list[bytes]]:
    """Each line sent to a real ``acp-replay --serve``, followed by a session/close: what
    was answered to each line (the lines before the close's answer). The close is always
    answered last, so the server lived through every line."""
    r = run_tool("replay", "--serve", str(HOSTILE_STREAM),
                 input=b"".join(x + b"\n" + CLOSE + b"\n" for x in lines), timeout=60)
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    answers, current = [], []
    for out in r.stdout.splitlines():
        if out == CLOSED:
            answers.append(current)
            current = []
        else:
            current.append(out)
    assert current == [] and len(answers) == len(lines), r.stdout[:2000]
    return answers


def test_serve_answers_a_line_nested_100000_deep_and_goes_on():
    """The stdlib parser's RecursionError, and orjson's depth limit of 1024, never end the
    server: unterminated brackets are a parse error, a whole deep array an invalid request
    (id null), a request with deep params -32600 under its own id; a notification that
    deep needs no answer."""
    deep = b"[" * 100_000 + b"]" * 100_000
    answers = serve_each([
        b"[" * 100_000,
        deep,
        b'{"jsonrpc":"2.0","id":7,"method":"session/list","params":{"x":' + deep + b"}}",
        b'{"jsonrpc":"2.0","method":"session/cancel","params":' + deep + b"}",
        b'{"jsonrpc":"2.0","id":' + deep + b',"method":"session/list"}',
    ])
    assert answers == [
        [b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: not '
         b'JSON"}}'],
        [b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request: '
         b'not a JSON-RPC 2.0 object"}}'],
        [b'{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid request: '
         b'nested deeper than acp-replay reads"}}'],
        [],
        [b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request: '
         b'the id must be a string, a number or null"}}'],
    ]


def test_serve_answers_a_lone_surrogate_method_with_it_escaped_and_goes_on():
    """``"\\ud800"`` is a valid JSON escape: an unknown method named by it is -32601, its
    name written back as the same escape (orjson cannot write it); so is a session ID."""
    answers = serve_each([
        b'{"jsonrpc":"2.0","id":1,"method":"\\ud800"}',
        b'{"jsonrpc":"2.0","id":2,"method":"session/resume","params":{"sessionId":"a\\udc00"'
        b',"cwd":"/"}}',
        b'{"\\ud800":0,"jsonrpc":"2.0","id":3,"method":"session/close","params":'
        b'{"sessionId":"s"}}',
    ])
    assert answers[0] == [b'{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":'
                          b'"Method not found: \\ud800"}}']
    (resume,) = answers[1]
    assert resume.startswith(b'{"jsonrpc":"2.0","id":2,"error":{"code":-32002,')
    assert b"a\\\\udc00" in resume  # the message quotes the ID's repr
    assert answers[2] == [b'{"jsonrpc":"2.0","id":3,"result":{}}']


def test_serve_echoes_every_number_id_byte_for_byte():
    """Any number id comes back as its token in the request, never re-read: 5000 digits
    (past the interpreter's int limit), ``1e-400`` (a double's 0.0), ``1e400`` (its
    infinity), ``1.50``, ``-0``; and a string id with its escapes as written."""
    ids = [b"9" * 5000, b"-" + b"1" * 5000, b"1e-400", b"1e400", b"1.50", b"-0", b"0.0e0",
           b'"\\u0041\\ud800"', b'"\\/"']
    answers = serve_each([b'{"jsonrpc":"2.0", "id" :\t' + rid +
                          b' ,"method":"session/close","params":{"sessionId":"s","n":'
                          + b"7" * 5000 + b"}}" for rid in ids])
    assert answers == [[b'{"jsonrpc":"2.0","id":' + rid + b',"result":{}}'] for rid in ids]


def test_serve_answers_infinity_and_nan_as_parse_errors():
    """``Infinity``, ``-Infinity`` and ``NaN`` are not JSON (the json module reads them
    unless told not to): -32700 with a null id, as JSON-RPC asks for a line not JSON."""
    parse_error = [b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse '
                   b'error: not JSON"}}']
    lines = [b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"x":Infinity}}',
             b'{"jsonrpc":"2.0","id":-Infinity,"method":"session/list"}',
             b'{"jsonrpc":"2.0","id":2,"method":"session/list","params":[NaN,"\\ud800"]}']
    assert serve_each(lines) == [parse_error] * len(lines)


@pytest.fixture(scope="module")
def live_server():
    """One ``acp-replay --serve`` over real pipes for many lines; a thread reads its
    stdout so a read can time out instead of hanging the test."""
    import queue
    import threading

    proc = subprocess.Popen(tool_argv("replay", "--serve", str(HOSTILE_STREAM)),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=tool_env())
    lines: queue.Queue = queue.Queue()
    reader = threading.Thread(target=lambda: [*map(lines.put, proc.stdout), lines.put(b"")],
                              daemon=True)
    reader.start()
    yield proc, lines
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    err = proc.stderr.read()
    assert b"internal error" not in err and b"Traceback" not in err, err[-2000:]


_TOKENS = [b"{", b"}", b"[", b"]", b":", b",", b" ", b'"', b"\\", b'"jsonrpc"', b'"2.0"',
           b'"id"', b'"method"', b'"params"', b'"session/list"', b'"session/close"',
           b'"sessionId"', b'"s"', b"1", b"-0", b"1e400", b"1e-400", b"9" * 30,
           b"Infinity", b"NaN", b"null", b"true", b'"\\ud800"', b'"\\udc00x"', b"\xff",
           b"\xed\xa0\x80", b"[" * 3000, b"]" * 3000, b"7" * 5000]
_ANY_STRING = st.text(st.characters(blacklist_categories=())  # lone surrogates too, often
                      | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=6)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _ANY_STRING,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_ANY_STRING, inner,
                                                                 max_size=3),
    max_leaves=8)


def _request_shaped(rid, method, params) -> bytes:
    import json

    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                       "params": params}).encode()


_LINES = st.one_of(
    st.binary(max_size=120),
    st.lists(st.sampled_from(_TOKENS), max_size=30).map(b"".join),
    st.builds(_request_shaped, _JSON,
              st.sampled_from(["session/list", "session/close", "session/resume",
                               "initialize", "no/such"]) | _ANY_STRING,
              _JSON),
).map(lambda b: b.replace(b"\n", b" "))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=_LINES)
def test_serve_answers_any_line_with_one_response_or_none_and_lives(live_server, line):
    """Whatever one line holds (bytes, JSON-ish tokens, requests with any values, lone
    surrogates included), the server writes JSON lines, at most one of them a response,
    and still answers the next request."""
    import json

    proc, out = live_server
    proc.stdin.write(line + b"\n" + CLOSE + b"\n")
    proc.stdin.flush()
    responses = 0
    while True:
        got = out.get(timeout=60)
        assert got, "the server ended"
        if got.rstrip(b"\n") == CLOSED:
            break
        frame = json.loads(got.decode("utf-8"))  # UTF-8 JSON, lone surrogates escaped
        responses += "method" not in frame
    assert responses <= 1

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

from tests.acp_schema import check_conversation
from tests.conftest import REPO, record_lockstep, run_tool, tool_argv, tool_env

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


@pytestmark_sdk
def test_official_sdk_client_opens_a_recorded_session(tmp_path: Path):
    """Record an echo-agent session (acp-tee), convert it (acp-asr), serve it: the SDK
    client lists it, resumes it, gets the history it parsed and validated, is refused a
    prompt, and closes it."""
    from acp_pipes.echo_client import client_session

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
    for r in runs:
        assert r.returncode in (0, 1), r.stderr
        assert b"internal error" not in r.stderr and b"Traceback" not in r.stderr
        assert (f"{bad}:{msg_line}: message record whose messageId is not a string, "
                "skipped").encode() in r.stderr, r.stderr
        assert (f"{bad}:{call_line}: tool_call record whose callId is not a string, "
                "skipped").encode() in r.stderr, r.stderr
    assert runs[0].stdout  # what else the stream holds is replayed
    assert runs[1].returncode == 1  # and compared: the skipped records are missing


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


def test_serve_v2_client_still_gets_v2(tmp_path: Path):
    """session/load is v1's: a v2 client is told it does not exist."""
    a = FIXTURES / "ASR-724-725-path-order-latest-revision" / "stream.asr.jsonl"
    frames, r = converse([req(0, "initialize", {"protocolVersion": 2}),
                          req(1, "session/load", {"sessionId": "s", "cwd": "/ws/app",
                                                  "mcpServers": []})], a)
    assert frames[0]["result"]["protocolVersion"] == 2
    assert frames[1]["error"]["code"] == -32601


def test_official_v1_sdk_client_lists_and_loads_every_stored_session(tmp_path: Path):
    """The official ACP v1 Python SDK as the client: it lists every stream of every
    fixture (v1 and v2 recordings), loads each, and receives every update acp-replay
    --protocol 1 writes for it, with no validation error."""
    from acp_pipes.asr.reader import read_streams
    from acp_pipes.replay.v1 import V1Replay

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

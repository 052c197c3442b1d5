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

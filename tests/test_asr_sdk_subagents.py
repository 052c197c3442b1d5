"""A parent resumed with replayFrom replays its subagents' messages too (ASR-707, 717):
recorded under the real acp-tee from an agent built on the official ACP TypeScript SDK
(tests/clients/sdk_subagent_agent.mjs), once on the same connection and once on a new
one, and converted by the real acp-asr. Every replayed message the stream holds is
written once; the subagent report the agent sends only in its replay is history
(observedAt, no ts)."""

from __future__ import annotations

import shutil

import orjson
import pytest

from tests.conftest import REPO, record_lockstep, run_tool

CLIENTS = REPO / "tests" / "clients"
NODE = shutil.which("node")
SDK = CLIENTS / "node_modules" / "@agentclientprotocol" / "sdk"
pytestmark = pytest.mark.slow  # the official TypeScript SDK on node


def _req(rid, method, params):
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


INIT = _req(0, "initialize", {"protocolVersion": 2, "info": {"name": "t", "version": "1"},
                              "capabilities": {}})
RESUME = {"sessionId": "parent-1", "cwd": "/tmp/acp-sdk", "replayFrom": {"type": "start"}}


def test_subagent_history_replayed_on_resume_is_written_once(tmp_path):
    # a missing peer fails, it does not skip (a skip reads as a pass in CI's summary)
    assert NODE is not None and SDK.is_dir(), "needs node and the TypeScript SDK: make peers"
    agent = [NODE, str(CLIENTS / "sdk_subagent_agent.mjs"), str(tmp_path / "state.json")]
    first, second = tmp_path / "first.wire.jsonl", tmp_path / "second.wire.jsonl"
    record_lockstep([INIT, _req(1, "session/new", {"cwd": "/tmp/acp-sdk"}),
                     _req(2, "session/prompt", {"sessionId": "parent-1", "prompt": [
                         {"type": "text", "text": "delegate"}]}),
                     _req(3, "session/resume", RESUME)], first, agent)
    record_lockstep([INIT, _req(1, "session/resume", RESUME)], second, agent)

    out = tmp_path / "streams"
    got = run_tool("asr", str(first), str(second), "-o", str(out))
    assert got.returncode == 0, got.stderr.decode()
    kid = [orjson.loads(x) for x in (out / "parent-1-kid-1.asr.jsonl").read_bytes().splitlines()]
    messages = [r for r in kid if r["type"] == "message"]
    assert [(m["messageId"], m["content"][0]["text"]) for m in messages] == [
        ("k1", "Looking it up"), ("r1", "Report")]
    k1, r1 = messages
    assert "ts" in k1 and "supersedes" not in k1
    assert r1["observedAt"] and "ts" not in r1 and "tsSource" not in r1
    parent = [orjson.loads(x) for x in (out / "parent-1.asr.jsonl").read_bytes().splitlines()]
    ids = [r.get("messageId") or r.get("childSession") for r in parent
           if r["type"] in ("message", "subagent")]
    assert ids == ["u1", "parent-1-kid-1", "a1"]  # nothing replayed twice
    valid = run_tool("asr", "--validate", *map(str, sorted(out.iterdir())))
    assert valid.returncode == 0, valid.stderr.decode()

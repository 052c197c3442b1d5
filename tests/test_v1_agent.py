"""A real ACP v1 session: the SDK agent (tests/clients/v1_agent.py) recorded through the
real acp-tee, driven by the official Python SDK's client side, converted by acp-asr.

Two connections, as an editor makes them: the first creates a session and prompts
twice; the second (a new agent process) loads the session, which the agent replays,
and prompts once more. Every stream validates; its messages, thoughts, tool calls,
diffs, plans and permissions are what the agent sent, as the client saw them; the
replay writes nothing the stream already holds.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import orjson
import pytest

from acp_pipes.fold.v1 import texts_from_patch
from tests.conftest import REPO, run_tool, skip_unless_installed, tool_argv, tool_env

pytestmark = pytest.mark.slow  # peers on the official Python SDK

skip_unless_installed("acp")

AGENT = REPO / "tests" / "clients" / "v1_agent.py"


class SdkClient:
    """The SDK's client side: allows every edit, keeps every update it is sent."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, dict]] = []
        self.asked: list[dict] = []

    async def request_permission(self, options, session_id, tool_call, **kwargs: Any):
        from acp.schema import AllowedOutcome, RequestPermissionResponse

        call = tool_call.model_dump(by_alias=True, exclude_none=True)
        self.asked.append(call)
        # a v1 client shows the request's tool call as the call's new state
        self.updates.append((session_id, {"sessionUpdate": "tool_call_update", **call}))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="allow"))

    async def session_update(self, session_id, update, **kwargs: Any) -> None:
        self.updates.append((session_id, update.model_dump(by_alias=True, exclude_none=True)))

    def on_connect(self, conn) -> None:
        pass


async def _connection(wire, store, ws, steps) -> SdkClient:
    from acp import spawn_agent_process, text_block
    from acp.schema import Implementation

    client = SdkClient()
    tee = tool_argv("tee", "-o", str(wire), "--", sys.executable, str(AGENT),
                    "--store", str(store))
    async with spawn_agent_process(client, tee[0], *tee[1:], env=tool_env()) as (conn, _):
        init = await conn.initialize(protocol_version=1,
                                     client_info=Implementation(name="sdk", version="1"))
        assert init.protocol_version == 1
        sid = None
        for step, arg in steps:
            if step == "new":
                sid = (await conn.new_session(cwd=str(ws), mcp_servers=[])).session_id
            elif step == "load":
                sid = arg
                await conn.load_session(cwd=str(ws), session_id=sid, mcp_servers=[])
            else:
                got = await conn.prompt(session_id=sid, prompt=[text_block(arg)])
                assert got.stop_reason == ("refusal" if arg == "refuse" else "end_turn")
                # the response ends the turn (the SDK hands over the turn's updates first)
                client.updates.append((sid, {"sessionUpdate": "turn_end"}))
        client.sid = sid
    return client


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("v1")
    store, ws = tmp / "store", tmp / "ws"
    ws.mkdir()
    first = _connection(tmp / "first.wire.jsonl", store, ws,
                        [("new", None), ("prompt", "fix it"), ("prompt", "refuse")])
    live = asyncio.run(first)
    second = _connection(tmp / "second.wire.jsonl", store, ws,
                         [("load", live.sid), ("prompt", "fix it")])
    again = asyncio.run(second)
    return {"tmp": tmp, "ws": ws, "live": live, "again": again, "sid": live.sid}


def _asr(*wires) -> list[dict]:
    got = run_tool("asr", *map(str, wires))
    assert got.returncode == 0, got.stderr.decode()
    assert got.stderr == b""
    return [orjson.loads(x) for x in got.stdout.splitlines()]


def _expected(updates: list[tuple[str, dict]]) -> dict:
    """What the client saw, folded as the v1 rules say: message texts per chunk run,
    tool calls' final state, the last plan."""
    messages: list[tuple[str, str]] = []
    calls: dict[str, dict] = {}
    plan = None
    last = None
    for _sid, u in updates:
        kind = u["sessionUpdate"]
        if kind.endswith("_chunk"):
            role = kind.removesuffix("_chunk")
            text = u["content"].get("text", "")
            if last == role:
                messages[-1] = (role, messages[-1][1] + text)
            else:
                messages.append((role, text))
            last = role
            continue
        if kind in ("tool_call", "tool_call_update"):
            calls.setdefault(u["toolCallId"], {}).update(
                {k: v for k, v in u.items() if k != "sessionUpdate"})
        elif kind == "plan":
            plan = u["entries"]
        elif kind != "turn_end":
            continue  # usage_update: between chunks, not a boundary
        last = None
    return {"messages": [m for m in messages if m[1]], "calls": calls, "plan": plan}


def test_every_stream_validates(recorded, tmp_path):
    tmp = recorded["tmp"]
    out = tmp_path / "asr"
    got = run_tool("asr", str(tmp / "first.wire.jsonl"), str(tmp / "second.wire.jsonl"),
                   "-o", str(out))
    assert got.returncode == 0, got.stderr.decode()
    streams = sorted(out.glob("*.asr.jsonl"))
    assert len(streams) == 1
    valid = run_tool("asr", "--validate", *map(str, streams))
    assert valid.returncode == 0, valid.stderr.decode()


def test_the_stream_says_what_the_agent_sent(recorded):
    tmp, sid = recorded["tmp"], recorded["sid"]
    recs = _asr(tmp / "first.wire.jsonl")
    header, body = recs[0], recs[1:]
    assert header["sessionId"] == sid
    assert header["producer"]["source"] == {"format": "acp", "formatVersion": "1"}
    assert header["agent"] == {"name": "org.agent-session.acp.acp-pipes-v1-test-agent",
                               "version": "1.0.0"}
    assert "_org.agent-session.acp/v1_message_boundaries" in header["producer"]["lossy"]
    want = _expected(recorded["live"].updates)

    msgs = [r for r in body if r["type"] == "message"]
    assert all(m["idSource"] == "derived" for m in msgs)
    prompts = [m for m in msgs if m.get("origin") == "prompt"]
    assert [p["content"] for p in prompts] == [[{"type": "text", "text": "fix it"}],
                                               [{"type": "text", "text": "refuse"}]]
    said = [("agent_thought" if m["content"][0]["type"] == "reasoning" else "agent_message",
             m["content"][0].get("text")) for m in msgs if m.get("origin") != "prompt"]
    assert said == want["messages"]

    calls = {r["callId"]: r for r in body if r["type"] == "tool_call"}
    results = {r["callId"]: r for r in body if r["type"] == "tool_result"}
    assert set(calls) == set(want["calls"]) == set(results)
    for cid, call in want["calls"].items():
        assert calls[cid]["title"] == call["title"] and calls[cid]["kind"] == call["kind"]
        assert results[cid]["status"] == call["status"] == "completed"
    edit = next(c for c in want["calls"] if c.startswith("edit"))
    (change,) = [r for r in body if r["type"] == "file_change"]
    assert change["cause"] == {"callId": edit} and change["status"] == "applied"
    assert change["changes"] == [{"op": "modify", "path": {"root": "root0",
                                                            "path": "notes.txt"}}]
    (diff,) = want["calls"][edit]["content"]
    assert texts_from_patch(change["patch"]["text"]) == (diff["oldText"], diff["newText"])

    (plan,) = [r for r in body if r["type"] == "plan"]
    assert plan["entries"] == want["plan"] and plan["planId"] == "v1:plan"

    (perm,) = [r for r in body if r["type"] == "permission"]
    asked = recorded["live"].asked[0]
    assert perm["subject"] == {"callId": asked["toolCallId"]}
    assert perm["title"] == asked["title"] and perm["decision"] == "allow_once"

    states = [r.get("stopReason") for r in body if r["type"] == "state"]
    assert states == ["end_turn", "refusal"]
    usage = [r["contextWindow"] for r in body if r["type"] == "usage_summary"]
    assert usage == [{"used": 100, "size": 200000}]


def test_load_replays_history_without_duplicates(recorded):
    """ASR-717 for v1: what the second connection's session/load replays is already in
    the stream (messages replayed in one chunk each get the same derived IDs). Added:
    the state record of the load; the edit call as the agent replays it, without the
    permission prompt it showed as its title live (replayed content that differs
    supersedes); and the new turn."""
    tmp = recorded["tmp"]
    first = _asr(tmp / "first.wire.jsonl")
    both = _asr(tmp / "first.wire.jsonl", tmp / "second.wire.jsonl")
    assert len(recorded["again"].updates) > len(_expected(recorded["again"].updates)[
        "messages"])  # the client did receive the replay
    assert both[1:len(first)] == first[1:]
    new = both[len(first):]
    assert new[0]["type"] == "state" and new[0]["state"] == "resumed"
    old = {r["id"]: r for r in first[1:]}
    # the replay's revision supersedes the live record and keeps its first sight's ts
    replayed = [r for r in new if "supersedes" in r]
    assert all(r["ts"] == old[r["supersedes"]]["ts"] and "observedAt" not in r
               for r in replayed)
    assert [(r["type"], r["title"], old[r["supersedes"]]["title"]) for r in replayed] == [
        ("tool_call", "Edit notes.txt", "Edit notes.txt?")]
    turn = [r for r in new[1:] if r["type"] == "message"]
    assert [m["content"] for m in turn if m.get("origin") == "prompt"] == [
        [{"type": "text", "text": "fix it"}]]
    assert turn[0]["messageId"].endswith(":2")  # the same words, a second time

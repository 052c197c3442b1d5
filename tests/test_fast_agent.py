"""A real agent nobody here wrote: fast-agent (fast-agent-mcp, ACP v1), recorded through
the real acp-tee while the official Python SDK drives it as the client.

fast-agent's `passthrough` model echoes each prompt, and a prompt
``***CALL_TOOL <tool> <json>`` makes it call that tool for real: here it writes and reads
a file through the client (`fs/*`, each behind a permission request) and runs a command
in a client terminal (`terminal/*`). The stream acp-asr stores must say what the client
was sent: every prompt, every message as its chunks joined, every tool call with the
title, kind and input it was announced with and its last status, every permission and
its answer, each turn's stop reason. The agent is installed by `make install`
(scripts/install-peers); a missing agent fails, it does not skip.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import REPO, run_tool, skip_unless_installed, tool_argv, tool_env
from tests.sdk_editor import Editor, seen_by_client

pytestmark = pytest.mark.slow  # the real fast-agent

skip_unless_installed("acp")

FAST_AGENT = REPO / ".peers" / "fast-agent" / "bin" / "fast-agent"


def fast_agent_argv() -> list[str]:
    if not FAST_AGENT.exists():
        pytest.fail(f"{FAST_AGENT} is missing: `make install` installs fast-agent")
    return [str(FAST_AGENT), "acp", "--model", "passthrough", "--shell"]


def prompts_for(ws: Path) -> list[str]:
    target = ws / "notes.txt"
    return [
        "hello there",
        "***CALL_TOOL write_text_file " + orjson.dumps(
            {"path": str(target), "content": "first line\n"}).decode(),
        "***CALL_TOOL read_text_file " + orjson.dumps({"path": str(target)}).decode(),
        "***CALL_TOOL execute " + orjson.dumps({"command": "echo hi"}).decode(),
        "goodbye",
    ]


async def _session(wire: Path, ws: Path, *agent_side: str) -> tuple[Editor, str, list[str]]:
    """The SDK client's session with fast-agent through acp-tee into ``wire``; the agent
    side is ``-- fast-agent ...`` unless ``agent_side`` gives another (``--connect URL``)."""
    from acp import spawn_agent_process, text_block
    from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

    editor = Editor()
    tee = tool_argv("tee", "-o", str(wire), *(agent_side or ("--", *fast_agent_argv())))
    stops: list[str] = []
    async with spawn_agent_process(editor, tee[0], *tee[1:], env=tool_env(),
                                   cwd=str(ws)) as (conn, _):
        init = await conn.initialize(
            protocol_version=1, client_info=Implementation(name="sdk", version="1"),
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                terminal=True))
        assert init.protocol_version == 1
        sid = (await conn.new_session(cwd=str(ws), mcp_servers=[])).session_id
        for text in prompts_for(ws):
            got = await conn.prompt(session_id=sid, prompt=[text_block(text)])
            stops.append(got.stop_reason)
            editor.updates.append({"sessionUpdate": "turn_end"})
    return editor, sid, stops


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("fast-agent")
    ws = tmp / "ws"
    ws.mkdir()
    wire = tmp / "fast-agent.wire.jsonl"
    editor, sid, stops = asyncio.run(asyncio.wait_for(_session(wire, ws), 120))
    asr = run_tool("asr", str(wire))
    assert asr.returncode == 0 and asr.stderr == b"", asr.stderr.decode()
    records = [orjson.loads(line) for line in asr.stdout.splitlines()]
    return {"tmp": tmp, "ws": ws, "wire": wire, "editor": editor, "sid": sid,
            "stops": stops, "asr": asr.stdout, "records": records}


def test_the_real_agent_ran_every_tool(recorded):
    """The session is what the test says it is: the agent asked for the file and the
    terminal through the client, so the stream below has real requests to store."""
    editor, ws = recorded["editor"], recorded["ws"]
    assert editor.files == {str(ws / "notes.txt"): "first line\n"}
    assert editor.terminals == ["echo hi"]
    assert len(editor.asked) >= 2
    assert recorded["stops"][0] == "end_turn"


def test_the_stream_validates(recorded, tmp_path):
    stream = tmp_path / "s.asr.jsonl"
    stream.write_bytes(recorded["asr"])
    got = run_tool("asr", "--validate", str(stream))
    assert got.returncode == 0, got.stderr.decode()


def test_the_stream_says_what_the_client_was_sent(recorded):
    header, *body = recorded["records"]
    assert header["sessionId"] == recorded["sid"]
    assert header["agent"]["name"] == "org.agent-session.acp.fast-agent-acp"
    seen = seen_by_client(recorded["editor"].updates)

    msgs = [r for r in body if r["type"] == "message"]
    prompts = [m["content"] for m in msgs if m.get("origin") == "prompt"]
    assert prompts == [[{"type": "text", "text": t}] for t in prompts_for(recorded["ws"])]
    said = [m["content"][0]["text"] for m in msgs if m["role"] == "assistant"]
    assert said == [t for k, t in seen["messages"] if k == "agent_message_chunk"]

    calls = {r["callId"]: r for r in body if r["type"] == "tool_call"}
    results = {r["callId"]: r for r in body if r["type"] == "tool_result"}
    # fast-agent asks for its terminal calls under "pending", an ID it never announces:
    # the client shows it as a call, the store keeps it as the permission's subject only
    announced = {k: v for k, v in seen["calls"].items() if k != "pending"}
    assert "pending" in seen["calls"] and set(calls) == set(announced)
    assert {p["subject"]["callId"] for p in body if p["type"] == "permission"} >= {"pending"}
    for cid, call in announced.items():
        assert calls[cid]["title"] == call["title"], cid
        assert calls[cid]["kind"] == call["kind"], cid
        assert calls[cid]["input"] == call["rawInput"], cid
        if call["status"] in ("completed", "failed"):
            assert results.pop(cid)["status"] == call["status"], cid
    assert results == {}  # no result for a call that never finished: nothing invented

    perms = [r for r in body if r["type"] == "permission"]
    assert len(perms) == len(recorded["editor"].asked)
    assert all(p["decision"] == "allow_once" for p in perms)
    assert [r["stopReason"] for r in body if r["type"] == "state"] == recorded["stops"]


def test_the_replay_sends_what_the_agent_said(recorded, tmp_path):
    """ASR-724 on a real agent's session: the v1 replay of the stored stream sends every
    message the client saw, in order, with the same text."""
    stream = tmp_path / "s.asr.jsonl"
    stream.write_bytes(recorded["asr"])
    got = run_tool("replay", "--protocol", "1", "-q", str(stream))
    assert got.returncode == 0, got.stderr.decode()
    sent = [orjson.loads(line)["params"]["update"] for line in got.stdout.splitlines()]
    replayed = [(u["sessionUpdate"], u["content"]["text"]) for u in sent
                if u["sessionUpdate"] == "agent_message_chunk"]
    seen = [m for m in seen_by_client(recorded["editor"].updates)["messages"]
            if m[0] == "agent_message_chunk"]
    assert replayed == seen


if __name__ == "__main__":  # record one session by hand: python -m tests.test_fast_agent DIR
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    asyncio.run(_session(out / "fast-agent.wire.jsonl", out))

"""The pytest plugin with a real agent nobody here wrote, fast-agent (ACP v1, offline
``passthrough`` model, tool calls through the client: tests/test_fast_agent.py), and the
official Python SDK's client as the client under test (tests/sdk_editor.py), in real inner
pytest sessions: recorded once, played with fast-agent gone, a changed prompt failing
with the divergence; then fast-agent re-driven from that cassette (acp_client_replay)."""

from __future__ import annotations

import orjson
import pytest

from tests.conftest import skip_unless_installed, tool_env
from tests.test_fast_agent import fast_agent_argv

skip_unless_installed("acp")
pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow  # the real fast-agent

CASSETTE = "cassettes/test_editor/test_the_editor_chats.wire.jsonl"

EDITOR_TEST = """
import asyncio, json, os
from pathlib import Path

import orjson

from tests.sdk_editor import Editor

AGENT = json.loads(os.environ["ACP_TEST_AGENT"])
WS = Path(os.environ["WS"])
PROMPTS = ["hello there",
           "***CALL_TOOL write_text_file " + json.dumps(
               {"path": str(WS / "notes.txt"), "content": "first line\\n"}),
           os.environ.get("LAST", "goodbye")]


async def session(argv):
    from acp import spawn_agent_process, text_block
    from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

    editor, stops = Editor(), []
    async with spawn_agent_process(editor, argv[0], *argv[1:], cwd=str(WS)) as (conn, _):
        await conn.initialize(
            protocol_version=1, client_info=Implementation(name="sdk", version="1"),
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                terminal=True))
        sid = (await conn.new_session(cwd=str(WS), mcp_servers=[])).session_id
        for text in PROMPTS:
            stops.append((await conn.prompt(session_id=sid, prompt=[text_block(text)])).stop_reason)
    return editor, stops


def test_the_editor_chats(acp_agent):
    editor, stops = asyncio.run(asyncio.wait_for(session(acp_agent(AGENT)), 120))
    Path(os.environ["OUT"]).write_bytes(orjson.dumps(
        {"updates": editor.updates, "files": editor.files, "asked": editor.asked, "stops": stops}))
    assert stops == ["end_turn"] * len(PROMPTS)
"""

AGENT_TEST = """
import json, os

AGENT = json.loads(os.environ["ACP_TEST_AGENT"])

def test_fast_agent_answers_as_recorded(acp_client_replay):
    acp_client_replay(os.environ["TRACE"], AGENT, timeout=60)
"""


@pytest.fixture
def inner(pytester, monkeypatch):
    (pytester.path / "ws").mkdir()
    for k, v in tool_env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("WS", str(pytester.path / "ws"))

    def run(agent: list[str], *args: str, **env: str):
        with monkeypatch.context() as m:
            m.setenv("ACP_TEST_AGENT", orjson.dumps(agent).decode())
            for k, v in env.items():
                m.setenv(k, v)
            return pytester.runpytest_subprocess("-p", "acp_pipes.testing.pytest_plugin",
                                                 "-p", "no:cacheprovider", *args,
                                                 timeout=300)

    return run


def test_fast_agent_recorded_once_plays_without_it_and_redrives(inner, pytester):
    pytester.makepyfile(test_editor=EDITOR_TEST)
    inner(fast_agent_argv(), OUT="recorded.json").assert_outcomes(passed=1)
    cassette = (pytester.path / CASSETTE).read_bytes()
    recorded = orjson.loads((pytester.path / "recorded.json").read_bytes())
    notes = str(pytester.path / "ws" / "notes.txt")
    assert recorded["files"] == {notes: "first line\n"}  # the tool ran, through the client
    assert recorded["asked"]  # behind a permission request

    gone = ["/nonexistent/fast-agent", "acp"]
    inner(gone, OUT="played.json").assert_outcomes(passed=1)
    played = orjson.loads((pytester.path / "played.json").read_bytes())
    assert played == recorded  # every update, the file written, the permission asked
    assert (pytester.path / CASSETTE).read_bytes() == cassette

    changed = inner(gone, OUT="changed.json", LAST="farewell")
    changed.assert_outcomes(failed=1)  # the test's own failure: no error at teardown
    out = changed.stdout.str()
    assert "ERROR at teardown" not in out
    assert '/params/prompt/0/text: "goodbye" -> "farewell"' in out
    assert "(the test then failed with " in out  # the SDK's lost connection, after it

    # the other direction: fast-agent itself re-driven from the cassette
    pytester.makepyfile(test_agent=AGENT_TEST)
    inner(fast_agent_argv(), "test_agent.py", TRACE=CASSETTE).assert_outcomes(passed=1)

    # an edited prompt in the cassette: fast-agent echoes what it is sent, and the first
    # frame that differs from the recording is named
    recs = [orjson.loads(x) for x in cassette.splitlines()]
    at = next(i for i, r in enumerate(recs) if r.get("dir") == "c2a" and "goodbye" in r["raw"])
    recs[at]["raw"] = recs[at]["raw"].replace("goodbye", "farewell")
    echoed = next(r for r in recs[at:] if r.get("dir") == "a2c" and "goodbye" in r["raw"])
    (pytester.path / "edited.wire.jsonl").write_bytes(
        b"".join(orjson.dumps(r) + b"\n" for r in recs))
    edited = inner(fast_agent_argv(), "test_agent.py", TRACE="edited.wire.jsonl")
    edited.assert_outcomes(failed=1)
    out = edited.stdout.str()
    assert f"difference (content): agent frame seq {echoed['seq']}" in out
    assert '/params/update/content/text: "goodbye" -> "farewell"' in out
    assert f"recorded (seq {echoed['seq']}): " in out

"""A real agent nobody here wrote, remote: fast-agent (ACP v1) served over WebSocket by
acpremote, reached by the official Python SDK as an editor on stdio through
``acp-tee --connect ws://``. The recording converts and validates as the stdio
recording of tests/test_fast_agent.py does, and says what the client was sent."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from tests.conftest import run_tool, skip_unless_installed
from tests.sdk_editor import seen_by_client
from tests.test_fast_agent import _session, fast_agent_argv, prompts_for
from tests.test_tee_remote import ACPREMOTE, Server, _events, _free_port, _lines

skip_unless_installed("acp")
pytestmark = pytest.mark.slow  # the real fast-agent


def test_fast_agent_over_websocket_is_recorded_as_on_stdio(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    wire = tmp_path / "w.jsonl"
    port = _free_port()
    server = Server([ACPREMOTE, "expose", "--host", "127.0.0.1", "--port", str(port),
                     "--cwd", str(ws), "--", *fast_agent_argv()], port)
    with server:
        editor, sid, stops = asyncio.run(asyncio.wait_for(
            _session(wire, ws, "--connect", server.url), 180))
    # the real agent ran every tool through the client, over the network
    assert editor.files == {str(ws / "notes.txt"): "first line\n"}
    assert editor.terminals == ["echo hi"]
    assert stops[0] == "end_turn"
    assert _lines(wire)[0]["transport"]["agent"] == "ws"
    assert [e["status"] for e in _events(wire, "ws-open")] == [101]
    asr = run_tool("asr", str(wire))
    assert asr.returncode == 0 and asr.stderr == b"", asr.stderr
    stream = tmp_path / "s.asr.jsonl"
    stream.write_bytes(asr.stdout)
    valid = run_tool("asr", "--validate", str(stream))
    assert valid.returncode == 0, valid.stderr
    header, *body = [orjson.loads(x) for x in asr.stdout.splitlines()]
    assert header["sessionId"] == sid
    msgs = [r for r in body if r["type"] == "message"]
    prompts = [m["content"] for m in msgs if m.get("origin") == "prompt"]
    assert prompts == [[{"type": "text", "text": t}] for t in prompts_for(ws)]
    said = [m["content"][0]["text"] for m in msgs if m["role"] == "assistant"]
    seen = seen_by_client(editor.updates)
    assert said == [t for k, t in seen["messages"] if k == "agent_message_chunk"]
    assert [r["stopReason"] for r in body if r["type"] == "state"] == stops

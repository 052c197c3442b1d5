"""Real agents from the registries (qwen-code, codex-acp) recorded through the real
acp-tee, the official Python SDK as their client, each running whole turns against a
canned OpenAI-compatible model on 127.0.0.1 (canned_llm.py: chat completions for
qwen-code, the Responses API for codex-acp).

Each agent gets two connections, as an editor makes them: the first creates a session,
is greeted and runs a tool for real; the second (a new agent process) loads the session,
which the agent replays, and prompts once more. What acp-asr stores must be what the
client was sent: every prompt once, every message as its chunks joined, every tool call
at its latest state on the wire (the replay's, where the agent replayed it), and the
stream must validate. `make test-agents` installs the agents and runs this suite.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import run_tool, tool_argv, tool_env
from tests.sdk_editor import Editor, seen_by_client

acp = pytest.importorskip("acp")

HERE = Path(__file__).parent
BIN = HERE / "node_modules" / ".bin"


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    """The canned model server, on a port of its own choosing; its request log."""
    tmp = tmp_path_factory.mktemp("llm")
    portfile = tmp / "port"
    proc = subprocess.Popen([sys.executable, str(HERE / "canned_llm.py"), str(portfile)])
    try:
        for _ in range(100):
            if portfile.exists():
                break
            time.sleep(0.05)
        yield {"url": f"http://127.0.0.1:{portfile.read_text()}/v1",
               "requests": Path(str(portfile) + ".requests.jsonl")}
    finally:
        proc.kill()
        proc.wait()


def _qwen(home: Path, llm: dict, ws: Path) -> tuple[list[str], dict, list[str]]:
    (home / ".qwen").mkdir(parents=True)
    (home / ".qwen" / "settings.json").write_bytes(orjson.dumps(
        {"security": {"auth": {"selectedType": "openai"}}, "model": {"name": "canned"}}))
    env = {"OPENAI_API_KEY": "sk-canned", "OPENAI_BASE_URL": llm["url"],
           "OPENAI_MODEL": "canned"}
    call = orjson.dumps({"file_path": str(ws / "notes.txt"), "content": "one\n"}).decode()
    return [str(BIN / "qwen"), "--acp"], env, ["hello there", f"CALL write_file {call}"]


def _codex(home: Path, llm: dict, ws: Path) -> tuple[list[str], dict, list[str]]:
    codex = home / ".codex"
    codex.mkdir(parents=True)
    (codex / "config.toml").write_text(
        'model = "canned"\nmodel_provider = "canned"\napproval_policy = "never"\n'
        'sandbox_mode = "danger-full-access"\n[model_providers.canned]\nname = "canned"\n'
        f'base_url = "{llm["url"]}"\nenv_key = "CANNED_API_KEY"\nwire_api = "responses"\n')
    env = {"CODEX_HOME": str(codex), "CANNED_API_KEY": "sk-canned"}
    call = orjson.dumps({"cmd": "echo one > notes.txt"}).decode()
    return [str(BIN / "codex-acp")], env, ["hello there", f"CALL exec_command {call}"]


AGENTS = {"qwen-code": _qwen, "codex-acp": _codex}


async def _connection(wire: Path, argv: list[str], env: dict, ws: Path,
                      steps: list[tuple[str, str | None]]) -> tuple[Editor, str]:
    from acp import spawn_agent_process, text_block
    from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

    editor = Editor()
    tee = tool_argv("tee", "-o", str(wire), "--", *argv)
    sid = ""
    session = spawn_agent_process(editor, tee[0], *tee[1:], env=env, cwd=str(ws))
    conn, _proc = await session.__aenter__()
    try:
        await conn.initialize(
            protocol_version=1, client_info=Implementation(name="sdk", version="1"),
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True)))
        for step, arg in steps:
            if step == "new":
                sid = (await conn.new_session(cwd=str(ws), mcp_servers=[])).session_id
            elif step == "load":
                sid = arg or ""
                await asyncio.wait_for(
                    conn.load_session(cwd=str(ws), session_id=sid, mcp_servers=[]), 90)
                editor.updates.append({"sessionUpdate": "turn_end"})
            else:
                await asyncio.wait_for(
                    conn.prompt(session_id=sid, prompt=[text_block(arg or "")]), 90)
                editor.updates.append({"sessionUpdate": "turn_end"})
    finally:
        # The SDK's teardown stops its reader, closes acp-tee's stdin, waits 2 s, sends
        # SIGTERM, waits 2 s, sends SIGKILL and waits for the process. The agent may
        # send more after the reader stopped (qwen-code: a 560 KB
        # available_commands_update after a turn, now and then after the client's last
        # read), so acp-tee's forward blocks on the full pipe: acp-tee must then end at
        # the SIGTERM, its log ended, not at the SIGKILL. Were it still there at the
        # SIGKILL, the SDK's last wait would never return (asyncio's Process.wait(),
        # awaited before the exit, returns once every pipe is closed, and the SDK's
        # stdout pipe is paused): the bound is a safety net for that.
        try:
            await asyncio.wait_for(session.__aexit__(None, None, None), 15)
        except TimeoutError:
            pass
        if _proc.returncode is None:  # the SDK never got to stop acp-tee: as an editor
            _proc.terminate()  # would, SIGTERM (acp-tee ends the agent, writes its end)
            for _ in range(300):  # not _proc.wait(): it waits on the paused pipe too
                if _proc.returncode is not None:
                    break
                await asyncio.sleep(0.1)
    # acp-tee ended by itself or at the SDK's SIGTERM, before its SIGKILL: so the log
    # has its end record (checked by _asr) even with a forward blocked on the client
    assert _proc.returncode != -signal.SIGKILL, "the SDK had to kill acp-tee"
    return editor, sid


@pytest.fixture(scope="module", params=sorted(AGENTS))
def recorded(request, llm, tmp_path_factory) -> dict:
    name = request.param
    if not BIN.is_dir():
        pytest.fail(f"{BIN} is missing: `make test-agents` installs the agents")
    tmp = tmp_path_factory.mktemp(name)
    home, ws = tmp / "home", tmp / "ws"
    ws.mkdir()
    argv, extra, prompts = AGENTS[name](home, llm, ws)
    env = {**tool_env(), "HOME": str(home), **extra}
    first, sid = asyncio.run(_connection(
        tmp / "first.wire.jsonl", argv, env, ws,
        [("new", None)] + [("prompt", p) for p in prompts]))
    again, _ = asyncio.run(_connection(
        tmp / "second.wire.jsonl", argv, env, ws, [("load", sid), ("prompt", "goodbye")]))
    return {"name": name, "tmp": tmp, "ws": ws, "sid": sid, "prompts": prompts,
            "first": first, "again": again}


def _asr(*wires: Path) -> list[dict]:
    for wire in wires:  # acp-tee ended each session: its log has its end record
        assert orjson.loads(wire.read_bytes().splitlines()[-1]).get("end") is True, wire
    got = run_tool("asr", *map(str, wires))
    assert got.returncode == 0, got.stderr.decode()
    return [orjson.loads(line) for line in got.stdout.splitlines()]


def test_the_agent_ran_a_tool_through_the_model(recorded, llm):
    """The session is what the test says it is: the model's tool call reached the agent
    and it ran the tool (the file is there: written through the client's fs/write_text_file
    by qwen-code, by a shell on disk by codex-acp), so there is a real tool call to store."""
    target = recorded["ws"] / "notes.txt"
    written = recorded["first"].files.get(str(target))
    if written is None and target.exists():
        written = target.read_text()
    assert written == "one\n"
    calls = seen_by_client(recorded["first"].updates)["calls"]
    assert calls, "the client was sent no tool call"


def test_every_stream_validates(recorded, tmp_path):
    tmp = recorded["tmp"]
    got = run_tool("asr", "-o", str(tmp_path), str(tmp / "first.wire.jsonl"),
                   str(tmp / "second.wire.jsonl"))
    assert got.returncode == 0, got.stderr.decode()
    streams = sorted(tmp_path.glob("*.asr.jsonl"))
    assert len(streams) == 1
    valid = run_tool("asr", "--validate", *map(str, streams))
    assert valid.returncode == 0, valid.stderr.decode()


def test_the_first_connection_is_stored_as_it_was_sent(recorded):
    header, *body = _asr(recorded["tmp"] / "first.wire.jsonl")
    assert header["sessionId"] == recorded["sid"]
    seen = seen_by_client(recorded["first"].updates)
    msgs = [r for r in body if r["type"] == "message"]
    prompts = [m["content"][0]["text"] for m in msgs if m.get("origin") == "prompt"]
    assert prompts == recorded["prompts"]
    said = ["".join(b.get("text", "") for b in m["content"]) for m in msgs
            if m["role"] == "assistant" and m["content"][0]["type"] == "text"]
    assert said == [t for k, t in seen["messages"] if k == "agent_message_chunk" and t]
    calls = {r["callId"]: r for r in body if r["type"] == "tool_call"}
    assert set(calls) == set(seen["calls"])
    for cid, call in seen["calls"].items():
        assert calls[cid]["title"] == call["title"], cid
        assert calls[cid]["kind"] == call["kind"], cid


def test_the_load_adds_only_what_is_new(recorded):
    """ASR-717 on a real agent: its load replay writes no second copy of any prompt or
    message, and each tool call's latest stored revision is its latest state on the wire
    (the replay's, where it differs: ASR-706)."""
    tmp = recorded["tmp"]
    _, *body = _asr(tmp / "first.wire.jsonl", tmp / "second.wire.jsonl")
    prompts = [m["content"][0]["text"] for m in body
               if m["type"] == "message" and m.get("origin") == "prompt"]
    assert prompts == recorded["prompts"] + ["goodbye"]
    latest: dict[str, dict] = {}
    for r in body:
        if r["type"] == "tool_call":
            latest[r["callId"]] = r
    seen = seen_by_client(recorded["first"].updates + recorded["again"].updates)["calls"]
    for cid, call in seen.items():
        if "title" in call:
            assert latest[cid]["title"] == call["title"], cid


if __name__ == "__main__":  # run one agent by hand: python -m tests.agents.test_real_agents
    os.environ.setdefault("ACP_PIPES_REAL_AGENTS", "1")
    raise SystemExit(pytest.main([str(Path(__file__)), "-q", "-x"]))

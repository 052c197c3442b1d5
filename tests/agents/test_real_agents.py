"""Five real agents from the registries (fast-agent, qwen-code, codex-acp, opencode,
mistral-vibe), pinned under .peers/, recorded through the real acp-tee with the official
Python SDK as their client, each running whole turns offline against the canned
OpenAI-compatible model on 127.0.0.1 (fast-agent's passthrough model needs none).

Each agent runs the script of harness.py: a greeting; a file written with a tool and read
back with a tool and a shell; a command that asks the client's permission; and where the
agent loads sessions, a second connection (a new agent process) that loads the session,
which the agent replays, and prompts once more. What acp-asr stores must be what the
client was sent: every prompt once, every message as its chunks joined, every tool call
at its latest state on the wire (the replay's, where the agent replayed it), and the
stream must validate. The planted changes the comparison tools are measured on are
checked to be where the harness says they are. `make test-agents` installs the agents
and runs this suite; a missing agent fails.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import orjson
import pytest

from tests.agents import harness
from tests.conftest import run_tool
from tests.sdk_editor import seen_by_client

pytest_plugins = ["pytester"]

pytestmark = pytest.mark.slow  # real agents, whole turns


@pytest.fixture(scope="module", params=sorted(harness.AGENTS))
def recorded(request, tmp_path_factory) -> dict:
    """The agent's unchanged script and each change that can be planted in it, recorded
    at one root (the paths in the frames are the same in each)."""
    name = request.param
    tmp = tmp_path_factory.mktemp(name)
    root = tmp / "root"
    got: dict = {"name": name, "tmp": tmp}
    try:
        with harness.canned_llm(tmp / "llm") as llm:
            got["same"] = harness.record(name, tmp, "same-1", root, llm=llm)
            # each recording's workspace is gone once the next one starts: keep the files
            got["same"]["files"] = _files(root / "ws")
            for plant in harness.plants_for(harness.AGENTS[name]):
                run = harness.record(name, tmp, f"planted-{plant}", root, plant=plant,
                                     llm=None if plant == "reply" else llm, load=False)
                run["files"] = _files(root / "ws")
                got[plant] = run
    except harness.MissingAgent as e:
        pytest.fail(str(e))
    return got


def test_a_missing_agent_fails_the_suite(tmp_path):
    """An agent that is not installed is an error naming what installs it, never a
    skip: each agent's command is looked up when it is recorded."""
    with pytest.raises(harness.MissingAgent, match="make test-agents"):
        harness._exe(tmp_path / "no-such-agent")
    for agent in harness.AGENTS.values():
        assert Path(agent.argv()[0]).is_file(), agent.name


def _files(ws: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(ws.iterdir()) if p.is_file()}


def _frames(wire: Path) -> list[dict]:
    """The wire log's frames, each its record with the parsed message as "msg"."""
    lines = wire.read_bytes().splitlines()
    assert orjson.loads(lines[-1]).get("end") is True, f"{wire}: acp-tee wrote no end"
    out = []
    for line in lines[1:-1]:
        rec = orjson.loads(line)
        rec["msg"] = orjson.loads(rec["raw"])
        out.append(rec)
    return out


def _asr(*wires: Path) -> list[dict]:
    got = run_tool("asr", *map(str, wires))
    assert got.returncode == 0, got.stderr.decode()
    return [orjson.loads(line) for line in got.stdout.splitlines()]


def _wires(run: dict) -> list[Path]:
    return [run["wire"]] + ([run["load_wire"]] if run["load_wire"] else [])


def test_the_agent_ran_the_script(recorded):
    """The session is what the harness says it is: every prompt ended its turn, the file
    the model had written was read back (on disk: written by the agent's own tool, or
    through the client's fs/write_text_file), and the command behind the permission ran
    once the client allowed it, so there are real tool calls and answers to store."""
    run = recorded["same"]
    assert run["first"]["stops"] == ["end_turn"] * len(run["prompts"])
    assert run["files"] == {"notes.txt": "one\n", "perm.txt": "two\n"}
    assert run["client"].answered, "the agent asked the client no permission"
    assert seen_by_client(run["client"].updates)["calls"], "the client was sent no tool call"


def test_the_agent_can_load_its_session(recorded):
    """All five agents say they load sessions (agentCapabilities.loadSession): the second
    connection loaded it and its prompt ended its turn."""
    run = recorded["same"]
    assert run["first"]["caps"].get("loadSession") is True
    assert run["second"]["stops"] == ["end_turn"]


def test_acp_tee_ended_the_agent_and_all_it_started(recorded):
    """acp-tee ends when its client's input has ended and the agent with it (after its
    grace, by signals to the agent's process group, for codex-acp, which does not end at
    EOF), and leaves nothing of the agent running: no process of the session the test
    started acp-tee in outlives it, on either connection."""
    run = recorded["same"]
    status = 0 if harness.AGENTS[recorded["name"]].ends_at_eof else 128 + 15
    for conn in (run["first"], run["second"]):
        assert "killed" not in conn, "acp-tee did not end within its grace"
        assert conn["tee_exit"] == status
        assert conn["left_running"] == []


def test_every_stream_validates(recorded, tmp_path):
    got = run_tool("asr", "-o", str(tmp_path), *map(str, _wires(recorded["same"])))
    assert got.returncode == 0, got.stderr.decode()
    streams = sorted(tmp_path.glob("*.asr.jsonl"))
    assert len(streams) == 1
    valid = run_tool("asr", "--validate", *map(str, streams))
    assert valid.returncode == 0, valid.stderr.decode()


def test_the_first_connection_is_stored_as_it_was_sent(recorded):
    run = recorded["same"]
    header, *body = _asr(run["wire"])
    assert header["sessionId"] == run["sid"]
    seen = seen_by_client(run["client"].updates)
    msgs = [r for r in body if r["type"] == "message"]
    prompts = [m["content"][0]["text"] for m in msgs if m.get("origin") == "prompt"]
    assert prompts == run["prompts"]
    said = ["".join(b.get("text", "") for b in m["content"]) for m in msgs
            if m["role"] == "assistant" and m["content"][0]["type"] == "text"]
    assert said == [t for k, t in seen["messages"] if k == "agent_message_chunk" and t]
    calls = {r["callId"]: r for r in body if r["type"] == "tool_call"}
    # every call the agent announced; a call only a permission request named (fast-agent
    # asks under "pending", an ID it never announces) is the permission's subject alone
    assert set(calls) == seen["announced"]
    assert {p["subject"]["callId"] for p in body if p["type"] == "permission"
            if "callId" in p.get("subject", {})} >= set(seen["calls"]) - seen["announced"]
    for cid, call in seen["calls"].items():
        if "kind" in call and cid in calls:
            assert calls[cid]["kind"] == call["kind"], cid


def test_the_load_adds_only_what_is_new(recorded):
    """ASR-717 on a real agent: its load replay writes no second copy of any prompt or
    message, and each tool call's latest stored revision is its latest state on the wire
    (the replay's, where it differs: ASR-706)."""
    run = recorded["same"]
    _, *body = _asr(*_wires(run))
    prompts = [m["content"][0]["text"] for m in body
               if m["type"] == "message" and m.get("origin") == "prompt"]
    assert prompts == run["prompts"] + ["goodbye"]
    # each prompt stored exactly once: no user message besides them, whatever IDs the
    # agent gives its replay (opencode's own msg_... IDs, which it never sends live;
    # docs/asr.md "One rule for identity")
    users = {m["messageId"]: m for m in body if m["type"] == "message" and m["role"] == "user"}
    assert [m["content"][0]["text"] for m in users.values()] == prompts
    latest: dict[str, dict] = {}
    for r in body:
        if r["type"] == "tool_call":
            latest[r["callId"]] = r
    both = seen_by_client(run["client"].updates + run["again"].updates)
    for cid, call in both["calls"].items():
        if "title" in call and cid in both["announced"]:
            assert latest[cid]["title"] == call["title"], cid


def _agent_texts(wire: Path) -> str:
    """Every text the agent sent in session updates, joined."""
    out = []
    for f in _frames(wire):
        update = f["msg"].get("params", {}).get("update", {})
        content = update.get("content")
        if isinstance(content, dict):
            out.append(content.get("text", ""))
    return "".join(out)


def test_the_planted_reply_is_the_model_s_closing_reply(recorded):
    """planted-reply: the model's closing reply to the prompt that called several tools
    says "changed:" where the unchanged script's says "done:", and nothing else the
    client was sent about it differs in kind."""
    if "reply" not in recorded:
        assert recorded["name"] == "fast-agent"  # its passthrough model is no server
        return
    same, planted = recorded["same"], recorded["reply"]
    tools = ", ".join(re.findall(r"^CALL (\S+) ", same["prompts"][1], re.M))
    assert f"done: {tools}" in _agent_texts(same["wire"])
    assert f"changed: {tools}" in _agent_texts(planted["wire"])
    assert "changed:" not in _agent_texts(same["wire"])
    assert planted["files"] == same["files"]


def test_the_planted_client_answer_is_what_the_client_read(recorded):
    """planted-client: the client's answers to fs/read_text_file and terminal/output say
    "planted" where the unchanged script's say what was on disk; agents that ask the
    client nothing but permissions (codex-acp, opencode, mistral-vibe) have no such
    answer to plant."""
    if "client" not in recorded:
        methods = {f["msg"].get("method") for f in _frames(recorded["same"]["wire"])
                   if f["dir"] == "a2c" and "id" in f["msg"]}
        assert methods - {None} == {"session/request_permission"}
        return

    def answers(wire: Path) -> list[str]:
        frames = _frames(wire)
        asked = {f["msg"]["id"]: f["msg"]["method"] for f in frames
                 if f["dir"] == "a2c" and "method" in f["msg"] and "id" in f["msg"]}
        got = []
        for f in frames:
            msg = f["msg"]
            if f["dir"] == "c2a" and "method" not in msg and asked.get(msg.get("id")) in (
                    "fs/read_text_file", "terminal/output"):
                result = msg.get("result", {})
                got.append(result.get("content", result.get("output")))
        return got
    same, planted = answers(recorded["same"]["wire"]), answers(recorded["client"]["wire"])
    assert "one\n" in same
    assert planted and set(planted) == {harness.PLANTED_TEXT}


def test_the_planted_permission_answer_is_the_reject_option(recorded):
    """planted-permission: the permission prompt's requests were answered with the
    agent's reject option, every other request as in the unchanged script, and the
    command it guarded did not run."""
    same, planted = recorded["same"], recorded["permission"]
    allowed, answered = same["client"].answered, planted["client"].answered
    assert [a["kind"] for a in allowed] == ["allow_once"] * len(allowed)
    assert [a["planted"] for a in answered] == [False] * (len(allowed) - 1) + [True]
    assert [a["kind"] for a in answered] == ["allow_once"] * (len(allowed) - 1) + ["reject_once"]
    assert "perm.txt" not in planted["files"]


# -- the agent re-driven from its recording (acp-replay --client: docs/sameness.md) ------

#: How many times each agent is re-driven from its unchanged recording.
SELF_REDRIVES = 5
#: The re-drives are acp-replay's console script beside this Python (as a user runs it)
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def redriven(recorded) -> dict:
    """The unchanged recording re-driven SELF_REDRIVES times with default options (the
    recording's own workspace given, so the recorded client's writes are performed as
    it performed them), and each planted change re-driven once: the model's changed
    reply against the plain model, the client's changed answers and permission planted
    in a copy of the unchanged recording (bench/agents.py: the measuring script's own
    runs, one implementation)."""
    from bench import agents as bench

    name, tmp = recorded["name"], recorded["tmp"]
    same = recorded["same"]["wire"]
    options = ["--workspace", str(recorded["same"]["ws"])]
    got: dict = {"self": [], "planted": {}}
    with harness.canned_llm(tmp / "redrive-llm") as llm:
        for n in range(SELF_REDRIVES):
            got["self"].append(bench.redrive(BIN, name, same, llm.url,
                                             tmp / f"self-{n}.run.jsonl", options))
        for plant in harness.plants_for(harness.AGENTS[name]):
            if plant == "reply":
                trace = recorded["reply"]["wire"]
                seq = bench.planted_reply_seq(trace)
            else:
                trace = tmp / f"planted-{plant}.redrive.wire.jsonl"
                seq = bench.plant_into(same, plant, trace)
            run = bench.redrive(BIN, name, trace, llm.url, tmp / f"{plant}.run.jsonl",
                                options)
            run.update(seq=seq, trace=trace)
            got["planted"][plant] = run
    return got


def test_a_self_redrive_passes_every_time(redriven):
    """The same agent on the same script: the same session, five times out of five,
    whatever order its floating notifications came in and whatever IDs, clocks and
    process ids it made up; and the re-drive left nothing of the agent running."""
    said = [(r["exit"], r["report"]) for r in redriven["self"]]
    assert [e for e, _ in said] == [0] * SELF_REDRIVES, said
    assert [r["left_running"] for r in redriven["self"]] == [[]] * SELF_REDRIVES


def test_every_planted_change_is_caught_at_the_changed_frame(redriven):
    """A changed model reply, a changed client answer, a rejected permission: each exits
    1, and the first difference reported is the changed frame (the reply's first
    changed chunk; the first agent frame that shows the planted answer; the first one
    after the rejected permission, in its turn)."""
    from bench import agents as bench

    for plant, run in redriven["planted"].items():
        assert run["exit"] == 1, (plant, run["report"])
        report = run["report"]
        assert report["event"] == "difference", (plant, report)
        assert bench.at_change(plant, run["seq"], run["trace"], run), (plant, report)


PLUGIN_TEST = """
import json, os
from pathlib import Path

def test_the_agent_answers_as_recorded(acp_client_replay):
    os.chdir(os.environ["WS"])  # where the agent runs, as the recording's did
    acp_client_replay(os.environ["TRACE"], json.loads(os.environ["AGENT"]),
                      workspace=os.environ["WS"], timeout=60)
"""


def test_the_plugin_fails_the_test_with_the_difference(recorded, redriven, pytester,
                                                       monkeypatch):
    """acp_client_replay on a planted change: the test's one failure shows the difference,
    its kind, the recorded and live frames and the pointers that differ."""
    from bench import agents as bench

    name = recorded["name"]
    plant, run = next(iter(redriven["planted"].items()))
    report = run["report"]
    with harness.canned_llm(recorded["tmp"] / "plugin-llm") as llm:
        argv, env, ws = harness.prepare(name, bench.workspace_of(run["trace"]).parent,
                                        llm.url)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("WS", str(ws))
        monkeypatch.setenv("TRACE", str(run["trace"]))
        monkeypatch.setenv("AGENT", orjson.dumps(argv).decode())
        pytester.makepyfile(test_agent=PLUGIN_TEST)
        got = pytester.runpytest_inprocess("-p", "acp_pipes.testing.pytest_plugin",
                                           "-p", "no:cacheprovider")
    got.assert_outcomes(failed=1)
    out = got.stdout.str()
    assert "exit 1: the agent's frames differ from the cassette" in out
    assert f"difference ({report['kind']}): " in out
    assert "recorded (seq " in out and "live (seq " in out
    assert "differs at (recorded -> live):" in out or report["kind"] in ("missing", "order")
    assert "ERROR at teardown" not in out and "Traceback" not in out


if __name__ == "__main__":  # run by hand: python -m tests.agents.test_real_agents
    os.environ.setdefault("ACP_PIPES_REAL_AGENTS", "1")
    raise SystemExit(pytest.main([str(Path(__file__)), "-q", "-x"]))

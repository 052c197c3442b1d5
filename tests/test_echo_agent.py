"""acp-echo-agent: the real executable over real pipes, every frame checked against the
ACP v2 schema (v2.0.0-alpha.9, ASR-700), output bytes a pure function of input bytes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import jsonschema
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_pipes import __version__
from acp_pipes.echo.agent import echo_agent
from acp_pipes.echo.client import client_session
from tests.acp_schema import FrameChecker, check_conversation

REPO = Path(__file__).resolve().parents[1]
HELLO = REPO / "examples" / "hello"
AGENT = [sys.executable, "-m", "acp_pipes.cli.echo_agent"]
# Without PYTHONUNBUFFERED, so the agent's own flushes are what the live-pipe test checks.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def run_agent(client: bytes, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*AGENT, *args], input=client, capture_output=True, cwd=REPO, env=ENV, timeout=60
    )


def stream(frames) -> bytes:
    return b"".join(f + b"\n" for f in frames)


def frames_of(out: bytes) -> list:
    assert out.endswith(b"\n"), "every frame ends with LF"
    return [orjson.loads(line) for line in out.split(b"\n")[:-1]]


def talk(client_lines: list[bytes], *args: str) -> tuple[list, list]:
    """Run the agent on these client lines; check both sides against the schema."""
    proc = run_agent(stream(client_lines), *args)
    assert proc.returncode == 0, proc.stderr
    agent = frames_of(proc.stdout)
    client = [orjson.loads(line) for line in client_lines]
    check_conversation(client, agent)
    return client, agent


def req(rid, method: str, **params) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def note(method: str, **params) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": method, "params": params})


def answer(rid, result) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": result})


def prompt(rid, text: str, sid: str = "sess-1") -> bytes:
    return req(rid, "session/prompt", sessionId=sid, prompt=[{"type": "text", "text": text}])


OPEN = [
    req(0, "initialize", protocolVersion=2, info={"name": "t", "version": "0"}),
    req(1, "session/new", cwd="/w", mcpServers=[]),
]


def updates(agent: list, kind: str | None = None) -> list[dict]:
    ups = [
        f["params"]["update"]
        for f in agent
        if isinstance(f, dict) and f.get("method") == "session/update"
    ]
    return [u for u in ups if kind is None or u["sessionUpdate"] == kind]


def shape(u: dict) -> str:
    """An update in a word: its kind plus the state/status it reports."""
    tail = u.get("state") or u.get("status") or ""
    stop = u.get("stopReason")
    return u["sessionUpdate"] + (f":{tail}" if tail else "") + (f":{stop}" if stop else "")


def by_id(agent: list, rid) -> dict:
    (frame,) = [
        f for f in agent if isinstance(f, dict) and "method" not in f and f.get("id") == rid
    ]
    return frame


TURN = [
    "user_message",
    "state_update:running",
    "plan_update",
    *["agent_message_chunk"] * 3,
    "tool_call_update:pending",
    "tool_call_update:in_progress",
    *["tool_call_content_chunk"] * 2,
    "tool_call_update:completed",
    "plan_update",
    "usage_update",
    "state_update:idle:end_turn",
]


# -- the bundled example ----------------------------------------------------------------


def test_hello_example_is_what_the_generator_writes():
    expected = stream(client_session(2, permission_every=2))
    assert (HELLO / "client.jsonl").read_bytes() == expected
    assert run_agent(b"", "--client-session", "2", "--permission-every", "2").stdout == expected


def test_hello_example_flow_and_schema():
    client_lines = (HELLO / "client.jsonl").read_bytes().splitlines()
    proc = run_agent(stream(client_lines))
    assert proc.returncode == 0 and proc.stderr == b""
    assert proc.stdout == (HELLO / "agent.jsonl").read_bytes()  # byte-exact golden
    client, agent = talk(client_lines)
    init = by_id(agent, 0)["result"]
    assert init["protocolVersion"] == 2
    assert init["info"] == {
        "name": "acp-echo-agent",
        "title": "ACP echo agent",
        "version": __version__,
    }
    assert by_id(agent, 1)["result"] == {"sessionId": "sess-1"}
    # The prompt response comes first: it only acknowledges insertion (PromptResponse).
    first = agent.index(by_id(agent, 2))
    assert agent[first + 1]["params"]["update"]["sessionUpdate"] == "user_message"
    # ASR-713: the user_message upsert carries the messageId of the prompt response.
    users = updates(agent, "user_message")
    assert [u["messageId"] for u in users] == [
        by_id(agent, 2)["result"]["messageId"],
        by_id(agent, 3)["result"]["messageId"],
    ]
    assert users[0]["content"] == client[2]["params"]["prompt"]
    # The second turn pauses on a permission request, answered by the client's frame 4.
    permission = [f for f in agent if f.get("method") == "session/request_permission"]
    assert [p["id"] for p in permission] == [client[4]["id"]] == [1]
    assert permission[0]["params"]["subject"]["toolCall"]["toolCallId"] == "call-2"
    turn2 = [shape(u) for u in updates(agent)[len(TURN) :]]
    assert turn2 == TURN[:7] + ["state_update:requires_action", "state_update:running"] + TURN[7:]
    assert [shape(u) for u in updates(agent)[: len(TURN)]] == TURN
    assert by_id(agent, 4)["result"] == {}
    assert agent[-1] == by_id(agent, 4)


def test_chunks_concatenate_to_the_echo():
    _, agent = talk([*OPEN, prompt(2, "héllo wörld 🌍")])
    chunks = updates(agent, "agent_message_chunk")
    assert {c["messageId"] for c in chunks} == {"msg-agent-1"}
    assert "".join(c["content"]["text"] for c in chunks) == "Echo: héllo wörld 🌍"
    tool = updates(agent, "tool_call_content_chunk")
    assert "".join(c["content"]["content"]["text"] for c in tool) == "héllo wörld 🌍"


# -- determinism and volume -------------------------------------------------------------


def test_two_runs_are_byte_identical():
    client = stream(client_session(40, permission_every=3, elicit_every=7, text="déjà vu"))
    a, b = run_agent(client), run_agent(client)
    assert a.returncode == b.returncode == 0
    assert a.stderr == b""  # every scripted answer matched a request the agent made
    assert a.stdout == b.stdout and len(a.stdout) > 10_000


def test_two_sessions_with_the_same_prompts_get_the_same_updates():
    lines = [*OPEN, req(2, "session/new", cwd="/w"), prompt(3, "ab"), prompt(4, "ab", "sess-2")]
    _, agent = talk(lines)
    one, two = (
        [
            f["params"]["update"]
            for f in agent
            if f.get("method") == "session/update" and f["params"]["sessionId"] == sid
        ]
        for sid in ("sess-1", "sess-2")
    )
    assert one == two and len(one) == len(TURN)


def test_a_thousand_prompts_through_real_pipes():
    client = stream(client_session(1000, permission_every=10))
    proc = run_agent(client)
    assert proc.returncode == 0 and proc.stderr == b""
    lines = proc.stdout.split(b"\n")
    assert lines[-1] == b""
    responses = [ln for ln in lines if b'"result":{"messageId"' in ln]
    idles = [ln for ln in lines if b'"state":"idle","stopReason":"end_turn"' in ln]
    asks = [ln for ln in lines if b'"method":"session/request_permission"' in ln]
    assert (len(responses), len(idles), len(asks)) == (1000, 1000, 100)
    assert orjson.loads(lines[-2]) == {"jsonrpc": "2.0", "id": 1002, "result": {}}


# -- agent -> client requests -----------------------------------------------------------


def test_permission_rejected_fails_the_tool():
    _, agent = talk(stream(client_session(1, permission_every=1, reject=True)).splitlines())
    tool = updates(agent, "tool_call_update")
    assert [t["status"] for t in tool] == ["pending", "failed"]  # never ran
    assert tool[-1]["rawOutput"] == {"error": "permission rejected"}
    assert shape(updates(agent)[-1]) == "state_update:idle:end_turn"


def test_elicitation_answer_joins_the_echo():
    lines = list(client_session(1, elicit_every=1, text="q"))
    _, agent = talk(lines)
    (ask,) = [f for f in agent if f.get("method") == "elicitation/create"]
    assert ask["id"] == 1 and ask["params"]["mode"] == "form"
    echo = "".join(c["content"]["text"] for c in updates(agent, "agent_message_chunk"))
    assert echo == "Echo: /elicit q 1 [answer: yes 1]"
    kinds = [shape(u) for u in updates(agent)]
    assert kinds[:5] == [
        "user_message",
        "state_update:running",
        "plan_update",
        "state_update:requires_action",
        "state_update:running",
    ]


def test_a_recording_with_elicitations_is_spec_clean(tmp_path):
    """The scripted client advertises form elicitation when its prompts ask for one, so
    acp-frame --validate finds nothing wrong with what the echo agent then sends."""
    from tests.conftest import record_lockstep, run_tool

    client = list(client_session(6, permission_every=2, elicit_every=3))
    assert orjson.loads(client[0])["params"]["capabilities"] == {"elicitation": {"form": {}}}
    assert orjson.loads(next(client_session(6)))["params"]["capabilities"] == {}
    wire = tmp_path / "elicit.jsonl"
    agent = record_lockstep(client, wire)
    assert agent.count(b'"method":"elicitation/create"') == 2
    checked = run_tool("frame", "--validate", str(wire))
    assert checked.returncode == 0, checked.stdout
    assert orjson.loads(checked.stdout.splitlines()[-1])["violations"] == 0


def test_agent_waits_for_the_answer_on_a_live_pipe():
    """The request is flushed before the agent blocks on stdin: a client that answers only
    after reading it gets the rest of the turn (a missing flush would hang, not pass)."""
    proc = subprocess.Popen(
        [*AGENT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=ENV,
    )
    guard = threading.Timer(30, proc.kill)
    guard.start()
    try:
        for line in [*OPEN, prompt(2, "/permission go")]:
            proc.stdin.write(line + b"\n")
        proc.stdin.flush()
        seen = []
        while not seen or seen[-1].get("method") != "session/request_permission":
            seen.append(orjson.loads(proc.stdout.readline()))
        rid = seen[-1]["id"]
        assert orjson.loads(proc.stdout.readline())["params"]["update"]["state"] == (
            "requires_action"
        )
        proc.stdin.write(
            answer(rid, {"outcome": {"outcome": "selected", "optionId": "allow"}}) + b"\n"
        )
        proc.stdin.close()
        rest = frames_of(proc.stdout.read())
        assert proc.wait() == 0
    finally:
        guard.cancel()
        proc.kill()
    assert shape(rest[-1]["params"]["update"]) == "state_update:idle:end_turn"
    assert [t["status"] for t in updates(rest, "tool_call_update")] == ["in_progress", "completed"]


def test_cancel_while_waiting_ends_the_turn_and_ignores_the_late_answer():
    lines = [
        *OPEN,
        prompt(2, "/permission x"),
        prompt(3, "queued"),
        note("session/cancel", sessionId="sess-1"),
        answer(1, {"outcome": {"outcome": "cancelled"}}),
    ]
    proc = run_agent(stream(lines))
    assert proc.returncode == 0
    assert b"stdin:6: response to unknown request id 1, ignored" in proc.stderr
    _, agent = talk(lines)
    kinds = [shape(u) for u in updates(agent)]
    end = kinds.index("state_update:idle:cancelled")
    assert kinds[end - 3 : end] == ["tool_call_update:cancelled", "plan_update", "usage_update"]
    # The prompt queued behind the waiting turn runs once it ended.
    assert kinds[end + 1 :] == TURN
    assert by_id(agent, 3)["result"] == {"messageId": "msg-user-2"}


def test_close_while_waiting_cancels_and_refuses_queued_prompts():
    lines = [
        *OPEN,
        prompt(2, "/elicit x"),
        prompt(3, "queued"),
        req(4, "session/close", sessionId="sess-1"),
        prompt(5, "late"),
    ]
    _, agent = talk(lines)
    assert by_id(agent, 3)["error"]["code"] == -32800
    assert by_id(agent, 5)["error"]["code"] == -32002
    assert by_id(agent, 4)["result"] == {}
    assert shape(updates(agent)[-1]) == "state_update:idle:cancelled"
    assert agent.index(by_id(agent, 4)) > agent.index(by_id(agent, 3))


def test_cancel_on_an_idle_session_is_a_no_op():
    lines = [*OPEN, prompt(2, "ab"), note("session/cancel", sessionId="sess-1")]
    _, agent = talk(lines)
    assert [shape(u) for u in updates(agent)] == TURN


# -- special prompts --------------------------------------------------------------------


def test_fail_and_error_prompts():
    _, agent = talk([*OPEN, prompt(2, "/fail now"), prompt(3, "/error now")])
    tools = updates(agent, "tool_call_update")
    assert tools[-1]["status"] == "failed" and tools[-1]["rawOutput"] == {"error": "echo failed"}
    states = [shape(u) for u in updates(agent, "state_update")]
    assert states == [
        "state_update:running",
        "state_update:idle:end_turn",
        "state_update:running",
        "state_update:idle:error",
    ]
    assert updates(agent)[-1]["error"]["code"] == -32603
    assert by_id(agent, 3)["result"] == {"messageId": "msg-user-2"}


def test_prompt_text_is_the_text_blocks_joined_and_bad_blocks_are_refused():
    link = {"type": "resource_link", "uri": "file:///w/a.py", "name": "a.py"}
    blocks = [{"type": "text", "text": "one"}, link, {"type": "text", "text": "two"}]
    bad = [[1], [{"type": "text"}], [{"text": "no type"}]]
    lines = [*OPEN, req(2, "session/prompt", sessionId="sess-1", prompt=blocks)]
    lines += [req(3 + i, "session/prompt", sessionId="sess-1", prompt=p) for i, p in enumerate(bad)]
    agent = frames_of(run_agent(stream(lines)).stdout)
    checker = FrameChecker("agent")  # only the agent side: the client frames are bad
    for line in lines:
        checker.note_request(orjson.loads(line))
    for frame in agent:
        checker(frame)
    assert updates(agent, "user_message")[0]["content"] == blocks
    assert updates(agent, "tool_call_update")[0]["rawInput"] == {"text": "one\ntwo"}
    assert [by_id(agent, 3 + i)["error"]["code"] for i in range(3)] == [-32602] * 3


# -- sessions ---------------------------------------------------------------------------


def test_resume_replays_whole_entities_then_state_then_response():
    lines = [
        *OPEN,
        prompt(2, "one"),
        prompt(3, "/fail two"),
        req(4, "session/close", sessionId="sess-1"),
        req(5, "session/resume", sessionId="sess-1", cwd="/w", replayFrom={"type": "start"}),
        req(6, "session/resume", sessionId="sess-1", cwd="/w"),
        req(7, "session/resume", sessionId="sess-1", cwd="/w", replayFrom={"type": "_x"}),
        req(8, "session/list"),
        prompt(9, "three"),
    ]
    _, agent = talk(lines)
    start, end = agent.index(by_id(agent, 4)) + 1, agent.index(by_id(agent, 5))
    replay = [f["params"]["update"] for f in agent[start:end]]
    assert [shape(u) for u in replay] == [
        "user_message",
        "plan_update",
        "agent_message",
        "tool_call_update:completed",
        "user_message",
        "plan_update",
        "agent_message",
        "tool_call_update:failed",
        "state_update:idle",
    ]
    assert replay[2]["content"] == [{"type": "text", "text": "Echo: one"}]
    live_chunks = [c["content"] for c in updates(agent, "tool_call_content_chunk")[:2]]
    assert replay[3]["content"] == live_chunks and replay[3]["name"] == "echo"
    assert [e["status"] for e in replay[1]["plan"]["entries"]] == ["completed", "completed"]
    assert by_id(agent, 5)["result"] == {}
    # Without replayFrom: only the current state, then the response.
    assert agent[end + 1]["params"]["update"] == {"sessionUpdate": "state_update", "state": "idle"}
    assert agent[end + 2] == by_id(agent, 6)
    assert by_id(agent, 7)["error"]["code"] == -32602
    assert by_id(agent, 8)["result"] == {"sessions": [{"sessionId": "sess-1", "cwd": "/w"}]}
    assert by_id(agent, 9)["result"] == {"messageId": "msg-user-3"}  # resumed, open again


# -- JSON-RPC errors --------------------------------------------------------------------


def test_jsonrpc_errors():
    lines = [
        b"{not json",
        b"",
        b"   ",
        b"[]",
        b"[1, 2]",
        b'"str"',
        b'{"jsonrpc":"1.0","id":7,"method":"initialize"}',
        b'{"jsonrpc":"2.0","id":8,"method":"no/such"}',
        b'{"jsonrpc":"2.0","method":"no/such/notification"}',
        b'{"jsonrpc":"2.0","id":9,"method":"session/new","params":{"cwd":"rel"}}',
        b'{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":{"sessionId":"x",'
        b'"prompt":[]}}',
        b'{"jsonrpc":"2.0","id":[1],"method":"initialize"}',
        b'{"jsonrpc":"2.0","id":99999999999999999999999,"method":"initialize"}',
        b'{"jsonrpc":"2.0","id":11,"method":"session/new","params":[1]}',
    ]
    proc = run_agent(stream(lines))
    assert proc.returncode == 0 and proc.stderr == b""
    agent = frames_of(proc.stdout)
    checker = FrameChecker("agent")
    assert [checker(f) for f in agent] == ["error"] * 2 + ["batch[error,error]"] + ["error"] * 8
    codes = [
        f["error"]["code"] if isinstance(f, dict) else [g["error"]["code"] for g in f]
        for f in agent
    ]
    assert codes == [
        -32700,
        -32600,
        [-32600, -32600],
        -32600,
        -32600,
        -32601,
        -32602,
        -32002,
        -32600,
        -32600,
        -32602,
    ]
    assert [f.get("id") for f in agent if isinstance(f, dict)] == [
        None,
        None,
        None,
        7,
        8,
        9,
        10,
        None,
        None,
        11,
    ]


@pytest.mark.parametrize("body, why", [
    (b'{"x":' + b"[" * 1100 + b"]" * 1100 + b"}", b"nested deeper than this agent reads"),
    (b'{"text":"\\ud800 lone"}', b"a lone surrogate or a number out of range"),
    (b'{"size":1e400}', b"a lone surrogate or a number out of range"),
])
def test_a_request_it_cannot_read_is_answered_with_its_own_id(body, why):
    """orjson refuses these (nesting past 1024 levels, a lone surrogate, a number beyond
    a double); the client waits for an answer to its id, so it gets one, and the agent
    goes on serving."""
    request = b'{"jsonrpc":"2.0","id":"r-5","method":"session/prompt","params":' + body + b"}"
    notification = b'{"jsonrpc":"2.0","method":"session/cancel","params":' + body + b"}"
    proc = run_agent(stream([*OPEN, request, notification, prompt(2, "after")]))
    assert proc.returncode == 0, proc.stderr
    agent = frames_of(proc.stdout)
    refused = by_id(agent, "r-5")
    assert refused["error"] == {"code": -32600, "message": "Invalid Request: " + why.decode()}
    FrameChecker("agent")(refused)
    assert proc.stderr == b"acp-echo-agent: stdin:4: notification with " + why + b", ignored\n"
    assert [shape(u) for u in updates(agent)] == TURN  # the next prompt is served
    # in a batch, each request of it gets its own answer
    batch = b"[" + request + b"," + request.replace(b'"r-5"', b"6") + b"]"
    (answers,) = frames_of(run_agent(batch + b"\n").stdout)
    assert [a["id"] for a in answers] == ["r-5", 6]


def test_batch_answers_in_one_array_after_its_updates():
    batch = b"[" + b",".join([*OPEN, prompt(2, "bc")]) + b"]"
    proc = run_agent(batch + b"\n")
    agent = frames_of(proc.stdout)
    assert [shape(u) for u in updates(agent)] == TURN
    assert [r["id"] for r in agent[-1]] == [0, 1, 2]
    check_conversation([orjson.loads(x) for x in [*OPEN, prompt(2, "bc")]], agent)


# -- the checker itself must be able to fail ---------------------------------------------


@pytest.mark.parametrize(
    "frame",
    [
        {"jsonrpc": "2.0", "id": 2, "result": {}},  # PromptResponse needs messageId
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": "s", "update": {"sessionUpdate": "state_updat", "state": "x"}},
        },
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": "s",
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": "x"},
                },
            },
        },
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/request_permission",
            "params": {"sessionId": "s", "title": "t", "options": []},
        },
    ],
)
def test_schema_checker_rejects_bad_frames(frame):
    with pytest.raises((jsonschema.ValidationError, AssertionError)):
        check_conversation([orjson.loads(prompt(2, "x"))], [frame])


# -- robustness -------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=40),
            st.sampled_from(
                [
                    *OPEN,
                    prompt(2, "/permission p"),
                    prompt(3, "/elicit e"),
                    note("session/cancel", sessionId="sess-1"),
                    answer(1, {}),
                    answer(2, {"action": "accept"}),
                    req(4, "session/close", sessionId="sess-1"),
                    req(
                        5,
                        "session/resume",
                        sessionId="sess-1",
                        cwd="/w",
                        replayFrom={"type": "start"},
                    ),
                ]
            ),
        ),
        max_size=12,
    )
)
def test_any_input_gives_schema_valid_frames(lines):
    lines = [ln.replace(b"\n", b" ") for ln in lines]
    agent = [orjson.loads(f) for f in echo_agent(lines)]
    client = []
    for ln in lines:
        try:
            client.append(orjson.loads(ln))
        except orjson.JSONDecodeError:
            pass
    checker = FrameChecker("agent")
    for c in client:
        for item in c if isinstance(c, list) else [c]:
            if isinstance(item, dict):
                checker.note_request(item)
    for frame in agent:
        checker(frame)


def test_cli_help_documents_the_special_prompts():
    proc = run_agent(b"", "--help")
    assert proc.returncode == 0
    for word in (
        b"/permission",
        b"/elicit",
        b"/fail",
        b"/error",
        b"session/cancel",
        b"--client-session",
    ):
        assert word in proc.stdout
    bad = run_agent(b"", "--client-session", "3", "--permission-every", "0")
    assert bad.returncode == 2 and b"--permission-every must be positive" in bad.stderr

"""ASR-732: recording a replay of S gives S' with the same context view.

Over real pipes for the conformance fixtures (acp-tee around acp-replay --serve, resumed
by a scripted client; acp-asr; acp-replay --compare), and in-process for a hypothesis
property over generated ACP v2 sessions (wire frames -> acp-asr's library -> replay ->
recorded -> acp-asr's library -> compare)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_pipes.asr import convert
from acp_pipes.asr.reader import AsrStream, read_streams
from acp_pipes.fold import fold
from acp_pipes.replay.asr.equivalence import compare_streams, compare_views, context_view
from acp_pipes.replay.asr.serve import Server, serve_lines
from tests.conftest import REPO, run_tool, tool_argv

FIXTURES = sorted(p / "stream.asr.jsonl" for p in (REPO / "tests/fixtures/replay").iterdir()
                  if (p / "stream.asr.jsonl").is_file())
FIXTURES += sorted(p / "expected.asr.jsonl" for p in (REPO / "tests/fixtures/asr").iterdir()
                   if (p / "expected.asr.jsonl").is_file())


def req(rid, method, params) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def resume_client(stream: AsrStream) -> list[bytes]:
    roots = stream.header["workspace"]["roots"]
    cwd = roots[0]["path"] if roots and isinstance(roots[0]["path"], str) else "/"
    sid = stream.session_id
    return [req(0, "initialize", {"protocolVersion": 2, "info": {"name": "rt", "version": "1"},
                                  "capabilities": {}}),
            req(1, "session/resume", {"sessionId": sid, "cwd": cwd,
                                      "replayFrom": {"type": "start"}}),
            req(2, "session/close", {"sessionId": sid})]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.parent.name)
def test_fixture_round_trip_over_pipes(path: Path, tmp_path: Path):
    for n, stream in enumerate(read_streams(path.read_bytes().splitlines(), str(path))):
        if stream.header.get("lineage", {}).get("forkedFrom"):
            continue  # a fork's stream: resuming it records a plain session (lineage lost)
        client = tmp_path / f"client{n}.jsonl"
        client.write_bytes(b"".join(c + b"\n" for c in resume_client(stream)))
        wire = tmp_path / f"replayed{n}.wire.jsonl"
        src = tmp_path / f"s{n}.asr.jsonl"
        src.write_bytes(b"".join(orjson.dumps(x) + b"\n"
                                 for x in [stream.header, *stream.records]))
        r = run_tool("tee", "-o", str(wire), "--clock", "epoch", "--no-host", "--",
                     *tool_argv("replay", "--serve", str(src)), input=client.read_bytes(),
                     timeout=60)
        assert r.returncode == 0, r.stderr
        again = tmp_path / f"s{n}.replayed.asr.jsonl"
        r = run_tool("asr", str(wire))
        assert r.returncode == 0, r.stderr
        again.write_bytes(r.stdout)
        r = run_tool("replay", "--compare", str(src), str(again))
        assert r.returncode == 0, (r.stdout + r.stderr).decode()
        assert orjson.loads(r.stderr.splitlines()[-1])["equivalent"] is True


def test_compare_finds_a_difference(tmp_path: Path):
    src = REPO / "tests/fixtures/replay/ASR-728-tool-status-mapping/stream.asr.jsonl"
    changed = tmp_path / "changed.asr.jsonl"
    changed.write_bytes(src.read_bytes().replace(b'"input":{"n":3}', b'"input":{"n":33}'))
    r = run_tool("replay", "--compare", str(src), str(changed))
    assert r.returncode == 1
    diff = orjson.loads(r.stdout.splitlines()[0])
    assert diff == {"op": "differs", "index": 3, "entity": "tool_call", "id": "c3",
                    "field": "input", "a": {"n": 3}, "b": {"n": 33}}


# -- ASR-732: each kind of difference the rule lists makes --compare exit 1 -------------


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[str, list[dict]]:
    """Real streams to mutate, made by acp-asr from sessions recorded by acp-tee: the
    official v1 SDK agent and client (thoughts, messages, a plan, tool calls with inputs,
    statuses, display content and diffs) and the echo agent (v2, tool names), and the
    message ID spaces fixture (a prompt, a thought and an agent message all ``m1``)."""
    import asyncio

    from acp_pipes.echo.client import client_session
    from tests.conftest import record_lockstep

    tmp = tmp_path_factory.mktemp("recorded")
    (tmp / "ws").mkdir()
    asyncio.run(_record_v1_session(tmp / "sdk.wire.jsonl", tmp / "store", tmp / "ws",
                                   ["fix it", "and again"]))
    record_lockstep(list(client_session(3)), tmp / "echo.wire.jsonl", tmp=tmp)
    out = {}
    for name in ("sdk", "echo"):
        r = run_tool("asr", str(tmp / f"{name}.wire.jsonl"))
        assert r.returncode == 0, r.stderr
        out[name] = [orjson.loads(x) for x in r.stdout.splitlines()]
    spaces = REPO / "tests/fixtures/replay/ASR-724-732-message-id-spaces/stream.asr.jsonl"
    out["spaces"] = [orjson.loads(x) for x in spaces.read_bytes().splitlines()]
    return out


def _where(recs: list[dict], **match) -> int:
    """The index of the first record holding every field of ``match`` (``content_type``:
    its first part's type)."""
    for i, r in enumerate(recs):
        want = dict(match)
        part = want.pop("content_type", None)
        if part is not None and not (r.get("content") and r["content"][0].get("type") == part):
            continue
        if all(r.get(k) == v for k, v in want.items()):
            return i
    raise AssertionError(f"no record {match}")


def _drop(**match):
    def f(recs):
        del recs[_where(recs, **match)]
    return f


def _drop_all(**match):
    def f(recs):
        n = len(recs)
        while True:
            try:
                del recs[_where(recs, **match)]
            except AssertionError:
                break
        assert len(recs) < n
    return f


def _set(field, value, **match):
    def f(recs):
        recs[_where(recs, **match)][field] = value
    return f


def _swap_first_user_and_thought(recs):
    i = _where(recs, type="message", role="user")
    j = _where(recs, type="message", content_type="reasoning")
    recs[i], recs[j] = recs[j], recs[i]


def _text(value, **match):
    def f(recs):
        rec = recs[_where(recs, **match)]
        field = "content" if rec["type"] == "message" else "displayContent"
        rec[field] = [{**rec[field][0], "text": value}, *rec[field][1:]]
    return f


def _change(f_change):
    def f(recs):
        fc = recs[_where(recs, type="file_change")]
        fc["changes"] = [f_change(dict(fc["changes"][0])), *fc["changes"][1:]]
    return f


DIFFERENCES = [
    # (base stream, mutation, the one difference found; a and b are S and S2)
    ("entity missing", "sdk", _drop(type="message", content_type="reasoning"),
     {"op": "missing", "index": 1, "entity": "thought",
      "id": "v1:thought:efb92401c400d8c2:1"}),
    ("entity missing at the end", "sdk", _drop(type="message", content=[
        {"text": "Done: and again", "type": "text"}]),
     {"op": "missing", "index": 12, "entity": "message", "id": "v1:agent:fae5de9dbf3e0e0f:1",
      "role": "assistant"}),
    ("order changed", "sdk", _swap_first_user_and_thought,
     {"op": "moved", "index": 1, "to": 0, "entity": "thought",
      "id": "v1:thought:efb92401c400d8c2:1"}),
    ("ID changed", "sdk", _set("messageId", "other", type="message", role="user"),
     {"op": "differs", "index": 0, "field": "id", "a": "v1:user:56ae93f1ef9236ba:1",
      "b": "other"}),
    ("role changed", "sdk", _set("role", "user", type="message", content_type="text",
                                 role="assistant"),
     {"op": "differs", "index": 2, "field": "role", "a": "assistant", "b": "user"}),
    ("content block changed", "sdk", _text("Done: fixed", type="message", role="assistant",
                                           content_type="text"),
     {"op": "differs", "index": 2, "field": "content", "entity": "message",
      "b": [{"text": "Done: fixed", "type": "text"}]}),
    ("tool name", "echo", _set("name", "echo2", type="tool_call"),
     {"op": "differs", "field": "name", "id": "call-1", "a": "echo", "b": "echo2"}),
    ("tool title", "sdk", _set("title", "Peek", type="tool_call"),
     {"op": "differs", "field": "title", "id": "read-1", "a": "Read notes.txt", "b": "Peek"}),
    ("tool kind", "sdk", _set("kind", "search", type="tool_call"),
     {"op": "differs", "field": "kind", "id": "read-1", "a": "read", "b": "search"}),
    ("input", "sdk", _set("input", {"path": "/elsewhere"}, type="tool_call"),
     {"op": "differs", "field": "input", "id": "read-1", "b": {"path": "/elsewhere"}}),
    ("mapped status", "sdk", _set("status", "failed", type="tool_result"),
     {"op": "differs", "field": "status", "id": "read-1", "a": "completed", "b": "failed"}),
    ("display content", "sdk", _text("four\n", type="tool_result"),
     {"op": "differs", "field": "display", "id": "read-1", "a": [
         {"text": "one\ntwo\nthree\n", "type": "text"}],
      "b": [{"text": "four\n", "type": "text"}]}),
    ("file change operation", "sdk", _change(lambda c: {**c, "op": "add"}),
     {"op": "differs", "field": "fileChanges", "id": "edit-1"}),
    ("file change path", "sdk", _change(lambda c: {**c, "path": {"root": "root0",
                                                                "path": "other.txt"}}),
     {"op": "differs", "field": "fileChanges", "id": "edit-1"}),
    # ASR-724: messages of different types share an ID and stay distinct: a lost one is
    # seen, whichever it is
    ("user message sharing its ID lost", "spaces", _drop(type="message", role="user",
                                                          messageId="m1"),
     {"op": "missing", "index": 0, "entity": "message", "id": "m1", "role": "user"}),
    ("thought sharing its ID lost", "spaces", _drop(type="message", messageId="m1",
                                                     content_type="reasoning"),
     {"op": "missing", "index": 1, "entity": "thought", "id": "m1"}),
    ("agent message sharing its ID lost", "spaces", _drop_all(type="message",
                                                              role="assistant",
                                                              messageId="m1",
                                                              content_type="text"),
     {"op": "missing", "index": 2, "entity": "message", "id": "m1", "role": "assistant"}),
    ("revision of a message sharing its ID lost", "spaces", _drop(id="r7"),
     {"op": "differs", "index": 2, "id": "m1", "field": "content",
      "a": [{"type": "text", "text": "seen it"}], "b": [{"type": "text", "text": "seen"}]}),
    ("prompt with an agent message's ID lost", "spaces", _drop(type="message", role="user",
                                                                messageId="a1"),
     {"op": "missing", "index": 4, "entity": "message", "id": "a1", "role": "user"}),
]


def _write(path: Path, recs: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return path


@pytest.mark.parametrize(("base", "mutate", "want"), [d[1:] for d in DIFFERENCES],
                         ids=[d[0] for d in DIFFERENCES])
def test_compare_exits_1_for_each_kind_of_difference(base, mutate, want, recorded,
                                                     tmp_path: Path):
    """ASR-732: every kind of difference the rule lists (entities, order, IDs, roles,
    content blocks, tool names, inputs, mapped statuses, display content, file change
    operations) in a real stream makes the real ``acp-replay --compare S S2`` exit 1 and
    say where, both ways round."""
    recs = [dict(r) for r in recorded[base]]
    mutate(recs)
    assert recs != recorded[base]
    a = _write(tmp_path / "a.asr.jsonl", recorded[base])
    b = _write(tmp_path / "b.asr.jsonl", recs)
    r = run_tool("replay", "--compare", str(a), str(b))
    assert r.returncode == 1, (r.stdout + r.stderr).decode()
    (diff,) = [orjson.loads(x) for x in r.stdout.splitlines()]  # that one, and no other
    assert {k: diff.get(k) for k in want} == want, diff
    summary = orjson.loads(r.stderr.splitlines()[-1])
    assert summary["equivalent"] is False and summary["differences"] == 1
    back = run_tool("replay", "--compare", str(b), str(a))
    assert back.returncode == 1 and len(back.stdout.splitlines()) == 1, back.stderr


@pytest.mark.parametrize("base", ["sdk", "echo", "spaces"])
def test_compare_of_identical_streams_exits_0(base, recorded, tmp_path: Path):
    a = _write(tmp_path / "a.asr.jsonl", recorded[base])
    b = _write(tmp_path / "b.asr.jsonl", recorded[base])
    r = run_tool("replay", "--compare", str(a), str(b))
    assert r.returncode == 0 and r.stdout == b"", (r.stdout + r.stderr).decode()
    assert orjson.loads(r.stderr.splitlines()[-1])["equivalent"] is True


def test_compare_maps_statuses_as_replay_does(recorded, tmp_path: Path):
    """ASR-728: denied is replayed as failed, interrupted as cancelled; the statuses are
    compared mapped, so those are no difference, and the compare still sees the view."""
    recs = [dict(r) for r in recorded["sdk"]]
    i = _where(recs, type="tool_result")
    a = _write(tmp_path / "a.asr.jsonl", [*recs[:i], {**recs[i], "status": "denied"},
                                          *recs[i + 1:]])
    b = _write(tmp_path / "b.asr.jsonl", [*recs[:i], {**recs[i], "status": "failed"},
                                          *recs[i + 1:]])
    r = run_tool("replay", "--compare", str(a), str(b))
    assert r.returncode == 0 and r.stdout == b"", (r.stdout + r.stderr).decode()
    c = _write(tmp_path / "c.asr.jsonl", [*recs[:i], {**recs[i], "status": "cancelled"},
                                          *recs[i + 1:]])
    assert run_tool("replay", "--compare", str(a), str(c)).returncode == 1


# -- a hypothesis property over generated sessions --------------------------------------

text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
block = st.one_of(st.builds(lambda s: {"type": "text", "text": s}, text),
                  st.builds(lambda u: {"type": "resource_link", "uri": "file:///x/" + u,
                                       "name": u or "n"}, st.text("abc", max_size=3)))
status = st.sampled_from(["completed", "failed", "cancelled", None])
turn = st.fixed_dictionaries({
    "prompt": st.lists(block, min_size=1, max_size=2),
    "thought": st.one_of(st.none(), text),
    "chunks": st.lists(text, min_size=1, max_size=3),
    "tools": st.lists(st.tuples(status, st.lists(block, max_size=2), st.booleans(),
                                st.dictionaries(st.text("ab", max_size=2),
                                                st.integers(-1000, 1000), max_size=2)),
                      max_size=2),
    "plan": st.booleans(),
    # ASR-724: message IDs of one turn: its own; the prompt's for the thought and the
    # agent message too (each message type has its own ID space); the prompt answered
    # with the previous turn's agent message's ID
    "ids": st.sampled_from(["own", "shared", "earlier_agent"]),
})


class _Wire:
    """Wire frames (dir, bytes) being written: the client's requests (``c``), the agent's
    messages (``a``) and session updates (``upd``)."""

    def __init__(self, sid: str):
        self.sid = sid
        self.out: list[tuple[str, bytes]] = []

    def c(self, rid, method, params) -> None:
        self.out.append(("c2a", req(rid, method, params)))

    def a(self, obj) -> None:
        self.out.append(("a2c", orjson.dumps({"jsonrpc": "2.0", **obj})))

    def upd(self, u) -> None:
        self.a({"method": "session/update", "params": {"sessionId": self.sid, "update": u}})


def session_frames(turns: list[dict]) -> list[tuple[str, bytes]]:
    """An ACP v2 session as wire frames (dir, bytes): what an agent and client send."""
    w = _Wire("gen-1")
    out, sid, c, a, upd = w.out, w.sid, w.c, w.a, w.upd

    c(0, "initialize", {"protocolVersion": 2, "info": {"name": "c", "version": "1"},
                        "capabilities": {}})
    a({"id": 0, "result": {"protocolVersion": 2, "info": {"name": "Gen", "version": "1"},
                           "capabilities": {"session": {}}}})
    c(1, "session/new", {"cwd": "/ws", "mcpServers": []})
    a({"id": 1, "result": {"sessionId": sid}})
    users: set[str] = set()
    agent_id = None
    for i, t in enumerate(turns, 2):
        uid, tid, aid = f"u{i}", f"t{i}", f"a{i}"
        if t["ids"] == "shared":
            tid = aid = uid
        elif t["ids"] == "earlier_agent" and agent_id is not None and agent_id not in users:
            uid = agent_id
        users.add(uid)
        agent_id = aid
        c(i, "session/prompt", {"sessionId": sid, "prompt": t["prompt"]})
        a({"id": i, "result": {"messageId": uid}})
        upd({"sessionUpdate": "user_message", "messageId": uid, "content": t["prompt"]})
        upd({"sessionUpdate": "state_update", "state": "running"})
        if t["thought"] is not None:
            upd({"sessionUpdate": "agent_thought_chunk", "messageId": tid,
                 "content": {"type": "text", "text": t["thought"]}})
        for ch in t["chunks"]:
            upd({"sessionUpdate": "agent_message_chunk", "messageId": aid,
                 "content": {"type": "text", "text": ch}})
        for k, (st_, shown, diff, inp) in enumerate(t["tools"]):
            cid = f"c{i}-{k}"
            upd({"sessionUpdate": "tool_call_update", "toolCallId": cid, "name": "tool",
                 "title": "T", "kind": "edit", "status": "pending", "rawInput": inp})
            content = [{"type": "content", "content": b} for b in shown]
            if diff:
                content.append({"type": "diff", "changes": [
                    {"operation": "modify", "path": f"/ws/f{k}.py"}],
                    "patch": {"format": "git_patch", "text": "@@\n"}})
            final = {"sessionUpdate": "tool_call_update", "toolCallId": cid,
                     "content": content}
            if st_ is not None:
                final["status"] = st_
                final["rawOutput"] = {"ok": st_ == "completed"}
            upd(final)
        if t["plan"]:
            upd({"sessionUpdate": "plan_update", "plan": {
                "type": "items", "planId": f"p{i}",
                "entries": [{"content": "x", "priority": "low", "status": "completed"}]}})
        upd({"sessionUpdate": "usage_update", "used": i, "size": 100})
        upd({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"})
    c(len(turns) + 2, "session/close", {"sessionId": sid})
    a({"id": len(turns) + 2, "result": {}})
    return out


def record(frames: list[tuple[str, bytes]]) -> dict[str, AsrStream]:
    """acp-asr's library over in-memory wire records."""
    wire = [{"seq": n, "t": 1_000_000 * n, "dir": d, "raw": raw.decode()}
            for n, (d, raw) in enumerate(frames)]
    return {sid: AsrStream(lines[0], lines[1:])
            for sid, lines in convert(fold(wire)).items()}


def replay_and_record(stream: AsrStream) -> AsrStream:
    client = resume_client(stream)
    frames: list[tuple[str, bytes]] = []
    for line in client:  # lockstep, as an editor: each request, then the agent's answer
        frames.append(("c2a", line))
        frames.extend(("a2c", f) for f in serve_lines([stream], [line]))
    return record(frames)[stream.session_id]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(turn, min_size=1, max_size=4))
def test_round_trip_property(turns):
    (s,) = record(session_frames(turns)).values()
    s2 = replay_and_record(s)
    assert compare_streams(s, s2) == []
    view = context_view(s)
    assert len(view) >= 2 * len(turns)  # the check compares something
    # every prompt and agent message is there, whichever IDs they share (ASR-724)
    assert [e["role"] for e in view if e["entity"] == "message"] == ["user", "assistant"] \
        * len(turns)


def test_example_roundtrip_script(tmp_path: Path):
    """examples/roundtrip runs as documented and finds the streams equivalent."""
    import os
    import subprocess
    import sys

    from tests.conftest import tool_env

    env = {**tool_env(), "PYTHON": sys.executable,
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    r = subprocess.run(["sh", str(REPO / "examples/roundtrip/roundtrip.sh"), str(tmp_path)],
                       capture_output=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert b'"equivalent":true' in r.stderr
    assert orjson.loads((tmp_path / "losses.json").read_bytes())["complete"] is False


# -- ACP v1: v1 -> ASR -> v1 (session/load) -> ASR, the same context view ----------------

v1_status = st.sampled_from(["completed", "failed", None])  # v1 has no cancelled
v1_turn = st.fixed_dictionaries({
    "prompt": st.lists(block, min_size=1, max_size=2),
    "thought": st.one_of(st.none(), text),
    "chunks": st.lists(text, min_size=1, max_size=3),
    "tools": st.lists(st.tuples(v1_status, st.lists(block, max_size=2), st.booleans(),
                                st.dictionaries(st.text("ab", max_size=2),
                                                st.integers(-1000, 1000), max_size=2)),
                      max_size=2),
    "plan": st.one_of(st.none(), st.lists(st.sampled_from(["pending", "completed"]),
                                          min_size=1, max_size=3)),
})


def v1_session_frames(turns: list[dict]) -> list[tuple[str, bytes]]:
    """An ACP v1 session as wire frames: chunks without message IDs, tool_call then
    tool_call_update, v1 diffs, a plan sent whole, the turn ended by the response."""
    w = _Wire("gen-v1")
    out, sid, c, a, upd = w.out, w.sid, w.c, w.a, w.upd

    c(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {},
                        "clientInfo": {"name": "c", "version": "1"}})
    a({"id": 0, "result": {"protocolVersion": 1, "agentInfo": {"name": "Gen", "version": "1"},
                           "agentCapabilities": {"loadSession": True}}})
    c(1, "session/new", {"cwd": "/ws", "mcpServers": []})
    a({"id": 1, "result": {"sessionId": sid}})
    for i, t in enumerate(turns, 2):
        c(i, "session/prompt", {"sessionId": sid, "prompt": t["prompt"]})
        if t["thought"] is not None:
            upd({"sessionUpdate": "agent_thought_chunk",
                 "content": {"type": "text", "text": t["thought"]}})
        for ch in t["chunks"]:
            upd({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": ch}})
        for k, (st_, shown, diff, inp) in enumerate(t["tools"]):
            cid = f"c{i}-{k}"
            upd({"sessionUpdate": "tool_call", "toolCallId": cid, "title": "T", "kind": "edit",
                 "status": "pending", "rawInput": inp})
            content = [{"type": "content", "content": b} for b in shown]
            if diff:
                content.append({"type": "diff", "path": f"/ws/f{k}.py",
                                "oldText": f"old {i}\n", "newText": f"new {i}\nend"})
            final = {"sessionUpdate": "tool_call_update", "toolCallId": cid, "content": content}
            if st_ is not None:
                final["status"] = st_
                final["rawOutput"] = {"ok": st_ == "completed"}
            upd(final)
        if t["plan"] is not None:
            upd({"sessionUpdate": "plan", "entries": [
                {"content": f"step {n}", "priority": "medium", "status": s}
                for n, s in enumerate(t["plan"])]})
        upd({"sessionUpdate": "usage_update", "used": i, "size": 100})
        a({"id": i, "result": {"stopReason": "end_turn"}})
    return out


def load_v1_and_record(stream: AsrStream) -> tuple[AsrStream, dict]:
    """A v1 client loads ``stream`` from the server, recorded as acp-tee would."""
    reports: list[dict] = []
    sid = stream.session_id
    client = [req(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {},
                                    "clientInfo": {"name": "rt", "version": "1"}}),
              req(1, "session/load", {"sessionId": sid, "cwd": "/ws", "mcpServers": []})]
    server = Server([stream], report=reports.append)  # one connection
    frames: list[tuple[str, bytes]] = []
    for line in client:  # lockstep, as an editor
        frames.append(("c2a", line))
        frames.extend(("a2c", f) for f in server.feed(line))
    (report,) = reports
    return record(frames)[sid], report


def _joined_texts(view: list[dict]) -> list[dict]:
    """A context view as a v1 client shows it: two text blocks in a row are one text."""
    out = []
    for e in view:
        if e["entity"] == "message":
            blocks: list = []
            for b in e["content"]:
                if blocks and b.get("type") == "text" and blocks[-1].get("type") == "text":
                    blocks[-1] = {**blocks[-1], "text": blocks[-1]["text"] + b["text"]}
                else:
                    blocks.append(b)
            e = {**e, "content": blocks}
        out.append(e)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(v1_turn, min_size=1, max_size=4))
def test_v1_round_trip_property(turns):
    """ASR-732 for ACP v1: a v1 recording converted, loaded by a v1 client from
    acp-replay --serve and recorded again has the same context view (messages with their
    derived IDs, tool calls, statuses, display content, file changes, the plan), except
    what the loss report names: texts in a row, which a v1 client joins (text_blocks)."""
    (s,) = record(v1_session_frames(turns)).values()
    assert s.header["producer"]["source"]["formatVersion"] == "1"
    s2, report = load_v1_and_record(s)
    assert report["protocol"] == 1
    a, b = context_view(s), context_view(s2)
    if report["losses"].get("text_blocks"):
        a, b = _joined_texts(a), _joined_texts(b)
    assert compare_views(a, b) == []
    assert len(a) >= len(turns)  # the check compares something: each prompt at least
    assert not {"diff_text", "tool_status", "content_types"} & set(report["losses"])


# -- end to end: a v1 session of official SDK peers, served back to an SDK client --------


class _RecordingClient:
    """The official v1 SDK's client side: allows every request, keeps every update."""

    def __init__(self) -> None:
        self.updates: list[dict] = []

    async def request_permission(self, options, session_id, tool_call, **kwargs):
        from acp.schema import AllowedOutcome, RequestPermissionResponse

        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=options[0].option_id))

    async def session_update(self, session_id, update, **kwargs) -> None:
        self.updates.append(update.model_dump(mode="json", by_alias=True, exclude_none=True))

    def on_connect(self, conn) -> None:
        pass


async def _record_v1_session(wire: Path, store: Path, ws: Path, prompts: list[str]) -> list:
    """The SDK client, through the real acp-tee, in front of the SDK agent of
    tests/clients/v1_agent.py: a new session and ``prompts``. Returns what it saw."""
    import sys

    from acp import spawn_agent_process, text_block
    from acp.schema import Implementation

    from tests.conftest import tool_env

    client = _RecordingClient()
    tee = tool_argv("tee", "-o", str(wire), "--clock", "epoch", "--no-host", "--",
                    sys.executable, str(REPO / "tests/clients/v1_agent.py"), "--store",
                    str(store))
    async with spawn_agent_process(client, tee[0], *tee[1:], env=tool_env()) as (conn, _):
        await conn.initialize(protocol_version=1,
                              client_info=Implementation(name="recorder", version="1"))
        sid = (await conn.new_session(cwd=str(ws), mcp_servers=[])).session_id
        for text in prompts:
            # a client shows the prompt it sent, then the turn, which its response ends
            client.updates.append({"sessionUpdate": "user_message_chunk",
                                   "content": {"type": "text", "text": text}})
            await conn.prompt(session_id=sid, prompt=[text_block(text)])
            client.updates.append({"sessionUpdate": "turn_end"})
    return client.updates


def _shown(updates: list[dict]) -> dict:
    """What a v1 client shows of the updates it received: message texts (chunks joined
    per message: by messageId when sent, else while the kind holds), each tool call's
    status, kind and content, the plan as it ended. A usage update between two chunks
    is no boundary; a tool call, a plan or the end of a turn is."""
    messages: list[list] = []
    calls: dict[str, dict] = {}
    plan = None
    last = None
    for u in updates:
        kind = u["sessionUpdate"]
        if kind.endswith("_chunk"):
            key = (kind, u.get("messageId"))
            text = u["content"].get("text", "")
            if last == key and (u.get("messageId") is not None or messages):
                messages[-1][1] += text
            else:
                messages.append([kind, text])
            last = key
            continue
        if kind == "usage_update":
            continue
        last = None
        if kind in ("tool_call", "tool_call_update"):
            call = calls.setdefault(u["toolCallId"], {})
            call.update({k: u[k] for k in ("status", "kind", "content") if k in u})
        elif kind == "plan":
            plan = u["entries"]
    return {"messages": [m for m in messages if m[1]], "calls": calls, "plan": plan}


@pytest.mark.slow  # peers on the official Python SDK
def test_v1_session_from_sdk_agent_served_back_to_sdk_client(tmp_path: Path):
    """ASR-732 end to end for ACP v1: a session of the official SDK's agent and client,
    recorded by acp-tee -> acp-asr -> acp-replay --serve (recorded by acp-tee again) ->
    the SDK client loads it -> acp-asr: the two streams have the same context view
    (messages, tool calls with their diffs, the plan), and the loading client is shown
    the messages, tool calls and plan the recording client was shown."""
    import asyncio
    import subprocess
    import sys

    from tests.conftest import tool_env

    ws, store = tmp_path / "ws", tmp_path / "store"
    ws.mkdir()
    wire = tmp_path / "session.wire.jsonl"
    live = asyncio.run(_record_v1_session(wire, store, ws, ["fix it", "and again"]))
    r = run_tool("asr", str(wire))
    assert r.returncode == 0, r.stderr
    s = tmp_path / "S.asr.jsonl"
    s.write_bytes(r.stdout)

    served = tmp_path / "served.wire.jsonl"
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests/clients/sdk_v1_load_client.py"), "--",
         *tool_argv("tee", "-o", str(served), "--clock", "epoch", "--no-host", "--",
                    *tool_argv("replay", "--serve", str(s)))],
        capture_output=True, env=tool_env(), timeout=120)
    assert proc.returncode == 0, (proc.stdout + proc.stderr).decode(errors="replace")
    steps = [orjson.loads(x) for x in proc.stdout.splitlines()]
    (load,) = [x for x in steps if x.get("step") == "load"]
    loaded = [u["update"] for u in load["updates"]]

    r = run_tool("asr", str(served))
    assert r.returncode == 0, r.stderr
    s2 = tmp_path / "S2.asr.jsonl"
    s2.write_bytes(r.stdout)
    r = run_tool("replay", "--compare", str(s), str(s2))
    assert r.returncode == 0, (r.stdout + r.stderr).decode()
    assert orjson.loads(r.stderr.splitlines()[-1])["equivalent"] is True
    view = context_view(next(read_streams(s.read_bytes().splitlines(), str(s))))
    assert {e["entity"] for e in view} == {"message", "thought", "tool_call", "plan"}

    want, got = _shown(live), _shown(loaded)
    assert got["messages"] == want["messages"] and len(want["messages"]) == 8  # 4 a turn
    assert got["plan"] == want["plan"] and want["plan"]
    assert got["calls"].keys() == want["calls"].keys() and want["calls"]
    for cid, call in want["calls"].items():
        assert got["calls"][cid] == call, cid

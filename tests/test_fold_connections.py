"""One entity state per session across connections (ASR-704, ASR-706, ASR-718).

The state of every entity lives across the connections of a run: the same recording
converts to the same bytes whether its connections come in one wire log or one log
each, and through acp-fold | acp-asr as acp-asr alone.
"""

from __future__ import annotations

import orjson
import pytest

from tests.conftest import REPO, run_tool
from tests.test_asr_fixtures import _normalise

FIXTURES = REPO / "tests" / "fixtures" / "asr"
#: fixtures recorded over several connections, and how many
MULTI = {"ASR-704-entity-across-connections": 2, "ASR-717-live-after-replay": 2,
         "ASR-718-fork-live-after-copy": 2, "ASR-717-v1-resume-then-load": 3}


def _split(wire: bytes) -> list[bytes]:
    """A wire log of several connections as one log per connection."""
    logs: list[list[bytes]] = []
    for line in wire.splitlines(keepends=True):
        if b'"format"' in line:
            logs.append([])
        logs[-1].append(line)
    return [b"".join(x) for x in logs]


def _records(out: bytes) -> list[dict]:
    return [orjson.loads(x) for x in out.splitlines()]


@pytest.mark.parametrize("name", MULTI)
def test_one_log_per_connection_gives_the_same_streams(name, tmp_path):
    """The reviewed streams of the fixture, from one wire log per connection."""
    case = FIXTURES / name
    paths = []
    for i, log in enumerate(_split((case / "wire.jsonl").read_bytes())):
        paths.append(tmp_path / f"c{i}.jsonl")
        paths[-1].write_bytes(log)
    assert len(paths) == MULTI[name]
    got = run_tool("asr", *map(str, paths))
    assert got.returncode == 0, got.stderr.decode()
    assert _normalise(got.stdout) == _normalise((case / "expected.asr.jsonl").read_bytes())


def test_a_call_completed_on_a_second_log_keeps_its_name(tmp_path):
    """ASR-704: t1 completes on the second connection with only status and rawOutput;
    given as two files, its call is not rewritten nameless and a1 is "Hello world"."""
    case = FIXTURES / "ASR-704-entity-across-connections"
    paths = []
    for i, log in enumerate(_split((case / "wire.jsonl").read_bytes())):
        paths.append(tmp_path / f"c{i}.jsonl")
        paths[-1].write_bytes(log)
    recs = _records(run_tool("asr", *map(str, paths)).stdout)
    calls = [r for r in recs if r["type"] == "tool_call"]
    assert len(calls) == 1 and calls[0]["name"] == "read" and "capture" not in calls[0]
    texts = [r["content"][0]["text"] for r in recs
             if r["type"] == "message" and r["messageId"] == "a1"]
    assert texts == ["Hello", "Hello world"]


@pytest.mark.parametrize("name", MULTI)
def test_fold_then_asr_gives_the_reviewed_streams(name):
    """acp-fold | acp-asr over real pipes: the fold stream carries what acp-asr needs
    (the first sight of each revision) to write the fixture's streams."""
    case = FIXTURES / name
    folded = run_tool("fold", str(case / "wire.jsonl"))
    assert folded.returncode == 0
    via = run_tool("asr", input=folded.stdout)
    assert _normalise(via.stdout) == _normalise((case / "expected.asr.jsonl").read_bytes())


def test_fold_records_say_history_and_first_sight():
    """A replayed revision of an entity first seen live stays ``replayed: true`` and says
    ``firstReplayed: false`` with the first sight's ``t``; a live update after the replay
    patches the replayed state (ASR-707, ASR-717)."""
    case = FIXTURES / "ASR-717-live-after-replay"
    recs = _records(run_tool("fold", str(case / "wire.jsonl")).stdout)
    a1 = [r for r in recs if r.get("ev") == "entity" and r["id"] == "a1"]
    assert [(r["replayed"], r.get("firstReplayed")) for r in a1] == [
        (False, None), (True, False), (False, None)]
    assert len({r["t"] for r in a1}) == 1
    assert a1[-1]["value"]["content"] == [{"type": "text", "text": "Hello!"}]
    t1 = [r for r in recs if r.get("ev") == "entity" and r["id"] == "t1"][-1]
    assert t1["value"]["title"] == "New title" and t1["value"]["status"] == "completed"


def test_same_connection_replay_then_live_patches_the_replayed_state():
    """ASR-704/717 on one connection: live a1 "Hel" and t1 "Old title", a resume with a
    replay that says "Hello" and "New title", then live "!" and t1's completion: the
    records say "Hello!" and keep "New title" (not "Hel!" and the old title)."""
    from acp_pipes.asr import convert
    from acp_pipes.fold import fold
    from tests.test_fold import chunk, entities, frames, req, resp, upd

    recs = list(fold(frames(
        req(1, "session/new", cwd="/w"), resp(1, sessionId="s"),
        chunk("s", "a1", "Hel"),
        upd("s", sessionUpdate="tool_call_update", toolCallId="t1", name="edit",
            title="Old title", status="in_progress"),
        upd("s", sessionUpdate="state_update", state="idle"),
        req(2, "session/resume", sessionId="s", cwd="/w", replayFrom={"type": "start"}),
        upd("s", sessionUpdate="agent_message", messageId="a1",
            content=[{"type": "text", "text": "Hello"}]),
        upd("s", sessionUpdate="tool_call_update", toolCallId="t1", name="edit",
            title="New title", status="in_progress"),
        resp(2),
        chunk("s", "a1", "!"),
        upd("s", sessionUpdate="tool_call_update", toolCallId="t1", status="completed"),
        upd("s", sessionUpdate="state_update", state="idle"),
    )))
    a1 = [r["value"]["content"] for r in entities(recs, "agent_message")]
    assert a1[-1] == [{"type": "text", "text": "Hello!"}]
    t1 = entities(recs, "tool_call")[-1]
    assert t1["value"]["title"] == "New title" and t1["final"]
    stream = convert([{"format": "acp-pipes/fold", "version": 1, "connection": 0}, *recs])["s"]
    calls = [r for r in stream if r["type"] == "tool_call"]
    assert [c["title"] for c in calls] == ["Old title", "New title"]
    assert [r["ts"] for r in stream if r.get("messageId") == "a1"] == [
        "1970-01-01T00:00:00.000002Z"] * 3

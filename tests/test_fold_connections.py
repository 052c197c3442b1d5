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
MULTI = ["ASR-704-entity-across-connections", "ASR-717-live-after-replay",
         "ASR-718-fork-live-after-copy", "ASR-717-v1-resume-then-load"]


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
    assert len(paths) >= 2
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

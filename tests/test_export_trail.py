"""acp-export agent-trail: Agent Trail 0.1.0 files, valid by its own schema and fixtures.

The schema and the fixtures are Agent Trail's, vendored unchanged in
tests/fixtures/agent-trail/ (Apache-2.0, see its README). The validator is first held to
the fixtures (every valid one accepted, every invalid-schema one rejected), then every
file acp-export writes is validated line by line, and checked against the rules of the
spec's file graph the schema cannot express (spec section 18.4): the header first, IDs
unique, results and aborts naming an earlier call, times that never go back, every call
closed or listed open at the end.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from jsonschema import Draft202012Validator

from tests.conftest import REPO, run_tool

TRAIL = REPO / "tests" / "fixtures" / "agent-trail"
FIX = REPO / "tests" / "fixtures" / "asr"
SCHEMA = orjson.loads((TRAIL / "schema-v0.1.0.json").read_bytes())
VALIDATOR = Draft202012Validator(SCHEMA)


def problems(path: Path) -> list[str]:
    """Every line of an Agent Trail file that its schema rejects, and every break of the
    file-graph rules this test checks."""
    out = []
    lines = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    for n, line in enumerate(lines, 1):
        for e in VALIDATOR.iter_errors(line):
            out.append(f"{path.name}:{n}: {e.message[:200]}")
    return out


def graph_problems(path: Path) -> list[str]:
    lines = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    out = []
    if not lines or lines[0].get("type") != "session":
        return [f"{path.name}: no session header at line 1"]
    seen: set[str] = set()
    calls: set[str] = set()
    closed: set[str] = set()
    last = ""
    for n, e in enumerate(lines, 1):
        if e["id"] in seen:
            out.append(f"{n}: duplicate id")
        seen.add(e["id"])
        if n == 1:
            continue
        if e["ts"] < last:
            out.append(f"{n}: time goes back")
        last = e["ts"]
        if e["type"] == "tool_call":
            calls.add(e["id"])
        if e["type"] in ("tool_result", "tool_call_aborted") and "for_id" in e["payload"]:
            if e["payload"]["for_id"] not in calls:
                out.append(f"{n}: for_id names no earlier call")
            if e["payload"]["for_id"] in closed:
                out.append(f"{n}: a call closed twice")
            closed.add(e["payload"]["for_id"])
        if e["type"] == "session_terminated":
            closed |= set(e["payload"].get("open_call_ids", []))
    if calls - closed:
        out.append(f"{len(calls - closed)} calls never closed")
    return out


@pytest.mark.parametrize("path", sorted((TRAIL / "valid").glob("*.jsonl")), ids=lambda p: p.name)
def test_the_schema_accepts_agent_trails_valid_fixtures(path):
    assert problems(path) == []


@pytest.mark.parametrize("path", sorted((TRAIL / "invalid-schema").glob("*.jsonl")),
                         ids=lambda p: p.name)
def test_the_schema_rejects_agent_trails_invalid_fixtures(path):
    assert problems(path)


INPUTS = sorted([p for p in FIX.glob("*/wire.jsonl")] + [
    REPO / "tests" / "fixtures" / "validate" / "unannounced-tool-call-fast-agent.wire.jsonl"])


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, list[Path]]:
    """Every mapping fixture and a real fast-agent recording, each exported on its own."""
    out = {}
    for wire in INPUTS:
        name = wire.parent.name if wire.name == "wire.jsonl" else wire.name
        d = tmp_path_factory.mktemp("trail")
        r = run_tool("export", "agent-trail", str(wire), "-o", str(d), timeout=120)
        assert r.returncode == 0, (name, r.stderr.decode())
        out[name] = sorted(d.glob("*.trail.jsonl"))
    return out


def test_every_session_gets_a_file(written):
    for name, files in written.items():
        asr = run_tool("asr", str(next(p for p in INPUTS if name in str(p))))
        sessions = asr.stdout.count(b'{"type":"header"')
        assert len(files) == sessions, name


@pytest.mark.parametrize("wire", INPUTS, ids=lambda p: p.parent.name if p.name == "wire.jsonl"
                         else p.name)
def test_what_acp_export_writes_is_valid_agent_trail(written, wire):
    name = wire.parent.name if wire.name == "wire.jsonl" else wire.name
    for path in written[name]:
        assert problems(path) == []
        assert graph_problems(path) == []


def _lines(path: Path) -> list[dict]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def test_the_header_declares_the_losses_and_keeps_the_acp_ids(written):
    (path,) = written["ASR-705-v1-turn-end"]
    head = _lines(path)[0]
    meta = head["meta"]
    assert meta["x-acp-pipes/acp_session_id"] == "s"
    assert any("usage_summary" in loss for loss in meta["x-acp-pipes/losses"])
    assert "_org.agent-session.acp/v1_message_boundaries" in meta["x-acp-pipes/asr_losses"]
    assert head["agent"] == {"name": "x-acp/fixture-agent", "version": "1.2.3"}
    assert head["ts"] == "2025-11-24T16:00:00.004Z"


def test_turns_messages_and_calls(written):
    """ASR-705: prompts are user messages, answers agent messages, each turn's end a
    turn_end with its stop reason; a call still open at its turn's end is aborted."""
    (path,) = written["ASR-705-v1-turn-end"]
    lines = _lines(path)[1:]
    assert [e["payload"]["text"] for e in lines if e["type"] == "user_message"] == [
        "hi", "do the bad thing", "long job"]
    assert [e["payload"]["data"].get("stopReason") for e in lines
            if e["type"] == "system_event" and e["payload"]["kind"] == "turn_end"] == [
        "end_turn", "refusal", "cancelled", None]
    (call,) = [e for e in lines if e["type"] == "tool_call"]
    assert call["payload"] == {"tool": "other", "args": {"name": "Build"}}
    assert call["semantic"]["call_id"] == "c1"
    (abort,) = [e for e in lines if e["type"] == "tool_call_aborted"]
    assert abort["payload"] == {"scope": "tool_call", "for_id": call["id"],
                                "reason": "x-acp-pipes/turn_ended"}


def test_a_real_agents_tools_map_to_agent_trails_kinds(written):
    """fast-agent's shell call is Agent Trail's shell_command, its result the output."""
    (path,) = written["unannounced-tool-call-fast-agent.wire.jsonl"]
    lines = _lines(path)
    kinds = [e["payload"]["tool"] for e in lines if e["type"] == "tool_call"]
    assert kinds and set(kinds) <= {"shell_command", "file_read", "other"}
    for e in lines:
        if e["type"] == "tool_call" and e["payload"]["tool"] == "shell_command":
            assert isinstance(e["payload"]["args"]["command"], str)


def test_permissions_and_forks(written):
    (path,) = written["ASR-716-permission"]
    kinds = [(e["payload"]["kind"], e["payload"].get("data", {}).get("decision"))
             for e in _lines(path) if e["type"] == "system_event"]
    assert ("permission_decision", "reject_always") in kinds
    files = {p.name: _lines(p) for p in written["ASR-718-fork-lineage"]}
    parent, child = files["parent.trail.jsonl"][0], files["child.trail.jsonl"][0]
    assert child["fork_from"] == {"session_id": parent["id"]}
    replayed = [e for e in files["child.trail.jsonl"][1:] if e.get("meta")]
    assert len(replayed) == 3 and all(e["meta"] == {"x-acp-pipes/replayed": True}
                                      for e in replayed)


def test_same_input_same_files(tmp_path):
    wire = FIX / "ASR-714-tool-result" / "wire.jsonl"
    for d in ("a", "b"):
        assert run_tool("export", "agent-trail", str(wire), "-o", str(tmp_path / d)).returncode == 0
    assert (tmp_path / "a" / "s.trail.jsonl").read_bytes() == (
        tmp_path / "b" / "s.trail.jsonl").read_bytes()


def test_o_must_be_a_directory(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = run_tool("export", "agent-trail", str(FIX / "ASR-714-tool-result" / "wire.jsonl"),
                 "-o", str(f))
    assert r.returncode == 2 and b"is not a directory" in r.stderr
    r = run_tool("export", "agent-trail", str(FIX / "ASR-714-tool-result" / "wire.jsonl"))
    assert r.returncode == 2 and b"-o" in r.stderr

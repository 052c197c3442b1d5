"""acp-align by the model of the same session on a real agent: fast-agent (ACP v1, its
passthrough model) recorded through the real acp-tee with the official Python SDK as its
client, running the script of tests/agents/harness.py (the one the five agents of
`make test-agents` run: tests/agents/test_align_agents.py checks all five). Two
recordings of the script are the same run; each planted change is the first difference,
at its frame; a tool call one run made without announcing it is one difference, marked;
an extra request of the agent and the client's answer are printed in their order.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

from tests.agents import harness
from tests.agents.test_align_agents import frames, hunks, ops_of, planted_frame
from tests.conftest import skip_unless_installed
from tests.test_align_model import assert_order_kept

pytestmark = pytest.mark.slow  # the real fast-agent, whole turns

skip_unless_installed("acp")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("align-fast-agent")
    root = tmp / "root"
    got = {}
    for label, plant in (("same-1", ""), ("same-2", ""), ("planted-client", "client"),
                         ("planted-permission", "permission")):
        got[label] = harness.record("fast-agent", tmp, label, root, plant=plant, load=False)
    got["tmp"] = tmp
    return got


def write(path: Path, head: bytes, recs: list[dict]) -> Path:
    path.write_bytes(head + b"\n" + b"".join(
        orjson.dumps({k: v for k, v in r.items() if k != "msg"}) + b"\n" for r in recs))
    return path


def test_two_recordings_of_the_script_are_the_same_run(recorded):
    status, ops = ops_of(recorded["same-1"]["wire"], recorded["same-2"]["wire"])
    assert (status, hunks(ops)) == (0, [])
    p_strict = ops_of(recorded["same-1"]["wire"], recorded["same-2"]["wire"], "--strict")
    assert p_strict[0] == 1  # as sent: other session and tool-call ids, other clocks


def test_each_planted_change_is_the_first_difference_at_its_frame(recorded):
    for plant in ("client", "permission"):
        b = recorded[f"planted-{plant}"]["wire"]
        status, ops = ops_of(recorded["same-1"]["wire"], b)
        assert status == 1
        first = next(o for o in ops if o["op"] not in ("equal", "note"))
        assert (first["op"], first["b"], first["difference"]) == \
            ("changed", planted_frame(plant, b), "client"), plant


def test_a_tool_call_the_other_run_did_not_announce_is_one_marked_difference(recorded):
    """The second run without its first tool_call (codex-acp sends its exec tool_call in
    some runs only): one hunk, the announcement, marked; a preset that says the agent
    sends it only sometimes makes it a note."""
    wire = recorded["same-2"]["wire"]
    head = wire.read_bytes().splitlines()[0]
    got = frames(wire)
    call = next(i for i, f in enumerate(got) if f["msg"].get("params", {}).get(
        "update", {}).get("sessionUpdate") == "tool_call")
    b = write(recorded["tmp"] / "unannounced.wire.jsonl", head, got[:call] + got[call + 1:])
    status, ops = ops_of(recorded["same-1"]["wire"], b)
    [hunk] = hunks(ops)
    assert status == 1
    assert [(o["op"], o["a"], o["difference"]) for o in hunk] == [("only-a", call, "missing")]
    assert "without announcing it" in hunk[0]["sometimes"]
    preset = recorded["tmp"] / "sometimes.json"
    preset.write_bytes(orjson.dumps({"format": "acp-pipes/presets", "version": 1, "presets": [
        {"agent": "fast-agent-acp", "optional": [
            {"method": "session/update", "update": "tool_call", "why": "now and then"}]}]}))
    status, ops = ops_of(recorded["same-1"]["wire"], b, "--preset", str(preset))
    assert (status, hunks(ops)) == (0, [])
    assert [(o["op"], o["a"], o["note"]) for o in ops if o["op"] == "note"] == [
        ("note", call, "optional_missing")]


def test_an_extra_terminal_request_and_its_answer_print_in_order(recorded):
    """The agent reads a terminal's output once more (and the client answers): the new
    request after the answer it follows, its answer after it, and every step of both
    runs after what it follows in its run."""
    wire = recorded["same-2"]["wire"]
    head = wire.read_bytes().splitlines()[0]
    got = frames(wire)
    ask = next(i for i, f in enumerate(got) if f["msg"].get("method") == "terminal/output")
    ans = next(i for i, f in enumerate(got) if i > ask and f["dir"] == "c2a"
               and "method" not in f["msg"] and f["msg"].get("id") == got[ask]["msg"]["id"])

    def again(f: dict) -> dict:
        return dict(f, raw=orjson.dumps({**f["msg"], "id": 900}).decode())

    more = got[:ans + 1] + [again(got[ask]), again(got[ans])] + got[ans + 1:]
    b = write(recorded["tmp"] / "again.wire.jsonl", head, more)
    status, ops = ops_of(recorded["same-1"]["wire"], b)
    assert status == 1
    assert_order_kept(ops, frames(recorded["same-1"]["wire"]), more)
    [hunk] = hunks(ops)
    assert [(o["op"], o["b"], o["method"]) for o in hunk] == [
        ("only-b", ans + 1, "terminal/output"), ("only-b", ans + 2, "terminal/output")]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))

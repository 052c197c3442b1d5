"""acp-align on five real agents (tests/agents/harness.py): two recordings of one script
align with no difference by default (codex-acp: at most one hunk, marked as the tool call
it announces only sometimes), and each change planted in the script (the model's reply,
the client's answer, the permission answer) is the first difference, at the planted
frame. The planted frame is found in the planted recording itself (README of the
recordings: what each plant changes), never from a list.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

from tests.agents import harness
from tests.conftest import run_tool

pytestmark = pytest.mark.slow  # real agents, whole turns


@pytest.fixture(scope="module", params=sorted(harness.AGENTS))
def recorded(request, tmp_path_factory) -> dict:
    """Two recordings of the unchanged script (both connections) and one per change that
    can be planted in it (the first connection), at one root."""
    name = request.param
    tmp = tmp_path_factory.mktemp(f"align-{name}")
    root = tmp / "root"
    got: dict = {"name": name}
    try:
        with harness.canned_llm(tmp / "llm") as llm:
            for label in ("same-1", "same-2"):
                got[label] = harness.record(name, tmp, label, root, llm=llm)
            for plant in harness.plants_for(harness.AGENTS[name]):
                got[plant] = harness.record(name, tmp, f"planted-{plant}", root, plant=plant,
                                            llm=None if plant == "reply" else llm, load=False)
    except harness.MissingAgent as e:
        pytest.fail(str(e))
    return got


def ops_of(a: Path, b: Path, *args: str) -> tuple[int, list[dict]]:
    p = run_tool("align", str(a), str(b), "--format", "ops", *args)
    ops = [orjson.loads(x) for x in p.stdout.splitlines()]
    differ = any(o["op"] not in ("equal", "note") for o in ops)  # a note is no difference
    assert p.returncode == (1 if differ else 0), p.stderr.decode()
    return p.returncode, ops


def hunks(ops: list[dict]) -> list[list[dict]]:
    """The runs of ops that differ (a note is no difference: it neither opens nor ends
    one)."""
    out: list[list[dict]] = []
    inside = False
    for o in ops:
        if o["op"] == "note":
            continue
        differs = o["op"] != "equal"
        if differs and not inside:
            out.append([])
        if differs:
            out[-1].append(o)
        inside = differs
    return out


def frames(wire: Path) -> list[dict]:
    """A wire log's frames, each with its message as "msg", in log order."""
    out = []
    for line in wire.read_bytes().splitlines()[1:]:
        rec = orjson.loads(line)
        if "dir" in rec:
            rec["msg"] = orjson.loads(rec["raw"])
            out.append(rec)
    return out


def planted_frame(plant: str, wire: Path) -> int:
    """Where the plant is in its recording: the first chunk of the changed reply, the
    client's first answer saying ``planted``, or the answer to the last permission
    request (the script's permission prompt, answered with a reject option)."""
    got = frames(wire)
    if plant == "reply":
        return next(i for i, f in enumerate(got) if f["dir"] == "a2c"
                    and f["msg"].get("params", {}).get("update", {}).get("sessionUpdate")
                    == "agent_message_chunk"
                    and f["msg"]["params"]["update"]["content"].get("text", "").startswith("changed"))
    if plant == "client":
        return next(i for i, f in enumerate(got) if f["dir"] == "c2a"
                    and "method" not in f["msg"]
                    and harness.PLANTED_TEXT in _strings(f["msg"].get("result")))
    asks = [f["msg"]["id"] for f in got if f["dir"] == "a2c"
            and f["msg"].get("method") == "session/request_permission"]
    return next(i for i, f in enumerate(got) if f["dir"] == "c2a" and "method" not in f["msg"]
                and f["msg"].get("id") == asks[-1])


def _strings(value) -> list[str]:
    """Every string in a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_two_recordings_of_one_script_align_with_no_difference(recorded):
    """Both connections (the second loads the session, which the agent replays): no
    difference; codex-acp at most one, the exec tool_call it sends in some runs only,
    marked so."""
    one, two = recorded["same-1"], recorded["same-2"]
    pairs = [(one["wire"], two["wire"])]
    if one["load_wire"] is not None:
        pairs.append((one["load_wire"], two["load_wire"]))
    for a, b in pairs:
        status, ops = ops_of(a, b)
        found = hunks(ops)
        if recorded["name"] == "codex-acp" and found:
            assert len(found) == 1, found
            assert all(o.get("sometimes") for o in found[0]), found
            continue
        assert (status, found) == (0, []), (a.name, found)


def test_each_planted_change_is_found_first(recorded):
    """Every change the agent's script can hold (harness.plants_for): the first op that
    differs is the planted frame, changed, of the model's kind (the agent said something
    else; the client did)."""
    plants = harness.plants_for(harness.AGENTS[recorded["name"]])
    assert plants
    for plant in plants:
        a, b = recorded["same-1"]["wire"], recorded[plant]["wire"]
        at = planted_frame(plant, b)
        status, ops = ops_of(a, b)
        assert status == 1, plant
        first = next(o for o in ops if o["op"] not in ("equal", "note"))
        assert first["b"] == at, (plant, first, frames(b)[at]["raw"][:200])
        assert first["op"] == "changed", (plant, first)
        assert first["difference"] == ("content" if plant == "reply" else "client"), plant


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))

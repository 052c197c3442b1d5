"""acp-fold and acp-asr on valid JSON with wrong-typed fields: a frame the fold cannot
take (not JSON-RPC, a sessionId that is not a string, a value no JSONL line can hold) is
reported with its file and line and skipped; the output is exactly what the recording
without that frame gives."""

from __future__ import annotations

import json

import orjson
import pytest

from tests.conftest import run_tool
from tests.test_fold_fuzz import HEADER, WIRE


def _index(dir_: str, *needles: str) -> int:
    return next(i for i, r in enumerate(WIRE)
                if r["dir"] == dir_ and all(n in r["raw"] for n in needles))


def _deep(n: int):
    v: list = []
    for _ in range(n):
        v = [v]
    return v


CLOSE = _index("c2a", '"session/close"')
PROMPT_ANSWER = _index("a2c", '"result":{"messageId"')
CHUNK = _index("a2c", "agent_message_chunk")

CASES = {
    # the review's minimal reproductions: a table keyed by an unhashable value
    "close-sessionId-list": (CLOSE, "session/close: sessionId is not a string, skipped",
                             lambda m: m["params"].update(sessionId=[])),
    # a client notification: the fold takes nothing from session/cancel, yet says why
    "cancel-sessionId-number": (CLOSE, "session/cancel: sessionId is not a string, skipped",
                                lambda m: (m.pop("id"), m.update(method="session/cancel"),
                                           m["params"].update(sessionId=5))),
    "response-id-object": (PROMPT_ANSWER, "not JSON-RPC: id is not a string",
                           lambda m: m.update(id={"a": 1})),
    "update-sessionId-number": (CHUNK, "session/update: sessionId is not a string, skipped",
                                lambda m: m["params"].update(sessionId=5)),
    "method-not-string": (CHUNK, "not JSON-RPC: method is not a string",
                          lambda m: m.update(method=["session/update"])),
    "no-jsonrpc": (CHUNK, 'not JSON-RPC: no "jsonrpc": "2.0"',
                   lambda m: m.update(jsonrpc=2)),
    # a lone surrogate is folded as U+FFFD, not skipped: tests/test_asr_surrogates.py
    "nested-300-deep": (CHUNK, "frame cannot be folded (nested deeper than 200 levels)",
                        lambda m: m["params"]["update"].update(_meta={"x": _deep(300)})),
}


def _log(path, recs):
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in [HEADER, *recs]))
    return str(path)


@pytest.mark.parametrize("tool", ["fold", "asr"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_frame_reported_and_skipped(tmp_path, tool, case):
    i, message, change = CASES[case]
    recs = [dict(r) for r in WIRE]
    msg = json.loads(recs[i]["raw"])
    change(msg)
    # stdlib json: it writes a lone surrogate (as an escape) where orjson refuses to
    recs[i]["raw"] = json.dumps(msg, separators=(",", ":"))
    bad = _log(tmp_path / "bad.jsonl", recs)
    without = _log(tmp_path / "without.jsonl", recs[:i] + recs[i + 1:])
    got = run_tool(tool, bad)
    want = run_tool(tool, without)
    assert want.returncode == 0 and want.stderr == b"" and want.stdout.count(b"\n") > 5
    err = got.stderr.decode()
    assert got.returncode == 0, err
    assert "internal error" not in err and "Traceback" not in err
    # the frame of seq i is line i + 2 (line 1 is the header)
    assert f"{bad}:{i + 2}: {message}" in err, err
    assert got.stdout == want.stdout


@pytest.mark.parametrize("tool", ["fold", "asr"])
@pytest.mark.parametrize("t", ["x", 1.5, True, [1]], ids=["str", "float", "bool", "list"])
def test_wire_record_time_not_an_integer_reported_and_skipped(tmp_path, tool, t):
    """The wire contract's receipt time is an integer (ns) or null: any other value is
    no wire record (it used to reach the ISO formatting of ASR-707 and fail there)."""
    recs = [dict(r) for r in WIRE]
    recs[CHUNK]["t"] = t
    bad = _log(tmp_path / "bad.jsonl", recs)
    without = _log(tmp_path / "without.jsonl", recs[:CHUNK] + recs[CHUNK + 1:])
    got = run_tool(tool, bad)
    want = run_tool(tool, without)
    assert want.returncode == 0 and want.stderr == b""
    err = got.stderr.decode()
    assert got.returncode == 0, err
    assert err == f"acp-{tool}: {bad}:{CHUNK + 2}: not a wire record (needs seq, t, dir), skipped\n"
    assert got.stdout == want.stdout


@pytest.mark.parametrize("tool", ["frame", "fold", "asr", "view"])
@pytest.mark.parametrize("field,value", [("dir", ["c2a"]), ("dir", {"c2a": 1}), ("dir", 1),
                                         ("seq", [1]), ("seq", {"n": 1})],
                         ids=["dir-list", "dir-object", "dir-number", "seq-list",
                              "seq-object"])
def test_wire_record_with_an_unhashable_field_reported_and_skipped(tmp_path, tool, field,
                                                                    value):
    """A wire record whose dir or seq is a list or an object is no wire record: said
    with its file and line, skipped, every tool going on (the framer used to look the
    dir up in a table and fail with an internal error)."""
    recs = [dict(r) for r in WIRE]
    recs[CHUNK][field] = value
    bad = _log(tmp_path / "bad.jsonl", recs)
    without = _log(tmp_path / "without.jsonl", recs[:CHUNK] + recs[CHUNK + 1:])
    extra = ("-o", str(tmp_path / "page.html")) if tool == "view" else ()
    got = run_tool(tool, bad, *extra)
    err = got.stderr.decode()
    assert got.returncode == 0, err
    assert err == f"acp-{tool}: {bad}:{CHUNK + 2}: not a wire record (needs seq, t, dir), skipped\n"
    if tool != "view":  # a page names its input; the others' output is the same bytes
        assert got.stdout == run_tool(tool, without).stdout


@pytest.mark.parametrize("tool", ["fold", "asr"])
@pytest.mark.parametrize("eid", [[], {"a": 1}, 5], ids=["list", "object", "number"])
def test_elicitation_complete_with_an_id_that_is_not_a_string(tmp_path, tool, eid):
    """elicitation/complete names its elicitation by a string ID: any other value
    matches none, and the notification is dropped as one for an unknown elicitation
    is (an array or object used to crash the lookup)."""
    done = {"jsonrpc": "2.0", "method": "elicitation/complete",
            "params": {"elicitationId": eid}}
    recs = [dict(r) for r in WIRE]
    recs.insert(CLOSE, {"seq": 0, "t": None, "dir": "a2c", "raw": json.dumps(done)})
    for n, r in enumerate(recs):
        r["seq"] = n
    got = run_tool(tool, _log(tmp_path / "bad.jsonl", recs))
    want = run_tool(tool, _log(tmp_path / "without.jsonl", recs[:CLOSE] + recs[CLOSE + 1:]))
    assert want.returncode == 0 and want.stderr == b""
    assert got.returncode == 0, got.stderr.decode()
    assert got.stderr == b""
    # the same records; frame numbers after the dropped one are one higher
    assert got.stdout.count(b"\n") == want.stdout.count(b"\n")

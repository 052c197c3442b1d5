"""acp-align compares runs the way people mean it: identifiers an agent mints are a
consistent renaming, clock fields are no difference, steps are in causal order
(acp_pipes.align.minted, acp_pipes.align.traces.causal_order); --strict compares bytes.

The echo agent is recorded through the real acp-tee in lockstep (tests/conftest.py), and
the runs are made to differ where a second run of a real agent would: other ids, other
times, the pipes interleaved otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

from acp_pipes.echo.client import client_session
from tests.conftest import record_lockstep, run_tool
from tests.test_align_order import records, summary, write


def renamed(recs: list[dict], old: str, new: str, only: int | None = None) -> list[dict]:
    """``recs`` with the JSON string ``old`` replaced by ``new`` in each frame's bytes
    (in frame ``only`` alone, when given)."""
    out = []
    for k, r in enumerate(recs):
        if only is None or k == only:
            r = dict(r, raw=r["raw"].replace(f'"{old}"', f'"{new}"'))
        out.append(r)
    return out


@pytest.fixture(scope="module")
def echo(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("preset")
    wire = tmp / "a.wire.jsonl"
    record_lockstep(list(client_session(4, permission_every=2)), wire)
    head, recs = records(wire)
    return {"tmp": tmp, "wire": wire, "head": head, "recs": recs}


def test_a_session_id_renamed_everywhere_is_no_difference(echo, tmp_path):
    """The second run's agent called the session ses_ab12: the same run, exit 0, and the
    renaming is reported; --strict still sees every frame that names it."""
    other = write(tmp_path / "b.wire.jsonl", echo["head"],
                  renamed(echo["recs"], "sess-1", "ses_ab12"))
    status, s = summary(echo["wire"], other)
    assert status == 0 and s["distance"] == 0 and s["first_divergence"] is None
    assert s["renamed"] == [{"kind": "session", "a": "sess-1", "b": "ses_ab12"}]
    status, s = summary(echo["wire"], other, "--strict")
    assert status == 1 and s["counts"]["changed"] > 10
    assert "renamed" not in s


def test_a_renaming_that_is_not_consistent_is_a_difference(echo, tmp_path):
    """The second prompt's result names the first prompt's message id again: the
    renaming breaks at that step, which is a changed step of kind ``renaming``, whose
    diff shows B's identifiers by the names A has for them (msg-user-1 stands for
    itself: the renaming paired it with A's msg-user-1)."""
    recs = echo["recs"]
    k = next(i for i, r in enumerate(recs) if '"msg-user-2"' in r["raw"]
             and '"result"' in r["raw"])
    other = write(tmp_path / "b.wire.jsonl", echo["head"],
                  renamed(recs, "msg-user-2", "msg-user-1", only=k))
    status, s = summary(echo["wire"], other)
    assert status == 1 and s["counts"]["changed"] == 1, s["counts"]
    first = s["first_divergence"]
    assert first["op"] == "changed" and first["step_a"]["method"] == "session/prompt"
    assert first["difference"] == "renaming"
    [d] = first["diff"]
    assert d == {"op": "replace", "path": "/result/messageId", "a": "msg-user-2",
                 "b": "msg-user-1"}


def test_agent_request_ids_are_a_renaming_too(echo, tmp_path):
    """The agent numbers its permission requests otherwise (and the client's answers
    carry the agent's ids): no difference; the client's own request ids still count."""
    recs = echo["recs"]
    out = []
    for r in recs:
        m = orjson.loads(r["raw"])
        if ("method" in m and r["dir"] == "a2c" and "id" in m) or (
                r["dir"] == "c2a" and "method" not in m):
            m["id"] = f"perm-{m['id']}"
            r = dict(r, raw=orjson.dumps(m).decode())
        out.append(r)
    assert out != recs
    status, s = summary(echo["wire"], write(tmp_path / "b.wire.jsonl", echo["head"], out))
    assert status == 0, s
    assert {r["kind"] for r in s["renamed"]} == {"agentRequest"}
    client = [dict(r, raw=r["raw"].replace('"id":2,', '"id":"two",'))
              if r["dir"] == "c2a" else r for r in recs]
    assert client != recs
    status, _ = summary(echo["wire"], write(tmp_path / "c.wire.jsonl", echo["head"], client))
    assert status == 1


def test_clock_fields_are_no_difference(tmp_path):
    """updatedAt of session_info_update is a clock: no difference by default, one changed
    step with --strict; a field next to it still counts."""
    def run(at: str, title: str = "t") -> Path:
        msg = {"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s", "update": {"sessionUpdate": "session_info_update",
                                         "title": title, "updatedAt": at}}}
        path = tmp_path / f"{at}-{title}.jsonl"
        path.write_bytes(orjson.dumps(msg) + b"\n")
        return path

    a, b = run("2026-12-02T01:35:17"), run("2026-12-02T01:35:21")
    assert summary(a, b, "--dir", "a2c")[0] == 0
    status, s = summary(a, b, "--dir", "a2c", "--strict")
    assert status == 1 and s["changed"][0]["diff"][0]["path"] == "/params/update/updatedAt"
    status, s = summary(a, run("2026-12-02T01:35:21", "other"), "--dir", "a2c")
    assert status == 1
    assert [d["path"] for d in s["changed"][0]["diff"]] == ["/params/update/title"]


def early_answer(echo) -> list[dict]:
    """The run with the client's answer to the first permission request logged before
    the agent's request (the client's pipe read first)."""
    recs = echo["recs"]
    ask = next(i for i, r in enumerate(recs) if "session/request_permission" in r["raw"])
    rid = orjson.loads(recs[ask]["raw"])["id"]
    answer = next(i for i, r in enumerate(recs) if r["dir"] == "c2a" and i > ask
                  and orjson.loads(r["raw"]).get("id") == rid
                  and "method" not in orjson.loads(r["raw"]))
    return recs[:ask] + [recs[answer]] + recs[ask:answer] + recs[answer + 1:]


def test_an_answer_logged_before_its_request_follows_it(echo, tmp_path):
    """Causal order: the answer logged first is listed right after the request it
    answers, with that request's method, and the run is the same as the one logged in
    order; --strict keeps the order logged, so it differs."""
    moved = write(tmp_path / "early.wire.jsonl", echo["head"], early_answer(echo))
    p = run_tool("align", str(moved), str(moved), "--format", "ops")
    assert p.returncode == 0, p.stderr
    ops = [orjson.loads(x) for x in p.stdout.splitlines()]
    ask = next(k for k, o in enumerate(ops) if o.get("method") == "session/request_permission")
    assert ops[ask]["kind"] == "request" and ops[ask]["dir"] == "a2c"
    assert ops[ask + 1]["dir"] == "c2a" and ops[ask + 1]["kind"] == "response"
    assert ops[ask + 1]["method"] == "session/request_permission"
    assert summary(echo["wire"], moved)[0] == 0
    p = run_tool("align", "--strict", str(moved), str(moved), "--format", "ops")
    strict = [orjson.loads(x) for x in p.stdout.splitlines()]
    ask = next(k for k, o in enumerate(strict) if o.get("method") == "session/request_permission")
    assert strict[ask - 1]["dir"] == "c2a" and strict[ask - 1].get("method") is None
    assert summary(echo["wire"], moved, "--strict")[0] == 1


def test_strict_is_the_byte_comparison(echo, tmp_path):
    """--strict prints what acp-align printed before the preset: the ops' hashes are the
    frames' own."""
    p = run_tool("align", "--strict", str(echo["wire"]), str(echo["wire"]))
    ops = [orjson.loads(x) for x in p.stdout.splitlines()]
    assert [o["hash"] for o in ops] == [r["hash"] if "hash" in r else o["hash"]
                                        for o, r in zip(ops, echo["recs"], strict=True)]
    frames = run_tool("frame", str(echo["wire"]))
    hashes = [orjson.loads(x)["hash"] for x in frames.stdout.splitlines()[1:]]
    assert [o["hash"] for o in ops] == hashes


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))

"""acp-align compares two traces by the model of the same session (docs/sameness.md;
acp_pipes/align/session.py, acp_pipes/align/model.py): floating notifications in their
windows, a missing one a note; the vendor presets chosen by each run's initialize answer,
``--preset FILE``; noise learned from other recordings of the script (``--noise``); the
steps printed in an order that keeps both runs' happens-before.

The echo agent (ACP v2) is recorded through the real acp-tee turn by turn; the second run
is that recording edited where a second run of a real agent would differ (as
tests/test_align_preset.py does). The order is checked against the model's own
happens-before (:class:`acp_pipes.sameness.order.Order`), built here from the frames.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import orjson
import pytest

from acp_pipes.echo.client import client_session
from acp_pipes.sameness.events import describe
from acp_pipes.sameness.order import Order
from tests.conftest import record_lockstep, run_tool
from tests.test_align_order import records, write


@pytest.fixture(scope="module")
def echo(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("model")
    wire, again = tmp / "a.wire.jsonl", tmp / "a2.wire.jsonl"
    script = list(client_session(4, permission_every=2))
    record_lockstep(script, wire)
    record_lockstep(script, again)
    head, recs = records(wire)
    return {"tmp": tmp, "wire": wire, "again": again, "head": head, "recs": recs}


def msg(rec: dict) -> dict:
    return orjson.loads(rec["raw"])


def update_kind(rec: dict) -> str | None:
    m = msg(rec)
    return m.get("params", {}).get("update", {}).get("sessionUpdate") \
        if m.get("method") == "session/update" else None


def edited(recs: list[dict], at: int, fn) -> list[dict]:
    """``recs`` with frame ``at``'s message replaced by ``fn(message)``."""
    out = list(recs)
    out[at] = dict(recs[at], raw=orjson.dumps(fn(msg(recs[at]))).decode())
    return out


def run(*args) -> tuple[int, dict, str]:
    p = run_tool("align", *map(str, args), "--format", "json")
    s = orjson.loads(p.stdout)
    assert p.returncode == (0 if s["equal"] else 1), p.stderr  # 0 the same, 1 they differ
    return p.returncode, s, p.stderr.decode()


def ops_of(*args, status: int) -> list[dict]:
    """The ops acp-align prints, its exit status ``status`` (0 the same, 1 they differ)."""
    p = run_tool("align", *map(str, args), "--format", "ops")
    assert p.returncode == status, p.stderr
    return [orjson.loads(x) for x in p.stdout.splitlines()]


def happens_before(recs: list[dict]) -> list[list[int]]:
    """Each frame's predecessors, by the model (frames in log order)."""
    order = Order()
    return [order.add(describe(i, r["dir"], r["raw"].encode())) for i, r in enumerate(recs)]


def assert_order_kept(ops: list[dict], recs_a: list[dict], recs_b: list[dict]) -> None:
    """Every step is printed after what it follows in its own run."""
    for side, recs in (("a", recs_a), ("b", recs_b)):
        at = {o[side]: k for k, o in enumerate(ops) if o[side] is not None}
        assert sorted(at) == list(range(len(recs)))  # every step once
        for i, preds in enumerate(happens_before(recs)):
            for p in preds:
                assert at[p] < at[i], (side, p, i, recs[p]["raw"][:80], recs[i]["raw"][:80])


def test_two_recordings_of_one_script_are_the_same(echo):
    status, s, err = run(echo["wire"], echo["again"])
    assert (status, s["equal"], s["distance"], s["notes"]) == (0, True, 0, [])
    assert err == ""
    p = run_tool("align", str(echo["wire"]), str(echo["again"]), "--format", "diff")
    assert (p.returncode, p.stdout) == (0, b"")


def test_a_floating_notification_elsewhere_in_its_window_is_no_difference(echo, tmp_path):
    """The first usage_update (it floats: RFD session-usage) sent after the next prompt
    and its answer: the same session. --strict, the order logged: it differs."""
    recs = echo["recs"]
    u = next(i for i, r in enumerate(recs) if update_kind(r) == "usage_update")
    prompt = next(i for i, r in enumerate(recs) if i > u and msg(r).get("method") == "session/prompt")
    moved = recs[:u] + recs[u + 1:prompt + 2] + [recs[u]] + recs[prompt + 2:]
    b = write(tmp_path / "moved.wire.jsonl", echo["head"], moved)
    status, s, _ = run(echo["wire"], b)
    assert (status, s["distance"], s["notes"]) == (0, 0, [])
    assert s["counts"] == {"equal": len(recs), "changed": 0, "only-a": 0, "only-b": 0}
    assert run(echo["wire"], b, "--strict")[0] == 1


def test_a_floating_notification_one_run_lacks_is_a_note(echo, tmp_path):
    """A run without one usage_update: no difference (exit 0, no diff), one note that
    says which and why, on stderr too; --strict: a step only A has."""
    recs = echo["recs"]
    u = [i for i, r in enumerate(recs) if update_kind(r) == "usage_update"][1]
    b = write(tmp_path / "less.wire.jsonl", echo["head"], recs[:u] + recs[u + 1:])
    status, s, err = run(echo["wire"], b)
    assert (status, s["equal"], s["distance"]) == (0, True, 0)
    [note] = s["notes"]
    assert (note["note"], note["a"], note["b"]) == ("floating_missing", u, None)
    assert note["summary"] == "session/update usage_update"
    assert note["why"].startswith("it floats: RFD session-usage")
    assert s["counts"]["notes"] == 1 and s["counts"]["only-a"] == 0
    assert "1 step one run lacks, tolerated by the model of the same session" in err
    ops = ops_of(echo["wire"], b, status=0)
    framed = run_tool("frame", str(echo["wire"])).stdout.splitlines()[1:]
    own = orjson.loads(framed[u])["hash"]  # under the model, an op's hash is the frame's own
    assert [o for o in ops if o["op"] != "equal"] == [
        {"op": "note", "a": u, "b": None, "note": "floating_missing", "dir": "a2c",
         "kind": "notification", "method": "session/update", "hash": own}]
    p = run_tool("align", str(echo["wire"]), str(b), "--format", "diff")
    assert (p.returncode, p.stdout) == (0, b"")
    status, s, _ = run(echo["wire"], b, "--strict")
    assert status == 1 and s["counts"]["only-a"] == 1


def test_a_floating_notification_that_says_otherwise_is_a_difference(echo, tmp_path):
    """A usage_update in its window with another figure: changed, of the model's kind
    "content", and the first difference."""
    recs = echo["recs"]
    u = next(i for i, r in enumerate(recs) if update_kind(r) == "usage_update")

    def more(m: dict) -> dict:
        m["params"]["update"]["used"] += 1
        return m

    b = write(tmp_path / "used.wire.jsonl", echo["head"], edited(recs, u, more))
    status, s, _ = run(echo["wire"], b)
    assert status == 1 and s["counts"]["changed"] == 1
    first = s["first_divergence"]
    assert (first["op"], first["a"], first["b"], first["difference"]) == ("changed", u, u, "content")
    assert [d["path"] for d in first["diff"]] == ["/params/update/used"]


def test_a_title_that_changed_is_a_difference(echo, tmp_path):
    """A title the agent writes (session_info_update, which floats: RFD
    session-info-update) after the first turn: another title is a changed session, the
    first difference, whatever the clock beside it says."""
    recs = echo["recs"]
    end = next(i for i, r in enumerate(recs) if update_kind(r) == "state_update"
               and msg(r)["params"]["update"].get("state") == "idle")

    def titled(title: str, at: str) -> list[dict]:
        info = {"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "sess-1", "update": {"sessionUpdate": "session_info_update",
                                              "title": title, "updatedAt": at}}}
        return recs[:end + 1] + [dict(recs[end], raw=orjson.dumps(info).decode())] + \
            recs[end + 1:]

    a = write(tmp_path / "t1.wire.jsonl", echo["head"], titled("hello", "2026-12-06T01:00:00"))
    same = write(tmp_path / "t2.wire.jsonl", echo["head"], titled("hello", "2026-12-06T02:00:00"))
    other = write(tmp_path / "t3.wire.jsonl", echo["head"], titled("goodbye", "2026-12-06T01:00:00"))
    assert run(a, same)[0] == 0
    status, s, _ = run(a, other)
    assert status == 1 and s["counts"]["changed"] == 1
    first = s["first_divergence"]
    assert (first["a"], first["difference"]) == (end + 1, "content")
    assert first["diff"] == [{"op": "replace", "path": "/params/update/title",
                              "a": "hello", "b": "goodbye"}]


def test_an_answer_is_printed_after_the_request_it_answers(echo, tmp_path):
    """The agent asks one more permission (and the client answers it) right after an
    answer: the new request and its answer are B's own, printed in that order after
    what they follow, and every step of both runs after what it follows (as the model
    orders a session)."""
    recs = echo["recs"]
    ask = next(i for i, r in enumerate(recs) if msg(r).get("method") == "session/request_permission")
    rid = msg(recs[ask])["id"]
    ans = next(i for i, r in enumerate(recs) if i > ask and r["dir"] == "c2a"
               and "method" not in msg(r) and msg(r).get("id") == rid)
    again = [edited(recs, ask, lambda m: {**m, "id": 900})[ask],
             edited(recs, ans, lambda m: {**m, "id": 900})[ans]]
    more = recs[:ans + 1] + again + recs[ans + 1:]
    b = write(tmp_path / "more.wire.jsonl", echo["head"], more)
    ops = ops_of(echo["wire"], b, status=1)
    assert_order_kept(ops, recs, more)
    own = [o for o in ops if o["op"] != "equal"]
    assert [(o["op"], o["b"], o["dir"], o["kind"], o["difference"]) for o in own] == [
        ("only-b", ans + 1, "a2c", "request", "extra"),
        ("only-b", ans + 2, "c2a", "response", "client")]
    assert [o["b"] for o in ops].index(ans + 1) == [o["a"] for o in ops].index(ans) + 1


def test_the_order_printed_keeps_both_runs_happens_before(echo, tmp_path):
    """Run A logged the agent's next frames of a tool call before the client's answer to
    the permission that allowed it (two pipes); B in order. The same session; printed
    in an order both runs allow: the answer before the update that follows it in B."""
    recs = echo["recs"]
    ask = next(i for i, r in enumerate(recs) if msg(r).get("method") == "session/request_permission")
    rid = msg(recs[ask])["id"]
    ans = next(i for i, r in enumerate(recs) if i > ask and r["dir"] == "c2a"
               and "method" not in msg(r) and msg(r).get("id") == rid)
    upd = next(i for i, r in enumerate(recs) if i > ans and update_kind(r) == "tool_call_update")
    late = recs[:ans] + recs[ans + 1:upd + 1] + [recs[ans]] + recs[upd + 1:]
    a = write(tmp_path / "late.wire.jsonl", echo["head"], late)
    status, s, _ = run(a, echo["wire"])
    assert (status, s["distance"]) == (0, 0)
    ops = ops_of(a, echo["wire"], status=0)
    assert all(o["op"] == "equal" for o in ops)
    assert_order_kept(ops, late, recs)
    assert [o["b"] for o in ops].index(ans) < [o["b"] for o in ops].index(upd)


def _named(recs: list[dict], name: str, meta_value=None, text=None) -> list[dict]:
    """``recs`` as if the agent were ``name`` (its initialize answer says so), each
    agent message chunk with ``_meta.durationMs`` from ``meta_value()`` and, where
    ``text`` is given, its text passed through it."""
    out = []
    for r in recs:
        m = msg(r)
        if m.get("result", {}).get("info") is not None:
            m["result"]["info"]["name"] = name
        if update_kind(r) == "agent_message_chunk":
            if meta_value is not None:
                m["params"]["update"]["_meta"] = {"durationMs": meta_value()}
            if text is not None:
                m["params"]["update"]["content"]["text"] = text(m["params"]["update"]["content"]["text"])
        out.append(dict(r, raw=orjson.dumps(m).decode()))
    return out


def test_vendor_presets_are_chosen_by_the_agents_initialize_answer(echo, tmp_path):
    """qwen-code's preset (acp_pipes/sameness/presets.json) leaves out its durationMs and
    scrubs its process groups from text: two runs of an agent that says it is qwen-code
    are the same, and the rules name the preset; --no-preset: they differ there. The
    same values from an agent no preset names differ, until --preset FILE names it."""
    rng = random.Random(7)
    recs = echo["recs"]

    def pgid(t: str) -> str:
        return f"{t} Process Group PGID: {rng.randrange(10_000)}"

    a = write(tmp_path / "qa.wire.jsonl", echo["head"],
              _named(recs, "qwen-code", lambda: rng.randrange(1000), pgid))
    b = write(tmp_path / "qb.wire.jsonl", echo["head"],
              _named(recs, "qwen-code", lambda: rng.randrange(1000), pgid))
    status, s, _ = run(a, b)
    assert (status, s["distance"]) == (0, 0)
    assert [p["agent"] for p in s["rules"]["presets"]] == ["*", "qwen-code"]
    assert s["rules"]["agents"] == ["qwen-code", "qwen-code"]
    assert "/params/update/_meta/durationMs" in s["rules"]["ignore"]
    status, s, _ = run(a, b, "--no-preset")
    assert status == 1
    paths = {d["path"] for c in s["changed"] for d in c["diff"]}
    assert paths == {"/params/update/_meta/durationMs", "/params/update/content/text"}
    # the scrubber masks the process group, not the text around it
    c = write(tmp_path / "qc.wire.jsonl", echo["head"],
              _named(recs, "qwen-code", lambda: 1, lambda t: pgid(t.upper())))
    status, s, _ = run(a, c)
    assert status == 1
    assert {d["path"] for ch in s["changed"] for d in ch["diff"]} == {"/params/update/content/text"}
    # an agent no preset names; then a preset file that does
    ma = write(tmp_path / "ma.wire.jsonl", echo["head"],
               _named(recs, "my-agent", lambda: rng.randrange(1000)))
    mb = write(tmp_path / "mb.wire.jsonl", echo["head"],
               _named(recs, "my-agent", lambda: rng.randrange(1000)))
    assert run(ma, mb)[0] == 1
    preset = tmp_path / "mine.json"
    preset.write_bytes(orjson.dumps({"format": "acp-pipes/presets", "version": 1, "presets": [
        {"agent": "my-*", "why": "its durations", "ignore": ["/params/update/_meta/durationMs"]}]}))
    status, s, _ = run(ma, mb, "--preset", preset)
    assert (status, s["distance"]) == (0, 0)
    assert {"agent": "my-*", "from": str(preset)} in s["rules"]["presets"]


def test_a_preset_file_that_is_not_one_is_refused(echo, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"format": "something else"}')
    p = run_tool("align", str(echo["wire"]), str(echo["again"]), "--preset", str(bad))
    assert p.returncode == 2
    assert p.stderr.decode() == (f"acp-align: {bad}: expected a preset file "
                                 '({"format": "acp-pipes/presets", ...})\n')
    none = tmp_path / "none.json"
    p = run_tool("align", str(echo["wire"]), str(echo["again"]), "--preset", str(none))
    assert p.returncode == 2
    assert p.stderr.decode() == f"acp-align: {none}: cannot open: No such file or directory\n"
    p = run_tool("align", str(echo["wire"]), str(echo["again"]), "--strict", "--preset", str(bad))
    assert p.returncode == 2 and b"--strict compares the bytes as sent" in p.stderr


def test_a_frame_a_preset_says_is_sent_only_sometimes_is_a_note(echo, tmp_path):
    recs = echo["recs"]
    plan = next(i for i, r in enumerate(recs) if update_kind(r) == "plan_update")
    b = write(tmp_path / "noplan.wire.jsonl", echo["head"], recs[:plan] + recs[plan + 1:])
    status, s, _ = run(echo["wire"], b)
    assert status == 1 and s["first_divergence"]["difference"] == "missing"
    preset = tmp_path / "plans.json"
    preset.write_bytes(orjson.dumps({"format": "acp-pipes/presets", "version": 1, "presets": [
        {"agent": "acp-echo-agent", "optional": [
            {"method": "session/update", "update": "plan_update", "why": "plans now and then"}]}]}))
    status, s, _ = run(echo["wire"], b, "--preset", preset)
    assert (status, s["distance"]) == (0, 0)
    assert [(n["note"], n["a"], n["why"]) for n in s["notes"]] == [
        ("optional_missing", plan, "plans now and then")]


def test_noise_learned_from_another_recording_is_tolerated_and_said(echo, tmp_path):
    """Three recordings of one script with a value no preset knows (a request id in each
    reply's _meta): what differs between A and another recording is learned at the
    frame where it differs and tolerated there, said on stderr and in the summary; a
    planted change is still found, first."""
    rng = random.Random(11)

    def noisy(name: str, prompt: str = "hello 3") -> Path:
        out = []
        for r in echo["recs"]:
            m = msg(r)
            if update_kind(r) == "agent_message_chunk":
                m["params"]["update"]["_meta"] = {"requestId": f"req-{rng.getrandbits(48):012x}"}
            if m.get("method") == "session/prompt":
                for part in m["params"]["prompt"]:
                    part["text"] = part["text"].replace("hello 3", prompt)
            out.append(dict(r, raw=orjson.dumps(m).decode()))
        return write(tmp_path / name, echo["head"], out)

    a, a2, a3 = noisy("n1.wire.jsonl"), noisy("n2.wire.jsonl"), noisy("n3.wire.jsonl")
    assert run(a, a2)[0] == 1
    status, s, err = run(a, a2, "--noise", a3)
    assert (status, s["distance"]) == (0, 0)
    learned = s["learned"]
    assert learned["recordings"] == 1 and learned["values"]
    assert {v["path"] for v in learned["values"]} == {"/params/update/_meta/requestId"}
    assert err.startswith("acp-align: learned from 1 other recording: ")
    b = noisy("n4.wire.jsonl", prompt="bye 3")
    status, s, _ = run(a, b, "--noise", a3)
    assert status == 1
    first = s["first_divergence"]
    assert first["step_a"]["method"] == "session/prompt" and first["difference"] == "client"


def test_three_runs_of_an_agent_that_names_its_session_anew_are_one_tree(echo, tmp_path):
    """The divergence tree of three or more runs compares the steps as the model sees
    them (identifiers masked): runs that named their session otherwise walk together."""
    runs = []
    for k in range(2):
        out = [dict(r, raw=r["raw"].replace('"sess-1"', f'"ses_{k}"')) for r in echo["recs"]]
        runs.append(write(tmp_path / f"s{k}.wire.jsonl", echo["head"], out))
    p = run_tool("align", str(echo["wire"]), *map(str, runs), "--format", "json")
    assert p.returncode == 0, p.stderr
    assert orjson.loads(p.stdout)["equal"] is True
    p = run_tool("align", str(echo["wire"]), *map(str, runs), "--format", "json", "--strict")
    assert p.returncode == 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))

"""Latency: each request until its answer, per method, and prompt turns (time to the
first update, the whole turn), in the library, in `acp-frame --summary` and as deltas
in `acp-align --format json`. Times are written into hand-made wire logs, so every
figure is known exactly."""

from __future__ import annotations

import math

import orjson
from hypothesis import given
from hypothesis import strategies as st

from acp_pipes.frame.core import frames
from acp_pipes.frame.latency import deltas, latency_of, stats
from acp_pipes.io.wire import frame_record, header
from tests.conftest import run_tool
from tests.test_validate import m

MS = 1_000_000  # ns


def timed(convo: list[tuple[float, str, dict]]) -> list[dict]:
    """Frame records of (time in ms, dir, message)."""
    return list(frames([frame_record(i, int(t * MS), d, orjson.dumps(x))
                        for i, (t, d, x) in enumerate(convo)]))


def upd(t, u, sid="s1"):
    return (t, "a2c", m(method="session/update", params={"sessionId": sid, "update": u}))


def chunk(t, text="x", sid="s1"):
    return upd(t, {"sessionUpdate": "agent_message_chunk", "messageId": "a",
                   "content": {"type": "text", "text": text}}, sid)


def init(version: int) -> list[tuple[float, str, dict]]:
    return [(0, "c2a", m(id=0, method="initialize", params={"protocolVersion": version})),
            (2, "a2c", m(id=0, result={"protocolVersion": version})),
            (3, "c2a", m(id=1, method="session/new", params={"cwd": "/", "mcpServers": []})),
            (10, "a2c", m(id=1, result={"sessionId": "s1"}))]


V2 = [*init(2),
      (100, "c2a", m(id=2, method="session/prompt", params={"sessionId": "s1", "prompt": []})),
      (101, "a2c", m(id=2, result={"messageId": "u1"})),
      upd(102, {"sessionUpdate": "user_message", "messageId": "u1", "content": []}),
      upd(103, {"sessionUpdate": "state_update", "state": "running"}),
      chunk(110),
      (120, "a2c", m(id=0, method="session/request_permission", params={"sessionId": "s1"})),
      (180, "c2a", m(id=0, result={"outcome": {"outcome": "cancelled"}})),
      chunk(190),
      upd(200, {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}),
      # a second prompt, refused: the error ends the turn
      (300, "c2a", m(id=3, method="session/prompt", params={"sessionId": "s1", "prompt": []})),
      (304, "a2c", m(id=3, error={"code": -32603, "message": "busy"})),
      # a third, still running when the recording ends
      (400, "c2a", m(id=4, method="session/prompt", params={"sessionId": "s1", "prompt": []})),
      (402, "a2c", m(id=4, result={"messageId": "u3"})),
      chunk(450)]


def test_method_latencies_are_the_time_between_request_and_answer():
    lat = latency_of(timed(V2))
    assert lat.methods() == {
        "initialize": {"count": 1, "p50": 2.0, "p90": 2.0, "p99": 2.0, "max": 2.0, "errors": 0},
        "session/new": {"count": 1, "p50": 7.0, "p90": 7.0, "p99": 7.0, "max": 7.0,
                        "errors": 0},
        "session/prompt": {"count": 3, "p50": 2.0, "p90": 4.0, "p99": 4.0, "max": 4.0,
                           "errors": 1},
        "session/request_permission": {"count": 1, "p50": 60.0, "p90": 60.0, "p99": 60.0,
                                       "max": 60.0, "errors": 0}}


def test_v2_turns_end_at_idle_or_an_error_and_skip_the_echo_and_state_for_the_first_update():
    lat = latency_of(timed(V2))
    assert lat.turn_records() == [
        {"seq": 4, "sessionId": "s1", "id": 2, "first_update_ms": 10.0, "duration_ms": 100.0,
         "stopReason": "end_turn"},
        {"seq": 13, "sessionId": "s1", "id": 3, "first_update_ms": None, "duration_ms": 4.0,
         "stopReason": None},
        {"seq": 15, "sessionId": "s1", "id": 4, "first_update_ms": 50.0, "duration_ms": None,
         "stopReason": None}]
    t = lat.as_dict()["turns"]
    assert (t["count"], t["unfinished"]) == (3, 1)
    assert t["first_update_ms"] == {"count": 2, "p50": 10.0, "p90": 50.0, "p99": 50.0,
                                    "max": 50.0}
    assert t["duration_ms"] == {"count": 2, "p50": 4.0, "p90": 100.0, "p99": 100.0,
                                "max": 100.0}


def test_an_idle_state_written_with_escapes_ends_the_turn():
    # after the first update only a state_update is parsed: one spelt with a JSON escape
    # is one all the same
    convo = [(t, d, orjson.dumps(x)) for t, d, x in V2[:9]]
    escaped = (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1",'
               b'"update":{"sessionUpdate":"state\\u005fupdate","state":"idle"}}}')
    recs = list(frames([frame_record(i, int(t * MS), d, raw) for i, (t, d, raw)
                        in enumerate([*convo, (150, "a2c", escaped)])]))
    (turn,) = latency_of(recs).turn_records()
    assert (turn["first_update_ms"], turn["duration_ms"]) == (10.0, 50.0)


def test_v1_turns_end_at_the_prompt_response():
    convo = [*init(1),
             (100, "c2a", m(id=2, method="session/prompt", params={"sessionId": "s1"})),
             upd(101, {"sessionUpdate": "user_message_chunk", "content": {}}),
             chunk(125),
             chunk(130),
             (170, "a2c", m(id=2, result={"stopReason": "max_tokens"})),
             chunk(175)]  # after the turn: no effect
    (turn,) = latency_of(timed(convo)).turn_records()
    assert turn == {"seq": 4, "sessionId": "s1", "id": 2, "first_update_ms": 25.0,
                    "duration_ms": 70.0, "stopReason": "max_tokens"}


def test_turns_of_two_sessions_are_apart():
    convo = [*init(2),
             (20, "c2a", m(id=5, method="session/new", params={"cwd": "/", "mcpServers": []})),
             (21, "a2c", m(id=5, result={"sessionId": "s2"})),
             (100, "c2a", m(id=2, method="session/prompt", params={"sessionId": "s1"})),
             (105, "c2a", m(id=3, method="session/prompt", params={"sessionId": "s2"})),
             chunk(107, sid="s2"),
             chunk(130, sid="s1"),
             upd(140, {"sessionUpdate": "state_update", "state": "idle"}, "s2"),
             upd(150, {"sessionUpdate": "state_update", "state": "idle"}, "s1")]
    turns = latency_of(timed(convo)).turn_records()
    assert [(t["sessionId"], t["first_update_ms"], t["duration_ms"]) for t in turns] == [
        ("s1", 30.0, 50.0), ("s2", 2.0, 35.0)]


def test_a_bare_stream_has_no_times():
    bare = [dict(f, t=None) for f in timed(V2)]
    d = latency_of(bare).as_dict()
    assert d["latency_ms"] == {} and d["turns"]["count"] == 0


@given(st.lists(st.integers(0, 10**6), max_size=300))
def test_stats_are_nearest_rank_percentiles(values):
    s = stats(values)
    assert s["count"] == len(values)
    if not values:
        assert s["p50"] is None and s["max"] is None
        return
    ordered = sorted(values)
    for key, p in (("p50", 50), ("p90", 90), ("p99", 99)):
        # the smallest value with at least p% of the values at or below it
        want = next(v for v in ordered
                    if sum(1 for w in values if w <= v) * 100 >= p * len(values))
        assert s[key] == want
    assert s["max"] == max(values)
    assert s["p50"] <= s["p90"] <= s["p99"] <= s["max"]
    assert not math.isnan(s["p50"])


def wire(convo) -> bytes:
    lines = [orjson.dumps(header(["a"], started_ns=0, clock="epoch", host=False))]
    lines += [orjson.dumps(frame_record(i, int(t * MS), d, orjson.dumps(x)))
              for i, (t, d, x) in enumerate(convo)]
    return b"\n".join(lines) + b"\n"


def test_summary_json_and_table(tmp_path):
    p = tmp_path / "wire.jsonl"
    p.write_bytes(wire(V2))
    r = run_tool("frame", "--summary", "--format", "json", str(p))
    s = orjson.loads(r.stdout)
    lib = latency_of(timed(V2)).as_dict()
    assert s["latency_ms"] == lib["latency_ms"] and s["turns"] == lib["turns"]
    table = run_tool("frame", "--summary", "--format", "table", str(p)).stdout.decode()
    rows = {line.split()[0]: line.split() for line in table.splitlines() if line.strip()}
    assert rows["session/request_permission"] == [
        "session/request_permission", "1", "60.000", "60.000", "60.000", "60.000", "0"]
    assert "prompt turns (1 unfinished)" in table
    assert [ln.split()[:3] for ln in table.splitlines() if ln.startswith("4 ")] == [
        ["4", "s1", "10.000"]]


def test_align_json_has_per_method_latency_deltas(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(wire(V2))
    slower = [(t * 2 if t >= 100 else t, d, x) for t, d, x in V2]  # every turn twice as long
    b.write_bytes(wire(slower))
    r = run_tool("align", "--format", "json", str(a), str(b))
    assert r.returncode == 0, r.stderr  # the same frames: equal runs
    out = orjson.loads(r.stdout)
    want = deltas(latency_of(timed(V2)).methods(), latency_of(timed(slower)).methods())
    assert out["latency_ms"] == want
    perm = out["latency_ms"]["session/request_permission"]
    assert (perm["a"]["p50"], perm["b"]["p50"], perm["delta"]["p50"]) == (60.0, 120.0, 60.0)
    assert out["latency_ms"]["initialize"]["delta"] == {
        "count": 0, "p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0, "errors": 0}


def test_deltas_of_a_method_in_one_run_only():
    a = {"x": {"count": 1, "p50": 1.0, "p90": 1.0, "p99": 1.0, "max": 1.0, "errors": 0}}
    d = deltas(a, {})
    assert d["x"]["b"]["count"] == 0 and d["x"]["delta"] == {
        "count": -1, "p50": None, "p90": None, "p99": None, "max": None, "errors": 0}


def test_align_measures_a_frames_stream_as_written(tmp_path):
    # a frames stream is read as written (not framed again): its latencies are the same
    # as the wire log's, a second stream appended adds its own; records an editor may
    # have mangled (no id, a time that is not a number) are not measured, and no error
    a, b = tmp_path / "a.jsonl", tmp_path / "b.frames.jsonl"
    a.write_bytes(wire(V2))
    framed = run_tool("frame", str(a)).stdout
    odd = [{"seq": 90, "t": 5 * MS, "dir": "c2a", "kind": "request", "method": "x/y",
            "hash": None},
           {"seq": 91, "t": "late", "dir": "a2c", "kind": "response", "id": 0, "hash": None}]
    b.write_bytes(framed + b"".join(orjson.dumps(r) + b"\n" for r in odd) + framed)
    r = run_tool("align", "--format", "json", str(a), str(b))
    assert r.returncode == 1, r.stderr  # b holds the session twice
    got = orjson.loads(r.stdout)["latency_ms"]
    one = latency_of(timed(V2)).methods()
    twice = latency_of(timed(V2) + [{"format": "x"}] + timed(V2)).methods()
    assert {m_: s["a"] for m_, s in got.items()} == one
    assert {m_: s["b"] for m_, s in got.items()} == twice
    assert got["session/prompt"]["delta"]["count"] == 3 and "x/y" not in got


def test_align_latency_of_one_session(tmp_path):
    # --session: that session's requests and their answers only
    two = [*init(2),
           (20, "c2a", m(id=5, method="session/prompt", params={"sessionId": "s1", "prompt": []})),
           (30, "c2a", m(id=6, method="session/prompt", params={"sessionId": "s2", "prompt": []})),
           (35, "a2c", m(id=5, result={"messageId": "u1"})),
           (70, "a2c", m(id=6, result={"messageId": "u2"}))]
    p = tmp_path / "w.jsonl"
    p.write_bytes(wire(two))
    out = orjson.loads(run_tool("align", "--format", "json", "--session", "s1", "--session",
                                "s1", str(p), str(p)).stdout)
    assert set(out["latency_ms"]) == {"session/prompt"}
    assert out["latency_ms"]["session/prompt"]["a"]["max"] == 15.0


def test_asr_streams_have_no_latency(tmp_path):
    p = tmp_path / "w.jsonl"
    p.write_bytes(wire(V2))
    asr = tmp_path / "s.asr.jsonl"
    asr.write_bytes(run_tool("asr", str(p)).stdout)
    out = orjson.loads(run_tool("align", "--format", "json", str(asr), str(asr)).stdout)
    assert "latency_ms" not in out

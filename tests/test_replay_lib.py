"""The replay library in-process: normalisers, id splicing, matching modes, pacing."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_pipes.errors import UsageError
from acp_pipes.protocol.canonical import canonical_hash
from acp_pipes.replay.trace import ReplayOptions, Trace, emit, replay_agent
from acp_pipes.replay.trace.ids import id_span, splice_id
from acp_pipes.sameness.normalize import IGNORED, Normalizer, parse_pointer
from tests.conftest import REPO, run_tool

json_scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=4),
    max_leaves=20,
)
ids = st.integers(-10**9, 10**9) | st.text(max_size=10) | st.none()


# -- normalize ---------------------------------------------------------------------------


def test_a_bad_ignore_pointer_is_one_usage_error_in_every_tool(tmp_path):
    """``--ignore`` is checked in one place (Normalizer.from_option), so acp-align,
    acp-replay and acp-batch refuse a malformed pointer with the same words, exit 2."""
    message = "--ignore: JSON pointer must be empty or start with '/': 'params'"
    with pytest.raises(UsageError) as e:
        Normalizer.from_option(["/ok", "params"])
    assert str(e.value) == message
    assert Normalizer.from_option(["/a~1b"]).pointers == ("/a~1b",)
    wire = str(REPO / "tests" / "fixtures" / "formats" / "wire-v1.jsonl")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "a.jsonl").write_bytes(Path(wire).read_bytes())
    for name, args in (("align", [wire, wire]), ("replay", [wire]),
                       ("batch", ["align", str(tmp_path / "runs"), "--baseline",
                                  str(tmp_path / "runs" / "a.jsonl"), "-o", str(tmp_path / "o")])):
        r = run_tool(name, *args, "--ignore", "params", input=b"")
        assert (r.returncode, r.stderr, r.stdout) == (2, f"acp-{name}: {message}\n".encode(), b"")


def test_ignore_removes_members_masks_elements_and_wildcards_every_key():
    n = Normalizer.from_pointers(["/a/*/t", "/b/1", "/c~1d", "/missing/x"])
    value = {"a": {"x": {"t": 1, "k": 2}, "y": [{"t": 3}]}, "b": [1, 2, 3], "c/d": 0}
    assert n.apply(value) == {"a": {"x": {"k": 2}, "y": [{"t": 3}]}, "b": [1, IGNORED, 3]}
    # "/a/*/t": in a.y the "*" picks the list, whose member "t" is not an index
    assert Normalizer.from_pointers([""]).apply(value) == IGNORED
    assert Normalizer.from_pointers(["/b/*"]).apply(value)["b"] == [IGNORED] * 3
    assert Normalizer.from_pointers(["/b/01", "/b/-"]).apply(value)["b"] == [1, 2, 3]


@pytest.mark.parametrize("bad", ["a", "/a~2", "/~"])
def test_malformed_pointers_are_refused(bad):
    with pytest.raises(ValueError):
        parse_pointer(bad)


@settings(max_examples=40, deadline=None)
@given(json_values, st.lists(st.sampled_from(["/a", "/*", "/*/*", "/0", "/a/*/b", "/*/0"]),
                             max_size=3))
def test_apply_is_pure_and_hashing_is_canonical(value, pointers):
    n = Normalizer.from_pointers(pointers)
    before = copy.deepcopy(value)
    out = n.apply(value)
    assert value == before  # never mutates
    assert n.hash(value) == canonical_hash(out)
    assert Normalizer.from_pointers([]).hash(value, known="blake3:x") == "blake3:x"


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.text(max_size=4), json_values, max_size=4), ids, ids)
def test_drop_id_matches_modulo_the_id_only(body, a, b):
    n = Normalizer.from_pointers([])
    one, two = {**body, "id": a}, {**body, "id": b}
    assert n.hash(one, drop_id=True) == n.hash(two, drop_id=True)
    without = {k: v for k, v in body.items() if k != "id"}
    assert n.hash(without, drop_id=True) != n.hash(one, drop_id=True)  # presence counts


# -- id splicing -------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(st.text(max_size=5).filter(lambda k: k != "id"), json_values,
                       max_size=4), ids, ids, st.integers(0, 3), st.booleans(), st.booleans())
def test_id_span_finds_the_top_level_id_under_any_layout(body, rid, new, pos, indent, ascii_):
    items = list(body.items())
    items.insert(min(pos, len(items)), ("id", rid))
    raw = json.dumps(dict(items), indent=2 if indent else None,
                     ensure_ascii=ascii_).encode()
    span = id_span(raw)
    assert span is not None
    assert json.loads(raw[span[0]:span[1]]) == rid
    spliced = splice_id(raw, json.dumps(new).encode())
    assert json.loads(spliced) == {**dict(items), "id": new}
    assert spliced[: span[0]] == raw[: span[0]]  # only the id token changed


def test_id_span_is_not_fooled_by_nested_ids_strings_or_escapes():
    raw = b'{"x":{"id":1},"s":"\\"id\\": 2","a":[{"id":3}], "\\u0069d" : 4 }'
    start, end = id_span(raw)
    assert raw[start:end] == b"4"
    assert id_span(b'{"x":{"id":1}}') is None
    assert id_span(b"[1]") is None and id_span(b"not json") is None


# -- matching and pacing -----------------------------------------------------------------


def wire(*frames: tuple[str, str], t: int = 0) -> list[dict]:
    return [{"seq": i, "t": i * t, "dir": d, "raw": r} for i, (d, r) in enumerate(frames)]


def msg(**kw) -> str:
    return orjson.dumps({"jsonrpc": "2.0", **kw}).decode()


def test_any_serves_identical_frames_first_in_first_out():
    note = msg(method="session/cancel", params={"sessionId": "s"})
    trace = wire(("c2a", note), ("a2c", msg(method="a", params={})),
                 ("c2a", msg(id=1, method="x")), ("a2c", msg(id=1, result={})),
                 ("c2a", note), ("a2c", msg(method="b", params={})))
    out = io.BytesIO()
    client = "\n".join([msg(id=1, method="x"), note, note]).encode() + b"\n"
    r = replay_agent(trace, io.BytesIO(client), out, ReplayOptions(match="any"))
    assert r.status == "ok" and r.consumed == 3
    assert out.getvalue().splitlines() == [msg(id=1, result={}).encode(),
                                           msg(method="a", params={}).encode(),
                                           msg(method="b", params={}).encode()]


def test_remap_keeps_agent_request_ids_and_rewrites_responses_to_the_client():
    trace = wire(("c2a", msg(id=5, method="session/prompt", params={})),
                 ("a2c", msg(id=0, method="session/request_permission", params={})),
                 ("c2a", msg(id=0, result={"outcome": {"outcome": "cancelled"}})),
                 ("a2c", '{"jsonrpc":"2.0",  "id" : 5,"result":{"id":5}}'))
    client = (msg(id="live-1", method="session/prompt", params={}) + "\n"
              + msg(id=0, result={"outcome": {"outcome": "cancelled"}}) + "\n").encode()
    log = io.BytesIO()
    out = io.BytesIO()
    r = replay_agent(trace, io.BytesIO(client), out,
                     ReplayOptions(remap_ids=True, remap_log=log))
    assert r.ok, r.reports
    assert out.getvalue() == (msg(id=0, method="session/request_permission", params={})
                              + '\n{"jsonrpc":"2.0",  "id" : "live-1","result":{"id":5}}\n'
                              ).encode()
    # the client's requests are mapped; its answers carry the agent's own ids already
    assert [orjson.loads(x) for x in log.getvalue().splitlines()] == [
        {"recorded": 5, "live": "live-1", "dir": "c2a", "seq": 0}]


def test_recorded_pace_waits_the_recorded_gaps():
    trace = wire(("a2c", msg(method="hello")), ("c2a", msg(id=1, method="x")),
                 ("a2c", msg(method="u")), ("a2c", msg(id=1, result={})), t=50_000_000)
    slept: list[float] = []
    out = io.BytesIO()
    r = replay_agent(trace, io.BytesIO(msg(id=1, method="x").encode() + b"\n"), out,
                     ReplayOptions(pace="recorded", sleep=slept.append))
    assert r.ok
    assert out.getvalue() == b"".join(f["raw"].encode() + b"\n" for f in trace
                                      if f["dir"] == "a2c")
    # 50 ms and 100 ms after the client frame (less what the replay itself took)
    assert len(slept) == 2 and 0.04 < slept[0] <= 0.05 and 0.09 < slept[1] <= 0.1


def test_a_nolf_last_frame_is_written_without_lf():
    trace = Trace.of(wire(("c2a", msg(id=1, method="x")), ("a2c", msg(id=1, result={}))))
    trace.frames[-1]["nolf"] = True
    out = io.BytesIO()
    r = replay_agent(trace, io.BytesIO(msg(id=1, method="x").encode()), out)
    assert out.getvalue() == msg(id=1, result={}).encode()
    assert r.status == "trace_cut"  # a last frame without LF: the recording was cut
    buf = io.BytesIO()
    assert emit(trace, "a2c", buf) == 1 and buf.getvalue() == msg(id=1, result={}).encode()


def test_a_client_that_stops_early_is_reported():
    trace = wire(("c2a", msg(id=1, method="x")), ("a2c", msg(id=1, result={})),
                 ("c2a", msg(id=2, method="y")), ("a2c", msg(id=2, result={})))
    r = replay_agent(trace, io.BytesIO(msg(id=1, method="x").encode() + b"\n"), io.BytesIO())
    assert r.status == "client_ended" and r.consumed == 1
    assert r.reports[0]["expected"]["method"] == "y"

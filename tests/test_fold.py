"""acp-fold: the patch rule and finality on hand-made frames, and a property test of the
fold against a small independent model of ACP v2's patch rule (ASR-704, 705, 708)."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_pipes.fold import fold
from acp_pipes.fold.patch import append_block, patch_meta
from tests.conftest import run_tool


def frames(*msgs):
    """Frame records (with parsed msg) for (dir, message) pairs, seq from 0."""
    return [{"seq": i, "t": 1000 * i, "dir": d, "msg": m} for i, (d, m) in enumerate(msgs)]


def upd(sid, **u):
    return ("a2c", {"jsonrpc": "2.0", "method": "session/update",
                    "params": {"sessionId": sid, "update": u}})


def entities(records, kind=None):
    return [r for r in records if r.get("ev") == "entity" and (kind is None or r["entity"] == kind)]


def test_meta_patch_key_by_key():
    """ASR-708: a present key replaces, a null key is removed, null clears all."""
    assert patch_meta({"a": 1, "b": 2}, {"a": None, "c": 3}) == {"b": 2, "c": 3}
    assert patch_meta({"a": 1}, None) is None
    assert patch_meta({"a": {"x": 1}}, {"a": {"y": 2}}) == {"a": {"y": 2}}  # no deep merge


def test_chunks_concatenate_only_like_text():
    """ASR-704 via ASR-211: text extends text with the same other fields."""
    c: list = []
    append_block(c, {"type": "text", "text": "a"})
    append_block(c, {"type": "text", "text": "b"})
    append_block(c, {"type": "text", "text": "c", "annotations": {"priority": 1}})
    append_block(c, {"type": "image", "data": "AA", "mimeType": "image/png"})
    append_block(c, {"type": "text", "text": "d"})
    assert [b.get("text") for b in c] == ["ab", "c", None, "d"]


def test_full_content_replaces_chunks_and_empty_resets():
    recs = list(fold(frames(
        upd("s", sessionUpdate="agent_message_chunk", messageId="m", content={"type": "text", "text": "x"}),
        upd("s", sessionUpdate="agent_message", messageId="m", content=[{"type": "text", "text": "whole"}]),
        upd("s", sessionUpdate="agent_message", messageId="n", content=[{"type": "text", "text": "gone"}]),
        upd("s", sessionUpdate="agent_message", messageId="n", content=[]),
        upd("s", sessionUpdate="state_update", state="idle"),
    )))
    m, n = entities(recs)
    assert m["value"]["content"] == [{"type": "text", "text": "whole"}] and m["assembly"] == "folded"
    assert n["value"]["content"] == [] and m["final"] and m["why"] == "idle"
    assert m["frames"] == [0, 1] and n["frames"] == [2, 3]


def test_tool_call_final_on_status_and_arrays_replace_whole():
    recs = list(fold(frames(
        upd("s", sessionUpdate="tool_call_update", toolCallId="c", name="n", title="t",
            locations=[{"path": "/a"}, {"path": "/b"}]),
        upd("s", sessionUpdate="tool_call_update", toolCallId="c", locations=[{"path": "/c"}],
            title=None),
        upd("s", sessionUpdate="tool_call_update", toolCallId="c", status="completed"),
    )))
    (c,) = entities(recs)
    assert c["final"] and c["why"] == "status"
    assert c["value"]["locations"] == [{"path": "/c"}] and "title" not in c["value"]


def test_timeline_order_and_dangling_tool_call_at_turn_end():
    """Records leave in the order ACP first showed them; an open call leaves at idle."""
    recs = list(fold(frames(
        upd("s", sessionUpdate="agent_message_chunk", messageId="m", content={"type": "text", "text": "x"}),
        upd("s", sessionUpdate="tool_call_update", toolCallId="done", status="completed"),
        upd("s", sessionUpdate="tool_call_update", toolCallId="open", status="in_progress"),
        upd("s", sessionUpdate="state_update", state="idle"),
        upd("s", sessionUpdate="tool_call_update", toolCallId="open", status="completed"),
    )))
    order = [(r.get("entity") or r.get("kind"), r.get("id"), r.get("final")) for r in recs]
    assert order == [("agent_message", "m", True), ("tool_call", "done", True),
                     ("tool_call", "open", False), ("state_update", None, None),
                     ("tool_call", "open", True)]


def test_cut_off_recording_writes_open_entities_as_they_stand():
    recs = list(fold(frames(
        upd("s", sessionUpdate="agent_message_chunk", messageId="m", content={"type": "text", "text": "half"}),
    )))
    (m,) = entities(recs)
    assert m["final"] and m["why"] == "stop" and m["value"]["content"][0]["text"] == "half"


def test_change_after_final_refolds_the_whole_entity():
    """ASR-706: the late patch folds onto the final value (not onto nothing)."""
    recs = list(fold(frames(
        upd("s", sessionUpdate="tool_call_update", toolCallId="c", name="n", status="completed"),
        upd("s", sessionUpdate="tool_call_update", toolCallId="c", title="late"),
    )))
    first, second = entities(recs)
    assert second["afterFinal"] and second["value"]["name"] == "n" and second["value"]["title"] == "late"
    assert second["pos"] == first["pos"] == 0


def _late_changes(n: int):
    """A message and a tool call go final, n other calls go final after them, then one
    more chunk for the message and a new title for the call (ASR-706)."""
    return frames(
        upd("s", sessionUpdate="agent_message_chunk", messageId="m",
            content={"type": "text", "text": "Hello "}),
        upd("s", sessionUpdate="tool_call_update", toolCallId="c", name="edit", kind="edit",
            rawInput={"path": "a.py"}, status="completed"),
        upd("s", sessionUpdate="state_update", state="idle"),
        *(upd("s", sessionUpdate="tool_call_update", toolCallId=f"x{i}", status="completed")
          for i in range(n)),
        upd("s", sessionUpdate="agent_message_chunk", messageId="m",
            content={"type": "text", "text": "world"}),
        upd("s", sessionUpdate="tool_call_update", toolCallId="c", title="Edit a.py"),
        upd("s", sessionUpdate="state_update", state="idle"),
    )


def test_change_long_after_final_refolds_the_whole_entity():
    """ASR-706, however long ago the entity went final: after 300 other finals the late
    chunk extends "Hello " and the retitled call keeps its name, kind and input."""
    recs = entities(fold(_late_changes(300)))
    m, c = recs[-2:]
    assert (m["id"], c["id"]) == ("m", "c") and m["afterFinal"] and c["afterFinal"]
    assert m["value"]["content"] == [{"type": "text", "text": "Hello world"}]
    assert m["frames"] == [0, 303] and m["pos"] == 0 and m["assembly"] == "chunks"
    assert {k: c["value"].get(k) for k in ("name", "kind", "rawInput", "title", "status")} == {
        "name": "edit", "kind": "edit", "rawInput": {"path": "a.py"}, "title": "Edit a.py",
        "status": "completed"}


def test_final_states_on_disk_answer_as_in_memory():
    """The final store spills to disk: with states written to its file every 64 bytes
    and where they are moved to sqlite every 8 entries, the records are the same as
    with everything in memory."""
    from acp_pipes.fold import Folder
    from acp_pipes.fold.index import FinalStore

    outs = []
    for limit in (None, 64):
        f = Folder()
        if limit is not None:
            f.timeline.states.store = FinalStore(limit=8, buf_limit=limit)
        out = []
        for fr in _late_changes(600):
            out += f.feed(fr["seq"], fr["t"], fr["dir"], fr["msg"])
        if limit is not None:
            store = f.timeline.states.store
            assert store.where.on_disk >= 600 - 8 and store.flushed and len(store.buf) <= 64
        outs.append(orjson.dumps(out + f.finish()))
    assert outs[0] == outs[1]


def test_memory_bounded_by_open_entities():
    """Finals leave memory: after many finished calls nothing is open or waiting, and
    the final states are serialised in the store, which writes them to its file and
    moves where they are to disk past its limits."""
    from acp_pipes.fold import Folder
    from acp_pipes.fold.index import FinalStore

    f = Folder()
    f.timeline.states.store = FinalStore(limit=100, buf_limit=4096)
    for i in range(3000):
        msg = upd("s", sessionUpdate="tool_call_update", toolCallId=f"c{i}", status="completed")[1]
        f.feed(i, None, "a2c", msg)
    sess = f.sessions["s"]
    assert not sess.open and not sess.lane
    store = f.timeline.states.store
    assert len(store.buf) <= 4096 and len(store.where.mem) <= 100
    assert store.where.on_disk + len(store.where.mem) == 3000


def req(rid, method, **params):
    return ("c2a", {"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def resp(rid, **result):
    return ("a2c", {"jsonrpc": "2.0", "id": rid, "result": result})


def chunk(sid, mid, text):
    return upd(sid, sessionUpdate="agent_message_chunk", messageId=mid,
               content={"type": "text", "text": text})


def test_replay_window_covers_every_session_it_names():
    """ASR-707/717: between a resume with replayFrom and its response, updates for the
    resumed session's subagent (already final) and for a session never seen are
    history: folded from empty in the replay namespace, replayed: true."""
    recs = list(fold(frames(
        req(1, "session/new", cwd="/w"), resp(1, sessionId="p"),
        upd("p", sessionUpdate="subagent_update", sessionId="kid"),
        chunk("kid", "k1", "Looking"), upd("kid", sessionUpdate="state_update", state="idle"),
        req(2, "session/resume", sessionId="p", cwd="/w", replayFrom={"type": "start"}),
        chunk("kid", "k1", "Looking"), chunk("other", "o1", "old"),
        resp(2),
        chunk("kid", "k9", "live again"),
    )))
    by = {(r["session"], r["id"], r["replayed"]): r for r in entities(recs)}
    k1 = by[("kid", "k1", True)]
    assert k1["value"]["content"] == [{"type": "text", "text": "Looking"}]
    assert "afterFinal" not in k1 and k1["why"] == "replay"
    assert ("other", "o1", True) in by and ("kid", "k9", False) in by
    ends = [r["session"] for r in recs if r.get("op") == "replay_end"]
    assert sorted(ends) == ["kid", "other", "p"]


def test_session_with_live_work_stays_live_during_another_replay():
    """A session with a prompt of its own in progress (and the subagents it spawned)
    is live while another session replays (acp-pipes choice)."""
    recs = list(fold(frames(
        req(1, "session/new", cwd="/w"), resp(1, sessionId="a"),
        req(2, "session/new", cwd="/w"), resp(2, sessionId="b"),
        req(3, "session/prompt", sessionId="b", prompt=[{"type": "text", "text": "go"}]),
        upd("b", sessionUpdate="subagent_update", sessionId="b-kid"),
        req(4, "session/resume", sessionId="a", cwd="/w", replayFrom={"type": "start"}),
        chunk("a", "a1", "old"), chunk("b", "b1", "live"), chunk("b-kid", "c1", "live too"),
        resp(4), resp(3, messageId="u1"),
        upd("b", sessionUpdate="state_update", state="idle"),
    )))
    replayed = {r["id"]: r["replayed"] for r in entities(recs)}
    assert replayed == {"a1": True, "b1": False, "c1": False, "b-kid": False, "u1": False}


def test_unknown_protocol_version_refused_with_a_clear_message(tmp_path):
    """v1 and v2 are read; a version acp-pipes does not know (a future v3) is refused."""
    wire = tmp_path / "v3.jsonl"
    lines = [{"format": "acp-pipes/wire", "version": 1},
             {"seq": 0, "t": 0, "dir": "c2a", "raw": '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":3}}'},
             {"seq": 1, "t": 0, "dir": "a2c", "raw": '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":3}}'}]
    wire.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    for tool in ("fold", "asr"):
        got = run_tool(tool, str(wire))
        assert got.returncode == 2
        assert b"protocol version 3" in got.stderr and b"v1 and v2" in got.stderr
        assert b"Traceback" not in got.stderr


def test_bad_line_reported_with_file_and_line(tmp_path):
    wire = tmp_path / "w.jsonl"
    wire.write_bytes(b'{"format":"acp-pipes/wire","version":1}\n{oops\n')
    got = run_tool("fold", str(wire))
    assert got.returncode == 0
    assert f"{wire}:2: not JSON".encode() in got.stderr


# -- property: the fold against an independent model -----------------------------------

SESSIONS = ("s1", "s2")
KINDS = ("agent_message", "tool_call")
IDS = ("a", "b", "c")
texts = st.text(alphabet="xyz ", min_size=0, max_size=3)
op = st.one_of(
    st.tuples(st.just("idle"), st.sampled_from(SESSIONS)),
    st.tuples(st.sampled_from(("chunk", "upsert", "clear", "reset", "meta", "title")),
              st.sampled_from(SESSIONS), st.sampled_from(KINDS), st.sampled_from(IDS),
              texts, st.sampled_from(("k1", "k2")), st.one_of(st.none(), st.integers(0, 3))),
)


def _model_block_append(content, block):
    last = content[-1] if content else None
    if (block["type"] == "text" and last is not None and last["type"] == "text"
            and set(last) == {"type", "text"} and set(block) == {"type", "text"}):
        content[-1] = {"type": "text", "text": last["text"] + block["text"]}
    else:
        content.append(block)


@settings(max_examples=60, deadline=None)
@given(st.lists(op, min_size=1, max_size=40))
def test_fold_matches_a_model_of_the_patch_rule(ops):
    model: dict = {}
    msgs = []
    for o in ops:
        if o[0] == "idle":
            msgs.append(upd(o[1], sessionUpdate="state_update", state="idle"))
            continue
        what, sid, kind, eid, text, mkey, mval = o
        idf = "messageId" if kind == "agent_message" else "toolCallId"
        m = model.setdefault((sid, kind, eid), {"content": None, "meta": {}, "title": None,
                                                "chunked": False})
        base = {"sessionUpdate": "agent_message" if kind == "agent_message" else "tool_call_update", idf: eid}
        if what == "chunk":
            block = {"type": "text", "text": text}
            item = block if kind == "agent_message" else {"type": "content", "content": block}
            u = {"sessionUpdate": "agent_message_chunk" if kind == "agent_message"
                 else "tool_call_content_chunk", idf: eid, "content": item}
            c = list(m["content"] or [])
            if kind == "agent_message":
                _model_block_append(c, block)
            else:
                c.append(item)
            m["content"], m["chunked"] = c, True
        elif what in ("upsert", "reset", "clear"):
            if what == "upsert":
                block = {"type": "text", "text": text}
                val = [block if kind == "agent_message" else {"type": "content", "content": block}]
            else:
                val = [] if what == "reset" else None
            u = {**base, "content": val}
            m["content"] = None if (val is None or (val == [] and kind == "tool_call")) else val
            m["chunked"] = False
        elif what == "meta":
            u = {**base, "_meta": {mkey: mval}}
            if mval is None:
                m["meta"].pop(mkey, None)
            else:
                m["meta"][mkey] = mval
        else:
            u = {**base, "title": text or None}
            m["title"] = text or None
        msgs.append(upd(sid, **u))
    recs = list(fold(frames(*msgs)))
    last: dict = {}
    for r in entities(recs):
        if r["final"]:
            last[(r["session"], r["entity"], r["id"])] = r
    assert set(last) == set(model)
    for key, m in model.items():
        v = last[key]["value"]
        assert v.get("content") == m["content"], key
        assert v.get("_meta") == (m["meta"] or None), key
        assert v.get("title") == m["title"], key
        assert last[key]["assembly"] == ("chunks" if m["chunked"] else "folded"), key


# -- trace context (ASR-708) -------------------------------------------------------------

T1, T2, T3 = "00-" + "1" * 32 + "-" + "1" * 16 + "-01", "00-2-2-01", "00-3-3-01"


def traced(sid, meta, **u):
    return ("a2c", {"jsonrpc": "2.0", "method": "session/update",
                    "params": {"sessionId": sid, "update": u, "_meta": meta}})


def test_trace_context_of_every_contributing_update_is_kept():
    """ASR-708: traceparent/tracestate/baggage from a chunk's own _meta and from the
    notification's params._meta end in the entity's _meta, the first value kept; other
    chunk-scoped keys stay out; an upsert's _meta: null does not remove them."""
    recs = entities(fold(frames(
        chunk("s", "m", "a"),
        upd("s", sessionUpdate="agent_message_chunk", messageId="m",
            content={"type": "text", "text": "b"}, _meta={"traceparent": T1, "x": 1}),
        traced("s", {"traceparent": T2, "baggage": "k=v", "y": 2},
               sessionUpdate="agent_message_chunk", messageId="m",
               content={"type": "text", "text": "c"}),
        upd("s", sessionUpdate="tool_call_update", toolCallId="c", _meta={"tracestate": "a=1"}),
        upd("s", sessionUpdate="tool_call_update", toolCallId="c", _meta=None,
            status="completed"),
        upd("s", sessionUpdate="state_update", state="idle"),
    )))
    msg, call = recs
    assert msg["value"]["content"] == [{"type": "text", "text": "abc"}]
    assert msg["value"]["_meta"] == {"traceparent": T1, "baggage": "k=v"}
    assert call["value"]["_meta"] == {"tracestate": "a=1"}


def test_trace_context_of_an_upsert_follows_the_patch_rule():
    """An upsert's own _meta is patched key by key (a present key replaces, ASR-708);
    trace context from elsewhere only fills what the patch left out."""
    (rec,) = entities(fold(frames(
        traced("s", {"traceparent": T3}, sessionUpdate="agent_message", messageId="m",
               _meta={"traceparent": T1}, content=[]),
        upd("s", sessionUpdate="agent_message", messageId="m", _meta={"traceparent": T2}),
    )))
    assert rec["value"]["_meta"] == {"traceparent": T2}


def test_trace_context_of_an_event_and_of_a_prompt():
    recs = list(fold(frames(
        req(1, "session/new", cwd="/w"), resp(1, sessionId="s"),
        ("c2a", {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
            "sessionId": "s", "prompt": [], "_meta": {"traceparent": T1}}}),
        resp(2, messageId="u"),
        traced("s", {"baggage": "turn=1", "z": 0}, sessionUpdate="state_update", state="idle"),
    )))
    (prompt,) = entities(recs)
    assert prompt["value"]["_meta"] == {"traceparent": T1}
    (state,) = [r for r in recs if r.get("kind") == "state_update"]
    assert state["trace"] == {"baggage": "turn=1"}


def test_trace_context_survives_a_change_long_after_final():
    """The final store keeps an entity's trace context with its value (ASR-706, 708)."""
    recs = entities(fold(frames(
        upd("s", sessionUpdate="agent_message_chunk", messageId="m",
            content={"type": "text", "text": "a"}, _meta={"traceparent": T1}),
        upd("s", sessionUpdate="state_update", state="idle"),
        *(upd("s", sessionUpdate="tool_call_update", toolCallId=f"x{i}", status="completed")
          for i in range(300)),
        chunk("s", "m", "b"), upd("s", sessionUpdate="state_update", state="idle"),
    )))
    assert recs[-1]["id"] == "m" and recs[-1]["value"]["_meta"] == {"traceparent": T1}


# -- frame order (ASR-713, ASR-704) ------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(cut=st.integers(0, 5), at=st.integers(0, 3), upsert=st.booleans(),
       meta=st.booleans())
def test_the_prompt_echo_gives_the_same_record_before_or_after_the_response(
        cut, at, upsert, meta):
    """The agent's echo of a prompt (as chunks, or as one user_message) is the prompt:
    the response arriving before, between or after the echo's frames gives the same
    record (never the text twice)."""
    text = "hello"
    if upsert:
        echo = [upd("s", sessionUpdate="user_message", messageId="u",
                    content=[{"type": "text", "text": text}])]
    else:
        echo = [upd("s", sessionUpdate="user_message_chunk", messageId="u",
                    content={"type": "text", "text": part}) for part in (text[:cut], text[cut:])]
    if meta:
        echo[-1][1]["params"]["_meta"] = {"traceparent": T1}
    at = min(at, len(echo))
    prompt = ("c2a", {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
        "sessionId": "s", "prompt": [{"type": "text", "text": text}]}})
    values = []
    for pos in (0, at, len(echo)):
        msgs = [req(1, "session/new", cwd="/w"), resp(1, sessionId="s"), prompt,
                *echo[:pos], resp(2, messageId="u"), *echo[pos:],
                upd("s", sessionUpdate="state_update", state="idle")]
        (rec,) = entities(fold(frames(*msgs)))
        values.append((rec["value"], rec["assembly"], rec["origin"], rec["pos"]))
    assert values[0] == values[1] == values[2]
    assert values[0][0]["content"] == [{"type": "text", "text": text}]


def test_two_resumes_of_a_session_cut_off_before_their_answers():
    """A client that sends a second resume before the first is answered, and a
    recording that stops there: each resume's record is written once (it was written
    twice and the fold failed, KeyError)."""
    recs = list(fold(frames(
        req(1, "session/resume", sessionId="s", cwd="/w"),
        req(2, "session/resume", sessionId="s", cwd="/w"),
    )))
    assert [r["frames"] for r in recs if r.get("op") == "resume"] == [[0], [1]]

"""The model of the same session (acp_pipes/sameness, docs/sameness.md) on sessions built
frame by frame: what is the same session (an order the protocol does not fix, floating
notifications anywhere in their window, minted IDs, vendor values, learned noise) and
what is a difference (content, what the agent asked or answered, an order the protocol
fixes, a frame missing), each found at the frame that changed."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from acp_pipes.errors import InputError
from acp_pipes.sameness import (
    FLOATING,
    Matcher,
    Order,
    compare_runs,
    default_presets,
    describe,
    learn_noise,
    load_presets,
    rules_for,
)
from acp_pipes.sameness.volatile import View
from tests.conftest import REPO

SID = "s-1"


def upd(kind: str, sid: str = SID, **fields) -> dict:
    return {"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": sid, "update": {"sessionUpdate": kind, **fields}}}


def chunk(text: str, sid: str = SID) -> dict:
    return upd("agent_message_chunk", sid, content={"type": "text", "text": text})


def req(rid, method: str, **params) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def res(rid, **result) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def run(*frames: tuple[str, dict]) -> list[tuple[dict, bytes]]:
    """A recording: (record, bytes) pairs, as a trace reader gives them."""
    return [({"seq": i, "t": 0, "dir": d}, orjson.dumps(m)) for i, (d, m) in enumerate(frames)]


def session(*turn_frames: list[tuple[str, dict]], sid: str = SID, agent: str = "a",
            v: int = 1) -> list[tuple[str, dict]]:
    """initialize, session/new, then one prompt per list of agent frames (its answer
    last, v1)."""
    out = [("c2a", req(0, "initialize", protocolVersion=v)),
           ("a2c", res(0, protocolVersion=v, agentInfo={"name": agent, "version": "1"})),
           ("c2a", req(1, "session/new", cwd="/w", mcpServers=[])),
           ("a2c", res(1, sessionId=sid))]
    for n, frames in enumerate(turn_frames, 2):
        out.append(("c2a", req(n, "session/prompt", sessionId=sid,
                               prompt=[{"type": "text", "text": f"p{n}"}])))
        out += frames
        if v == 1:
            out.append(("a2c", res(n, stopReason="end_turn")))
    return out


def compare(a, b, presets=None, **kw):
    presets = default_presets() if presets is None else presets
    return compare_runs(run(*a), run(*b), rules_for=lambda n: rules_for(n, presets), **kw)


def kinds(cmp) -> list[tuple[str, object]]:
    return [(d.kind, d.recorded_event.seq if d.recorded_event else None)
            for d in cmp.differences]


def a2c(m: dict) -> tuple[str, dict]:
    return ("a2c", m)


TITLE = a2c(upd("session_info_update", title="hello"))


# -- the order ------------------------------------------------------------------


def test_a_floating_notification_may_cross_the_turns_answer():
    """The title the agent's model writes asynchronously (RFD session-info-update): before
    the turn's answer in one run, after the next prompt in the other."""
    a = session([a2c(chunk("hi")), TITLE], [a2c(chunk("bye"))])
    b = session([a2c(chunk("hi"))], [TITLE, a2c(chunk("bye"))])
    cmp = compare(a, b)
    assert cmp.same and cmp.notes == []
    assert len(cmp.pairs) == len(a)


def test_a_floating_notification_missing_or_extra_is_a_note():
    a = session([a2c(chunk("hi")), a2c(upd("usage_update", used=1, size=9))])
    b = session([a2c(chunk("hi"))])
    cmp = compare(a, b)
    assert cmp.same
    assert [(n.kind, n.recorded_event.seq) for n in cmp.notes] == [("floating_missing", 6)]
    back = compare(b, a)
    assert back.same and [n.kind for n in back.notes] == ["floating_extra"]


def test_a_floating_notification_with_other_content_is_a_difference():
    """Floating is about when, not what: a changed title is a changed session."""
    a = session([a2c(chunk("hi")), TITLE])
    b = session([a2c(chunk("hi")), a2c(upd("session_info_update", title="goodbye"))])
    cmp = compare(a, b)
    assert kinds(cmp) == [("content", 6)]
    (d,) = cmp.differences
    assert d.diff == [{"op": "replace", "path": "/params/update/title",
                       "recorded": "hello", "received": "goodbye"}]


def test_concurrent_work_may_come_in_either_order():
    """Two tool calls and a message: no order between them is fixed."""
    t1 = [a2c(upd("tool_call", toolCallId="t1", title="one")),
          a2c(upd("tool_call_update", toolCallId="t1", status="completed"))]
    t2 = [a2c(upd("tool_call", toolCallId="t2", title="two")),
          a2c(upd("tool_call_update", toolCallId="t2", status="completed"))]
    a = session([*t1, *t2, a2c(chunk("done"))])
    b = session([a2c(chunk("done")), t2[0], t1[0], t1[1], t2[1]])
    assert compare(a, b).same


def test_one_entitys_frames_out_of_their_order_is_an_order_difference():
    a = session([a2c(upd("tool_call", toolCallId="t1", title="one", status="pending")),
                 a2c(upd("tool_call_update", toolCallId="t1", status="in_progress")),
                 a2c(upd("tool_call_update", toolCallId="t1", status="completed"))])
    b = [a[i] for i in (0, 1, 2, 3, 4, 7, 6, 8)]  # completed before in_progress
    cmp = compare(a, b)
    assert kinds(cmp)[0] == ("order", 7)
    assert cmp.differences[0].extra["before"] == [6]


def test_an_answer_before_the_turns_frames_is_a_missing_frame():
    """v1: a turn's frames come before the prompt's answer: an answer that comes first ends
    the turn without them."""
    a = session([a2c(chunk("hi")), a2c(chunk(" there"))])
    b = [a[i] for i in (0, 1, 2, 3, 4, 5, 7, 6)]
    cmp = compare(a, b)
    assert kinds(cmp)[0] == ("missing", 6)
    assert cmp.differences[0].extra["closer_seq"] == 7
    assert ("order", 6) in kinds(cmp)  # and when it came after all, it was late


def test_v2_a_turn_ends_at_idle_not_at_the_prompts_answer():
    """ACP v2 answers a prompt at once; the turn's frames come before state_update idle."""
    idle = a2c(upd("state_update", state="idle", stopReason="end_turn"))
    a = session([a2c(res(2, messageId="m")), a2c(chunk("hi")), idle], v=2)
    assert compare(a, a).same
    b = [a[i] for i in (0, 1, 2, 3, 4, 5, 7, 6)]  # idle before the chunk
    assert kinds(compare(a, b))[0] == ("missing", 6)
    order = Order()
    preds = [order.add(describe(i, r["dir"], raw)) for i, (r, raw) in enumerate(run(*a))]
    assert preds[5] == [4] and preds[6] == [4] and preds[7] == [4, 6]


def test_a_client_answer_is_after_the_request_it_answers_and_chains_its_entity():
    frames = session([a2c(upd("tool_call", toolCallId="t", title="w")),
                      a2c(req(9, "session/request_permission", sessionId=SID,
                              toolCall={"toolCallId": "t"}, options=[])),
                      ("c2a", res(9, outcome={"outcome": "selected", "optionId": "ok"})),
                      a2c(upd("tool_call_update", toolCallId="t", status="completed"))])
    order = Order()
    preds = [order.add(describe(i, r["dir"], raw)) for i, (r, raw) in
             enumerate(run(*frames))]
    assert preds[6] == [4, 5]  # the permission: in the turn, after the tool call
    assert preds[7] == [6]  # the answer: after the request
    assert preds[8] == [4, 7]  # the tool call's next update: after the answer
    assert preds[9] == [4, 5, 6, 8]  # the turn's answer: after all of the turn


def test_prompts_sent_at_once_open_their_turns_one_after_another():
    """A script piped in whole sends every prompt before the agent said anything: the
    frames before the first prompt's answer are its turn's, not the last prompt's."""
    prompt = [("c2a", req(n, "session/prompt", sessionId=SID, prompt=[])) for n in (2, 3)]
    frames = [*session()[:4:2], *prompt, *session()[1:4:2],
              a2c(chunk("one")), a2c(res(2, stopReason="end_turn")),
              a2c(chunk("two")), a2c(res(3, stopReason="end_turn"))]
    order = Order()
    preds = [order.add(describe(i, r["dir"], raw)) for i, (r, raw) in
             enumerate(run(*frames))]
    assert [d for d, _ in frames] == ["c2a"] * 4 + ["a2c"] * 6
    assert preds[6] == [2]  # the first chunk: the first prompt's
    assert preds[7] == [2, 6]
    assert preds[8] == [3]  # the second prompt's turn opens when the first one ends
    assert preds[9] == [3, 8]
    assert compare(frames, frames).same


def test_minted_identifiers_are_a_renaming_and_must_stay_one_to_one():
    a = session([a2c(upd("tool_call", "s-a", toolCallId="t1", title="x"))], sid="s-a")
    b = session([a2c(upd("tool_call", "s-b", toolCallId="zz", title="x"))], sid="s-b")
    cmp = compare(a, b)
    assert cmp.same and cmp.renamed == {"s-a": "s-b", "t1": "zz"}
    c = list(b)
    c[5] = a2c(upd("tool_call", "s-c", toolCallId="zz", title="x"))  # another session
    assert "renaming" in [k for k, _ in kinds(compare(a, c))]


def test_every_floating_kind_is_one_the_schemas_define():
    defined = set()
    for version in ("v1", "v2.0.0-alpha.9"):
        schema = json.loads((Path("/work/shared/acp-schema") / version /
                             "schema.unstable.json").read_text())
        union = schema["$defs"]["SessionUpdate"]
        for alt in union.get("oneOf", union.get("anyOf", [])):
            const = alt.get("properties", {}).get("sessionUpdate", {}).get("const")
            if const:
                defined.add(const)
    assert set(FLOATING) <= defined
    assert "state_update" not in FLOATING  # the turn's own state: idle ends it


# -- pacing -----------------------------------------------------------------------


def test_a_client_step_waits_for_the_agent_frames_before_it_but_not_a_floating_one():
    a = session([a2c(chunk("hi"))], [a2c(chunk("bye"))])
    a.insert(7, TITLE)  # after turn 1's answer, before prompt 2
    m = Matcher()
    slots = [m.admit(r, raw) for r, raw in run(*a)]
    prompt2 = slots[8]
    for s in slots[:6]:
        if s.dir == "c2a":
            m.sent(s)
        else:
            assert m.fast(s.raw) is s
    assert not m.may_send(prompt2)  # turn 1's answer has not come
    assert m.fast(slots[6].raw) is slots[6]
    assert m.may_send(prompt2)  # the title has not come either: nobody waits for it


# -- volatile values --------------------------------------------------------------


def test_a_vendor_preset_applies_by_the_agents_name_and_scrubs_inside_text():
    text = "Command: cat notes.txt\nOutput: one\nProcess Group PGID: {}"
    a = session([a2c(upd("tool_call_update", toolCallId="t", rawOutput={"pid": 11},
                         content=[{"type": "text", "text": text.format(11)}]))],
                agent="qwen-code")
    b = session([a2c(upd("tool_call_update", toolCallId="t", rawOutput={"pid": 42},
                         content=[{"type": "text", "text": text.format(42)}]))],
                agent="qwen-code")
    assert compare(a, b).same
    assert not compare(a, b, presets=[]).same  # without the preset: two differences
    other = [(d, json.loads(json.dumps(m).replace("qwen-code", "other"))) for d, m in a]
    other_b = [(d, json.loads(json.dumps(m).replace("qwen-code", "other"))) for d, m in b]
    assert not compare(other, other_b).same  # another agent: the preset is not its
    # the rest of the text is compared: one word changed beside the scrubbed pid
    c = [(d, json.loads(json.dumps(m).replace("Output: one", "Output: two"))) for d, m in b]
    (d,) = compare(a, c).differences
    assert d.kind == "content" and d.pointers == ["/params/update/content/0/text"]


def test_every_agent_presets_its_version():
    a = session([a2c(chunk("hi"))])
    b = session([a2c(chunk("hi"))])
    b[1][1]["result"]["agentInfo"]["version"] = "2.0.1"
    assert b != a and compare(a, b).same


@pytest.mark.parametrize("doc, said", [
    (b"{", "not JSON"),
    (b'{"format": "x", "version": 1, "presets": []}', "expected a preset file"),
    (b'{"format": "acp-pipes/presets", "version": 2, "presets": []}', "version 2"),
    (b'{"format": "acp-pipes/presets", "version": 1, "presets": [{"agent": "a", "x": 1}]}',
     "preset 1: unknown x"),
    (b'{"format": "acp-pipes/presets", "version": 1, "presets": [{"agent": "a", '
     b'"ignore": ["params"]}]}', "JSON pointer must be empty"),
    (b'{"format": "acp-pipes/presets", "version": 1, "presets": [{"agent": "a", '
     b'"scrub": [{"pattern": "("}]}]}', "missing ), unterminated subpattern"),
    (b'{"format": "acp-pipes/presets", "version": 1, "presets": [{"agent": "a", '
     b'"scrub": [{"pattern": "x+", "as": "xx"}]}]}', "the pattern does not match"),
])
def test_a_bad_preset_file_is_refused_naming_it(doc, said):
    with pytest.raises(InputError) as e:
        load_presets(doc, "mine.json")
    assert e.value.source == "mine.json" and said in str(e.value)


def test_the_packages_presets_load_and_name_what_they_are_for():
    presets = default_presets()
    assert [p.agent for p in presets] == ["*", "qwen-code", "codex-acp"]
    assert all(p.why for p in presets)
    data = json.loads((REPO / "acp_pipes" / "sameness" / "presets.json").read_text())
    assert len(data["presets"]) == len(presets)


def test_the_workspace_is_the_recorded_directory_in_what_is_compared():
    view = View(paths={"/rec/ws": "/live/dir"})
    assert view.map_paths({"p": "/rec/ws/notes.txt", "q": "/rec/wsx", "r": "cd /rec/ws"}) \
        == {"p": "/live/dir/notes.txt", "q": "/rec/wsx", "r": "cd /live/dir"}


# -- learned noise ----------------------------------------------------------------


def _tool_output(chunk_id: str, output: str = "one") -> dict:
    return upd("tool_call_update", toolCallId="t", status="completed",
               rawOutput=f"Chunk ID: {chunk_id}\nOutput: {output}\n")


def test_noise_learned_from_two_recordings_tolerates_exactly_that():
    """Diffy: what differs between two recordings of one script is learned for the frame
    it differed at; a third run that differs the same way is the same, one that differs
    anywhere else (in the same string too) is not."""
    a = session([a2c(_tool_output("3fa9")), a2c(chunk("done"))])
    b = session([a2c(_tool_output("7c01")), a2c(chunk("done"))])
    presets = default_presets()
    noise = learn_noise(run(*a), [("b", run(*b))],
                        rules_for=lambda n: rules_for(n, presets))
    summary = noise.summary()
    assert summary["values"] == [{"seq": 5, "label": "session/update tool_call_update",
                                  "path": "/params/update/rawOutput", "as": "text",
                                  "template": "Chunk ID: <~>\nOutput: one\n", "from": "b"}]
    third = session([a2c(_tool_output("0d0d")), a2c(chunk("done"))])
    assert compare(a, third, noise=noise).same
    changed = session([a2c(_tool_output("0d0d", "two")), a2c(chunk("done"))])
    assert kinds(compare(a, changed, noise=noise)) == [("content", 5)]
    elsewhere = session([a2c(_tool_output("3fa9")), a2c(chunk("DONE"))])
    assert kinds(compare(a, elsewhere, noise=noise)) == [("content", 6)]


def test_a_frame_another_recording_lacks_is_learned_as_sent_only_sometimes():
    extra = a2c(upd("tool_call", toolCallId="t9", title="exec"))
    a = session([extra, a2c(chunk("done"))])
    b = session([a2c(chunk("done"))])
    noise = learn_noise(run(*a), [("b", run(*b))])
    assert noise.optional == {5: "b does not have it"}
    cmp = compare(a, b, noise=noise)
    assert cmp.same and [n.kind for n in cmp.notes] == ["optional_missing"]
    # and an agent that sends a frame only another recording has: a note
    noise_back = learn_noise(run(*b), [("a", run(*a))])
    back = compare(b, a, noise=noise_back)
    assert back.same and [n.kind for n in back.notes] == ["optional_extra"]


def test_a_changed_reply_that_equals_a_later_turns_is_caught_where_it_changed():
    """Turn 1's reply now says what turn 2's says: a content difference at turn 1's
    chunk, not a frame of turn 2 come early (the agent was not asked turn 2 yet)."""
    a = session([a2c(chunk("changed"))], [a2c(chunk("done"))])
    b = session([a2c(chunk("done"))], [a2c(chunk("done"))])
    assert kinds(compare(a, b))[0] == ("content", 5)

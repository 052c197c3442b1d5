"""Long streamed entities fold in linear time (ASR-704): a chunk appends to the entity's
content in place and text pieces are joined once, when a record is made, instead of the
content list and the growing text being copied on every chunk.

No timing here (that is bench/bench_asr.py's "one streamed message" row): the tests
check the structure that makes it linear, and that the result is what ACP's patch rule
says (the same as appending block by block with append_block)."""

from __future__ import annotations

from acp_pipes.fold import Folder
from acp_pipes.fold.patch import append_block


def _upd(sid: str, **u) -> dict:
    return {"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": sid, "update": u}}


def _feed_all(f: Folder, msgs: list[dict]) -> list[dict]:
    out = []
    for i, m in enumerate(msgs):
        out += f.feed(i, None, "a2c", m)
    out += f.finish()
    return [r for r in out if r.get("ev") == "entity"]


def test_text_chunks_append_in_place_and_join_once():
    f = Folder()
    lists, parts = set(), []
    for i in range(500):
        f.feed(i, None, "a2c", _upd("s", sessionUpdate="agent_message_chunk", messageId="m",
                                     content={"type": "text", "text": f"w{i} "}))
        ent = f.sessions["s"].open[("agent_message", "m")]
        lists.add(id(ent.value["content"]))
        parts.append(len(ent.parts or ()))
    assert len(lists) == 1  # one list for the whole message, never copied
    assert parts[-1] == 500 and parts == sorted(parts)  # pieces kept, not re-joined
    (rec,) = _feed_all(f, [])
    assert rec["value"]["content"] == [{"type": "text", "text": "".join(
        f"w{i} " for i in range(500))}]
    assert rec["assembly"] == "chunks"


def test_item_chunks_append_in_place():
    """Tool call content chunks are one item each (no concatenation): still one list."""
    f = Folder()
    lists = set()
    for i in range(300):
        f.feed(i, None, "a2c", _upd("s", sessionUpdate="tool_call_content_chunk",
                                     toolCallId="c", content={"type": "content", "content": {
                                         "type": "text", "text": str(i)}}))
        lists.add(id(f.sessions["s"].open[("tool_call", "c")].value["content"]))
    assert len(lists) == 1
    (rec,) = _feed_all(f, [])
    assert [c["content"]["text"] for c in rec["value"]["content"]] == [str(i) for i in range(300)]


def test_in_place_folding_matches_the_patch_rule():
    """Text, annotated text, images, an upsert that replaces the content, a snapshot in
    between: the folded content equals appending block by block (append_block), and a
    record made mid-stream is not changed by later chunks."""
    blocks = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"},
              {"type": "text", "text": "c", "annotations": {"priority": 1}},
              {"type": "text", "text": "d", "annotations": {"priority": 1}},
              {"type": "image", "data": "AA==", "mimeType": "image/png"},
              {"type": "text", "text": "e"}, {"type": "text", "text": "f"}]
    msgs = [_upd("s", sessionUpdate="agent_message_chunk", messageId="m", content=b)
            for b in blocks]
    f = Folder(snapshots=True)
    out = []
    for i, m in enumerate(msgs[:3]):
        out += f.feed(i, None, "a2c", m)
    # a checkpoint: a snapshot of the open message (ASR-705)
    out += f.feed(3, None, "a2c", _upd("s", sessionUpdate="state_update", state="running"))
    for i, m in enumerate(msgs[3:], 4):
        out += f.feed(i, None, "a2c", m)
    out += f.finish()
    snap, final = [r for r in out if r.get("ev") == "entity"]
    model: list = []
    for b in blocks[:3]:
        append_block(model, b)
    assert snap["final"] is False and snap["value"]["content"] == model
    for b in blocks[3:]:
        append_block(model, b)
    assert final["value"]["content"] == model

    # a full-content upsert replaces what chunks built; chunks then append to it
    f = Folder()
    recs = _feed_all(f, [msgs[0], msgs[1],
                         _upd("s", sessionUpdate="agent_message", messageId="m",
                              content=[{"type": "text", "text": "X"}]),
                         msgs[5], msgs[6]])
    assert recs[0]["value"]["content"] == [{"type": "text", "text": "Xef"}]

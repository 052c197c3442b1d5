"""ACP v1 recordings: the lift into v2's shapes (acp_pipes/fold/v1.py) and its choices.

The golden fixtures (tests/fixtures/asr/ASR-*-v1-*, run by test_asr_fixtures.py) pin
each choice of docs/asr.md "ACP v1"; this file checks that the table and the fixtures
name each other, and the properties no single fixture can show: derived message IDs do
not depend on chunk boundaries, a session/load replay of the same history writes
nothing new, v1 diffs survive whole and apply with GNU patch, the lift leaves the
caller's messages alone.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_pipes.asr import convert
from acp_pipes.fold import fold
from acp_pipes.fold.v1 import git_patch, texts_from_patch
from tests.conftest import REPO, run_tool

FIXTURES = REPO / "tests" / "fixtures" / "asr"
V1_CASES = sorted(p for p in FIXTURES.glob("ASR-*v1*") if (p / "wire.jsonl").exists())


def _v1_table() -> list[str]:
    text = (REPO / "docs" / "asr.md").read_text()
    section = text.split("\n## ACP v1\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and "`ASR-" in line]


def test_every_v1_choice_names_its_fixture_and_every_fixture_a_choice():
    rows = _v1_table()
    assert len(rows) >= 12  # a floor: the table was found (it grows); what it names is exact below
    named = set()
    for row in rows:
        fixtures = re.findall(r"`(ASR-[^`]+)`", row.rsplit("|", 2)[-2])
        assert fixtures, f"no fixture for {row[:60]}"
        named.update(fixtures)
    assert named <= {p.name for p in V1_CASES}, named - {p.name for p in V1_CASES}
    assert {p.name for p in V1_CASES} <= named
    choices = [r for r in rows if "(acp-pipes choice" in r]
    assert len(choices) >= 9  # a floor, as the table grows


@pytest.mark.parametrize("case", V1_CASES, ids=[p.name for p in V1_CASES])
def test_acp_fold_reads_v1(case):
    got = run_tool("fold", str(case / "wire.jsonl"))
    assert got.returncode == 0, got.stderr.decode()
    recs = [orjson.loads(x) for x in got.stdout.splitlines()]
    inits = [r for r in recs if r.get("ev") == "initialize"]
    assert inits and inits[-1]["protocolVersion"] == 1
    assert inits[-1]["agent"]["name"]  # agentInfo, under v2's name


def test_terminal_env_never_recorded():
    """The env of a client terminal can hold credentials: neither fold nor ASR has it."""
    wire = FIXTURES / "ASR-mapping-table-v1-terminals" / "wire.jsonl"
    assert b"SECRET" in wire.read_bytes()
    for tool in ("fold", "asr"):
        out = run_tool(tool, str(wire))
        assert out.returncode == 0 and b"SECRET" not in out.stdout


# -- a v1 session built in memory ---------------------------------------------------------


class Session:
    """Frames of one v1 connection, as the fold's ``fold()`` takes them."""

    def __init__(self, seq0: int = 0):
        self.frames: list[dict] = []
        self.seq = seq0

    def add(self, d: str, msg: dict) -> Session:
        self.frames.append({"seq": self.seq, "t": 1_000_000 * (self.seq + 1), "dir": d,
                            "msg": msg})
        self.seq += 1
        return self

    def init(self) -> Session:
        self.add("c2a", {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                         "params": {"protocolVersion": 1}})
        return self.add("a2c", {"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": 1, "agentInfo": {"name": "a", "version": "1"}}})

    def req(self, rid, method, **params) -> Session:
        return self.add("c2a", {"jsonrpc": "2.0", "id": rid, "method": method,
                                "params": params})

    def resp(self, rid, result) -> Session:
        return self.add("a2c", {"jsonrpc": "2.0", "id": rid, "result": result})

    def upd(self, sid, **update) -> Session:
        return self.add("a2c", {"jsonrpc": "2.0", "method": "session/update",
                                "params": {"sessionId": sid, "update": update}})

    def chunks(self, sid, kind, parts) -> Session:
        for p in parts:
            self.upd(sid, sessionUpdate=kind, content={"type": "text", "text": p})
        return self

    def turn(self, rid, sid, prompt, replies) -> Session:
        self.req(rid, "session/prompt", sessionId=sid,
                 prompt=[{"type": "text", "text": prompt}])
        for kind, parts in replies:
            self.chunks(sid, kind, parts)
        return self.resp(rid, {"stopReason": "end_turn"})


def _streams(*connections: list[dict]) -> dict[str, list[dict]]:
    """The connections folded in one run (their entity states shared), then mapped."""
    from acp_pipes.fold.state import States

    records = []
    states = States()
    for n, frames in enumerate(connections):
        records.append({"format": "acp-pipes/fold", "version": 1, "connection": n})
        records.extend(fold(frames, connection=n, states=states))
    states.close()
    return convert(records)


def _splits(text: str) -> st.SearchStrategy[list[str]]:
    """``text`` cut into chunks at random places (empty chunks included)."""
    cuts = st.lists(st.integers(0, len(text)), max_size=6).map(sorted)
    return cuts.map(lambda cs: [text[a:b] for a, b in
                                zip([0, *cs], [*cs, len(text)], strict=True)])


REPLY = "Hello, world!\nSecond line."
THOUGHT = "thinking it over"


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_derived_ids_do_not_depend_on_chunk_boundaries(data):
    """ASR-704 for v1: the ID comes from the folded content, not from how it streamed."""
    ids = []
    for _ in range(2):
        s = Session().init().req(1, "session/new", cwd="/w", mcpServers=[])
        s.resp(1, {"sessionId": "s"})
        s.turn(2, "s", "hi", [("agent_thought_chunk", data.draw(_splits(THOUGHT))),
                              ("agent_message_chunk", data.draw(_splits(REPLY)))])
        recs = _streams(s.frames)["s"][1:]
        msgs = [r for r in recs if r["type"] == "message"]
        assert [m["content"] for m in msgs] == [
            [{"type": "text", "text": "hi"}], [{"type": "reasoning", "text": THOUGHT}],
            [{"type": "text", "text": REPLY}]]
        assert all(m["idSource"] == "derived" for m in msgs)
        ids.append([m["messageId"] for m in msgs])
    assert ids[0] == ids[1]
    assert len(set(ids[0])) == 3


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_load_replay_of_the_same_history_writes_nothing_new(data):
    """ASR-717 for v1: session/load replays the history (chunked as the agent likes);
    what the stream holds is not written again; the live turn after it is new."""
    live = Session().init().req(1, "session/new", cwd="/w", mcpServers=[])
    live.resp(1, {"sessionId": "s"})
    live.turn(2, "s", "hi", [("agent_message_chunk", data.draw(_splits(REPLY)))])
    live.turn(3, "s", "hi", [("agent_message_chunk", data.draw(_splits(REPLY)))])
    load = Session().init().req(1, "session/load", sessionId="s", cwd="/w", mcpServers=[])
    for _ in range(2):
        load.chunks("s", "user_message_chunk", data.draw(_splits("hi")))
        load.chunks("s", "agent_message_chunk", data.draw(_splits(REPLY)))
    load.resp(1, {})
    load.turn(2, "s", "hi", [("agent_message_chunk", [REPLY])])
    before = _streams(live.frames)["s"]
    after = _streams(live.frames, load.frames)["s"]
    assert after[1:len(before)] == before[1:]
    new = after[len(before):]
    assert [r["type"] for r in new] == ["state", "message", "message", "state"]
    assert new[0]["state"] == "resumed"
    assert [r["messageId"].rsplit(":", 1)[1] for r in new[1:3]] == ["3", "3"]


def test_derived_ids_count_across_connections():
    """ASR-717: a v1 session/resume (no replay) on a second connection goes on counting
    the session's messages where the first connection left off, so the IDs are the same
    ones a later session/load replay derives (no connection in them)."""
    live = Session().init().req(1, "session/new", cwd="/w", mcpServers=[])
    live.resp(1, {"sessionId": "s"}).turn(2, "s", "ok", [("agent_message_chunk", ["ok"])])
    later = Session().init().req(1, "session/resume", sessionId="s", cwd="/w")
    later.resp(1, {}).turn(2, "s", "ok", [("agent_message_chunk", ["ok"])])
    msgs = [r for r in _streams(live.frames, later.frames)["s"] if r["type"] == "message"]
    ids = [m["messageId"].split(":") for m in msgs]
    assert [(i[0], i[1], i[3]) for i in ids] == [
        ("v1", "user", "1"), ("v1", "agent", "1"), ("v1", "user", "2"), ("v1", "agent", "2")]
    assert len({m["messageId"] for m in msgs}) == 4


def test_the_lift_leaves_the_callers_messages_alone():
    s = Session().init().req(1, "session/new", cwd="/w", mcpServers=[])
    s.resp(1, {"sessionId": "s"})
    s.req(2, "session/prompt", sessionId="s", prompt=[{"type": "text", "text": "x"}])
    s.upd("s", sessionUpdate="tool_call", toolCallId="c", title="t", content=[
        {"type": "diff", "path": "/w/a", "oldText": "1", "newText": "2"}])
    s.chunks("s", "agent_message_chunk", ["a", "b"]).resp(2, {"stopReason": "end_turn"})
    before = copy.deepcopy(s.frames)
    list(fold(s.frames))
    assert s.frames == before


# -- v1 diffs -------------------------------------------------------------------------------

_TEXT = st.text(alphabet=st.sampled_from("ab\n\r \\+-@é"), max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.none(), _TEXT), _TEXT)
def test_git_patch_holds_both_texts_whole(old, new):
    """ASR-715 for v1: nothing of oldText/newText is lost in the patch, not even in a
    diff that changes nothing (its hunk removes every line and adds it back: patch tools
    refuse a hunk without change); only two empty texts have no hunk."""
    patch = git_patch("/w/f.txt", old, new)
    assert texts_from_patch(patch) == (old, new)
    if old == new and new:
        assert "\n@@ " in patch and "\n-" in patch and "\n+" in patch
    if not old and not new:
        assert "@@" not in patch


@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch is not installed")
@pytest.mark.parametrize(("old", "new"), [
    ("a = 1\nb = 2\nc = 3\n", "a = 1\nb = 20\nc = 3\n"),
    ("one\ntwo", "one\ntwo\nthree\n"),
    ("x\r\ny\r\n", "x\r\nz\r\n"),
    ("keep\n", "keep\nmore\n"),
    ("", "new file\n"),
])
def test_git_patch_applies_with_gnu_patch(tmp_path, old, new):
    """The patch is a real one: GNU patch turns the old text into the new."""
    src = tmp_path / "f.txt"
    src.write_bytes(old.encode())
    diff = tmp_path / "f.diff"
    diff.write_bytes(git_patch(str(src), old, new).encode())
    out = tmp_path / "out.txt"
    got = subprocess.run(["patch", "--quiet", "-o", str(out), str(src), str(diff)],
                         capture_output=True)
    assert got.returncode == 0, got.stdout + got.stderr
    assert out.read_bytes() == new.encode()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text()}),
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(),
                           "annotations": st.fixed_dictionaries({"priority": st.floats(0, 1)})}),
    st.fixed_dictionaries({"type": st.just("image"), "data": st.text(max_size=8),
                           "mimeType": st.just("image/png")})), max_size=3))
def test_content_digest_is_the_canonical_hash(content):
    """Derived IDs take the canonical hash (blake3 of JCS) of the content; the direct
    path for one text block gives the same digits."""
    from acp_pipes.fold.v1 import content_digest
    from acp_pipes.protocol.canonical import CanonicalError, canonical_hash

    try:
        want = canonical_hash(content)[7:23]
    except CanonicalError:
        want = "0" * 16
    assert content_digest(content) == want


def test_derived_ids_are_the_same_when_the_counts_spill_to_disk(monkeypatch):
    """Occurrence counts past SEEN_IN_MEMORY live in sqlite: the IDs do not change."""
    import acp_pipes.fold.state as state

    def ids() -> list[str]:
        s = Session().init().req(1, "session/new", cwd="/w", mcpServers=[])
        s.resp(1, {"sessionId": "s"})
        for i in range(12):
            s.turn(2 + i, "s", "again" if i % 2 else f"new {i}",
                   [("agent_message_chunk", ["ok"])])
        return [r["messageId"] for r in _streams(s.frames)["s"] if r["type"] == "message"]

    in_memory = ids()
    monkeypatch.setattr(state, "SEEN_IN_MEMORY", 2)
    assert ids() == in_memory
    assert in_memory[-1].endswith(":12") and len(set(in_memory)) == 24


def test_validate_wants_the_v1_loss_of_derived_message_ids(tmp_path):
    """A v1 stream with derived message IDs must declare the lost boundaries (ASR-722);
    acp-asr --validate says so when the header does not."""
    expected = (FIXTURES / "ASR-704-v1-message-boundaries" / "expected.asr.jsonl")
    lines = expected.read_bytes().splitlines()
    header = orjson.loads(lines[0])
    header["producer"]["lossy"].remove("_org.agent-session.acp/v1_message_boundaries")
    bad = tmp_path / "bad.asr.jsonl"
    bad.write_bytes(b"".join(x + b"\n" for x in [orjson.dumps(header), *lines[1:]]))
    got = run_tool("asr", "--validate", str(bad))
    assert got.returncode == 1
    assert b"required loss '_org.agent-session.acp/v1_message_boundaries'" in got.stderr
    assert run_tool("asr", "--validate", str(expected)).returncode == 0


def test_a_diff_that_changes_nothing_replays_what_the_agent_said(tmp_path):
    """ASR-715 for v1: oldText equal to newText is kept, so acp-replay --protocol 1 sends
    the texts the agent sent; a patch without a hunk (what an older acp-pipes kept of
    such a diff, or two empty texts) holds no text, and none is sent: the diff is
    counted as lost (docs/acp-replay.md: never guessed)."""
    case = FIXTURES / "ASR-715-v1-diff-changes-nothing"
    expected = (case / "expected.asr.jsonl").read_bytes()

    def diffs(stream: bytes) -> tuple[list, dict]:
        path = tmp_path / "s.asr.jsonl"
        path.write_bytes(stream)
        r = run_tool("replay", "--protocol", "1", "--report", str(tmp_path / "r.json"),
                     str(path))
        assert r.returncode == 0, r.stderr.decode()
        sent = [i for f in r.stdout.splitlines()
                for i in orjson.loads(f)["params"]["update"].get("content") or []
                if isinstance(i, dict) and i.get("type") == "diff"]
        return sent, orjson.loads((tmp_path / "r.json").read_bytes())["losses"]

    sent, losses = diffs(expected)
    assert sent == [{"type": "diff", "path": "/ws/app/a.txt", "oldText": "same\nlines",
                     "newText": "same\nlines"}]
    assert losses["diff_text"] == 1  # empty.txt: two empty texts, no hunk
    head = git_patch("/ws/app/a.txt", "x", "y").split("@@")[0]
    old_style = b"\n".join(
        line if b'"a.txt"' not in line or b'"file_change"' not in line else orjson.dumps(
            {**orjson.loads(line), "patch": {"format": "git_patch", "text": head}})
        for line in expected.split(b"\n"))
    sent, losses = diffs(old_style)
    assert sent == [] and losses["diff_text"] == 2


def test_a_user_message_before_a_prompt_is_its_echo_only_with_its_content():
    """ASR-713 for v1: an agent's user message (own messageId) logged before the prompt
    request is the prompt's echo when its content is the prompt's (the two directions
    were logged apart); with other content it is a message of its own, and the prompt
    gets a derived ID: nothing merged that is not the same message."""
    s = Session().init().req(1, "session/new", cwd="/w", mcpServers=[])
    s.resp(1, {"sessionId": "s"})
    s.upd("s", sessionUpdate="user_message_chunk", messageId="m1",
          content={"type": "text", "text": "same"})
    s.turn(2, "s", "same", [("agent_message_chunk", ["a"])])
    s.upd("s", sessionUpdate="user_message_chunk", messageId="m2",
          content={"type": "text", "text": "other"})
    s.turn(3, "s", "next", [("agent_message_chunk", ["b"])])
    users = [(r["messageId"], r.get("origin"), r["content"][0]["text"])
             for r in _streams(s.frames)["s"] if r.get("role") == "user"]
    assert users[0] == ("m1", "prompt", "same")
    assert ("m2", None, "other") in users
    assert [u for u in users if u[1] == "prompt"][1][0].startswith("v1:user:")
    assert len(users) == 3

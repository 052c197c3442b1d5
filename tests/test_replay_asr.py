"""acp-replay on ASR streams (ASR-724..731, 733): conformance fixtures byte for byte,
every notification valid against the official ACP v2 schema, --session-id, --report,
--wire, and bad input. All through the real executable over pipes."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from acp_pipes.asr.reader import iter_streams, read_streams
from acp_pipes.replay.asr.index import read_indexed
from acp_pipes.replay.asr.updates import Replay
from tests.acp_schema import FrameChecker
from tests.conftest import REPO, run_tool

REPLAY_FIXTURES = sorted(p for p in (REPO / "tests" / "fixtures" / "replay").iterdir()
                         if (p / "stream.asr.jsonl").is_file())
ASR_FIXTURES = sorted(p for p in (REPO / "tests" / "fixtures" / "asr").iterdir()
                      if (p / "expected.asr.jsonl").is_file())
ALL_STREAMS = ([p / "stream.asr.jsonl" for p in REPLAY_FIXTURES]
               + [p / "expected.asr.jsonl" for p in ASR_FIXTURES])


def _lines(data: bytes) -> list[dict]:
    return [orjson.loads(x) for x in data.splitlines() if x.strip()]


@pytest.mark.parametrize("fixture", REPLAY_FIXTURES, ids=lambda p: p.name)
def test_fixture_bytes_and_report(fixture: Path, tmp_path: Path):
    report = tmp_path / "report.json"
    r = run_tool("replay", "stream.asr.jsonl", "--report", str(report), cwd=fixture)
    assert r.returncode == 0, r.stderr
    assert r.stdout == (fixture / "expected.acp.jsonl").read_bytes()
    expected = (fixture / "expected.report.json").read_bytes()
    assert report.read_bytes() == expected
    # ASR-731: the same report on stderr, one JSON line, never complete
    event = orjson.loads(r.stderr.strip().splitlines()[-1])
    assert event == orjson.loads(expected)
    assert event["complete"] is False and event["event"] == "replay_losses"


@pytest.mark.parametrize("path", ALL_STREAMS, ids=lambda p: p.parent.name)
def test_every_notification_is_valid_acp_v2(path: Path):
    """Each notification validates against acp_pipes/schemas/acp/v2.0.0-alpha.9 (unstable), and
    only whole-entity upserts are sent, never chunks (ASR-725)."""
    r = run_tool("replay", str(path))
    assert r.returncode == 0, r.stderr
    check = FrameChecker("agent")
    frames = _lines(r.stdout)
    assert frames
    kinds = []
    for frame in frames:
        assert check(frame) == "notification session/update"
        kinds.append(frame["params"]["update"]["sessionUpdate"])
    assert not [k for k in kinds if k.endswith("_chunk")]
    assert kinds[-1] == "state_update"  # the current state, after the history
    assert kinds.count("state_update") == 1 * len(list(read_streams(
        path.read_bytes().splitlines(), str(path))))


@pytest.mark.parametrize("fixture", REPLAY_FIXTURES, ids=lambda p: p.name)
def test_fixture_bytes_and_report_v1(fixture: Path, tmp_path: Path):
    """--protocol 1: the session/load updates of ACP v1, and the report naming what v1
    cannot carry besides the v2 losses."""
    report = tmp_path / "report.json"
    r = run_tool("replay", "stream.asr.jsonl", "--protocol", "1", "--report", str(report),
                 cwd=fixture)
    assert r.returncode == 0, r.stderr
    assert r.stdout == (fixture / "expected.v1.acp.jsonl").read_bytes()
    assert report.read_bytes() == (fixture / "expected.v1.report.json").read_bytes()
    event = orjson.loads(r.stderr.strip().splitlines()[-1])
    assert event["protocol"] == 1 and event["complete"] is False


@pytest.mark.parametrize("path", ALL_STREAMS, ids=lambda p: p.parent.name)
def test_every_v1_notification_is_valid_acp_v1(path: Path):
    """Each notification of --protocol 1 validates against acp_pipes/schemas/acp/v1, its
    stable features alone and with the unstable ones; no v2-only update is sent."""
    r = run_tool("replay", "--protocol", "1", str(path))
    assert r.returncode == 0, r.stderr
    stable, unstable = FrameChecker("agent", "v1", False), FrameChecker("agent", "v1", True)
    for frame in _lines(r.stdout):
        assert stable(frame) == unstable(frame) == "notification session/update"
        assert frame["params"]["update"]["sessionUpdate"] not in (
            "state_update", "terminal_update", "user_message", "agent_message",
            "agent_thought", "tool_call_update", "plan_update")


def test_v1_messages_are_chunks_with_their_ids():
    ups = _updates("ASR-725-v1-chunks-per-block", "expected.v1")
    assert [(u["sessionUpdate"], u["messageId"], u["content"].get("text")) for u in ups] == [
        ("user_message_chunk", "u1", "look at "), ("user_message_chunk", "u1", None),
        ("agent_message_chunk", "a1", "first"), ("agent_message_chunk", "a1", " second"),
        ("agent_thought_chunk", "a3#thought-0", "hmm"), ("agent_message_chunk", "a3", "done")]
    assert ups[2]["_meta"] == {"traceparent": "00-def-01"} and "_meta" not in ups[3]
    report = orjson.loads((REPO / "tests/fixtures/replay/ASR-725-v1-chunks-per-block/"
                           "expected.v1.report.json").read_bytes())
    # a2 has no block; a1's two texts are joined by a v1 client; a vendor block
    assert report["losses"]["empty_message"] == 1
    assert report["losses"]["text_blocks"] == 1
    assert report["losses"]["content_types"] == 1


def test_v1_diffs_hold_both_texts_from_a_v1_recording_only():
    (c1, c2) = _updates("ASR-729-v1-diffs-whole-texts", "expected.v1")
    assert c1["content"] == [{"type": "diff", "path": "/ws/app/a.py",
                              "oldText": "one\ntwo\n", "newText": "one\nTWO\nthree"}]
    assert c2["content"] == [{"type": "diff", "path": "/ws/app/b.py", "newText": "new\n"}]
    # a v2 recording's patch holds hunks: no v1 diff is made of it, and it is counted
    ups = _updates("ASR-729-diffs-from-roots", "expected.v1")
    assert not [c for u in ups for c in u.get("content", ()) if c["type"] == "diff"]
    report = orjson.loads((REPO / "tests/fixtures/replay/ASR-729-diffs-from-roots/"
                           "expected.v1.report.json").read_bytes())
    assert report["losses"]["diff_text"] == 2 and report["losses"]["diff"] == 1


def test_v1_tool_statuses_and_kinds():
    calls = {u["toolCallId"]: u for u in _updates("ASR-728-tool-status-mapping", "expected.v1")}
    # completed; failed, denied -> failed; cancelled, interrupted -> failed (v1 has no
    # cancelled); unknown and a vendor value: no status (v1's statuses are closed)
    assert [calls[f"c{i}"].get("status") for i in range(7)] == [
        "completed", "failed", "failed", "failed", "failed", None, None]
    assert all(u["sessionUpdate"] == "tool_call" and u["title"] for u in calls.values())
    assert "status" not in calls["c9"]  # dangling
    assert calls["c10"]["content"] == []  # its terminal is the recorded client's
    report = orjson.loads((REPO / "tests/fixtures/replay/ASR-728-tool-status-mapping/"
                           "expected.v1.report.json").read_bytes())
    assert report["losses"]["tool_status"] == 4
    assert report["losses"]["terminal"] == 1


def _updates(name: str, stem: str = "expected") -> list[dict]:
    data = (REPO / "tests/fixtures/replay" / name / f"{stem}.acp.jsonl").read_bytes()
    return [f["params"]["update"] for f in _lines(data)]


def test_asr_728_status_mapping_and_dangling_call():
    by_id = {u["toolCallId"]: u for u in _updates("ASR-728-tool-status-mapping")
             if u["sessionUpdate"] == "tool_call_update"}
    assert [by_id[f"c{i}"]["status"] for i in range(7)] == [
        "completed", "failed", "failed", "cancelled", "cancelled", "other", "_vendor_status"]
    assert "status" not in by_id["c9"]  # dangling: no terminal status
    assert by_id["c9"]["locations"] == [{"path": "/ws/app/x", "line": 3}]


def test_asr_727_thoughts_before_the_message():
    ups = _updates("ASR-727-reasoning-and-refusal")
    ids = [(u["sessionUpdate"], u.get("messageId")) for u in ups]
    assert ids[:6] == [("user_message", "u1"), ("agent_thought", "th1"),
                       ("agent_thought", "a1#thought-0"), ("agent_thought", "a1#thought-1"),
                       ("agent_message", "a1"), ("agent_message", "a2")]
    assert ups[3]["content"] == [{"type": "text", "text": "s1\n\ns2"}]
    assert ups[5]["content"] == [{"type": "text", "text": "I cannot do that"}]


def test_asr_729_redacted_root_omits_the_diff_and_says_so():
    ups = _updates("ASR-729-diffs-from-roots")
    c1 = ups[0]
    diffs = [c for c in c1["content"] if c["type"] == "diff"]
    assert len(diffs) == 1  # the change under the redacted root1 is omitted
    assert diffs[0]["changes"][1] == {"operation": "move", "path": "/ws/app/c.py",
                                      "oldPath": "/ws/app/b.py"}
    report = orjson.loads((REPO / "tests/fixtures/replay/ASR-729-diffs-from-roots/"
                           "expected.report.json").read_bytes())
    assert report["losses"]["diff"] == 1


def test_asr_730_731_nothing_asked_again_everything_reported():
    kinds = [u["sessionUpdate"] for u in _updates("ASR-730-731-not-replayed-reported")]
    assert kinds == ["user_message", "terminal_update", "compaction_update",
                     "compaction_update", "state_update"]
    report = orjson.loads((REPO / "tests/fixtures/replay/ASR-730-731-not-replayed-reported/"
                           "expected.report.json").read_bytes())
    for cat in ("inference", "vcs", "config_change", "permission", "input_request", "hook",
                "lineage", "capture", "timestamps", "notice", "inter_session", "subagent",
                "audit"):
        assert report["losses"].get(cat, 0) >= 1, cat


def test_asr_709_a_vendor_state_replays_as_it_is():
    """The latest state `_acme_suspended` is the current state_update, with its _meta;
    it is not counted lost (the idle before it and `ended` after it are history)."""
    r = run_tool("replay", str(REPO / "tests/fixtures/replay/ASR-709-vendor-state-as-it-is"
                               / "stream.asr.jsonl"))
    assert r.returncode == 0, r.stderr
    ups = [f["params"]["update"] for f in _lines(r.stdout)]
    assert ups[-1] == {"sessionUpdate": "state_update", "state": "_acme_suspended",
                       "_meta": {"_acme": {"until": "tomorrow"}}}
    assert [u["sessionUpdate"] for u in ups].count("state_update") == 1
    report = orjson.loads(r.stderr.splitlines()[-1])
    assert report["losses"]["state_history"] == 3  # running, idle, ended


def test_session_id_replays_under_another_id():
    path = REPLAY_FIXTURES[0] / "stream.asr.jsonl"
    r = run_tool("replay", str(path), "--session-id", "other-7")
    assert r.returncode == 0, r.stderr
    frames = _lines(r.stdout)
    assert {f["params"]["sessionId"] for f in frames} == {"other-7"}
    assert orjson.loads(r.stderr.splitlines()[-1])["replayedAs"] == "other-7"


def test_wire_resends_the_captured_frames_byte_for_byte():
    """ASR-733: with the capture, the agent's session/update frames exactly as sent."""
    fx = REPO / "tests/fixtures/asr/ASR-704-chunks-upserts-reset"
    r = run_tool("replay", str(fx / "expected.asr.jsonl"), "--wire", str(fx / "wire.jsonl"))
    assert r.returncode == 0, r.stderr
    sent = []
    for line in (fx / "wire.jsonl").read_bytes().splitlines()[1:]:
        rec = orjson.loads(line)
        msg = orjson.loads(rec["raw"])
        if rec["dir"] == "a2c" and msg.get("method") == "session/update":
            sent.append(rec["raw"].encode())
    assert sent and r.stdout == b"".join(s + b"\n" for s in sent)


def test_wire_without_capture_is_a_clear_error(tmp_path: Path):
    fx = REPLAY_FIXTURES[0]
    r = run_tool("replay", str(fx / "stream.asr.jsonl"), "--wire", str(tmp_path / "w.jsonl"))
    assert r.returncode == 2
    assert b"keeps no wire capture" in r.stderr and r.stdout == b""


def test_wire_log_that_is_not_the_capture(tmp_path: Path):
    fx = REPO / "tests/fixtures/asr/ASR-704-chunks-upserts-reset"
    other = REPO / "tests/fixtures/asr/ASR-713-prompt-message/wire.jsonl"
    r = run_tool("replay", str(fx / "expected.asr.jsonl"), "--wire", str(other))
    assert r.returncode == 2 and b"not the capture" in r.stderr, r.stderr


def _torn(src: Path, tmp_path: Path) -> tuple[Path, Path]:
    """``src`` with its last line cut in half and no LF (a crash mid-write), and ``src``
    without that line (what was read before it)."""
    lines = src.read_bytes().splitlines(keepends=True)
    assert len(lines) > 2
    torn, cut = tmp_path / "torn.asr.jsonl", tmp_path / "cut.asr.jsonl"
    torn.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    cut.write_bytes(b"".join(lines[:-1]))
    return torn, cut


def test_bad_line_is_reported_and_skipped_nothing_else_lost(tmp_path: Path):
    """A line that is not JSON mid-stream: reported with file:line and the parser's
    reason, skipped; every other record is replayed (docs/acp-replay.md, bad input)."""
    src = REPLAY_FIXTURES[0] / "stream.asr.jsonl"
    lines = src.read_bytes().splitlines(keepends=True)
    bad = tmp_path / "bad.asr.jsonl"
    bad.write_bytes(b"".join([*lines[:2], b"{oops\n", b"[1]\n", *lines[2:]]))
    r = run_tool("replay", str(bad))
    assert r.returncode == 0, r.stderr
    assert r.stdout == run_tool("replay", str(src)).stdout != b""
    assert f"{bad}:3: not JSON, skipped: ".encode() in r.stderr
    assert f"{bad}:4: not a JSON object, skipped".encode() in r.stderr
    assert b"Traceback" not in r.stderr


def test_torn_last_line_replays_what_was_read(tmp_path: Path):
    src = REPLAY_FIXTURES[0] / "stream.asr.jsonl"
    torn, cut = _torn(src, tmp_path)
    n = len(src.read_bytes().splitlines())
    r = run_tool("replay", str(torn))
    assert r.returncode == 0, r.stderr
    assert r.stdout == run_tool("replay", str(cut)).stdout != b""
    assert f"{torn}:{n}: torn last line (no LF), skipped: unexpected end of".encode() \
        in r.stderr
    # --compare: the damaged stream is compared as read, against its intact prefix
    r = run_tool("replay", "--compare", str(torn), str(cut))
    assert r.returncode == 0, r.stderr
    assert f"{torn}:{n}: torn last line (no LF)".encode() in r.stderr
    assert r.stdout == b"" and b'"equivalent":true' in r.stderr
    r = run_tool("replay", "--compare", str(cut), str(torn))
    assert r.returncode == 0 and b"torn last line" in r.stderr, r.stderr
    # --serve: the session is served as read
    init = orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": 2, "info": {"name": "t", "version": "1"}, "capabilities": {}}})
    ls = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}})
    r = run_tool("replay", "--serve", str(torn), input=init + b"\n" + ls + b"\n", timeout=60)
    assert r.returncode == 0, r.stderr
    assert b"torn last line (no LF)" in r.stderr
    sessions = orjson.loads(r.stdout.splitlines()[1])["result"]["sessions"]
    assert [s["sessionId"] for s in sessions] == [orjson.loads(src.read_bytes().splitlines()[0])
                                                  ["sessionId"]]


def test_compare_names_the_stream_kind_it_got(tmp_path: Path):
    src = REPLAY_FIXTURES[0] / "stream.asr.jsonl"
    frames = tmp_path / "f.jsonl"
    frames.write_bytes(b'{"format":"acp-pipes/frames","version":1,"source":null}\n')
    r = run_tool("replay", "--compare", str(frames), str(src))
    assert r.returncode == 2 and r.stdout == b""
    assert f"{frames}:1: expected an ASR stream, got frames".encode() in r.stderr, r.stderr


def test_library_replay_is_pure_and_counts_updates():
    path = REPLAY_FIXTURES[0] / "stream.asr.jsonl"
    (stream,) = read_streams(path.read_bytes().splitlines(), str(path))
    before = orjson.dumps(stream.records)
    rep = Replay(stream)
    first = list(rep.notifications())
    assert list(Replay(stream).notifications()) == first
    assert orjson.dumps(stream.records) == before  # the stream is not modified
    assert rep.report()["updates"] == len(first)


def test_indexed_loading_replays_the_same_as_keeping_every_record():
    """Plain replay indexes records as they are parsed and keeps only what it sends; the
    notifications and the report (record count, losses) must not change for it."""
    data = b"".join(p.read_bytes() for p in ALL_STREAMS)  # many streams in one input
    kept = list(read_streams(data.splitlines(), "all"))
    indexed = list(read_indexed(data.splitlines(), "all"))
    assert [s.session_id for s in indexed] == [s.session_id for s in kept]
    assert len(kept) > len(ALL_STREAMS) - 1
    for a, b in zip(kept, indexed, strict=True):
        assert b.records == [] and b.line == a.line
        ra, rb = Replay(a, "renamed"), Replay(b, "renamed")
        assert list(rb.notifications()) == list(ra.notifications())
        assert rb.report() == ra.report()
        assert rb.report()["records"] == len(a.records)


def test_iter_streams_skips_records_left_unread():
    lines = [b'{"type":"header","asr":"1.0","sessionId":"a"}', b'{"type":"message"}', b"",
             b'{"type":"header","asr":"1.0","sessionId":"b"}', b'{"type":"state"}']
    seen = [(h["sessionId"], n) for h, n, _recs in iter_streams(lines, "x")]
    assert seen == [("a", 1), ("b", 4)]
    got = [(h["sessionId"], list(recs)) for h, _n, recs in iter_streams(lines, "x")]
    assert got == [("a", [{"type": "message"}]), ("b", [{"type": "state"}])]


def test_truncated_gz_replays_what_was_read_then_exits_2(cut_asr_stream):
    """A .gz cut short is a recording that stopped there, as for acp-fold and acp-asr:
    the updates of the records before the cut are written (the same bytes as replaying
    just those records), then ``FILE:LINE: cannot read: ...`` and exit 2."""
    cut, prefix = cut_asr_stream["cut"], cut_asr_stream["prefix"]
    expected = run_tool("replay", str(prefix))
    assert expected.returncode == 0, expected.stderr
    assert expected.stdout.count(b"\n") > 10
    r = run_tool("replay", str(cut))
    assert r.returncode == 2, r.stderr
    assert r.stdout == expected.stdout
    where = f"{cut}:{cut_asr_stream['lines'] + 1}: cannot read: ".encode()
    assert where in r.stderr, r.stderr
    assert r.stderr.rstrip().splitlines()[-1].startswith(b"acp-replay: " + where)
    # ASR-731: the loss report of what was replayed still comes, before the error
    assert b'"event":"replay_losses"' in r.stderr
    # -o FILE: a failed run leaves what was there (the stream contract); stdout has it all
    out = cut.parent / "out.acp.jsonl"
    out.write_bytes(b"before\n")
    r = run_tool("replay", str(cut), "-o", str(out))
    assert r.returncode == 2 and out.read_bytes() == b"before\n"


def test_truncated_gz_compare_and_serve_use_what_was_read(cut_asr_stream):
    cut, prefix, whole = cut_asr_stream["cut"], cut_asr_stream["prefix"], cut_asr_stream["whole"]
    expected = run_tool("replay", "--compare", str(prefix), str(whole))
    assert expected.returncode == 1 and expected.stdout, expected.stderr
    r = run_tool("replay", "--compare", str(cut), str(whole))
    assert r.returncode == 2, r.stderr
    assert r.stdout == expected.stdout  # the differences are written first
    assert f"{cut}:{cut_asr_stream['lines'] + 1}: cannot read: ".encode() in r.stderr
    assert b'"event":"compare"' in r.stderr
    assert run_tool("replay", "--serve", str(whole), input=b"").returncode == 0
    r = run_tool("replay", "--serve", str(cut), input=b"")
    assert r.returncode == 2, r.stderr
    assert f"{cut}:{cut_asr_stream['lines'] + 1}: cannot read: ".encode() in r.stderr


def test_wire_skips_a_reference_whose_connection_is_no_number(tmp_path: Path):
    """A native.ref naming its connection by something other than a number points
    nowhere: its frames are not resent; never an internal error."""
    fx = REPO / "tests/fixtures/asr/ASR-704-chunks-upserts-reset"
    lines = (fx / "expected.asr.jsonl").read_bytes().splitlines()
    recs = [orjson.loads(x) for x in lines]
    bent = next(r for r in recs[1:] if (r.get("native") or {}).get("ref"))
    bent["native"]["ref"]["connection"] = [0]
    stream = tmp_path / "s.asr.jsonl"
    stream.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    whole = run_tool("replay", str(fx / "expected.asr.jsonl"), "--wire", str(fx / "wire.jsonl"))
    r = run_tool("replay", str(stream), "--wire", str(fx / "wire.jsonl"))
    assert r.returncode == 0, r.stderr
    assert b"internal error" not in r.stderr
    assert r.stdout and len(r.stdout.splitlines()) < len(whole.stdout.splitlines())


@pytest.mark.parametrize("bent", [{"root": "root0"}, {"root": "root0", "path": 5},
                                   {"root": None, "path": ["f.txt"]}],
                         ids=["no-path", "number-path", "array-path"])
def test_a_path_ref_without_a_string_path_is_a_lost_location(tmp_path: Path, bent):
    """ASR-729/711: a PathRef whose ``path`` is missing or not a string names no path.
    The location is left out and counted lost, as one under a redacted root is; the rest
    of the session replays (it was an internal error: str + None), and --serve and
    --compare read it the same way."""
    fx = REPO / "tests/fixtures/asr/ASR-704-entity-across-connections/expected.asr.jsonl"
    good = b'{"path":{"root":"root0","path":"f.txt"}}'
    assert fx.read_bytes().count(good) == 1
    stream = tmp_path / "s.asr.jsonl"
    stream.write_bytes(fx.read_bytes().replace(good, b'{"path":' + orjson.dumps(bent) + b"}"))
    whole = run_tool("replay", str(fx))
    r = run_tool("replay", str(stream))
    assert r.returncode == 0, r.stderr
    assert b"internal error" not in r.stderr
    before, after = whole.stdout.splitlines(), r.stdout.splitlines()
    assert len(before) == len(after)
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [(changed[0][0], changed[0][0].replace(b'[{"path":"/ws/app/f.txt"}]',
                                                             b"[]"))]
    losses = orjson.loads(r.stderr.splitlines()[-1])["losses"]
    assert losses["location"] == 1 and "location" not in orjson.loads(
        whole.stderr.splitlines()[-1])["losses"]
    cmp = run_tool("replay", "--compare", str(stream), str(fx))
    # equivalent (exit 0): a tool call's locations are no part of ASR-732's context view
    assert cmp.returncode == 0 and b"internal error" not in cmp.stderr, cmp.stderr


def test_wire_into_head_ends_quietly(tmp_path: Path):
    """`acp-replay S --wire W | head -2`: the closed pipe ends the replay quietly, exit 0
    (it said "cannot read the wire log: Broken pipe", exit 2)."""
    import subprocess

    from acp_pipes.echo.client import client_session
    from tests.conftest import record_lockstep, tool_argv, tool_env

    wire = tmp_path / "w.jsonl"
    record_lockstep(list(client_session(150)), wire, tmp=tmp_path)
    asr = run_tool("asr", str(wire))
    assert asr.returncode == 0, asr.stderr
    stream = tmp_path / "s.asr.jsonl"
    stream.write_bytes(asr.stdout)
    whole = run_tool("replay", str(stream), "--wire", str(wire))
    assert len(whole.stdout) > 1 << 17  # far more than a pipe holds
    p = subprocess.Popen(tool_argv("replay", str(stream), "--wire", str(wire)),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=tool_env())
    assert p.stdout is not None and p.stderr is not None
    first = [p.stdout.readline(), p.stdout.readline()]
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=60) == 0, err
    assert err == b"" and first == whole.stdout.splitlines(keepends=True)[:2]


# -- ASR-724: message types have their own ID spaces -------------------------------------


def _messages(ups: list[dict]) -> list[tuple]:
    """(kind, messageId, texts) of each message update (a v1 chunk holds one block)."""
    return [(u["sessionUpdate"], u["messageId"],
             [c.get("text") for c in (u["content"] if isinstance(u["content"], list)
                                      else [u["content"]])])
            for u in ups if "messageId" in u]


def test_asr_724_message_types_have_their_own_id_spaces():
    """ACP's MessageId: "messages of different types may share an ID and remain distinct
    messages". A prompt, a thought and an agent message all m1 are three, each with its
    own latest revision; a later prompt with an earlier agent message's ID (a1) is a new
    message and replaces none."""
    assert _messages(_updates("ASR-724-732-message-id-spaces")) == [
        ("user_message", "m1", ["look"]), ("agent_thought", "m1", ["looking"]),
        ("agent_message", "m1", ["seen it"]), ("agent_message", "a1", ["anything else?"]),
        ("user_message", "a1", ["yes"]), ("agent_message", "a2", ["done"]),
        ("agent_message", "t9", ["final"])]  # superseded: its type is its revision's
    assert _messages(_updates("ASR-724-732-message-id-spaces", "expected.v1")) == [
        ("user_message_chunk", "m1", ["look"]), ("agent_thought_chunk", "m1", ["looking"]),
        ("agent_message_chunk", "m1", ["seen it"]),
        ("agent_message_chunk", "a1", ["anything else?"]),
        ("user_message_chunk", "a1", ["yes"]), ("agent_message_chunk", "a2", ["done"]),
        ("agent_message_chunk", "t9", ["final"])]


def _wire_log(path: Path, frames: list[tuple[str, dict]]) -> Path:
    """A wire log as acp-tee writes it: the header, then one record per frame."""
    lines = [orjson.dumps({"format": "acp-pipes/wire", "version": 1, "recorder": "test",
                           "argv": ["agent"], "started": "2025-11-24T16:00:00.000000Z",
                           "clock": "nanos", "env": {}})]
    for n, (d, msg) in enumerate(frames):
        lines.append(orjson.dumps({"seq": n, "t": 1_764_000_000_000_000_000 + n * 1_000_000,
                                   "dir": d, "raw": orjson.dumps({"jsonrpc": "2.0", **msg})
                                   .decode()}))
    path.write_bytes(b"".join(x + b"\n" for x in lines))
    return path


def _shared_ids_session() -> list[tuple[str, dict]]:
    """A v2 session whose prompt, thought and agent message are all m1, whose second
    prompt is answered with the ID of the first turn's agent message a1, and whose plan
    carries its own ``_meta``."""
    sid = "s1"
    out: list[tuple[str, dict]] = []

    def upd(u):
        out.append(("a2c", {"method": "session/update",
                            "params": {"sessionId": sid, "update": u}}))

    out += [("c2a", {"id": 0, "method": "initialize", "params": {
                "protocolVersion": 2, "info": {"name": "c", "version": "1"},
                "capabilities": {}}}),
            ("a2c", {"id": 0, "result": {"protocolVersion": 2, "info": {
                "name": "A", "version": "1"}, "capabilities": {"session": {}}}}),
            ("c2a", {"id": 1, "method": "session/new", "params": {"cwd": "/ws",
                                                                  "mcpServers": []}}),
            ("a2c", {"id": 1, "result": {"sessionId": sid}})]
    for n, (prompt, mid) in enumerate([("look", "m1"), ("yes", "a1")], 2):
        out.append(("c2a", {"id": n, "method": "session/prompt", "params": {
            "sessionId": sid, "prompt": [{"type": "text", "text": prompt}]}}))
        out.append(("a2c", {"id": n, "result": {"messageId": mid}}))
        upd({"sessionUpdate": "user_message", "messageId": mid,
             "content": [{"type": "text", "text": prompt}]})
        upd({"sessionUpdate": "state_update", "state": "running"})
        if n == 2:
            upd({"sessionUpdate": "agent_thought_chunk", "messageId": "m1",
                 "content": {"type": "text", "text": "looking"}})
            upd({"sessionUpdate": "agent_message_chunk", "messageId": "m1",
                 "content": {"type": "text", "text": "seen"}})
            upd({"sessionUpdate": "plan_update", "plan": {
                "type": "items", "planId": "p1", "_meta": {"_acme": {"board": 7}},
                "entries": [{"content": "a", "priority": "high", "status": "pending"}]}})
            upd({"sessionUpdate": "agent_message", "messageId": "a1",
                 "content": [{"type": "text", "text": "anything else?"}]})
        else:
            upd({"sessionUpdate": "agent_message", "messageId": "a2",
                 "content": [{"type": "text", "text": "done"}]})
        upd({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"})
    return out


def test_recorded_messages_sharing_ids_all_replay(tmp_path: Path):
    """The same through the real acp-asr and acp-replay, from a wire log: every message
    is replayed, none replaces another; the plan's _meta is on the plan (ACP v2's
    PlanItems._meta), as the agent sent it, not on the update."""
    wire = _wire_log(tmp_path / "w.jsonl", _shared_ids_session())
    asr = run_tool("asr", str(wire))
    assert asr.returncode == 0, asr.stderr
    stream = tmp_path / "s.asr.jsonl"
    stream.write_bytes(asr.stdout)
    r = run_tool("replay", str(stream))
    assert r.returncode == 0, r.stderr
    ups = [f["params"]["update"] for f in _lines(r.stdout)]
    assert _messages(ups) == [
        ("user_message", "m1", ["look"]), ("agent_thought", "m1", ["looking"]),
        ("agent_message", "m1", ["seen"]), ("agent_message", "a1", ["anything else?"]),
        ("user_message", "a1", ["yes"]), ("agent_message", "a2", ["done"])]
    (plan,) = [u for u in ups if u["sessionUpdate"] == "plan_update"]
    assert plan["plan"]["_meta"] == {"_acme": {"board": 7}} and "_meta" not in plan
    check = FrameChecker("agent")
    assert all(check(f) == "notification session/update" for f in _lines(r.stdout))
    r = run_tool("replay", "--protocol", "1", str(stream))
    assert r.returncode == 0, r.stderr
    ups = [f["params"]["update"] for f in _lines(r.stdout)]
    assert [(u["sessionUpdate"], u["messageId"]) for u in ups if "messageId" in u] == [
        ("user_message_chunk", "m1"), ("agent_thought_chunk", "m1"),
        ("agent_message_chunk", "m1"), ("agent_message_chunk", "a1"),
        ("user_message_chunk", "a1"), ("agent_message_chunk", "a2")]
    (plan,) = [u for u in ups if u["sessionUpdate"] == "plan"]
    assert plan["_meta"] == {"_acme": {"board": 7}}  # v1's plan is the update itself


def test_asr_708_plan_meta_is_on_the_plan():
    (plan,) = [u for u in _updates("ASR-708-plan-meta-on-the-plan")
               if u["sessionUpdate"] == "plan_update"]
    assert "_meta" not in plan
    assert plan["plan"]["_meta"] == {"_acme": {"board": 7}}
    assert plan["plan"]["entries"][0]["_meta"] == {"_acme": {"entry": 1}}
    (v1,) = [u for u in _updates("ASR-708-plan-meta-on-the-plan", "expected.v1")
             if u["sessionUpdate"] == "plan"]
    assert v1["_meta"] == {"_acme": {"board": 7}}


# -- ASR-727: reasoning with opaque content only -----------------------------------------


def test_asr_727_opaque_only_reasoning_sends_no_thought():
    """A reasoning part with neither text nor summary (encrypted content, a signature)
    has nothing a client can show: no agent_thought is sent for it, never an empty one,
    and the report counts it (``opaque_thought``); a thought's other parts are sent, and
    ``<n>`` still counts every reasoning part of the message (ASR-727)."""
    ups = _updates("ASR-727-opaque-only-reasoning")
    assert _messages(ups) == [
        ("user_message", "u1", ["think hard"]), ("agent_thought", "th2", ["visible"]),
        ("agent_thought", "a1#thought-1", ["brief"]), ("agent_message", "a1", ["answer"])]
    for stem in ("expected", "expected.v1"):
        report = orjson.loads((REPO / "tests/fixtures/replay/ASR-727-opaque-only-reasoning"
                               / f"{stem}.report.json").read_bytes())
        assert report["losses"]["opaque_thought"] == 2  # th1, a1's first part
        assert report["losses"]["reasoning_opaque"] == 3
    assert [u["messageId"] for u in _updates("ASR-727-opaque-only-reasoning", "expected.v1")
            if u["sessionUpdate"] == "agent_thought_chunk"] == ["th2", "a1#thought-1"]


@pytest.mark.parametrize("path", ALL_STREAMS, ids=lambda p: p.parent.name)
def test_no_empty_thought_is_sent(path: Path):
    """No agent_thought is sent without content or with an empty text (what an opaque
    reasoning part became)."""
    r = run_tool("replay", str(path))
    assert r.returncode == 0, r.stderr
    for f in _lines(r.stdout):
        u = f["params"]["update"]
        if u["sessionUpdate"] == "agent_thought":
            assert u["content"] and all(c["text"] for c in u["content"]), u

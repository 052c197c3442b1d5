"""acp-asr's choices where real agents break ACP or leave things out: paths that are not
absolute (ASR-711), a recording with no session (ASR-701), labels of names with no
a-z0-9 (ASR-703), ``author: "human"`` (ASR-713). Through the real executables."""

from __future__ import annotations

import sys

import orjson

from tests.conftest import REPO, run_tool

FIXTURES = REPO / "tests" / "fixtures" / "asr"
sys.path.insert(0, str(FIXTURES))
from make_fixtures import Wire  # noqa: E402

RELATIVE = FIXTURES / "ASR-711-relative-paths" / "expected.asr.jsonl"


def _lines(data: bytes) -> list[dict]:
    return [orjson.loads(x) for x in data.splitlines()]


def _write(path, recs) -> str:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return str(path)


def test_asr_711_relative_path_kept_as_sent_and_marked():
    recs = _lines(run_tool("asr", str(RELATIVE.with_name("wire.jsonl"))).stdout)
    head, call, change, term = recs[0], recs[1], recs[3], recs[4]
    assert call["locations"][0]["path"] == {"root": None, "path": "out.txt", "relative": True}
    assert change["changes"][0]["path"] == {"root": None, "path": "out.txt", "relative": True}
    assert term["cwd"] == {"root": None, "path": "build", "relative": True}
    assert "_org.agent-session.acp/relative_paths" in head["producer"]["lossy"]
    # an absolute path outside every root stays unmarked; a directory keeps its slash
    assert call["locations"][3]["path"] == {"root": None, "path": "/tmp/"}
    assert call["locations"][1]["path"] == {"root": "root0", "path": "src/"}


def test_asr_711_validate_notes_the_agents_broken_path_and_passes():
    got = run_tool("asr", "--validate", str(RELATIVE))
    assert got.returncode == 0, got.stderr.decode()
    err = got.stderr.decode().splitlines()
    assert len(err) == 4, err
    assert err[0].startswith(f"{RELATIVE}:2: /locations/0/path/path: note: 'out.txt' is not "
                             "absolute: the agent broke ACP's schema")


def test_asr_711_older_unmarked_relative_path_is_noted_still_valid(tmp_path):
    recs = _lines(RELATIVE.read_bytes())
    recs[0]["producer"]["lossy"].remove("_org.agent-session.acp/relative_paths")
    for r in recs:  # as acp-asr wrote it before: root null, no mark, no loss
        for loc in r.get("locations", ()):
            loc["path"].pop("relative", None)
        for ch in r.get("changes", ()):
            ch["path"].pop("relative", None)
            ch["oldPath"].pop("relative", None)
        if isinstance(r.get("cwd"), dict):
            r["cwd"].pop("relative", None)
    got = run_tool("asr", "--validate", _write(tmp_path / "old.asr.jsonl", recs))
    assert got.returncode == 0, got.stderr.decode()
    assert got.stderr.decode().count("an older acp-asr stored it unmarked") == 4


def test_asr_722_marked_relative_path_needs_its_loss(tmp_path):
    recs = _lines(RELATIVE.read_bytes())
    recs[0]["producer"]["lossy"].remove("_org.agent-session.acp/relative_paths")
    got = run_tool("asr", "--validate", _write(tmp_path / "s.asr.jsonl", recs))
    assert got.returncode == 1
    assert "required loss '_org.agent-session.acp/relative_paths' is not declared" in (
        got.stderr.decode())


def test_asr_711_relative_mark_with_a_root_or_absolute_path_is_invalid(tmp_path):
    for ref in ({"root": "root0", "path": "out.txt", "relative": True},
                {"root": None, "path": "/out.txt", "relative": True},
                {"root": None, "path": "out.txt", "relative": False}):
        recs = _lines(RELATIVE.read_bytes())
        recs[1]["locations"][0]["path"] = ref
        got = run_tool("asr", "--validate", _write(tmp_path / "s.asr.jsonl", recs))
        assert got.returncode == 1, (ref, got.stderr.decode())
        assert f"{tmp_path / 's.asr.jsonl'}:2: /locations/0/path" in got.stderr.decode()


def test_asr_711_validate_with_stderr_closed_after_a_note_still_judges_the_rest(tmp_path):
    recs = _lines(RELATIVE.read_bytes())
    recs.append({**recs[-1]})  # a duplicate id and seq after the notes: invalid
    path = _write(tmp_path / "s.asr.jsonl", recs)
    import subprocess
    proc = subprocess.run(
        f"set -o pipefail; {sys.executable} -m acp_pipes.cli.asr --validate {path} 2>&1 "
        "| head -1",
        shell=True, capture_output=True, env={"PYTHONPATH": str(REPO)},
        executable="/bin/bash")
    assert proc.stdout.count(b"\n") == 1 and b"note:" in proc.stdout
    assert proc.returncode == 1  # the duplicate, after the pipe closed, still counts
    got = run_tool("asr", "--validate", path)
    assert got.returncode == 1 and b"duplicate id" in got.stderr


def test_asr_703_name_without_label_is_distinct_from_unknown():
    wire = FIXTURES / "ASR-703-agent-name-without-label" / "wire.jsonl"
    names = [r["agent"]["name"] for r in _lines(run_tool("asr", str(wire)).stdout)]
    assert names == ["org.agent-session.acp.x--" + "🤖 !!".encode().hex(),
                     "org.agent-session.acp.unknown", "org.agent-session.acp.x--unnamed"]


def test_asr_713_author_human_is_valid_another_author_is_not(tmp_path):
    wire = FIXTURES / "ASR-713-prompt-message" / "wire.jsonl"
    recs = _lines(run_tool("asr", str(wire)).stdout)
    prompt = next(r for r in recs if r.get("origin") == "prompt")
    prompt["author"] = "human"  # a recorder configured to know a person typed it
    got = run_tool("asr", "--validate", _write(tmp_path / "h.asr.jsonl", recs))
    assert got.returncode == 0, got.stderr.decode()
    prompt["author"] = "agent"  # a prompt the recorder says an agent wrote: not ACP's
    got = run_tool("asr", "--validate", _write(tmp_path / "a.asr.jsonl", recs))
    assert got.returncode == 1


def _refused(tmp_path) -> str:
    w = Wire().header().init()
    w.req(1, "session/new", {"cwd": "/ws", "mcpServers": []})
    w.err(1, -32000, "Authentication required")
    path = tmp_path / "wire.jsonl"
    path.write_bytes(w.bytes())
    return str(path)


def test_asr_701_refused_session_new_says_why_and_writes_nothing(tmp_path):
    wire = _refused(tmp_path)
    got = run_tool("asr", wire)
    assert got.returncode == 0 and got.stdout == b""
    assert got.stderr.decode() == (
        f"acp-asr: {wire}: the recording holds no session: the agent answered session/new "
        '(connection 0, frame 3) with error {"code":-32000,"message":"Authentication '
        'required"}; nothing written\n')
    out = tmp_path / "out"
    got = run_tool("asr", wire, "-o", str(out))
    assert got.returncode == 0 and list(out.iterdir()) == []
    assert b"Authentication required" in got.stderr


def test_asr_701_refusal_survives_acp_fold_pipe(tmp_path):
    folded = run_tool("fold", _refused(tmp_path)).stdout
    got = run_tool("asr", input=folded)
    assert got.returncode == 0 and got.stdout == b""
    assert b"holds no session" in got.stderr and b"Authentication required" in got.stderr


def test_asr_701_a_recording_with_a_session_says_nothing_of_it():
    wire = FIXTURES / "ASR-701-one-stream-per-session" / "wire.jsonl"
    got = run_tool("asr", str(wire))
    assert got.returncode == 0 and got.stderr == b""


def test_asr_711_replay_sends_paths_back_as_the_agent_sent_them():
    """A relative path goes back unresolved; a directory keeps its trailing slash."""
    got = run_tool("replay", str(RELATIVE))
    assert got.returncode == 0, got.stderr.decode()
    out = got.stdout
    assert (b'"locations":[{"path":"out.txt"},{"path":"/ws/a/src/"},{"path":"/ws/a/"},'
            b'{"path":"/tmp/"}]') in out
    assert b'"changes":[{"operation":"move","path":"out.txt","oldPath":"./old.txt"}]' in out
    assert b'"cwd":"build"' in out


WINDOWS = FIXTURES / "ASR-711-windows-and-unc-paths" / "expected.asr.jsonl"


def test_asr_711_windows_and_unc_paths_are_root_relative():
    """A Windows drive cwd and a UNC share are roots like a POSIX directory: matched
    segment by segment, at either slash, the drive letter and the server's name without
    case; a path of another drive, a sibling directory or another syntax is under none."""
    recs = _lines(run_tool("asr", str(WINDOWS.with_name("wire.jsonl"))).stdout)
    head, call, term = recs[0], recs[1], recs[3]
    assert [r["path"] for r in head["workspace"]["roots"]] == [
        "C:\\Users\\me\\proj", "\\\\server\\share\\lib"]
    assert [loc["path"] for loc in call["locations"]] == [
        {"root": "root0", "path": "src/a.rs"}, {"root": "root0", "path": "src/b.rs"},
        {"root": "root0", "path": "."}, {"root": "root0", "path": "docs/"},
        {"root": None, "path": "C:\\Users\\me\\project\\x.rs"},
        {"root": None, "path": "D:\\Users\\me\\proj\\a.rs"},
        {"root": "root1", "path": "x/y.py"},
        {"root": None, "path": "\\\\server\\share\\other\\z"},
        {"root": None, "path": "/Users/me/proj/src/a.rs"}]
    assert term["cwd"] == {"root": "root0", "path": "target"}
    # absolute paths: no relative mark, no loss, and --validate says nothing of them
    assert "_org.agent-session.acp/relative_paths" not in head["producer"]["lossy"]
    got = run_tool("asr", "--validate", str(WINDOWS))
    assert got.returncode == 0 and got.stderr == b"", got.stderr.decode()


def test_asr_711_replay_rebuilds_windows_paths_with_the_roots_separator():
    """acp-replay joins a root-relative path to its root with the root's own separator
    (ASR-729's absolute paths rebuilt from root paths)."""
    got = run_tool("replay", str(WINDOWS))
    assert got.returncode == 0, got.stderr.decode()
    locs = orjson.loads(got.stdout.splitlines()[0])["params"]["update"]["locations"]
    assert [loc["path"] for loc in locs] == [
        "C:\\Users\\me\\proj\\src\\a.rs", "C:\\Users\\me\\proj\\src\\b.rs",
        "C:\\Users\\me\\proj", "C:\\Users\\me\\proj\\docs\\",
        "C:\\Users\\me\\project\\x.rs", "D:\\Users\\me\\proj\\a.rs",
        "\\\\server\\share\\lib\\x\\y.py", "\\\\server\\share\\other\\z",
        "/Users/me/proj/src/a.rs"]


def test_asr_711_a_relative_mark_on_a_windows_absolute_path_is_invalid(tmp_path):
    """``relative: true`` is for paths that are not absolute, in any syntax ACP allows."""
    recs = _lines(WINDOWS.read_bytes())
    recs[1]["locations"][4]["path"]["relative"] = True
    got = run_tool("asr", "--validate", _write(tmp_path / "w.asr.jsonl", recs))
    assert got.returncode == 1
    assert "/locations/4/path/path" in got.stderr.decode()


def _snapshot_wire() -> bytes:
    """A v2 turn in which every kind of entity is open at a checkpoint."""
    w, s = Wire(), "s"
    w.header().init().new(1, s)
    w.req(2, "session/prompt", {"sessionId": s, "prompt": [{"type": "text", "text": "go"}]})
    w.resp(2, {"messageId": "u1"})
    w.text(s, "agent_message_chunk", "m1", "hi")
    w.text(s, "agent_thought_chunk", "m1", "hmm")
    w.upd(s, {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p1",
                                                       "entries": []}})
    w.upd(s, {"sessionUpdate": "terminal_update", "terminalId": "t1", "command": "make"})
    w.upd(s, {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "name": "x",
              "status": "in_progress"})
    w.upd(s, {"sessionUpdate": "compaction_update", "compactionId": "k1",
              "status": "in_progress"})
    w.areq(100, "session/request_permission", {"sessionId": s, "title": "ok?", "options": [
        {"optionId": "a", "name": "A", "kind": "allow_once"}]})
    w.areq(101, "elicitation/create", {"sessionId": s, "mode": "form", "message": "x",
                                       "requestedSchema": {"type": "object", "properties": {}}})
    w.state(s, "running")  # a checkpoint: every open entity is written as it stands
    w.resp(100, {"outcome": {"outcome": "selected", "optionId": "a"}}, d="c2a")
    w.resp(101, {"action": "decline"}, d="c2a")
    w.upd(s, {"sessionUpdate": "terminal_update", "terminalId": "t1",
              "exitStatus": {"exitCode": 0}})
    w.upd(s, {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"})
    w.upd(s, {"sessionUpdate": "compaction_update", "compactionId": "k1",
              "status": "completed"})
    w.state(s, "idle", stopReason="end_turn")
    return w.bytes()


def test_asr_705_every_snapshot_says_it_is_partial(tmp_path):
    """--snapshots: a snapshot of a type with a status says ``status: "partial"`` (a
    terminal's too, never ``running``); of a type without one, ``capture.record:
    partial`` (message, plan, tool call), as docs/asr.md says; each is superseded by the
    entity's final record, which says neither."""
    wire = tmp_path / "w.jsonl"
    wire.write_bytes(_snapshot_wire())
    got = run_tool("asr", "--snapshots", str(wire))
    assert got.returncode == 0, got.stderr.decode()
    head, *body = _lines(got.stdout)
    partial = {r["id"]: r for r in body if r["type"] != "state" and (
        r.get("status") == "partial" or (r.get("capture") or {}).get("record") == {
            "state": "partial"})}
    kinds = sorted(r["type"] + ("/reasoning" if r["type"] == "message" and
                                r["content"][0]["type"] == "reasoning" else "")
                   for r in partial.values())
    assert kinds == ["compaction", "input_request", "message", "message",
                     "message/reasoning", "permission", "plan", "terminal", "tool_call"]
    by_status = {r["type"]: r["status"] for r in partial.values() if "status" in r}
    assert by_status == {"compaction": "partial", "input_request": "partial",
                         "permission": "partial", "terminal": "partial"}
    superseded = {r["supersedes"]: r for r in body if "supersedes" in r}
    assert set(partial) == set(superseded)
    for final in superseded.values():
        assert final.get("status") != "partial", final
        assert "record" not in (final.get("capture") or {}), final
    got = run_tool("asr", "--validate", _write(tmp_path / "s.asr.jsonl", [head, *body]))
    assert got.returncode == 0, got.stderr.decode()

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

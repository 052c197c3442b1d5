"""acp-align through the real executable: echo-agent recordings made with acp-tee."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from acp_pipes.echo.client import client_session
from acp_pipes.errors import InputError
from tests.conftest import record_lockstep, run_tool, tool_argv, tool_env


def record(tmp: Path, name: str, client: list[bytes]) -> Path:
    """The echo agent under acp-tee, driven turn by turn; returns the wire log."""
    wire = tmp / f"{name}.wire.jsonl"
    record_lockstep(client, wire)
    return wire


def changed(client: list[bytes], old: bytes, new: bytes) -> list[bytes]:
    out = [line.replace(old, new) for line in client]
    assert out != client
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("align")
    base = list(client_session(3))
    shifted = []
    for line in base:  # the same session with other JSON-RPC ids
        msg = orjson.loads(line)
        msg["id"] += 100
        shifted.append(orjson.dumps(msg))
    return {
        "a": record(tmp, "a", base),
        "a2": record(tmp, "a2", base),
        "b": record(tmp, "b", changed(base, b'"hello 2"', b'"bye 2"')),
        "c": record(tmp, "c", changed(base, b'"hello 3"', b'"ciao 3"')),
        "ids": record(tmp, "ids", shifted),
        "tmp": tmp,
    }


def align(*args: str, **kw) -> subprocess.CompletedProcess:
    return run_tool("align", *map(str, args), **kw)


def test_identical_recordings_exit_0(runs):
    p = align(runs["a"], runs["a2"])
    assert p.returncode == 0, p.stderr
    ops = [orjson.loads(line) for line in p.stdout.splitlines()]
    assert ops and all(op["op"] == "equal" for op in ops)
    assert [op["a"] for op in ops] == [op["b"] for op in ops] == list(range(len(ops)))
    p = align(runs["a"], runs["a2"], "--format", "diff")
    assert (p.returncode, p.stdout) == (0, b"")


def test_changed_prompt_first_divergence(runs):
    p = align(runs["a"], runs["b"], "--format", "json")
    assert p.returncode == 1, p.stderr
    s = orjson.loads(p.stdout)
    first = s["first_divergence"]
    # initialize, session/new, prompt 1 are the first three client frames
    assert first["step_a"]["method"] == first["step_b"]["method"] == "session/prompt"
    assert first["step_a"]["summary"] == 'session/prompt "hello 2"'
    assert first["step_b"]["summary"] == 'session/prompt "bye 2"'
    assert first["a"] == first["b"]
    # one changed step, not a removed and an added one: the pointer and both values
    assert first["op"] == "changed"
    assert first["diff"] == [{"op": "replace", "path": "/params/prompt/0/text",
                              "a": "hello 2", "b": "bye 2"}]
    c = s["counts"]
    assert (c["changed"], c["only-a"], c["only-b"]) == (11, 0, 0)  # the prompt and its turn
    assert s["lcs"] == c["equal"]
    assert s["distance"] == c["only-a"] + c["only-b"] + 2 * c["changed"]
    assert s["approximate"] is False
    assert len(s["changed"]) == c["changed"]
    # the model's kind of difference: the client sent something else
    assert first["difference"] == "client"
    assert s["changed"][0] == {"a": first["a"], "b": first["b"], **{
        k: first["step_a"][k] for k in ("dir", "kind", "method", "hash")},
        "hash_b": first["step_b"]["hash"], "difference": "client", "diff": first["diff"]}


def test_ops_reconstruct_b(runs):
    """The ops stream covers every step of both runs once, in A's order, and rebuilds B:
    equal ops pair equal frames, changed ones carry both hashes (--strict: the hashes
    are the frames' own)."""
    p = align(runs["a"], runs["b"], "--strict")
    assert p.returncode == 1
    ops = [orjson.loads(line) for line in p.stdout.splitlines()]
    frames_b = [orjson.loads(x) for x in run_tool("frame", str(runs["b"])).stdout.splitlines()][1:]
    frames_a = [orjson.loads(x) for x in run_tool("frame", str(runs["a"])).stdout.splitlines()][1:]
    assert [o["a"] for o in ops if o["a"] is not None] == list(range(len(frames_a)))
    assert sorted(o["b"] for o in ops if o["b"] is not None) == list(range(len(frames_b)))
    rebuilt = {o["b"]: o["hash_b"] if o["op"] == "changed" else o["hash"]
               for o in ops if o["b"] is not None}
    assert [rebuilt[j] for j in range(len(frames_b))] == [f["hash"] for f in frames_b]
    assert {o["op"] for o in ops} == {"equal", "changed"}
    for o in ops:
        if o["op"] == "equal":
            assert frames_a[o["a"]]["hash"] == frames_b[o["b"]]["hash"] == o["hash"]
        else:
            assert frames_a[o["a"]]["hash"] == o["hash"] != o["hash_b"]
            assert o["diff"] and all(d["op"] == "replace" for d in o["diff"])


def test_diff_is_readable(runs):
    p = align(runs["a"], runs["b"], "--format", "diff", "-U", "1")
    assert p.returncode == 1
    text = p.stdout.decode()
    assert text.startswith(f"--- {runs['a']}\n+++ {runs['b']}\n@@ -")
    assert "\x1b" not in text  # a pipe gets no colour
    assert ('!→ session/prompt "hello 2"\n'
            '!     /params/prompt/0/text: "hello 2" → "bye 2"\n') in text
    assert '+→ session/prompt "bye 2"' not in text
    assert "user_message" in text and "←" in text


def test_ignore_makes_runs_with_other_ids_equal(runs):
    assert align(runs["a"], runs["ids"], "--format", "json").returncode == 1
    p = align(runs["a"], runs["ids"], "--ignore", "/id", "--format", "json")
    assert p.returncode == 0, p.stdout
    assert orjson.loads(p.stdout)["distance"] == 0


def test_dot_renders_with_real_graphviz(runs):
    p = align(runs["a"], runs["b"], "--format", "dot")
    assert p.returncode == 1
    dot = p.stdout.decode()
    assert "first divergence" in dot and "shared step" in dot
    assert "blake3" not in dot  # labels say what happened, not hashes
    svg = subprocess.run(["dot", "-Tsvg"], input=p.stdout, capture_output=True, check=True).stdout
    assert svg.lstrip().startswith(b"<?xml") and b"<svg" in svg and svg.rstrip().endswith(b"</svg>")
    assert b"bye 2" in svg
    p = align(runs["a"], runs["b"], "--format", "svg")
    assert p.returncode == 1 and p.stdout.rstrip().endswith(b"</svg>")


def test_svg_without_dot_is_a_clear_error(runs, tmp_path):
    env = tool_env()
    env["PATH"] = str(tmp_path)  # an empty directory: no dot
    p = subprocess.run(tool_argv("align", str(runs["a"]), str(runs["b"]), "--format", "svg"),
                       capture_output=True, env=env)
    assert p.returncode == 2
    assert p.stdout == b""
    err = p.stderr.decode()
    assert "dot" in err and "apt-get install graphviz" in err and "Traceback" not in err


def test_three_way_tree(runs):
    p = align(runs["a"], runs["b"], runs["c"], "--format", "json")
    assert p.returncode == 1, p.stderr
    t = orjson.loads(p.stdout)
    root = t["tree"]
    assert root["runs"] == ["A", "B", "C"] and root["length"] > 0
    # they part at prompt 2: B alone, A and C together
    branches = {tuple(c["runs"]): c for c in root["children"]}
    assert set(branches) == {("A", "C"), ("B",)}
    assert branches[("B",)]["first_step"]["summary"] == 'session/prompt "bye 2"'
    ac = branches[("A", "C")]
    assert ac["first_step"]["summary"] == 'session/prompt "hello 2"'
    # then A and C part at prompt 3
    sub = {tuple(c["runs"]): c for c in ac["children"]}
    assert sub[("A",)]["first_step"]["summary"] == 'session/prompt "hello 3"'
    assert sub[("C",)]["first_step"]["summary"] == 'session/prompt "ciao 3"'
    fd = t["first_divergence"]
    assert fd["index"] == root["length"]
    assert sorted(b["runs"] for b in fd["branches"]) == [["A", "C"], ["B"]]
    dot = align(runs["a"], runs["b"], runs["c"], "--format", "dot").stdout
    assert b"A, C" in dot and b"first divergence" in dot and b"ciao 3" in dot
    svg = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, check=True).stdout
    assert b"</svg>" in svg


def test_three_identical_runs_exit_0(runs):
    p = align(runs["a"], runs["a2"], runs["a"], "--format", "json")
    assert p.returncode == 0
    assert orjson.loads(p.stdout)["first_divergence"] is None


def test_max_cost_marks_approximate(tmp_path):
    """A reversed trace needs a large D: a small --max-cost is flagged, never silent."""
    msgs = [orjson.dumps({"jsonrpc": "2.0", "method": "n", "params": {"i": i}}) for i in range(30)]
    fwd, rev = tmp_path / "fwd.jsonl", tmp_path / "rev.jsonl"
    fwd.write_bytes(b"".join(m + b"\n" for m in msgs))
    rev.write_bytes(b"".join(m + b"\n" for m in reversed(msgs)))
    p = align(fwd, rev, "--dir", "c2a", "--max-cost", "2", "--format", "json")
    assert p.returncode == 1
    assert orjson.loads(p.stdout)["approximate"] is True
    assert b"approximate" in p.stderr
    p = align(fwd, rev, "--dir", "c2a", "--max-cost", "2")
    ops = [orjson.loads(line) for line in p.stdout.splitlines()]
    assert ops and all(op.get("approximate") is True for op in ops)
    p = align(fwd, rev, "--dir", "c2a", "--format", "json")
    s = orjson.loads(p.stdout)
    assert s["approximate"] is False and s["lcs"] == 1


def test_two_sessions_of_one_recording(tmp_path):
    """--session twice: two sessions multiplexed on one connection, aligned."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "session/prompt",
         "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
         "params": {"sessionId": "s2", "prompt": [{"type": "text", "text": "hi"}]}},
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s2"}},
    ]
    path = tmp_path / "mux.jsonl"
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    p = align(path, "--dir", "c2a", "--session", "s1", "--session", "s2", "--ignore",
              "/params/sessionId", "--ignore", "/id", "--format", "json")
    s = orjson.loads(p.stdout)
    assert p.returncode == 1, p.stderr
    assert (s["a"]["session"], s["b"]["session"]) == ("s1", "s2")
    assert s["counts"] == {"equal": 1, "changed": 0, "only-a": 0, "only-b": 1}
    assert s["first_divergence"]["step_b"]["method"] == "session/cancel"
    assert s["first_divergence"]["step_a"] is None


# -- ASR streams --------------------------------------------------------------------------


def asr(session: str, records: list[dict], **header) -> bytes:
    head = {"type": "header", "asr": "1.0", "sessionId": session, **header}
    out = [head]
    for n, r in enumerate(records):
        out.append({"seq": n, "id": f"{session}-r{n}", "ts": f"2026-10-26T14:30:{n:02}Z",
                    "tsSource": "recorder", **r})
    return b"".join(orjson.dumps(x) + b"\n" for x in out)


def msg(role: str, text: str) -> dict:
    return {"type": "message", "role": role, "content": [{"type": "text", "text": text}]}


def test_asr_streams_align_on_content_not_bookkeeping(tmp_path):
    a = tmp_path / "a.asr.jsonl"
    b = tmp_path / "b.asr.jsonl"
    a.write_bytes(asr("s1", [msg("user", "hi"), msg("assistant", "Echo: hi")]))
    b.write_bytes(asr("s9", [{"type": "state", "state": "running"}, msg("user", "hi"),
                             msg("assistant", "Echo: hi")]))
    p = align(a, b, "--format", "json")
    s = orjson.loads(p.stdout)
    assert p.returncode == 1, p.stderr
    assert s["lcs"] == 2 and s["counts"]["only-b"] == 1
    assert s["first_divergence"]["step_b"]["type"] == "state"
    ops = [orjson.loads(x) for x in align(a, b).stdout.splitlines()]
    assert [o["op"] for o in ops] == ["only-b", "equal", "equal"]
    assert ops[1]["type"] == "message" and ops[1]["kind"] == "user"


def test_lineage_of_a_fork_and_a_subagent(tmp_path):
    parent = asr("s1", [msg("user", "plan the release"),
                        {"type": "subagent", "childSession": "s2", "callId": "call_1"},
                        {"type": "state", "state": "resumed"}],
                 agent={"name": "org.example.agent"})
    child = asr("s2", [msg("user", "check the changelog")],
                lineage={"spawnedBy": {"session": "s1", "evidence": "native_field"}})
    fork = asr("s3", [msg("user", "try another way")],
               lineage={"forkedFrom": {"session": "s1", "evidence": "native_field"},
                        "inherits": {"mode": "copied", "from": "s1",
                                     "evidence": "native_field"}})
    path = tmp_path / "all.asr.jsonl"
    path.write_bytes(parent + child)  # two streams back to back in one file
    other = tmp_path / "fork.asr.jsonl"
    other.write_bytes(fork)
    p = align("--lineage", path, other, "--format", "json")
    assert p.returncode == 0, p.stderr
    g = orjson.loads(p.stdout)
    assert {s["session"] for s in g["sessions"]} == {"s1", "s2", "s3"}
    edges = {(e["from"], e["to"], e["kind"]) for e in g["edges"]}
    assert ("s1", "s3", "fork") in edges
    assert ("s1", "s2", "subagent") in edges
    assert ("s1", "s1", "resume") in edges
    dot = align("--lineage", path, other).stdout
    assert b"fork" in dot and b"subagent" in dot and b"plan the release" in dot
    svg = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, check=True).stdout
    assert b"</svg>" in svg and b"s3" in svg


def test_bad_asr_lines_are_reported_and_skipped(tmp_path):
    """A line an ASR stream cannot use (not JSON, not an object, no type) is reported
    with file:line and skipped: the rest still aligns (docs/acp-align.md, bad input)."""
    recs = [msg("user", "hi"), msg("assistant", "Echo: hi")]
    good = tmp_path / "good.asr.jsonl"
    good.write_bytes(asr("s1", recs))
    lines = good.read_bytes().splitlines(keepends=True)
    a = tmp_path / "a.asr.jsonl"
    a.write_bytes(lines[0] + b"{not json\n[1]\n" + b'{"seq":9}\n' + b"".join(lines[1:]))
    p = align(a, good, "--format", "json")
    assert p.returncode == 0, p.stderr
    assert orjson.loads(p.stdout)["counts"] == {"equal": 2, "changed": 0, "only-a": 0,
                                                "only-b": 0}
    assert f"{a}:2: not JSON, skipped: ".encode() in p.stderr
    assert f"{a}:3: an ASR record must be a JSON object, skipped".encode() in p.stderr
    assert f"{a}:4: ASR record without a string 'type', skipped".encode() in p.stderr
    assert b"Traceback" not in p.stderr
    p = align(a)
    assert p.returncode == 2 and b"two inputs" in p.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert align(empty, empty).returncode == 2


def test_torn_last_asr_line_aligns_what_was_read(tmp_path):
    """A crash mid-write leaves a last line without LF: reported, and the records read
    before it are aligned, as for a wire log with a torn last line."""
    full = asr("s1", [msg("user", "hi"), msg("assistant", "Echo: hi")])
    torn = tmp_path / "torn.asr.jsonl"
    torn.write_bytes(full[:-20])  # the last record cut, no LF
    good = tmp_path / "good.asr.jsonl"
    good.write_bytes(full)
    p = align(torn, good, "--format", "json")
    assert p.returncode == 1, p.stderr  # the cut record is only in b
    assert orjson.loads(p.stdout)["counts"] == {"equal": 1, "changed": 0, "only-a": 0,
                                                "only-b": 1}
    assert f"{torn}:3: torn last line (no LF), skipped: unexpected end".encode() in p.stderr
    p = align("--lineage", torn, "--format", "json")
    assert p.returncode == 0, p.stderr
    assert [s["session"] for s in orjson.loads(p.stdout)["sessions"]] == ["s1"]
    assert f"{torn}:3: torn last line (no LF), skipped".encode() in p.stderr


def test_mixed_kinds_refusal_names_each_file_and_its_kind(runs, tmp_path):
    stream = tmp_path / "s.asr.jsonl"
    stream.write_bytes(asr("s1", [msg("user", "hi")]))
    p = align(stream, runs["a"])
    assert p.returncode == 2 and p.stdout == b""
    assert (f"cannot align a trace with an ASR stream ({stream} is an ASR stream; "
            f"{runs['a']} is a wire log)").encode() in p.stderr, p.stderr


def test_stdin_is_one_input(runs):
    data = Path(runs["a"]).read_bytes()
    p = align("-", runs["a2"], "--format", "json", input=data)
    assert p.returncode == 0, p.stderr
    assert orjson.loads(p.stdout)["a"]["source"] == "stdin"


def test_truncated_gz_steps_are_those_before_the_cut(cut_asr_stream):
    """load_steps(keep_cut=True) on a .gz cut short: the steps read before the cut (a
    prefix of the whole stream's), the read error kept to report after the output."""
    from acp_pipes.align.steps import StepTable, load_steps

    table = StepTable()
    a = load_steps(str(cut_asr_stream["cut"]), table, keep_cut=True)
    b = load_steps(str(cut_asr_stream["whole"]), table, keep_cut=True)
    assert b.cut is None
    assert 20 < len(a.seq) < len(b.seq) and a.seq == b.seq[: len(a.seq)]
    assert a.cut is not None and a.cut.source == str(cut_asr_stream["cut"])
    assert a.cut.line == a.lines[-1] + 1 and a.cut.message.startswith("cannot read: ")
    with pytest.raises(InputError, match="cannot read"):  # without keep_cut: raised
        load_steps(str(cut_asr_stream["cut"]), StepTable())


def test_truncated_gz_aligns_what_was_read_then_exits_2(cut_asr_stream):
    cut = cut_asr_stream["cut"]
    p = align(cut, cut_asr_stream["whole"], "--format", "json")
    assert p.returncode == 2, p.stderr
    summary = orjson.loads(p.stdout)  # the output is written before the error
    # the records before the cut (its whole lines but the header) are equal; B has the rest
    lines, whole = cut_asr_stream["lines"], cut_asr_stream["whole"].read_bytes().count(b"\n")
    assert summary["counts"] == {"equal": lines - 1, "changed": 0, "only-a": 0,
                                 "only-b": whole - lines}
    last = p.stderr.rstrip().splitlines()[-1]
    assert last.startswith(f"acp-align: {cut}:".encode()) and b"cannot read: " in last


def test_ignore_composes_with_redaction(tmp_path):
    """A redacted recording, a --keep-secrets one and another redacted one (another key,
    so other tokens) of one session are the same run, under --ignore or not: secrets never
    count (acp_pipes.protocol.redact.conceal). A difference elsewhere is shown with the secrets
    concealed, never as a value or a token."""
    servers = [{"type": "stdio", "name": "fs", "command": "/bin/fs", "args": [],
                "env": [{"name": "API_KEY", "value": "sk-ALIGN-SECRET"}]}]
    client = []
    for line in client_session(2):
        msg = orjson.loads(line)
        if msg.get("method") == "session/new":
            msg["params"]["mcpServers"] = servers
        client.append(orjson.dumps(msg))
    redacted = record(tmp_path, "redacted", client)
    again = record(tmp_path, "again", client)
    kept = tmp_path / "kept.wire.jsonl"
    script = tmp_path / "kept.client.jsonl"
    script.write_bytes(b"".join(x + b"\n" for x in client))
    subprocess.run(tool_argv("tee", "--keep-secrets", "--script", str(script), "-o", str(kept),
                             "--clock", "epoch", "--no-host", "--", *tool_argv("echo-agent")),
                   capture_output=True, env=tool_env(), timeout=120, check=True,
                   stdin=subprocess.DEVNULL)
    assert b"sk-ALIGN-SECRET" in kept.read_bytes()
    assert b"sk-ALIGN-SECRET" not in redacted.read_bytes()
    assert redacted.read_bytes() != again.read_bytes()  # the tokens differ
    for a, b in ((redacted, kept), (redacted, again)):
        assert align(a, b, "--format", "json").returncode == 0
        p = align(a, b, "--ignore", "/params/cwd", "--format", "json")
        assert p.returncode == 0, p.stdout
    other = record(tmp_path, "other", changed(changed(client, b"sk-ALIGN-SECRET",
                                                      b"sk-OTHER-VALUE"),
                                              b'"name":"fs"', b'"name":"fs2"'))
    for fmt in ("json", "diff"):
        p = align(kept, other, "--ignore", "/params/cwd", "--format", fmt)
        assert p.returncode == 1 and b"fs2" in p.stdout
        assert b"hmac-blake3" not in p.stdout
        assert b"ALIGN-SECRET" not in p.stdout and b"OTHER-VALUE" not in p.stdout

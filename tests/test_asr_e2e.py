"""acp-asr end to end: real echo-agent sessions recorded by acp-tee over real pipes, and
hypothesis-generated multi-session connections checked against what was sent."""

from __future__ import annotations

import subprocess

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_pipes.asr import convert
from acp_pipes.asr.validate import validate_streams
from acp_pipes.echo.agent import EchoAgent
from acp_pipes.echo.client import client_session
from acp_pipes.fold import fold_paths
from tests.conftest import run_tool, tool_argv, tool_env

T0 = 1_764_000_000_000_000_000


def _req(rid, method, params):
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def wire_bytes(client_lines) -> bytes:
    """An in-process wire log of the echo agent answering ``client_lines``."""
    agent = EchoAgent()
    out = [orjson.dumps({"format": "acp-pipes/wire", "version": 1, "recorder": "test",
                         "argv": ["echo"], "started": "x", "clock": "nanos:0", "env": {}})]
    seq = 0
    for line in client_lines:
        out.append(orjson.dumps({"seq": seq, "t": T0 + seq, "dir": "c2a", "raw": line.decode()}))
        seq += 1
        for f in agent.feed(line):
            out.append(orjson.dumps({"seq": seq, "t": T0 + seq, "dir": "a2c", "raw": f.decode()}))
            seq += 1
    return b"".join(x + b"\n" for x in out)


def records(stream_bytes: bytes) -> list[dict]:
    return [orjson.loads(x) for x in stream_bytes.splitlines()]


def test_echo_session_recorded_by_acp_tee(tmp_path):
    """A real recording (acp-tee around the echo agent, real pipes) converts, validates,
    and converting twice gives the same bytes; resume adds no duplicates (ASR-717)."""
    client = list(client_session(3, permission_every=2, elicit_every=3))
    client.append(_req(90, "session/resume", {"sessionId": "sess-1", "cwd": "/tmp/acp-echo",
                                              "replayFrom": {"type": "start"}}))
    wire = tmp_path / "wire.jsonl"
    argv = tool_argv("tee", "-o", str(wire), "--clock", "epoch", "--no-host", "--",
                     *tool_argv("echo-agent"))
    p = subprocess.run(argv, input=b"".join(x + b"\n" for x in client), capture_output=True,
                       env=tool_env(), timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    first = run_tool("asr", str(wire))
    again = run_tool("asr", str(wire))
    assert first.returncode == 0, first.stderr.decode()
    assert first.stdout == again.stdout
    recs = records(first.stdout)
    assert recs[0]["type"] == "header" and recs[0]["sessionId"] == "sess-1"
    users = [r for r in recs if r["type"] == "message" and r["role"] == "user"]
    assert [u["messageId"] for u in users] == ["msg-user-1", "msg-user-2", "msg-user-3"]
    assert all(u["origin"] == "prompt" for u in users)
    # after "resumed" only the current-state snapshot: the replay repeated nothing new
    resumed = next(i for i, r in enumerate(recs) if r.get("state") == "resumed")
    assert [r["type"] for r in recs[resumed + 1:]] == ["state"]
    assert not any("supersedes" in r for r in recs[resumed:])
    perm = next(r for r in recs if r["type"] == "permission")
    assert perm["decision"] == "allow_once" and perm["requestId"] == "0:1"
    ask = next(r for r in recs if r["type"] == "input_request")
    assert ask["status"] == "answered" and ask["response"] == {"answer": "yes 3"}
    out = tmp_path / "streams"
    assert run_tool("asr", str(wire), "-o", str(out)).returncode == 0
    assert (out / "sess-1.asr.jsonl").read_bytes() == first.stdout
    assert run_tool("asr", "--validate", str(out / "sess-1.asr.jsonl")).returncode == 0


def test_session_option_and_file_names(tmp_path):
    lines = [_req(0, "initialize", {"protocolVersion": 2, "info": {"name": "c", "version": "1"}}),
             _req(1, "session/new", {"cwd": "/w"}), _req(2, "session/new", {"cwd": "/w"}),
             _req(3, "session/prompt", {"sessionId": "sess-2", "prompt": [{"type": "text", "text": "x"}]})]
    wire = tmp_path / "w.jsonl"
    wire.write_bytes(wire_bytes(lines))
    only = run_tool("asr", str(wire), "--session", "sess-2")
    assert [r["sessionId"] for r in records(only.stdout) if r["type"] == "header"] == ["sess-2"]
    missing = run_tool("asr", str(wire), "--session", "nope")
    assert missing.returncode == 2 and b"no session" in missing.stderr


def test_percent_encoded_file_names_round_trip():
    from acp_pipes.asr import file_name, session_from_name

    for sid in ("sess-1", "a/b", "..", ".", "ü x%2F", "C:\\x"):
        name = file_name(sid)
        assert "/" not in name and name not in (".asr.jsonl",) and not name.startswith(".")
        assert session_from_name(name) == sid


prompts = st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["", "/fail ", "/error ",
                                                                 "/permission "])),
                   min_size=1, max_size=8)


@settings(max_examples=15, deadline=None)
@given(prompts, st.integers(1, 3))
def test_random_multi_session_connections(tmp_path_factory, plan, nsessions):
    """Several sessions on one connection, prompts interleaved: one stream per session,
    one user message per prompt, one tool result per tool-running prompt, all valid."""
    lines = [_req(0, "initialize", {"protocolVersion": 2, "info": {"name": "c", "version": "1"}})]
    rid = 1
    for _ in range(nsessions):
        lines.append(_req(rid, "session/new", {"cwd": "/w"}))
        rid += 1
    agent_req = 0
    sent: dict[str, list[str]] = {}
    for s, flag in plan:
        sid = f"sess-{s % nsessions + 1}"
        lines.append(_req(rid, "session/prompt", {"sessionId": sid, "prompt": [
            {"type": "text", "text": f"{flag}p{rid}"}]}))
        rid += 1
        sent.setdefault(sid, []).append(flag)
        if flag == "/permission ":
            agent_req += 1
            lines.append(orjson.dumps({"jsonrpc": "2.0", "id": agent_req, "result": {
                "outcome": {"outcome": "selected", "optionId": "allow"}}}))
    wire = tmp_path_factory.mktemp("w") / "wire.jsonl"
    wire.write_bytes(wire_bytes(lines))
    streams = convert(fold_paths([str(wire)], warn=lambda *a: None))
    assert set(streams) == {f"sess-{i + 1}" for i in range(nsessions)}
    text = b"".join(orjson.dumps(r) + b"\n" for recs in streams.values() for r in recs)
    problems = list(validate_streams(("x", i + 1, ln) for i, ln in enumerate(text.splitlines())))
    assert problems == []
    for sid, recs in streams.items():
        flags = sent.get(sid, [])
        users = [r for r in recs if r["type"] == "message" and r.get("role") == "user"]
        assert len(users) == len(flags)
        results = [r for r in recs if r["type"] == "tool_result"]
        assert len(results) == sum(1 for f in flags if f != "/error ")
        assert all(r["seq"] == i for i, r in enumerate(recs[1:], 1))


def test_truncated_gz_keeps_what_came_before_the_cut(tmp_path):
    """A .gz cut short is a recording that stopped there (ASR-705): acp-fold and acp-asr
    write what was read before the cut, then say where the file became unreadable (exit
    2). Before, acp-asr wrote nothing at all."""
    import gzip

    wire = wire_bytes(list(client_session(40)))
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(wire)
    packed = gzip.compress(wire)
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    for tool in ("fold", "asr"):
        full = run_tool(tool, str(whole))
        r = run_tool(tool, str(cut))
        assert r.returncode == 2, r.stderr
        assert f"{cut}:".encode() in r.stderr and b"cannot read" in r.stderr
        got = records(r.stdout)
        assert got[0] == records(full.stdout)[0]  # the same header
        assert len(got) > 20  # the prompts before the cut are there
    asr = records(run_tool("asr", str(cut)).stdout)
    assert sum(1 for x in asr if x.get("type") == "message" and x.get("role") == "user") >= 5  # where the cut falls depends on the zlib build

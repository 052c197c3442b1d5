"""acp-replay on traces, as a tool over real pipes: the recorded bytes come back exactly."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest

from acp_pipes.io.wire import decode_raw
from tests.conftest import run_tool, tool_argv, tool_env

PROMPTS = 1000


def frames_of(wire_log: bytes) -> list[dict]:
    """The frame records of a wire log (not its header, nor its end record)."""
    return [r for r in map(orjson.loads, wire_log.splitlines()[1:]) if "dir" in r]


def lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n")


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> dict:
    """A 1000-prompt echo session (every 10th asks permission, every 25th elicits),
    recorded by acp-tee over real pipes, turn by turn (``--script`` waits for each
    answer, as an editor does); also framed by acp-frame."""
    d = tmp_path_factory.mktemp("replay")
    client = run_tool("echo-agent", "--client-session", str(PROMPTS), "--permission-every",
                      "10", "--elicit-every", "25").stdout
    script = d / "client.jsonl"
    script.write_bytes(client)
    wire = d / "wire.jsonl"
    rec = subprocess.run(
        tool_argv("tee", "--script", str(script), "-o", str(wire), "--clock", "epoch",
                  "--no-host", "--", *tool_argv("echo-agent")),
        capture_output=True, env=tool_env(), check=True, stdin=subprocess.DEVNULL)
    frames = d / "frames.jsonl"
    framed = run_tool("frame", str(wire), "-o", str(frames))
    assert framed.returncode == 0, framed.stderr
    return {"dir": d, "client": client, "script": script, "agent": rec.stdout, "wire": wire,
            "frames": frames}


def replay(*args: str, input: bytes) -> subprocess.CompletedProcess:
    return run_tool("replay", *args, input=input)


def report(proc: subprocess.CompletedProcess) -> dict:
    """The one JSON line a stopped replay writes on stderr."""
    out = [ln for ln in proc.stderr.splitlines() if ln.startswith(b"{")]
    assert len(out) == 1, proc.stderr
    return orjson.loads(out[0])


def test_an_interactive_client_gets_the_recorded_bytes_of_1000_prompts(session):
    assert session["agent"].count(b'"method":"session/request_permission"') == PROMPTS // 10
    assert session["agent"].count(b'"method":"elicitation/create"') == PROMPTS // 25
    # a client that waits for each answer (acp-tee --script, as an editor waits) would
    # hang, or say what it could not send, on a missing one
    p = subprocess.run(
        tool_argv("tee", "--script", str(session["script"]), "-o", os.devnull, "--",
                  *tool_argv("replay", str(session["wire"]))),
        capture_output=True, env=tool_env(), timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert p.stdout == session["agent"]
    assert p.stderr == b""


@pytest.mark.parametrize("trace", ["wire", "frames"])
def test_replay_1000_prompts_gives_the_recorded_bytes(session, trace):
    p = replay(str(session[trace]), input=session["client"])
    assert p.returncode == 0, p.stderr
    assert p.stdout == session["agent"]
    assert p.stderr == b""


def test_emit_writes_each_direction_verbatim(session):
    a2c = run_tool("replay", "--emit", "a2c", str(session["wire"]))
    c2a = run_tool("replay", "--emit", "c2a", str(session["frames"]))
    assert a2c.returncode == c2a.returncode == 0
    assert a2c.stdout == session["agent"]
    assert c2a.stdout == session["client"]


@pytest.mark.parametrize("trace", ["wire", "frames"])
def test_a_client_that_reorders_keys_and_spacing_is_accepted(session, trace):
    permuted = b"".join(
        orjson.dumps(dict(reversed(orjson.loads(ln).items())), option=orjson.OPT_INDENT_2)
        .replace(b"\n", b" ") + b"\n"
        for ln in lines(session["client"]))
    assert permuted != session["client"]
    p = replay(str(session[trace]), input=permuted)
    assert p.returncode == 0, p.stderr
    assert p.stdout == session["agent"]


def test_a_perturbed_client_is_stopped_with_a_report(session):
    client = lines(session["client"])
    k = 40  # a session/prompt in the middle
    frame = orjson.loads(client[k])
    assert frame["method"] == "session/prompt"
    recorded_text = frame["params"]["prompt"][0]["text"]
    frame["params"]["prompt"][0]["text"] = "something else"
    client[k] = orjson.dumps(frame)
    p = replay(str(session["wire"]), input=b"\n".join(client) + b"\n")
    assert p.returncode == 1
    r = report(p)
    assert r["event"] == "miss"
    recorded = frames_of(session["wire"].read_bytes())
    expected = [f for f in recorded if f["dir"] == "c2a"][k]
    assert r["expected"]["seq"] == expected["seq"]
    assert r["expected"]["method"] == "session/prompt"
    assert r["expected"]["hash"].startswith("blake3:")
    assert r["received"]["method"] == "session/prompt"
    assert r["received"]["id"] == frame["id"]
    assert r["received"]["hash"] != r["expected"]["hash"]
    assert r["consumed"] == k
    assert r["nearest"]["seq"] == expected["seq"]
    assert r["diff"] == [{"op": "replace", "path": "/params/prompt/0/text",
                          "recorded": recorded_text, "received": "something else"}]
    # everything before the miss was replayed, byte for byte, and nothing after it
    before = b"".join(f["raw"].encode() + b"\n"
                      for f in recorded if f["dir"] == "a2c" and f["seq"] < expected["seq"])
    assert p.stdout == before


def test_remap_ids_gives_the_client_its_own_ids(session, tmp_path):
    client = lines(session["client"])[:60]
    shifted = []
    for ln in client:
        f = orjson.loads(ln)
        if "method" in f:  # the client's own requests get other ids
            f["id"] = f"c-{f['id']}"
        shifted.append(orjson.dumps(f))
    data = b"\n".join(shifted) + b"\n"
    plain = replay(str(session["frames"]), input=data)
    assert plain.returncode == 1 and report(plain)["event"] == "miss"

    log = tmp_path / "remap.jsonl"
    p = replay("--remap-ids", "--remap-log", str(log), str(session["frames"]), input=data)
    assert report(p)["event"] == "client_ended"  # we sent only the first 60 frames
    recorded = frames_of(session["frames"].read_bytes())
    c2a = [f for f in recorded if f["dir"] == "c2a"]
    owned_a2c = [f for f in recorded if f["dir"] == "a2c" and f["seq"] < c2a[60]["seq"]]
    got = lines(p.stdout)
    assert len(got) == len(owned_a2c)
    requests = {f["id"] for f in c2a[:60] if f["kind"] == "request"}
    for want, live in zip(owned_a2c, got, strict=True):
        raw = want["raw"].encode()
        if want["kind"] in ("response", "error") and want["id"] in requests:
            # only the id token changed
            token = b'"id":' + orjson.dumps(want["id"])
            assert live == raw.replace(token, b'"id":' + orjson.dumps(f"c-{want['id']}"), 1)
            assert orjson.loads(live)["id"] == f"c-{want['id']}"
        else:
            assert live == raw  # the agent's own requests keep their ids
    entries = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    assert entries[0] == {"recorded": 0, "live": "c-0", "dir": "c2a", "seq": c2a[0]["seq"]}
    assert len(entries) == len(requests)


def test_client_mode_against_the_echo_agent_reproduces_the_recording(session, tmp_path):
    out = tmp_path / "rerun.jsonl"
    p = run_tool("replay", "--client", str(session["frames"]), "-o", str(out), "--clock",
                 "epoch", "--no-host", "--", *tool_argv("echo-agent"))
    assert p.returncode == 0, p.stderr
    assert p.stderr == b""
    rerun = out.read_bytes().splitlines()
    recorded = session["wire"].read_bytes().splitlines()
    assert orjson.loads(rerun[0])["format"] == "acp-pipes/wire"
    # Every frame, byte for byte, in the same order per direction. Across directions the
    # order of frames that cross in flight (the client's answer to a permission request
    # and the agent's requires_action update sent right after that request) depends on
    # scheduling, in the original recording as in the rerun, so it is not compared.
    assert _by_direction(rerun) == _by_direction(recorded)
    assert len(rerun) == len(recorded)


def _by_direction(lines: list[bytes]) -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {"c2a": [], "a2c": []}
    for line in lines[1:]:
        rec = orjson.loads(line)
        if "dir" in rec:  # not the end record
            out[rec["dir"]].append(decode_raw(rec))
    return out


def test_client_mode_stops_at_the_first_difference(session, tmp_path):
    """One recorded answer edited: the live agent's frames after it name its session by
    the id it minted, which the recording now names otherwise; exit 1 at the first of
    them, with or without --strict (the run always stops at a divergence)."""
    wire = session["wire"].read_bytes().splitlines()
    at = next(i for i, x in enumerate(wire) if b'\\"sessionId\\":\\"sess-1\\"}' in x)
    f = orjson.loads(wire[at])
    assert f["dir"] == "a2c"  # the session/new response
    f["raw"] = f["raw"].replace("sess-1", "sess-9")
    wire[at] = orjson.dumps(f)
    trace = tmp_path / "edited.jsonl"
    trace.write_bytes(b"\n".join(wire[:200]) + b"\n")
    argv = ["--client", str(trace), "--timeout", "5", "--", *tool_argv("echo-agent")]
    for extra in ([], ["--strict"]):
        p = run_tool("replay", *extra, *argv)
        assert p.returncode == 1
        events = [orjson.loads(x) for x in p.stderr.splitlines()]
        assert [(e["event"], e["kind"]) for e in events] == [("difference", "renaming")]
        assert events[0]["seq"] > f["seq"] and events[0]["renaming_broken"]


def _wire(tmp_path: Path, frames: list[tuple[str, str]], name: str = "t.jsonl") -> Path:
    head = {"format": "acp-pipes/wire", "version": 1, "recorder": "test", "argv": [],
            "started": "1970-01-01T00:00:00.000000Z", "clock": "epoch", "env": {}}
    recs = [head] + [{"seq": i, "t": i * 1000, "dir": d, "raw": r}
                     for i, (d, r) in enumerate(frames)]
    path = tmp_path / name
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return path


def _req(i, method, **params):
    return orjson.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}).decode()


def _res(i, **result):
    return orjson.dumps({"jsonrpc": "2.0", "id": i, "result": result}).decode()


def test_match_any_serves_interleaved_requests(tmp_path):
    trace = _wire(tmp_path, [
        ("a2c", '{"jsonrpc":"2.0","method":"hello"}'),  # before the first client frame
        ("c2a", _req(1, "session/list")),
        ("a2c", _res(1, sessions=[])),
        ("c2a", _req(2, "session/new", cwd="/a")),
        ("a2c", _req(7, "session/request_permission", sessionId="s")),
        ("c2a", _res(7, outcome={"outcome": "cancelled"})),
        ("a2c", _res(2, sessionId="s")),
    ])
    live = [_req(2, "session/new", cwd="/a"), _req(1, "session/list"),
            _res(7, outcome={"outcome": "cancelled"})]
    data = "".join(x + "\n" for x in live).encode()
    ordered = replay(str(trace), input=data)
    assert ordered.returncode == 1
    assert report(ordered)["expected"]["method"] == "session/list"
    p = replay("--match", "any", str(trace), input=data)
    assert p.returncode == 0, p.stderr
    assert p.stdout == (b'{"jsonrpc":"2.0","method":"hello"}\n'
                        + _req(7, "session/request_permission", sessionId="s").encode() + b"\n"
                        + _res(1, sessions=[]).encode() + b"\n"
                        + _res(2, sessionId="s").encode() + b"\n")


def test_a_cut_trace_replays_up_to_the_cut_and_says_so(session, tmp_path):
    wire = session["wire"].read_bytes().splitlines()
    # cut in the middle of a turn: the prompt's updates stop half way
    recs = [orjson.loads(x) for x in wire[1:]]
    prompt = next(i for i, r in enumerate(recs) if r["dir"] == "c2a" and '"hello 5"' in r["raw"])
    cut = wire[: 1 + prompt + 6]
    trace = tmp_path / "cut.jsonl"
    trace.write_bytes(b"\n".join(cut) + b"\n")
    p = replay(str(trace), input=session["client"])
    assert p.returncode == 1
    r = report(p)
    assert r["event"] == "trace_cut"
    assert "cut off" in r["message"]
    assert r["consumed"] == sum(1 for x in cut[1:] if orjson.loads(x)["dir"] == "c2a")
    assert p.stdout == run_tool("replay", "--emit", "a2c", str(trace)).stdout
    assert p.stdout and session["agent"].startswith(p.stdout)
    # an interactive client waiting for the rest of the turn is not left hanging
    waiting = subprocess.run(
        tool_argv("tee", "--script", str(session["script"]), "-o", os.devnull, "--",
                  *tool_argv("replay", str(trace))),
        capture_output=True, env=tool_env(), timeout=60, stdin=subprocess.DEVNULL)
    assert waiting.returncode == 1  # the "agent" ended before answering everything
    assert b"acp-tee: the agent ended before the script did" in waiting.stderr
    assert waiting.stdout == p.stdout
    assert report(waiting)["event"] == "trace_cut"

    # cut cleanly between turns: the client sending more is told the trace ended
    end = max(i for i, r in enumerate(recs[:prompt]) if r["dir"] == "a2c")
    trace.write_bytes(b"\n".join(wire[: 1 + end + 1]) + b"\n")
    p = replay(str(trace), input=session["client"])
    assert p.returncode == 1
    r = report(p)
    assert r["event"] == "trace_ended"
    assert r["received"]["method"] == "session/prompt"
    assert "more than was recorded" in r["message"]


@pytest.mark.parametrize("trace", ["wire", "frames"])
def test_ignore_pointers_match_modulo_volatile_values(session, trace):
    client = session["client"].replace(b'"cwd":"/tmp/acp-echo"', b'"cwd":"/home/x"')
    assert client != session["client"]
    assert replay(str(session[trace]), input=client).returncode == 1
    p = replay("--ignore", "/params/cwd", str(session[trace]), input=client)
    assert p.returncode == 0, p.stderr
    assert p.stdout == session["agent"]


@pytest.mark.parametrize("args, message", [
    ([], b"exactly one TRACE"),
    (["-"], b"cannot be stdin"),
    (["--remap-log", "x.jsonl", "T"], b"needs --remap-ids"),
    (["--ignore", "params", "T"], b"JSON pointer"),
    (["--client", "T"], b"needs the agent command"),
    (["T", "--", "agent"], b"only used with --client"),
])
def test_usage_errors_exit_2(session, args, message):
    args = [str(session["wire"]) if a == "T" else a for a in args]
    p = run_tool("replay", *args, input=b"")
    assert p.returncode == 2
    assert message in p.stderr


def test_input_of_the_wrong_kind_exits_2(session, tmp_path):
    bare = tmp_path / "bare.jsonl"
    bare.write_bytes(session["client"][:500])
    p = run_tool("replay", str(bare), input=b"")
    assert p.returncode == 2
    assert b"bare.jsonl:1: expected a wire log (acp-tee) or frames" in p.stderr
    missing = run_tool("replay", str(tmp_path / "nope.jsonl"), input=b"")
    assert missing.returncode == 2 and b"nope.jsonl: cannot open" in missing.stderr
    agent = run_tool("replay", "--client", str(session["wire"]), "--", str(tmp_path / "no-agent"))
    assert agent.returncode == 2 and b"cannot start" in agent.stderr


# -- secrets: redaction composes with the normalisers --------------------------------------

SECRET_SERVERS = [
    {"type": "stdio", "name": "fs", "command": "/bin/fs", "args": [],
     "env": [{"name": "API_KEY", "value": "sk-LIVE-SECRET-1"}]},
    {"type": "http", "name": "web", "url": "https://mcp.example",
     "headers": [{"name": "Authorization", "value": "Bearer LIVE-SECRET-2"}]},
]


def _with_servers(client: bytes, servers: list) -> bytes:
    out = []
    for ln in lines(client):
        msg = orjson.loads(ln)
        if msg.get("method") == "session/new":
            msg["params"]["mcpServers"] = servers
            ln = orjson.dumps(msg)
        out.append(ln + b"\n")
    return b"".join(out)


@pytest.fixture(scope="module")
def secret_session(tmp_path_factory) -> dict:
    """A 3-prompt echo session whose session/new carries MCP secrets, recorded by acp-tee
    twice: redacted (the default) and with --keep-secrets."""
    from tests.conftest import record_lockstep

    d = tmp_path_factory.mktemp("secrets")
    client = _with_servers(run_tool("echo-agent", "--client-session", "3").stdout,
                           SECRET_SERVERS)
    frames = [ln for ln in client.split(b"\n") if ln]
    redacted, kept = d / "redacted.jsonl", d / "kept.jsonl"
    agent = record_lockstep(frames, redacted)
    script = d / "kept.client.jsonl"
    script.write_bytes(client)
    proc = subprocess.run(
        tool_argv("tee", "--keep-secrets", "--script", str(script), "-o", str(kept),
                  "--clock", "epoch", "--no-host", "--", *tool_argv("echo-agent")),
        capture_output=True, env=tool_env(), timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0 and proc.stdout == agent, proc.stderr
    assert b"LIVE-SECRET" not in redacted.read_bytes()
    assert b"LIVE-SECRET" in kept.read_bytes()
    return {"client": client, "agent": agent, "redacted": redacted, "kept": kept}


def _renamed(client: bytes) -> bytes:
    """The client with its first MCP server renamed: a difference outside any secret."""
    return client.replace(b'"name":"fs"', b'"name":"fs2"', 1)


@pytest.mark.parametrize("args", [[], ["--ignore", "/params/cwd"], ["--remap-ids"],
                                  ["--ignore", "/params/_meta", "--remap-ids"]])
def test_a_redacted_recording_replays_under_normalisers(secret_session, args):
    """Secrets never count (acp_pipes.protocol.redact.conceal): the identical client is served, and
    so is one with another secret (the log holds nothing a secret could be checked
    against); one that differs outside its secrets is not."""
    for client in (secret_session["client"],
                   secret_session["client"].replace(b"sk-LIVE-SECRET-1", b"sk-OTHER-SECRET")):
        p = replay(*args, str(secret_session["redacted"]), input=client)
        assert p.returncode == 0, p.stderr
        assert p.stdout == secret_session["agent"]
    p = replay(*args, str(secret_session["redacted"]), input=_renamed(secret_session["client"]))
    assert p.returncode == 1
    r = report(p)
    assert r["event"] == "miss" and r["expected"]["method"] == "session/new"
    assert [d["path"] for d in r["diff"]] == ["/params/mcpServers/0/name"]


def test_a_miss_report_shows_no_secret_value(secret_session):
    """acp-replay's miss report compares the live frame with the recording: the secrets of
    both sides are concealed there (one placeholder), never values nor tokens."""
    other = _renamed(secret_session["client"]).replace(b"sk-LIVE-SECRET-1", b"sk-OTHER-SECRET")
    for trace in ("redacted", "kept"):
        for args in ([], ["--ignore", "/params/cwd"], ["--remap-ids"]):
            p = replay(*args, str(secret_session[trace]), input=other)
            assert p.returncode == 1
            r = report(p)
            assert r["expected"]["method"] == "session/new", r
            (d,) = r["diff"]
            assert d["path"] == "/params/mcpServers/0/name"
            assert b"SECRET" not in p.stderr, (trace, args)
            assert b"hmac-blake3" not in p.stderr


def test_a_client_mode_difference_shows_no_secret_value(secret_session, tmp_path):
    """--client compares the live agent's frames with the recording: an agent that echoes
    its MCP configuration back does not put the secrets on stderr."""
    agent = tmp_path / "agent.py"
    agent.write_text(
        "import sys, json\n"
        "for line in sys.stdin:\n"
        "    m = json.loads(line)\n"
        "    if 'id' in m and 'method' in m:\n"
        "        print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': {},\n"
        "                          'params': m.get('params')}), flush=True)\n")
    import sys

    p = run_tool("replay", "--client", str(secret_session["kept"]), "-o", os.devnull, "--",
                 sys.executable, str(agent), timeout=120)
    assert b'"event":"difference"' in p.stderr
    assert b"LIVE-SECRET" not in p.stderr


# -- a trace is read as the replay goes: memory holds what is in flight ---------------------


def _readline_within(stream, seconds: float) -> bytes:
    import select

    ready, _, _ = select.select([stream], [], [], seconds)
    assert ready, "no output: the replay waits for the whole trace"
    return stream.readline()


def _fifo_trace(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    os.mkfifo(path)
    return path


_HEAD = orjson.dumps({"format": "acp-pipes/wire", "version": 1, "recorder": "test",
                      "argv": [], "started": "1970-01-01T00:00:00.000000Z",
                      "clock": "epoch", "env": {}}) + b"\n"


def _rec(seq: int, d: str, raw: str) -> bytes:
    return orjson.dumps({"seq": seq, "t": seq, "dir": d, "raw": raw}) + b"\n"


def test_replay_as_the_agent_answers_before_the_trace_is_read_whole(tmp_path):
    """The trace is read burst by burst (here from a FIFO whose writer is still writing):
    the client's first frame is answered while the rest of the trace is unread, which
    is what keeps memory to one burst however long the recording."""
    trace = _fifo_trace(tmp_path, "trace.jsonl")
    p = subprocess.Popen(tool_argv("replay", str(trace)), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=tool_env())
    try:
        with open(trace, "wb") as w:
            w.write(_HEAD + _rec(0, "c2a", _req(1, "session/list"))
                    + _rec(1, "a2c", _res(1, sessions=[]))
                    + _rec(2, "c2a", _req(2, "session/new", cwd="/a")))
            w.flush()
            p.stdin.write(_req(1, "session/list").encode() + b"\n")
            p.stdin.flush()
            assert _readline_within(p.stdout, 20) == _res(1, sessions=[]).encode() + b"\n"
            w.write(_rec(3, "a2c", _res(2, sessionId="s")))
        p.stdin.write(_req(2, "session/new", cwd="/a").encode() + b"\n")
        p.stdin.close()
        assert p.stdout.read() == _res(2, sessionId="s").encode() + b"\n"
        assert p.wait(timeout=20) == 0, p.stderr.read()
    finally:
        p.kill()
        p.wait()


@pytest.mark.slow  # --client waits out its --timeout (10 s) of silence after the trace
def test_client_mode_starts_before_the_trace_is_read_whole(tmp_path):
    """--client sends the first recorded client frame, and compares the agent's answer,
    while the rest of the trace is still to come."""
    trace = _fifo_trace(tmp_path, "trace.jsonl")
    init = _req(0, "initialize", protocolVersion=2)
    p = subprocess.Popen(tool_argv("replay", "--client", str(trace), "--clock", "epoch",
                                   "--no-host", "--", *tool_argv("echo-agent")),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=tool_env())
    try:
        with open(trace, "wb") as w:
            w.write(_HEAD + _rec(0, "c2a", init))
            w.flush()
            header = orjson.loads(_readline_within(p.stdout, 20))
            assert header["format"] == "acp-pipes/wire"
            sent = orjson.loads(_readline_within(p.stdout, 20))
            assert (sent["dir"], sent["raw"]) == ("c2a", init)
            answer = orjson.loads(_readline_within(p.stdout, 20))
            assert answer["dir"] == "a2c" and '"id":0' in answer["raw"]
            w.write(_rec(1, "a2c", answer["raw"]))
        assert p.wait(timeout=30) == 0
        assert p.stderr.read() == b""  # the answer is the recorded one: no difference
    finally:
        p.kill()
        p.wait()

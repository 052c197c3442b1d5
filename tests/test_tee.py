"""acp-tee over real pipes: what the client and the agent see equals what is logged."""

from __future__ import annotations

import gzip
import os
import re
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
import zlib
from datetime import datetime
from pathlib import Path

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from acp_pipes.echo.client import client_session
from acp_pipes.io.wire import A2C, C2A, decode_raw, end_record, frame_record, make_clock
from acp_pipes.protocol.canonical import canonical_hash, parse_json
from acp_pipes.protocol.redact import TOKEN_HEAD, logged_hash
from tests.conftest import record_lockstep, run_tool, tool_argv, tool_env

pytestmark = pytest.mark.process  # processes are the point: real pipes, signals, exits

TIMEOUT = 60  # a deadlock fails the test instead of hanging it


def tee(*args: str, input: bytes = b"", cwd: Path | None = None, env=None,
        timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run(tool_argv("tee", *args), input=input, capture_output=True,
                          env=env or tool_env(), timeout=timeout, cwd=cwd)


def agent_script(tmp_path: Path, body: str, name: str = "agent.py") -> list[str]:
    """argv of a small Python agent written to a file (SIGPIPE restored to the default,
    as for a non-Python agent)."""
    path = tmp_path / name
    path.write_text("import os, signal, sys\nsignal.signal(signal.SIGPIPE, signal.SIG_DFL)\n"
                    + textwrap.dedent(body))
    return [sys.executable, str(path)]


def watchdog(p: subprocess.Popen) -> threading.Timer:
    """Kill ``p`` after TIMEOUT so a hang fails the test instead of stalling the suite."""
    timer = threading.Timer(TIMEOUT, p.kill)
    timer.daemon = True
    timer.start()
    return timer


def read_log(path: Path) -> tuple[dict, list[dict]]:
    """The header and the frame records (the end record left out: see end_of)."""
    lines = path.read_bytes().splitlines()
    recs = [orjson.loads(x) for x in lines[1:]]
    return orjson.loads(lines[0]), recs[:-1] if recs and recs[-1].get("end") else recs


def end_of(path: Path) -> dict:
    return orjson.loads(path.read_bytes().splitlines()[-1])


def logged(records: list[dict], direction: str) -> bytes:
    """The bytes of one direction as the log says they were sent."""
    return b"".join(decode_raw(r) + (b"" if r.get("nolf") else b"\n")
                    for r in records if r["dir"] == direction)


def client_stream(prompts: int) -> bytes:
    return b"".join(f + b"\n" for f in client_session(prompts))


def echo_agent_dumping(received: Path) -> list[str]:
    """The echo agent behind tee(1), which keeps a copy of everything the agent got."""
    agent = " ".join(tool_argv("echo-agent"))
    return ["sh", "-c", f'tee "$0" | {agent}', str(received)]


# -- byte-exactness -------------------------------------------------------------------


def test_thousand_prompt_session_client_agent_and_log_agree(tmp_path):
    wire, received = tmp_path / "wire.jsonl", tmp_path / "received"
    stream = client_stream(1000)
    direct = run_tool("echo-agent", input=stream, timeout=TIMEOUT)
    r = tee("-o", str(wire), "--", *echo_agent_dumping(received), input=stream)
    assert r.returncode == 0, r.stderr
    assert r.stdout == direct.stdout  # the proxy is invisible to the client
    head, recs = read_log(wire)
    assert head["format"] == "acp-pipes/wire" and head["argv"][0] == "sh"
    assert [r["seq"] for r in recs] == list(range(len(recs)))
    # every frame, both ways: what the client sent and what the agent answered directly
    assert len(recs) == stream.count(b"\n") + direct.stdout.count(b"\n")
    assert logged(recs, A2C) == r.stdout
    assert logged(recs, C2A) == received.read_bytes() == stream
    ts = [r["t"] for r in recs]
    assert ts == sorted(ts)  # receipt order: t never goes back as seq grows


def test_crlf_non_utf8_and_missing_last_lf(tmp_path):
    wire = tmp_path / "w.jsonl"
    data = b'{"a":1}\r\n\xff\xfe{"b":2}\n\n{"c":3}'
    r = tee("-o", str(wire), "--", "cat", input=data)
    assert r.returncode == 0 and r.stdout == data
    _, recs = read_log(wire)
    c2a = [x for x in recs if x["dir"] == C2A]
    assert c2a[0]["raw"] == '{"a":1}\r'
    assert "raw" not in c2a[1] and decode_raw(c2a[1]) == b'\xff\xfe{"b":2}'
    assert c2a[2]["raw"] == ""
    assert c2a[3] == {**c2a[3], "raw": '{"c":3}', "nolf": True}
    assert not any(x.get("nolf") for x in c2a[:3])
    assert logged(recs, C2A) == data and logged(recs, A2C) == data
    # every line is exactly what acp_pipes.io.wire.frame_record makes of that frame
    lines = wire.read_bytes().splitlines()[1:-1]  # the frames, between header and end
    assert lines == [orjson.dumps(frame_record(r["seq"], r["t"], r["dir"], decode_raw(r),
                                               nolf=r.get("nolf", False))) for r in recs]


def test_sixteen_mib_frame(tmp_path):
    wire = tmp_path / "w.jsonl"
    big = b'{"jsonrpc":"2.0","method":"x","params":{"blob":"' + b"z" * (16 << 20) + b'"}}\n'
    data = b'{"small":1}\n' + big + b'{"small":2}\n'
    r = tee("-o", str(wire), "--", "cat", input=data)
    assert r.returncode == 0 and r.stdout == data
    _, recs = read_log(wire)
    assert len(recs) == 6
    assert logged(recs, C2A) == data == logged(recs, A2C)


# -- peers that fail or go away ------------------------------------------------------


def test_agent_killed_mid_session(tmp_path):
    wire, received = tmp_path / "w.jsonl", tmp_path / "received"
    agent = agent_script(tmp_path, f"""
        out = open({str(received)!r}, "wb", buffering=0)
        for n, line in enumerate(sys.stdin.buffer, 1):
            out.write(line)
            os.write(1, b'{{"ack":%d}}\\n' % n)
            if n == 5:
                os.write(1, b'{{"torn":')  # half a frame, then death
                os.kill(os.getpid(), signal.SIGKILL)
    """)
    stream = b"".join(b'{"n":%d}\n' % i for i in range(20))
    r = tee("-o", str(wire), "--", *agent, input=stream)
    assert r.returncode == 128 + signal.SIGKILL
    assert b"Traceback" not in r.stderr
    _, recs = read_log(wire)
    assert logged(recs, A2C) == r.stdout  # every frame the client got is in the log
    assert r.stdout.endswith(b'{"ack":5}\n{"torn":')
    assert recs[-1]["dir"] == A2C and recs[-1]["nolf"] is True
    assert logged(recs, C2A).startswith(received.read_bytes())
    end = end_of(wire)
    assert end["end"] is True and end["signal"] == signal.SIGKILL  # the log says how
    assert end["status"] == 128 + signal.SIGKILL and end["frames"] == len(recs)


def test_client_closes_early(tmp_path):
    wire = tmp_path / "w.jsonl"
    agent = agent_script(tmp_path, """
        for i in range(10**6):
            os.write(1, b'{"jsonrpc":"2.0","method":"n","params":{"i":%d}}\\n' % i)
    """)
    p = subprocess.Popen(tool_argv("tee", "-o", str(wire), "--", *agent), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=tool_env())
    timer = watchdog(p)
    got = p.stdout.read(10000)
    p.stdout.close()
    p.stdin.close()
    err = p.stderr.read()
    status = p.wait(timeout=TIMEOUT)
    timer.cancel()
    # The agent sees the closed pipe as it would without the proxy: SIGPIPE.
    assert status == 128 + signal.SIGPIPE
    assert b"Traceback" not in err
    _, recs = read_log(wire)
    assert logged(recs, A2C).startswith(got)


def test_agent_flood_with_slow_client_does_not_deadlock(tmp_path):
    wire, received = tmp_path / "w.jsonl", tmp_path / "received"
    agent = agent_script(tmp_path, f"""
        import threading
        def keep():
            with open({str(received)!r}, "wb") as f:
                for chunk in iter(lambda: os.read(0, 65536), b""):
                    f.write(chunk)
        t = threading.Thread(target=keep); t.start()
        line = b'{{"jsonrpc":"2.0","method":"flood","params":{{"pad":"' + b"p" * 960 + b'"}}}}\\n'
        block = line * 64
        for _ in range(50 * 1024 * 1024 // len(block)):
            os.write(1, block)
        t.join()
    """)
    p = subprocess.Popen(tool_argv("tee", "-o", str(wire), "--", *agent), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=tool_env())
    sent = b"".join(b'{"jsonrpc":"2.0","method":"c","params":{"i":%d}}\n' % i
                    for i in range(100_000))

    def write():
        p.stdin.write(sent)
        p.stdin.close()

    timer = watchdog(p)
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    chunks = []
    while True:
        chunk = os.read(p.stdout.fileno(), 16384)
        if not chunk:
            break
        chunks.append(chunk)
        if len(chunks) % 64 == 0:
            time.sleep(0.001)  # a slow reader
    assert p.wait(timeout=TIMEOUT) == 0
    timer.cancel()
    writer.join(TIMEOUT)
    out = b"".join(chunks)
    assert len(out) >= 50 * 1024 * 1024 - 64 * 1024
    _, recs = read_log(wire)
    assert logged(recs, A2C) == out
    assert logged(recs, C2A) == received.read_bytes() == sent


@pytest.mark.parametrize("where", ["missing-dir", "/dev/full"])
def test_unwritable_log_session_goes_on(tmp_path, where):
    path = str(tmp_path / "no" / "such" / "w.jsonl") if where == "missing-dir" else where
    if where == "/dev/full" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    data = b"".join(b'{"i":%d}\n' % i for i in range(2000))
    r = tee("-o", path, "--", "cat", input=data)
    assert r.returncode == 0 and r.stdout == data
    assert r.stderr.count(b"cannot write the log") == 1, r.stderr
    assert path.encode() in r.stderr and b"Traceback" not in r.stderr


def test_log_is_private(tmp_path):
    wire = tmp_path / "w.jsonl"
    assert tee("-o", str(wire), "--", "true").returncode == 0
    assert stat.S_IMODE(wire.stat().st_mode) == 0o600
    wire.write_bytes(b"old content that must go\n" * 10)
    wire.chmod(0o644)
    assert tee("-o", str(wire), "--", "true").returncode == 0
    assert stat.S_IMODE(wire.stat().st_mode) == 0o600
    assert b"old content" not in wire.read_bytes()


def test_pinned_clock_recordings_are_byte_identical(tmp_path):
    # Sent turn by turn, as an editor sends: with the whole script piped in at once, how
    # the log interleaves the two directions would depend on scheduling.
    client = list(client_session(50))
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for wire in (a, b):
        record_lockstep(client, wire)
    assert a.read_bytes() == b.read_bytes()
    head, recs = read_log(a)
    assert "host" not in head and {r["t"] for r in recs} == {0}
    assert head["started"] == "1970-01-01T00:00:00.000000Z"


# -- process behaviour -----------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_are_passed_to_the_agent(tmp_path, sig):
    wire = tmp_path / "w.jsonl"
    agent = agent_script(tmp_path, """
        def bye(signum, frame):
            os.write(1, b'{"got":%d}\\n' % signum)
            os._exit(42)
        signal.signal(signal.SIGTERM, bye)
        signal.signal(signal.SIGINT, bye)
        os.write(1, b'{"ready":true}\\n')
        sys.stdin.buffer.read()  # a signal handler runs here; EOF ends a forgotten agent
    """)
    # own session: a SIGINT to the test's process group must not reach the agent directly
    p = subprocess.Popen(tool_argv("tee", "-o", str(wire), "--", *agent), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=tool_env(), start_new_session=True)
    timer = watchdog(p)
    assert p.stdout.readline() == b'{"ready":true}\n'
    p.send_signal(sig)
    rest = p.stdout.read()
    assert p.wait(timeout=TIMEOUT) == 42
    timer.cancel()
    assert rest == b'{"got":%d}\n' % sig
    p.stdin.close()
    _, recs = read_log(wire)
    assert logged(recs, A2C) == b'{"ready":true}\n' + rest


def test_exit_status_and_stderr_pass_through(tmp_path):
    wire = tmp_path / "w.jsonl"
    agent = agent_script(tmp_path, """
        sys.stderr.write("agent diagnostics STDERR-ONLY\\n")
        sys.stdout.write('{"x":1}\\n')
        sys.exit(3)
    """)
    r = tee("-o", str(wire), "--", *agent)
    assert r.returncode == 3
    assert b"agent diagnostics STDERR-ONLY" in r.stderr
    assert r.stdout == b'{"x":1}\n'
    assert b"STDERR-ONLY" not in wire.read_bytes()


def test_header_env_only_named_and_host(tmp_path):
    wire = tmp_path / "w.jsonl"
    env = {**tool_env(), "ACP_T_NAMED": "yes", "ACP_T_OTHER": "secret-ish"}
    env.pop("ACP_T_UNSET", None)
    r = tee("-o", str(wire), "--capture-env", "ACP_T_NAMED", "--capture-env", "ACP_T_UNSET",
            "--", "true", env=env, cwd=tmp_path)
    assert r.returncode == 0
    head, recs = read_log(wire)
    assert head["env"] == {"ACP_T_NAMED": "yes", "ACP_T_UNSET": None}
    assert b"secret-ish" not in wire.read_bytes()
    assert head["host"]["cwd"] == str(tmp_path) and head["host"]["pid"] > 0
    assert head["argv"] == ["true"] and head["clock"] == "system" and recs == []


# -- secrets ---------------------------------------------------------------------------


def _secret_session(tmp_path: Path, *flags: str) -> tuple[bytes, bytes, list[dict], bytes]:
    wire, received = tmp_path / "w.jsonl", tmp_path / "received"
    agent = agent_script(tmp_path, f"""
        with open({str(received)!r}, "wb") as f:
            for line in sys.stdin.buffer:
                f.write(line)
                os.write(1, b'{{"jsonrpc":"2.0","id":1,"result":{{"sessionId":"s1"}}}}\\n')
    """)
    new = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {
        "cwd": "/w", "mcpServers": [
            {"type": "stdio", "name": "fs", "command": "/bin/fs", "args": ["-v"],
             "env": [{"name": "API_KEY", "value": "sk-TOPSECRET"}]},
            {"type": "http", "name": "web", "url": "https://x",
             "headers": [{"name": "Authorization", "value": "Bearer TOPSECRET2"}]}]}})
    r = tee("-o", str(wire), *flags, "--", *agent, input=new + b"\n")
    assert r.returncode == 0
    _, recs = read_log(wire)
    return new, received.read_bytes(), recs, wire.read_bytes()


def test_mcp_secrets_redacted_in_log_only(tmp_path):
    sent, received, recs, log_bytes = _secret_session(tmp_path)
    assert received == sent + b"\n"  # the agent got the secret
    assert b"TOPSECRET" not in log_bytes
    rec = recs[0]
    assert rec["redacted"] is True and TOKEN_HEAD in rec["raw"]
    assert "API_KEY" in rec["raw"]
    # the record's hash is of the frame as logged, not as sent (a guess could be checked)
    assert rec["hash"] == canonical_hash(parse_json(rec["raw"])) != canonical_hash(
        parse_json(sent))


def test_credentials_on_the_agents_command_line_are_redacted_in_the_header(tmp_path):
    """The agent's command line and the captured environment, through the real acp-tee:
    a credential-named option's value (spaced or after =), a variable assignment, a
    header, a URL's password and token parameter are tokens in the header (the same
    secret, the same token), the rest byte for byte; the agent gets its argv as given;
    --keep-secrets logs it as given."""
    seen = tmp_path / "argv.json"
    argv = [sys.executable, "-c",
            f"import json, sys; open({str(seen)!r}, 'w').write(json.dumps(sys.argv[1:]))",
            "--api-key", "sk-ONE", "--token=sk-TWO", "--max-tokens", "4096",
            "OPENAI_API_KEY=sk-ONE", "Authorization: Bearer sk-THREE",
            "--url=wss://me:sk-FOUR@example.com/acp?v=2&api_key=sk-FIVE#x", "-p", "hello"]
    env = {**tool_env(), "ACP_T_API_KEY": "sk-SIX", "ACP_T_LANG": "C"}
    wire, kept = tmp_path / "w.jsonl", tmp_path / "k.jsonl"
    capture = ("--capture-env", "ACP_T_API_KEY", "--capture-env", "ACP_T_LANG")
    assert tee("-o", str(wire), *capture, "--", *argv, env=env).returncode == 0
    assert orjson.loads(seen.read_bytes()) == argv[3:]
    text = wire.read_bytes()
    for secret in (b"sk-ONE", b"sk-TWO", b"sk-THREE", b"sk-FOUR", b"sk-FIVE", b"sk-SIX"):
        assert secret not in text, secret
    head, _ = read_log(wire)
    logged = head["argv"]
    tok = logged[4]
    assert tok.startswith(TOKEN_HEAD)
    assert logged[:4] == argv[:4] and logged[6:8] == ["--max-tokens", "4096"]
    assert logged[5].startswith("--token=" + TOKEN_HEAD)
    assert logged[8] == "OPENAI_API_KEY=" + tok  # the same secret: the same token
    assert logged[9].startswith("Authorization: " + TOKEN_HEAD)
    url = logged[10]
    assert url.startswith("--url=wss://me:" + TOKEN_HEAD) and url.endswith("#x")
    assert "@example.com/acp?v=2&api_key=" + TOKEN_HEAD in url
    assert logged[11:] == ["-p", "hello"]
    assert head["env"]["ACP_T_LANG"] == "C" and head["env"]["ACP_T_API_KEY"].startswith(
        TOKEN_HEAD)
    assert tee("-o", str(kept), "--keep-secrets", *capture, "--", *argv,
               env=env).returncode == 0
    head, _ = read_log(kept)
    assert head["argv"] == argv and head["env"] == {"ACP_T_API_KEY": "sk-SIX",
                                                    "ACP_T_LANG": "C"}


def test_keep_secrets(tmp_path):
    sent, _, recs, log_bytes = _secret_session(tmp_path, "--keep-secrets")
    assert recs[0]["raw"].encode() == sent and "redacted" not in recs[0]
    assert orjson.loads(log_bytes.splitlines()[0])["secrets"] == "kept"


# A v1 agent that advertises a terminal login with a token in its env, and asks for a PIN
# (a password field) during a prompt; it never echoes an answer.
_ASKING_AGENT = """
    import json

    def send(m):
        os.write(1, (json.dumps(m) + "\\n").encode())

    pending = None
    for line in sys.stdin.buffer:
        m = json.loads(line)
        method = m.get("method")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": 1,
                  "authMethods": [{"id": "term", "name": "T", "type": "terminal", "args": [],
                                   "env": {"LOGIN_TOKEN": "AGENT-ENV-SECRET"}}]}})
        elif method == "session/prompt":
            pending = m["id"]
            send({"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create", "params": {
                "sessionId": "s1", "mode": "form", "message": "PIN?", "requestedSchema": {
                    "type": "object", "properties": {
                        "pin": {"type": "string", "format": "password"},
                        "user": {"type": "string"}}}}})
        elif method is None:
            send({"jsonrpc": "2.0", "id": pending, "result": {"stopReason": "end_turn"}})
        elif "id" in m:
            send({"jsonrpc": "2.0", "id": m["id"], "result": {"sessionId": "s1"}})
"""

#: Every secret the crafted client sends (and the agent's own), and where.
_SECRETS = [b"314159", b"AUTH-SECRET-1", b"PROVIDER-SECRET-2", b"MCP-SECRET-3",
            b"AGENT-ENV-SECRET"]


def _asking_script() -> list[bytes]:
    def m(**kw):
        return orjson.dumps({"jsonrpc": "2.0", **kw})

    return [
        m(id=0, method="initialize", params={"protocolVersion": 1, "clientCapabilities": {}}),
        m(id=1, method="authenticate", params={"methodId": "key", "apiKey": "AUTH-SECRET-1"}),
        m(id=2, method="providers/set", params={
            "providerId": "main", "apiType": "openai", "baseUrl": "https://llm.example/v1",
            "headers": {"Authorization": "Bearer PROVIDER-SECRET-2"}}),
        m(id=3, method="session/new", params={"cwd": "/w", "mcpServers": [
            {"type": "stdio", "name": "fs", "command": "/bin/fs", "args": [],
             "env": [{"name": "API_KEY", "value": "MCP-SECRET-3"}]},
            {"type": "http", "name": "llm", "url": "https://mcp.example",
             "headers": [{"name": "Authorization", "value": "Bearer PROVIDER-SECRET-2"}]}]}),
        m(id=4, method="session/prompt", params={"sessionId": "s1",
                                                 "prompt": [{"type": "text", "text": "hi"}]}),
        m(id="e1", result={"action": "accept", "content": {"pin": "314159", "user": "ann"}}),
    ]


def _unkeyed_hashes(script: list[bytes]) -> list[bytes]:
    """Every unkeyed hash a log could hold that would let a guessed secret be checked:
    of each secret's canonical form (the tokens logs held before), of each frame as
    sent (the frame hash they held), and of each frame's bytes."""
    import blake3

    from acp_pipes.protocol.canonical import canonical_bytes, raw_hash

    out = [blake3.blake3(canonical_bytes(s.decode())).hexdigest().encode() for s in _SECRETS]
    out += [blake3.blake3(canonical_bytes("Bearer PROVIDER-SECRET-2")).hexdigest().encode()]
    for frame in script:
        out.append(canonical_hash(parse_json(frame)).split(":")[1].encode())
        out.append(raw_hash(frame).split(":")[1].encode())
    return out


def test_every_credential_place_is_redacted_through_the_real_tee(tmp_path):
    """providers/set headers, authenticate params, MCP env/headers, the agent's auth env and
    an answer to a password field of an elicitation form (ASR-734): none of the secrets
    and no unkeyed hash of one or of a frame carrying one is in the log; the peers got
    every byte as sent; the same secret gives one token within a recording, another in
    the next; acp-frame's hash of each redacted frame is of the frame as logged."""
    agent = agent_script(tmp_path, _ASKING_AGENT)
    script = _asking_script()
    logs, received = [], []
    for name in ("one", "two"):
        wire = tmp_path / f"{name}.wire.jsonl"
        received.append(record_lockstep(script, wire, agent))
        logs.append(wire)
    data = logs[0].read_bytes()
    for secret in _SECRETS:
        assert secret not in data, secret
    for h in _unkeyed_hashes(script):
        assert h not in data
    assert b"AGENT-ENV-SECRET" in received[0] and received[0] == received[1]  # forwarded
    _, recs = read_log(logs[0])
    c2a = [r for r in recs if r["dir"] == C2A]
    assert [r.get("redacted", False) for r in c2a] == [False, True, True, True, False, True]
    answer = orjson.loads(c2a[5]["raw"])["result"]["content"]
    assert answer["user"] == "ann" and answer["pin"].startswith(TOKEN_HEAD)
    assert orjson.loads(c2a[1]["raw"])["params"]["methodId"] == "key"
    # one secret, one token within the recording: providers/set and an MCP server's header
    prov = orjson.loads(c2a[2]["raw"])["params"]["headers"]["Authorization"]
    mcp = orjson.loads(c2a[3]["raw"])["params"]["mcpServers"][1]["headers"][0]["value"]
    assert prov == mcp and prov.startswith(TOKEN_HEAD)
    _, recs2 = read_log(logs[1])
    prov2 = orjson.loads([r for r in recs2 if r["dir"] == C2A][2]["raw"])["params"]["headers"]
    assert prov2["Authorization"] != prov  # a key of its own for each recording
    init = orjson.loads(next(r for r in recs if r["dir"] == A2C)["raw"])
    assert init["result"]["authMethods"][0]["env"]["LOGIN_TOKEN"].startswith(TOKEN_HEAD)
    # the frame hash, in the log and from acp-frame, is of the frame as logged
    frames = [orjson.loads(x) for x in run_tool("frame", str(logs[0])).stdout.splitlines()[1:]]
    for rec, f in zip(recs, frames, strict=True):
        assert f["hash"] == canonical_hash(parse_json(decode_raw(f)))
        if rec.get("redacted"):
            assert rec["hash"] == f["hash"]
    # two recordings (two keys) align as one run: secrets never count
    p = run_tool("align", str(logs[0]), str(logs[1]), "--format", "json")
    assert p.returncode == 0, p.stdout
    # asked for by name, the secrets are kept
    kept = tmp_path / "kept.wire.jsonl"
    script_path = tmp_path / "kept.client.jsonl"
    script_path.write_bytes(b"".join(x + b"\n" for x in script))
    r = tee("--keep-secrets", "--script", str(script_path), "-o", str(kept), "--clock", "epoch",
            "--", *agent)
    assert r.returncode == 0, r.stderr
    for secret in _SECRETS:
        assert secret in kept.read_bytes()


def test_a_live_client_with_its_secrets_replays_against_the_redacted_log(tmp_path):
    """acp-replay conceals the live client's secrets as the log's tokens are concealed: the
    client that made the recording is served; its answer to the password field is secret
    only by the form, so it is a miss unless ignored, and the miss report shows neither
    the live PIN nor a token."""
    agent = agent_script(tmp_path, _ASKING_AGENT)
    wire = tmp_path / "w.jsonl"
    served = record_lockstep(_asking_script(), wire, agent)
    client = b"".join(x + b"\n" for x in _asking_script())
    frames = tmp_path / "w.frames.jsonl"
    frames.write_bytes(run_tool("frame", str(wire)).stdout)  # hashes there already
    _, recs = read_log(wire)
    for trace in (wire, frames):
        p = run_tool("replay", "--ignore", "/result/content/pin", str(trace), input=client)
        assert p.returncode == 0, p.stderr
        # the agent's frames as logged: its auth env redacted there, as sent otherwise
        assert p.stdout == logged(recs, A2C) != served and b"AGENT-ENV-SECRET" not in p.stdout
    p = run_tool("replay", str(wire), input=client)
    assert p.returncode == 1
    (event,) = [orjson.loads(x) for x in p.stderr.splitlines()]
    assert event["event"] == "miss" and event["consumed"] == 5
    assert event["diff"] == [{"op": "replace", "path": "/result/content/pin",
                              "recorded": "<redacted>", "received": "<redacted>"}]
    assert b"314159" not in p.stderr and b"hmac-blake3" not in p.stderr


def test_an_older_log_with_unkeyed_tokens_still_reads_and_replays(tmp_path):
    """A log written before HMAC tokens: ``<redacted blake3:...>`` and ``<redacted>`` in
    raw, and the hash of the frame as sent in the record. It reads as before (same wire
    log version); acp-frame does not carry that hash on; a live client with its secrets
    replays against it, as against a new log."""
    from acp_pipes.io.wire import header

    sent = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {
        "cwd": "/w", "mcpServers": [{"type": "stdio", "name": "fs", "command": "/bin/fs",
                                     "args": [], "env": [
                                         {"name": "A", "value": "OLD-SECRET"},
                                         {"name": "B", "value": "C"}]}]}})
    old_raw = sent.replace(b'"OLD-SECRET"', b'"<redacted blake3:' + b"ab" * 32 + b'>"') \
                  .replace(b'"C"', b'"<redacted>"')
    answer = b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}'
    wire = tmp_path / "old.jsonl"
    wire.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in (
        header(["agent"], started_ns=0, clock="epoch", host=False),
        {"seq": 0, "t": 0, "dir": "c2a", "raw": old_raw.decode(), "redacted": True,
         "hash": canonical_hash(parse_json(sent))},
        {"seq": 1, "t": 0, "dir": "a2c", "raw": answer.decode()},
        end_record(0, 0, 2))))
    frames = [orjson.loads(x) for x in run_tool("frame", str(wire)).stdout.splitlines()]
    assert frames[1]["hash"] == canonical_hash(parse_json(old_raw))
    assert canonical_hash(parse_json(sent)).encode() not in run_tool("frame", str(wire)).stdout
    p = run_tool("replay", str(wire), input=sent + b"\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout == answer + b"\n"


def test_a_replay_client_run_logs_no_secret(tmp_path):
    """acp-replay --client writes a wire log of its run, a recording like acp-tee's: it
    redacts the same places, even when the trace kept its secrets."""
    agent = agent_script(tmp_path, _ASKING_AGENT)
    kept = tmp_path / "kept.wire.jsonl"
    script_path = tmp_path / "kept.client.jsonl"
    script_path.write_bytes(b"".join(x + b"\n" for x in _asking_script()))
    r = tee("--keep-secrets", "--script", str(script_path), "-o", str(kept), "--clock", "epoch",
            "--", *agent)
    assert r.returncode == 0, r.stderr
    run = tmp_path / "run.jsonl"
    p = run_tool("replay", "--client", str(kept), "-o", str(run), "--", *agent, timeout=120)
    assert p.returncode == 0, p.stderr
    data = run.read_bytes()
    for secret in _SECRETS:
        assert secret not in data, secret
    _, recs = read_log(run)
    assert sum(1 for r in recs if r.get("redacted")) == 5  # 4 client frames, 1 agent's
    # the live agent's auth env matches the redacted recording's: secrets never count
    redacted = tmp_path / "redacted.wire.jsonl"
    record_lockstep(_asking_script(), redacted, agent)
    p = run_tool("replay", "--client", "--strict", str(redacted), "-o", os.devnull, "--",
                 *agent, timeout=120)
    assert p.returncode == 0 and p.stderr == b"", p.stderr


def test_every_view_of_a_redacted_answer_shows_what_the_log_holds(tmp_path):
    """acp-asr's question card says the answer is redacted (ASR-734); acp-view's timeline
    and its search show the frame as logged, which holds a token, never the answer."""
    agent = agent_script(tmp_path, _ASKING_AGENT)
    wire = tmp_path / "w.jsonl"
    record_lockstep(_asking_script(), wire, agent)
    asr = run_tool("asr", str(wire))
    assert asr.returncode == 0, asr.stderr
    assert b"314159" not in asr.stdout
    (req,) = [orjson.loads(x) for x in asr.stdout.splitlines()
              if b'"input_request"' in x and b'"response"' in x]
    assert req["response"] == {"pin": "<redacted>", "user": "ann"}
    page = tmp_path / "w.html"
    view = run_tool("view", str(wire), "-o", str(page))
    assert view.returncode == 0, view.stderr
    html = page.read_bytes()
    assert b"314159" not in html and b"AUTH-SECRET-1" not in html
    assert b"redacted hmac-blake3:" in html  # the frames as logged (\u003c-escaped)


# -- usage -----------------------------------------------------------------------------


def test_usage_errors_and_missing_agent(tmp_path):
    assert tee("-o", str(tmp_path / "w"), "--").returncode == 2
    assert tee("-o", str(tmp_path / "w"), "cat").returncode == 2  # the agent comes after --
    r = tee("--clock", "sometimes", "--", "true")
    assert r.returncode == 2 and b"--clock" in r.stderr
    r = tee("-o", str(tmp_path / "w"), "--", str(tmp_path / "no-such-agent"))
    assert r.returncode == 127 and b"cannot run" in r.stderr and b"Traceback" not in r.stderr


def test_default_log_in_current_directory(tmp_path):
    r = tee("--", "cat", input=b'{"a":1}\n', cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == b'{"a":1}\n'
    (log,) = tmp_path.glob("acp-tee-*.jsonl")
    assert str(log).encode() in r.stderr
    _, recs = read_log(log)
    assert logged(recs, C2A) == b'{"a":1}\n'


def test_agent_args_after_double_dash_are_the_agents(tmp_path):
    wire = tmp_path / "w.jsonl"
    r = tee("-o", str(wire), "--", "sh", "-c", 'printf "%s\\n" "$@"', "x", "-o", "--clock")
    assert r.returncode == 0 and r.stdout == b"-o\n--clock\n"


# -- the library -------------------------------------------------------------------------


def _record_through_pipes(data: bytes, wire: Path | None, argv: list[str]) -> tuple[int, bytes]:
    from acp_pipes.tee import record

    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.write(in_w, data)  # small: fits in the pipe
    os.close(in_w)
    try:
        status = record(argv, str(wire) if wire else None, clock="epoch", host=False,
                        stdin_fd=in_r, stdout_fd=out_w, forward_signals=False)
    finally:
        os.close(out_w)
        os.close(in_r)
    with os.fdopen(out_r, "rb") as f:
        return status, f.read()


def test_library_record_on_a_harness_pipes(tmp_path):
    wire = tmp_path / "w.jsonl"
    data = b'{"jsonrpc":"2.0","id":1,"method":"x"}\n'
    status, out = _record_through_pipes(data, wire, ["cat"])
    assert status == 0 and out == data
    head, recs = read_log(wire)
    assert head["clock"] == "epoch" and logged(recs, C2A) == data == logged(recs, A2C)
    assert _record_through_pipes(data, None, ["cat"]) == (0, data)  # no log: a plain relay


def test_a_frame_redaction_fails_on_is_not_logged_in_clear(tmp_path, monkeypatch):
    import acp_pipes.protocol.redact

    def broken(self, direction, raw):
        raise RuntimeError("bug")

    monkeypatch.setattr(acp_pipes.protocol.redact.Redactor, "frame", broken)
    wire = tmp_path / "w.jsonl"
    data = (b'{"method":"session/new","params":{"mcpServers":'
            b'[{"env":[{"name":"K","value":"SECRETV"}]}]}}\n')
    status, out = _record_through_pipes(data, wire, ["sh", "-c", "cat >/dev/null"])
    assert status == 0 and out == b""
    assert b"SECRETV" not in wire.read_bytes()
    _, (rec,) = read_log(wire)
    assert rec["redacted"] is True and rec["raw"].encode() == acp_pipes.protocol.redact.UNCHECKED


@pytest.mark.parametrize("shape", ["non-utf8", "not-json", "repeated-key", "escaped-key",
                                   "escaped-repeated-key", "deep-repeated-key",
                                   "deeper-repeated-key"])
def test_secrets_in_odd_frames_stay_out_of_the_log(tmp_path, shape):
    """Frames naming mcpServers that redaction cannot read as sent, whose key is spelt with
    escapes (every parser reads it as mcpServers), or whose JSON text hides a second copy
    behind a repeated key (after nesting as deep as a parser goes, or deeper), never carry
    the secret into the log."""
    wire = tmp_path / "w.jsonl"
    secret = b'{"type":"stdio","name":"fs","command":"/bin/fs","args":[],' \
             b'"env":[{"name":"API_KEY","value":"sk-HIDDEN"}]}'
    raw = {
        "non-utf8": b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w\xff",'
                    b'"mcpServers":[' + secret + b"]}}",
        "not-json": b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"mcpServers":['
                    + secret + b"]",
        "repeated-key": b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w",'
                        b'"mcpServers":[' + secret + b'],"mcpServers":[]}}',
        "escaped-key": b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w",'
                       b'"mcp\\u0053ervers":[' + secret + b"]}}",
        "escaped-repeated-key": b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":'
                                b'{"mcp\\u0053ervers":[' + secret + b'],"mcpServers":[]}}',
        # parsed whole by orjson (1,024 levels), past the recursion limit of json
        "deep-repeated-key": b'{"jsonrpc":"2.0","id":1,"x":' + b"[" * 1010 + b"]" * 1010
                             + b',"method":"session/new","params":{"cwd":"/w","mcpServers":['
                             + secret + b'],"mcpServers":[]}}',
        "deeper-repeated-key": b'{"jsonrpc":"2.0","id":1,"x":' + b"[" * 5000 + b"]" * 5000
                               + b',"method":"session/new","params":{"cwd":"/w","mcpServers":['
                               + secret + b'],"mcpServers":[]}}',
    }[shape]
    agent = agent_script(tmp_path, """
        for line in sys.stdin.buffer:
            pass
    """)
    r = tee("-o", str(wire), "--", *agent, input=raw + b"\n")
    assert r.returncode == 0
    assert b"sk-HIDDEN" not in wire.read_bytes()
    _, recs = read_log(wire)
    assert recs[0]["redacted"] is True
    assert recs[0]["hash"] == logged_hash(decode_raw(recs[0]))  # of the frame as logged


# -- the agent's start, and the log's encoding ------------------------------------------


def test_agent_gets_sigpipe_at_its_default(tmp_path):
    """Python ignores SIGPIPE, and an ignored signal survives exec: the proxy must give
    the agent the default back, as a shell would (an agent writing to a closed pipe dies
    of SIGPIPE instead of looping on EPIPE)."""
    r = tee("-o", str(tmp_path / "w.jsonl"), "--", "sh", "-c", "kill -PIPE $$; echo survived")
    assert r.returncode == 128 + signal.SIGPIPE
    assert r.stdout == b""


def test_client_stdin_closed(tmp_path):
    """Started with fd 0 closed, the proxy gives the agent an empty stdin; nothing of the
    proxy's own (pipes, the log) is taken for the client's stdin."""
    wire = tmp_path / "w.jsonl"
    argv = tool_argv("tee", "-o", str(wire), "--", "sh", "-c", "cat; echo done")
    r = subprocess.run(["sh", "-c", 'exec "$@" 0<&-', "sh", *argv], capture_output=True,
                       env=tool_env(), timeout=TIMEOUT)
    assert (r.returncode, r.stdout) == (0, b"done\n"), r.stderr
    _, recs = read_log(wire)
    assert [(rec["dir"], decode_raw(rec)) for rec in recs] == [(A2C, b"done")]


@pytest.mark.parametrize("direction", [C2A, A2C])
@pytest.mark.parametrize("nolf", [False, True])
def test_log_records_are_the_wire_formats_bytes(tmp_path, direction, nolf):
    """The proxy formats common records itself, for speed; each must be byte for byte
    what :func:`acp_pipes.io.wire.frame_record` gives, as orjson writes it."""
    from acp_pipes.tee.logfile import Sink, WireLog

    frames = [
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}',
        '{"text":"caf\u00e9 \u2603 \U0001f600 \\" \\\\ \\n \t"}'.encode(),
        b'{"bad":"\xff\xfe"}',  # not UTF-8: raw_b64
        b"",
        b'{"x":1}\r',
        b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":'
        b'[{"name":"s","command":"c","args":[],"env":[{"name":"K","value":"SECRET"}]}]}}',
        b'{"jsonrpc":"2.0","id":3,"method":"terminal/create","params":{"sessionId":"s",'
        b'"command":"c","env":[{"name":"T","value":"TSECRET"}]}}',
    ]
    path = tmp_path / "log.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    log = WireLog(Sink(fd, str(path)), lambda: 1764522928123456789, True, lambda m: None)
    log.frames(direction, frames, nolf=nolf)
    log.close()
    redactor = log.redactor  # the log's own key: the same tokens again

    expected = b""
    for seq, raw in enumerate(frames):
        kwargs = {}
        logged = redactor.frame(direction, raw) if redactor.wants(direction, raw) else None
        if logged is not None:
            kwargs["redacted"], kwargs["logged_hash"] = logged, logged_hash(logged)
        expected += orjson.dumps(frame_record(seq, 1764522928123456789, direction, raw,
                                              nolf=nolf, **kwargs)) + b"\n"
    assert path.read_bytes() == expected
    # each place is looked for in the frames of the side that sends its method
    assert (b'"SECRET' in expected, b"TSECRET" in expected) == (
        (False, True) if direction == C2A else (True, False))


# -- starting the agent before parsing ---------------------------------------------------

_OPTIONS = ["-o", "--output", "--clock", "--capture-env", "--no-host", "--keep-secrets",
            "--help", "-h", "--version", "--out", "--no-h", "--clock=epoch", "-ow.jsonl",
            "-x", "--script", "--", ""]
_VALUES = ["epoch", "system", "nanos:5", "nanos:-1", "nanos:x", "bogus", "-x", "--x", "-1",
           "", "w.jsonl", "-", "--", "HOME", "logs/", "~/l/{agent}-{start}-{pid}.jsonl.gz",
           "{session}.jsonl", "{agent", "}", "{{x}}.jsonl", "{0}"]
# Command lines shaped like real ones (options, values, then -- and a command), with
# anything in any place now and then, so both what is plain and its near misses come up.
_ARGV = st.lists(
    st.one_of(st.sampled_from(_OPTIONS).map(lambda o: [o]),
              st.tuples(st.sampled_from(_OPTIONS), st.sampled_from(_VALUES)).map(list),
              st.text(max_size=4).map(lambda t: [t])),
    max_size=5,
).flatmap(lambda groups: st.lists(st.sampled_from(["agent", "--acp", "--", "-x"]),
                                  max_size=3).map(lambda cmd: sum(groups, []) + ["--", *cmd]))


@settings(max_examples=500, deadline=None)
@given(_ARGV)
@example(["--clock", "bogus", "--", "agent"])
@example(["--clock", "nanos:-1", "--", "agent"])
@example(["-o", "-x", "--", "agent"])
@example(["--capture-env", "--", "agent"])
@example(["-o", "{session}.jsonl", "--", "agent"])
@example(["-o", "~/logs/{agent}-{pid}.jsonl", "--", "agent"])
def test_a_plain_command_line_is_one_the_parser_accepts(argv):
    """acp-tee starts the agent before parsing only for command lines ``plain_command``
    accepts: each must parse, with the same command and clock, and an -o the tool takes,
    so a usage error never starts an agent."""
    from acp_pipes.cli.tee import make_tool, plain_command
    from acp_pipes.tee.logfile import check

    plain = plain_command(argv)
    if plain is None:
        return
    cut = argv.index("--")
    args = make_tool().parser().parse_args(argv[:cut])  # SystemExit would fail the test
    assert (plain[0], plain[1]) == (argv[cut + 1:], args.clock)
    make_clock(args.clock)
    check(args.output)  # what _run checks before recording


@pytest.mark.parametrize(("argv", "plain"), [
    (["-o", "w.jsonl", "--", "agent", "--acp"], (["agent", "--acp"], "system")),
    (["--clock", "epoch", "--no-host", "--capture-env", "HOME", "--keep-secrets",
      "--output", "w", "--", "a", "--", "b"], (["a", "--", "b"], "epoch")),
    (["--", "agent"], (["agent"], "system")),
    (["--clock", "bogus", "--", "agent"], None),
    (["--clock=epoch", "--", "agent"], None),
    (["--help", "--", "agent"], None),
    (["-o", "w", "--"], None),
    (["-o", "--", "agent"], None),
    (["-o", "logs/{agent}-{start}.jsonl.gz", "--", "agent"], (["agent"], "system")),
    (["-o", "logs/{session}.jsonl", "--", "agent"], None),
])
def test_plain_command(argv, plain):
    from acp_pipes.cli.tee import plain_command

    assert plain_command(argv) == plain


@pytest.mark.parametrize("options", [["--clock", "bogus"], ["--no-such-option"], ["-o"]])
def test_a_usage_error_starts_no_agent(tmp_path, options):
    marker = tmp_path / "agent-ran"
    r = tee(*options, "--", "sh", "-c", f"touch {marker}")
    assert r.returncode == 2 and r.stderr.startswith((b"acp-tee: ", b"usage: acp-tee"))
    assert not marker.exists()


def test_the_usual_order_for_other_spellings(tmp_path):
    """Abbreviated options and --opt=value are not plain: parsed first, then started."""
    wire = tmp_path / "w.jsonl"
    r = tee(f"--out={wire}", "--clock=epoch", "--no-h", "--", "sh", "-c", "echo hi",
            input=b"")
    assert (r.returncode, r.stdout) == (0, b"hi\n")
    head, recs = read_log(wire)
    assert head["clock"] == "epoch" and "host" not in head
    assert [decode_raw(rec) for rec in recs] == [b"hi"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_an_agent_started_early_gets_signals_before_it_is_served(sig):
    """From its start (signals are blocked while it is spawned) until record() serves it,
    a signal sent to acp-tee is passed on to the agent, as it is during the session (in
    a child process: without the forwarding, the signal would end it)."""
    script = textwrap.dedent(f"""
        import os, signal
        from acp_pipes.tee import start_agent
        agent = start_agent(["sleep", "10"], clock="epoch", forward_signals=True)
        os.kill(os.getpid(), {int(sig)})
        _, status = os.waitpid(agent.pid, 0)
        agent.reaped = True
        agent.send_signal(signal.SIGTERM)  # reaped: nothing is sent to a reused pid
        agent.restore_signals()
        print(os.WIFSIGNALED(status) and os.WTERMSIG(status) == {int(sig)})
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, env=tool_env(),
                       timeout=TIMEOUT)
    assert (r.returncode, r.stdout) == (0, b"True\n"), r.stderr


# -- the proxy's own stdio, fds and signal dispositions ------------------------------------


def _tee_under_sh(prefix: str, *args: str, cwd: Path | None = None
                  ) -> subprocess.CompletedProcess:
    """acp-tee started by ``sh -c '<prefix> exec acp-tee ARGS'`` (redirections, traps)."""
    return subprocess.run(["sh", "-c", f'{prefix} exec "$@"', "sh", *tool_argv("tee", *args)],
                          capture_output=True, env=tool_env(), timeout=TIMEOUT, cwd=cwd,
                          stdin=subprocess.DEVNULL)


def test_stderr_closed_exit_status_and_stdout_are_the_agents(tmp_path):
    """With fd 2 closed, acp-tee's notes must not land in the client's stream (Python
    would send print(file=None) to stdout) and the exit status stays the agent's."""
    r = _tee_under_sh("exec 2>&-;", "--", "sh", "-c", "echo out; exit 3", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (3, b"out\n")
    assert len(list(tmp_path.glob("acp-tee-*.jsonl"))) == 1  # the default log was written


def test_library_stderr_fd_on_the_harness_stdout(tmp_path):
    """record(stderr_fd=1): the agent's stderr goes to the harness's fd 1, never into the
    client stream that takes the agent's stdout."""
    script = textwrap.dedent("""
        import os
        from acp_pipes.tee import record
        r, w = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        rc = record(["sh", "-c", "echo OUT; echo ERR >&2"], None, stdin_fd=null,
                    stdout_fd=w, stderr_fd=1, forward_signals=False)
        os.close(w)
        os.write(2, b"client got %r, status %d" % (os.read(r, 100), rc))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, env=tool_env(),
                       timeout=TIMEOUT)
    assert r.stdout == b"ERR\n"
    assert r.stderr == b"client got b'OUT\\n', status 0"


def test_empty_agent_name(tmp_path):
    """`acp-tee -- "$AGENT"` with AGENT unset: said, and 127 as a shell gives."""
    r = tee("-o", str(tmp_path / "w.jsonl"), "--", "")
    assert r.returncode == 127
    assert r.stderr.startswith(b"acp-tee: cannot run ''")


def test_the_agent_gets_no_fd_but_its_stdio(tmp_path):
    """An fd acp-tee was started with (here 7, not close-on-exec) does not reach the
    agent, as with subprocess's close_fds."""
    r = _tee_under_sh(f"exec 7>{tmp_path / 'seven'};", "-o", str(tmp_path / "w.jsonl"), "--",
                      "sh", "-c", "[ -e /proc/$$/fd/7 ] && echo leaked || echo clean")
    assert (r.returncode, r.stdout) == (0, b"clean\n"), r.stderr


def test_an_ignored_sigint_stays_ignored_for_the_agent(tmp_path):
    """Started with SIGINT ignored (a background job of a script), acp-tee leaves it so:
    the agent inherits it ignored, as it would without the proxy."""
    r = _tee_under_sh("trap '' INT;", "-o", str(tmp_path / "w.jsonl"), "--",
                      "sh", "-c", "kill -INT $$; echo survived")
    assert (r.returncode, r.stdout) == (0, b"survived\n"), r.stderr


def test_a_pinned_clock_beyond_64_bits_is_a_usage_error(tmp_path):
    r = tee("--clock", "nanos:18446744073709551616", "-o", str(tmp_path / "w.jsonl"), "--",
            "true")
    assert r.returncode == 2 and b"--clock nanos:N needs" in r.stderr


# -- the client from a script: --script ---------------------------------------------------


def _tee_script(tmp_path: Path, frames: list[bytes], agent: list[str], *flags: str
                ) -> tuple[subprocess.CompletedProcess, list[dict]]:
    script, wire = tmp_path / "script.jsonl", tmp_path / "w.jsonl"
    script.write_bytes(b"".join(f + b"\n" for f in frames))
    r = subprocess.run(tool_argv("tee", "--script", str(script), "-o", str(wire), *flags, "--",
                                 *agent),
                       capture_output=True, env=tool_env(), timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)
    return r, read_log(wire)[1] if wire.exists() else []


def _steps(recs: list[dict]) -> list[str]:
    """Each logged frame as DIR:what (the method, else the id it answers)."""
    out = []
    for rec in recs:
        msg = orjson.loads(decode_raw(rec))
        what = msg.get("method") or f"#{msg.get('id')}"
        if what == "session/update":
            update = msg["params"]["update"]
            what = update.get("state") or update["sessionUpdate"]
        out.append(f"{rec['dir']}:{what}")
    return out


def _rpc(id_, method, **params) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})


def test_script_waits_for_a_v2_turn_to_go_idle(tmp_path):
    """ACP v2: the prompt's response comes at once, the turn ends with state idle later;
    the next prompt waits for that (a script piped in would be read long before)."""
    agent = agent_script(tmp_path, """
        import json, time
        for line in sys.stdin:
            msg = json.loads(line)
            def send(m):
                os.write(1, json.dumps(m).encode() + b"\\n")
            if msg["method"] == "initialize":
                send({"jsonrpc": "2.0", "id": msg["id"], "result": {"protocolVersion": 2}})
            elif msg["method"] == "session/prompt":
                sid = msg["params"]["sessionId"]
                send({"jsonrpc": "2.0", "id": msg["id"], "result": {"messageId": "m"}})
                time.sleep(0.3)
                send({"jsonrpc": "2.0", "method": "session/update", "params": {
                      "sessionId": sid, "update": {"sessionUpdate": "state_update",
                                                   "state": "idle"}}})
    """)
    frames = [_rpc(0, "initialize", protocolVersion=2), b"",
              _rpc(1, "session/prompt", sessionId="s", prompt=[]),
              _rpc(2, "session/prompt", sessionId="s", prompt=[])]
    r, recs = _tee_script(tmp_path, frames, agent)
    assert (r.returncode, r.stderr) == (0, b"")
    assert _steps(recs) == ["c2a:initialize", "a2c:#0", "c2a:session/prompt", "a2c:#1",
                            "a2c:idle", "c2a:session/prompt", "a2c:#2", "a2c:idle"]
    assert logged(recs, A2C) == r.stdout


V1_AGENT = """
    import asyncio
    from acp import PROTOCOL_VERSION, run_agent, update_agent_message_text
    from acp.schema import (InitializeResponse, NewSessionResponse, PermissionOption,
                            PromptResponse, ToolCallUpdate)

    class Echo:
        def on_connect(self, conn):
            self.conn = conn

        async def initialize(self, protocol_version, **kw):
            return InitializeResponse(protocol_version=PROTOCOL_VERSION)

        async def new_session(self, cwd, **kw):
            return NewSessionResponse(session_id="v1-sess")

        async def prompt(self, session_id, prompt, **kw):
            text = prompt[0].text
            await asyncio.sleep(0.2)  # a client that did not wait would be ahead by now
            await self.conn.session_update(session_id, update_agent_message_text(text))
            if text.startswith("/permission"):
                await self.conn.request_permission(
                    session_id=session_id, tool_call=ToolCallUpdate(tool_call_id="call-1"),
                    options=[PermissionOption(option_id="allow", name="Allow",
                                              kind="allow_once")])
                await asyncio.sleep(0.2)
                await self.conn.session_update(session_id, update_agent_message_text("ran"))
            return PromptResponse(stop_reason="end_turn")

    asyncio.run(run_agent(Echo()))
"""


def test_script_drives_an_acp_v1_agent_turn_by_turn(tmp_path):
    """ACP v1 (an agent on the official v1 SDK): no state updates; a turn ends at the
    prompt's response, which the next prompt waits for; the agent's request is answered
    by the script's next frame."""
    agent = agent_script(tmp_path, V1_AGENT)

    def prompt(id_, text):
        return _rpc(id_, "session/prompt", sessionId="v1-sess",
                    prompt=[{"type": "text", "text": text}])

    frames = [_rpc(0, "initialize", protocolVersion=1, clientCapabilities={}),
              _rpc(1, "session/new", cwd="/tmp", mcpServers=[]),
              prompt(2, "hello"), prompt(3, "/permission please"),
              b'{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected",'
              b'"optionId":"allow"}}}',
              prompt(4, "bye")]
    r, recs = _tee_script(tmp_path, frames, agent, "--clock", "epoch")
    assert (r.returncode, r.stderr) == (0, b""), r.stderr
    assert _steps(recs) == [
        "c2a:initialize", "a2c:#0", "c2a:session/new", "a2c:#1",
        "c2a:session/prompt", "a2c:agent_message_chunk", "a2c:#2",
        "c2a:session/prompt", "a2c:agent_message_chunk", "a2c:session/request_permission",
        "c2a:#0", "a2c:agent_message_chunk", "a2c:#3",
        "c2a:session/prompt", "a2c:agent_message_chunk", "a2c:#4"]


def test_script_answers_a_v2_request_without_requires_action(tmp_path):
    """An ACP v2 agent that asks without reporting requires_action is answered once it
    has gone quiet (acp_pipes.tee.script.QUIET), not waited for forever."""
    agent = agent_script(tmp_path, """
        import json
        lines = iter(sys.stdin)
        def send(m):
            os.write(1, json.dumps(m).encode() + b"\\n")
        for line in lines:
            msg = json.loads(line)
            if msg.get("method") == "session/prompt":
                send({"jsonrpc": "2.0", "id": msg["id"], "result": {"messageId": "m"}})
                send({"jsonrpc": "2.0", "id": "ask", "method": "fs/read_text_file",
                      "params": {"sessionId": "s", "path": "/x"}})
                answer = json.loads(next(lines))
                send({"jsonrpc": "2.0", "method": "session/update", "params": {
                      "sessionId": "s", "update": {"sessionUpdate": "state_update",
                                                   "state": "idle"}}})
    """)
    frames = [_rpc(1, "session/prompt", sessionId="s", prompt=[]),
              b'{"jsonrpc":"2.0","id":"ask","result":{"content":"x"}}']
    r, recs = _tee_script(tmp_path, frames, agent)
    assert (r.returncode, r.stderr) == (0, b"")
    assert _steps(recs) == ["c2a:session/prompt", "a2c:#1", "a2c:fs/read_text_file",
                            "c2a:#ask", "a2c:idle"]


def _script_to_an_agent_that_answers_once(tmp_path: Path, before: str = "",
                                           after: str = "") -> tuple:
    """A script of three ``session/new`` to an agent that answers the first and exits 5;
    ``before`` and ``after`` its answer run in the agent."""
    agent = agent_script(tmp_path, f"""
        line = sys.stdin.readline()
        {before}
        os.write(1, b'{{"jsonrpc":"2.0","id":1,"result":{{}}}}\\n')
        {after}
        sys.exit(5)
    """)
    frames = [_rpc(n, "session/new", cwd="/") for n in (1, 2, 3)]
    r, recs = _tee_script(tmp_path, frames, agent)
    assert r.returncode == 5
    return r, recs


def test_script_the_agent_ends_early(tmp_path):
    r, recs = _script_to_an_agent_that_answers_once(tmp_path)
    # the second frame may be sent before the agent is gone, or as it goes, or not at
    # all; whichever it was, the note counts the client frames the log holds
    said = re.fullmatch(rb"acp-tee: the agent ended before the script did: ([12]) of its 3 "
                        rb"frames were sent(, the last after the agent had closed its "
                        rb"input)?\n", r.stderr)
    assert said, r.stderr
    assert _steps(recs) == ["c2a:session/new", "a2c:#1",
                            "c2a:session/new"][:1 + int(said[1])]


def test_script_a_frame_the_agent_no_longer_reads_is_logged_and_counted(tmp_path):
    r, recs = _script_to_an_agent_that_answers_once(
        tmp_path, before="os.close(0)  # no reader left: the next frame's write fails",
        after="import time; time.sleep(0.3)  # alive when the next frame meets the pipe")
    assert r.stderr == (b"acp-tee: the agent ended before the script did: 2 of its 3 frames "
                        b"were sent, the last after the agent had closed its input\n")
    assert _steps(recs) == ["c2a:session/new", "a2c:#1", "c2a:session/new"]


def test_script_that_cannot_be_read_starts_no_agent(tmp_path):
    marker = tmp_path / "agent-ran"
    r = tee("--script", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "w.jsonl"),
            "--", "sh", "-c", f"touch {marker}")
    assert r.returncode == 2
    assert r.stderr.startswith(b"acp-tee: cannot read the script ")
    assert not marker.exists()


def test_script_recordings_of_the_echo_agent_are_identical(tmp_path):
    """With permission requests (answered after the agent reports requires_action) and
    elicitations, two --script recordings are the same file."""
    client = list(client_session(30, permission_every=3, elicit_every=4))
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for wire in (a, b):
        record_lockstep(client, wire)
    assert a.read_bytes() == b.read_bytes()
    steps = _steps(read_log(a)[1])
    asks = [i for i, s in enumerate(steps) if s == "a2c:session/request_permission"]
    assert len(asks) == 10
    for i in asks:  # the answer follows the agent's report that it waits for the user
        assert steps[i + 1] == "a2c:requires_action" and steps[i + 2].startswith("c2a:#")


# -- where the log goes: -o FILE, DIR/, a template, .gz, a FIFO -------------------------


def _logs(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_file())


def test_a_directory_gets_a_new_log_per_session(tmp_path):
    """-o DIR/ (created, mode 0700, when missing) holds one new log per session, named
    {agent}-{start}-{pid}.jsonl: a second session never overwrites the first."""
    logs = tmp_path / "acp-logs"
    for text in (b'{"first":1}\n', b'{"second":2}\n'):
        r = tee("-o", f"{logs}/", "--", "cat", input=text)
        assert (r.returncode, r.stdout, r.stderr) == (0, text, b"")
    assert stat.S_IMODE(logs.stat().st_mode) == 0o700
    first, second = _logs(logs)
    for log in (first, second):
        assert re.fullmatch(r"cat-\d{8}T\d{6}Z-\d+\.jsonl", log.name), log.name
        assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert {logged(read_log(p)[1], C2A) for p in (first, second)} == \
        {b'{"first":1}\n', b'{"second":2}\n'}
    # an existing directory named without the slash is a directory too
    assert tee("-o", str(logs), "--", "true").returncode == 0
    assert len(_logs(logs)) == 3


def test_a_template_names_the_log_and_never_overwrites(tmp_path):
    logs = tmp_path / "logs"
    for n in range(3):  # a name already taken gets -1, -2 before its extension
        r = tee("-o", str(logs / "{agent}.jsonl.gz"), "--", "sh", "-c", f"echo {n}")
        assert (r.returncode, r.stderr) == (0, b"")
    assert [p.name for p in _logs(logs)] == ["sh-1.jsonl.gz", "sh-2.jsonl.gz", "sh.jsonl.gz"]
    for name, n in (("sh", 0), ("sh-1", 1), ("sh-2", 2)):
        recs = orjson.loads(gzip.decompress((logs / f"{name}.jsonl.gz").read_bytes())
                            .splitlines()[1])
        assert decode_raw(recs) == b"%d" % n
    r = tee("-o", str(tmp_path / "{agent}-{start}-{pid}.jsonl"), "--", "true")
    assert (r.returncode, r.stderr) == (0, b"")
    (log,) = tmp_path.glob("true-*.jsonl")
    stamp, pid = re.fullmatch(r"true-(\d{8}T\d{6}Z)-(\d+)\.jsonl", log.name).groups()
    head = read_log(log)[0]
    assert int(pid) == head["host"]["pid"]
    named = datetime.strptime(stamp, "%Y%m%dT%H%M%S%z")
    started = datetime.fromisoformat(head["started"].replace("Z", "+00:00"))
    assert abs((named - started).total_seconds()) < 2  # the session's start, in UTC


def test_a_template_that_names_no_field_is_a_usage_error_and_starts_no_agent(tmp_path):
    marker = tmp_path / "agent-ran"
    for spec in ("{session}.jsonl", "{agent.jsonl", "{0}.jsonl"):
        r = tee("-o", str(tmp_path / spec), "--", "sh", "-c", f"touch {marker}")
        assert r.returncode == 2, (spec, r.stderr)
        assert r.stderr.startswith(b"acp-tee: -o "), r.stderr
    assert not marker.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_tilde_is_the_home_directory(tmp_path):
    """Editor settings are JSON: nothing expands ~ but acp-tee."""
    env = {**tool_env(), "HOME": str(tmp_path)}
    r = tee("-o", "~/acp-logs/", "--", "true", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (log,) = _logs(tmp_path / "acp-logs")
    assert log.name.startswith("true-")
    assert not (tmp_path / "~").exists()


def test_gz_log_is_gzip_flushed_with_every_frame(tmp_path):
    """-o x.jsonl.gz: while the session runs, what was logged already decompresses; at
    the end the file is one complete gzip member holding what -o x.jsonl holds."""
    gz, plain = tmp_path / "w.jsonl.gz", tmp_path / "w.jsonl"
    argv = ["--clock", "epoch", "--no-host", "--", "cat"]
    p = subprocess.Popen(tool_argv("tee", "-o", str(gz), *argv), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=tool_env())
    timer = watchdog(p)
    p.stdin.write(b'{"n":1}\n')
    p.stdin.flush()
    assert p.stdout.readline() == b'{"n":1}\n'  # both frames logged before forwarded
    so_far = zlib.decompressobj(wbits=31).decompress(gz.read_bytes())
    assert so_far.count(b"\n") == 3 and b'{\\"n\\":1}' in so_far
    p.stdin.write(b'{"n":2}\n')
    p.stdin.close()
    assert p.stdout.read() == b'{"n":2}\n'
    assert p.wait(timeout=TIMEOUT) == 0
    timer.cancel()
    assert tee("-o", str(plain), *argv).returncode == 0  # the same header, uncompressed
    frames = [(C2A, b'{"n":1}'), (A2C, b'{"n":1}'), (C2A, b'{"n":2}'), (A2C, b'{"n":2}')]
    expected = plain.read_bytes().split(b"\n", 1)[0] + b"\n" + b"".join(
        orjson.dumps(frame_record(seq, 0, d, raw)) + b"\n" for seq, (d, raw) in enumerate(frames)
    ) + orjson.dumps(end_record(0, 0, len(frames))) + b"\n"
    assert gzip.decompress(gz.read_bytes()) == expected  # whole: the gzip trailer is there
    assert stat.S_IMODE(gz.stat().st_mode) == 0o600


def test_gz_log_is_read_by_the_tools(tmp_path):
    gz = tmp_path / "s.jsonl.gz"
    r = tee("-o", str(gz), "--", *tool_argv("echo-agent"), input=client_stream(3))
    assert r.returncode == 0
    frames = run_tool("frame", str(gz))
    assert frames.returncode == 0 and frames.stderr == b""
    assert frames.stdout.count(b"\n") == 1 + client_stream(3).count(b"\n") + \
        r.stdout.count(b"\n")


def test_a_fifo_without_a_reader_blocks_nothing(tmp_path):
    """open() of a FIFO nobody reads would block forever: the session goes on, said once,
    unrecorded."""
    fifo = tmp_path / "live"
    os.mkfifo(fifo)
    data = b"".join(b'{"i":%d}\n' % i for i in range(100))
    r = tee("-o", str(fifo), "--", "cat", input=data, timeout=20)
    assert (r.returncode, r.stdout) == (0, data)
    assert r.stderr == (f"acp-tee: cannot write the log {fifo}: a FIFO that nothing reads "
                        "yet (open it for reading first); the session goes on unrecorded\n"
                        ).encode()


def test_a_fifo_with_a_reader_gets_the_log(tmp_path):
    fifo, copy = tmp_path / "live", tmp_path / "copy.jsonl"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["sh", "-c", f'cat "{fifo}" > "{copy}"'])
    time.sleep(0.2)  # the reader opens the FIFO (acp-tee would otherwise find none)
    data = b"".join(b'{"i":%d,"pad":"%s"}\n' % (i, b"x" * 500) for i in range(5000))
    r = tee("-o", str(fifo), "--", "cat", input=data)
    assert (r.returncode, r.stdout, r.stderr) == (0, data, b"")
    assert reader.wait(timeout=TIMEOUT) == 0
    _, recs = read_log(copy)
    assert logged(recs, C2A) == data == logged(recs, A2C)


def test_a_fifo_reader_that_stops_reading_stalls_nothing_and_sigterm_ends_all(tmp_path):
    """A FIFO reader that stops reading (open, never read) must not stall the session: the
    log is given up once, said on stderr, and everything is forwarded; SIGTERM then ends
    the agent and acp-tee, and no process is left behind."""
    fifo, pid_file = tmp_path / "live", tmp_path / "agent.pid"
    os.mkfifo(fifo)
    stuck = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader that never reads
    try:
        agent = agent_script(tmp_path, f"""
            open({str(pid_file)!r}, "w").write(str(os.getpid()))
            line = b'{{"jsonrpc":"2.0","method":"n","params":{{"pad":"' + b"p" * 1000 + b'"}}}}\\n'
            for _ in range(8 * 1024):  # 8 MiB: far beyond any FIFO buffer
                os.write(1, line)
            os.write(1, b'{{"done":true}}\\n')
            sys.stdin.buffer.read()  # then wait for the client, until a signal
        """)
        p = subprocess.Popen(tool_argv("tee", "-o", str(fifo), "--", *agent),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=tool_env(), start_new_session=True)
        timer = watchdog(p)
        got = b""
        while not got.endswith(b'{"done":true}\n'):
            chunk = os.read(p.stdout.fileno(), 1 << 16)
            assert chunk, "the session stalled or ended early"
            got += chunk
        assert len(got) > 8 << 20
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=TIMEOUT) == 128 + signal.SIGTERM
        timer.cancel()
        err = p.stderr.read()
        assert err == (f"acp-tee: cannot write the log {fifo}: its reader took nothing for "
                       "1 s; the session goes on, no longer recorded\n").encode()
        agent_pid = int(pid_file.read_text())
        assert not Path(f"/proc/{agent_pid}").exists()  # reaped, not a zombie
        p.stdin.close()
        p.stdout.close()
    finally:
        os.close(stuck)


def test_the_log_goes_where_o_says_in_the_plain_command_line_too(tmp_path):
    """The early start (a plain command line, agent started before parsing) and the
    usual order name the log the same way."""
    for argv in (["-o", f"{tmp_path}/a/", "--", "true"],
                 [f"--output={tmp_path}/b/", "--", "true"]):
        assert tee(*argv).returncode == 0
    (a,), (b,) = _logs(tmp_path / "a"), _logs(tmp_path / "b")
    assert a.name.startswith("true-") and b.name.startswith("true-")

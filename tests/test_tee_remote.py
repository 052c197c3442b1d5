"""acp-tee's remote sides over WebSocket, against real peers on loopback: acpremote (a
non-RFD WebSocket server of any stdio agent, at /acp/ws), the official TypeScript
SDK's ws-client, aiohttp as a bare WebSocket client that sends what no SDK would, and
acp-tee itself on the other end of a chain. Every byte compared as bytes."""

from __future__ import annotations

import asyncio
import base64
import http.client
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import orjson
import pytest

from tests.conftest import REPO, run_tool, tool_argv, tool_env

CLIENTS = REPO / "tests" / "clients"
NODE = shutil.which("node")
ACPREMOTE = shutil.which("acpremote") or str(Path(sys.executable).parent / "acpremote")
WIRE_V1 = REPO / "tests" / "fixtures" / "formats" / "wire-v1.jsonl"
SECRET = "sk-live-0123456789abcdef"


def _lines(path: Path) -> list[dict]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def _client_frames() -> bytes:
    """The client's side of the echo session of the format fixtures, as stdin bytes."""
    return b"".join(r["raw"].encode() + b"\n" for r in _lines(WIRE_V1)[1:]
                    if r.get("dir") == "c2a")


def _frames(log: Path) -> list[tuple]:
    return [(r["seq"], r["dir"], r["raw"]) for r in _lines(log) if "dir" in r]


def _events(log: Path, kind: str | None = None) -> list[dict]:
    return [r for r in _lines(log) if "event" in r and (kind is None or r["event"] == kind)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else proc.returncode
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


class Server:
    """A real server process on loopback, ended with SIGTERM."""

    def __init__(self, argv: list[str], port: int | None = None, env: dict | None = None):
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env or tool_env())
        self.stderr = b""
        if port is None:  # acp-tee --listen on port 0 says where it listens
            line = self.proc.stderr.readline()
            assert b"listening on " in line, line + self.proc.stderr.read()
            self.url = line.split(b"listening on ", 1)[1].strip().decode()
        else:
            _wait_port(port, self.proc)
            self.url = f"ws://127.0.0.1:{port}/acp/ws"

    def stop(self) -> int:
        """SIGTERM, and what it said on stderr (once: stopping again returns the same)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        elif self.proc.stderr is None or self.proc.stderr.closed:
            return self.proc.returncode
        try:
            _out, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _out, err = self.proc.communicate()
        self.stderr += err
        return self.proc.returncode

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def acpremote(*extra: str) -> Server:
    """acpremote serving the echo agent (a real WebSocket peer not written to the RFD)."""
    port = _free_port()
    return Server([ACPREMOTE, "expose", "--host", "127.0.0.1", "--port", str(port), *extra,
                   "--", *tool_argv("echo-agent")], port)


def listener(log: Path, *agent: str, extra: tuple[str, ...] = ()) -> Server:
    """acp-tee --listen on a free port in front of ``agent`` (``--connect URL`` or a
    command)."""
    argv = tool_argv("tee", "-o", str(log), "--clock", "epoch", "--no-host", *extra,
                     "--listen", "ws://127.0.0.1:0/acp")
    if agent and agent[0] == "--connect":
        argv += list(agent)
    else:
        argv += ["--", *(agent or tool_argv("echo-agent"))]
    return Server(argv)


def tee_connect(url: str, log: Path, stdin: bytes, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(tool_argv("tee", "-o", str(log), "--clock", "epoch", "--no-host",
                                    *extra, "--connect", url),
                          input=stdin, capture_output=True, env=tool_env(), timeout=120)


def tee_stdio(log: Path, stdin: bytes) -> subprocess.CompletedProcess:
    return subprocess.run(tool_argv("tee", "-o", str(log), "--clock", "epoch", "--no-host",
                                    "--", *tool_argv("echo-agent")),
                          input=stdin, capture_output=True, env=tool_env(), timeout=120)


# -- stdio client, remote agent --------------------------------------------------------


@pytest.mark.slow  # acp-tee, acpremote and an agent: real processes for seconds
def test_connect_to_acpremote_is_the_stdio_session(tmp_path):
    """An editor on stdio reaching the echo agent served by acpremote gets the bytes it
    gets from the agent on stdio, and the log holds the same frames, which convert,
    replay and align as the stdio recording's do."""
    stdin = _client_frames()
    local = tee_stdio(tmp_path / "stdio.jsonl", stdin)
    assert local.returncode == 0, local.stderr
    with acpremote() as server:
        r = tee_connect(server.url, tmp_path / "ws.jsonl", stdin)
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert r.stdout == local.stdout  # the client's view, byte for byte
    ws, stdio = tmp_path / "ws.jsonl", tmp_path / "stdio.jsonl"
    head = _lines(ws)[0]
    assert head["version"] == 3
    assert head["transport"] == {"client": "stdio", "agent": "ws", "connect": server.url}
    # each direction's frames as sent, in order (the interleaving is the network's)
    for d in ("c2a", "a2c"):
        assert [f[2] for f in _frames(ws) if f[1] == d] == \
            [f[2] for f in _frames(stdio) if f[1] == d]
    # the client's frames are the bytes of its stdin lines; the agent's, of its stdout
    got = [f[2].encode() + b"\n" for f in _frames(ws) if f[1] == "c2a"]
    assert b"".join(got) == stdin
    assert b"".join(f[2].encode() + b"\n" for f in _frames(ws) if f[1] == "a2c") == r.stdout
    opened = _events(ws, "ws-open")
    assert [(e["side"], e["status"]) for e in opened] == [("agent", 101)]
    assert [(e["side"], e["code"]) for e in _events(ws, "ws-close")] == [("agent", 1000)]
    assert _lines(ws)[-1] == {"end": True, "t": 0, "ended": "1970-01-01T00:00:00.000000Z",
                              "status": 0, "frames": len(_frames(ws))}
    # every reader takes it as a stdio recording
    asr_ws, asr_stdio = run_tool("asr", str(ws)), run_tool("asr", str(stdio))
    assert asr_ws.returncode == 0 and asr_ws.stderr == b"", asr_ws.stderr
    assert asr_ws.stdout == asr_stdio.stdout
    for tool in ("frame", "fold"):
        out = run_tool(tool, str(ws))
        assert out.returncode == 0 and out.stderr == b"", (tool, out.stderr)
    replayed = run_tool("replay", "--emit", "a2c", str(ws))
    assert replayed.returncode == 0 and replayed.stdout == local.stdout
    aligned = run_tool("align", str(ws), str(stdio))
    assert aligned.returncode == 0, aligned.stdout
    viewed = run_tool("view", str(ws), "-o", str(tmp_path / "ws.html"))
    assert viewed.returncode == 0 and viewed.stderr == b"", viewed.stderr
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for log in (ws, stdio):
        (corpus / log.name).write_bytes(log.read_bytes())
    batch = run_tool("batch", "asr", str(corpus), "-o", str(tmp_path / "streams"))
    assert batch.returncode == 0, batch.stderr
    made = {p.parent.name: p.read_bytes() for p in (tmp_path / "streams").glob("*/*.asr.jsonl")}
    assert set(made) == {"ws", "stdio"} and made["ws"] == made["stdio"]


def test_an_unreachable_agent_is_said_and_logged(tmp_path):
    port = _free_port()  # nothing listens there
    url = f"ws://127.0.0.1:{port}/acp"
    r = tee_connect(url, tmp_path / "w.jsonl", _client_frames())
    assert r.returncode == 126
    assert r.stderr.startswith(b"acp-tee: cannot connect to " + url.encode() + b": ")
    recs = _lines(tmp_path / "w.jsonl")
    assert recs[1]["event"] == "ws-open" and recs[1]["status"] is None
    assert recs[-1]["end"] is True and recs[-1]["status"] == 126


@pytest.mark.slow  # acp-tee, acpremote and an agent: real processes for seconds
def test_credentials_pass_through_and_are_redacted_in_the_log(tmp_path):
    """acpremote refuses a client without its bearer token; with --header the token
    reaches it (the session runs), and the log holds a redaction token in its place."""
    stdin = _client_frames()
    with acpremote("--bearer-token", SECRET) as server:
        refused = tee_connect(server.url, tmp_path / "no.jsonl", stdin)
        auth = ("--header", f"Authorization: Bearer {SECRET}")
        ok = tee_connect(server.url, tmp_path / "yes.jsonl", stdin, *auth)
        kept = tee_connect(server.url, tmp_path / "kept.jsonl", stdin, *auth, "--keep-secrets")
    assert refused.returncode == 126 and b"401" in refused.stderr
    assert _events(tmp_path / "no.jsonl", "ws-open")[0]["status"] == 401
    assert ok.returncode == 0 and ok.stdout.count(b"\n") == 36, ok.stderr
    log = (tmp_path / "yes.jsonl").read_bytes()
    assert SECRET.encode() not in log
    sent = dict(_events(tmp_path / "yes.jsonl", "ws-open")[0]["request"])
    assert sent["Authorization"].startswith("<redacted hmac-blake3:")
    assert kept.returncode == 0
    assert dict(_events(tmp_path / "kept.jsonl", "ws-open")[0]["request"]) == {
        "Authorization": f"Bearer {SECRET}"}


@pytest.mark.slow  # acp-tee, acpremote and an agent: real processes for seconds
def test_credentials_in_urls_and_the_agents_command_line_are_redacted_in_the_log(tmp_path):
    """A password and a token parameter in the --connect URL reach the agent (the
    session runs) and are tokens in the header's transport and the ws-open event; the
    agent command line of a listener's log is redacted as on stdio; --keep-secrets
    logs the URL as given."""
    stdin = _client_frames()
    log, kept = tmp_path / "c.jsonl", tmp_path / "k.jsonl"
    with acpremote() as server:
        host = server.url.split("://", 1)[1]
        url = f"ws://me:{SECRET}@{host}?v=1&token={SECRET}-2"
        r = tee_connect(url, log, stdin)
        k = tee_connect(url, kept, stdin, "--keep-secrets")
    assert r.returncode == 0 and r.stdout.count(b"\n") == 36, r.stderr
    assert SECRET.encode() not in log.read_bytes()
    connect = _lines(log)[0]["transport"]["connect"]
    assert connect.startswith("ws://me:<redacted hmac-blake3:")
    assert connect.endswith("@" + host + "?v=1&token=<redacted hmac-blake3:" +
                            connect.split("&token=<redacted hmac-blake3:")[1])
    assert _events(log, "ws-open")[0]["url"] == connect  # the same key: the same tokens
    assert k.returncode == 0
    assert _lines(kept)[0]["transport"]["connect"] == url
    assert _events(kept, "ws-open")[0]["url"] == url
    listened = tmp_path / "l.jsonl"
    # the echo agent behind sh, whose arguments ($1, $2) it leaves unused
    agent = ["sh", "-c", shlex.join(tool_argv("echo-agent")), "sh", "--api-key", SECRET]
    with listener(listened, *agent) as server:
        got = asyncio.run(_bare_client(server.url, [INIT], wait_for=1))
    assert got and b'"result"' in got[0][1]
    assert SECRET.encode() not in listened.read_bytes()
    argv = _lines(listened)[0]["argv"]
    assert argv[-2] == "--api-key" and argv[-1].startswith("<redacted hmac-blake3:")


# -- listening: a remote client -----------------------------------------------------------


needs_node = pytest.mark.skipif(
    not os.environ.get("CI") and (NODE is None or not (
        CLIENTS / "node_modules" / "@agentclientprotocol" / "sdk").is_dir()),
    reason="needs node and `npm ci` in tests/clients (make install)")


def _sdk_stdio(log: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [NODE, str(CLIENTS / "sdk_client.mjs"), "3", "2", "--",
         *tool_argv("tee", "-o", str(log), "--clock", "epoch", "--no-host", "--",
                    *tool_argv("echo-agent"))],
        capture_output=True, env=tool_env(), timeout=120, cwd=CLIENTS)


def _sdk_remote(url: str, *headers: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [NODE, "--experimental-websocket", str(CLIENTS / "sdk_remote_client.mjs"), url, "3",
         "2", *headers], capture_output=True, env=tool_env(), timeout=120, cwd=CLIENTS)


@needs_node
@pytest.mark.slow  # the TypeScript SDK as the peer (node)
def test_the_sdk_ws_client_through_a_listener_is_the_stdio_session(tmp_path):
    """The TypeScript SDK's WebSocket client against acp-tee --listen -- echo-agent sees
    what its stdio client sees against acp-tee -- echo-agent, and the WebSocket
    recording folds to the same ASR bytes as the stdio recording of the session."""
    stdio, ws = tmp_path / "stdio.jsonl", tmp_path / "ws.jsonl"
    local = _sdk_stdio(stdio)
    assert local.returncode == 0, local.stderr
    with listener(ws) as server:
        remote = _sdk_remote(server.url)
        status = server.stop()
    assert remote.returncode == 0, remote.stderr
    assert status == 0, server.stderr
    assert remote.stdout == local.stdout
    assert _frames(ws) == _frames(stdio)  # the same session, frame for frame
    head = _lines(ws)[0]
    assert head["transport"] == {"client": "ws", "listen": "ws://127.0.0.1:0/acp",
                                 "agent": "stdio"}
    assert head["argv"] == _lines(stdio)[0]["argv"]
    accepted = _events(ws, "ws-accept")
    assert len(accepted) == 1 and dict(accepted[0]["response"])["Acp-Connection-Id"]
    for tool in ("asr", "fold", "frame"):
        a, b = run_tool(tool, str(ws)), run_tool(tool, str(stdio))
        assert a.returncode == 0 and a.stderr == b"", (tool, a.stderr)
        if tool == "asr":
            assert a.stdout == b.stdout
        else:  # their headers name the wire header (its transport differs); not the rest
            assert a.stdout.split(b"\n", 1)[1] == b.stdout.split(b"\n", 1)[1], tool
    validated = run_tool("frame", "--validate", str(ws))
    assert validated.returncode == 0, validated.stdout


async def _bare_client(url: str, sends: list, close: tuple[int, bytes] = (1000, b""),
                       headers: dict | None = None, wait_for: int = 0) -> list:
    """aiohttp as a bare WebSocket client: sends each item (str: a text frame's text,
    bytes: a binary frame), reads ``wait_for`` frames, closes with ``close``; returns
    what it received as (type, bytes) pairs at its own socket."""
    got: list = []
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url, headers=headers or {}, max_msg_size=0) as ws:
            for item in sends:
                if isinstance(item, bytes):
                    await ws.send_bytes(item)
                else:
                    await ws.send_frame(item.encode("utf-8"), aiohttp.WSMsgType.TEXT)
            while len(got) < wait_for:
                msg = await asyncio.wait_for(ws.receive(), 30)
                if msg.type is aiohttp.WSMsgType.TEXT:
                    got.append(("text", msg.data.encode("utf-8")))
                elif msg.type is aiohttp.WSMsgType.BINARY:
                    got.append(("binary", msg.data))
                else:
                    break
            await ws.close(code=close[0], message=close[1])
    return got


INIT = ('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,'
        '"info":{"name":"bare","version":"1"},"capabilities":{}}}')
ODD = ('{ "jsonrpc" : "2.0", "id" : "é\\u00e9", "method" : "session/new", "params" : '
       '{"cwd":"/tmp","mcpServers":[]} }')


def test_a_chain_of_listeners_relays_every_byte_binary_and_close(tmp_path):
    """client -> acp-tee --listen --connect -> acp-tee --listen -- echo-agent: text
    frames with odd spacing, escapes and non-ASCII, a frame that is not JSON, and a
    binary frame reach the inner proxy as the client sent them; the agent's frames
    reach the client as the inner proxy logged them; the close code and reason are
    passed on; Acp-Connection-Id passes back."""
    outer_log, inner_log = tmp_path / "outer.jsonl", tmp_path / "inner.jsonl"
    blob = bytes(range(256))
    sends = [INIT, blob, ODD, "not json at all"]
    with listener(inner_log) as inner:
        with listener(outer_log, "--connect", inner.url) as outer:
            got = asyncio.run(_bare_client(outer.url, sends, close=(4001, b"bye now"),
                                           wait_for=3))
            assert outer.stop() == 0, outer.stderr
        assert inner.stop() == 0, inner.stderr
    for log in (outer_log, inner_log):
        c2a = [f[2].encode() for f in _frames(log) if f[1] == "c2a"]
        assert c2a == [s.encode() for s in sends if isinstance(s, str)]
        binary = _events(log, "ws-binary")
        assert [(e["side"], base64.b64decode(e["raw_b64"])) for e in binary] == \
            [("client", blob)]
        assert [(e["side"], e["code"], e["reason"]) for e in _events(log, "ws-close")
                if e["side"] == "client"] == [("client", 4001, "bye now")]
    # what the client got at its socket is what each proxy logged from the agent
    assert [g for g in got] == [("text", f[2].encode()) for f in _frames(inner_log)
                                if f[1] == "a2c"][:3]
    assert [f for f in _frames(outer_log) if f[1] == "a2c"][:3] == \
        [f for f in _frames(inner_log) if f[1] == "a2c"][:3]
    inner_id = dict(_events(inner_log, "ws-accept")[0]["response"])["Acp-Connection-Id"]
    outer_resp = dict(_events(outer_log, "ws-accept")[0]["response"])
    assert outer_resp["Acp-Connection-Id"] == inner_id  # passed through, not minted
    # the frame that is not JSON is reported by acp-frame, and the session went on
    framed = run_tool("frame", str(inner_log))
    assert framed.returncode == 0
    assert b"not JSON" in framed.stderr
    kinds = [orjson.loads(x).get("kind") for x in framed.stdout.splitlines()[1:]]
    assert "invalid_json" in kinds and "response" in kinds


def test_each_connection_to_a_listener_gets_its_own_log(tmp_path):
    log = tmp_path / "l.jsonl"
    with listener(log) as server:
        for _ in range(2):
            got = asyncio.run(_bare_client(server.url, [INIT], wait_for=1))
            assert got and b'"result"' in got[0][1]
    assert server.proc.returncode == 0
    for path in (log, tmp_path / "l-1.jsonl"):
        frames = _frames(path)
        assert [f[1] for f in frames] == ["c2a", "a2c"] and frames[0][2] == INIT
        assert _lines(path)[-1]["end"] is True


def test_the_agent_process_behind_a_listener_is_ended_with_the_connection(tmp_path):
    """The client goes; its agent's stdin is closed and the agent exits; the log ends
    with the agent's exit status."""
    log = tmp_path / "l.jsonl"
    script = "import sys\nfor line in sys.stdin: print(line, end='', flush=True)\nsys.exit(3)"
    with listener(log, sys.executable, "-c", script) as server:
        got = asyncio.run(_bare_client(server.url, ['{"x":1}'], wait_for=1))
        assert got == [("text", b'{"x":1}')]
        deadline = time.monotonic() + 30
        while not _lines(log)[-1].get("end") and time.monotonic() < deadline:
            time.sleep(0.05)
    end = _lines(log)[-1]
    assert end["end"] is True and end["status"] == 3


def test_a_log_that_cannot_be_written_never_stops_the_session(tmp_path):
    bad = tmp_path / "missing" / "dir" / "x.jsonl"
    (tmp_path / "missing").write_text("a file, not a directory")
    with listener(bad) as server:
        got = asyncio.run(_bare_client(server.url, [INIT], wait_for=1))
        server.stop()
    assert got and b'"result"' in got[0][1]
    assert b"cannot write the log" in server.stderr and b"the session goes on" in server.stderr


@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_the_documented_remote_example_records_a_valid_session(scheme, tmp_path):
    """docs/acp-tee.md: a listener serving the echo agent, and `--script` driving it over
    `--connect`: the recording is valid ACP (piping the script in all at once, as the page
    once showed, is not: the client does not wait as an editor does), the client gets the
    bytes a stdio session gives, and both logs hold the same frames."""
    doc = (REPO / "docs" / "acp-tee.md").read_text()
    assert ("acp-tee -o s.jsonl --script client.jsonl --connect ws://127.0.0.1:8080/acp "
            "> agent.jsonl") in doc
    client = REPO / "examples" / "hello" / "client.jsonl"
    with Server(tool_argv("tee", "-o", str(tmp_path / "served.jsonl"), "--clock", "epoch",
                          "--no-host", "--listen", f"{scheme}://127.0.0.1:0/acp", "--",
                          *tool_argv("echo-agent"))) as server:
        r = subprocess.run(tool_argv("tee", "-o", str(tmp_path / "s.jsonl"), "--script",
                                     str(client), "--connect", server.url),
                           capture_output=True, env=tool_env(), timeout=120,
                           stdin=subprocess.DEVNULL)
    assert (r.returncode, r.stderr) == (0, b"")
    assert r.stdout == (REPO / "examples" / "hello" / "agent.jsonl").read_bytes()
    valid = run_tool("frame", "--validate", "--format", "table", str(tmp_path / "s.jsonl"))
    assert valid.returncode == 0, valid.stdout
    assert valid.stdout.decode().endswith(": 42 frames, ACP 2 (agreed), v2.0.0-alpha.9: valid\n")
    assert _frames(tmp_path / "s.jsonl") == _frames(tmp_path / "served.jsonl")


@pytest.mark.parametrize("args, message", [
    (["--script", "x.jsonl", "--listen", "ws://127.0.0.1:0/acp", "--", "true"],
     b"--script is the client: it does not go with --listen"),
    (["--connect", "ftp://x/acp"], b"expected a ws:// or wss:// or http:// or https:// URL"),
    (["--listen", "ws://127.0.0.1:0/acp"], b"--listen needs an agent"),
    (["--connect", "ws://127.0.0.1:9/acp", "--", "agent"], b"give it or -- AGENT, not both"),
    (["--header", "nocolon", "--connect", "ws://127.0.0.1:9/acp"], b"--header needs"),
    (["--header", "A: b", "--", "true"], b"--header, --protocol and --http2 go with --connect or"),
    (["--http2", "--", "true"], b"--header, --protocol and --http2 go with --connect or"),
    (["--http2", "--connect", "ws://127.0.0.1:9/acp"], b"--http2 is how acp-tee speaks to an"),
    (["--http2", "--listen", "http://127.0.0.1:0/acp", "--", "true"],
     b"(a listener takes HTTP/2 without it)"),
])
def test_usage_errors(args, message):
    r = run_tool("tee", *args, input=b"")
    assert r.returncode == 2 and message in r.stderr, r.stderr


# -- acp-replay --listen ------------------------------------------------------------------


def replay_listener(*args: str) -> Server:
    return Server(tool_argv("replay", "--listen", "ws://127.0.0.1:0/acp", *args))


def test_replay_of_a_trace_listens_on_websocket(tmp_path):
    """acp-replay TRACE --listen: a remote client sending the recorded client frames
    gets the recorded agent frames, byte for byte, on each connection."""
    log = tmp_path / "s.jsonl"
    stdin = _client_frames()
    assert tee_stdio(log, stdin).returncode == 0
    want = run_tool("replay", "--emit", "a2c", str(log)).stdout.splitlines()
    sends = [x.decode() for x in stdin.splitlines()]
    with replay_listener(str(log)) as server:
        for _ in range(2):
            got = asyncio.run(_bare_client(server.url, sends, wait_for=len(want)))
            assert [g[1] for g in got] == want
            assert {g[0] for g in got} == {"text"}


@needs_node
@pytest.mark.slow  # the TypeScript SDK as the peer (node)
def test_replay_serve_listens_for_the_sdk_ws_client(tmp_path):
    """acp-replay --serve STREAM --listen: the TypeScript SDK's WebSocket client lists,
    resumes and closes the stored session as its stdio client does."""
    log = tmp_path / "s.jsonl"
    assert tee_stdio(log, _client_frames()).returncode == 0
    stream = tmp_path / "s.asr.jsonl"
    stream.write_bytes(run_tool("asr", str(log)).stdout)
    local = subprocess.run([NODE, str(CLIENTS / "sdk_serve_client.mjs"), "sess-1", "--",
                            *tool_argv("replay", "--serve", str(stream))],
                           capture_output=True, env=tool_env(), timeout=60)
    assert local.returncode == 0, local.stderr
    with replay_listener("--serve", str(stream)) as server:
        remote = subprocess.run([NODE, "--experimental-websocket",
                                 str(CLIENTS / "sdk_serve_client.mjs"), "sess-1", "--",
                                 server.url],
                                capture_output=True, env=tool_env(), timeout=60)
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout
    assert b'"step":"list"' in remote.stdout and b'"done":true' in remote.stdout


# -- Streamable HTTP: the TypeScript SDK's own server and http-client -----------------------


def sdk_server() -> Server:
    """The TypeScript SDK's experimental ACP server (Streamable HTTP) in front of the
    echo agent."""
    return Server([NODE, str(CLIENTS / "sdk_http_server.mjs"), "0", "--",
                   *tool_argv("echo-agent")])


def _check_http_log(log: Path) -> None:
    """What the RFD's transport looks like in a log: POST statuses (200 with a body for
    initialize, 202 otherwise), SSE frames whose raw is their event's joined data and
    whose sseq counts up within their stream, a DELETE."""
    recs = _lines(log)[1:]
    status = {e["stream"]: e["status"] for e in recs if e.get("event") == "http-response"}
    posts = sorted((s for s in status if s.startswith("post:")), key=lambda s: int(s[5:]))
    assert status[posts[0]] == 200 and {status[s] for s in posts[1:]} == {202}
    assert status["get"] == 200 and status["delete"] == 202
    assert any(s.startswith("get:") for s in status)  # a session-scoped stream
    frames = [r for r in recs if "dir" in r]
    assert frames[0]["stream"] == posts[0] and frames[0]["dir"] == "c2a"
    assert frames[1]["stream"] == posts[0] and frames[1]["dir"] == "a2c"  # the 200's body
    per: dict[str, list[int]] = {}
    for f in frames:
        per.setdefault(f["stream"], []).append(f["sseq"])
        if f["stream"].startswith("get"):
            assert f["sse"] == "data: " + f["raw"] + "\n\n"  # the event's own bytes
    assert all(v == list(range(len(v))) for v in per.values())


@needs_node
@pytest.mark.slow  # the TypeScript SDK as the peer (node)
def test_connect_http_reaches_the_sdk_server(tmp_path):
    """A stdio client through acp-tee --connect http:// to the SDK's server: POSTs,
    the connection's and the session's SSE streams, DELETE; the client gets every
    frame it gets on stdio (order holds within a stream only, so compared as a set,
    and within each stream in order)."""
    stdin = _client_frames()
    local = tee_stdio(tmp_path / "stdio.jsonl", stdin)
    with sdk_server() as server:
        r = tee_connect(server.url, tmp_path / "h.jsonl", stdin)
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert sorted(r.stdout.splitlines()) == sorted(local.stdout.splitlines())
    log = tmp_path / "h.jsonl"
    assert _lines(log)[0]["transport"] == {"client": "stdio", "agent": "http",
                                           "connect": server.url}
    _check_http_log(log)
    c2a = [f[2].encode() + b"\n" for f in _frames(log) if f[1] == "c2a"]
    assert b"".join(c2a) == stdin
    assert b"".join(f[2].encode() + b"\n" for f in _frames(log) if f[1] == "a2c") == r.stdout
    for tool in ("asr", "fold", "frame"):
        out = run_tool(tool, str(log))
        assert out.returncode == 0 and out.stderr == b"", (tool, out.stderr)


@needs_node
@pytest.mark.slow  # the TypeScript SDK as the peer (node)
def test_the_sdk_http_client_through_a_recording_proxy(tmp_path):
    """The SDK's http-client -> acp-tee --listen http:// --connect http:// -> the SDK's
    server: the client sees what its stdio twin sees, and the recording converts to the
    ASR of the stdio recording of the same session."""
    stdio, log = tmp_path / "stdio.jsonl", tmp_path / "p.jsonl"
    local = _sdk_stdio(stdio)
    assert local.returncode == 0, local.stderr
    with sdk_server() as server:
        proxy = Server(tool_argv("tee", "-o", str(log), "--clock", "epoch", "--no-host",
                                 "--listen", "http://127.0.0.1:0/acp", "--connect",
                                 server.url))
        with proxy:
            remote = _sdk_remote(proxy.url, '{"Authorization":"Bearer ' + SECRET + '"}')
            assert proxy.stop() == 0, proxy.stderr
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout
    _check_http_log(log)
    text = log.read_bytes()
    assert SECRET.encode() not in text and b"<redacted hmac-blake3:" in text
    assert _lines(log)[-1]["end"] is True
    _same_session_as(log, stdio)


@pytest.mark.slow  # three real processes
def test_a_proxy_listener_stopped_with_a_connection_open_ends_cleanly(tmp_path):
    """acp-tee --listen http:// --connect http:// stopped while a client's connection is
    still open (keep-alive, after one answered request) ends that connection and exits 0
    with its log ended: the connections it ends leave the table it walks."""
    with Server(tool_argv("tee", "-o", str(tmp_path / "up.jsonl"), "--no-host",
                          "--listen", "http://127.0.0.1:0/acp", "--",
                          *tool_argv("echo-agent"))) as upstream:
        log = tmp_path / "p.jsonl"
        proxy = Server(tool_argv("tee", "-o", str(log), "--no-host", "--listen",
                                 "http://127.0.0.1:0/acp", "--connect", upstream.url))
        with proxy:
            host = proxy.url.split("//", 1)[1].split("/", 1)[0]
            conn = http.client.HTTPConnection(host, timeout=30)
            conn.request("POST", "/acp", orjson.dumps(
                {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                 "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
                {"Content-Type": "application/json",
                 "Accept": "application/json, text/event-stream"})
            answer = conn.getresponse()
            assert answer.status == 200 and b'"id":0,"result"' in answer.read()
            # the connection stays open (HTTP/1.1 keep-alive) while the proxy stops
            assert proxy.stop() == 0, proxy.stderr
            assert b"internal error" not in proxy.stderr
            conn.close()
    assert _lines(log)[-1]["end"] is True


def _frames_of(log: Path) -> list[tuple]:
    return [(f[1], f[2]) for f in _frames(log)]


def _same_session_as(log: Path, stdio: Path) -> None:
    """A remote recording holds the stdio recording's frames, and converts to its ASR."""
    assert sorted(_frames_of(log)) == sorted(_frames_of(stdio))
    a, b = run_tool("asr", str(log)), run_tool("asr", str(stdio))
    assert a.returncode == 0 and a.stderr == b"", a.stderr
    assert a.stdout == b.stdout


@needs_node
@pytest.mark.slow  # the TypeScript SDK as the peer (node)
def test_the_sdk_http_client_against_a_local_agent_served_over_http(tmp_path):
    """acp-tee --listen http:// -- echo-agent is an RFD server: the SDK's http-client
    runs its session as over stdio, and the recording converts to the same ASR."""
    stdio, log = tmp_path / "stdio.jsonl", tmp_path / "h.jsonl"
    local = _sdk_stdio(stdio)
    assert local.returncode == 0, local.stderr
    server = Server(tool_argv("tee", "-o", str(log), "--clock", "epoch", "--no-host",
                              "--listen", "http://127.0.0.1:0/acp", "--",
                              *tool_argv("echo-agent")))
    with server:
        remote = _sdk_remote(server.url)
        assert server.stop() == 0, server.stderr
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout
    _check_http_log(log)
    _same_session_as(log, stdio)


@needs_node
@pytest.mark.slow  # the TypeScript SDK as the peer (node)
def test_replay_serve_listens_for_the_sdk_http_client(tmp_path):
    log = tmp_path / "s.jsonl"
    assert tee_stdio(log, _client_frames()).returncode == 0
    stream = tmp_path / "s.asr.jsonl"
    stream.write_bytes(run_tool("asr", str(log)).stdout)
    local = subprocess.run([NODE, str(CLIENTS / "sdk_serve_client.mjs"), "sess-1", "--",
                            *tool_argv("replay", "--serve", str(stream))],
                           capture_output=True, env=tool_env(), timeout=60)
    server = Server(tool_argv("replay", "--listen", "http://127.0.0.1:0/acp", "--serve",
                              str(stream)))
    with server:
        remote = subprocess.run([NODE, str(CLIENTS / "sdk_serve_client.mjs"), "sess-1",
                                 "--", server.url],
                                capture_output=True, env=tool_env(), timeout=60)
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout


# -- bad input on the network side ----------------------------------------------------------


async def _requests(url: str) -> list[tuple[int, bytes]]:
    """What the RFD says a server refuses, sent to acp-tee's HTTP listener."""
    out = []
    async with aiohttp.ClientSession() as http:
        async def go(method, headers=None, data=None):
            async with http.request(method, url, headers=headers or {}, data=data) as r:
                out.append((r.status, await r.read()))
                return r
        await go("POST", {"Content-Type": "text/plain"}, INIT)
        await go("POST", {"Content-Type": "application/json"}, '{"jsonrpc":"2.0","id":1,'
                 '"method":"session/new","params":{}}')                     # no connection
        await go("GET", {"Acp-Connection-Id": "nope", "Accept": "text/event-stream"})
        r = await go("POST", {"Content-Type": "application/json"}, INIT)   # a real one
        cid = r.headers["Acp-Connection-Id"]
        await go("POST", {"Content-Type": "text/plain", "Acp-Connection-Id": cid}, "{}")
        await go("POST", {"Content-Type": "application/json", "Acp-Connection-Id": cid},
                 "[" + INIT + "]")
        await go("GET", {"Acp-Connection-Id": cid, "Accept": "application/json"})
        await go("POST", {"Content-Type": "application/json", "Acp-Connection-Id": cid},
                 "not json")
        await go("DELETE", {"Acp-Connection-Id": cid})
    return out


def test_an_http_listener_refuses_what_the_rfd_refuses_and_goes_on(tmp_path):
    log = tmp_path / "h.jsonl"
    server = Server(tool_argv("tee", "-o", str(log), "--clock", "epoch", "--no-host",
                              "--listen", "http://127.0.0.1:0/acp", "--",
                              *tool_argv("echo-agent")))
    with server:
        got = asyncio.run(_requests(server.url))
        assert server.stop() == 0, server.stderr
    assert [s for s, _ in got] == [415, 400, 404, 200, 415, 501, 406, 202, 202]
    assert orjson.loads(got[3][1])["result"]["protocolVersion"] == 2
    # the connection's log: every request and status, the bodies as frames, the end
    recs = _lines(log)
    statuses = [r["status"] for r in recs if r.get("event") == "http-response"]
    assert statuses == [200, 415, 501, 406, 202, 202]
    c2a = [r["raw"] for r in recs if r.get("dir") == "c2a"]
    assert c2a == [INIT, "{}", "[" + INIT + "]", "not json"]
    assert recs[-1]["end"] is True and recs[-1]["status"] == 0
    framed = run_tool("frame", str(log))
    assert framed.returncode == 0 and b"not JSON" in framed.stderr


@pytest.mark.slow  # a listener and its agents: real processes for seconds
def test_a_log_that_fails_mid_session_never_breaks_it(tmp_path):
    """-o /dev/full: every write fails (ENOSPC); said once, the session goes on."""
    stdin = _client_frames()
    local = tee_stdio(tmp_path / "stdio.jsonl", stdin)
    with acpremote() as server:
        r = tee_connect(server.url, Path("/dev/full"), stdin)
    assert r.returncode == 0
    assert r.stdout == local.stdout
    assert r.stderr.count(b"cannot write the log /dev/full") == 1, r.stderr


def test_a_client_that_vanishes_is_logged_and_its_agent_ended(tmp_path):
    """A client killed mid-session sends no close frame: the log says the connection
    went (no clean close), the agent's stdin is closed, the log gets its end record."""
    log = tmp_path / "l.jsonl"
    code = ("import asyncio, aiohttp, os, sys\n"
            "async def main():\n"
            "    s = aiohttp.ClientSession()\n"
            "    ws = await s.ws_connect(sys.argv[1])\n"
            f"    await ws.send_str({INIT!r})\n"
            "    await ws.receive()\n"
            "    print('ready', flush=True)\n"
            "    os.kill(os.getpid(), 9)\n"
            "asyncio.run(main())\n")
    with listener(log) as server:
        client = subprocess.run([sys.executable, "-c", code, server.url],
                                capture_output=True, timeout=60)
        assert client.stdout == b"ready\n" and client.returncode == -9
        deadline = time.monotonic() + 30
        while not _lines(log)[-1].get("end") and time.monotonic() < deadline:
            time.sleep(0.05)
    recs = _lines(log)
    closes = [r for r in recs if r.get("event") == "ws-close" and r["side"] == "client"]
    assert len(closes) == 1 and closes[0]["code"] != 1000
    assert recs[-1]["end"] is True and recs[-1]["status"] == 0  # the echo agent's, at EOF
    assert [r["dir"] for r in recs if "dir" in r] == ["c2a", "a2c"]


@pytest.mark.slow  # waits out real seconds (an agent's, acp-tee's grace)
def test_grace_is_how_long_a_listeners_agent_is_given_to_end(tmp_path):
    """The client goes; the agent behind the listener, its stdin closed, goes on for
    3 s: within --grace 30 it ends by itself (its own status), past --grace 0.5 its
    group gets SIGTERM (143), as an agent behind stdio acp-tee does. And --grace with
    no local agent to give it to is a usage error."""
    agent = [sys.executable, "-c", "import sys, time\n"
             "sys.stdout.write(sys.stdin.readline()); sys.stdout.flush()\n"
             "sys.stdin.read(); time.sleep(3)\n"]
    code = ("import asyncio, aiohttp, sys\n"
            "async def main():\n"
            "    async with aiohttp.ClientSession() as s:\n"
            "        async with s.ws_connect(sys.argv[1]) as ws:\n"
            f"            await ws.send_str({INIT!r})\n"
            "            await ws.receive()\n"
            "asyncio.run(main())\n")
    for grace, status in (("30", 0), ("0.5", 128 + signal.SIGTERM)):
        log = tmp_path / f"l-{grace}.jsonl"
        with listener(log, *agent, extra=("--grace", grace)) as server:
            client = subprocess.run([sys.executable, "-c", code, server.url],
                                    capture_output=True, timeout=60)
            assert client.returncode == 0, client.stderr
            deadline = time.monotonic() + 60
            while not _lines(log)[-1].get("end") and time.monotonic() < deadline:
                time.sleep(0.05)
        assert _lines(log)[-1]["status"] == status, grace
    r = tee_connect("ws://127.0.0.1:9/acp", tmp_path / "x.jsonl", b"", "--grace", "1")
    assert r.returncode == 2 and b"--grace is how long a local agent" in r.stderr


def test_subprotocols_pass_through_a_proxy(tmp_path):
    """The client offers two subprotocols; the proxy offers them upstream as offered;
    the agent's side (acp-tee --listen --protocol acp.v2 -- echo-agent) chooses one,
    and that one is what the client gets, through the proxy."""
    outer_log, inner_log = tmp_path / "outer.jsonl", tmp_path / "inner.jsonl"

    async def offer(url: str) -> str | None:
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(url, protocols=("x-other", "acp.v2")) as ws:
                await ws.send_str(INIT)
                await ws.receive()
                return ws.protocol

    with listener(inner_log, extra=("--protocol", "acp.v2")) as inner:
        with listener(outer_log, "--connect", inner.url) as outer:
            chosen = asyncio.run(offer(outer.url))
    assert chosen == "acp.v2"
    assert _events(inner_log, "ws-open")[0]["protocols"] == ["x-other", "acp.v2"]
    assert _events(outer_log, "ws-open")[1]["protocol"] == "acp.v2"  # the agent's side
    for log in (outer_log, inner_log):
        assert _events(log, "ws-accept")[0]["protocol"] == "acp.v2"


def test_a_large_frame_and_a_last_line_without_lf_cross_exactly(tmp_path):
    """stdio -> acp-tee --connect -> acp-tee --listen -- echo-agent: a 3 MiB frame
    arrives as its bytes; a last client line without LF is sent as a frame, logged with
    nolf by the stdio side."""
    big = ('{"jsonrpc":"2.0","method":"x/big","params":{"blob":"' + "é" * (3 << 19)
           + '"}}').encode()
    stdin = INIT.encode() + b"\n" + big + b"\n" + ODD.encode()
    inner_log, outer_log = tmp_path / "inner.jsonl", tmp_path / "outer.jsonl"
    with listener(inner_log) as inner:
        r = tee_connect(inner.url, outer_log, stdin)
    assert r.returncode == 0, r.stderr
    for log in (outer_log, inner_log):
        c2a = [f for f in _lines(log) if f.get("dir") == "c2a"]
        assert [f["raw"].encode() for f in c2a] == [INIT.encode(), big, ODD.encode()]
    assert [f.get("nolf") for f in _lines(outer_log) if f.get("dir") == "c2a"] == \
        [None, None, True]


@pytest.mark.slow  # a listener and its agents: real processes for seconds
def test_a_clients_view_through_the_proxy_is_its_view_without_it(tmp_path):
    """The same frames to acpremote directly and through acp-tee --listen --connect:
    the client receives the same bytes, and the log holds them as they crossed."""
    sends = [x.decode() for x in _client_frames().splitlines()]
    log = tmp_path / "p.jsonl"
    with acpremote() as server:
        direct = asyncio.run(_bare_client(server.url, sends, wait_for=36))
        with listener(log, "--connect", server.url) as proxy:
            through = asyncio.run(_bare_client(proxy.url, sends, wait_for=36))
    assert len(direct) == 36 and through == direct
    assert [("text", f[2].encode()) for f in _frames(log) if f[1] == "a2c"] == through
    assert [f[2] for f in _frames(log) if f[1] == "c2a"] == sends


# -- a close acp-tee starts: the peer's frames until its answering close ---------------------


LATE_PEER = r'''
import asyncio, json, sys
from aiohttp import WSMsgType, web

async def handle(request):
    """Answers each request; at acp-tee's close frame it sends three notifications
    first (frames in flight as the close happens), then its own close frame; or, with
    the argument silent, nothing at all."""
    ws = web.WebSocketResponse(autoclose=False)
    await ws.prepare(request)
    while True:
        msg = await ws.receive()
        if msg.type is WSMsgType.TEXT:
            req = json.loads(msg.data)
            await ws.send_str(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {}}))
        elif msg.type is WSMsgType.CLOSE:
            if sys.argv[1:] == ["silent"]:  # never answers it
                await asyncio.Event().wait()
            for n in range(3):
                await ws.send_str(json.dumps({"jsonrpc": "2.0", "method": "late",
                                              "params": {"n": n}}))
            await ws.close(code=4000, message=b"after the late ones")
            break
        else:
            break
    return ws

async def main():
    app = web.Application()
    app.router.add_get("/acp", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print("listening on ws://127.0.0.1:%d/acp" % site._server.sockets[0].getsockname()[1],
          file=sys.stderr, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
'''

LATE = ['{"jsonrpc": "2.0", "method": "late", "params": {"n": ' + str(n) + "}}"
        for n in range(3)]


def test_agent_frames_sent_as_acp_tee_closes_are_logged_and_forwarded(tmp_path):
    """The stdio client's input ends; acp-tee closes the agent's WebSocket; the agent's
    frames that arrive before its answering close frame are logged and reach the
    client, and the close logged is the agent's answer (its code and reason)."""
    log = tmp_path / "late.jsonl"
    with Server([sys.executable, "-c", LATE_PEER]) as peer:
        r = tee_connect(peer.url, log, INIT.encode() + b"\n")
    assert r.returncode == 1, r.stderr  # the agent's side closed with 4000, not cleanly
    a2c = [f[2] for f in _frames(log) if f[1] == "a2c"]
    assert a2c == ['{"jsonrpc": "2.0", "id": 0, "result": {}}', *LATE]
    assert r.stdout == b"".join(f.encode() + b"\n" for f in a2c)
    assert [(e["side"], e["code"], e["reason"]) for e in _events(log, "ws-close")] == \
        [("agent", 4000, "after the late ones")]
    assert _lines(log)[-1]["frames"] == 5  # INIT and the four answers


def test_the_private_aiohttp_surface_acp_tee_stands_on_is_there():
    """aiohttp has no public call to drop a WebSocket without (another) close frame, nor
    for a client's handshake answer, nor to see a client's frames before its reader:
    acp_pipes.tee.remote uses these private names (_let_go, the ws-accept's headers,
    _ClientWs). An aiohttp that renames them fails here, by name,
    not in a live session's last second."""
    import inspect

    from aiohttp import client_ws, web

    assert callable(getattr(client_ws.ClientWebSocketResponse, "_set_closed", None))
    assert callable(getattr(web.WebSocketResponse, "_set_closed", None))
    assert callable(getattr(web.WebSocketResponse, "_close_transport", None))
    assert "self._response = " in inspect.getsource(client_ws.ClientWebSocketResponse.__init__)
    # the listener's mask check (_ClientWs): the frame reader is made in _post_start,
    # fed what followed the upgrade's head (_message_tail), kept as _payload_parser,
    # its queue as _reader
    post_start = inspect.getsource(web.WebSocketResponse._post_start)
    assert "self._reader = " in post_start and "set_parser(self._parser" in post_start
    from aiohttp import web_protocol

    set_parser = inspect.getsource(web_protocol.RequestHandler.set_parser)
    assert "self._payload_parser = parser" in set_parser and "_message_tail" in set_parser


@pytest.mark.slow  # waits out real seconds (an agent's, acp-tee's grace)
def test_an_agent_that_never_answers_the_close_is_dropped(tmp_path):
    """The wait for the agent's answering close frame is bounded (GRACE, 5 s): then
    acp-tee drops the connection, logs 1006 and ends."""
    log = tmp_path / "silent.jsonl"
    with Server([sys.executable, "-c", LATE_PEER, "silent"]) as peer:
        start = time.monotonic()
        r = tee_connect(peer.url, log, INIT.encode() + b"\n")
        took = time.monotonic() - start
    assert r.returncode == 1, r.stderr
    assert 4 < took < 30
    assert r.stdout == b'{"jsonrpc": "2.0", "id": 0, "result": {}}\n'
    assert [(e["side"], e["code"]) for e in _events(log, "ws-close")] == [("agent", 1006)]
    assert _lines(log)[-1]["end"] is True and _lines(log)[-1]["status"] == 1


def test_client_frames_sent_as_acp_tee_closes_are_logged(tmp_path):
    """The agent behind a listener exits; acp-tee closes the client's WebSocket; what
    the client sends before its answering close frame is logged (there is no agent
    left to take it)."""
    log = tmp_path / "l.jsonl"
    script = "import sys\nprint(sys.stdin.readline(), end='', flush=True)\n"
    code = ("import asyncio, aiohttp, sys\n"
            "async def main():\n"
            "    async with aiohttp.ClientSession() as s:\n"
            "        ws = await s.ws_connect(sys.argv[1], autoclose=False)\n"
            "        await ws.send_str('{\"x\":1}')\n"
            "        while (msg := await ws.receive()).type is aiohttp.WSMsgType.TEXT:\n"
            "            print(msg.data, flush=True)\n"
            "        print(msg.type.name, msg.data, flush=True)\n"
            "        for n in range(2):\n"
            "            await ws.send_str('{\"after\":%d}' % n)\n"
            "        await ws.close(code=1000)\n"
            "asyncio.run(main())\n")
    with listener(log, sys.executable, "-c", script) as server:
        client = subprocess.run([sys.executable, "-c", code, server.url],
                                capture_output=True, timeout=60)
        deadline = time.monotonic() + 30
        while not _lines(log)[-1].get("end") and time.monotonic() < deadline:
            time.sleep(0.05)
    assert client.returncode == 0, client.stderr
    assert client.stdout == b'{"x":1}\nCLOSE 1000\n'
    assert [(f[1], f[2]) for f in _frames(log)] == [
        ("c2a", '{"x":1}'), ("a2c", '{"x":1}'), ("c2a", '{"after":0}'),
        ("c2a", '{"after":1}')]
    assert [(e["side"], e["code"]) for e in _events(log, "ws-close")] == [("client", 1000)]
    assert _lines(log)[-1]["end"] is True and _lines(log)[-1]["status"] == 0


def test_agent_frames_sent_as_a_stopped_listener_closes_are_logged(tmp_path):
    """SIGTERM to a recording proxy closes both sides (1001); what the agent sends
    before its answering close frame is logged (the client is being closed too)."""
    log = tmp_path / "p.jsonl"
    code = ("import asyncio, aiohttp, sys\n"
            "async def main():\n"
            "    async with aiohttp.ClientSession() as s:\n"
            "        ws = await s.ws_connect(sys.argv[1])\n"
            f"        await ws.send_str({INIT!r})\n"
            "        print((await ws.receive()).data, flush=True)\n"
            "        print((await ws.receive()).type.name, flush=True)\n"
            "asyncio.run(main())\n")
    with Server([sys.executable, "-c", LATE_PEER]) as peer:
        with listener(log, "--connect", peer.url) as proxy:
            client = subprocess.Popen([sys.executable, "-c", code, proxy.url],
                                      stdout=subprocess.PIPE)
            assert client.stdout.readline() == b'{"jsonrpc": "2.0", "id": 0, "result": {}}\n'
            assert proxy.stop() == 0, proxy.stderr
            assert client.stdout.read() == b"CLOSE\n" and client.wait(timeout=30) == 0
    a2c = [f[2] for f in _frames(log) if f[1] == "a2c"]
    assert a2c == ['{"jsonrpc": "2.0", "id": 0, "result": {}}', *LATE]
    assert _lines(log)[-1]["end"] is True

"""acp-tee's Streamable HTTP over HTTP/2, against real HTTP/2 peers on loopback: the
official TypeScript SDK's http-client with its requests on node:http2 (h2c with prior
knowledge, tests/clients/h2_fetch.mjs), the SDK's server on node:http2 (HTTP/2 only:
sdk_http_server.mjs --h2), and curl --http2-prior-knowledge (nghttp2). What a client
sees through acp-tee is what it sees without it, and the log is the HTTP/1.1 log but
for ``"http": "2"`` and the lower-case header names HTTP/2 has."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_tool, tool_argv, tool_env
from tests.test_tee_remote import (
    CLIENTS,
    INIT,
    NODE,
    SECRET,
    Server,
    _check_http_log,
    _client_frames,
    _frames,
    _lines,
    _same_session_as,
    _sdk_remote,
    _sdk_stdio,
    needs_node,
    tee_connect,
    tee_stdio,
)

CURL = shutil.which("curl")


def _sdk_h2(url: str, *headers: str) -> subprocess.CompletedProcess:
    """The SDK's http-client, every request on one node:http2 connection."""
    return subprocess.run(
        [NODE, str(CLIENTS / "sdk_remote_client.mjs"), url, "3", "2", *headers],
        capture_output=True, env={**tool_env(), "ACP_SDK_HTTP2": "1"}, timeout=120,
        cwd=CLIENTS)


def _sdk_h2_server() -> Server:
    """The SDK's server in front of the echo agent, speaking HTTP/2 only."""
    return Server([NODE, str(CLIENTS / "sdk_http_server.mjs"), "0", "--h2", "--",
                   *tool_argv("echo-agent")])


def _tee_listen(log: Path, *agent: str) -> Server:
    argv = tool_argv("tee", "-o", str(log), "--clock", "epoch", "--no-host",
                     "--listen", "http://127.0.0.1:0/acp")
    if agent and agent[0] == "--connect":
        return Server(argv + list(agent))
    return Server(argv + ["--", *tool_argv("echo-agent")])


def _versions(log: Path) -> set[str]:
    return {r["http"] for r in _lines(log)
            if r.get("event") in ("http-request", "http-response")}


@needs_node
@pytest.mark.slow  # the TypeScript SDK as the peer (node)
def test_the_sdk_client_over_http2_against_a_local_agent_is_the_stdio_session(tmp_path):
    """The SDK's http-client over h2c -> acp-tee --listen http:// -- echo-agent: it runs
    its session as over stdio, and the recording is the RFD's (POST 200/202, the
    connection's and a session's SSE streams, DELETE), every request and answer marked
    HTTP/2, converting to the ASR of the stdio recording."""
    stdio, log = tmp_path / "stdio.jsonl", tmp_path / "h.jsonl"
    local = _sdk_stdio(stdio)
    assert local.returncode == 0, local.stderr
    with _tee_listen(log) as server:
        remote = _sdk_h2(server.url)
        assert server.stop() == 0, server.stderr
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout
    _check_http_log(log)
    assert _versions(log) == {"2"}
    requests = [r for r in _lines(log) if r.get("event") == "http-request"]
    assert all(k == k.lower() for r in requests for k, _v in r["headers"])
    _same_session_as(log, stdio)


@needs_node
@pytest.mark.slow  # the TypeScript SDK as the peer (node)
def test_one_listener_port_serves_http2_http11_and_websocket(tmp_path):
    """One http:// listener, three clients in turn on its one port: the SDK's
    http-client over HTTP/2, over HTTP/1.1 and its WebSocket client; each sees the
    stdio session, each connection has its log, each marked with what carried it."""
    local = _sdk_stdio(tmp_path / "stdio.jsonl")
    log = tmp_path / "l.jsonl"
    with _tee_listen(log) as server:
        h2 = _sdk_h2(server.url)
        h1 = _sdk_remote(server.url)
        ws = _sdk_remote(server.url.replace("http://", "ws://"))
        assert server.stop() == 0, server.stderr
    for got in (h2, h1, ws):
        assert got.returncode == 0, got.stderr
        assert got.stdout == local.stdout
    logs = [log, tmp_path / "l-1.jsonl", tmp_path / "l-2.jsonl"]
    assert [_lines(x)[0]["transport"]["client"] for x in logs] == ["http", "http", "ws"]
    assert _versions(logs[0]) == {"2"} and _versions(logs[1]) == {"1.1"}
    for x in logs[:2]:
        _check_http_log(x)


@needs_node
@pytest.mark.slow  # the TypeScript SDK as the peer (node)
@pytest.mark.parametrize("upstream", ["http2", "auto", "http1.1"])
def test_an_http2_client_through_the_recording_proxy(tmp_path, upstream):
    """The SDK's http-client over HTTP/2 -> acp-tee --listen --connect -> the SDK's
    server, HTTP/2 only (with --http2, or without: found out) or HTTP/1.1: the client
    sees what it sees on stdio, a credential passes through (redacted in the log), and
    the log says which version each hop spoke."""
    local = _sdk_stdio(tmp_path / "stdio.jsonl")
    log = tmp_path / "p.jsonl"
    h2 = upstream != "http1.1"
    agent = _sdk_h2_server() if h2 else Server(
        [NODE, str(CLIENTS / "sdk_http_server.mjs"), "0", "--", *tool_argv("echo-agent")])
    flag = ["--http2"] if upstream == "http2" else []
    with agent:
        with _tee_listen(log, "--connect", agent.url, *flag) as proxy:
            remote = _sdk_h2(proxy.url, '{"Authorization":"Bearer ' + SECRET + '"}')
            assert proxy.stop() == 0, proxy.stderr
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout
    _check_http_log(log)
    recs = _lines(log)
    assert {r["http"] for r in recs if r.get("event") == "http-request"} == {"2"}
    assert {r["http"] for r in recs if r.get("event") == "http-response"} == \
        {"2" if h2 else "1.1"}
    text = log.read_bytes()
    assert SECRET.encode() not in text and b"<redacted hmac-blake3:" in text
    assert recs[-1]["end"] is True
    assert (b"speaks HTTP/2 only" in proxy.stderr) == (upstream == "auto")


@needs_node
@pytest.mark.slow  # the TypeScript SDK as the peer (node)
def test_connect_http2_reaches_a_server_that_speaks_only_http2(tmp_path):
    """A stdio client -> acp-tee --connect http:// --http2 -> the SDK's HTTP/2-only
    server: the client gets every frame it gets on stdio (order holds within a stream
    only). Without --http2 the same: the server's answer to HTTP/1.1 is an HTTP/2
    frame, a probe finds it speaks h2c, and acp-tee says so and speaks HTTP/2 (the
    first request's record says HTTP/1.1: it was sent so, then again over HTTP/2)."""
    stdin = _client_frames()
    local = tee_stdio(tmp_path / "stdio.jsonl", stdin)
    log = tmp_path / "h.jsonl"
    with _sdk_h2_server() as server:
        r = tee_connect(server.url, log, stdin, "--http2")
        h1 = tee_connect(server.url, tmp_path / "h1.jsonl", stdin)
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert sorted(r.stdout.splitlines()) == sorted(local.stdout.splitlines())
    _check_http_log(log)
    assert _versions(log) == {"2"}
    assert b"".join(f[2].encode() + b"\n" for f in _frames(log) if f[1] == "c2a") == stdin
    assert b"".join(f[2].encode() + b"\n" for f in _frames(log) if f[1] == "a2c") == r.stdout
    assert h1.returncode == 0, h1.stderr
    assert h1.stderr == (f"acp-tee: {server.url} speaks HTTP/2 only: acp-tee speaks "
                         "HTTP/2 (h2c) to it (--http2 says so from the start)\n").encode()
    assert sorted(h1.stdout.splitlines()) == sorted(local.stdout.splitlines())
    recs = [r for r in _lines(tmp_path / "h1.jsonl") if "http" in r]
    assert recs[0]["event"] == "http-request" and recs[0]["http"] == "1.1"
    assert {r["http"] for r in recs[1:]} == {"2"}


@pytest.mark.slow  # a large frame through acp-tee over HTTP/2 both ways (seconds of real processes)
def test_a_large_frame_crosses_http2_both_ways(tmp_path):
    """stdio -> acp-tee --connect --http2 -> acp-tee --listen -- echo-agent: a 3 MiB
    prompt (past every flow control window: 1 MiB a stream) goes up as one POST body
    and comes back in the agent's SSE events, byte for byte as without HTTP/2."""
    big = "é" * (3 << 19)
    stdin = "\n".join([
        INIT,
        '{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp",'
        '"mcpServers":[]}}',
        '{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":'
        '"sess-1","prompt":[{"type":"text","text":"' + big + '"}]}}']).encode() + b"\n"
    local = tee_stdio(tmp_path / "stdio.jsonl", stdin)
    inner_log, outer_log = tmp_path / "inner.jsonl", tmp_path / "outer.jsonl"
    with _tee_listen(inner_log) as inner:
        r = tee_connect(inner.url, outer_log, stdin, "--http2")
        assert inner.stop() == 0, inner.stderr
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == sorted(local.stdout.splitlines())
    assert big.encode() in r.stdout
    for log in (outer_log, inner_log):
        assert _versions(log) == {"2"}
        c2a = [f["raw"].encode() + b"\n" for f in _lines(log) if f.get("dir") == "c2a"]
        assert b"".join(c2a) == stdin


def _curl(*args: str) -> tuple[str, bytes]:
    """curl over h2c with prior knowledge: (status line and headers, body)."""
    r = subprocess.run([CURL, "-sS", "--http2-prior-knowledge", "-D", "-", *args],
                       capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    head, _sep, body = r.stdout.partition(b"\r\n\r\n")
    return head.decode(), body


@pytest.mark.skipif(CURL is None, reason="needs curl")
def test_curl_over_http2_gets_what_http11_gets_from_a_listener(tmp_path):
    """curl --http2-prior-knowledge against acp-tee --listen -- echo-agent: what the RFD
    refuses is refused with the statuses HTTP/1.1 gets (415, 400, 404, 501, 406), an
    initialize is answered 200 with the agent's bytes and an Acp-Connection-Id, DELETE
    202; a path the listener does not serve is 404."""
    log = tmp_path / "h.jsonl"
    json_type = ["-H", "Content-Type: application/json"]
    with _tee_listen(log) as server:
        url = server.url
        statuses = []

        def go(*args: str) -> tuple[str, bytes]:
            head, body = _curl(*args, url)
            assert head.startswith("HTTP/2 "), head
            statuses.append(int(head.split()[1]))
            return head, body

        go("-H", "Content-Type: text/plain", "--data-binary", INIT)
        go(*json_type, "--data-binary", '{"jsonrpc":"2.0","id":1,"method":"session/new",'
           '"params":{}}')
        go("-H", "Acp-Connection-Id: nope", "-H", "Accept: text/event-stream")
        head, body = go(*json_type, "--data-binary", INIT)
        cid = next(line.split(":", 1)[1].strip() for line in head.splitlines()
                   if line.lower().startswith("acp-connection-id:"))
        conn = ["-H", f"Acp-Connection-Id: {cid}"]
        go(*conn, *json_type, "--data-binary", "[" + INIT + "]")
        go(*conn, "-H", "Accept: application/json")
        go(*conn, "-X", "DELETE")
        other, _ = _curl(url.replace("/acp", "/elsewhere"))
        assert server.stop() == 0, server.stderr
    assert statuses == [415, 400, 404, 200, 501, 406, 202]
    assert other.startswith("HTTP/2 404")
    assert body == next(r["raw"] for r in _lines(log) if r.get("dir") == "a2c").encode()
    recs = _lines(log)
    assert [r["status"] for r in recs if r.get("event") == "http-response"] == \
        [200, 501, 406, 202]
    assert _versions(log) == {"2"} and recs[-1]["end"] is True


@needs_node
@pytest.mark.skipif(CURL is None, reason="needs curl")
@pytest.mark.slow  # the TypeScript SDK as the peer (node)
def test_an_http2_answer_through_the_proxy_is_the_answer_without_it(tmp_path):
    """curl over HTTP/2 sends initialize to the SDK's HTTP/2 server, directly and through
    acp-tee --listen --connect --http2: the same status and body bytes."""
    with _sdk_h2_server() as agent:
        direct = _curl("-H", "Content-Type: application/json", "--data-binary", INIT,
                       agent.url)
        with _tee_listen(tmp_path / "p.jsonl", "--connect", agent.url, "--http2") as proxy:
            through = _curl("-H", "Content-Type: application/json", "--data-binary",
                            INIT, proxy.url)
    assert direct[0].split("\r\n")[0] == through[0].split("\r\n")[0] == "HTTP/2 200 "
    assert direct[1] == through[1] and b'"protocolVersion":2' in direct[1]


def test_http2_is_imported_only_when_spoken():
    """acp-tee's stdio path (its CLI and recorder) imports neither the remote sides nor
    h2: their start-up is not acp-tee's."""
    code = ("import sys, acp_pipes.cli.tee, acp_pipes.tee; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('h2', 'hpack', 'hyperframe', 'aiohttp') or m in "
            "tuple('acp_pipes.tee.' + n for n in ('remote', 'options', 'headers', "
            "'sides', 'relay', 'websocket', 'masking', 'listener', 'http_streams', "
            "'http_exchange', 'http_calls', 'http_client', 'http_proxy', 'http_serve', "
            "'http_connect', 'h2_engine', 'h2_server', 'h2_client'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, env=tool_env(),
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"[]\n"


OPENSSL = shutil.which("openssl")


@pytest.fixture
def tls_cert(tmp_path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run([OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return key, cert


@needs_node
@pytest.mark.skipif(OPENSSL is None, reason="needs openssl (a test certificate)")
@pytest.mark.slow  # the TypeScript SDK as the peer (node)
def test_connect_https_speaks_http2_by_alpn(tmp_path, tls_cert):
    """TLS: the SDK's server choosing by ALPN, HTTP/2 only, is reached with --http2 and
    without it (its alert that it speaks nothing aiohttp offered: then acp-tee offers
    h2, said); an HTTP/1.1-only TLS server is not reached with --http2 (126, said)."""
    key, cert = tls_cert
    stdin = _client_frames()
    local = tee_stdio(tmp_path / "stdio.jsonl", stdin)
    env = {**tool_env(), "SSL_CERT_FILE": str(cert)}

    def connect(url: str, log: str, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(tool_argv("tee", "-o", str(tmp_path / log), "--clock",
                                        "epoch", "--no-host", *extra, "--connect", url),
                              input=stdin, capture_output=True, env=env, timeout=120)

    h2 = Server([NODE, str(CLIENTS / "sdk_http_server.mjs"), "0", "--h2", "--tls",
                 str(key), str(cert), "--", *tool_argv("echo-agent")])
    h1 = Server([NODE, str(CLIENTS / "sdk_http_server.mjs"), "0", "--tls", str(key),
                 str(cert), "--", *tool_argv("echo-agent")])
    with h2, h1:
        assert h2.url.startswith("https://")
        asked = connect(h2.url, "asked.jsonl", "--http2")
        found = connect(h2.url, "found.jsonl")
        refused = connect(h1.url, "refused.jsonl", "--http2")
    for r in (asked, found):
        assert r.returncode == 0, r.stderr
        assert sorted(r.stdout.splitlines()) == sorted(local.stdout.splitlines())
    assert asked.stderr == b""
    assert b"speaks HTTP/2 only: acp-tee speaks HTTP/2 (ALPN h2)" in found.stderr
    _check_http_log(tmp_path / "asked.jsonl")
    assert _versions(tmp_path / "asked.jsonl") == {"2"}
    assert refused.returncode == 126
    assert b"the server speaks no HTTP/2 (acp-tee offered h2 only, by ALPN)" in refused.stderr


@pytest.mark.skipif(CURL is None, reason="needs curl")
def test_replay_serve_listens_over_http2(tmp_path):
    """acp-replay --serve --listen http:// is acp-tee's listener: curl over HTTP/2 gets
    the replay's answer to initialize (200, its Acp-Connection-Id), and its DELETE 202."""
    log = tmp_path / "s.jsonl"
    assert tee_stdio(log, _client_frames()).returncode == 0
    stream = tmp_path / "s.asr.jsonl"
    stream.write_bytes(run_tool("asr", str(log)).stdout)
    server = Server(tool_argv("replay", "--listen", "http://127.0.0.1:0/acp", "--serve",
                              str(stream)))
    with server:
        head, body = _curl("-H", "Content-Type: application/json", "--data-binary", INIT,
                           server.url)
        cid = next(line.split(":", 1)[1].strip() for line in head.splitlines()
                   if line.lower().startswith("acp-connection-id:"))
        gone, _ = _curl("-X", "DELETE", "-H", f"Acp-Connection-Id: {cid}", server.url)
        assert server.stop() == 0, server.stderr
    assert head.startswith("HTTP/2 200") and gone.startswith("HTTP/2 202")
    assert b'"result"' in body and b'"protocolVersion"' in body

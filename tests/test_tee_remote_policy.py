"""acp-tee's and acp-replay's listeners as an attacker on 127.0.0.1 meets them
(acp_pipes.tee.policy, acp_pipes.tee.accept): every case of the security review refused
or bounded, through the real executables, on real sockets, over WebSocket, HTTP/1.1
and HTTP/2 (h2c) alike. A foreign Origin or Host, no token or a wrong one, a bind
beyond loopback without one, more agents than the cap, an initialize reset before its
answer, idle and slow sockets, a message of 200 MB, credentials in headers, query
strings and subprotocols, a URL's user:password beside an Authorization header,
unmasked or malformed frames, a PING flood that reads nothing. Each refusal is one line
on stderr, never a traceback, and starts no process and makes no log file.

The browser's view of the same (a foreign page in Chromium, DNS rebinding) is
tests/test_tee_remote_browser.py."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import struct
import sys
import time
from pathlib import Path

import aiohttp
import orjson
import psutil
import pytest

from acp_pipes.tee.h2_client import H2Client
from tests.conftest import run_tool, tool_argv, tool_env
from tests.test_tee_remote import INIT, Server, _events, _frames, _lines

pytestmark = pytest.mark.slow  # real listeners and agents, real seconds

JSON = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
TOKEN = "0123456789abcdef0123456789abcdef"
MIB = 1 << 20


def listen(tmp: Path, *extra: str, url: str = "http://127.0.0.1:0/acp",
           agent: list[str] | None = None, env: dict | None = None,
           log: str = "l.jsonl") -> Server:
    """acp-tee --listen URL [extra] -- AGENT (the echo agent), logging to tmp/LOG."""
    argv = tool_argv("tee", "-o", str(tmp / log), "--clock", "epoch", "--no-host", *extra,
                     "--listen", url)
    if not (extra and "--connect" in extra):
        argv += ["--", *(agent or tool_argv("echo-agent"))]
    return Server(argv, env=env)


def agents(server: Server) -> list[psutil.Process]:
    """The processes a listener runs (its agents and what they started)."""
    try:
        return psutil.Process(server.proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def logs(tmp: Path, stem: str = "l") -> list[Path]:
    return sorted(tmp.glob(f"{stem}*.jsonl"))


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://", 1)


async def ws_status(url: str, headers: dict | None = None, protocols=()) -> int:
    """The status a WebSocket upgrade gets (101: it was accepted; then closed)."""
    async with aiohttp.ClientSession() as http:
        try:
            ws = await http.ws_connect(ws_url(url), headers=headers or {},
                                       protocols=protocols)
        except aiohttp.WSServerHandshakeError as e:
            return e.status
        await ws.close()
        return 101


async def http_post(url: str, body: bytes = INIT.encode(), headers: dict | None = None
                    ) -> tuple[int, dict, bytes]:
    async with aiohttp.ClientSession() as http:
        async with http.post(url, data=body, headers={**JSON, **(headers or {})}) as r:
            return r.status, dict(r.headers), await r.read()


async def h2_post(url: str, body: bytes = INIT.encode(), headers: dict | None = None,
                  authority: str | None = None) -> tuple[int, dict, bytes]:
    async with H2Client(url) as h2:
        if authority is not None:
            h2.authority = authority  # the Host a DNS-rebound name would give
        async with h2.post(url, data=body, headers=list({**JSON, **(headers or {})}.items())
                           ) as r:
            return r.status, dict(r.headers), await r.read()


def statuses(url: str, headers: dict | None = None, authority: str | None = None
             ) -> dict[str, int]:
    """What a WebSocket upgrade, an HTTP/1.1 POST and an HTTP/2 POST of initialize get."""
    async def all_three():
        h = dict(headers or {})
        if authority is not None:
            h["Host"] = authority
        return {"ws": await ws_status(url, h),
                "http/1.1": (await http_post(url, headers=h))[0],
                "h2": (await h2_post(url, headers=headers, authority=authority))[0]}
    return asyncio.run(all_three())


def refusals(stderr: bytes) -> list[bytes]:
    return [x for x in stderr.splitlines() if x.split(b": ", 1)[-1].startswith(b"refused ")]


def held(stderr: bytes) -> int:
    """How many refusal or drop lines were held back (at most 10 are said a second)."""
    return sum(int(x.split(b"and ")[1].split()[0]) for x in stderr.splitlines()
               if b"more refused or dropped connections" in x)


def no_traceback(stderr: bytes) -> None:
    assert b"Traceback" not in stderr and b"  File " not in stderr, stderr.decode()


# -- Origin and Host ------------------------------------------------------------------------


def test_a_foreign_origin_or_host_is_refused_before_anything_starts(tmp_path):
    """The defaults: no Origin, or a loopback page on the listener's own port, with a
    loopback Host: served. Any other Origin (another site, another local port, null) is
    403, a foreign Host (a DNS-rebound name) 421, on every transport, each said in one
    line; no agent is started for them and no log file made."""
    with listen(tmp_path) as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        ok = statuses(server.url)
        same = statuses(server.url, {"Origin": f"http://localhost:{port}"})
        time.sleep(1)  # the WebSockets' agents have ended; the HTTP ones run on
        before, running = len(logs(tmp_path)), len(agents(server))
        refused = {origin: statuses(server.url, {"Origin": origin}) for origin in (
            "https://evil.example", f"http://127.0.0.1:{port + 1}", "null",
            f"http://evil.example:{port}")}
        rebound = statuses(server.url, authority=f"rebind.evil.example:{port}")
        assert len(agents(server)) == running == 4
        status = server.stop()
    assert status == 0
    assert ok == same == {"ws": 101, "http/1.1": 200, "h2": 200}
    for origin, got in refused.items():
        assert got == {"ws": 403, "http/1.1": 403, "h2": 403}, origin
    assert rebound == {"ws": 421, "http/1.1": 421, "h2": 421}
    assert len(logs(tmp_path)) == before == 6  # the six accepted, none for the refused
    lines = refusals(server.stderr)
    assert len(lines) + held(server.stderr) == 15, server.stderr.decode()
    assert lines[0].endswith(b"Origin 'https://evil.example' is not allowed "
                             b"(--allow-origin ORIGIN): 403")
    assert b"GET /acp (HTTP/1.1)" in lines[0] and b"POST /acp (HTTP/2)" in lines[2]
    no_traceback(server.stderr)


def test_allow_origin_and_allow_host_let_them_in(tmp_path):
    with listen(tmp_path, "--allow-origin", "https://app.example",
                "--allow-origin", "http://localhost:*", "--allow-host", "acp.internal") as s:
        port = int(s.url.rsplit(":", 1)[1].split("/")[0])
        app = statuses(s.url, {"Origin": "https://app.example"})
        other_port = statuses(s.url, {"Origin": "http://localhost:3000"})
        still = statuses(s.url, {"Origin": "https://app.example:8443"})
        named = statuses(s.url, authority=f"acp.internal:{port}")
    assert app == other_port == named == {"ws": 101, "http/1.1": 200, "h2": 200}
    assert still == {"ws": 403, "http/1.1": 403, "h2": 403}


def stored_session(tmp: Path) -> Path:
    """An ASR stream of one recorded echo session, as acp-replay --serve serves it."""
    from acp_pipes.echo.client import client_session
    from tests.conftest import record_lockstep

    wire = tmp / "s.jsonl"
    record_lockstep(list(client_session(1)), wire)
    stream = tmp / "s.asr.jsonl"
    stream.write_bytes(run_tool("asr", str(wire)).stdout)
    return stream


def test_an_allowed_page_is_answered_with_cors_and_its_preflight_needs_no_token(tmp_path):
    """A browser's preflight (OPTIONS, Access-Control-Request-Method) carries no
    credentials: from an allowed origin it is answered 204 with the methods and the
    headers asked for, token or not, and starts nothing; from another origin, 403. The
    page's request itself needs the token, and its answer names the origin and exposes
    the connection's id."""
    (tmp_path / "token").write_text(TOKEN)
    app = {"Origin": "https://app.example"}
    ask = {"Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "authorization, content-type"}
    with listen(tmp_path, "--token-file", str(tmp_path / "token"), "--allow-origin",
                "https://app.example") as server:
        async def go() -> list:
            async with aiohttp.ClientSession() as http:
                out = []
                for origin in (app, {"Origin": "https://evil.example"}):
                    async with http.options(server.url, headers={**origin, **ask}) as r:
                        out.append((r.status, dict(r.headers)))
                out.append(await http_post(server.url, headers={
                    **app, "Authorization": "Bearer " + TOKEN}))
                out.append(await h2_post(server.url, headers={
                    **app, "authorization": "Bearer " + TOKEN}))
                return out

        (ok, asked), (foreign, _), posted, posted2 = asyncio.run(go())
    assert (ok, foreign) == (204, 403)
    assert asked["Access-Control-Allow-Origin"] == "https://app.example"
    assert asked["Access-Control-Allow-Methods"] == "GET, POST, DELETE"
    assert asked["Access-Control-Allow-Headers"] == "authorization, content-type"
    for status, headers, _body in (posted, posted2):
        assert status == 200
        assert headers.get("Access-Control-Allow-Origin", headers.get(
            "access-control-allow-origin")) == "https://app.example"
    assert len(logs(tmp_path)) == 2  # the two initializes; the preflights started nothing


def test_acp_replay_serve_refuses_a_foreign_origin(tmp_path):
    """acp-replay --serve --listen hands out every stored session: a foreign page gets
    none of them (403), no replay process starts; a client with no Origin lists them."""
    stream = stored_session(tmp_path)
    with Server(tool_argv("replay", "--serve", str(stream), "--listen",
                          "ws://127.0.0.1:0/acp")) as server:
        foreign = asyncio.run(ws_status(server.url, {"Origin": "https://evil.example"}))
        rebound = asyncio.run(ws_status(server.url, {"Host": "evil.example"}))
        assert agents(server) == []

        async def listed() -> bytes:
            async with aiohttp.ClientSession() as http:
                async with http.ws_connect(server.url) as ws:
                    await ws.send_str(INIT)
                    await ws.receive()
                    await ws.send_str('{"jsonrpc":"2.0","id":1,"method":"session/list",'
                                      '"params":{}}')
                    return (await ws.receive()).data.encode()

        answer = asyncio.run(listed())
    assert (foreign, rebound) == (403, 421)
    assert b'"sessions"' in answer and b"sessionId" in answer
    assert len(refusals(server.stderr)) == 2
    no_traceback(server.stderr)


# -- tokens ---------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["file", "environment"])
def test_a_token_is_asked_for_compared_and_never_logged(tmp_path, where):
    """With a token: no Authorization, a wrong one, another scheme: 401 with
    WWW-Authenticate, on every transport, nothing started; the right one: served.
    The token is in no log (not even with --keep-secrets) and on no stderr line."""
    env = {**tool_env(), "ACP_LISTEN_TOKEN": TOKEN}
    extra: tuple[str, ...] = ("--keep-secrets",)
    if where == "file":
        (tmp_path / "token").write_text(TOKEN + "\n")
        extra += ("--token-file", str(tmp_path / "token"))
        env = tool_env()
    with listen(tmp_path, *extra, env=env) as server:
        none = statuses(server.url)
        wrong = statuses(server.url, {"Authorization": "Bearer " + TOKEN[:-1] + "0"})
        basic = statuses(server.url, {"Authorization": "Basic " + TOKEN})
        assert agents(server) == [] and logs(tmp_path) == []
        right = statuses(server.url, {"Authorization": "Bearer " + TOKEN})
        header = asyncio.run(http_post(server.url))[1]
    assert none == wrong == basic == {"ws": 401, "http/1.1": 401, "h2": 401}
    assert right == {"ws": 101, "http/1.1": 200, "h2": 200}
    assert header["WWW-Authenticate"] == 'Bearer realm="acp"'
    assert len(logs(tmp_path)) == 3
    for log in logs(tmp_path):
        text = log.read_bytes()
        assert TOKEN.encode() not in text
        assert b"Bearer <the listener's token>" in text
    assert TOKEN.encode() not in server.stderr
    assert refusals(server.stderr)[0].endswith(b"no bearer token: 401")
    assert refusals(server.stderr)[3].endswith(b"a wrong bearer token: 401")


ENV_AGENT = r'''
import json, os, sys
for line in sys.stdin:
    msg = json.loads(line)
    seen = {k: v for k, v in os.environ.items() if "ACP_LISTEN" in k or v == sys.argv[1]}
    print(json.dumps({"jsonrpc": "2.0", "id": msg.get("id"), "result": seen}), flush=True)
'''


def test_the_listeners_token_is_not_in_its_agents_environment(tmp_path):
    """The token read from ACP_LISTEN_TOKEN is not handed to the agents behind the
    listener (an agent that runs commands for a model could pass it on)."""
    env = {**tool_env(), "ACP_LISTEN_TOKEN": TOKEN}
    with listen(tmp_path, env=env, agent=[sys.executable, "-c", ENV_AGENT, TOKEN]) as server:
        status, _headers, body = asyncio.run(http_post(
            server.url, headers={"Authorization": "Bearer " + TOKEN}))
    assert status == 200 and orjson.loads(body)["result"] == {}


def test_the_listeners_token_is_not_passed_on_to_the_agent(tmp_path):
    """A recording proxy with a token: the client's Authorization was for the proxy;
    the agent behind it (an inner listener, logging what it got) never sees it."""
    (tmp_path / "token").write_text(TOKEN)
    with listen(tmp_path, url="ws://127.0.0.1:0/acp", log="inner.jsonl") as inner:
        with listen(tmp_path, "--token-file", str(tmp_path / "token"), "--connect", inner.url,
                    url="ws://127.0.0.1:0/acp", log="outer.jsonl") as outer:
            status = asyncio.run(ws_status(outer.url, {"Authorization": "Bearer " + TOKEN}))
    assert status == 101
    sent = dict(_events(tmp_path / "inner.jsonl", "ws-open")[0]["request"])
    assert "Authorization" not in sent and TOKEN.encode() not in (
        tmp_path / "inner.jsonl").read_bytes()


def test_a_bind_beyond_loopback_needs_a_token(tmp_path):
    from acp_pipes.io.wire import header

    trace = tmp_path / "x.jsonl"
    trace.write_bytes(orjson.dumps(header(["agent"], started_ns=0, clock="epoch",
                                          host=False)) + b"\n")
    for tool in ("tee", "replay"):
        tail = ["--", "true"] if tool == "tee" else [str(trace)]
        r = run_tool(tool, "--listen", "ws://0.0.0.0:0/acp", *tail, process=True)
        assert r.returncode == 2, r.stderr
        assert b"binds beyond loopback, where anyone on the network could start an agent" \
            in r.stderr and b"--token-file" in r.stderr
    (tmp_path / "short").write_text("abc\n")
    agent = ["--", "true"]
    for argv, message in [
        (["--token-file", str(tmp_path / "short"), "--listen", "ws://0.0.0.0:0/acp", *agent],
         b"a token needs 16 or more characters"),
        (["--token-file", str(tmp_path / "none"), "--listen", "ws://127.0.0.1:0/acp", *agent],
         b"cannot read"),
        (["--max-agents", "3", *agent], b"--max-agents goes with --listen"),
        (["--token-file", "t", "--connect", "ws://127.0.0.1:9/acp"],
         b"--token-file goes with --listen"),
        (["--allow-origin", "evil.example", "--listen", "ws://127.0.0.1:0/acp", *agent],
         b"an origin is SCHEME://HOST[:PORT]"),
    ]:
        r = run_tool("tee", *argv, input=b"")
        assert r.returncode == 2 and message in r.stderr, (argv, r.stderr)
    (tmp_path / "token").write_text(TOKEN)
    with listen(tmp_path, "--token-file", str(tmp_path / "token"),
                url="ws://0.0.0.0:0/acp") as server:
        assert server.url.startswith("ws://0.0.0.0:")


# -- agents ---------------------------------------------------------------------------------


def test_agents_are_capped_and_the_rest_get_503(tmp_path):
    """--max-agents 3: three WebSockets get agents; two more get 503 with Retry-After
    and no process; once one goes, a new one gets in. 300 initialize POSTs (HTTP/1.1
    and HTTP/2) start 3 agents, the other 297 are 503."""
    with listen(tmp_path, "--max-agents", "3") as server:
        async def websockets() -> tuple[list[int], int, int]:
            async with aiohttp.ClientSession() as http:
                held = [await http.ws_connect(ws_url(server.url)) for _ in range(3)]
                for ws in held:
                    await ws.send_str(INIT)
                    await ws.receive()
                running = len(agents(server))
                refused = []
                for _ in range(2):
                    try:
                        await http.ws_connect(ws_url(server.url))
                    except aiohttp.WSServerHandshakeError as e:
                        refused.append(e.status)
                        retry = e.headers["Retry-After"]
                await held[0].close()
                for _ in range(100):  # its agent is ended, its place given back
                    if len(agents(server)) < 3:
                        break
                    await asyncio.sleep(0.1)
                again = await ws_status(server.url)
                for ws in held[1:]:
                    await ws.close()
                return refused, running, int(retry), again

        refused, running, retry, again = asyncio.run(websockets())
        assert refused == [503, 503] and running == 3 and retry > 0 and again == 101
        for _ in range(100):
            if not agents(server):
                break
            time.sleep(0.1)

        async def posts() -> list[int]:
            async def one(i: int) -> int:
                post = h2_post if i % 2 else http_post
                return (await post(server.url))[0]
            return await asyncio.gather(*(one(i) for i in range(300)))

        got = asyncio.run(posts())
        peak = len(agents(server))
    assert sorted(set(got)) == [200, 503] and got.count(200) == 3, got
    assert peak == 3
    lines = refusals(server.stderr)
    assert any(b"agents run already (--max-agents 3): 503" in x for x in lines)
    no_traceback(server.stderr)


SLOW_AGENT = r'''
import json, sys, time
for line in sys.stdin:
    msg = json.loads(line)
    time.sleep(60.0)  # the client resets its stream before this answer
    print(json.dumps({"jsonrpc": "2.0", "id": msg.get("id"), "result": {}}), flush=True)
'''


def test_an_initialize_reset_over_http2_leaves_no_agent(tmp_path):
    """50 initialize POSTs over one HTTP/2 connection, each reset (RST_STREAM) before
    its answer (the agent takes a minute to give it): every agent started for them is
    ended (its stdin closed; --grace 1 later SIGTERM) and its log closed; none is left
    for the listener's end."""
    import h2.config
    import h2.connection
    import h2.errors

    with listen(tmp_path, "--grace", "1", agent=[sys.executable, "-c", SLOW_AGENT]) as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(conn.data_to_send())
        sids = []
        for _ in range(50):
            sid = conn.get_next_available_stream_id()
            conn.send_headers(sid, [(":method", "POST"), (":path", "/acp"),
                                    (":scheme", "http"), (":authority", f"127.0.0.1:{port}"),
                                    ("content-type", "application/json")])
            conn.send_data(sid, INIT.encode(), end_stream=True)
            sids.append(sid)
        sock.sendall(conn.data_to_send())
        for _ in range(600):  # the first 32 have agents (the cap), the others a 503
            if len(agents(server)) >= 32:
                break
            time.sleep(0.1)
        for sid in sids:
            conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
        sock.sendall(conn.data_to_send())
        started = False
        for _ in range(300):  # the agents were started; then each is ended
            time.sleep(0.1)
            n = len(agents(server))
            started = started or n > 0
            if started and n == 0:
                break
        left = len(agents(server))
        sock.close()
        status = server.stop()
    assert started and left == 0 and status == 0
    ended = [_lines(p)[-1] for p in logs(tmp_path)]
    assert len(ended) == 32 and all(e.get("end") for e in ended)  # the cap: the rest 503
    no_traceback(server.stderr)


# -- timeouts -------------------------------------------------------------------------------


def test_idle_and_slow_sockets_are_dropped_and_real_clients_served(tmp_path):
    """200 sockets: silent, half a request head, one byte a second. With
    --header-timeout 2 each is closed by the listener within a few seconds, while a real
    client is served meanwhile; the drops are said in at most 10 lines a second (the
    rest counted), never a traceback."""
    with listen(tmp_path, "--header-timeout", "2") as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        socks = []
        for i in range(200):
            s = socket.create_connection(("127.0.0.1", port))
            if i % 4 == 1:
                s.sendall(b"POST /acp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            elif i % 4 == 2:
                s.sendall(b"PRI * HTTP/2.0\r\n")  # half the HTTP/2 preface
            elif i % 4 == 3:
                s.sendall(b"GET /acp HTTP/1.1\r\nX-Slow: ")  # then a byte at a time
            socks.append(s)
        served = asyncio.run(http_post(server.url))[0]
        start = time.monotonic()
        closed = 0
        for _ in range(12):  # a byte every half second from those that drip
            for i, s in enumerate(socks):
                if i % 4 == 3:
                    try:
                        s.send(b"a")
                    except OSError:
                        pass
            time.sleep(0.5)
        for s in socks:
            closed += _closed_by_peer_within(s, 5)
            s.close()
        took = time.monotonic() - start
        again = asyncio.run(http_post(server.url))[0]
    assert served == again == 200
    assert closed == 200 and took < 20
    said = server.stderr.count(b"no complete request within 2 s (--header-timeout)")
    assert said + held(server.stderr) == 200 and said < 200
    no_traceback(server.stderr)


def _closed_by_peer_within(s: socket.socket, seconds: float) -> bool:
    """Whether the peer closes ``s`` within ``seconds``, whatever it sent before."""
    s.setblocking(True)
    s.settimeout(seconds)
    try:
        while s.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


GROUP_AGENT = r'''
import json, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
open(sys.argv[1], "w").write(str(child.pid))
for line in sys.stdin:
    msg = json.loads(line)
    print(json.dumps({"jsonrpc": "2.0", "id": msg.get("id"), "result": {}}), flush=True)
'''


def test_an_idle_streamable_http_connection_ends_with_its_agents_process_group(tmp_path):
    """An initialize, then nothing (no request, no stream open) for --idle-timeout 2 s:
    the connection is ended; its agent (its stdin closed) exits, and the process it
    started and left behind in its process group is ended too; the log has its end
    record."""
    pid_file = tmp_path / "child.pid"
    with listen(tmp_path, "--idle-timeout", "2", "--grace", "0.5",
                agent=[sys.executable, "-c", GROUP_AGENT, str(pid_file)]) as server:
        assert asyncio.run(http_post(server.url))[0] == 200
        child = int(pid_file.read_text())
        running = psutil.pid_exists(child)
        for _ in range(150):
            time.sleep(0.1)
            if not agents(server) and not psutil.pid_exists(child):
                break
        left = agents(server), psutil.pid_exists(child)
        status = server.stop()
    assert running and left == ([], False) and status == 0
    assert b"idle for 2 s (--idle-timeout), and its agent" in server.stderr
    assert _lines(tmp_path / "l.jsonl")[-1]["end"] is True


def test_a_websocket_that_answers_no_ping_is_closed(tmp_path):
    """--idle-timeout 4: the listener pings a silent client; one that never answers (in
    2 s) is closed and its agent ended; one that answers (every WebSocket library does)
    stays."""
    with listen(tmp_path, "--idle-timeout", "4", url="ws://127.0.0.1:0/acp") as server:
        async def both() -> tuple[aiohttp.WSMsgType | None, bool, int]:
            async with aiohttp.ClientSession() as http:
                deaf = await http.ws_connect(server.url, autoping=False)
                alive = await http.ws_connect(server.url)  # answers each ping as it reads
                heard: asyncio.Queue = asyncio.Queue()

                async def read() -> None:
                    while (msg := await alive.receive()).type is aiohttp.WSMsgType.TEXT:
                        heard.put_nowait(msg)

                reader = asyncio.ensure_future(read())
                got = None
                while got is None:
                    msg = await asyncio.wait_for(deaf.receive(), 20)
                    if msg.type is not aiohttp.WSMsgType.PING:
                        got = msg.type
                await asyncio.sleep(2)
                running = len(agents(server))  # the deaf client's agent has ended
                await alive.send_str(INIT)
                answer = await asyncio.wait_for(heard.get(), 10)
                await alive.close()
                reader.cancel()
                return got, b'"result"' in answer.data.encode(), running

        closed, still, running = asyncio.run(both())
    assert closed in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED,
                      aiohttp.WSMsgType.CLOSING) and still and running == 1


# -- size -----------------------------------------------------------------------------------


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _send_ws_header(port: int, size: int) -> bytes:
    """A WebSocket upgrade, then the header of one masked text frame of ``size`` bytes
    and the first MiB of it: what comes back (the close frame)."""
    s = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16))
    s.sendall(b"GET /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: "
              + key + b"\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(4096)
    rest = head.split(b"\r\n\r\n", 1)[1]
    s.sendall(b"\x81\xff" + struct.pack("!Q", size) + b"\x00\x00\x00\x00")
    try:
        s.sendall(b"a" * MIB)
    except OSError:
        pass
    s.settimeout(10)
    try:
        while len(rest) < 4:
            chunk = s.recv(64)
            if not chunk:
                break
            rest += chunk
    except OSError:
        pass
    s.close()
    return rest


def test_a_message_over_the_cap_is_refused_unread(tmp_path):
    """200 MB as one WebSocket message: closed 1009 at its header; as an HTTP/1.1 POST
    and an HTTP/2 POST: 413 (the HTTP/2 connection goes on). No agent gets any of it,
    and the listener's peak RSS stays far below 300 MB (the review measured ~810 MB)."""
    big = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"x":"' + \
        b"a" * (200 * MIB) + b'"}}'
    with listen(tmp_path) as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        closed = _send_ws_header(port, len(big))

        async def posts() -> tuple[int, int, int]:
            h1 = (await http_post(server.url, big))[0]
            async with H2Client(server.url) as h2:
                async with h2.post(server.url, data=big, headers=list(JSON.items())) as r:
                    refused = r.status
                async with h2.post(server.url, data=INIT.encode(),
                                   headers=list(JSON.items())) as r:
                    after = r.status
            return h1, refused, after

        h1, h2_status, after = asyncio.run(posts())
        peak = _peak_rss_mb(server.proc.pid)
    assert closed[:4] == b"\x88\x02\x03\xf1"  # close, 1009
    assert (h1, h2_status, after) == (413, 413, 200)
    assert peak < 150, peak
    ws_log = [p for p in logs(tmp_path) if _events(p, "ws-close")]
    assert [(e["code"]) for e in _events(ws_log[0], "ws-close")] == [1009]
    assert _frames(ws_log[0]) == []  # nothing of it was logged, nor given to the agent
    assert len(refusals(server.stderr)) == 2
    no_traceback(server.stderr)


def test_max_message_is_the_cap(tmp_path):
    """--max-message 1K: a 1025-byte message is refused, a 1024-byte one passes."""
    with listen(tmp_path, "--max-message", "1K") as server:
        body = INIT.encode()
        fits = body + b" " * (1024 - len(body))
        over = fits + b" "
        got = [asyncio.run(http_post(server.url, b))[0] for b in (fits, over)]
        got += [asyncio.run(h2_post(server.url, b))[0] for b in (fits, over)]
    assert got == [200, 413, 200, 413]


# -- credentials ----------------------------------------------------------------------------


SECRETS = {
    "Sec-WebSocket-Protocol": "base64url.bearer.authorization.k8s.io.c2stc2VjcmV0LXByb3Rv",
    "Ocp-Apim-Subscription-Key": "sk-apim-0001",
    "X-Auth": "sk-xauth-0002",
    "X-Session": "sk-xsession-0003",
    "X-Custom-Bearer": "sk-bearer-0004",
    "Cookie": "sid=sk-cookie-0005",
}
QUERY = {"code": "sk-code-0006", "auth": "sk-auth-0007", "pass": "sk-pass-0008"}


def test_eight_kinds_of_credentials_stay_out_of_the_log(tmp_path):
    """A client's credentials in headers by name, in the query string, a bearer token
    in Sec-WebSocket-Protocol, and a password in the --connect URL: each reaches the
    agent (an inner listener with --keep-secrets logs what it got) and is a redaction
    token in the proxy's log; --keep-secrets keeps them."""
    query = "&".join(f"{k}={v}" for k, v in QUERY.items())
    with listen(tmp_path, "--keep-secrets", "--protocol",
                "base64.channel.k8s.io", url="ws://127.0.0.1:0/acp", log="inner.jsonl") as inner:
        host = inner.url.split("://", 1)[1].split("/", 1)[0]
        up = f"ws://me:sk-userinfo-0009@{host}/acp"
        with listen(tmp_path, "--connect", up, url="ws://127.0.0.1:0/acp",
                    log="outer.jsonl") as outer:
            async def client() -> bytes:
                headers = {k: v for k, v in SECRETS.items() if k != "Sec-WebSocket-Protocol"}
                async with aiohttp.ClientSession() as http:
                    async with http.ws_connect(
                            outer.url + "?" + query, headers=headers,
                            protocols=(SECRETS["Sec-WebSocket-Protocol"],
                                       "base64.channel.k8s.io")) as ws:
                        await ws.send_str(INIT)
                        return (await ws.receive()).data.encode()

            answer = asyncio.run(client())
    assert b'"result"' in answer
    secrets = [v.split("=")[-1] for v in SECRETS.values()] + list(QUERY.values()) + [
        "sk-userinfo-0009"]
    secrets[0] = "c2stc2VjcmV0LXByb3Rv"
    outer_log = (tmp_path / "outer.jsonl").read_bytes()
    inner_log = (tmp_path / "inner.jsonl").read_bytes()
    for secret in secrets:
        assert secret.encode() not in outer_log, secret
        assert secret.encode() in inner_log or secret == "sk-userinfo-0009", secret
    opened = _events(tmp_path / "outer.jsonl", "ws-open")
    assert opened[0]["protocols"][0].startswith(
        "base64url.bearer.authorization.<redacted hmac-blake3:")
    assert opened[0]["protocols"][1] == "base64.channel.k8s.io"
    assert "code=<redacted hmac-blake3:" in opened[0]["url"]
    assert opened[1]["url"].startswith("ws://me:<redacted hmac-blake3:")
    sent = dict(_events(tmp_path / "inner.jsonl", "ws-open")[0]["request"])
    assert sent["Authorization"].startswith("Basic ")  # the URL's user:password


def test_header_values_from_a_file_or_the_environment_stay_off_the_command_line(tmp_path):
    """--header 'NAME: Bearer $VAR' and --header NAME:@FILE: the values reach the
    agent and are on no command line (what ps shows every user)."""
    (tmp_path / "key").write_text("sk-from-file-0010\n")
    env = {**tool_env(), "AGENT_TOKEN": "sk-from-env-0011"}
    with listen(tmp_path, "--keep-secrets", url="ws://127.0.0.1:0/acp",
                log="inner.jsonl") as inner:
        with listen(tmp_path, "--connect", inner.url, "--header",
                    "Authorization: Bearer $AGENT_TOKEN", "--header",
                    f"X-Api-Key:@{tmp_path / 'key'}", url="ws://127.0.0.1:0/acp",
                    log="outer.jsonl", env=env) as outer:
            cmdline = b" ".join(Path(f"/proc/{outer.proc.pid}/cmdline").read_bytes()
                                .split(b"\0"))
            assert asyncio.run(ws_status(outer.url)) == 101
    assert b"sk-from" not in cmdline and b"$AGENT_TOKEN" in cmdline
    sent = dict(_events(tmp_path / "inner.jsonl", "ws-open")[0]["request"])
    assert sent["Authorization"] == "Bearer sk-from-env-0011"
    assert sent["X-Api-Key"] == "sk-from-file-0010"
    assert b"sk-from" not in (tmp_path / "outer.jsonl").read_bytes()
    r = run_tool("tee", "--header", "X: $ACP_T_UNSET_VAR", "--connect",
                 "ws://127.0.0.1:9/acp", input=b"")
    assert r.returncode == 2 and b"$ACP_T_UNSET_VAR is not set" in r.stderr


def test_user_password_in_the_connect_url_beside_an_authorization(tmp_path):
    """--connect ws://user:pw@... and a client's Authorization: the client gets 502 and
    one line says why, the log has the agent's side refused and the end status 126 (no
    500, no traceback); from stdio with --header Authorization it is a usage error."""
    with listen(tmp_path, url="ws://127.0.0.1:0/acp", log="inner.jsonl") as inner:
        host = inner.url.split("://", 1)[1].split("/", 1)[0]
        for scheme in ("ws", "http"):
            with listen(tmp_path, "--connect", f"{scheme}://u:pw@{host}/acp",
                        url="http://127.0.0.1:0/acp", log=f"{scheme}.jsonl") as outer:
                auth = {"Authorization": "Bearer sk-client"}
                got = (asyncio.run(ws_status(outer.url, auth)) if scheme == "ws"
                       else asyncio.run(http_post(outer.url, headers=auth))[0])
                outer.stop()
            assert got == 502, scheme
            assert b"user:password and the client's Authorization header cannot both be " \
                b"sent" in outer.stderr
            no_traceback(outer.stderr)
            recs = _lines(tmp_path / f"{scheme}.jsonl")
            if scheme == "ws":
                assert recs[-1]["status"] == 126
                assert "cannot both be sent" in _events(tmp_path / "ws.jsonl",
                                                        "ws-open")[1]["error"]
    r = run_tool("tee", "--header", "Authorization: Bearer x", "--connect",
                 "ws://u:p@127.0.0.1:9/acp", input=b"")
    assert r.returncode == 2 and b"give the agent's credentials one way" in r.stderr


# -- frames ---------------------------------------------------------------------------------


def _close_code(port: int, frames: bytes) -> int | None:
    """Upgrade, send ``frames`` as they are, and read the server's frames up to its
    close frame: its code."""
    s = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16))
    s.sendall(b"GET /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: "
              + key + b"\r\n\r\n" + frames)
    data = b""
    s.settimeout(10)
    try:
        while b"\r\n\r\n" not in data:
            data += s.recv(65536)
        data = data.split(b"\r\n\r\n", 1)[1]
        while True:
            while len(data) < 2 or len(data) < 2 + (data[1] & 0x7F):
                chunk = s.recv(65536)
                if not chunk:
                    return None
                data += chunk
            size = data[1] & 0x7F  # (the server's frames here are small)
            if data[0] & 0x0F == 8:
                return struct.unpack("!H", data[2:4])[0]
            data = data[2 + size:]
    finally:
        s.close()


def _frame(payload: bytes, masked: bool = True, first: int = 0x81) -> bytes:
    mask = b"\x01\x02\x03\x04"
    if not masked:
        return bytes([first, len(payload)]) + payload
    return bytes([first, 0x80 | len(payload)]) + mask + bytes(
        b ^ mask[i % 4] for i, b in enumerate(payload))


def test_unmasked_and_malformed_client_frames_close_the_connection(tmp_path):
    """RFC 6455: a client frame not masked closes with 1002 (5.1), as a frame with
    reserved bits set does; text that is not UTF-8 closes with 1007. Each log says the
    code, stays valid (acp-frame reads it) and has its end record."""
    cases = {
        "unmasked": (_frame(b'{"a":1}') + _frame(b'{"b":2}', masked=False), 1002),
        "unmasked first": (_frame(b'{"b":2}', masked=False), 1002),
        "reserved bits": (_frame(b'{"a":1}', first=0xF1), 1002),
        "not UTF-8": (_frame(b'{"a":"\xff"}'), 1007),
    }
    with listen(tmp_path, url="ws://127.0.0.1:0/acp") as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        got = {name: _close_code(port, data) for name, (data, _code) in cases.items()}
        time.sleep(1)
    assert got == {name: code for name, (_data, code) in cases.items()}
    codes = sorted(e["code"] for p in logs(tmp_path) for e in _events(p, "ws-close"))
    assert codes == sorted(code for _d, code in cases.values())
    for p in logs(tmp_path):
        assert _lines(p)[-1]["end"] is True
        assert run_tool("frame", str(p)).returncode == 0
    no_traceback(server.stderr)


def test_an_http2_ping_flood_that_reads_nothing_is_bounded(tmp_path):
    """A client sends PING after PING and reads none of the answers: the listener stops
    reading it (the answers wait in one read's worth), stays small, serves others, and
    drops the flood at the header timeout."""
    with listen(tmp_path, "--header-timeout", "8") as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        ping = b"\x00\x00\x08\x06\x00\x00\x00\x00\x00" + b"12345678"
        s.setblocking(False)
        sent, pos, pings = 0, 0, ping * 4096
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                n = s.send(pings[pos:])  # (frame by frame whole, however much goes)
            except BlockingIOError:
                time.sleep(0.05)
                continue
            sent += n
            pos = (pos + n) % len(pings)
        served = asyncio.run(http_post(server.url))[0]
        peak = _peak_rss_mb(server.proc.pid)
        gone = _closed_by_peer_within(s, 15)
        s.close()
    assert served == 200 and peak < 150, peak
    assert sent < 64 * MIB, sent  # what the sockets' buffers hold: then it read no more
    assert gone and b"no complete request within 8 s" in server.stderr
    no_traceback(server.stderr)


def test_refused_and_dropped_connections_are_one_line_each(tmp_path):
    """A request aiohttp cannot parse, a header line too long, a body cut short: each
    one line, no traceback."""
    with listen(tmp_path) as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        for data in (b"GARBAGE\r\n\r\n",
                     b"GET /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: " + b"a" * 20000 + b"\r\n\r\n",
                     b"POST /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                     b"\r\nContent-Length: 100\r\n\r\n{"):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(data)
            time.sleep(0.3)
            s.close()
        time.sleep(0.5)
        server.stop()
    lines = server.stderr.splitlines()[1:]
    assert len(lines) <= 3 and all(x.startswith(b"acp-tee: ") for x in lines), lines
    assert any(b"it went before its POST body was whole" in x for x in lines)
    no_traceback(server.stderr)


# -- what held before, and holds ------------------------------------------------------------


def test_a_continuation_flood_is_cut(tmp_path):
    """HEADERS without END_HEADERS, then CONTINUATION frame after frame (a header block
    that never ends): the connection is dropped, said in one line; the listener stays
    small and goes on serving."""
    with listen(tmp_path) as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"
                  b"\x00\x00\x01\x01\x00\x00\x00\x00\x01" + b"\x82")  # HEADERS, no END_HEADERS
        block = b"\x00\x40\x00\x09\x00\x00\x00\x00\x01" + b"\x00" * 0x4000  # CONTINUATION
        sent = 0
        try:
            for _ in range(2000):
                s.sendall(block)
                sent += len(block)
        except OSError:
            pass
        gone = _closed_by_peer_within(s, 15)
        s.close()
        served = asyncio.run(h2_post(server.url))[0]
        peak = _peak_rss_mb(server.proc.pid)
    assert gone and served == 200 and peak < 150, (gone, served, peak)
    assert sent < 2000 * len(block)  # cut before the flood was all sent
    assert b"it broke the HTTP/2 protocol" in server.stderr
    no_traceback(server.stderr)


def test_five_thousand_streams_on_one_connection_are_answered(tmp_path):
    """One HTTP/2 connection, 5,000 requests (500 in flight at a time): each is
    answered, none is refused for the streams before it."""
    with listen(tmp_path) as server:
        async def many() -> list[int]:
            async with H2Client(server.url) as h2:
                async with h2.post(server.url, data=INIT.encode(),
                                   headers=list(JSON.items())) as r:
                    cid = r.headers["Acp-Connection-Id"]
                headers = [*JSON.items(), ("Acp-Connection-Id", cid)]

                async def one(i: int) -> int:
                    body = b'{"jsonrpc":"2.0","method":"x/note","params":{"i":%d}}' % i
                    async with h2.post(server.url, data=body, headers=headers) as r:
                        return r.status

                got: list[int] = []
                for start in range(0, 5000, 500):
                    got += await asyncio.gather(*(one(i) for i in range(start, start + 500)))
                return got

        got = asyncio.run(many())
        server.stop()
    assert got == [202] * 5000
    assert len([r for r in _lines(tmp_path / "l.jsonl") if r.get("dir") == "c2a"]) == 5001
    no_traceback(server.stderr)


def test_a_listener_killed_with_sigkill_leaves_whole_logs(tmp_path):
    """kill -9 mid-session: every frame logged so far is a whole line that acp-frame
    reads (no end record: the process had no chance to write one)."""
    import signal

    with listen(tmp_path, url="ws://127.0.0.1:0/acp") as server:
        async def talk() -> None:
            async with aiohttp.ClientSession() as http:
                ws = await http.ws_connect(server.url)
                await ws.send_str(INIT)
                await ws.receive()
                for i in range(20):
                    await ws.send_str(f'{{"jsonrpc":"2.0","method":"x/n","params":{{"i":{i}}}}}')
                await asyncio.sleep(0.5)
                server.proc.send_signal(signal.SIGKILL)
                await asyncio.sleep(0.5)

        asyncio.run(talk())
        server.proc.wait(timeout=30)
    recs = _lines(tmp_path / "l.jsonl")
    assert [r["dir"] for r in recs if "dir" in r] == ["c2a", "a2c"] + ["c2a"] * 20
    assert not recs[-1].get("end")
    framed = run_tool("frame", str(tmp_path / "l.jsonl"))
    assert framed.returncode == 0 and framed.stderr == b"", framed.stderr

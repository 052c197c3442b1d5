"""A web page the user visits while a listener runs, in a real Chromium (Debian's, under
Playwright): it must not reach the agent. WebSocket has no CORS, so a page on another
origin can open ``ws://127.0.0.1:PORT/acp``, and a DNS-rebound name makes the page
"same-origin" with the listener; the listener's Origin and Host checks
(acp_pipes.tee.policy) are what stop them. The same page on an origin the listener is
told to allow (``--allow-origin``) does reach the agent: the test sees what it claims.
"""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

import pytest

from tests.conftest import tool_argv
from tests.test_tee_remote import INIT, Server
from tests.test_tee_remote_policy import stored_session

pytestmark = pytest.mark.slow  # Chromium

#: The page: opens a WebSocket to the listener, sends initialize, reports what came back
#: (or that the connection failed); and POSTs initialize as JSON over fetch.
PAGE = """<!doctype html><meta charset="utf-8"><title>a page on the web</title><script>
window.result = new Promise((done) => {
  const out = {ws: null, post: null};
  const listener = new URL(location.hash.slice(1));
  const finish = () => { if (out.ws !== null && out.post !== null) done(out); };
  const ws = new WebSocket(listener.href.replace(/^http/, "ws"));
  ws.onopen = () => ws.send(INIT);
  ws.onmessage = (e) => { out.ws = "answered: " + e.data; ws.close(); finish(); };
  ws.onerror = () => { if (out.ws === null) { out.ws = "failed"; finish(); } };
  fetch(listener.href, {method: "POST", body: INIT,
                        headers: {"Content-Type": "application/json"}})
    .then((r) => r.text().then((t) => { out.post = r.status + " " + t; finish(); }))
    .catch((e) => { out.post = "blocked: " + e.name; finish(); });
});
</script>""".replace("INIT", repr(INIT))


@pytest.fixture(scope="module")
def chromium():
    """Chromium that resolves rebind.test to 127.0.0.1, as a DNS-rebinding attacker's
    name does once the page has loaded. Its own Local Network Access check (a page from
    a public address may not reach loopback) is off: Firefox and Safari have none, and
    the listener's check is what is tested here."""
    from playwright.sync_api import sync_playwright

    from tests.view_browser import FLAGS, chromium_path

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(),
                              args=[*FLAGS, "--host-resolver-rules=MAP rebind.test 127.0.0.1",
                                    "--disable-features=LocalNetworkAccessChecks"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def site():
    """Another origin on this machine (a dev server, a local app, a page a link opened):
    http://127.0.0.1:PORT/ serving PAGE."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = PAGE.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def visit(chromium, page_url: str, listener: str, route: bool = False) -> dict:
    """What PAGE, opened at ``page_url``, got from ``listener`` (``route``: the page
    itself comes from Playwright, as an attacker's server gave it before the rebind)."""
    context = chromium.new_context()
    try:
        page = context.new_page()
        if route:
            page.route(page_url.split("#")[0], lambda r: r.fulfill(
                status=200, content_type="text/html", body=PAGE))
        page.goto(f"{page_url}#{listener}")
        return page.evaluate("window.result")
    finally:
        context.close()


def tee_listener(tmp: Path, *extra: str) -> Server:
    return Server(tool_argv("tee", "-o", str(tmp / "l.jsonl"), "--clock", "epoch", *extra,
                            "--listen", "http://127.0.0.1:0/acp", "--",
                            *tool_argv("echo-agent")))


def test_a_page_on_another_origin_reaches_no_agent(chromium, site, tmp_path):
    """The page's WebSocket fails (403 at the upgrade) and its POST is refused (its
    preflight, or the request itself, 403): no agent starts, no log is made. Allowed
    with --allow-origin, the same page gets initialize answered over both (its POST's
    preflight answered, the answer readable: CORS)."""
    with tee_listener(tmp_path) as server:
        got = visit(chromium, site + "/", server.url)
        server.stop()
    assert got["ws"] == "failed", got
    assert got["post"].startswith("blocked:") or got["post"].startswith("403"), got
    assert list(tmp_path.glob("l*.jsonl")) == []
    assert b"refused GET /acp (HTTP/1.1)" in server.stderr
    assert f"Origin '{site}' is not allowed".encode() in server.stderr
    assert b"Traceback" not in server.stderr
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    with tee_listener(allowed, "--allow-origin", site) as server:
        got = visit(chromium, site + "/", server.url)
    assert got["ws"].startswith("answered: ") and '"result"' in got["ws"], got
    assert got["post"].startswith("200 ") and '"result"' in got["post"], got
    assert len(list(allowed.glob("l*.jsonl"))) == 2


def test_a_dns_rebound_page_reaches_no_agent(chromium, tmp_path):
    """A page loaded from rebind.test:PORT, the name then rebound to 127.0.0.1: its
    WebSocket and its same-origin POST of JSON reach the listener with Host
    rebind.test, and are refused (421; Chromium tries a 421 once more); no agent
    starts. With --allow-host rebind.test their Origin is still foreign (403); with
    --allow-origin too the same page is answered."""
    host = ("--allow-host", "rebind.test")
    for n, allow in enumerate(((), host, (*host, "--allow-origin", "http://rebind.test:*"))):
        tmp = tmp_path / str(n)
        tmp.mkdir()
        with tee_listener(tmp, *allow) as server:
            port = server.url.rsplit(":", 1)[1].split("/")[0]
            got = visit(chromium, f"http://rebind.test:{port}/page",
                        f"http://rebind.test:{port}/acp", route=True)
            server.stop()
        if n == 2:
            assert got["ws"].startswith("answered: ") and got["post"].startswith("200"), got
            continue
        if n == 1:
            assert got == {"ws": "failed", "post": "403 requests from this web origin are "
                                                   "refused\n"}, got
            continue
        assert got["ws"] == "failed", got
        assert got["post"].startswith("421"), got
        assert list(tmp.glob("l*.jsonl")) == []
        lines = [x for x in server.stderr.splitlines() if b"refused" in x]
        assert {x.split(b"refused ")[1].split(b" from")[0] for x in lines} == {
            b"GET /acp (HTTP/1.1)", b"POST /acp (HTTP/1.1)"}
        assert all(f"Host 'rebind.test:{port}' is not this listener's".encode() in x
                   for x in lines)


def test_a_page_on_another_origin_lists_no_stored_session(chromium, site, tmp_path):
    """acp-replay --serve --listen hands out every stored session: a foreign page gets
    none of them."""
    stream = stored_session(tmp_path)
    with Server(tool_argv("replay", "--serve", str(stream), "--listen",
                          "http://127.0.0.1:0/acp")) as server:
        got = visit(chromium, site + "/", server.url)
        server.stop()
    assert got["ws"] == "failed", got
    assert got["post"].startswith("blocked:") or got["post"].startswith("403"), got
    assert b"acp-replay: refused GET /acp (HTTP/1.1)" in server.stderr

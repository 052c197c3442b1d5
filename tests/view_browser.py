"""Debian's Chromium, headless, driven by Playwright: what the acp-view tests look through.

Playwright never downloads a browser here: it launches the system's ``chromium`` (which
``make install`` installs, see scripts/install-system-deps). Each page is opened from
``file://``; every request the page makes, every console message and every uncaught
error is recorded, so a test can say "no network, no console error". Every page opened
is also watched for text that reads ``[object Object]`` (a recorded object shown with
``String``) from its first node to the end of the test: :func:`no_object_object`, an
autouse fixture each page test module imports, fails the test that showed one.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_path() -> str:
    """The system Chromium; a missing one is an install problem, not a reason to skip."""
    path = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if not path:
        raise RuntimeError("Chromium is not installed: run `make install` (it installs "
                           "Debian's chromium package), or apt-get install chromium")
    return path


class Opened:
    """A page opened from a file, with what it asked for and what it said."""

    def __init__(self, page, url: str):
        self.page = page
        self.url = url
        self.requests: list[str] = []
        self.console: list[tuple[str, str]] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.failed: list[tuple[str, str]] = []  # requests that never completed, and why

    @property
    def foreign_requests(self) -> list[str]:
        return [u for u in self.requests if u != self.url]

    @property
    def console_errors(self) -> list[str]:
        return [text for kind, text in self.console if kind == "error"] + self.errors


#: Run in each page before its own script: records every text node, and every title,
#: value or placeholder, that reads [object Object], whenever it appears.
WATCH = r"""
(() => {
  const seen = [];
  window.__objectObject = seen;
  const BAD = '[object Object]';
  const attrs = ['title', 'value', 'placeholder', 'aria-label'];
  const shown = (t) => !t.parentNode || !['SCRIPT', 'STYLE'].includes(t.parentNode.nodeName);
  const look = (n) => {  // the page's own script and data are not text on the page
    if (n.nodeType === 3) { if (n.data.includes(BAD) && shown(n)) seen.push(n.data.slice(0, 200)); return; }
    if (n.nodeType !== 1 && n.nodeType !== 11) return;
    const w = document.createTreeWalker(n, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT);
    for (let x = w.currentNode; x; x = w.nextNode()) {
      if (x.nodeType === 3) { if (x.data.includes(BAD) && shown(x)) seen.push(x.data.slice(0, 200)); }
      else for (const a of attrs) { const v = x.getAttribute(a); if (v && v.includes(BAD)) seen.push(a + '=' + v.slice(0, 200)); }
    }
  };
  new MutationObserver((changes) => {
    for (const c of changes) {
      if (c.type === 'childList') c.addedNodes.forEach(look);
      else if (c.type === 'characterData') look(c.target);  // (a text node's data changed)
      else if (c.type === 'attributes') { const v = c.target.getAttribute(c.attributeName); if (v && v.includes(BAD)) seen.push(c.attributeName + '=' + v.slice(0, 200)); }
    }
  }).observe(document, {childList: true, subtree: true, characterData: true, attributes: true,
                        attributeFilter: attrs});
})();
"""

#: The pages opened since the last check (see :func:`no_object_object`).
OPENED: list[Opened] = []


def object_texts(opened: Opened) -> list[str]:
    """The texts of ``opened`` that read ``[object Object]``, seen at any time, and any
    in the page now (a closed page has none to tell)."""
    if opened.page.is_closed():
        return []
    return opened.page.evaluate(
        "() => [...window.__objectObject, ...(document.body.innerText.includes("
        "'[object Object]') ? ['body: ' + document.body.innerText.slice(0, 200)] : [])]")


@pytest.fixture(autouse=True)
def no_object_object():
    """Fails a test whose pages showed ``[object Object]`` anywhere, at any time."""
    OPENED.clear()
    yield
    found = {o.url: object_texts(o) for o in OPENED}
    OPENED.clear()
    found = {url: texts for url, texts in found.items() if texts}
    assert not found, f"[object Object] on the page: {found}"


def open_page(browser, path: Path, viewport=(1400, 900)) -> Opened:
    """Open ``path`` in a new page; returns once the page's script says it is drawn."""
    page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
    page.add_init_script(WATCH)
    url = path.resolve().as_uri()
    opened = Opened(page, url)
    OPENED.append(opened)
    page.on("request", lambda r: opened.requests.append(r.url))
    page.on("requestfailed", lambda r: opened.failed.append((r.url, r.failure)))
    page.on("console", lambda m: opened.console.append((m.type, m.text)))
    page.on("pageerror", lambda e: opened.errors.append(str(e)))

    def dialog(d) -> None:
        opened.dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", dialog)
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']", state="attached", timeout=60_000)
    return opened


#: Script injections, as a prompt, an agent or a file name could carry them.
PAYLOADS = [
    "</script><script>window.__pwned = 1; alert(1)</script>",
    "<img src=x onerror=\"window.__pwned = 2; alert(2)\">",
    "javascript:window.__pwned=3;alert(3)",
    "<!--<script>window.__pwned = 4</script>-->",
    "<svg onload=\"window.__pwned=5\"><a href=\"javascript:alert(5)\">x</a></svg>",
    "\u2028\u2029<style>body{display:none}</style>",
]


def _wire(records: list[tuple[str, dict]]) -> bytes:
    head = {"format": "acp-pipes/wire", "version": 1, "recorder": "hand", "argv": ["a"],
            "started": "2026-01-01T00:00:00.000000Z", "clock": "nanos", "env": {}}
    out = [orjson.dumps(head)]
    for seq, (d, msg) in enumerate(records):
        out.append(orjson.dumps({"seq": seq, "t": 1_767_225_600_000_000_000 + seq * 1000,
                                 "dir": d, "raw": orjson.dumps(msg).decode()}))
    return b"\n".join(out) + b"\n"


def hostile_wire() -> bytes:
    """A v2 wire log whose prompt, thought, answer, plan, tool call (title, input,
    output, paths, diff), method name, permission and session ID carry PAYLOADS."""
    p = " ".join(PAYLOADS)
    sid = PAYLOADS[0]

    def upd(update: dict) -> tuple[str, dict]:
        return "a2c", {"jsonrpc": "2.0", "method": "session/update",
                       "params": {"sessionId": sid, "update": update}}

    return _wire([
        ("c2a", {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                 "params": {"protocolVersion": 2, "info": {"name": p, "version": "1"},
                            "capabilities": {}}}),
        ("a2c", {"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": 2, "info": {"name": PAYLOADS[1], "version": PAYLOADS[2]},
            "capabilities": {"session": {}}}}),
        ("c2a", {"jsonrpc": "2.0", "id": 1, "method": "session/new",
                 "params": {"cwd": "/ws/" + PAYLOADS[1], "mcpServers": []}}),
        ("a2c", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": sid}}),
        ("c2a", {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
            "sessionId": sid, "prompt": [{"type": "text", "text": "PROMPT " + p},
                                         {"type": "resource_link", "name": PAYLOADS[1],
                                          "uri": PAYLOADS[2]}]}}),
        ("a2c", {"jsonrpc": "2.0", "id": 2, "result": {"messageId": "m1"}}),
        upd({"sessionUpdate": "user_message", "messageId": "m1",
             "content": [{"type": "text", "text": "PROMPT " + p}]}),
        upd({"sessionUpdate": "agent_thought_chunk", "messageId": "t1",
             "content": {"type": "text", "text": "THOUGHT " + p}}),
        upd({"sessionUpdate": "agent_message_chunk", "messageId": "a1",
             "content": {"type": "text", "text": "ANSWER " + p}}),
        upd({"sessionUpdate": "plan_update", "plan": {
            "type": "items", "planId": "p1",
            "entries": [{"content": "PLAN " + p, "priority": "high", "status": "pending"}]}}),
        upd({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "name": PAYLOADS[1],
             "title": "TITLE " + p, "kind": "edit", "status": "in_progress",
             "rawInput": {"path": PAYLOADS[2], "cmd": p},
             "locations": [{"path": "/ws/" + PAYLOADS[0]}]}),
        upd({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
             "rawOutput": {"out": "OUTPUT " + p},
             "content": [{"type": "content", "content": {"type": "text", "text": "OUTPUT " + p}},
                         {"type": "diff", "changes": [{"operation": "modify",
                                                       "path": "/ws/" + PAYLOADS[1]}],
                          "patch": {"format": "unified", "text": "--- a\n+++ b\n@@ -1 +1 @@\n-"
                                    + PAYLOADS[0] + "\n+" + PAYLOADS[1] + "\n"}}]}),
        ("a2c", {"jsonrpc": "2.0", "method": PAYLOADS[1], "params": {"x": p}}),
        ("a2c", {"jsonrpc": "2.0", "id": 7, "method": "session/request_permission", "params": {
            "sessionId": sid, "toolCall": {"toolCallId": "c1"},
            "title": "PERMISSION " + p,
            "options": [{"optionId": "allow", "name": PAYLOADS[1], "kind": "allow_once"}]}}),
        ("c2a", {"jsonrpc": "2.0", "id": 7, "result": {
            "outcome": {"outcome": "selected", "optionId": "allow"}}}),
    ])




def fork_chain_wire(n: int) -> bytes:
    """A v2 wire log of a chain of ``n`` forks (ASR-718): session s0, then s1 forked from
    s0, s2 from s1, ... s<n> from s<n-1>; each session says one turn."""
    def m(**kw) -> dict:
        return {"jsonrpc": "2.0", **kw}

    out = [("c2a", m(id=0, method="initialize", params={
               "protocolVersion": 2, "info": {"name": "client", "version": "1"},
               "capabilities": {}})),
           ("a2c", m(id=0, result={"protocolVersion": 2, "info": {"name": "agent",
                                                                   "version": "1"},
                                   "capabilities": {"session": {}}})),
           ("c2a", m(id=1, method="session/new", params={"cwd": "/ws", "mcpServers": []})),
           ("a2c", m(id=1, result={"sessionId": "s0"}))]
    for i in range(1, n + 1):
        out.append(("c2a", m(id=1 + i, method="session/fork",
                             params={"sessionId": f"s{i - 1}", "cwd": "/ws"})))
        out.append(("a2c", m(id=1 + i, result={"sessionId": f"s{i}"})))
    return _wire(out)

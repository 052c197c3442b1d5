"""acp-view pages in a real browser: what a person sees, not that a file exists.

Recordings: the echo agent (ACP v2) under the real acp-tee, driven turn by turn by its
``--script`` client (permissions, questions), the official v1 SDK peers, and hand-made
wire logs whose
prompts, tool output, paths, IDs and method names carry script injections.
"""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from acp_pipes.echo.client import client_session
from tests.conftest import record_lockstep, run_tool, tool_argv, tool_env
from tests.view_browser import (
    PAYLOADS,
    fork_chain_wire,
    hostile_wire,
    no_object_object,  # noqa: F401 - every test checks its pages
    open_page,
)

pytestmark = pytest.mark.slow  # Chromium


@pytest.fixture(scope="module")
def echo(tmp_path_factory) -> dict:
    """An echo session with five prompts (two ask permission, one asks a question),
    recorded by acp-tee, and its page."""
    tmp = tmp_path_factory.mktemp("view")
    wire = tmp / "wire.jsonl"
    record_lockstep(list(client_session(5, permission_every=2, elicit_every=3)), wire)
    html = tmp / "echo.html"
    r = run_tool("view", str(wire), "-o", str(html))
    assert r.returncode == 0, r.stderr
    lines = wire.read_bytes().splitlines()
    frames = [orjson.loads(x) for x in lines[1:-1]]  # between the header and the end record
    return {"wire": wire, "html": html, "frames": frames}


def row_of(page, i: int):
    """Timeline row of frame ``i`` (all rows shown), scrolled into sight as a reader
    scrolls: only the rows in sight exist."""
    page.locator("#tl-scroll").evaluate("(e, y) => { e.scrollTop = y; }", max(0, i * 22 - 100))
    row = page.locator(f"#tl-space .tl-row[data-frame='{i}']:not([hidden])")
    row.wait_for()
    return row


def _messages(frames: list[dict]) -> list[dict]:
    return [orjson.loads(f["raw"]) for f in frames if "raw" in f]


def test_page_opens_from_file_with_no_network_and_no_console_error(browser, echo):
    page = open_page(browser, echo["html"])
    assert page.url.startswith("file://")
    assert page.foreign_requests == []
    assert page.console_errors == []
    assert page.page.title() == f"acp-view: {echo['wire']}"
    assert page.page.locator("#sessions button").count() == 1


def test_one_tool_card_per_tool_call_of_the_stream(browser, echo):
    calls = {m["params"]["update"]["toolCallId"] for m in _messages(echo["frames"])
             if m.get("method") == "session/update"
             and m["params"]["update"].get("sessionUpdate") == "tool_call_update"}
    assert len(calls) == 5
    page = open_page(browser, echo["html"]).page
    cards = page.locator(".card.tool")
    assert cards.count() == len(calls)
    assert {cards.nth(i).get_attribute("data-call-id") for i in range(cards.count())} == calls
    # what a card shows: the kind, the final status, the input, the output
    first = cards.nth(0)
    assert "completed" in first.locator(".h").inner_text()
    assert '"text": "hello 1"' in first.inner_text()


def test_permissions_and_questions_show_their_answers(browser, echo):
    page = open_page(browser, echo["html"]).page
    perms = page.locator(".card.permission")
    assert perms.count() == 2
    assert "answer: allow" in perms.nth(0).inner_text()
    question = page.locator(".card.input")
    assert question.count() == 1
    assert "answered" in question.inner_text()


def test_thoughts_plans_and_state_read_as_a_person_reads_them(browser, echo):
    page = open_page(browser, echo["html"]).page
    plan = page.locator(".card.plan").first
    assert "Echo the prompt" in plan.inner_text()
    assert plan.locator(".badge.b-completed").count() >= 1
    # the agent's chunks read as one message
    assert page.locator(".card.msg.assistant").first.locator(".text").inner_text() == \
        "Echo: hello 1"


def test_transcript_search_finds_a_known_phrase(browser, echo):
    from playwright.sync_api import expect  # imported where used: not at every collection

    page = open_page(browser, echo["html"]).page
    page.fill("#t-search", "hello 4")
    expect(page.locator("#t-count")).to_contain_text("match")
    cards = page.locator("#t-body .card")
    assert cards.count() >= 1
    for i in range(cards.count()):
        assert "hello 4" in cards.nth(i).inner_text().lower()
    assert page.locator("#t-body mark").first.inner_text() == "hello 4"
    assert page.locator("#t-body .card", has_text="hello 1").count() == 0


def test_timeline_search_finds_a_known_phrase(browser, echo):
    from playwright.sync_api import expect

    page = open_page(browser, echo["html"]).page
    page.click("#tab-timeline")
    page.fill("#f-search", "hello 3")
    found = [f for f in echo["frames"] if "hello 3" in f["raw"]]
    expect(page.locator("#f-count")).to_have_text(f"{len(found)} of {len(echo['frames'])} frames")
    page.uncheck("#f-runs")
    rows = page.locator("#tl-space .tl-row:not([hidden])")
    assert rows.count() == len(found)
    seqs = sorted(int(rows.nth(i).locator("span").first.inner_text()) for i in range(rows.count()))
    assert seqs == [f["seq"] for f in found]


def test_clicking_a_timeline_row_shows_that_frames_exact_bytes(browser, echo):
    page = open_page(browser, echo["html"]).page
    page.click("#tab-timeline")
    page.uncheck("#f-runs")  # every frame a row of its own
    frames = echo["frames"]
    rows = page.locator("#tl-space .tl-row:not([hidden])")
    assert 0 < rows.count() < len(frames)  # virtual: only the rows in sight are drawn
    for i, frame in enumerate(frames):
        row_of(page, i).click()
        assert page.locator("#raw").text_content() == frame["raw"], frame["seq"]
        assert page.locator("#detail h3").first.inner_text().startswith(f"#{frame['seq']} ")


def test_chunk_runs_collapse_and_open(browser, echo):
    page = open_page(browser, echo["html"]).page
    page.click("#tab-timeline")
    runs = page.locator("#tl-space .tl-row.run")
    assert runs.count() >= 3  # agent_message_chunk and tool content chunks, two or more
    first = runs.first
    assert "× agent_message_chunk" in first.inner_text()
    n = int(first.inner_text().split("▸ ")[1].split(" ×")[0])
    height = page.locator("#tl-space").evaluate("e => e.offsetHeight")
    first.click()
    assert page.locator("#tl-space").evaluate("e => e.offsetHeight") == height + n * 22
    assert "▾ " in first.inner_text()
    assert page.locator("#tl-space .tl-row.member:not([hidden])").count() == n


def test_timeline_filters_by_kind_method_and_session(browser, echo):
    page = open_page(browser, echo["html"]).page
    page.click("#tab-timeline")
    requests = [f for f in echo["frames"] if "method" in orjson.loads(f["raw"])
                and "id" in orjson.loads(f["raw"])]
    page.select_option("#f-kind", label="request")
    assert page.locator("#f-count").inner_text() == f"{len(requests)} of {len(echo['frames'])} frames"
    page.select_option("#f-kind", label="every kind")
    page.select_option("#f-method", label="session/prompt")
    prompts = [m for m in _messages(echo["frames"]) if m.get("method") == "session/prompt"]
    assert page.locator("#f-count").inner_text().startswith(f"{2 * len(prompts)} of")


def test_a_pair_is_linked_with_its_latency(browser, echo):
    page = open_page(browser, echo["html"]).page
    page.click("#tab-timeline")
    page.locator("#tl-space .tl-row[data-frame='0']").click()  # initialize
    detail = page.locator("#detail").inner_text()
    assert "answered by" in detail and "#1 response" in detail
    page.locator("#detail button", has_text="#1 response").click()
    assert '"result"' in page.locator("#raw").text_content()


def test_a_transcript_card_links_to_its_frames(browser, echo):
    page = open_page(browser, echo["html"]).page
    card = page.locator(".card.msg.user").first
    seq = card.locator(".foot button").first.inner_text()
    card.locator(".foot button").first.click()
    assert not page.locator("#timeline").is_hidden()
    frame = next(f for f in echo["frames"] if str(f["seq"]) == seq)
    assert page.locator("#raw").text_content() == frame["raw"]


# -- untrusted input ----------------------------------------------------------------

@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("hostile")
    wire = tmp / "hostile.jsonl"
    wire.write_bytes(hostile_wire())
    html = tmp / "hostile.html"
    r = run_tool("view", str(wire), "-o", str(html))
    assert r.returncode == 0, r.stderr
    return {"wire": wire, "html": html}


def test_the_html_holds_no_recorded_markup(hostile):
    page = hostile["html"].read_bytes()
    parts = re.findall(rb'<script type="application/json" id="[a-z0-9-]+">(.*?)</script>',
                       page, re.S)
    assert len(parts) == 3  # the page's data, the frames, the one session's cards
    for p in PAYLOADS:  # (a javascript: URL in JSON text is inert text: it stays)
        if "<" in p:
            assert p.encode() not in page
    rest = page
    for data in parts:
        assert b"<" not in data and b">" not in data and b"&" not in data
        rest = rest.replace(data, b"")
    assert page.count(b"<script") == page.count(b"</script>") == len(parts) + 1
    assert page.count(b"<script>") == 1  # the one that runs: the page's own
    assert b"onerror" not in rest and b"javascript:" not in rest


def test_script_injections_render_as_text_and_run_none(browser, hostile):
    opened = open_page(browser, hostile["html"])
    page = opened.page
    assert page.evaluate("window.__pwned") is None
    assert opened.dialogs == []
    assert opened.foreign_requests == []
    assert opened.console_errors == []
    # nothing from the data became an element: no image, svg, link, style or extra script
    assert page.evaluate("document.querySelectorAll('img, svg, a, iframe, object, embed').length") == 0
    assert page.evaluate("[...document.scripts].filter(s => s.type !== 'application/json')"
                         ".length") == 1
    assert page.evaluate("document.querySelectorAll('style').length") == 1
    text = page.locator("#t-body").inner_text()
    for word in ("PROMPT", "ANSWER", "PLAN", "TITLE", "OUTPUT", "PERMISSION"):
        assert f"{word} {PAYLOADS[0]}" in text or f"{word} " + " ".join(PAYLOADS).split("\u2028")[0] in text, word
    assert PAYLOADS[1] in text and PAYLOADS[2] in text  # the tool name, the link's URI: text
    page.locator("details.thought summary").click()
    assert "THOUGHT " + PAYLOADS[0] in page.locator("details.thought").inner_text()
    # the diff shows the injected lines as lines of the diff
    assert page.locator(".diff .del").inner_text() == "-" + PAYLOADS[0]
    assert page.locator(".diff .add").inner_text() == "+" + PAYLOADS[1]
    # the timeline: the method name and every raw frame are text too
    page.click("#tab-timeline")
    page.uncheck("#f-runs")
    records = [orjson.loads(x) for x in hostile["wire"].read_bytes().splitlines()[1:]]
    for i, rec in enumerate(records):
        row_of(page, i).click()
        assert page.locator("#raw").text_content() == rec["raw"]
    page.fill("#f-search", "onerror")
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.querySelectorAll('img, svg, a').length") == 0
    assert opened.dialogs == [] and opened.console_errors == []


def test_the_policy_forbids_network_and_foreign_script(browser, hostile, tmp_path):
    """Even markup that got into the page could do nothing: the page's own policy
    refuses an inline script and an image it did not name."""
    page_bytes = hostile["html"].read_bytes()
    planted = page_bytes.replace(
        b"</body>", b'<img src="http://127.0.0.1:9/x.png"><script>window.__pwned=9</script></body>')
    evil = tmp_path / "planted.html"
    evil.write_bytes(planted)
    opened = open_page(browser, evil)
    assert opened.page.evaluate("window.__pwned") is None
    assert opened.foreign_requests == ["http://127.0.0.1:9/x.png"]  # attempted, and
    assert opened.failed == [("http://127.0.0.1:9/x.png", "csp")]  # blocked by the policy
    assert any("Content Security Policy" in e for e in opened.console_errors)


def test_bytes_that_are_not_utf8_show_as_hex(browser, tmp_path):
    head = {"format": "acp-pipes/wire", "version": 1, "recorder": "hand", "argv": ["a"],
            "started": "2026-01-01T00:00:00.000000Z", "clock": "nanos", "env": {}}
    raw = b'{"jsonrpc":"2.0","method":"x","params":{"s":"\xff<script>"}}'
    rec = {"seq": 0, "t": 5, "dir": "a2c", "raw_b64": base64.b64encode(raw).decode()}
    wire = tmp_path / "bin.jsonl"
    wire.write_bytes(orjson.dumps(head) + b"\n" + orjson.dumps(rec) + b"\n")
    html = tmp_path / "bin.html"
    assert run_tool("view", str(wire), "-o", str(html)).returncode == 0
    opened = open_page(browser, html)
    page = opened.page
    assert not page.locator("#timeline").is_hidden()  # no session: the timeline first
    page.locator("#tl-space .tl-row[data-frame='0']").click()
    dump = page.locator("#raw").text_content()
    assert dump.startswith("00000000  7b 22 6a 73")
    assert "22 ff 3c 73" in dump
    assert opened.console_errors == []


def test_asr_streams_give_a_transcript_without_timeline(browser, echo, tmp_path):
    streams = tmp_path / "streams"
    assert run_tool("asr", "-o", str(streams), str(echo["wire"])).returncode == 0
    html = tmp_path / "asr.html"
    r = run_tool("view", *map(str, sorted(streams.iterdir())), "-o", str(html))
    assert r.returncode == 0, r.stderr
    opened = open_page(browser, html)
    assert opened.page.locator(".card.tool").count() == 5
    assert opened.page.locator(".card.tool .foot button").count() == 0  # no frames to show
    assert opened.console_errors == []


def _fixture(name: str) -> Path:
    return Path(__file__).parent / "fixtures" / "asr" / name / "wire.jsonl"


def test_diffs_render_as_diffs_ASR_715(browser, tmp_path):
    html = tmp_path / "diff.html"
    assert run_tool("view", str(_fixture("ASR-715-diff-to-file-change")), "-o", str(html)).returncode == 0
    page = open_page(browser, html).page
    card = page.locator(".card.tool").first
    assert card.locator(".fchange li").first.inner_text() == "modify /ws/app/src/a.py"
    assert card.locator(".diff .meta").first.inner_text() == "diff --git a/src/a.py b/src/a.py"


def test_forks_and_subagents_link_their_sessions_ASR_718_ASR_721(browser, tmp_path):
    for name in ("ASR-718-fork-lineage", "ASR-721-subagents"):
        html = tmp_path / f"{name}.html"
        assert run_tool("view", str(_fixture(name)), "-o", str(html)).returncode == 0
        page = open_page(browser, html).page
        links = page.locator(".shead dd button")
        assert links.count() >= 1, name
        target = links.first.inner_text().split()[-1]
        links.first.click()
        assert page.locator(".shead h2").inner_text() == target, name
        back = page.locator(".shead dd button").first
        assert back.count() == 1, name


def test_a_v1_recording_has_its_tool_cards(browser, tmp_path):
    """ACP v1, what agents in use speak: the cards of its tool calls (v1 ``tool_call``
    and ``tool_call_update``), one per call ID of the stream."""
    wire = _fixture("ASR-714-v1-tool-calls")
    calls = {m["params"]["update"]["toolCallId"] for m in _messages(
        [orjson.loads(x) for x in wire.read_bytes().splitlines()[1:]])
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] in ("tool_call", "tool_call_update")}
    html = tmp_path / "v1.html"
    assert run_tool("view", str(wire), "-o", str(html)).returncode == 0
    opened = open_page(browser, html)
    cards = opened.page.locator(".card.tool")
    assert {cards.nth(i).get_attribute("data-call-id") for i in range(cards.count())} == calls
    assert cards.count() == len(calls) == 2
    assert "Fetch example.com" in cards.nth(1).inner_text()
    assert opened.console_errors == []


def test_spec_violations_are_those_acp_frame_validate_reports(browser, hostile, tmp_path):
    """The spec column shows, on each frame, the violations ``acp-frame --validate`` finds
    (a prompt without its required field, a method no side defines, a request never
    answered, ...); the filter shows just those frames."""
    r = run_tool("frame", "--validate", str(hostile["wire"]))
    found = [orjson.loads(x) for x in r.stdout.splitlines()]
    found = [v for v in found if v["type"] == "violation"]
    assert found
    by_seq: dict[int, int] = {}
    for v in found:
        by_seq[v["seq"]] = by_seq.get(v["seq"], 0) + 1
    page = open_page(browser, hostile["html"]).page
    n = len(found)
    assert page.locator("#summary").inner_text().endswith(f"{n} spec violation" + ("s" if n > 1 else ""))
    page.click("#tab-timeline")
    page.uncheck("#f-runs")
    page.select_option("#f-kind", value="v")
    rows = page.locator("#tl-space .tl-row:not([hidden])")
    assert rows.count() == len(by_seq)
    for k in range(rows.count()):
        row = rows.nth(k)
        seq = int(row.locator("span").first.inner_text())
        assert row.locator("span").nth(9).inner_text() == f"⚠ {by_seq[seq]}"
    row = rows.first
    seq = int(row.locator("span").first.inner_text())
    row.click()
    spec = page.locator("#detail ul.viols li")
    assert spec.count() == by_seq[seq]
    first = next(v for v in found if v["seq"] == seq)
    assert first["rule"] in spec.first.inner_text() and first["message"] in spec.first.inner_text()


def test_a_clean_recording_says_no_violation(browser, tmp_path):
    wire, html = tmp_path / "clean.jsonl", tmp_path / "clean.html"
    record_lockstep(list(client_session(3, permission_every=2)), wire)
    assert run_tool("frame", "--validate", str(wire)).returncode == 0
    assert run_tool("view", str(wire), "-o", str(html)).returncode == 0
    page = open_page(browser, html).page
    assert page.locator("#summary").inner_text().endswith("no spec violation")
    page.click("#tab-timeline")
    row_of(page, 0).click()
    assert "no violation" in page.locator("#detail").inner_text()


def test_a_v1_session_of_two_official_sdk_peers(browser, tmp_path):
    """ACP v1 as agents in use speak it: the Python SDK's client and agent
    (tests/clients/v1_sdk_session.py) recorded through acp-tee; its page shows a card per
    tool call and permission, and no spec violation."""
    script = str(Path(__file__).parent / "clients" / "v1_sdk_session.py")
    wire, html = tmp_path / "v1.jsonl", tmp_path / "v1.html"
    proc = subprocess.run([sys.executable, script, "client", "4", "--",
                           *tool_argv("tee", "-o", str(wire), "--", sys.executable, script,
                                      "agent")],
                          capture_output=True, env=tool_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert run_tool("view", str(wire), "-o", str(html)).returncode == 0
    msgs = _messages([orjson.loads(x) for x in wire.read_bytes().splitlines()[1:]
                      if b'"dir"' in x])
    assert msgs[0]["params"]["protocolVersion"] == 1
    calls = {m["params"]["update"]["toolCallId"] for m in msgs
             if m.get("method") == "session/update"
             and m["params"]["update"]["sessionUpdate"] in ("tool_call", "tool_call_update")}
    asks = [m for m in msgs if m.get("method") == "session/request_permission"]
    assert calls and asks
    opened = open_page(browser, html)
    page = opened.page
    assert page.locator(".card.tool").count() == len(calls)
    assert page.locator(".card.permission").count() == len(asks)
    assert page.locator("#summary").inner_text().endswith("no spec violation")
    assert opened.console_errors == [] and opened.foreign_requests == []


def test_a_chain_of_ten_thousand_forks_renders_ASR_718(browser, tmp_path):
    # each session forked from the one before: the session tree is 10,001 deep
    wire = tmp_path / "forks.jsonl"
    wire.write_bytes(fork_chain_wire(10_000))
    html = tmp_path / "forks.html"
    r = run_tool("view", str(wire), "-o", str(html))
    assert r.returncode == 0, r.stderr
    opened = open_page(browser, html)
    page = opened.page
    assert opened.console_errors == []
    buttons = page.locator("#sessions button")
    assert buttons.count() == 10_001
    assert buttons.nth(0).locator(".sid").inner_text() == "s0"
    assert buttons.nth(1).locator(".sid").inner_text() == "s1"
    last = buttons.nth(10_000)
    assert last.locator(".sid").inner_text() == "s10000"
    assert last.get_attribute("title") == "s10000 (depth 10000)"
    # indented as deep as 16 levels show, not 10,000 (140,000 px off to the right)
    assert last.evaluate("b => parseInt(b.style.paddingLeft)") == 10 + 14 * 16
    assert page.locator(".shead h2").inner_text() == "s0"
    last.click()
    assert page.locator(".shead h2").inner_text() == "s10000"
    assert page.locator(".shead dd button").first.inner_text() == "s9999"


def _asr_721() -> bytes:
    return (Path(__file__).parent / "fixtures" / "asr" / "ASR-721-subagents"
            / "expected.asr.jsonl").read_bytes()


def test_a_recorded_role_never_becomes_a_class_name(browser, tmp_path):
    # the parent's prompt (role "user") recorded with a role that names the page's classes
    lines = _asr_721().splitlines()
    i = next(k for k, x in enumerate(lines) if b'"role":"user"' in x)
    lines[i] = lines[i].replace(b'"role":"user"', b'"role":"user tl-row sel"')
    streams = tmp_path / "roles.asr.jsonl"
    streams.write_bytes(b"\n".join(lines) + b"\n")
    html = tmp_path / "roles.html"
    assert run_tool("view", str(streams), "-o", str(html)).returncode == 0
    page = open_page(browser, html).page
    card = page.locator(".card.msg").first
    assert card.evaluate("c => [...c.classList]") == ["card", "msg", "other"]
    assert card.locator(".who").inner_text() == "user tl-row sel"  # shown as text
    page.locator("#sessions button", has_text="kid").click()
    assert page.locator(".card.msg").first.evaluate("c => [...c.classList]") == [
        "card", "msg", "assistant"]


def test_a_subagent_card_shows_its_state_ASR_721(browser, tmp_path):
    # the parent's subagent record: {"state": {"state": "idle", "stopReason": "end_turn"}}
    streams = tmp_path / "sub.asr.jsonl"
    streams.write_bytes(_asr_721())
    html = tmp_path / "sub.html"
    assert run_tool("view", str(streams), "-o", str(html)).returncode == 0
    page = open_page(browser, html).page
    card = page.locator(".card.subagent")
    assert card.count() == 1
    assert card.locator(".h .badge").all_inner_texts() == ["idle", "revised ×1"]
    assert card.locator(".state").inner_text() == "state: stop reason end_turn"


def test_recorded_objects_where_text_is_expected_show_as_json(browser, tmp_path):
    # a subagent's title, a message's author and a declared loss recorded as objects:
    # each shown as its JSON (and the page-wide watch finds no [object Object])
    out = []
    for line in _asr_721().splitlines():
        rec = orjson.loads(line)
        if rec.get("type") == "subagent":
            rec["title"] = {"name": "Researcher"}
        elif rec.get("type") == "message" and rec.get("role") == "user":
            rec["author"] = {"actor": "human"}
        elif rec.get("type") == "header" and rec.get("sessionId") == "parent":
            rec["producer"]["lossy"].append({"field": "x"})
        out.append(orjson.dumps(rec))
    streams = tmp_path / "objects.asr.jsonl"
    streams.write_bytes(b"\n".join(out) + b"\n")
    html = tmp_path / "objects.html"
    assert run_tool("view", str(streams), "-o", str(html)).returncode == 0
    page = open_page(browser, html).page
    assert page.locator(".card.subagent .h span").nth(1).inner_text() == '{"name":"Researcher"}'
    assert '{"actor":"human"}' in page.locator(".card.msg .h .badge").all_inner_texts()
    assert page.locator(".shead dd").all_inner_texts()[-3].endswith('{"field":"x"}')


def test_the_session_head_says_which_connections_it_was_recorded_on(browser, echo, tmp_path):
    """`native.connections` [0] reads "connection #0" (it read "connections 0", as if
    there were none); a session recorded over two connections names both."""
    def said(html) -> dict[str, str]:
        page = open_page(browser, html).page
        terms = page.locator(".shead dt").all_inner_texts()
        return dict(zip(terms, page.locator(".shead dd").all_inner_texts(), strict=True))

    assert said(echo["html"])["recorded on"] == "connection #0"
    two = _fixture("ASR-704-entity-across-connections")  # two wire logs back to back
    html = tmp_path / "two.html"
    r = run_tool("view", str(two), "-o", str(html))
    assert r.returncode == 0, r.stderr
    assert said(html)["recorded on"].startswith("connections #0, #1")

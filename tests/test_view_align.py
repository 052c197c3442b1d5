"""acp-align --format html in a real browser: two runs side by side, the first
divergence marked where acp-align's own summary says it is, both steps' exact text a
click away, and recorded markup shown as text."""

from __future__ import annotations

import orjson
import pytest

from acp_pipes.echo_client import client_session
from tests.conftest import record_lockstep, run_tool
from tests.view_browser import PAYLOADS, hostile_wire, open_page


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """The echo session of three prompts, and the same with the second prompt changed."""
    tmp = tmp_path_factory.mktemp("align")
    a, b = tmp / "a.jsonl", tmp / "b.jsonl"
    frames = list(client_session(3))
    record_lockstep(frames, a)
    record_lockstep([f.replace(b'"hello 2"', b'"hello two"') for f in frames], b)
    html = tmp / "ab.html"
    r = run_tool("align", "--format", "html", str(a), str(b), "-o", str(html))
    assert r.returncode == 1, r.stderr  # they differ
    summary = orjson.loads(run_tool("align", "--format", "json", str(a), str(b)).stdout)
    return {"a": a, "b": b, "html": html, "summary": summary}


def test_the_page_opens_with_no_network_and_no_console_error(browser, runs):
    opened = open_page(browser, runs["html"])
    assert opened.foreign_requests == [] and opened.console_errors == []
    assert opened.page.locator("#verdict").inner_text() == "different"


def test_the_first_divergence_is_marked_where_acp_align_says(browser, runs):
    page = open_page(browser, runs["html"]).page
    first = page.locator(".sbs-row.first")
    assert first.count() == 1
    fd = runs["summary"]["first_divergence"]
    a_ix = first.locator(".ia").inner_text()
    b_ix = first.locator(".ib").inner_text()
    assert (a_ix == str(fd["a"])) or (b_ix == str(fd["b"]))
    assert 'session/prompt "hello 2"' in first.inner_text()
    assert "first divergence" in first.inner_text()
    # the page opens on it: its steps are shown, and B's changed prompt is next to it
    assert "first divergence" in page.locator("#detail h3").first.inner_text()
    rows = page.locator(".sbs-row.only-b, .sbs-row.changed")
    assert 'session/prompt "hello two"' in rows.first.inner_text()


def test_a_click_shows_both_steps_exact_text(browser, runs):
    page = open_page(browser, runs["html"]).page
    wire_a = [orjson.loads(x) for x in runs["a"].read_bytes().splitlines()[1:]]
    row = page.locator(".sbs-row.equal").first
    row.click()
    i = int(row.locator(".ia").inner_text())
    assert page.locator("#raw-a").text_content() == wire_a[i]["raw"]
    assert page.locator("#raw-b").text_content() == wire_a[i]["raw"]  # equal: same bytes


def test_differences_only_and_next(browser, runs):
    page = open_page(browser, runs["html"]).page
    page.check("#only-diff")
    shown = page.locator("#sbs-body .sbs-row")
    assert shown.count() == page.locator("#sbs-body .sbs-row.only-a, #sbs-body .sbs-row.only-b, "
                                         "#sbs-body .sbs-row.changed").count() > 0
    c = runs["summary"]["counts"]
    assert shown.count() == c.get("changed", 0) + c["only-a"] + c["only-b"]


def test_recorded_markup_is_text_side_by_side_too(browser, tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(hostile_wire())
    b.write_bytes(hostile_wire().replace(b"PROMPT", b"PROMPT2"))
    html = tmp_path / "h.html"
    assert run_tool("align", "--format", "html", str(a), str(b), "-o", str(html)).returncode == 1
    opened = open_page(browser, html)
    page = opened.page
    assert page.evaluate("window.__pwned") is None and opened.dialogs == []
    assert page.evaluate("document.querySelectorAll('img, svg, a, iframe').length") == 0
    assert opened.console_errors == [] and opened.foreign_requests == []
    page.locator(".sbs-row.first").click()
    assert PAYLOADS[0] in page.locator("#raw-a").text_content()

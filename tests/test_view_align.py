"""acp-align --format html in a real browser: two runs side by side, the first
divergence marked where acp-align's own summary says it is, both steps' exact text a
click away, and recorded markup shown as text."""

from __future__ import annotations

import orjson
import pytest

from acp_pipes.echo.client import client_session
from tests.conftest import record_lockstep, run_tool
from tests.view_browser import (
    PAYLOADS,
    hostile_wire,
    no_object_object,  # noqa: F401 - every test checks its pages
    open_page,
)

pytestmark = pytest.mark.slow  # Chromium


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


def test_acp_aligns_changed_steps_show_their_fields(browser, runs):
    """acp-align pairs the changed prompt as one changed step (its ops carry the pointers
    that differ and both values): the page shows it as one row, with its fields."""
    fd = runs["summary"]["first_divergence"]
    assert fd["op"] == "changed"
    page = open_page(browser, runs["html"]).page
    first = page.locator(".sbs-row.first")
    assert "changed" in first.get_attribute("class")
    assert 'session/prompt "hello two"' in first.locator(".lb").inner_text()
    rows = page.locator("#detail table.fields tr")
    assert rows.count() == len(fd["diff"]) + 1
    for k, d in enumerate(fd["diff"], 1):
        cells = rows.nth(k).locator("td")
        assert [cells.nth(c).inner_text() for c in range(3)] == [
            d["path"], orjson.dumps(d["a"]).decode(), orjson.dumps(d["b"]).decode()]
    assert page.locator(".sbs-row.changed").count() == runs["summary"]["counts"]["changed"]


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


def test_a_changed_step_shows_each_pointer_that_differs_with_both_values(browser, runs,
                                                                         tmp_path):
    """The page's side of the ops contract for a changed step (one op ``changed`` with
    ``diff``: ``{"op", "path", "a", "b"}`` per JSON pointer, as acp-align's ops carry
    it): one row, both sides, and a table of the fields on a click. The ops here are
    written by hand over the two real recordings."""
    from acp_pipes.align.steps import StepTable, load_steps
    from acp_pipes.view.sidebyside import align_page

    table = StepTable()
    a, b = load_steps(str(runs["a"]), table), load_steps(str(runs["b"]), table)
    n = len(a.seq)
    prompt = next(i for i in range(n) if 'hello 2' in a.describe([i])[i])
    diff = [{"op": "replace", "path": "/params/prompt/0/text", "a": "hello 2",
             "b": "hello two"}]
    ops = [{"op": "equal", "a": i, "b": i, "dir": "c2a"} for i in range(prompt)]
    ops.append({"op": "changed", "a": prompt, "b": prompt, "dir": "c2a", "kind": "request",
                "method": "session/prompt", "diff": diff})
    ops += [{"op": "equal", "a": i, "b": i, "dir": "a2c"} for i in range(prompt + 1, n)]
    summary = {"equal": False, "counts": {"equal": n - 1, "changed": 1, "only-a": 0,
                                          "only-b": 0},
               "lcs": n - 1, "distance": 2, "approximate": False,
               "first_divergence": {"op": "changed", "a": prompt, "b": prompt}}
    html = tmp_path / "changed.html"
    html.write_bytes(align_page(ops, a, b, summary, context=2))
    opened = open_page(browser, html)
    page = opened.page
    row = page.locator(".sbs-row.changed")
    assert row.count() == 1 and "first" in row.get_attribute("class")
    assert 'session/prompt "hello 2"' in row.locator(".la").inner_text()
    assert 'session/prompt "hello two"' in row.locator(".lb").inner_text()
    assert "1 changed" in page.locator("#summary").inner_text()
    cells = page.locator("#detail table.fields tr").nth(1).locator("td")
    assert [cells.nth(k).inner_text() for k in range(3)] == [
        "/params/prompt/0/text", '"hello 2"', '"hello two"']
    gaps = page.locator(".sbs-row.gap")  # the equal runs before and after it, folded
    assert gaps.count() == 2
    assert gaps.first.inner_text().startswith(f"… {prompt - 2} equal steps (A 0–{prompt - 3},")
    assert opened.console_errors == []


def test_every_row_keeps_the_same_height_and_columns_the_badge_too(browser, runs):
    """The first divergence's badge sits inside its row: that row is as tall as the
    others, and its cells start where every other row's do (it once pushed the row's
    text down, out of line with its neighbours)."""
    page = open_page(browser, runs["html"]).page
    boxes = page.evaluate("""() => [...document.querySelectorAll('.sbs-row:not(.gap)')].map(
        r => ({first: r.classList.contains('first'), h: r.getBoundingClientRect().height,
               cells: [...r.children].map(c => { const b = c.getBoundingClientRect();
                   return [Math.round(b.left), Math.round(b.top - r.getBoundingClientRect().top),
                           Math.round(b.height)]; })}))""")
    first = [b for b in boxes if b["first"]]
    assert len(first) == 1 and len(boxes) > 10
    heights = {b["h"] for b in boxes}
    assert heights == {boxes[0]["h"]}, heights
    columns = {tuple((left, top, h) for left, top, h in b["cells"]) for b in boxes}
    assert len(columns) == 1, columns
    badge = page.locator(".sbs-row.first .fd").bounding_box()
    row = page.locator(".sbs-row.first").bounding_box()
    assert row["y"] <= badge["y"] and badge["y"] + badge["height"] <= row["y"] + row["height"]

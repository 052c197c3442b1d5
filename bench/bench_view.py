"""acp-view on big recordings: the page's size, writing it, and opening it in a browser.

Inputs are real-shaped wire logs: echo-agent sessions (in-process, deterministic) of 200
prompts each, answered by a scripted client, with receipt times 10 us apart, cut to
1,000, 10,000 and 100,000 frames.

Measured, same run:
- ``acp-view WIRE -o PAGE`` through the console script (wall, CPU, peak RSS), beside
  ``acp-frame WIRE`` on the same input (framing alone: the floor under any reading of it);
- the page's size, and bytes per frame against the wire log's (linear growth shows as a
  flat bytes-per-frame column);
- opening the page from ``file://`` in headless Chromium (Debian's, as the tests use):
  the time from navigation start to the page's ``acp-view:ready`` mark (parsed the data,
  drew the first session's transcript), then the time to open the timeline tab and draw
  its rows, and the time to scroll to the last frame; beside opening an empty page (the
  browser's own floor). Medians of ``REPEAT`` opens, each in a fresh page.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import orjson

from bench.common import (
    max_rss,
    median_cpu,
    median_wall,
    run_cmd,
    side_by_side,
    table,
    tool,
    workdir,
)

SIZES = (1_000, 10_000, 100_000)
REPEAT = 5


def _wire(path: Path, frames: int) -> None:
    from acp_pipes.echo.agent import EchoAgent
    from acp_pipes.echo.client import client_session
    from acp_pipes.io.wire import frame_record, header

    dumps = orjson.dumps
    t0 = 1_767_225_600_000_000_000
    n = 0
    session = 0
    with open(path, "wb") as f:
        f.write(dumps(header(["acp-echo-agent"], started_ns=t0, clock="system", host=False))
                + b"\n")
        while n < frames:
            session += 1
            agent = EchoAgent()
            for line in client_session(200, text=f"run {session} prompt"):
                for d, raw in [("c2a", line), *(("a2c", fr) for fr in agent.feed(line))]:
                    if n == frames:
                        break
                    f.write(dumps(frame_record(n, t0 + n * 10_000, d, raw)) + b"\n")
                    n += 1


def _cpu(cdp) -> float:
    """CPU seconds the page's renderer process has used (thread ticks, not wall time:
    what the page costs, whatever else the machine is doing)."""
    metrics = cdp.send("Performance.getMetrics")["metrics"]
    return next(m["value"] for m in metrics if m["name"] == "ProcessTime")


def _open_times(browser, page_path: Path, repeat: int) -> dict[str, float]:
    """Median ms: open to ready, ready to timeline drawn, and scroll to the last row;
    and the renderer's CPU ms to ready and to the timeline drawn."""
    ready, timeline, scroll, cpu_ready, cpu_timeline = [], [], [], [], []
    for _ in range(repeat):
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable", {"timeDomain": "threadTicks"})
        page.goto(page_path.resolve().as_uri())
        page.wait_for_selector("body[data-ready='1']", state="attached", timeout=120_000)
        ready.append(page.evaluate(
            "performance.getEntriesByName('acp-view:ready')[0].startTime"))
        cpu_ready.append(_cpu(cdp) * 1000)
        if page_path.name.startswith("blank"):
            page.close()
            continue
        t = page.evaluate("performance.now()")
        page.click("#tab-timeline")
        page.wait_for_selector("body[data-timeline='1']", state="attached")
        timeline.append(page.evaluate(
            "performance.getEntriesByName('acp-view:timeline')[0].startTime") - t)
        cpu_timeline.append(_cpu(cdp) * 1000)
        rows = page.locator("#tl-space").evaluate("e => e.offsetHeight") // 22
        t1 = time.perf_counter()
        page.locator("#tl-scroll").evaluate("e => { e.scrollTop = e.scrollHeight; }")
        page.wait_for_selector(f"#tl-space .tl-row[data-row='{rows - 1}']:not([hidden])",
                               state="attached")
        scroll.append((time.perf_counter() - t1) * 1000)
        page.close()
    out = {"ready": statistics.median(ready), "cpu_ready": statistics.median(cpu_ready)}
    if timeline:
        out["timeline"] = statistics.median(timeline)
        out["scroll"] = statistics.median(scroll)
        out["cpu_timeline"] = statistics.median(cpu_timeline)
    return out


def main(quick: bool) -> str:
    from playwright.sync_api import sync_playwright

    from tests.view_browser import FLAGS, chromium_path

    sizes = (200, 2_000) if quick else SIZES
    repeat = 2 if quick else REPEAT
    d = workdir("view")
    rows_cli, rows_size, rows_open = [], [], []
    blank = d / "blank.html"
    blank.write_text("<!DOCTYPE html><title>blank</title><body data-ready='1'>"
                     "<script>performance.mark('acp-view:ready')</script>")
    pages = {}
    last = None
    load = os.getloadavg()[0]
    for n in sizes:
        wire = d / f"wire{n}.jsonl"
        if not wire.exists():
            _wire(wire, n)
        page = d / f"view{n}.html"
        runs = side_by_side({
            "acp-view": lambda w=wire, p=page: run_cmd(tool("view", str(w), "-o", str(p))),
            "acp-frame": lambda w=wire: run_cmd(tool("frame", str(w))),
        }, repeat=3)
        view, frame = runs["acp-view"], runs["acp-frame"]
        rows_cli.append([f"{n:,}", f"{median_wall(view):.2f} s", f"{median_cpu(view):.2f} s",
                         f"{max_rss(view):.0f} MB", f"{median_wall(frame):.2f} s",
                         f"{median_wall(view) / median_wall(frame):.1f}x"])
        wsize, psize = wire.stat().st_size, page.stat().st_size
        marginal = "" if last is None else f"{(psize - last[1]) / (n - last[0]):.0f}"
        last = (n, psize)
        rows_size.append([f"{n:,}", f"{wsize / 1e6:.2f} MB", f"{psize / 1e6:.2f} MB",
                          f"{wsize / n:.0f}", f"{psize / n:.0f}", marginal,
                          f"{psize / wsize:.2f}"])
        pages[n] = page
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=FLAGS)
        version = browser.version
        base = _open_times(browser, blank, repeat)
        for n in sizes:
            t = _open_times(browser, pages[n], repeat)
            rows_open.append([f"{n:,}", f"{t['ready']:.0f} ms", f"{t['timeline']:.0f} ms",
                              f"{t['scroll']:.0f} ms",
                              f"{(t['ready'] + t['timeline']) / 1000:.2f} s",
                              f"{t['cpu_ready']:.0f} ms", f"{t['cpu_timeline']:.0f} ms",
                              f"{base['ready']:.0f} ms / {base['cpu_ready']:.0f} ms"])
        browser.close()
    return "\n\n".join([
        "## acp-view: page size, writing it, opening it in Chromium",
        f"`python -m bench view` · echo-agent wire logs, 10 us between frames · "
        f"Chromium {version}, headless, 1400x900 · medians of {repeat} opens",
        "Writing the page (`acp-view WIRE -o PAGE`, 3 runs), beside framing the same input:",
        table(["frames", "acp-view wall", "CPU", "peak RSS", "acp-frame wall", "ratio"],
              rows_cli),
        "Size: the page grows linearly with the recording (bytes per frame stay flat):",
        table(["frames", "wire log", "page", "wire B/frame", "page B/frame",
               "page B/frame added", "page / wire"], rows_size),
        "Opening from file:// (wall: navigation start to the page's ready mark: data "
        "parsed, first transcript drawn), then the timeline tab drawn, then a scroll to "
        "the last frame; and the renderer process's CPU time to ready and to the "
        "timeline drawn (thread ticks: what the page costs, whatever the machine's load; "
        f"load average {load:.1f} when the runs began). Last column: an empty page, "
        "wall / CPU.",
        table(["frames", "open (ready)", "+ timeline", "scroll to end", "open + timeline",
               "CPU to ready", "CPU to timeline", "empty page"], rows_open),
    ])

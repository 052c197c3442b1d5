"""Debian's Chromium, headless, driven by Playwright: what the acp-view tests look through.

Playwright never downloads a browser here: it launches the system's ``chromium`` (which
``make install`` installs, see scripts/install-system-deps). Each page is opened from
``file://``; every request the page makes, every console message and every uncaught
error is recorded, so a test can say "no network, no console error".
"""

from __future__ import annotations

import shutil
from pathlib import Path

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


def open_page(browser, path: Path, viewport=(1400, 900)) -> Opened:
    """Open ``path`` in a new page; returns once the page's script says it is drawn."""
    page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
    url = path.resolve().as_uri()
    opened = Opened(page, url)
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

"""The pages' own markup, style and script: files in ``static/``, shipped as package data.

Each page is ``common.css`` and ``common.js`` (what both pages share), then its own
``PAGE.html``, ``PAGE.css`` and ``PAGE.js``. The files are read through
:mod:`importlib.resources` and inlined byte for byte: the page hashes exactly these
bytes into its Content-Security-Policy (:func:`acp_pipes.view.page.csp`), so a file is
never re-encoded, stripped or newline-translated on the way (each starts with a blank
line, as the page has always been written).

``common.js`` holds the only way the page scripts put recorded text on screen: ``el``
and ``txt`` make elements and text nodes (``textContent``), never markup, and nothing
makes a link or sets a URL from data. A recorded value never becomes a class name:
``known`` maps it to one of a fixed set of classes (a role ``"user tl-row"`` would
restyle a card); ``str`` shows a recorded object as its JSON, never ``[object Object]``.

``session``: the acp-view page. Two views of one recording: per session the transcript
(cards built from the ASR records, see :mod:`acp_pipes.view.transcript`), and the
protocol timeline (every frame, see :mod:`acp_pipes.view.timeline`). Both render only
what is on screen: the transcript in pages of cards added as the reader scrolls, the
timeline as a virtual list of fixed-height rows, so a 100,000-frame recording opens as
fast as a small one.

``align``: the side-by-side page (acp-align --format html). Rows of the alignment, A on
the left and B on the right: equal steps plain, a step only one run has on its side
alone, a changed step on both sides with its differences, runs of equal steps folded
into one row. The first divergence is marked and the page opens scrolled to it. A click
on a row shows both steps' exact text and, for a changed step, each JSON pointer that
differs with both values. Rows are drawn in pages as the reader scrolls.

Both scripts mark ``document.body.dataset.ready`` once the first view is drawn.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import NamedTuple

__all__ = ["Assets", "asset", "page_assets"]


@cache
def asset(name: str) -> str:
    """The text of ``static/NAME``, exactly its bytes (UTF-8, no newline translation)."""
    return files(__package__).joinpath("static", name).read_bytes().decode("utf-8")


class Assets(NamedTuple):
    """A page's own constant text, never data."""

    body: str
    style: str  #: common.css, then the page's own
    script: str  #: common.js, then the page's own


def page_assets(page: str) -> Assets:
    """The markup, style and script of ``page`` (``session`` or ``align``)."""
    return Assets(asset(f"{page}.html"), asset("common.css") + asset(f"{page}.css"),
                  asset("common.js") + asset(f"{page}.js"))

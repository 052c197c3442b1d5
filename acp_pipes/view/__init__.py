"""acp-view's library: recordings as one self-contained HTML page, and two runs side by side.

- :mod:`.load`: any stage (wire log, frames, folded entities, ASR streams) -> a
  :class:`~acp_pipes.view.load.Recording`, converted in-process with the library;
- :mod:`.timeline`: frames -> the protocol timeline's columns (pairs, latency, chunk runs);
- :mod:`.transcript`: ASR records -> transcript items (a tool call with its result,
  diffs and terminal as one card; superseded records replaced in place);
- :mod:`.page`: the HTML file: data embedded as escaped JSON, a CSP allowing no network
  and no script but the page's own;
- :mod:`.assets`: the pages' own markup, style and script, files in ``static/``;
- :mod:`.sidebyside`: an alignment of two runs (acp_pipes.align) as a page.

:func:`session_page` and :func:`align_page` give the bytes of a page.
"""

from __future__ import annotations

from acp_pipes import __version__
from acp_pipes.view.load import Recording, load
from acp_pipes.view.page import embed_json, html_page

__all__ = ["GENERATOR", "Recording", "embed_json", "html_page", "load", "session_page"]

GENERATOR = f"acp-view (acp-pipes) {__version__}"


def session_page(recording: Recording) -> bytes:
    """The page of one recording: transcript per session and the protocol timeline."""
    from acp_pipes.view.assets import page_assets

    own = page_assets("session")
    data, parts = recording.page_data()
    data["generator"] = GENERATOR
    return html_page(body=own.body, style=own.style, script=own.script, data=data,
                     generator=GENERATOR, parts=parts)

"""Two runs side by side: an alignment (acp_pipes.align) as an HTML page.

Built on what acp-align writes, its ops (one record per aligned step, in the order every
format lists them: ``{"op", "a", "b", dir|type, kind, method, hash}``, a ``changed`` op
also with ``diff``: the JSON pointers that differ and both values) and its JSON summary
(counts, the first divergence), so the page says what ``--format ops`` and ``json`` say.
What the page adds is for a person: each shown step's one-line summary and its exact text
(the frame's bytes, or the ASR record), equal runs longer than twice the context folded
into one row, the first divergence marked and one click away.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from acp_pipes.io.wire import decode_raw

__all__ = ["MAX_ROWS", "align_data", "align_page"]

#: Rows a page holds at most (a gap row counts one); past it the page says where it
#: stopped, and the diff or ops formats have the rest.
MAX_ROWS = 20_000


def align_data(ops: Iterable[dict[str, Any]], a: Any, b: Any, summary: dict[str, Any],
               context: int = 3) -> dict[str, Any]:
    """The page's data: rows (equal runs beyond ``context`` folded), the text of every
    step a row shows, and the summary. ``a``/``b``: the two inputs'
    :class:`~acp_pipes.align.steps.Steps`."""
    rows: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []  # an equal run not yet placed
    truncated = False
    seen_diff = False

    def place_equal(final: bool) -> None:
        nonlocal pending
        n = len(pending)
        head = context if seen_diff else 0
        tail = 0 if final else context
        if n <= head + tail + 1:
            rows.extend(_row(op) for op in pending)
        else:
            rows.extend(_row(op) for op in pending[:head])
            first, last = pending[head], pending[n - tail - 1]
            rows.append({"op": "gap", "n": n - head - tail, "a": [first["a"], last["a"]],
                         "b": [first["b"], last["b"]]})
            rows.extend(_row(op) for op in pending[n - tail:])
        pending = []

    for op in ops:
        if len(rows) >= MAX_ROWS:
            truncated = True
            break
        if op.get("op") == "equal":
            pending.append(op)
            continue
        place_equal(final=False)
        seen_diff = True
        rows.append(_row(op))
    if not truncated:
        place_equal(final=True)
    want_a = sorted({r["a"] for r in rows if r["op"] != "gap" and r["a"] is not None})
    want_b = sorted({r["b"] for r in rows if r["op"] != "gap" and r["b"] is not None})
    return {
        "summary": summary,
        "context": context,
        "rows": rows,
        "truncated": truncated,
        "a": _side(a, want_a),
        "b": _side(b, want_b),
    }


def _row(op: dict[str, Any]) -> dict[str, Any]:
    row = {"op": op.get("op"), "a": op.get("a"), "b": op.get("b")}
    for key in ("dir", "type", "kind", "method", "diff", "cut", "note", "difference"):
        if key in op:
            row[key] = op[key]
    return row


def _side(steps: Any, indices: list[int]) -> dict[str, Any]:
    """One input: its name, and for each wanted step its summary and exact text."""
    labels = steps.describe(indices)
    texts = _texts(steps, indices)
    return {
        "source": steps.source,
        "session": steps.session,
        "kind": steps.kind,
        "steps": len(steps.seq),
        "shown": {str(i): [labels.get(i, "?"), texts.get(i)] for i in indices},
    }


def _texts(steps: Any, indices: list[int]) -> dict[int, str | None]:
    """The exact text of each wanted step (read with :meth:`Steps.read`): a frame's bytes
    as UTF-8 text (None when they are not UTF-8), or an ASR record's line."""
    out: dict[int, str | None] = {}
    for got, line in steps.read(indices):
        text: str | None
        if steps.kind == "asr":
            text = line.decode("utf-8", "replace")
        else:  # a wire or frame record holds the bytes; a bare stream's line is them
            try:
                rec = orjson.loads(line)
                raw = decode_raw(rec) if isinstance(rec, dict) and "dir" in rec else line
                text = raw.decode("utf-8")
            except (ValueError, UnicodeDecodeError):
                text = None
        for i in got:
            out[i] = text
    return out


def align_page(ops: Iterable[dict[str, Any]], a: Any, b: Any, summary: dict[str, Any],
               context: int = 3) -> bytes:
    """The side-by-side page of two aligned runs."""
    from acp_pipes.view import GENERATOR
    from acp_pipes.view.assets import page_assets
    from acp_pipes.view.page import html_page

    own = page_assets("align")
    data = align_data(ops, a, b, summary, context)
    data["generator"] = GENERATOR
    return html_page(body=own.body, style=own.style, script=own.script, data=data,
                     generator=GENERATOR)

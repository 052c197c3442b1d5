"""Graphs written as Graphviz DOT, and DOT drawn as SVG by Graphviz's ``dot`` program.

The graphs (:mod:`acp_pipes.align.graph`, :mod:`acp_pipes.align.lineage`) are networkx
graphs whose nodes and edges carry Graphviz attributes; :func:`to_dot` writes them so
that no string from a recording is read by ``dot`` as anything but label text, and
:func:`to_svg` runs ``dot`` as a child that never outlives the call. The run colours
are here too: every graph colours run ``i`` the same.
"""

from __future__ import annotations

import re
from typing import Any

import networkx as nx

from acp_pipes.errors import AcpPipesError
from acp_pipes.io.terminal import printable

__all__ = ["DotMissing", "run_colour", "run_light", "to_dot", "to_svg"]

#: Run colours: A, B, then more for N-way (colour-blind-safe-ish, Tableau 10).
PALETTE = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
           "#17becf", "#bcbd22", "#7f7f7f"]
LIGHT = ["#fbe0e0", "#deebf7", "#e5f5e0", "#efe5f5", "#fdebd6", "#efe3df", "#fbe3f2",
         "#dff5f8", "#f5f5d6", "#eeeeee"]


class DotMissing(AcpPipesError):
    """Graphviz's `dot` program is not installed."""


def run_colour(i: int) -> str:
    """Run ``i``'s colour (lines, borders)."""
    return PALETTE[i % len(PALETTE)]


def run_light(i: int) -> str:
    """Run ``i``'s light colour (fills)."""
    return LIGHT[i % len(LIGHT)]


def to_dot(g: nx.DiGraph) -> str:
    """Graphviz DOT source for a graph of :mod:`.graph` or :mod:`.lineage`, written so
    that no string from a recording can be read by ``dot`` as anything but the text of a
    label.

    A recording is untrusted: a session ID written into DOT as it stands could close its
    statement and add its own (a ``URL`` that runs script from the SVG, a ``stylesheet``
    the SVG fetches). So node IDs are generated (``n0``, ``n1``, ... in the graph's
    order, whatever its own keys), every attribute value is a quoted string, and a
    ``label`` is escaped for the DOT parser and for Graphviz's label escapes alike
    (:func:`_text`); every other value is one the code generated, checked to be plain.
    """
    ids = {node: f"n{i}" for i, node in enumerate(g)}
    out = [f'digraph "{_plain("name", g.graph.get("name", "G"))}" {{']
    for key in ("graph", "node", "edge"):
        attrs = g.graph.get(key)
        if attrs:
            out.append(f"\t{key} [{_attrs(attrs)}]")
    for node, data in g.nodes(data=True):
        out.append(f"\t{ids[node]} [{_attrs(data)}]")
    for u, v, data in g.edges(data=True):
        out.append(f"\t{ids[u]} -> {ids[v]} [{_attrs(data)}]")
    out.append("}")
    return "\n".join(out) + "\n"


_PRIVATE = ("runs", "kind", "first")  # graph data that is not a Graphviz attribute
#: The attributes that carry text, where recorded strings go (escaped by _text).
_TEXT = frozenset({"label"})
#: What every other attribute value and the graph's name may hold: the colours, numbers,
#: styles, shapes and names the graphs write, never a backslash, quote or bracket.
_PLAIN = re.compile(r"[A-Za-z0-9#.,:_ -]*")
#: The attributes the graphs write; any other (a URL, href, tooltip, stylesheet) is
#: refused, so none can reach the SVG.
_KEYS = frozenset({"label", "shape", "style", "fillcolor", "color", "fontcolor", "penwidth",
                   "fontname", "fontsize", "rankdir", "labelloc"})
#: Characters a label must not carry as they stand: the DOT parser's escape and quote,
#: the ``&`` Graphviz reads entities from, and lone surrogates (not UTF-8).
_LABEL_SPECIAL = re.compile("[\\\\\"&\ud800-\udfff]")


def _attrs(data: dict[str, Any]) -> str:
    """``key="value" ...`` for the Graphviz attributes of ``data``."""
    parts = []
    for key, value in data.items():
        if key in _PRIVATE:
            continue
        if key not in _KEYS:
            raise ValueError(f"not a Graphviz attribute name this module writes: {key!r}")
        text = _text(str(value)) if key in _TEXT else _plain(key, value)
        parts.append(f'{key}="{text}"')
    return " ".join(parts)


def _plain(key: str, value: Any) -> str:
    """A generated attribute value, refused if it is not plain (then it was not
    generated: only ``label`` carries recorded text)."""
    text = str(value)
    if not _PLAIN.fullmatch(text):
        raise ValueError(f"{key}={text!r} is not a plain Graphviz value")
    return text


def _text(label: str) -> str:
    r"""A label for a DOT quoted string, drawn exactly as given, one line per ``\n``.

    Each line is made printable (control characters and bidirectional overrides written
    as escapes, :func:`acp_pipes.io.terminal.printable`); then ``\`` is doubled, so
    Graphviz's escapes (``\N`` the node's name, ``\G``, ``\E``, ``\l`` ...) are text, and
    a string ending in ``\`` cannot escape the closing quote; ``"`` is escaped for the
    parser, ``&`` written as ``&amp;`` (Graphviz decodes entities in labels). Lines are
    joined by Graphviz's own ``\n``, so a statement is one line of DOT.

    >>> _text('a "b"\n\\N &amp; c\\')
    'a \\"b\\"\\n\\\\N &amp;amp; c\\\\'
    """
    return "\\n".join(_LABEL_SPECIAL.sub(_escape_label, printable(line))
                      for line in label.split("\n"))


def _escape_label(m: re.Match[str]) -> str:
    c = m.group()
    if c == "&":
        return "&amp;"
    if c in "\\\"":
        return "\\" + c
    return f"\\\\u{ord(c):04x}"  # a lone surrogate, shown as its escape


def to_svg(dot_source: str) -> bytes:
    """Render DOT to SVG with Graphviz's ``dot``; DotMissing when it is not installed.

    ``dot`` runs as a child that never outlives this call: whatever ends it early (an
    exception, Ctrl-C, a signal handler that raises) kills and reaps the child first; on
    Linux the child also gets SIGKILL if this process dies without a chance to (kill -9).
    """
    import shutil
    import signal
    import subprocess

    exe = shutil.which("dot")
    if exe is None:
        raise DotMissing(
            "--format svg needs Graphviz's 'dot' program, which is not on PATH: install "
            "the graphviz package (apt-get install graphviz / brew install graphviz), or "
            "use --format dot and render elsewhere"
        )
    # A signal that lands while Popen is still starting dot would end this process with
    # dot running and not yet ours to kill: the three that end a run wait (blocked)
    # until Popen has returned, and are taken in the try below, where dot is killed.
    stopping = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, stopping)
    proc = None
    try:
        proc = subprocess.Popen([exe, "-Tsvg"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE,
                                preexec_fn=lambda: _in_child(mask))
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        out, err = proc.communicate(dot_source.encode("utf-8"))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if proc is not None and proc.returncode is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0:  # pragma: no cover - dot rejected our DOT
        raise DotMissing(f"Graphviz 'dot' failed: {err.decode('utf-8', 'replace').strip()}")
    return out


def _in_child(mask) -> None:  # pragma: no cover - runs in the child
    """In the child before exec: the parent's signal mask back, and death with the
    parent."""
    import signal

    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    _die_with_parent()


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """In the child before exec: SIGKILL it when its parent dies (Linux prctl)."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass

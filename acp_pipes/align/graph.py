"""Divergence graphs as networkx graphs, written as Graphviz DOT (and SVG through `dot`).

Three graphs, each readable at a glance (labels say what happened, never hashes; runs
coloured; the first divergence drawn thick and orange, and said once):

- :func:`pair_graph`, two runs: runs of shared steps merged into one grey node; where the
  runs part, a node of the changed steps (both runs, yellow, each with the first pointer
  that differs and both values) and one branch per side for its own steps (A red, B
  blue), rejoining at the next shared run. At most :data:`MAX_PLACES` places where the
  runs differ are drawn, the rest summed up in one node, so any input renders in
  seconds.
- :func:`tree_graph`, N runs: a prefix tree (trie) of the step sequences with runs of
  shared steps compressed into one node. A node is where some runs walk together; a
  branch opens where they part, labelled with its runs and its first differing step.
  Why a trie and not progressive alignment: it is exact, linear in the total steps and
  independent of input order; the cost is that runs which rejoin after parting are not
  merged again (their common tail shows on each branch).
- :func:`lineage_graph`, ASR streams: sessions and how they came to be (fork, subagent,
  resume).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import networkx as nx

from acp_pipes.align.compare import Change, Comparison
from acp_pipes.align.render import ABSENT, UNANSWERED_NOTE, show_values
from acp_pipes.align.steps import Steps, StepTable
from acp_pipes.errors import AcpPipesError
from acp_pipes.terminal import printable

__all__ = ["DotMissing", "bounded_lineage", "lineage_graph", "pair_graph", "to_dot",
           "to_svg", "tree_graph", "tree_json"]

#: Run colours: A, B, then more for N-way (colour-blind-safe-ish, Tableau 10).
PALETTE = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
           "#17becf", "#bcbd22", "#7f7f7f"]
LIGHT = ["#fbe0e0", "#deebf7", "#e5f5e0", "#efe5f5", "#fdebd6", "#efe3df", "#fbe3f2",
         "#dff5f8", "#f5f5d6", "#eeeeee"]
SHARED = "#f0f0f0"
HIGHLIGHT = "#ff7f00"
CHANGED = "#b8860b"
CHANGED_LIGHT = "#fff3c4"
SHOW = 4  # steps listed in a node label before "… N more"
#: At most this many places where two runs differ are drawn: Graphviz's layout time grows
#: faster than linearly with the nodes, and a graph of thousands of them says nothing.
MAX_PLACES = 40
#: At most this many sessions are drawn in a lineage graph (the JSON lists them all).
MAX_SESSIONS = 200


class DotMissing(AcpPipesError):
    """Graphviz's `dot` program is not installed."""


def _colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _light(i: int) -> str:
    return LIGHT[i % len(LIGHT)]


def _lines(steps: Steps, table: StepTable, idx: Sequence[int], texts: dict[int, str],
           total: int | None = None) -> str:
    """Label lines for a run of steps: the first SHOW, then how many more and the last.
    ``idx`` may already be cut to those (``total``: how many steps the run has)."""
    total = len(idx) if total is None else total
    if total <= SHOW + 1:
        return "\n".join(_one(steps, table, i, texts) for i in idx)
    out = [_one(steps, table, i, texts) for i in idx[: SHOW - 1]]
    out.append(f"… {total - SHOW} more")
    out.append(_one(steps, table, idx[-1], texts))
    return "\n".join(out)


def _one(steps: Steps, table: StepTable, i: int, texts: dict[int, str]) -> str:
    text = texts.get(i, "?")
    if steps.kind == "trace":
        step = steps.seq[i]
        arrow = {"c2a": "→ ", "a2c": "← "}.get(table.meta[step][0], "")
        note = UNANSWERED_NOTE if table.unanswered(step) else ""
        return f"{i}: {arrow}{text}{note}"
    return f"{i}: {text}"


def _label_idx(n: int) -> list[int]:
    return list(range(n)) if n <= SHOW + 1 else [*range(SHOW - 1), n - 1]


def _gaps(cmp: Comparison) -> list[tuple[str, list[tuple[str, int, int]]]]:
    """The runs of a comparison as segments: ``("equal", [run])`` for shared steps and
    ``("gap", [runs])`` for each place where the runs differ (changed, only-a and
    only-b runs between two shared ones)."""
    out: list[tuple[str, list[tuple[str, int, int]]]] = []
    for run in cmp.runs():
        if run[0] == "equal":
            out.append(("equal", [run]))
        elif out and out[-1][0] == "gap":
            out[-1][1].append(run)
        else:
            out.append(("gap", [run]))
    return out


def _positions(runs: list[tuple[str, int, int]], tag: str) -> list[int]:
    return [k for t, lo, hi in runs if t == tag for k in range(lo, hi)]


def pair_graph(cmp: Comparison, max_places: int = MAX_PLACES) -> nx.DiGraph:
    """The two-way divergence graph (see the module docstring), at most ``max_places``
    places where the runs differ drawn: the rest is one node that says what it holds,
    so any comparison renders in seconds."""
    a, b, table = cmp.a, cmp.b, cmp.table
    oa, ob = cmp.oa, cmp.ob
    segments = _gaps(cmp)
    places = sum(1 for kind, _ in segments if kind == "gap")
    drawn = min(places, max_places)
    title = f"acp-align: A = {printable(a.source)}   B = {printable(b.source)}"
    if cmp.approximate:
        title += "   (approximate)"
    if drawn < places:
        title += f"   (the first {drawn:,} of {places:,} places where they differ drawn)"
    g = nx.DiGraph(name="divergence")
    g.graph["graph"] = {"rankdir": "TB", "fontname": "Helvetica", "labelloc": "t",
                        "label": title}
    g.graph["node"] = {"shape": "box", "style": "rounded,filled", "fontname": "Helvetica",
                       "fontsize": "10"}
    g.graph["edge"] = {"fontname": "Helvetica", "fontsize": "9"}
    # what gets drawn: every segment up to the last drawn place, and the shared run after
    shown: list[tuple[str, list[tuple[str, int, int]]]] = []
    seen = 0
    rest: list[tuple[str, list[tuple[str, int, int]]]] = []
    for n, seg in enumerate(segments):
        if seg[0] == "gap":
            if seen == drawn:
                rest = segments[n:]
                break
            seen += 1
        shown.append(seg)
    # the steps whose words are needed
    want_a: list[int] = []
    want_b: list[int] = []
    want_changes: list[int] = []
    for kind, runs in shown:
        if kind == "equal":
            _, lo, hi = runs[0]
            want_a += [oa[lo + k] for k in _label_idx(hi - lo)]
            continue
        for tag in ("changed", "only-a", "only-b"):
            pos = _positions(runs, tag)
            pick = [pos[k] for k in _label_idx(len(pos))]
            if tag == "only-b":
                want_b += [ob[k] for k in pick]
            else:
                want_a += [oa[k] for k in pick]
            if tag == "changed":
                want_b += [ob[k] for k in pick]
                want_changes += pick
    ta, tb = a.describe(want_a), b.describe(want_b)
    changes = cmp.changes(want_changes)

    g.add_node("start", label="start", shape="circle", style="filled", fillcolor="white")
    grey = {"color": "#777777"}
    pending: list[tuple[str, dict[str, str]]] = [("start", grey)]  # edges into the next node
    first = True
    for n, (kind, runs) in enumerate(shown):
        if kind == "equal":
            _, lo, hi = runs[0]
            node = f"n{n}"
            idx = [oa[k] for k in range(lo, hi)] if hi - lo <= SHOW + 1 else \
                [oa[k] for k in range(lo, lo + SHOW - 1)] + [oa[hi - 1]]
            label = f"A and B: {hi - lo} shared step{'s' * (hi - lo != 1)}\n" + _lines(
                a, table, idx, ta, hi - lo)
            g.add_node(node, label=label, fillcolor=SHARED, color="#999999")
            for src, attrs in pending:
                g.add_edge(src, node, **attrs)
            pending = [(node, grey)]
            continue
        base = pending[0][0]
        new: list[tuple[str, dict[str, str]]] = []
        branches = []
        pos = _positions(runs, "changed")
        has_changed = bool(pos)
        if pos:
            lines = _changed_lines(cmp, pos, ta, tb, changes)
            branches.append((f"n{n}C", f"changed ({len(pos)})\n" + lines, "A, B",
                             CHANGED, CHANGED_LIGHT))
        for side, tag, steps, texts, idx_of in ((0, "only-a", a, ta, oa),
                                                (1, "only-b", b, tb, ob)):
            name = "AB"[side]
            pos = _positions(runs, tag)
            if not pos:  # a side with no steps of its own: dashed, unless it went through
                if not has_changed:  # the changed steps
                    branches.append((None, "", name, _colour(side), None))
                continue
            idx = [idx_of[k] for k in pos]
            branches.append((f"n{n}{name}", f"only {name} ({len(pos)})\n"
                             + _lines(steps, table, _shown(idx), texts, len(idx)), name,
                             _colour(side), _light(side)))
        for node, label, who, colour, fill in branches:
            edge = {"color": colour, "label": who, "fontcolor": colour}
            if node is None:  # this side goes on without steps of its own
                new.append((base, {**edge, "style": "dashed"}))
                continue
            g.add_node(node, label=label, fillcolor=fill, color=colour)
            if first:  # said once, as an edge label: dot keeps those clear of every node
                g.nodes[node].update(penwidth="3", color=HIGHLIGHT)
                edge.update(penwidth="3", label=f"first divergence\n{who}",
                            fontcolor=HIGHLIGHT)
                first = False
            g.add_edge(base, node, **edge)
            new.append((node, {"color": colour}))
        pending = new
    if rest:
        counts = {"changed": 0, "only-a": 0, "only-b": 0}
        for _, runs in rest:
            for tag, lo, hi in runs:
                if tag != "equal":
                    counts[tag] += hi - lo
        a_from = _next_at(oa, rest[0][1][0][1])
        label = (f"… {places - drawn:,} more place{'s' * (places - drawn != 1)} where "
                 "the runs differ, not drawn:\n"
                 f"{counts['changed']:,} changed, {counts['only-a']:,} only in A, "
                 f"{counts['only-b']:,} only in B"
                 + (f"\nfrom step {a_from} of A on" if a_from is not None else "")
                 + "\n(--format diff or json lists them all)")
        g.add_node("rest", label=label, style="rounded,dashed", fillcolor="white",
                   color="#777777")
        for src, attrs in pending:
            g.add_edge(src, "rest", **attrs)
        pending = [("rest", {**grey, "style": "dashed"})]
    g.add_node("end", label="end", shape="doublecircle", style="filled", fillcolor="white")
    for src, attrs in pending:
        g.add_edge(src, "end", **attrs)
    return g


def _shown(idx: list[int]) -> list[int]:
    """The indices a label lists: the first SHOW, or SHOW - 1 and the last."""
    return idx if len(idx) <= SHOW + 1 else [*idx[: SHOW - 1], idx[-1]]


def _next_at(idx, start: int) -> int | None:
    for k in range(start, len(idx)):
        if idx[k] >= 0:
            return idx[k]
    return None


def _changed_lines(cmp: Comparison, pos: list[int], ta: dict[int, str], tb: dict[int, str],
                   changes: dict[int, Change]) -> str:
    """Label lines for changed steps: each step as in A, with its first differing
    pointer and both values."""
    out = []
    pick = _shown(pos)
    for n, k in enumerate(pick):
        if n == len(pick) - 1 and len(pick) < len(pos):
            out.append(f"… {len(pos) - len(pick)} more")
        i, j = cmp.oa[k], cmp.ob[k]
        line = _one(cmp.a, cmp.table, i, ta)
        out.append(line if i == j else f"{line}  (B: {j})")
        change = changes.get(k)
        if change is not None and change.diff:
            d = change.diff[0]
            va, vb = show_values(d.get("a", ABSENT), d.get("b", ABSENT), width=40)
            more = f" (+{len(change.diff) - 1})" if len(change.diff) > 1 else ""
            out.append(f"    {printable(d['path']) or '(whole)'}: {va} → {vb}{more}")
    return "\n".join(out)


def to_dot(g: nx.DiGraph) -> str:
    """Graphviz DOT source for a graph built here, written so that no string from a
    recording can be read by ``dot`` as anything but the text of a label.

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
#: styles, shapes and names this module writes, never a backslash, quote or bracket.
_PLAIN = re.compile(r"[A-Za-z0-9#.,:_ -]*")
#: The attributes this module writes; any other (a URL, href, tooltip, stylesheet) is
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
    as escapes, :func:`acp_pipes.terminal.printable`); then ``\`` is doubled, so
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


# -- N-way: a compressed prefix tree -----------------------------------------------------


def build_tree(runs: Sequence[Steps]) -> dict[str, Any]:
    """The prefix tree of the runs' step sequences, shared runs of steps compressed.

    Each node: ``runs`` (indices of the inputs walking it), ``start`` (position of its
    first step in every one of those runs), ``length`` (shared steps), ``children``.
    A child's first step is where its runs part from their siblings; a run that ends at a
    node is listed in its ``ended``.
    """
    seqs = [r.seq for r in runs]
    root = {"runs": list(range(len(runs))), "start": 0, "length": 0, "children": [],
            "ended": []}
    stack = [root]
    while stack:
        node = stack.pop()
        members = node["runs"]
        pos = node["start"]
        # how far do all members walk together?
        s0 = seqs[members[0]]
        others = [seqs[r] for r in members[1:]]
        end = min(len(seqs[r]) for r in members)
        p = pos
        while p < end:
            v = s0[p]
            if any(o[p] != v for o in others):
                break
            p += 1
        node["length"] = p - pos
        groups: dict[int, list[int]] = {}
        for r in members:
            if p >= len(seqs[r]):
                node["ended"].append(r)
            else:
                groups.setdefault(seqs[r][p], []).append(r)
        if len(groups) == 1 and not node["ended"]:  # pragma: no cover - loop ran to end
            continue
        for members_c in groups.values():
            child = {"runs": members_c, "start": p, "length": 0, "children": [],
                     "ended": []}
            node["children"].append(child)
            stack.append(child)
    return root


def tree_graph(runs: Sequence[Steps], table: StepTable, tree: dict[str, Any]) -> nx.DiGraph:
    """The N-way divergence tree as a graph (see :func:`build_tree`)."""
    g = nx.DiGraph(name="divergence_tree")
    legend = "   ".join(f"{_run_name(i)} = {printable(r.source)}"
                       + (f" ({printable(r.session)})" if r.session else "")
                       for i, r in enumerate(runs))
    g.graph["graph"] = {"rankdir": "TB", "fontname": "Helvetica", "labelloc": "t",
                        "label": "acp-align: " + legend}
    g.graph["node"] = {"shape": "box", "style": "rounded,filled", "fontname": "Helvetica",
                       "fontsize": "10"}
    g.graph["edge"] = {"fontname": "Helvetica", "fontsize": "9"}
    # which steps need words: a node's shown steps, described from its first run
    want: dict[int, list[int]] = {}
    nodes: list[tuple[str, dict, str | None]] = []
    stack: list[tuple[dict, str | None]] = [(tree, None)]
    counter = 0
    while stack:
        node, parent = stack.pop()
        name = f"t{counter}"
        counter += 1
        nodes.append((name, node, parent))
        r0 = node["runs"][0]
        want.setdefault(r0, []).extend(node["start"] + k for k in _label_idx(node["length"]))
        for child in reversed(node["children"]):
            stack.append((child, name))
    texts = {r: runs[r].describe(idx) for r, idx in want.items()}
    first_branch = _first_branch(tree)
    for name, node, parent in nodes:
        members = node["runs"]
        r0 = members[0]
        who = ", ".join(_run_name(r) for r in members)
        idx = list(range(node["start"], node["start"] + node["length"]))
        if parent is None and not idx:
            label = "start"
        else:
            head = f"{who}: {len(idx)} step{'s' * (len(idx) != 1)}"
            body = _lines(runs[r0], table, idx, texts.get(r0, {})) if idx else "(nothing)"
            label = head + "\n" + body
        if node["ended"] and node["children"]:
            label += "\nends here: " + ", ".join(_run_name(r) for r in node["ended"])
        fill = SHARED if len(members) > 1 else _light(r0)
        attrs: dict[str, Any] = {"label": label, "fillcolor": fill,
                                 "color": "#999999" if len(members) > 1 else _colour(r0),
                                 "runs": members}
        if node is first_branch:
            # said inside the node, so it can overlap nothing
            attrs.update(penwidth="3", color=HIGHLIGHT, label=label + "\n(first divergence)",
                         first=True)
        g.add_node(name, **attrs)
        if parent is not None:
            first_step = node["start"]
            first = texts.get(r0, {}).get(first_step, "?") if node["length"] else "(ends)"
            colours = ":".join(_colour(r) for r in members[:6])
            g.add_edge(parent, name, label=f"{who}\nfirst: {first}", color=colours,
                       fontcolor=_colour(r0) if len(members) == 1 else "black",
                       penwidth="2.5" if g.nodes[parent].get("first") else "1.2",
                       runs=members)
    return g


def _first_branch(tree: dict[str, Any]) -> dict[str, Any] | None:
    """The node where the runs first part ways: two or more children, or a run that ends
    while others go on."""
    node = tree
    while True:
        kids = node["children"]
        if len(kids) >= 2 or (kids and node["ended"]):
            return node
        if not kids:
            return None
        node = kids[0]

def _run_name(i: int) -> str:
    """A, B, ..., Z, then R27, R28, ..."""
    return chr(ord("A") + i) if i < 26 else f"R{i + 1}"


def tree_json(runs: Sequence[Steps], table: StepTable, tree: dict[str, Any]) -> dict[str, Any]:
    """The N-way tree as JSON: runs, the nested tree, and the first divergence."""
    first = _first_branch(tree)

    def conv(node: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "runs": [_run_name(r) for r in node["runs"]],
            "start": node["start"],
            "length": node["length"],
        }
        if node["length"]:
            r0 = node["runs"][0]
            out["first_step"] = _step(runs[r0], table, node["start"])
        if node["ended"]:
            out["ended"] = [_run_name(r) for r in node["ended"]]
        if node["children"]:
            out["children"] = [conv(c) for c in node["children"]]
        return out

    first_out = None
    if first is not None:
        at = first["start"] + first["length"]
        branches = []
        for c in first["children"]:
            r0 = c["runs"][0]
            branches.append({"runs": [_run_name(r) for r in c["runs"]],
                             "step": _step(runs[r0], table, at)})
        if first["ended"]:
            branches.append({"runs": [_run_name(r) for r in first["ended"]], "step": None})
        first_out = {"index": at, "branches": branches}
    return {
        "runs": [{"name": _run_name(i), "source": r.source, "session": r.session,
                  "steps": len(r.seq)} for i, r in enumerate(runs)],
        "equal": first is None,
        "tree": conv(tree),
        "first_divergence": first_out,
    }


def _step(steps: Steps, table: StepTable, i: int) -> dict[str, Any] | None:
    if not 0 <= i < len(steps.seq):
        return None
    first, sub, method = table.meta[steps.seq[i]]
    out: dict[str, Any] = {"index": i}
    out["dir" if steps.kind == "trace" else "type"] = first
    if sub is not None:
        out["kind"] = sub
    if method is not None:
        out["method"] = method
    text = steps.describe([i]).get(i)
    if text is not None:
        out["summary"] = text
    return out


# -- lineage ---------------------------------------------------------------------------


def _session_of(value: Any) -> str | None:
    """A session id from ``"s"`` or ``{"session": "s", ...}``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        s = value.get("session")
        if isinstance(s, str):
            return s
    return None


def lineage_graph(streams: Sequence[dict[str, Any]]) -> nx.DiGraph:
    """Sessions and how they came to be, from ASR streams (ASR-718, ASR-721).

    ``streams``: per ASR stream ``{"header": dict, "source": str, "records": int,
    "subagents": [(childSession, callId)], "resumes": int, "prompt": str | None}``.
    Edges: fork (header ``lineage.forkedFrom``), inherits (``lineage.inherits.from``, when
    not the fork parent), subagent (parent ``subagent`` record ``childSession`` or child
    ``lineage.spawnedBy``). Resumes (``state`` records with state ``resumed``) are a
    dashed loop on the session. Sessions named but not among the inputs are dashed.
    """
    g = nx.DiGraph(name="lineage")
    g.graph["graph"] = {"rankdir": "LR", "fontname": "Helvetica", "labelloc": "t",
                        "label": "acp-align --lineage"}
    g.graph["node"] = {"shape": "box", "style": "rounded,filled", "fontname": "Helvetica",
                       "fontsize": "10"}
    g.graph["edge"] = {"fontname": "Helvetica", "fontsize": "9"}
    seen: dict[str, int] = {}
    for n, s in enumerate(streams):
        h = s["header"]
        sid = h.get("sessionId")
        if not isinstance(sid, str):
            sid = f"(no sessionId: {s['source']})"
        seen[sid] = n
        agent = h.get("agent") if isinstance(h.get("agent"), dict) else {}
        lines = [printable(sid)]  # recorded strings: a newline in one is shown, not a line
        if isinstance(agent.get("name"), str):
            lines.append(printable(agent["name"]))
        lines.append(f"{s['records']} records · {printable(s['source'])}")
        if s.get("prompt"):
            lines.append(f"“{s['prompt']}”")
        g.add_node(sid, label="\n".join(lines), fillcolor=_light(n), color=_colour(n))
    def ensure(sid: str) -> None:
        if sid not in g:
            g.add_node(sid, label=f"{printable(sid)}\n(not among the inputs)",
                       style="rounded,dashed", fillcolor="white", color="#999999")

    for s in streams:
        h = s["header"]
        sid = h.get("sessionId")
        if not isinstance(sid, str):
            continue
        lin = h.get("lineage") if isinstance(h.get("lineage"), dict) else {}
        fork = _session_of(lin.get("forkedFrom"))
        if fork:
            ensure(fork)
            g.add_edge(fork, sid, label="fork", color="#2ca02c", penwidth="2", kind="fork")
        inh = lin.get("inherits")
        src = _session_of(inh.get("from")) if isinstance(inh, dict) else None
        if src and src != fork:
            ensure(src)
            g.add_edge(src, sid, label=f"inherits ({printable(str(inh.get('mode', '?')))})",
                       style="dashed", color="#2ca02c", kind="inherits")
        spawn = _session_of(lin.get("spawnedBy"))
        if spawn:
            ensure(spawn)
            g.add_edge(spawn, sid, label="subagent", color="#9467bd", penwidth="2",
                       kind="subagent")
        for child, call in s.get("subagents", ()):
            ensure(child)
            label = "subagent" + (f"\n{printable(call)}" if call else "")
            g.add_edge(sid, child, label=label, color="#9467bd", penwidth="2",
                       kind="subagent")
        if s.get("resumes"):
            k = s["resumes"]
            g.add_edge(sid, sid, label=f"resumed ×{k}" if k > 1 else "resumed",
                       style="dashed", color="#ff7f0e", kind="resume")
    return g


#: The key of the node that stands for the sessions not drawn: not a string, so no
#: session ID can be it.
_MORE = ("more sessions",)


def bounded_lineage(g: nx.DiGraph, max_sessions: int = MAX_SESSIONS) -> nx.DiGraph:
    """``g`` as drawn: its first ``max_sessions`` sessions (in the order the inputs
    named them) and the edges among them, the rest said in one node and the title, so a
    corpus of thousands of sessions still renders in seconds."""
    if len(g) <= max_sessions:
        return g
    keep = list(g)[:max_sessions]
    out = g.subgraph(keep).copy()
    out.graph.update({k: dict(v) if isinstance(v, dict) else v for k, v in g.graph.items()})
    rest = len(g) - max_sessions
    out.graph["graph"]["label"] += f"   (the first {max_sessions:,} of {len(g):,} sessions drawn)"
    out.add_node(_MORE, label=f"… {rest:,} more session{'s' * (rest != 1)}, not drawn\n"
                 "(--format json lists them all)", style="rounded,dashed", fillcolor="white",
                 color="#777777")
    return out

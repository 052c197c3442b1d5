"""Divergence graphs as networkx graphs (written as DOT and SVG by :mod:`.dot`).

Two graphs, each readable at a glance (labels say what happened, never hashes; runs
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

The third graph acp-align draws, of ASR streams' sessions, is :mod:`.lineage`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict

import networkx as nx

from acp_pipes.align.comparison import Change, Comparison
from acp_pipes.align.dot import run_colour, run_light
from acp_pipes.align.render import ABSENT, UNANSWERED_NOTE, show_values
from acp_pipes.align.steps import Steps, StepTable
from acp_pipes.io.terminal import printable

__all__ = ["build_tree", "first_branch", "pair_graph", "tree_graph", "tree_json"]

SHARED = "#f0f0f0"
HIGHLIGHT = "#ff7f00"
CHANGED = "#b8860b"
CHANGED_LIGHT = "#fff3c4"
SHOW = 4  # steps listed in a node label before "… N more"
#: At most this many places where two runs differ are drawn: Graphviz's layout time grows
#: faster than linearly with the nodes, and a graph of thousands of them says nothing.
MAX_PLACES = 40


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
        if run[0] == "note":  # tolerated, not a place where the runs differ: not drawn
            continue
        if run[0] == "equal":
            out.append(("equal", [run]))
        elif out and out[-1][0] == "gap":
            out[-1][1].append(run)
        else:
            out.append(("gap", [run]))
    return out


def _positions(runs: list[tuple[str, int, int]], tag: str) -> list[int]:
    return [k for t, lo, hi in runs if t == tag for k in range(lo, hi)]


Segment = tuple[str, list[tuple[str, int, int]]]
#: Edges waiting for the next node: ``(source node, edge attributes)``.
Pending = list[tuple[str, dict[str, str]]]
_GREY = {"color": "#777777"}


def pair_graph(cmp: Comparison, max_places: int = MAX_PLACES) -> nx.DiGraph:
    """The two-way divergence graph (see the module docstring), at most ``max_places``
    places where the runs differ drawn: the rest is one node that says what it holds,
    so any comparison renders in seconds."""
    segments = _gaps(cmp)
    places = sum(1 for kind, _ in segments if kind == "gap")
    drawn = min(places, max_places)
    g = _pair_canvas(cmp, places, drawn)
    shown, rest = _cut(segments, drawn)
    drawing = _PairDrawing(cmp, g, shown)
    g.add_node("start", label="start", shape="circle", style="filled", fillcolor="white")
    pending: Pending = [("start", _GREY)]  # edges into the next node
    for n, (kind, runs) in enumerate(shown):
        if kind == "equal":
            pending = drawing.shared(n, runs[0], pending)
        else:
            pending = drawing.place(n, runs, pending[0][0])
    if rest:
        pending = _rest_node(g, cmp, rest, places - drawn, pending)
    g.add_node("end", label="end", shape="doublecircle", style="filled", fillcolor="white")
    for src, attrs in pending:
        g.add_edge(src, "end", **attrs)
    return g


def _pair_canvas(cmp: Comparison, places: int, drawn: int) -> nx.DiGraph:
    """The empty two-way graph: its title (the inputs, how many places drawn) and the
    look of its nodes and edges."""
    title = f"acp-align: A = {printable(cmp.a.source)}   B = {printable(cmp.b.source)}"
    if cmp.approximate:
        title += "   (approximate)"
    if drawn < places:
        title += f"   (the first {drawn:,} of {places:,} places where they differ drawn)"
    return _canvas("divergence", title)


def _canvas(name: str, title: str) -> nx.DiGraph:
    """An empty graph with its title and the look of its nodes and edges."""
    g = nx.DiGraph(name=name)
    g.graph["graph"] = {"rankdir": "TB", "fontname": "Helvetica", "labelloc": "t",
                        "label": title}
    g.graph["node"] = {"shape": "box", "style": "rounded,filled", "fontname": "Helvetica",
                       "fontsize": "10"}
    g.graph["edge"] = {"fontname": "Helvetica", "fontsize": "9"}
    return g


def _cut(segments: list[Segment], drawn: int) -> tuple[list[Segment], list[Segment]]:
    """What gets drawn (every segment up to the last drawn place, and the shared run
    after it), and the rest."""
    shown: list[Segment] = []
    seen = 0
    for n, seg in enumerate(segments):
        if seg[0] == "gap":
            if seen == drawn:
                return shown, segments[n:]
            seen += 1
        shown.append(seg)
    return shown, []


class _PairDrawing:
    """The nodes of the two-way graph, one segment at a time; the words of the steps its
    labels show are read once, up front."""

    def __init__(self, cmp: Comparison, g: nx.DiGraph, shown: list[Segment]):
        self.cmp, self.g = cmp, g
        self.first = True  # the first divergence is still to be drawn
        oa, ob = cmp.oa, cmp.ob
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
        self.ta, self.tb = cmp.a.describe(want_a), cmp.b.describe(want_b)
        self.changes = cmp.changes(want_changes)

    def shared(self, n: int, run: tuple[str, int, int], pending: Pending) -> Pending:
        """A run of shared steps: one grey node."""
        _, lo, hi = run
        oa = self.cmp.oa
        node = f"n{n}"
        idx = [oa[k] for k in range(lo, hi)] if hi - lo <= SHOW + 1 else \
            [oa[k] for k in range(lo, lo + SHOW - 1)] + [oa[hi - 1]]
        label = f"A and B: {hi - lo} shared step{'s' * (hi - lo != 1)}\n" + _lines(
            self.cmp.a, self.cmp.table, idx, self.ta, hi - lo)
        self.g.add_node(node, label=label, fillcolor=SHARED, color="#999999")
        for src, attrs in pending:
            self.g.add_edge(src, node, **attrs)
        return [(node, _GREY)]

    def place(self, n: int, runs: list[tuple[str, int, int]], base: str) -> Pending:
        """A place where the runs differ: its branches from ``base``, drawn."""
        new: Pending = []
        for branch, label, who, colour, fill in self._branches(n, runs):
            edge = {"color": colour, "label": who, "fontcolor": colour}
            if branch is None:  # this side goes on without steps of its own
                new.append((base, {**edge, "style": "dashed"}))
                continue
            self.g.add_node(branch, label=label, fillcolor=fill, color=colour)
            if self.first:  # said once, as an edge label: dot keeps those clear of nodes
                self.g.nodes[branch].update(penwidth="3", color=HIGHLIGHT)
                edge.update(penwidth="3", label=f"first divergence\n{who}",
                            fontcolor=HIGHLIGHT)
                self.first = False
            self.g.add_edge(base, branch, **edge)
            new.append((branch, {"color": colour}))
        return new

    def _branches(self, n: int, runs: list[tuple[str, int, int]]
                  ) -> list[tuple[str | None, str, str, str, str | None]]:
        """A place's branches: ``(node, label, runs, colour, fill)``: its changed steps,
        then each side's own steps (node None: a side that goes on without any)."""
        cmp = self.cmp
        branches: list[tuple[str | None, str, str, str, str | None]] = []
        pos = _positions(runs, "changed")
        has_changed = bool(pos)
        if pos:
            lines = _changed_lines(cmp, pos, self.ta, self.tb, self.changes)
            branches.append((f"n{n}C", f"changed ({len(pos)})\n" + lines, "A, B",
                             CHANGED, CHANGED_LIGHT))
        for side, tag, steps, texts, idx_of in ((0, "only-a", cmp.a, self.ta, cmp.oa),
                                                (1, "only-b", cmp.b, self.tb, cmp.ob)):
            name = "AB"[side]
            pos = _positions(runs, tag)
            if not pos:  # a side with no steps of its own: dashed, unless it went through
                if not has_changed:  # the changed steps
                    branches.append((None, "", name, run_colour(side), None))
                continue
            idx = [idx_of[k] for k in pos]
            branches.append((f"n{n}{name}", f"only {name} ({len(pos)})\n"
                             + _lines(steps, cmp.table, _shown(idx), texts, len(idx)), name,
                             run_colour(side), run_light(side)))
        return branches


def _rest_node(g: nx.DiGraph, cmp: Comparison, rest: list[Segment], more: int,
               pending: Pending) -> Pending:
    """The places not drawn, summed up in one dashed node."""
    counts = {"changed": 0, "only-a": 0, "only-b": 0}
    for _, runs in rest:
        for tag, lo, hi in runs:
            if tag != "equal":
                counts[tag] += hi - lo
    a_from = _next_at(cmp.oa, rest[0][1][0][1])
    label = (f"… {more:,} more place{'s' * (more != 1)} where "
             "the runs differ, not drawn:\n"
             f"{counts['changed']:,} changed, {counts['only-a']:,} only in A, "
             f"{counts['only-b']:,} only in B"
             + (f"\nfrom step {a_from} of A on" if a_from is not None else "")
             + "\n(--format diff or json lists them all)")
    g.add_node("rest", label=label, style="rounded,dashed", fillcolor="white",
               color="#777777")
    for src, attrs in pending:
        g.add_edge(src, "rest", **attrs)
    return [("rest", {**_GREY, "style": "dashed"})]


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


# -- N-way: a compressed prefix tree -----------------------------------------------------


class TreeNode(TypedDict):
    """A node of :func:`build_tree`'s tree."""

    runs: list[int]
    start: int
    length: int
    children: list[TreeNode]
    ended: list[int]


def build_tree(runs: Sequence[Steps], seqs: Sequence[Sequence[int]] | None = None
               ) -> TreeNode:
    """The prefix tree of the runs' step sequences (``seqs``: what stands for each step
    instead of its id), shared runs of steps compressed.

    Each node: ``runs`` (indices of the inputs walking it), ``start`` (position of its
    first step in every one of those runs), ``length`` (shared steps), ``children``.
    A child's first step is where its runs part from their siblings; a run that ends at a
    node is listed in its ``ended``.
    """
    seqs = seqs if seqs is not None else [r.seq for r in runs]
    root: TreeNode = {"runs": list(range(len(runs))), "start": 0, "length": 0,
                      "children": [], "ended": []}
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
            child: TreeNode = {"runs": members_c, "start": p, "length": 0, "children": [],
                               "ended": []}
            node["children"].append(child)
            stack.append(child)
    return root


def tree_graph(runs: Sequence[Steps], table: StepTable, tree: TreeNode) -> nx.DiGraph:
    """The N-way divergence tree as a graph (see :func:`build_tree`)."""
    legend = "   ".join(f"{_run_name(i)} = {printable(r.source)}"
                       + (f" ({printable(r.session)})" if r.session else "")
                       for i, r in enumerate(runs))
    g = _canvas("divergence_tree", "acp-align: " + legend)
    nodes, want = _tree_nodes(tree)
    # which steps need words: a node's shown steps, described from its first run
    texts = {r: runs[r].describe(idx) for r, idx in want.items()}
    first_branch_node = first_branch(tree)
    for name, node, parent in nodes:
        members = node["runs"]
        r0 = members[0]
        attrs = _tree_node(runs, table, node, parent, texts.get(r0, {}))
        if node is first_branch_node:
            # said inside the node, so it can overlap nothing
            attrs.update(penwidth="3", color=HIGHLIGHT,
                         label=attrs["label"] + "\n(first divergence)", first=True)
        g.add_node(name, **attrs)
        if parent is not None:
            who = ", ".join(_run_name(r) for r in members)
            first = texts.get(r0, {}).get(node["start"], "?") if node["length"] else "(ends)"
            colours = ":".join(run_colour(r) for r in members[:6])
            g.add_edge(parent, name, label=f"{who}\nfirst: {first}", color=colours,
                       fontcolor=run_colour(r0) if len(members) == 1 else "black",
                       penwidth="2.5" if g.nodes[parent].get("first") else "1.2",
                       runs=members)
    return g


def _tree_nodes(tree: TreeNode) -> tuple[list[tuple[str, TreeNode, str | None]],
                                         dict[int, list[int]]]:
    """The tree's nodes in drawing order, ``(name, node, parent's name)``, and the steps
    their labels show, by the run they are read from (each node's first)."""
    want: dict[int, list[int]] = {}
    nodes: list[tuple[str, TreeNode, str | None]] = []
    stack: list[tuple[TreeNode, str | None]] = [(tree, None)]
    while stack:
        node, parent = stack.pop()
        name = f"t{len(nodes)}"
        nodes.append((name, node, parent))
        r0 = node["runs"][0]
        want.setdefault(r0, []).extend(node["start"] + k for k in _label_idx(node["length"]))
        for child in reversed(node["children"]):
            stack.append((child, name))
    return nodes, want


def _tree_node(runs: Sequence[Steps], table: StepTable, node: TreeNode,
               parent: str | None, texts: dict[int, str]) -> dict[str, Any]:
    """A tree node's attributes: its label (its runs, its steps, who ends there) and
    colours (grey when runs share it, else its run's)."""
    members = node["runs"]
    r0 = members[0]
    idx = list(range(node["start"], node["start"] + node["length"]))
    if parent is None and not idx:
        label = "start"
    else:
        who = ", ".join(_run_name(r) for r in members)
        head = f"{who}: {len(idx)} step{'s' * (len(idx) != 1)}"
        body = _lines(runs[r0], table, idx, texts) if idx else "(nothing)"
        label = head + "\n" + body
    if node["ended"] and node["children"]:
        label += "\nends here: " + ", ".join(_run_name(r) for r in node["ended"])
    shared = len(members) > 1
    return {"label": label, "fillcolor": SHARED if shared else run_light(r0),
            "color": "#999999" if shared else run_colour(r0), "runs": members}


def first_branch(tree: TreeNode) -> TreeNode | None:
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


def tree_json(runs: Sequence[Steps], table: StepTable, tree: TreeNode) -> dict[str, Any]:
    """The N-way tree as JSON: runs, the nested tree, and the first divergence."""
    first = first_branch(tree)

    def conv(node: TreeNode) -> dict[str, Any]:
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

"""Divergence graphs as networkx graphs, written as Graphviz DOT (and SVG through `dot`).

Three graphs, each readable at a glance (labels say what happened, never hashes; runs
coloured; the first divergence drawn thick and orange):

- :func:`pair_graph`, two runs: runs of shared steps merged into one grey node; where the
  runs part, one branch per side (A red, B blue) that rejoins at the next shared run.
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

from collections.abc import Sequence
from typing import Any

import networkx as nx

from acp_pipes.align.myers import Alignment, opcodes
from acp_pipes.align.steps import Steps, StepTable
from acp_pipes.errors import AcpPipesError

__all__ = ["DotMissing", "lineage_graph", "pair_graph", "to_dot", "to_svg", "tree_graph",
           "tree_json"]

#: Run colours: A, B, then more for N-way (colour-blind-safe-ish, Tableau 10).
PALETTE = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
           "#17becf", "#bcbd22", "#7f7f7f"]
LIGHT = ["#fbe0e0", "#deebf7", "#e5f5e0", "#efe5f5", "#fdebd6", "#efe3df", "#fbe3f2",
         "#dff5f8", "#f5f5d6", "#eeeeee"]
SHARED = "#f0f0f0"
HIGHLIGHT = "#ff7f00"
SHOW = 4  # steps listed in a node label before "… N more"


class DotMissing(AcpPipesError):
    """Graphviz's `dot` program is not installed."""


def _colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _light(i: int) -> str:
    return LIGHT[i % len(LIGHT)]


def _lines(steps: Steps, table: StepTable, idx: Sequence[int], texts: dict[int, str]) -> str:
    """Label lines for a run of steps: the first SHOW, then how many more."""
    out = []
    shown = idx[:SHOW] if len(idx) <= SHOW + 1 else idx[: SHOW - 1]
    for i in shown:
        out.append(_one(steps, table, i, texts))
    if len(shown) < len(idx):
        rest = len(idx) - len(shown)
        out.append(f"… {rest} more")
        out.append(_one(steps, table, idx[-1], texts))
    return "\n".join(out)


def _one(steps: Steps, table: StepTable, i: int, texts: dict[int, str]) -> str:
    text = texts.get(i, "?")
    if steps.kind == "trace":
        arrow = {"c2a": "→ ", "a2c": "← "}.get(table.meta[steps.seq[i]][0], "")
        return f"{i}: {arrow}{text}"
    return f"{i}: {text}"


def _label_idx(n: int) -> list[int]:
    return list(range(n)) if n <= SHOW + 1 else [*range(SHOW - 1), n - 1]


def pair_graph(al: Alignment, a: Steps, b: Steps, table: StepTable) -> nx.DiGraph:
    """The two-way divergence graph (see the module docstring)."""
    g = nx.DiGraph(name="divergence")
    g.graph["graph"] = {"rankdir": "TB", "fontname": "Helvetica", "labelloc": "t",
                        "label": f"acp-align: A = {a.source}   B = {b.source}"
                        + ("   (approximate)" if al.approximate else "")}
    g.graph["node"] = {"shape": "box", "style": "rounded,filled", "fontname": "Helvetica",
                       "fontsize": "10"}
    g.graph["edge"] = {"fontname": "Helvetica", "fontsize": "9"}
    codes = list(opcodes(al))
    want_a: list[int] = []
    want_b: list[int] = []
    for tag, a0, a1, b0, b1 in codes:
        if tag == "only-b":
            want_b += [b0 + k for k in _label_idx(b1 - b0)]
        else:
            want_a += [a0 + k for k in _label_idx(a1 - a0)]
    ta, tb = a.describe(want_a), b.describe(want_b)
    g.add_node("start", label="start", shape="circle", style="filled", fillcolor="white")
    grey = {"color": "#777777"}
    pending: list[tuple[str, dict[str, str]]] = [("start", grey)]  # edges into the next node
    first = True
    n = 0
    while n < len(codes):
        tag, a0, a1, b0, b1 = codes[n]
        if tag == "equal":
            node = f"n{n}"
            idx = list(range(a0, a1))
            label = f"A and B: {a1 - a0} shared step{'s' * (a1 - a0 != 1)}\n" + _lines(
                a, table, idx, ta)
            g.add_node(node, label=label, fillcolor=SHARED, color="#999999")
            for src, attrs in pending:
                g.add_edge(src, node, **attrs)
            pending = [(node, grey)]
            n += 1
            continue
        # a gap: an only-a run, an only-b run, or both (in that order)
        base = pending[0][0]
        gap = {"only-a": None, "only-b": None}
        while n < len(codes) and codes[n][0] != "equal":
            gap[codes[n][0]] = codes[n]
            n += 1
        new: list[tuple[str, dict[str, str]]] = []
        for side, key, steps, texts in ((0, "only-a", a, ta), (1, "only-b", b, tb)):
            name = "A" if side == 0 else "B"
            code = gap[key]
            colour = {"color": _colour(side), "label": name, "fontcolor": _colour(side)}
            if code is None:  # this side goes on without steps of its own
                new.append((base, {**colour, "style": "dashed"}))
                continue
            _, x0, x1, y0, y1 = code
            lo, hi = (x0, x1) if side == 0 else (y0, y1)
            idx = list(range(lo, hi))
            node = f"n{n}{name}"
            g.add_node(node, label=f"only {name} ({hi - lo})\n" + _lines(steps, table, idx, texts),
                       fillcolor=_light(side), color=_colour(side))
            edge = dict(colour)
            if first:
                g.nodes[node].update(penwidth="3", color=HIGHLIGHT, xlabel="first divergence")
                edge["penwidth"] = "3"
            g.add_edge(base, node, **edge)
            new.append((node, {"color": _colour(side)}))
        first = False
        pending = new
    g.add_node("end", label="end", shape="doublecircle", style="filled", fillcolor="white")
    for src, attrs in pending:
        g.add_edge(src, "end", **attrs)
    return g


def to_dot(g: nx.DiGraph) -> str:
    """Graphviz DOT source for a graph built here (quoting by the graphviz package)."""
    import graphviz

    dot = graphviz.Digraph(name=g.graph.get("name", "G"))
    for key in ("graph", "node", "edge"):
        attrs = g.graph.get(key)
        if attrs:
            dot.attr(key, **attrs)
    for node, data in g.nodes(data=True):
        dot.node(str(node), **{k: str(v) for k, v in data.items() if k not in _PRIVATE})
    for u, v, data in g.edges(data=True):
        dot.edge(str(u), str(v), **{k: str(x) for k, x in data.items() if k not in _PRIVATE})
    return dot.source


_PRIVATE = ("runs", "kind")  # graph data that is not a Graphviz attribute


def to_svg(dot_source: str) -> bytes:
    """Render DOT to SVG with Graphviz's `dot`; DotMissing when it is not installed."""
    import graphviz

    try:
        return graphviz.Source(dot_source).pipe(format="svg")
    except graphviz.ExecutableNotFound:
        raise DotMissing(
            "--format svg needs Graphviz's 'dot' program, which is not on PATH: install "
            "the graphviz package (apt-get install graphviz / brew install graphviz), or "
            "use --format dot and render elsewhere"
        ) from None
    except graphviz.CalledProcessError as e:  # pragma: no cover - dot rejected our DOT
        raise DotMissing(f"Graphviz 'dot' failed: {e.stderr!r}") from None


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
    legend = "   ".join(f"{_run_name(i)} = {r.source}" + (f" ({r.session})" if r.session else "")
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
            attrs.update(penwidth="3", color=HIGHLIGHT, xlabel="first divergence")
        g.add_node(name, **attrs)
        if parent is not None:
            first_step = node["start"]
            first = texts.get(r0, {}).get(first_step, "?") if node["length"] else "(ends)"
            colours = ":".join(_colour(r) for r in members[:6])
            g.add_edge(parent, name, label=f"{who}\nfirst: {first}", color=colours,
                       fontcolor=_colour(r0) if len(members) == 1 else "black",
                       penwidth="2.5" if g.nodes[parent].get("xlabel") else "1.2",
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
        lines = [sid]
        if isinstance(agent.get("name"), str):
            lines.append(agent["name"])
        lines.append(f"{s['records']} records · {s['source']}")
        if s.get("prompt"):
            lines.append(f"“{s['prompt']}”")
        g.add_node(sid, label="\n".join(lines), fillcolor=_light(n), color=_colour(n))
    def ensure(sid: str) -> None:
        if sid not in g:
            g.add_node(sid, label=f"{sid}\n(not among the inputs)", style="rounded,dashed",
                       fillcolor="white", color="#999999")

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
            g.add_edge(src, sid, label=f"inherits ({inh.get('mode', '?')})", style="dashed",
                       color="#2ca02c", kind="inherits")
        spawn = _session_of(lin.get("spawnedBy"))
        if spawn:
            ensure(spawn)
            g.add_edge(spawn, sid, label="subagent", color="#9467bd", penwidth="2",
                       kind="subagent")
        for child, call in s.get("subagents", ()):
            ensure(child)
            label = "subagent" + (f"\n{call}" if call else "")
            g.add_edge(sid, child, label=label, color="#9467bd", penwidth="2",
                       kind="subagent")
        if s.get("resumes"):
            k = s["resumes"]
            g.add_edge(sid, sid, label=f"resumed ×{k}" if k > 1 else "resumed",
                       style="dashed", color="#ff7f0e", kind="resume")
    return g

"""The lineage graph of ASR streams: sessions and how they came to be (fork, subagent,
resume; ASR-718, ASR-721), for acp-align --lineage."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import networkx as nx

from acp_pipes.align.dot import run_colour, run_light
from acp_pipes.io.terminal import printable

__all__ = ["MAX_SESSIONS", "bounded_lineage", "lineage_graph"]

#: At most this many sessions are drawn in a lineage graph (the JSON lists them all).
MAX_SESSIONS = 200


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
        g.add_node(sid, label="\n".join(lines), fillcolor=run_light(n), color=run_colour(n))
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
        if src and src != fork and isinstance(inh, dict):  # (a source: inh is one)
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

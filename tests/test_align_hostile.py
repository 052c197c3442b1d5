"""acp-align's graphs of hostile recordings: what a recording holds is only ever text.

Session IDs, prompts, method names and file names carry DOT statements (a ``URL`` that
runs script, a ``stylesheet`` the SVG fetches), Graphviz's label escapes (``\\N``, ``\\G``,
``\\l``), entities and a trailing backslash. The recordings are made from the ASR fixtures'
wire logs (ASR-717 resume, ASR-718 fork, ASR-721 subagent) with those strings put in,
converted by the real acp-asr and drawn by the real acp-align. The DOT is read back by
the real Graphviz (``dot -Tjson``: every node, edge and attribute it parsed, and the text
it drew), the SVG by an XML parser and opened in Chromium, where every element is
clicked. A fuzz target does the same for any strings, through the DOT writer itself.
"""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import networkx as nx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_pipes.align.dot import to_dot
from acp_pipes.align.lineage import lineage_graph
from acp_pipes.io.terminal import printable
from tests.conftest import run_tool
from tests.view_browser import _wire

FIXTURES = Path(__file__).parent / "fixtures" / "asr"

#: The statements a session ID wrote into DOT before it was escaped: the graphviz package
#: leaves a string of the form <...> unquoted (an HTML-like label), so this closed the
#: node's ID and added a stylesheet fetched when the SVG opens and a javascript: link.
BREAK_OUT = ('<x>; graph [stylesheet="http://127.0.0.1:9/evil.css"]; '
             'evil [URL="javascript:window.__pwned=1;alert(1)" label="click me"]; <y>')
#: Strings DOT or Graphviz's label code would read as more than text.
PAYLOADS = [
    BREAK_OUT,
    '"]; graph [stylesheet="http://127.0.0.1:9/q.css"]; e [URL="javascript:window.__pwned=2"'
    ' label="x"]; z [label="',
    "kid\\",  # ends in a backslash: escaped the closing quote
    "\\N \\G \\E \\T \\H \\L \\l \\r \\\\N",  # Graphviz's label escapes, drawn as written
    "&amp; &lt;b&gt; &#60;script&#62;",  # entities, drawn as written
    "<<b>html</b>>",
    "{a|<p>b} x:y:nw -> n0 --",
    "tab\tnew\nline\x1b[31m\u202eRTL",
]


def _substitute(value, names: dict[str, str]):
    """``value`` with every string equal to a key of ``names`` replaced by its value."""
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, list):
        return [_substitute(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, names) for k, v in value.items()}
    return value


def hostile_wire(fixture: str, names: dict[str, str], first: bool = False) -> bytes:
    """The fixture's wire log with session IDs and prompt texts replaced by ``names``
    (``first``: its first connection only, when it holds several)."""
    out = []
    for line in (FIXTURES / fixture / "wire.jsonl").read_bytes().splitlines():
        rec = orjson.loads(line)
        if first and out and "format" in rec:
            break
        if "raw" in rec:
            rec["raw"] = orjson.dumps(_substitute(orjson.loads(rec["raw"]), names)).decode()
        out.append(orjson.dumps(rec))
    return b"\n".join(out) + b"\n"


def convert(tmp: Path, wires: dict[str, bytes], name: str) -> Path:
    """The wire logs converted by the real acp-asr into one file of ASR streams."""
    paths = []
    for fname, data in wires.items():
        p = tmp / fname
        p.write_bytes(data)
        paths.append(str(p))
    r = run_tool("asr", *paths)
    assert r.returncode == 0, r.stderr
    out = tmp / name
    out.write_bytes(r.stdout)
    return out


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict:
    """ASR files: ``alone``, one session whose ID is BREAK_OUT, not resumed (old code
    drew its link and stylesheet into the SVG); ``all``, a fork, a subagent and a resumed session whose IDs and
    prompts are all of PAYLOADS."""
    tmp = tmp_path_factory.mktemp("hostile")
    alone = convert(tmp, {"alone.wire.jsonl": hostile_wire(
        "ASR-717-resume-no-duplicates", {"s": BREAK_OUT, "hi": "click the link"},
        first=True)},
        "alone.asr.jsonl")
    p = PAYLOADS
    wires = {
        "fork.wire.jsonl": hostile_wire("ASR-718-fork-lineage",
                                        {"parent": p[0], "child": p[1], "hi": p[3]}),
        "sub.wire.jsonl": hostile_wire("ASR-721-subagents",
                                       {"parent": p[2], "kid": p[3], "delegate": p[4]}),
        "resume.wire.jsonl": hostile_wire("ASR-717-resume-no-duplicates",
                                          {"s": p[5], "hi": p[7]}),
    }
    both = convert(tmp, wires, "all.asr.jsonl")
    extra = tmp / "more.asr.jsonl"  # two more sessions, named by the header alone
    extra.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in [
        {"type": "header", "asr": "1.0", "sessionId": p[6],
         "lineage": {"spawnedBy": {"session": p[4], "evidence": "native_field"}}},
        {"type": "header", "asr": "1.0", "sessionId": p[7],
         "agent": {"name": p[1]},
         "lineage": {"forkedFrom": {"session": p[3], "evidence": "native_field"},
                     "inherits": {"mode": p[2], "from": p[0], "evidence": "native_field"}}},
    ]))
    return {"tmp": tmp, "alone": alone, "all": [both, extra], "sessions": PAYLOADS}


# -- reading DOT back with the real Graphviz ---------------------------------------------

#: What acp-align writes (GRAPH, NODE, EDGE) and what dot's layout adds (LAYOUT_*): every
#: attribute `dot -Tjson` may report. Anything else came from a recording.
GRAPH = {"rankdir", "fontname", "labelloc", "label"}
NODE = {"label", "shape", "style", "fillcolor", "color", "penwidth", "fontname", "fontsize"}
EDGE = {"label", "color", "fontcolor", "penwidth", "style", "fontname", "fontsize"}
LAYOUT_GRAPH = {"_draw_", "_ldraw_", "_subgraph_cnt", "bb", "directed", "lheight", "lp",
                "lwidth", "name", "strict", "xdotversion", "objects", "edges"}
LAYOUT_NODE = {"_draw_", "_ldraw_", "_gvid", "height", "name", "pos", "width"}
LAYOUT_EDGE = {"_draw_", "_ldraw_", "_hdraw_", "_tdraw_", "_gvid", "head", "tail", "lp", "pos"}


def read_back(dot_src: bytes) -> dict:
    """The graph as the real ``dot`` parsed it, checked to hold only what acp-align
    generates: its name, generated node IDs n0, n1, ... and the attributes above."""
    r = subprocess.run(["dot", "-Tjson"], input=dot_src, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    g = json.loads(r.stdout)
    assert set(g) <= GRAPH | LAYOUT_GRAPH, set(g) - GRAPH - LAYOUT_GRAPH
    assert g["name"] in ("lineage", "divergence", "divergence_tree")
    assert g.get("_subgraph_cnt", 0) == 0
    objects = g.get("objects", [])
    assert [o["name"] for o in objects] == [f"n{i}" for i in range(len(objects))]
    for o in objects:
        assert set(o) <= NODE | LAYOUT_NODE, set(o) - NODE - LAYOUT_NODE
    for e in g.get("edges", []):
        assert set(e) <= EDGE | LAYOUT_EDGE, set(e) - EDGE - LAYOUT_EDGE
    return g


def drawn(obj: dict) -> list[str]:
    """The lines of text dot drew for a node, an edge or the graph's label."""
    return [op["text"] for op in obj.get("_ldraw_", []) if op["op"] == "T"]


def lines(label: str) -> list[str]:
    """What a label of acp-align should be drawn as: one printable line per line, a lone
    surrogate (not UTF-8) as its escape."""
    return [re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", printable(x))
            for x in label.split("\n") if x != ""]


def align(*args) -> subprocess.CompletedProcess:
    return run_tool("align", *map(str, args), timeout=120)


# -- the lineage ----------------------------------------------------------------------


def test_lineage_dot_of_hostile_sessions_holds_only_generated_statements(hostile):
    """Every session is one node, named n0, n1, ..., and drawn with its ID exactly as
    recorded (made printable): no statement, attribute or escape of a recording took
    effect (ASR-718 fork, ASR-721 subagent lineage)."""
    p = align("--lineage", *hostile["all"], "--format", "json")
    assert p.returncode == 0, p.stderr
    sessions = [s["session"] for s in orjson.loads(p.stdout)["sessions"]]
    assert set(sessions) == set(hostile["sessions"])  # the JSON keeps the IDs verbatim
    p = align("--lineage", *hostile["all"])
    assert p.returncode == 0 and p.stderr == b"", p.stderr
    g = read_back(p.stdout)
    assert len(g["objects"]) == len(sessions)
    firsts = sorted(drawn(o)[0] for o in g["objects"])
    assert firsts == sorted(printable(s) for s in sessions)
    assert drawn(g) == ["acp-align --lineage"]
    kinds = sorted(tuple(drawn(e)) for e in g["edges"])
    assert kinds == sorted([("fork",), ("subagent",), ("subagent",), ("fork",),
                            (f"inherits ({printable(PAYLOADS[2])})",), ("resumed",)])


def test_lineage_of_a_session_id_ending_in_a_backslash_renders(hostile, tmp_path):
    """A session ID ending in ``\\`` once escaped the closing quote: dot refused the
    DOT (exit 2). Now the SVG is written and draws the ID with its backslash."""
    p = align("--lineage", *hostile["all"], "--format", "svg")
    assert p.returncode == 0, p.stderr
    texts = svg_texts(p.stdout)
    assert "kid\\" in texts and "\\N \\G \\E \\T \\H \\L \\l \\r \\\\N" in texts
    assert "&amp; &lt;b&gt; &#60;script&#62;" in texts


SVG_NS = "{http://www.w3.org/2000/svg}"
#: The elements dot's SVG has for boxes, edges and text; a link would be an <a>.
SVG_TAGS = {"svg", "g", "title", "polygon", "ellipse", "path", "text", "polyline"}
SVG_ATTRS = {"width", "height", "viewBox", "id", "class", "transform", "fill", "stroke",
             "points", "cx", "cy", "rx", "ry", "d", "x", "y", "text-anchor", "font-family",
             "font-size", "stroke-width", "stroke-dasharray"}


def svg_texts(svg: bytes) -> list[str]:
    """The text of an SVG written by dot, checked to be boxes, edges and text only: no
    processing instruction (a stylesheet), no link (xlink:href), no script, no
    attribute dot writes for a URL, href, tooltip or stylesheet; every <title> (which
    names a node or edge) a generated ID."""
    assert b"<?xml-stylesheet" not in svg and b"href" not in svg
    parser = ET.XMLParser(target=ET.TreeBuilder(insert_pis=True, insert_comments=False))
    root = ET.fromstring(svg, parser=parser)
    texts = []
    for el in root.iter():
        assert isinstance(el.tag, str), f"processing instruction in the SVG: {el.text}"
        assert el.tag.startswith(SVG_NS), el.tag
        tag = el.tag[len(SVG_NS):]
        assert tag in SVG_TAGS, tag
        assert set(el.attrib) <= SVG_ATTRS, set(el.attrib) - SVG_ATTRS
        if tag == "title":
            assert re.fullmatch(r"n\d+(->n\d+)?|lineage|divergence(_tree)?", el.text), el.text
        if tag == "text":
            texts.append(el.text)
    return texts


def test_lineage_svg_has_no_link_stylesheet_or_script(hostile):
    for inputs in ([hostile["alone"]], hostile["all"]):
        p = align("--lineage", *inputs, "--format", "svg")
        assert p.returncode == 0, p.stderr
        texts = svg_texts(p.stdout)
        if inputs == [hostile["alone"]]:
            assert BREAK_OUT in texts  # drawn as the text it is


def test_a_session_named_like_the_node_of_those_not_drawn_keeps_its_own(tmp_path):
    """Past 200 sessions one node stands for the rest; a session whose ID was that
    node's key ("rest") had its box taken over by it. The node's key is now no string."""
    heads = [{"type": "header", "asr": "1.0", "sessionId": "rest" if i == 5 else f"s{i}"}
             for i in range(203)]
    streams = tmp_path / "many.asr.jsonl"
    streams.write_bytes(b"".join(orjson.dumps(h) + b"\n" for h in heads))
    p = align("--lineage", streams)
    assert p.returncode == 0, p.stderr
    g = read_back(p.stdout)
    assert len(g["objects"]) == 201
    shown = {drawn(o)[0]: drawn(o) for o in g["objects"]}
    assert shown["rest"] == ["rest", f"0 records · {streams}"]
    assert shown["… 3 more sessions, not drawn"] == ["… 3 more sessions, not drawn",
                                                    "(--format json lists them all)"]


# -- in Chromium ------------------------------------------------------------------------


@pytest.mark.slow  # Chromium
@pytest.mark.parametrize("which", ["alone", "all"])
def test_lineage_svg_in_chromium_runs_and_fetches_nothing(browser, hostile, which):
    """The SVG acp-align writes, opened from a file in Chromium as a reader would open
    it: every link, node, edge and text clicked. No script runs (no dialog, the
    payloads' window.__pwned unset, no page error) and no request leaves the page: old
    code's SVG fetched the stylesheet on opening and ran the javascript: link."""
    inputs = [hostile["alone"]] if which == "alone" else hostile["all"]
    svg = hostile["tmp"] / f"{which}.svg"
    p = align("--lineage", *inputs, "--format", "svg", "-o", svg)
    assert p.returncode == 0, p.stderr
    page = browser.new_page()
    url = svg.resolve().as_uri()
    requests: list[str] = []
    dialogs: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.route("**/*", lambda route: route.continue_() if route.request.url == url
               else route.abort())
    try:
        page.goto(url)
        page.wait_for_load_state("load")
        opened = [r for r in requests if r != url]  # asked for as the SVG opened
        count = page.evaluate("document.querySelectorAll('a, g.node, g.edge, text').length")
        assert count >= 3
        ran = []  # the elements whose click ran script
        for i in range(count):
            el = page.locator("a, g.node, g.edge, text").nth(i)
            el.click(force=True, timeout=5_000)
            if page.url != url:  # a link went somewhere: back to the drawing
                requests.append(page.url)
                page.goto(url)
            if page.evaluate("window.__pwned") is not None:
                ran.append(i)
        page.wait_for_timeout(300)  # a stylesheet or navigation still on its way
        assert {"fetched on opening": opened, "script ran on clicking": ran,
                "dialogs": dialogs, "errors": errors,
                "requests": [r for r in requests if r != url]} == {
            "fetched on opening": [], "script ran on clicking": [], "dialogs": [],
            "errors": [], "requests": []}
        assert page.evaluate("document.styleSheets.length") == 0
        assert "[object Object]" not in page.evaluate("document.documentElement.textContent")
    finally:
        page.close()


# -- two runs and the tree --------------------------------------------------------------

#: A method name that Graphviz would read as escapes, ending in a backslash.
METHOD = 'x\\N\\G\\l"&amp;\\'


def trace(sid: str, prompt: str) -> bytes:
    """A v2 wire log of one session ``sid`` whose prompt is ``prompt`` and which ends
    with a notification named METHOD."""
    return _wire([
        ("c2a", {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                 "params": {"protocolVersion": 2, "info": {"name": "c", "version": "1"},
                            "capabilities": {}}}),
        ("a2c", {"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": 2, "info": {"name": "a", "version": "1"},
            "capabilities": {"session": {}}}}),
        ("c2a", {"jsonrpc": "2.0", "id": 1, "method": "session/new",
                 "params": {"cwd": "/ws", "mcpServers": []}}),
        ("a2c", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": sid}}),
        ("c2a", {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
            "sessionId": sid, "prompt": [{"type": "text", "text": prompt}]}}),
        ("a2c", {"jsonrpc": "2.0", "id": 2, "result": {"messageId": "m1"}}),
        ("a2c", {"jsonrpc": "2.0", "method": METHOD, "params": {"sessionId": sid}}),
    ])


#: A file name of the same kind (no slash): the graph's title says it.
FILE_NAME = '<f>; graph [stylesheet="evil.css"]; q [URL="javascript:alert(3)"]; <g>\\'


def test_pair_graph_of_hostile_runs_holds_only_generated_statements(tmp_path):
    a = tmp_path / (FILE_NAME + "a")
    b = tmp_path / "b\\G.jsonl"
    a.write_bytes(trace(BREAK_OUT, PAYLOADS[3]))
    b.write_bytes(trace(BREAK_OUT, PAYLOADS[1]))
    p = align(a, b, "--format", "dot")
    assert p.returncode == 1, p.stderr
    g = read_back(p.stdout)
    assert drawn(g) == [printable(f"acp-align: A = {a}   B = {b}")]
    shown = [t for o in g["objects"] + g["edges"] for t in drawn(o)]
    assert any(t.endswith(f"← {printable(METHOD)}") for t in shown), shown
    prompt = orjson.dumps(PAYLOADS[3]).decode()  # the prompt as JSON, its escapes as text
    assert any(f"session/prompt {prompt}" in t for t in shown), "\n".join(shown)
    p = align(a, b, "--format", "svg")
    assert p.returncode == 1, p.stderr
    svg_texts(p.stdout)


def test_tree_of_hostile_runs_holds_only_generated_statements(tmp_path):
    runs = []
    for n, prompt in enumerate(PAYLOADS[:3]):
        path = tmp_path / f"r{n}.jsonl"
        path.write_bytes(trace(PAYLOADS[2], prompt))
        runs.append(path)
    p = align(*runs, "--session", PAYLOADS[2], "--format", "dot")
    assert p.returncode == 1, p.stderr
    g = read_back(p.stdout)
    legend = "   ".join(f"{'ABC'[n]} = {r} ({PAYLOADS[2]})" for n, r in enumerate(runs))
    assert drawn(g) == [f"acp-align: {legend}"]
    shown = [t for o in g["objects"] + g["edges"] for t in drawn(o)]
    assert any(t.endswith(f"← {printable(METHOD)}") for t in shown), shown
    p = align(*runs, "--session", PAYLOADS[2], "--format", "svg")
    assert p.returncode == 1, p.stderr
    svg_texts(p.stdout)


def test_the_dot_writer_refuses_attributes_and_values_it_does_not_generate():
    """Only ``label`` takes any text; an attribute the graphs do not write (URL, href,
    tooltip, stylesheet) or a value that is not plain is a bug, refused, never DOT."""
    for attrs in ({"URL": "x"}, {"href": "javascript:x"}, {"tooltip": "x"},
                  {"color": 'red" URL="javascript:x'}, {"style": "a]; b [c"},
                  {"penwidth": "2\\"}):
        g = nx.DiGraph(name="lineage")
        g.add_node("a", label="a", **attrs)
        with pytest.raises(ValueError):
            to_dot(g)
    g = nx.DiGraph(name="lineage")
    g.graph["graph"] = {"stylesheet": "http://127.0.0.1:9/x.css"}
    with pytest.raises(ValueError):
        to_dot(g)


# -- the DOT writer, fuzzed -------------------------------------------------------------

#: Text biased to what DOT and Graphviz's labels make something of.
hostile_text = st.text(
    st.sampled_from(list('\\"<>&;[]{}|:=-#\n\t\r N G E T H L l n r x') + ["\x00", "\u202e"])
    | st.characters(), max_size=24)


def _check(g: nx.DiGraph) -> None:
    """``to_dot(g)`` parses with the real dot into exactly g's nodes and edges, with
    only generated IDs and attributes, and every label drawn as written."""
    back = read_back(to_dot(g).encode("utf-8"))
    objects = back.get("objects", [])
    assert len(objects) == len(g)
    index = {node: i for i, node in enumerate(g)}
    for o, (_, data) in zip(objects, g.nodes(data=True), strict=True):
        assert drawn(o) == lines(data["label"])
    edges = back.get("edges", [])
    assert sorted((e["tail"], e["head"], tuple(drawn(e))) for e in edges) == sorted(
        (index[u], index[v], tuple(lines(d["label"]))) for u, v, d in g.edges(data=True))
    assert drawn(back) == lines(g.graph["graph"]["label"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(hostile_text, hostile_text, hostile_text, st.integers(0, 3),
                          st.integers(0, 2)), min_size=1, max_size=4))
def test_fuzz_lineage_of_any_session_ids(sessions):
    """Any strings as session IDs, agent names, prompts and call IDs: the lineage's DOT
    holds only what acp-align generates, each label drawn exactly as its strings."""
    streams = []
    ids = [s[0] for s in sessions]
    for n, (sid, agent, call, ref, resumes) in enumerate(sessions):
        other = ids[ref % len(ids)]
        header = {"type": "header", "sessionId": sid, "agent": {"name": agent},
                  "lineage": {"forkedFrom": other} if n % 2 else {"spawnedBy": other}}
        streams.append({"header": header, "source": call or "f.asr.jsonl", "records": n,
                        "subagents": [(agent, call)], "resumes": resumes,
                        "prompt": printable(call)})
    _check(lineage_graph(streams))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(hostile_text, hostile_text), min_size=1, max_size=5),
       st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), hostile_text), max_size=5),
       hostile_text)
def test_fuzz_any_labels_and_node_keys(nodes, edges, title):
    """Any strings as node keys and as node, edge and graph labels."""
    g = nx.DiGraph(name="divergence")
    g.graph["graph"] = {"label": title}
    for key, label in nodes:
        g.add_node(key, label=label)
    keys = list(g)
    for u, v, label in edges:
        g.add_edge(keys[u % len(keys)], keys[v % len(keys)], label=label)
    _check(g)

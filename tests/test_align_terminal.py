"""acp-align for a person: at a terminal, in a graph, and when interrupted.

Real terminals (a pty), the real Graphviz ``dot``, real signals.
"""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from acp_pipes.echo.client import client_session
from tests.conftest import record_lockstep, run_tool, tool_argv, tool_env


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("term")
    client = list(client_session(3))
    a, b = tmp / "a.wire.jsonl", tmp / "b.wire.jsonl"
    record_lockstep(client, a)
    record_lockstep([x.replace(b'"hello 2"', b'"bye 2"') for x in client], b)
    return {"a": a, "b": b, "tmp": tmp}


def on_a_terminal(*args: str, env: dict[str, str] | None = None) -> tuple[int, bytes]:
    """Run acp-align with its stdout on a pseudo-terminal: (exit status, what it showed)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(tool_argv("align", *args), stdout=slave, stderr=slave,
                         stdin=subprocess.DEVNULL, env={**tool_env(), **(env or {})})
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(timeout=60), out


def test_a_terminal_gets_the_diff_in_colour(runs):
    env = {k: v for k, v in tool_env().items() if k != "NO_COLOR"}
    status, shown = on_a_terminal(str(runs["a"]), str(runs["b"]), env=env)
    assert status == 1
    text = shown.decode()
    assert '\x1b[33m!→ session/prompt "hello 2"\x1b[0m' in text
    assert "\x1b[31m\"hello 2\"\x1b[0m → \x1b[32m\"bye 2\"\x1b[0m" in text
    assert '"op":' not in text  # not the ops records a pipe gets
    status, plain = on_a_terminal(str(runs["a"]), str(runs["b"]), env={"NO_COLOR": "1"})
    assert status == 1 and b"\x1b[" not in plain
    assert plain.replace(b"\r\n", b"\n").decode() == re.sub("\x1b\\[[0-9;]*m", "",
                                                             text).replace("\r\n", "\n")
    piped = run_tool("align", str(runs["a"]), str(runs["b"]))
    assert piped.stdout.startswith(b'{"op":"equal"') and b"\x1b" not in piped.stdout


def test_svg_is_not_written_onto_a_terminal(runs):
    status, shown = on_a_terminal(str(runs["a"]), str(runs["b"]), "--format", "svg")
    assert status == 2
    assert b"<svg" not in shown and b"-o FILE.svg" in shown
    out = runs["tmp"] / "d.svg"
    status, shown = on_a_terminal(str(runs["a"]), str(runs["b"]), "--format", "svg", "-o",
                                  str(out))
    assert status == 1 and out.read_bytes().rstrip().endswith(b"</svg>")


def many_places(tmp: Path, prompts: int) -> tuple[Path, Path]:
    """Two recordings that differ in every other prompt: one place each."""
    client = list(client_session(prompts))
    other = [line.replace(b'"hello ', b'"bye ') if n % 2 else line
             for n, line in enumerate(client)]
    a, b = tmp / f"many-a{prompts}.wire.jsonl", tmp / f"many-b{prompts}.wire.jsonl"
    record_lockstep(client, a)
    record_lockstep(other, b)
    return a, b


def boxes(svg: str) -> list[tuple[float, float, float, float]]:
    """The bounding box of every node's shape (polygon or ellipse) in dot's SVG."""
    out = []
    for node in re.findall(r'<g id="node\d+" class="node">(.*?)</g>', svg, re.S):
        m = re.search(r'points="([^"]+)"', node)
        if m:
            pts = [tuple(map(float, p.split(","))) for p in m.group(1).split()]
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            out.append((min(xs), min(ys), max(xs), max(ys)))
            continue
        m = re.search(r'<ellipse[^>]*cx="([-\d.]+)" cy="([-\d.]+)" rx="([\d.]+)" ry="([\d.]+)"',
                      node)
        if m:
            cx, cy, rx, ry = map(float, m.groups())
            out.append((cx - rx, cy - ry, cx + rx, cy + ry))
    return out


def test_svg_draws_a_bounded_graph_and_says_what_it_left_out(runs):
    a, b = many_places(runs["tmp"], 120)
    p = run_tool("align", str(a), str(b), "--format", "json")
    changed = orjson.loads(p.stdout)["counts"]["changed"]
    p = run_tool("align", str(a), str(b), "--format", "svg", timeout=60)
    assert p.returncode == 1, p.stderr
    svg = p.stdout.decode()
    assert len(boxes(svg)) <= 2 * 40 + 4  # 40 places, the shared runs between, start, rest, end
    places = int(re.search(r"the first 40 of ([\d,]+) places where they differ drawn",
                           svg).group(1).replace(",", ""))
    assert places > 40
    m = re.search(r"… ([\d,]+) more places where the runs differ, not drawn:", svg)
    assert m and int(m.group(1).replace(",", "")) == places - 40
    shown = len(re.findall(r"changed \((\d+)\)", svg))
    left = int(re.search(r"([\d,]+) changed, 0 only in A, 0 only in B", svg).group(1))
    assert shown <= 40 and left < changed


def test_first_divergence_is_said_once_and_overlaps_no_node(runs):
    p = run_tool("align", str(runs["a"]), str(runs["b"]), "--format", "svg")
    svg = p.stdout.decode()
    assert svg.count(">first divergence<") == 1
    m = re.search(r'<text[^>]*x="([-\d.]+)" y="([-\d.]+)"[^>]*font-size="([\d.]+)"[^>]*>'
                  r'first divergence</text>', svg)
    assert m, "the label is drawn as text"
    x, y, size = map(float, m.groups())
    width = len("first divergence") * size * 0.6
    # text-anchor middle: the label spans x +- width/2, and from y - size to y
    label = (x - width / 2, y - size, x + width / 2, y)
    for box in boxes(svg):
        apart = (label[2] < box[0] or box[2] < label[0] or label[3] < box[1]
                 or box[3] < label[1])
        assert apart, (label, box)


def children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def many_runs(tmp: Path) -> list[Path]:
    """800 runs, each parting from the others at one of 20 steps: a divergence tree that
    keeps dot busy for a good while (the two-run graph is bounded, so it never does)."""
    d = tmp / "many-runs"
    if not d.is_dir():
        d.mkdir()
        base = [orjson.dumps({"jsonrpc": "2.0", "method": "n", "params": {"i": i}})
                for i in range(20)]
        for r in range(800):
            seq = list(base)
            seq[r % 20] = orjson.dumps({"jsonrpc": "2.0", "method": "n", "params": {"i": -r}})
            (d / f"r{r:03}.jsonl").write_bytes(b"\n".join(seq) + b"\n")
    return sorted(d.glob("r*.jsonl"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP,
                                 signal.SIGKILL])
def test_killed_while_dot_runs_leaves_no_dot_behind(runs, sig):
    """The real dot is caught at work and stopped there (SIGSTOP), so it is still running
    whatever the machine's speed; then acp-align gets the signal. dot is gone as soon as
    acp-align is: killed and reaped on the way out, or (SIGKILL, which acp-align cannot
    catch) by the kernel (PR_SET_PDEATHSIG). Left behind, a stopped dot would stay."""
    p = subprocess.Popen(tool_argv("align", "--dir", "c2a", *map(str, many_runs(runs["tmp"])),
                                   "--format", "svg"),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=tool_env())
    dot = None
    # generous: on a loaded machine aligning the 800 runs comes first; and the watch
    # sleeps a little between looks, so it does not take the CPU acp-align needs
    deadline = time.monotonic() + 300
    while dot is None and time.monotonic() < deadline and p.poll() is None:
        for c in children(p.pid):
            if comm(c) == "dot":
                os.kill(c, signal.SIGSTOP)
                dot = c
                break
        else:
            time.sleep(0.001)
    assert dot is not None, f"dot never ran (acp-align: {p.poll()})"
    try:
        assert alive(dot)
        p.send_signal(sig)
        status = p.wait(timeout=30)
        if sig == signal.SIGKILL:  # the kernel sends dot its SIGKILL as acp-align dies:
            gone = time.monotonic() + 10  # soon, but not before wait() returns
            while alive(dot) and time.monotonic() < gone:
                time.sleep(0.01)
        assert not alive(dot), "dot outlived acp-align"
        assert status in (-sig, 130), status
        assert b"Traceback" not in p.stderr.read()
    finally:
        if alive(dot):
            os.kill(dot, signal.SIGKILL)


def test_a_lineage_of_thousands_of_sessions_draws_the_first_and_says_so(runs):
    out = []
    for i in range(600):
        head = {"type": "header", "asr": "1.0", "sessionId": f"s{i}"}
        if i:
            head["lineage"] = {"spawnedBy": {"session": f"s{(i - 1) // 3}",
                                             "evidence": "native_field"}}
        out.append(orjson.dumps(head))
    streams = runs["tmp"] / "lineage.asr.jsonl"
    streams.write_bytes(b"\n".join(out) + b"\n")
    p = run_tool("align", "--lineage", str(streams), "--format", "json")
    assert len(orjson.loads(p.stdout)["sessions"]) == 600
    p = run_tool("align", "--lineage", str(streams), "--format", "dot")
    dot = p.stdout.decode()
    assert "(the first 200 of 600 sessions drawn)" in dot
    assert "… 400 more sessions, not drawn" in dot
    assert "s199" in dot and '"s200"' not in dot and "s599" not in dot
    p = run_tool("align", "--lineage", str(streams), "--format", "svg", timeout=60)
    assert p.returncode == 0 and p.stdout.rstrip().endswith(b"</svg>")


def test_line_separators_in_a_diff_are_escaped(runs):
    """U+2028 and U+2029 end a line for some terminals, pagers and browsers: in the
    diff they are escapes, so one step stays one line."""
    client = list(client_session(3))
    odd = runs["tmp"] / "sep.wire.jsonl"
    record_lockstep([x.replace(b'"hello 2"', '"bye\u2028two\u2029"'.encode()) for x in client],
                    odd)
    p = run_tool("align", str(runs["a"]), str(odd), "--format", "diff")
    assert p.returncode == 1, p.stderr
    assert "\u2028".encode() not in p.stdout and "\u2029".encode() not in p.stdout
    assert b"bye\\u2028two\\u2029" in p.stdout

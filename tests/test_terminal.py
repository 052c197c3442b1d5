"""Terminal or pipe, decided once per run by the runner (acp_pipes/io/terminal.py)."""

from __future__ import annotations

import os
import re
import tty
from pathlib import Path

import orjson
import pytest

from acp_pipes.io.terminal import Terminal, printable
from tests.conftest import REPO, run_tool
from tests.ttys import run_tool_tty

COLOR_TOOLS = ["frame", "fold", "asr", "replay", "align"]


@pytest.fixture
def pty_and_pipe():
    leader, follower = os.openpty()
    tty.setraw(follower)
    r, w = os.pipe()
    out_tty, out_pipe = os.fdopen(follower, "wb"), os.fdopen(w, "wb")
    yield out_tty, out_pipe
    for f in (out_tty, out_pipe):
        f.close()
    os.close(leader)
    os.close(r)


@pytest.mark.parametrize(("when", "env", "tty_colour"), [
    ("auto", {}, True),
    ("auto", {"NO_COLOR": "1"}, False),
    ("auto", {"NO_COLOR": ""}, True),  # no-color.org: set and non-empty
    ("auto", {"TERM": "dumb"}, False),
    ("always", {"NO_COLOR": "1"}, True),  # a flag given for this run wins over NO_COLOR
    ("never", {}, False),
])
def test_decide_on_a_real_terminal_and_a_pipe(pty_and_pipe, when, env, tty_colour):
    out_tty, out_pipe = pty_and_pipe
    at_tty = Terminal.decide(out_tty, out_tty, when, env)
    assert at_tty.tty and at_tty.err_tty
    assert at_tty.color is tty_colour and at_tty.err_color is tty_colour
    piped = Terminal.decide(out_pipe, None, when, env)
    assert not piped.tty and not piped.err_tty
    assert piped.color is (when == "always") and piped.err_color is (when == "always")


def test_paint_only_with_colour():
    assert Terminal(color=True).paint("x", "removed") == "\x1b[31mx\x1b[0m"
    assert Terminal(color=False).paint("x", "removed") == "x"
    assert Terminal(err_color=True).paint_err("x", "warning") == "\x1b[33mx\x1b[0m"


def test_printable_escapes_what_would_drive_a_terminal():
    assert printable("a\x1b[2Jb\x07c\nd\re\tf\x7fg\x9bh") == \
        "a\\u001b[2Jb\\u0007c\\nd\\re\\tf\\u007fg\\u009bh"
    assert printable("ok \u202eevil") == "ok \\u202eevil"  # a bidi override reorders text
    assert printable("plain ütf-8 ✓") == "plain ütf-8 ✓"
    # line and paragraph separators: a new line for some terminals, pagers and browsers
    assert printable("one\u2028two\u2029three") == "one\\u2028two\\u2029three"


@pytest.mark.parametrize("name", COLOR_TOOLS)
def test_every_tool_reading_records_takes_color(name):
    r = run_tool(name, "--help")
    assert b"--color WHEN" in r.stdout
    bad = run_tool(name, "--color", "sometimes")
    assert bad.returncode == 2 and b"--color" in bad.stderr


@pytest.mark.parametrize("name", ["tee", "echo-agent"])
def test_no_color_option_where_stdout_is_a_protocol_stream(name):
    assert b"--color" not in run_tool(name, "--help").stdout


def test_no_tool_asks_isatty_on_its_own():
    """One decision per run: only acp_pipes/io/terminal.py asks whether a stream is a
    terminal; tools read ctx.term."""
    askers = sorted(str(p.relative_to(REPO)) for p in (REPO / "acp_pipes").rglob("*.py")
                    if "isatty(" in p.read_text(encoding="utf-8"))
    assert askers == ["acp_pipes/io/terminal.py"]


def _wire_with_hostile_strings() -> bytes:
    hdr = {"format": "acp-pipes/wire", "version": 1, "recorder": "acp-tee 0",
           "argv": ["agent\x1b]0;pwned\x07", "--x\nfake row"], "started": 0, "clock": "epoch",
           "host": {"cwd": "/tmp/\x1b[2J"}}
    msg = {"jsonrpc": "2.0", "id": 1, "method": "ses\x1b[31msion\x07/new\nnext", "params": {}}
    rec = {"seq": 0, "t": 1, "dir": "c2a", "raw": orjson.dumps(msg).decode()}
    return orjson.dumps(hdr) + b"\n" + orjson.dumps(rec) + b"\n"


def test_summary_table_escapes_recorded_control_characters(tmp_path: Path):
    p = tmp_path / "hostile.jsonl"
    p.write_bytes(_wire_with_hostile_strings())
    r = run_tool("frame", "--summary", "--format", "table", str(p))
    assert r.returncode == 0, r.stderr
    assert b"\x1b" not in r.stdout and b"\x07" not in r.stdout
    text = r.stdout.decode()
    assert "ses\\u001b[31msion\\u0007/new\\nnext" in text
    assert "agent\\u001b]0;pwned\\u0007 --x\\nfake row" in text
    assert "cwd=/tmp/\\u001b[2J" in text


def test_summary_at_a_terminal_is_a_table_and_json_to_o_file(tmp_path: Path):
    p = tmp_path / "hostile.jsonl"
    p.write_bytes(_wire_with_hostile_strings())
    shown = run_tool_tty("frame", "--summary", str(p))
    assert shown.returncode == 0 and shown.stdout.startswith(b"source ")
    assert b"\x1b" not in shown.stdout
    out = tmp_path / "summary.jsonl"
    to_file = run_tool_tty("frame", "--summary", str(p), "-o", str(out))
    assert to_file.returncode == 0 and to_file.stdout == b""
    assert orjson.loads(out.read_bytes())["frames"] == 1


# -- NO_COLOR, wherever colour appears -------------------------------------------------

#: Every place a tool writes colour, as a person meets it at a terminal: the tool, its
#: arguments ({a}, {b}: two recordings that differ), stdin, and the stream the colour is
#: on. A new place joins here (test_colour_comes_from_the_terminal_alone finds it).
COLOUR_SITES = {
    "acp-align's diff": ("align", ["{a}", "{b}"], b"", "stdout"),
    "acp-frame --validate's table": ("frame", ["--validate", "--dir", "c2a"],
                                     b'{"jsonrpc":"2.0","id":1,"method":"session/prompt",'
                                     b'"params":{}}\n', "stdout"),
    "acp-replay's reports": ("replay", ["{b}"], b"", "stderr"),
    "acp-frame's frames table": ("frame", ["{a}"], b"", "stdout"),
    "acp-fold's records, indented": ("fold", ["{a}"], b"", "stdout"),
    "acp-asr --validate's summary": ("asr", ["--validate", "{asr}"], b"", "stdout"),
}
#: The modules that paint, each shown at a terminal by a COLOUR_SITES entry.
PAINTERS = {"acp_pipes/align/render.py", "acp_pipes/cli/frame.py", "acp_pipes/cli/reports.py",
            "acp_pipes/cli/asr.py"}


@pytest.fixture(scope="module")
def differing(tmp_path_factory) -> dict[str, str]:
    """Two recordings of the echo agent that differ in one prompt."""
    from acp_pipes.echo.client import client_session
    from tests.conftest import record_lockstep

    tmp = tmp_path_factory.mktemp("colour")
    client = list(client_session(2))
    a, b = tmp / "a.wire.jsonl", tmp / "b.wire.jsonl"
    record_lockstep(client, a)
    record_lockstep([x.replace(b'"hello 1"', b'"bye 1"') for x in client], b)
    asr = tmp / "a.asr.jsonl"
    asr.write_bytes(run_tool("asr", str(a)).stdout)
    return {"a": str(a), "b": str(b), "asr": str(asr)}


@pytest.mark.parametrize("site", COLOUR_SITES)
def test_no_color_turns_off_every_colour(site, differing):
    """https://no-color.org: NO_COLOR set to anything non-empty means no colour, at every
    place a tool paints; a terminal without it gets colour there."""
    name, argv, stdin, stream = COLOUR_SITES[site]
    argv = [a.format(**differing) for a in argv]
    on_tty = {"out_tty": stream == "stdout", "err_tty": stream == "stderr"}
    shown = run_tool_tty(name, *argv, input=stdin, **on_tty)
    assert b"\x1b[" in getattr(shown, stream), (site, shown)
    plain = run_tool_tty(name, *argv, input=stdin, env={"NO_COLOR": "1"}, **on_tty)
    assert plain.returncode == shown.returncode
    assert b"\x1b" not in plain.stdout and b"\x1b" not in plain.stderr, (site, plain)
    assert getattr(plain, stream) == re.sub(rb"\x1b\[[0-9;]*m", b"", getattr(shown, stream))


def test_colour_comes_from_the_terminal_alone():
    """No module writes an escape sequence of its own: colour is Terminal.paint or
    paint_err, which honour NO_COLOR and --color; each module that paints has a
    COLOUR_SITES entry."""
    own_escapes, painters = [], set()
    for p in (REPO / "acp_pipes").rglob("*.py"):
        rel, text = str(p.relative_to(REPO)), p.read_text(encoding="utf-8")
        if rel == "acp_pipes/io/terminal.py":
            continue
        if re.search(r"\\x1b\[|\\033\[|\\u001b\[|\\e\[", text):
            own_escapes.append(rel)
        if re.search(r"\.paint(_err)?\b", text):
            painters.add(rel)
    assert own_escapes == []
    assert painters == PAINTERS

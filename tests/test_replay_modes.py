"""acp-replay's six modes, declared once (acp_pipes.cli.replay.MODES): every option given
to a mode that does not take it is refused (exit 2) before anything runs, the usage lines
are the table, and the two replays live in packages that import in one direction."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from acp_pipes.cli.replay import MODES, OPTIONS, SELECTORS, TOOL, UsageError, choose
from tests.conftest import REPO, record_lockstep, run_tool

VALUES = {"emit": "a2c", "match": "any", "pace": "recorded", "ignore": "/params/cwd",
          "remap_log": "ids.jsonl", "timeout": "3", "clock": "epoch", "session_id": "x",
          "session": "x",
          "report": "r.json", "wire": "w.jsonl", "protocol": "1",
          "listen": "ws://127.0.0.1:0/acp", "allow_origin": "http://localhost:8000",
          "allow_host": "acp.internal", "token_file": "token.txt", "max_agents": "2",
          "max_message": "1M", "header_timeout": "5", "idle_timeout": "60",
          "workspace": "ws", "preset": "p.json", "noise": "other.wire.jsonl"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    from acp_pipes.echo.client import client_session

    tmp = tmp_path_factory.mktemp("modes")
    wire = tmp / "wire.jsonl"
    record_lockstep(list(client_session(2)), wire)
    asr = run_tool("asr", str(wire))
    assert asr.returncode == 0, asr.stderr
    (tmp / "s.asr.jsonl").write_bytes(asr.stdout)
    return {"trace": str(wire), "stream": str(tmp / "s.asr.jsonl")}


def _argv(mode: str, inputs: dict[str, str]) -> list[str]:
    m = MODES[mode]
    path = inputs["trace" if m.reads == "trace" else "stream"]
    argv = [f"--{m.selector}"] if m.selector else []
    if m.selector == "emit":
        argv.append("a2c")
    argv += [path] * m.files[0]
    return argv + (["--", "agent"] if mode == "client" else [])


def _flag(dest: str) -> list[str]:
    flag, value, _ = OPTIONS[dest]
    return [flag, VALUES[dest]] if value else [flag]


def _choose(argv: list[str]) -> str:
    parser = TOOL.parser()
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    args.command = argv[cut + 1:]
    from acp_pipes.cli.replay import _sniff

    name, _, lines = choose(args, _sniff)
    if lines is not None:
        for _ in lines:  # close the file
            pass
    return name


def test_the_table_is_whole():
    assert len(MODES) == 6
    declared = set(OPTIONS)
    for mode in MODES.values():
        assert set(mode.options) <= declared
    used = {d for m in MODES.values() for d in m.options} | set(SELECTORS)
    assert used == declared  # no option belongs to no mode


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_is_chosen_with_each_of_its_options(mode, inputs):
    assert _choose(_argv(mode, inputs)) == mode
    for dest in MODES[mode].options:
        extra = _flag(dest)
        if dest == "remap_log":
            extra += ["--remap-ids"]
        assert _choose(extra + _argv(mode, inputs)) == mode, dest


@pytest.mark.parametrize("mode", MODES)
def test_an_option_of_another_mode_is_refused(mode, inputs):
    refused = [d for d in OPTIONS if d not in MODES[mode].options and d not in SELECTORS]
    assert refused
    for dest in refused:
        with pytest.raises(UsageError) as e:
            _choose(_flag(dest) + _argv(mode, inputs))
        assert OPTIONS[dest][0] in str(e.value), (dest, str(e.value))


def test_options_once_ignored_are_refused_through_the_executable(inputs):
    """Before the table these ran and ignored the option; now they say why, exit 2."""
    cases = [
        (["--session-id", "x", inputs["trace"]], b"--session-id is for ASR streams; "),
        (["--report", "r.json", inputs["trace"]], b"--report is for ASR streams; "),
        (["--wire", inputs["trace"], inputs["trace"]], b"--wire is for ASR streams; "),
        (["--compare", inputs["stream"], inputs["stream"], "--emit", "a2c"],
         b"--compare and --emit do not go together"),
        (["--timeout", "3", inputs["trace"]], b"--timeout is only used with --client"),
        (["--match", "any", inputs["stream"]], b"--match is for traces; "),
        (["--client", "--match", "any", inputs["trace"], "--", "agent"],
         b"--match does not go with --client"),
    ]
    for argv, message in cases:
        r = run_tool("replay", *argv, input=b"")
        assert r.returncode == 2 and r.stdout == b"", (argv, r.stderr)
        assert message in r.stderr, (argv, r.stderr)


def test_an_asr_stream_on_stdin_is_replayed(inputs):
    named = run_tool("replay", inputs["stream"])
    assert named.returncode == 0, named.stderr
    data = Path(inputs["stream"]).read_bytes()
    for argv in ([], ["-"]):
        piped = run_tool("replay", *argv, input=data)
        assert piped.returncode == 0, piped.stderr
        assert piped.stdout == named.stdout
    # a trace on stdin is still refused: stdin is the client's
    trace = Path(inputs["trace"]).read_bytes()
    r = run_tool("replay", "-", input=trace)
    assert r.returncode == 2 and b"TRACE cannot be stdin" in r.stderr


def test_the_usage_lines_are_the_table():
    r = run_tool("replay", "--help")
    usage = r.stdout.decode().split("\n\n")[0].removeprefix("usage: ")
    lines = [" ".join(u.split()) for u in re.split(r"\n {7}(?=acp-replay )", usage)]
    assert len(lines) == len(MODES)
    for line, mode in zip(lines, MODES.values(), strict=True):
        words = line.split()
        assert words[0] == "acp-replay"
        assert (words[1] == f"--{mode.selector}") == bool(mode.selector)
        assert line.endswith(" " + mode.operands)
        flags = {w.strip("[]") for w in words[1:] if w.startswith("[--")}
        assert flags == {OPTIONS[d][0] for d in mode.options}, line


# -- one direction of imports ----------------------------------------------------------


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def _package(name: str) -> list[Path]:
    return sorted((REPO / "acp_pipes" / name).glob("*.py"))


def test_the_replay_library_never_imports_the_cli_nor_the_other_replay():
    for path in _package("replay/asr") + [REPO / "acp_pipes" / "asr" / "reader.py"]:
        bad = {n for n in _imports(path)
               if n.startswith(("acp_pipes.cli", "acp_pipes.replay.trace"))}
        assert not bad, (path, bad)
    for path in _package("replay/trace"):
        bad = {n for n in _imports(path)
               if n.startswith(("acp_pipes.cli", "acp_pipes.replay.asr"))}
        assert not bad, (path, bad)


def test_the_mode_bodies_do_not_import_the_tool_back():
    for name in ("replay_asr", "replay_trace"):
        imported = _imports(REPO / "acp_pipes" / "cli" / f"{name}.py")
        assert not {n for n in imported if n.startswith("acp_pipes.cli.replay")
                    and not n.startswith(("acp_pipes.cli.replay_",))}, name

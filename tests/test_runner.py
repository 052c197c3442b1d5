"""The shared CLI runner: the same contract for every tool."""

from __future__ import annotations

import gzip
import subprocess
import sys

import pytest

from acp_pipes.cli.runner import Context, Tool, UsageError, run
from acp_pipes.errors import InputError
from acp_pipes.io.lines import parse_line
from tests.conftest import run_tool, tool_argv, tool_env

ALL_TOOLS = ["tee", "frame", "fold", "asr", "replay", "align", "view", "batch", "echo-agent",
             "export"]


def _echo_lines(args, ctx: Context) -> int:
    for line in ctx.lines():
        if line.raw == b"bad":
            parse_line(line)
        ctx.out.write(line.raw + b"\n")
    return 0


ECHO = Tool(prog="acp-test", summary="test tool", example="acp-test x.jsonl", run=_echo_lines)
_ECHO_SCRIPT = (
    "import sys\n"
    "from acp_pipes.cli.runner import run\n"
    "from tests.test_runner import ECHO\n"
    "run(ECHO)\n"
)


@pytest.mark.parametrize("name", ALL_TOOLS)
def test_every_tool_has_help_with_example_and_version(name):
    h = run_tool(name, "--help")
    assert h.returncode == 0, h.stderr
    text = h.stdout.decode()
    assert f"acp-{name}" in text and "example:" in text
    example = text.split("example:", 1)[1]
    assert f"acp-{name}" in example  # the example shows the tool itself in use
    v = run_tool(name, "--version")
    assert v.returncode == 0 and v.stdout.startswith(f"acp-{name} (acp-pipes) ".encode())


@pytest.mark.parametrize("name", ALL_TOOLS)
def test_unknown_option_is_usage_error(name):
    r = run_tool(name, "--no-such-option")
    assert r.returncode == 2
    assert r.stdout == b""
    assert b"usage:" in r.stderr


def test_files_stdin_and_gz(tmp_path, capsysbinary):
    a = tmp_path / "a.jsonl"
    a.write_bytes(b"1\n2\n")
    z = tmp_path / "b.jsonl.gz"
    z.write_bytes(gzip.compress(b"3\n"))
    out = tmp_path / "out.jsonl"
    assert ECHO.main([str(a), str(z), "-o", str(out)]) == 0
    assert out.read_bytes() == b"1\n2\n3\n"


def test_input_error_names_file_and_line_and_keeps_earlier_output(tmp_path):
    """On stdout, what came before the bad line reaches the pipe."""
    a = tmp_path / "a.jsonl"
    a.write_bytes(b"1\n2\nbad\n4\n")
    r = subprocess.run([sys.executable, "-c", _ECHO_SCRIPT, str(a)], capture_output=True,
                       env=tool_env())
    assert r.returncode == 2
    assert r.stdout == b"1\n2\n"
    assert f"acp-test: {a}:3: not JSON".encode() in r.stderr


def test_a_failed_run_leaves_the_old_o_file(tmp_path, capsys):
    a = tmp_path / "a.jsonl"
    a.write_bytes(b"1\n2\nbad\n4\n")
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"the previous output\n")
    assert ECHO.main([str(a), "-o", str(out)]) == 2
    assert out.read_bytes() == b"the previous output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "out.jsonl"]  # no .part
    assert f"{a}:3: not JSON" in capsys.readouterr().err


def test_missing_file_is_usage_error(tmp_path, capsys):
    assert ECHO.main([str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl: cannot open" in capsys.readouterr().err


def test_usage_error_exit_2(capsys):
    def boom(args, ctx):
        raise UsageError("expected frames, got an ASR stream")

    t = Tool(prog="acp-t", summary="s", example="acp-t", run=boom)
    assert t.main([]) == 2
    assert "acp-t: expected frames, got an ASR stream" in capsys.readouterr().err


def test_internal_error_has_no_traceback(capsys, monkeypatch):
    monkeypatch.delenv("ACP_PIPES_DEBUG", raising=False)

    def boom(args, ctx):
        raise RuntimeError("bug")

    t = Tool(prog="acp-t", summary="s", example="acp-t", run=boom)
    assert t.main([]) == 2
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: bug" in err and "Traceback" not in err


def test_input_error_str():
    assert str(InputError("f.jsonl", 7, "not JSON")) == "f.jsonl:7: not JSON"
    assert str(InputError("f.jsonl", 0, "cannot open")) == "f.jsonl: cannot open"


def test_broken_pipe_ends_quietly():
    """`acp-x big | head -1` ends with no traceback on stderr."""
    proc = subprocess.Popen(
        ["sh", "-c", " ".join(tool_argv("frame", "--help")) + " | head -c 1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=tool_env(),
    )
    out, err = proc.communicate(timeout=60)
    assert out == b"u"
    assert b"Traceback" not in err and b"BrokenPipe" not in err


@pytest.mark.parametrize("name", ["frame", "fold", "asr", "align", "view"])
def test_corrupt_gzip_body_names_the_file(tmp_path, name):
    """A .gz with a valid magic but a corrupt body is unusable input (exit 2) named by its
    file, never an internal error (zlib.error is not an OSError)."""
    body = gzip.compress(b'{"jsonrpc":"2.0","id":1,"method":"x"}\n' * 200)
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(body[:12] + bytes(b ^ 0x5A for b in body[12:]))
    args = [str(bad), str(bad)] if name == "align" else [str(bad)]
    r = run_tool(name, *args)
    assert r.returncode == 2, r.stderr
    assert f"{bad}".encode() in r.stderr and b"cannot read" in r.stderr
    assert b"internal error" not in r.stderr and b"Traceback" not in r.stderr


@pytest.mark.parametrize("argv0", ["-m", "/usr/bin/acp-frame", "script.py"])
def test_importing_the_cli_leaves_signals_alone(argv0):
    """Importing a tool's module changes no process state, whatever argv says: Ctrl-C is
    Python's KeyboardInterrupt, which the runner turns into exit 130."""
    code = (
        "import signal, sys\n"
        f"sys.argv = [{argv0!r}]\n"
        "import acp_pipes.cli.frame\n"
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, env=tool_env())
    assert r.stdout.strip() == b"True", r.stderr


def test_ctrl_c_in_a_running_tool_exits_130_after_flushing():
    code = (
        "import os, signal, sys\n"
        "from acp_pipes.cli.runner import Tool, run\n"
        "def body(args, ctx):\n"
        "    ctx.out.write(b'kept\\n')\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    return 0\n"
        "run(Tool(prog='acp-t', summary='s', example='acp-t', run=body, takes_files=False), [])\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, env=tool_env())
    assert (r.returncode, r.stdout) == (130, b"kept\n"), r.stderr
    assert b"Traceback" not in r.stderr


def test_ctrl_c_while_the_parser_is_built_exits_130():
    """A KeyboardInterrupt before the tool's own guard (building the parser) is 130, not a
    traceback, and goes through the tool's exit function (acp-tee ends its agent there)."""
    def configure(p):
        raise KeyboardInterrupt

    got = []
    tool = Tool(prog="acp-t", summary="s", example="acp-t", run=lambda a, c: 0,
                configure=configure)
    run(tool, [], exit=got.append)
    assert got == [130]


def test_context_warn_is_the_one_warn(capsys):
    """``ctx.warn`` takes the library's Warn order (source, line, message), so a tool
    passes it to a reader as it is; a caller using another order fails loudly."""
    ctx = Context(prog="acp-t", files=[], out=sys.stdout.buffer)
    ctx.warn("f.jsonl", 3, "not JSON, skipped")
    ctx.warn("f.jsonl", 0, "empty")
    err = capsys.readouterr().err
    assert err == "acp-t: f.jsonl:3: not JSON, skipped\nacp-t: f.jsonl: empty\n"
    assert ctx.warnings == 2
    with pytest.raises(TypeError):
        ctx.warn("not JSON", "f.jsonl", 3)  # type: ignore[arg-type]


def test_a_note_is_no_problem_of_the_input(capsys):
    """``ctx.note`` (a :data:`acp_pipes.errors.Note`) says a line about the run as
    ``prog: message`` and leaves the count of problems alone."""
    ctx = Context(prog="acp-t", files=[], out=sys.stdout.buffer)
    ctx.note("no -o given: recording to x.jsonl")
    assert capsys.readouterr().err == "acp-t: no -o given: recording to x.jsonl\n"
    assert ctx.warnings == 0


def _parameters(names: tuple[str, ...]):
    """``(module, function, parameter, annotation)`` for every parameter named in
    ``names`` of every function in the package (lambdas take none annotated)."""
    import ast
    from pathlib import Path

    import acp_pipes

    root = Path(acp_pipes.__file__).parent
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                for arg in a.posonlyargs + a.args + a.kwonlyargs:
                    if arg.arg in names:
                        yield (str(path.relative_to(root)), node.name, arg.arg,
                               ast.unparse(arg.annotation) if arg.annotation else None)


def test_a_warn_parameter_is_a_warn_and_a_note_parameter_a_note():
    """One signature each: a parameter named ``warn`` is the Warn ``(source, line,
    message)``, one named ``note`` the Note ``(message)``, so what a reader reports and
    what a tool says about its run cannot be passed for each other unseen."""
    found = list(_parameters(("warn", "note")))
    assert {p for _, _, p, _ in found} == {"warn", "note"}
    wrong = [f for f in found
             if f[3] not in {"warn": ("Warn", "Warn | None"), "note": ("Note", "Note | None")}[f[2]]]
    assert wrong == []


def test_no_tool_translates_a_library_error():
    """cli/ catches no ValueError or OSError to raise a UsageError of it: the library
    raises its own (OptionError, a file's error naming the file), said once by the
    runner. What cli/ still catches is a probe (is this a plain command?), not a
    translation."""
    import ast
    from pathlib import Path

    import acp_pipes.cli

    translating = []
    for path in sorted(Path(acp_pipes.cli.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ExceptHandler) or node.type is None:
                continue
            caught = ast.unparse(node.type)
            if "ValueError" not in caught and "OSError" not in caught:
                continue
            raised = [ast.unparse(n.exc) for b in node.body for n in ast.walk(b)
                      if isinstance(n, ast.Raise) and n.exc is not None]
            if any("Error(" in r for r in raised):
                translating.append((path.name, node.lineno, caught, raised))
    assert translating == []


def test_warn_is_defined_once():
    """One ``Warn`` (acp_pipes.errors): a module that takes a warn callback imports it,
    so the order (source, line, message) cannot drift apart in two definitions."""
    import re
    from pathlib import Path

    import acp_pipes

    root = Path(acp_pipes.__file__).parent
    defined = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                     if re.search(r"^Warn\b[^=\n]*=", p.read_text(), re.M))
    assert defined == ["errors.py"]


def _library_errors():
    from acp_pipes.align.dot import DotMissing
    from acp_pipes.errors import OptionError
    from acp_pipes.fold import ProtocolVersionError
    from acp_pipes.protocol.canonical import CanonicalError
    from acp_pipes.replay.asr.capture import NoCapture

    return [DotMissing, CanonicalError, ProtocolVersionError, NoCapture,
            InputError, UsageError, OptionError]


@pytest.mark.parametrize("error", _library_errors(), ids=lambda e: e.__name__)
def test_library_errors_share_one_base_caught_once_by_the_runner(error, capsys):
    """Every error the library raises for the user is an AcpPipesError: the runner says it
    as ``prog: message`` with exit 2, no tool translating it call site by call site."""
    from acp_pipes.errors import AcpPipesError

    assert issubclass(error, AcpPipesError)
    exc = error("f.jsonl", 4, "bad") if error is InputError else error("what went wrong")

    def boom(args, ctx):
        raise exc

    t = Tool(prog="acp-t", summary="s", example="acp-t", run=boom)
    assert t.main([]) == 2
    err = capsys.readouterr().err
    assert err == f"acp-t: {exc}\n" and "internal error" not in err

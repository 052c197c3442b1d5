"""Shared test fixtures: where things are, and running the real executables."""

from __future__ import annotations

import gc
import importlib
import importlib.util
import io
import os
import signal
import subprocess
import sys
import threading
import traceback
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]

#: Hypothesis profiles, chosen by ``ACP_PIPES_HYPOTHESIS``: ``ci`` runs every property
#: as many times as its test says (what CI and ``make test`` run); ``dev`` (the default
#: outside CI, ``make check``) at most :data:`DEV_EXAMPLES` times, to say quickly what
#: broke. Loaded here, before any test module is imported: ``@given`` reads it then.
DEV_EXAMPLES = 10
settings.register_profile("ci", settings.get_profile("default"))
settings.register_profile("dev", max_examples=DEV_EXAMPLES)
HYPOTHESIS = os.environ.get("ACP_PIPES_HYPOTHESIS") or (
    "ci" if os.environ.get("CI") == "true" else "dev")
settings.load_profile(HYPOTHESIS)

#: ``ACP_PIPES_TEST_PROCESS=1``: every :func:`run_tool` starts a process, as the suite
#: did before tools ran in it (run the suite both ways: the results are the same).
ALWAYS_PROCESS = os.environ.get("ACP_PIPES_TEST_PROCESS") == "1"
#: Tools that are always run as processes: acp-tee is a process in front of another
#: one (its own signals, descriptors, ``os._exit``); acp-batch forks a pool of workers.
PROCESS_TOOLS = frozenset({"tee", "batch"})
#: Arguments after which a tool serves or follows until signalled: a process.
PROCESS_ARGS = frozenset({"--serve", "--follow"})
#: The keywords a run in this process can honour; any other (``preexec_fn``,
#: ``stdout=``, ``env=`` ...) is about a process, and gets one.
IN_PROCESS_KW = frozenset({"cwd", "timeout", "check", "stdin"})


#: The real OTLP receiver's tests run in `make test-export` alone (Phoenix is a peer of
#: ~850 MB installed for that target): not collected elsewhere rather than skipped.
collect_ignore = [] if os.environ.get("ACP_PIPES_PHOENIX") else ["test_export_phoenix.py"]
#: tests/clients/*.py are the SDK peers the tests start as processes: no tests and no
#: doctests in them, and importing them (the SDK's schema) at every collection costs ~1 s.
collect_ignore_glob = ["clients/*.py"]

def skip_unless_installed(module: str) -> None:
    """At a test module's top: skip it when ``module`` cannot be imported, as
    ``pytest.importorskip`` does, without importing it at collection (the ACP SDK's
    schema takes ~1 s to import; the tests that need it import it as they run)."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"could not import {module!r}", allow_module_level=True)


def tool_argv(name: str, *args: str) -> list[str]:
    """argv running the real executable ``acp-<name>`` from this checkout."""
    return [sys.executable, "-m", f"acp_pipes.cli.{name.replace('-', '_')}", *args]


def tool_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


class _Process:
    """Whether the running test asked for real processes (``@pytest.mark.process``)."""

    wanted = False


def run_tool(
    name: str, *args: str, input: bytes | None = None, process: bool = False, **kw
) -> subprocess.CompletedProcess:
    """Run ``acp-<name> ARGS`` over real pipes; returns bytes out/err and the status.

    By default the tool's ``main`` runs in this process (no interpreter to start and
    no modules to import at each call) with file descriptors 0, 1 and 2 on pipes of
    their own, as a process started by :func:`subprocess.run` would have them, and
    what a run may change for the whole process put back after it (:class:`_State`). ``process=True`` (or the test's
    ``@pytest.mark.process``, or ``ACP_PIPES_TEST_PROCESS=1``) starts a real process:
    where processes are the point (signals, ``--serve``, ``--follow``, descriptors
    inherited, the installed entry point)."""
    if (process or _Process.wanted or ALWAYS_PROCESS or name in PROCESS_TOOLS
            or not IN_PROCESS_KW.issuperset(kw) or PROCESS_ARGS.intersection(args)
            or kw.get("stdin", subprocess.DEVNULL) is not subprocess.DEVNULL):
        return subprocess.run(
            tool_argv(name, *args), input=input, capture_output=True, env=tool_env(), **kw
        )
    return _in_process(name, list(args), input, **kw)


#: How Python sets up stdio in a process started by this one (the same locale).
_ENCODING = getattr(sys.__stdout__, "encoding", None) or "utf-8"
_ERRORS = getattr(sys.__stdout__, "errors", None) or "strict"


def _std(fd: int, name: str) -> io.TextIOWrapper:
    """``sys.stdin``/``stdout``/``stderr`` on ``fd`` as the interpreter makes them at
    start-up: buffered, stderr line-buffered and backslash-escaping what cannot be
    encoded."""
    raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
    raw.name = f"<{name}>"  # type: ignore[misc]
    buffered = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding=_ENCODING,
                            errors="backslashreplace" if fd == 2 else _ERRORS,
                            line_buffering=fd == 2)


def _drain(fd: int, into: bytearray) -> threading.Thread:
    def read() -> None:
        with open(fd, "rb", buffering=0, closefd=True) as f:
            while chunk := f.read(1 << 16):
                into.extend(chunk)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


def _feed(fd: int, data: bytes) -> threading.Thread:
    def write() -> None:
        with open(fd, "wb", buffering=0, closefd=True) as f:
            view = memoryview(data)
            try:
                while view:
                    view = view[f.write(view):]
            except BrokenPipeError:  # the tool read no further (as subprocess.run allows)
                pass

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


class _State:
    """What a tool run in this process may change for the whole process, taken before
    the run and put back after it: the environment, working directory, umask, signal
    handlers and mask, the collector's settings, ``sys.argv``."""

    SIGNALS = sorted(set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP})

    def __init__(self) -> None:
        self.environ = dict(os.environ)
        self.cwd = os.getcwd()
        self.umask = os.umask(0o022)
        os.umask(self.umask)
        self.handlers = {s: signal.getsignal(s) for s in self.SIGNALS}
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        self.gc = (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count())
        self.argv = sys.argv

    def restore(self) -> None:
        if os.environ != self.environ:
            os.environ.clear()
            os.environ.update(self.environ)
        os.chdir(self.cwd)
        os.umask(self.umask)
        for s, handler in self.handlers.items():
            if handler is not None and signal.getsignal(s) is not handler:
                signal.signal(s, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)
        enabled, threshold, frozen = self.gc
        gc.enable() if enabled else gc.disable()
        gc.set_threshold(*threshold)
        if gc.get_freeze_count() and not frozen:
            gc.unfreeze()
        sys.argv = self.argv


def _in_process(name: str, argv: list[str], input: bytes | None, cwd=None, timeout=None,
                check: bool = False, stdin=None) -> subprocess.CompletedProcess:
    """``acp-<name> ARGV`` through its ``main`` in this process, fds 0-2 on pipes."""
    module = importlib.import_module(f"acp_pipes.cli.{name.replace('-', '_')}")
    out, err = bytearray(), bytearray()
    for stream in (sys.stdout, sys.stderr):  # what the test wrote goes where it was going
        if stream is not None:
            stream.flush()
    state = _State()
    saved = {fd: os.dup(fd) for fd in (0, 1, 2)}
    streams = (sys.stdin, sys.stdout, sys.stderr)
    threads = []
    try:
        if input is not None:
            r, w = os.pipe()
            os.dup2(r, 0)
            os.close(r)
            threads.append(_feed(w, input))
        elif stdin is subprocess.DEVNULL:
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
        for fd, into in ((1, out), (2, err)):
            r, w = os.pipe()
            os.dup2(w, fd)
            os.close(w)
            threads.append(_drain(r, into))
        sys.stdin, sys.stdout, sys.stderr = _std(0, "stdin"), _std(1, "stdout"), _std(2, "stderr")
        os.environ.update(tool_env())
        if cwd is not None:
            os.chdir(cwd)
        sys.argv = [module.__file__, *argv]
        try:
            status = module.TOOL.main(argv)
        except SystemExit as e:  # as the interpreter ends on it
            status = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        except Exception:  # an uncaught exception: a traceback and 1, as in a process
            traceback.print_exc()
            status = 1
        for stream in (sys.stdout, sys.stderr):  # the interpreter's flush at exit
            try:
                stream.flush()
            except (OSError, ValueError):
                status = 120 if stream is sys.stdout else status
    finally:
        sys.stdin, sys.stdout, sys.stderr = streams
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        state.restore()
        for t in threads:
            t.join(timeout)
    if any(t.is_alive() for t in threads):  # a child the tool started still holds a pipe
        raise subprocess.TimeoutExpired(tool_argv(name, *argv), timeout, bytes(out), bytes(err))
    result = subprocess.CompletedProcess(tool_argv(name, *argv), status, bytes(out), bytes(err))
    if check:
        result.check_returncode()
    return result


def pytest_report_header(config) -> str:
    return f"hypothesis profile: {HYPOTHESIS} (ACP_PIPES_HYPOTHESIS=ci|dev)"


def pytest_collection_modifyitems(config, items) -> None:
    """Under ``dev``, a property whose own ``@settings`` asks for more examples runs
    :data:`DEV_EXAMPLES` (an explicit count overrides any profile: this is the one
    place it is lowered; Hypothesis keeps a test's settings in this attribute)."""
    if HYPOTHESIS != "dev":
        return
    for item in items:
        test = getattr(item, "obj", None)
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if own is not None and own.max_examples > DEV_EXAMPLES:
            test._hypothesis_internal_use_settings = settings(own, max_examples=DEV_EXAMPLES)


@pytest.fixture(autouse=True)
def _processes_where_marked(request):
    """``@pytest.mark.process``: every :func:`run_tool` in the test starts a process."""
    _Process.wanted = request.node.get_closest_marker("process") is not None
    yield
    _Process.wanted = False


def record_lockstep(client: list[bytes], wire: Path, agent: list[str] | None = None,
                    tmp: Path | None = None) -> bytes:
    """Record ``client`` (frames without LF) against ``agent`` (default: the echo agent)
    with the real ``acp-tee --script``, which sends each frame once the agent has answered
    the previous one, as an editor waits: two recordings of a deterministic session
    interleave the directions identically. Returns what the client received."""
    script = (tmp or wire.parent) / (wire.name + ".client.jsonl")
    script.write_bytes(b"".join(line + b"\n" for line in client))
    proc = subprocess.run(
        tool_argv("tee", "--script", str(script), "-o", str(wire), "--clock", "epoch",
                  "--no-host", "--", *(agent or tool_argv("echo-agent"))),
        capture_output=True, env=tool_env(), timeout=120, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr.decode(errors="replace")
    return proc.stdout


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def cut_asr_stream(tmp_path_factory) -> dict:
    """An echo session recorded by acp-tee, made an ASR stream by acp-asr, gzipped and
    cut in half; with the whole stream and the lines before the cut (what gunzip can
    still give, whole lines only)."""
    import gzip
    import zlib

    from acp_pipes.echo.client import client_session

    tmp = tmp_path_factory.mktemp("cut")
    wire = tmp / "echo.wire.jsonl"
    record_lockstep(list(client_session(40)), wire)
    asr = run_tool("asr", str(wire))
    assert asr.returncode == 0, asr.stderr
    whole = tmp / "whole.asr.jsonl"
    whole.write_bytes(asr.stdout)
    packed = gzip.compress(asr.stdout)
    cut = tmp / "cut.asr.jsonl.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    readable = zlib.decompressobj(wbits=31).decompress(cut.read_bytes())
    before = readable[: readable.rindex(b"\n") + 1]
    assert 20 < before.count(b"\n") < asr.stdout.count(b"\n")
    prefix = tmp / "prefix.asr.jsonl"
    prefix.write_bytes(before)
    return {"whole": whole, "cut": cut, "prefix": prefix, "lines": before.count(b"\n")}


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium, headless, under Playwright (tests/view_browser.py)."""
    from playwright.sync_api import sync_playwright

    from tests.view_browser import FLAGS, chromium_path

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), args=FLAGS)
        yield b
        b.close()


# acp-pipes built into a wheel and installed in a fresh environment, once a run
# (tests/installed.py): for the modules that test it as a user has it
from tests.installed import venv, wheel  # noqa: E402, F401

"""Cassettes: an ACP session recorded once through acp-tee and played back by acp-replay
in place of the agent, so a client's tests run without the agent or its model; and the
other direction, an agent re-driven from a cassette (``acp-replay --client``).

This is what :mod:`acp_pipes.testing.pytest_plugin` runs; it knows nothing of pytest, so any
test runner can use it. The commands it builds are the real acp-tee and acp-replay,
started by the client under test as its agent (playing goes through
:mod:`acp_pipes.cli.cassette`), and what they report is read back from files (a client's
SDK keeps its agent's stderr to itself).

- :class:`Recording`: the command that records AGENT through ``acp-tee`` into a partial
  file beside the cassette; :meth:`Recording.finish` moves it into place, atomically, only
  when the test passed and the recording is whole (the agent exited: the end record).
- :class:`Playback`: the command that plays the cassette as the agent (``acp-replay
  CASSETTE`` under :mod:`acp_pipes.cli.cassette`, which keeps its reports and exit
  status in a directory);
  :meth:`Playback.finish` says what diverged, readably.
- :func:`client_replay`: ``acp-replay --client CASSETTE -- AGENT``, its divergence as text.
"""

from __future__ import annotations

import functools
import gzip
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from acp_pipes.replay.reports import readable

__all__ = ["RECORD_MODES", "CassetteError", "ClientReplay", "Divergence", "Playback",
           "Recording", "client_replay", "default_path", "plan", "tool_argv"]

#: ``once``: play the cassette when it exists, else record it; ``none``: play only (a
#: missing cassette is an error); ``all``: record every time, replacing the cassette.
RECORD_MODES = ("once", "none", "all")
SUFFIX = ".wire.jsonl"
#: How long a finished test waits for the agent command it started to exit (a client
#: that closed the agent's stdin as the test ended, and acp-tee writing the end record).
EXIT_WAIT = 10.0


class CassetteError(Exception):
    """A cassette that cannot be used as asked; the message says why and what to do."""


class Divergence(AssertionError):
    """The session went otherwise than its cassette: raised in the test that ran it, its
    message the difference as acp-replay reports it (the recorded and the live frame,
    the pointers that differ, its kind), as VCR.py raises
    ``CannotOverwriteExistingCassetteException`` in a test whose request its cassette
    does not hold."""


def default_path(test_file: str | os.PathLike, test_name: str) -> Path:
    """``cassettes/<module>/<test>.wire.jsonl`` beside the test file. Characters other than
    letters, digits and ``._-`` in the test's name (a parametrized ``[id]``, a class's
    ``::``) become ``_``.

    >>> default_path("/src/tests/test_editor.py", "TestChat::test_hello[v2]").as_posix()
    '/src/tests/cassettes/test_editor/TestChat_test_hello_v2_.wire.jsonl'
    """
    test_file = Path(test_file)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", test_name.replace("::", "_"))
    return test_file.parent / "cassettes" / test_file.stem / (name + SUFFIX)


def plan(cassette: Path, mode: str) -> str:
    """``record`` or ``play``: what a test does with ``cassette`` in record ``mode``."""
    if mode not in RECORD_MODES:
        raise CassetteError(f"record mode {mode!r}: expected one of {', '.join(RECORD_MODES)}")
    if mode == "all":
        return "record"
    if cassette.is_file():
        return "play"
    if mode == "none":
        raise CassetteError(f"no cassette {cassette}: record mode 'none' only plays; "
                            "record it with --acp-record-mode once")
    return "record"


@functools.cache
def _importable() -> bool:
    """Whether ``python -m acp_pipes...`` imports this very package whatever environment
    the client gives its agent (an SDK may start it with a few variables only, no
    PYTHONPATH): asked once, of this Python in isolated mode (``-I``)."""
    import acp_pipes

    here = str(Path(acp_pipes.__file__).resolve())
    try:
        got = subprocess.run(
            [sys.executable, "-I", "-c", "import acp_pipes, pathlib; "
             "print(pathlib.Path(acp_pipes.__file__).resolve())"],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return False
    return got.returncode == 0 and got.stdout.strip() == here


def tool_argv(module: str, *args: str) -> list[str]:
    """The command running ``acp_pipes.<module>`` with this Python: ``python -m`` when the
    package is installed where this Python finds it unaided (any venv it is installed
    in); otherwise one that puts this package's directory first on the path (a checkout
    on PYTHONPATH, a conftest's ``sys.path``), so the command runs the code the test runs
    in any environment the client starts it with."""
    if _importable():
        return [sys.executable, "-m", f"acp_pipes.{module}", *args]
    import acp_pipes

    root = str(Path(acp_pipes.__file__).resolve().parents[1])
    boot = (f"import sys, runpy; sys.path.insert(0, {root!r}); "
            f"runpy.run_module('acp_pipes.{module}', run_name='__main__', alter_sys=True)")
    return [sys.executable, "-c", boot, *args]


def _last_record(path: Path) -> dict[str, Any] | None:
    """The last whole line of a wire log, parsed (None: none, or not JSON)."""
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                data = f.read()
        else:
            with open(path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(0, size - (1 << 16)))
                data = f.read()
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    lines = data.rstrip(b"\n").rsplit(b"\n", 1)
    try:
        value = orjson.loads(lines[-1])
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _wait(done, wait: float) -> bool:
    deadline = time.monotonic() + wait
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


@dataclass
class Recording:
    """Record an agent into ``cassette`` through the real acp-tee. It writes to a partial
    file beside the cassette (same directory, so the final move is atomic): a failed or
    unfinished test leaves the cassette as it was."""

    cassette: Path
    tee_args: Sequence[str] = ("--no-host",)

    @property
    def partial(self) -> Path:
        return self.cassette.with_name(f".{os.getpid()}.partial.{self.cassette.name}")

    def argv(self, agent: Sequence[str]) -> list[str]:
        if not agent:
            raise CassetteError("no agent command to record")
        self.cassette.parent.mkdir(parents=True, exist_ok=True)
        self.partial.unlink(missing_ok=True)
        return tool_argv("cli.tee", "-o", str(self.partial), *self.tee_args, "--", *agent)

    def finish(self, passed: bool, wait: float = EXIT_WAIT) -> list[str]:
        """Move the recording into place when ``passed`` and whole; the problems, if any.
        A recording never started (the test did not run the command) writes nothing."""
        partial = self.partial
        if not partial.exists():
            return []

        def ended() -> bool:
            last = _last_record(partial)
            return last is not None and last.get("end") is True

        whole = _wait(ended, wait) if passed else ended()
        if not passed:
            partial.unlink(missing_ok=True)
            return []
        if not whole:
            partial.unlink(missing_ok=True)
            return [f"the agent recorded for {self.cassette} was still running {wait:g} s "
                    "after the test: the client must close it (end its stdin) before the "
                    "test ends; the cassette was not written"]
        os.replace(partial, self.cassette)
        return []


@dataclass
class Playback:
    """Play ``cassette`` as the agent: the command is acp-replay under :func:`main`, which
    keeps each launch's stderr and exit status in ``reports`` (a directory)."""

    cassette: Path
    reports: Path
    replay_args: Sequence[str] = ()
    said: set[Path] = field(default_factory=set, init=False, repr=False)  # launches told

    def argv(self) -> list[str]:
        self.reports.mkdir(parents=True, exist_ok=True)
        return tool_argv("cli.cassette", "play", str(self.reports), "--", str(self.cassette),
                         *self.replay_args)

    def finish(self, wait: float = EXIT_WAIT) -> list[str]:
        """What each launch of the command reported: one readable text per launch that
        diverged or failed, empty when every one played the cassette through. Each
        launch is said once (:meth:`stopped` may have said it already)."""
        problems = []
        for err in self._launches():
            status_file = err.with_suffix(".status")
            if not _wait(status_file.exists, wait):
                problems.append(f"acp-replay playing {self.cassette} was still running "
                                f"{wait:g} s after the test: the client must close it (end "
                                "its stdin) before the test ends")
                continue
            problems += self._said(err)
        return problems

    def stopped(self, wait: float = 0.0) -> list[str]:
        """What the launches that have ended reported (those still playing are left to
        :meth:`finish`): a launch that diverged ends at once, so the test that ran it can
        fail with the difference. ``wait``: how long to give one still running to end."""
        problems = []
        for err in self._launches():
            status_file = err.with_suffix(".status")
            if status_file.exists() or (wait and _wait(status_file.exists, wait)):
                problems += self._said(err)
        return problems

    def _launches(self) -> list[Path]:
        return [e for e in sorted(self.reports.glob("*.stderr")) if e not in self.said]

    def _said(self, err: Path) -> list[str]:
        self.said.add(err)
        status = int(err.with_suffix(".status").read_text() or 2)
        text = _readable(err.read_bytes())
        if status != 0 or text:
            return [f"acp-replay playing {self.cassette} as the agent stopped "
                    f"(exit {status}):\n" + (text or "(nothing on stderr)")]
        return []


def _readable(stderr: bytes) -> str:
    """acp-replay's stderr for a person: each JSON report as readable lines (headline,
    then one indented line per detail), any other line as it is."""
    out: list[str] = []
    for line in stderr.decode("utf-8", "replace").splitlines():
        event = None
        if line.startswith("{"):
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                pass
        if isinstance(event, dict) and "event" in event:
            head, *rest = readable(event)
            out.append(head)
            out += ["  " + x for x in rest]
        elif line.strip():
            out.append(line)
    return "\n".join(out)


@dataclass
class ClientReplay:
    """What :func:`client_replay` did: ``returncode`` (0 the run equals the recording, 1
    it diverged, 2 unusable input), ``log`` (the new run's wire log), ``reports`` (the
    JSON reports), ``problem`` (the divergence as text; empty when it passed)."""

    returncode: int
    log: Path
    reports: list[dict[str, Any]] = field(default_factory=list)
    problem: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def client_replay(trace: str | os.PathLike, agent: Sequence[str], log: str | os.PathLike, *,
                  ignore: Sequence[str] = (), timeout: float | None = None,
                  workspace: str | os.PathLike | None = None,
                  noise: Sequence[str | os.PathLike] = (),
                  args: Sequence[str] = (), env: dict[str, str] | None = None) -> ClientReplay:
    """Re-drive ``agent`` from ``trace`` with ``acp-replay --client`` (the model of the same
    session, docs/sameness.md), the run's wire log to ``log``; ``ignore``: JSON pointers
    not compared; ``workspace``: where the recorded client's file writes are performed
    (``--workspace``); ``noise``: other recordings of the same script (``--noise``);
    ``args``: more acp-replay options."""
    trace, log = Path(trace), Path(log)
    if not trace.is_file():
        raise CassetteError(f"no cassette {trace} to re-drive the agent with")
    if not agent:
        raise CassetteError("no agent command to re-drive")
    argv = tool_argv("cli.replay", "--client", str(trace), "-o", str(log))
    for pointer in ignore:
        argv += ["--ignore", pointer]
    if timeout is not None:
        argv += ["--timeout", f"{timeout:g}"]
    if workspace is not None:
        argv += ["--workspace", str(workspace)]
    for other in noise:
        argv += ["--noise", str(other)]
    argv += [*args, "--", *agent]
    got = subprocess.run(argv, capture_output=True, env=env, stdin=subprocess.DEVNULL)
    reports = []
    for line in got.stderr.splitlines():
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict) and "event" in value:
            reports.append(value)
    problem = ""
    if got.returncode != 0:
        said = "the agent's frames differ from the cassette" if got.returncode == 1 else \
            "the cassette or the agent could not be used"
        problem = (f"acp-replay --client {trace} -- {' '.join(agent)} (exit "
                   f"{got.returncode}: {said}):\n"
                   + (_readable(got.stderr) or "(nothing on stderr)"))
        if log.is_file():
            problem += f"\nthe run's wire log: {log}"
    return ClientReplay(got.returncode, log, reports, problem)

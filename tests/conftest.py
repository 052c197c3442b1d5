"""Shared test fixtures: where things are, and running the real executables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def tool_argv(name: str, *args: str) -> list[str]:
    """argv running the real executable ``acp-<name>`` from this checkout."""
    return [sys.executable, "-m", f"acp_pipes.cli.{name.replace('-', '_')}", *args]


def tool_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_tool(
    name: str, *args: str, input: bytes | None = None, **kw
) -> subprocess.CompletedProcess:
    """Run ``acp-<name> ARGS`` as a subprocess over real pipes; returns bytes out/err."""
    return subprocess.run(
        tool_argv(name, *args), input=input, capture_output=True, env=tool_env(), **kw
    )


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

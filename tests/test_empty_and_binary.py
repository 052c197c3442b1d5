"""One answer of every tool to an input it cannot use at all: an empty file, and a file
that is not UTF-8 JSONL (2 MB of random bytes). Each is said in one line naming the
input, exit 2, before anything is written; repeated problems later in a file are said
at most 20 times, then counted (acp_pipes.io.lines.judge_start, acp_pipes.cli.runner.Said).
"""

from __future__ import annotations

import gzip
import random
import re
from pathlib import Path

import orjson
import pytest

from tests.conftest import REPO, record_lockstep, run_tool, tool_argv

CLIENT = REPO / "examples" / "hello" / "client.jsonl"

#: Every executable, with the arguments that make it read ``{f}`` as its input ({d}: a
#: scratch directory for what it writes). acp-echo-agent reads its client on stdin.
READERS = {
    "frame": ["{f}"],
    "frame --summary": ["--summary", "{f}"],
    "frame --validate": ["--validate", "{f}"],
    "fold": ["{f}"],
    "asr": ["{f}"],
    "asr -o": ["-o", "{d}/streams", "{f}"],
    "asr --validate": ["--validate", "{f}"],
    "replay": ["{f}"],
    "replay --serve": ["--serve", "{f}"],
    "replay --compare": ["--compare", "{f}", "{f}"],
    "replay --client": ["--client", "{f}", "--", *tool_argv("echo-agent")],
    "align": ["--dir", "c2a", str(CLIENT), "{f}"],
    "view": ["{f}", "-o", "{d}/page.html"],
    "export otlp": ["otlp", "{f}"],
    "export agent-trail": ["agent-trail", "{f}", "-o", "{d}/trails"],
    "tee --script": ["--script", "{f}", "-o", "{d}/wire.jsonl", "--", *tool_argv("echo-agent")],
    "batch": ["asr", "{f}", "-o", "{d}/batch"],
    "echo-agent": [],
}


def test_every_executable_is_here():
    scripts = set(re.findall(r'^acp-([\w-]+) = "', (REPO / "pyproject.toml").read_text(), re.M))
    assert {case.split()[0] for case in READERS} == scripts


def _run(case: str, path: Path, tmp: Path):
    name = case.split()[0]
    args = [a.format(f=path, d=tmp) for a in READERS[case]]
    if name == "echo-agent":  # an agent: its input is its client, on stdin
        return run_tool(name, input=path.read_bytes(), timeout=120)
    return run_tool(name, *args, input=b"", timeout=120)


def _said(case: str, path: Path, message: str) -> str:
    source = "stdin" if case == "echo-agent" else str(path)
    return f"acp-{case.split()[0]}: {source}: {message}\n"


def _first_bad_byte(data: bytes) -> int:
    """Where the first line that is not blank stops being UTF-8 text without NUL."""
    start = len(data) - len(data.lstrip(b" \t\r\n"))
    line = data[start:].split(b"\n", 1)[0]
    try:
        line.decode("utf-8")
        bad = len(line)
    except UnicodeDecodeError as e:
        bad = e.start
    nul = line.find(b"\0")
    return start + (bad if nul < 0 else min(bad, nul))


@pytest.fixture(scope="module")
def wire(tmp_path_factory) -> Path:
    """The bundled session, recorded by acp-tee."""
    path = tmp_path_factory.mktemp("wire") / "wire.jsonl"
    record_lockstep(CLIENT.read_bytes().splitlines(), path)
    return path


@pytest.fixture(scope="module")
def junk(tmp_path_factory) -> Path:
    """2 MB of random bytes (the same every run)."""
    path = tmp_path_factory.mktemp("junk") / "random.bin"
    path.write_bytes(random.Random(38).randbytes(2_000_000))
    return path


@pytest.mark.parametrize("case", READERS)
def test_an_empty_input_is_said_in_one_line(case, tmp_path):
    """Exit 2 and ``prog: FILE: empty input (0 bytes)``; nothing on stdout. An agent's
    client that sends nothing has ended its session (acp-echo-agent: exit 0, silent);
    acp-batch says it as every tool does, and counts the input failed (its exit 1)."""
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    r = _run(case, empty, tmp_path)
    if case == "echo-agent":
        assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
        return
    message = _said(case, empty, "empty input (0 bytes)")
    if case == "batch":
        assert r.returncode == 1
        assert r.stderr.decode().splitlines(True)[0] == message
        return
    assert (r.returncode, r.stderr.decode(), r.stdout) == (2, message, b"")


@pytest.mark.parametrize("case", READERS)
def test_a_binary_input_is_said_in_one_line_with_its_byte_offset(case, junk, tmp_path):
    """Exit 2 and ``prog: FILE: not UTF-8 JSONL: byte N ...``: one line, no traceback, and
    nothing written (acp-batch: the same line, and the input counted failed, exit 1)."""
    r = _run(case, junk, tmp_path)
    data = junk.read_bytes()
    at = _first_bad_byte(data)
    what = "is a NUL" if data[at] == 0 else f"(0x{data[at]:02x}) is not UTF-8"
    message = _said(case, junk, f"not UTF-8 JSONL: byte {at} {what}")
    if case == "batch":
        lines = r.stderr.decode().splitlines(True)
        assert (r.returncode, lines[0], len(lines)) == (1, message, 3)
        return
    assert (r.returncode, r.stderr.decode(), r.stdout) == (2, message, b"")


def test_the_judgement_is_the_same_through_gzip_stdin_and_blank_lines(tmp_path):
    """An empty .gz is an empty input; stdin is named stdin; blank lines before the junk
    do not hide it (the offset counts them)."""
    gz = tmp_path / "empty.jsonl.gz"
    gz.write_bytes(gzip.compress(b""))
    r = run_tool("asr", str(gz))
    assert (r.returncode, r.stderr) == (2, f"acp-asr: {gz}: empty input (0 bytes)\n".encode())
    r = run_tool("fold", input=b"")
    assert (r.returncode, r.stderr) == (2, b"acp-fold: stdin: empty input (0 bytes)\n")
    r = run_tool("frame", input=b"\n\n  \n\x00\x01")
    assert (r.returncode, r.stderr) == (2, b"acp-frame: stdin: not UTF-8 JSONL: byte 5 is a NUL\n")


def test_junk_after_a_good_start_is_said_twenty_times_then_counted(wire, junk, tmp_path):
    """A wire log with random bytes after its records: the records are framed as without
    them, each junk line is skipped, the first 20 said with the byte of the line that is
    not UTF-8, then one line says the rest are counted, and the count ends the run."""
    mixed = tmp_path / "mixed.jsonl"
    tail = junk.read_bytes()[:20_000]
    mixed.write_bytes(wire.read_bytes() + tail)
    bad = sum(1 for line in tail.split(b"\n") if line.strip())
    r = run_tool("frame", str(mixed))
    assert r.returncode == 0
    assert r.stdout == run_tool("frame", str(wire)).stdout.replace(
        str(wire).encode(), str(mixed).encode())
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 22, lines
    assert all(ln.startswith(f"acp-frame: {mixed}:") for ln in lines)
    assert sum("is not UTF-8" in ln for ln in lines[:20]) >= 10
    assert lines[20] == f"acp-frame: {mixed}: more than 20 problems: the rest are counted, not shown"
    assert lines[21] == f"acp-frame: {mixed}: {bad:,} problems in all, the first 20 shown"


def test_asr_validate_counts_the_problems_it_does_not_show(wire, junk, tmp_path):
    asr = tmp_path / "s.asr.jsonl"
    asr.write_bytes(run_tool("asr", str(wire)).stdout + junk.read_bytes()[:20_000])
    r = run_tool("asr", "--validate", str(asr))
    assert r.returncode == 1
    lines = r.stderr.decode().splitlines()
    (summary,) = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert len(lines) == 22 and summary["problems"] > 20 and not summary["valid"]
    assert lines[-1] == (f"acp-asr: {asr}: {summary['problems']:,} problems in all, the "
                         "first 20 shown")

"""No reader holds a line longer than ``--max-line-bytes`` (default 64 MiB): such a line
ends the input there, as a read error does (what came before it is kept and used), with
``prog: FILE:LINE: cannot read: line of more than N bytes (limit --max-line-bytes N)``
and exit 2; a client line on stdin (acp-replay --serve, the echo agent) the same.
Memory stays bounded whatever the line's size: the real executables, lines streamed
through a pipe, the child's peak RSS read from its own rusage."""

from __future__ import annotations

import gzip
import os
import subprocess
import threading
import time
from pathlib import Path

import orjson
import pytest

from acp_pipes.io.wire import frame_record, header
from tests.conftest import run_tool, tool_argv, tool_env

MIB = 1 << 20
DEFAULT = 64 * MIB
HEAD = orjson.dumps(header(["agent"], started_ns=0, clock="epoch", host=False)) + b"\n"
INIT = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2}}'


def _rec(seq: int, raw: bytes = INIT) -> bytes:
    return orjson.dumps(frame_record(seq, 0, "c2a", raw)) + b"\n"


def _long(seq: int, size: int) -> tuple[bytes, int, bytes]:
    """A wire record line of ``size`` bytes in all (without its LF), as its start, the
    count of filler bytes and its end."""
    start = b'{"seq":%d,"t":0,"dir":"c2a","raw":"' % seq
    end = b'"}\n'
    return start, size - len(start) - len(end) + 1, end


def _run_streaming(argv: list[str], parts: list[bytes | int]) -> tuple[int, bytes, bytes, int]:
    """Run ``argv`` with ``parts`` written to its stdin (an int: that many ``x`` bytes,
    written a MiB at a time, never held whole); returns exit status, stdout, stderr and
    the child's peak RSS in bytes."""
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=tool_env())
    out: list[bytes] = []
    err: list[bytes] = []
    readers = [threading.Thread(target=lambda f=f, s=s: s.append(f.read()))
               for f, s in ((p.stdout, out), (p.stderr, err))]
    peak = [0]
    watcher = threading.Thread(target=_watch_peak, args=(p.pid, peak))
    for t in readers + [watcher]:
        t.start()
    block = b"x" * MIB
    try:
        for part in parts:
            if isinstance(part, int):
                while part > 0:
                    p.stdin.write(block[:part])
                    part -= MIB
            else:
                p.stdin.write(part)
        p.stdin.close()
    except BrokenPipeError:  # the tool stopped reading: what the test is about
        pass
    _, status, _usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    for t in readers + [watcher]:
        t.join()
    return p.returncode, out[0], err[0], peak[0]


def _watch_peak(pid: int, peak: list[int]) -> None:
    """The child's own peak RSS (VmHWM), read until it has exited. Not ru_maxrss: Linux
    carries the forking process's high-water mark across fork and exec into it, so a
    child of a big test process would report that process's size."""
    status = f"/proc/{pid}/status"
    while True:
        try:
            with open(status) as f:
                text = f.read()
        except OSError:
            return
        hwm = [line for line in text.splitlines() if line.startswith("VmHWM:")]
        if not hwm:  # a zombie: its memory is gone, and the last reading was its peak
            return
        peak[0] = max(peak[0], int(hwm[0].split()[1]) * 1024)
        time.sleep(0.005)


def _message(prog: str, where: str, limit: int) -> str:
    return (f"{prog}: {where}: cannot read: line of more than {limit} bytes "
            f"(limit --max-line-bytes {limit})\n")


@pytest.mark.parametrize("tool", ["frame", "asr"])
def test_a_200_mb_line_through_a_pipe_is_refused_in_bounded_memory(tool):
    """The line is refused once it passes the default limit, never read whole: the
    child's peak memory stays far below the line's size (it was 2.6x the line before)."""
    start, filler, end = _long(1, 200 * MIB)
    status, out, err, rss = _run_streaming(
        tool_argv(tool), [HEAD, _rec(0), start, filler, end, _rec(2)])
    assert status == 2
    assert err.decode() == _message(f"acp-{tool}", "stdin:3", DEFAULT)
    assert rss < 150 * MIB, f"peak RSS {rss / MIB:.0f} MiB"
    if tool == "frame":  # what came before the line is written
        assert [orjson.loads(x).get("seq") for x in out.splitlines()] == [None, 0]


def test_serve_refuses_a_client_line_past_the_limit_in_bounded_memory(tmp_path):
    """acp-replay --serve reads its client through the same cap: the first request is
    answered, the 200 MB one is refused naming its line, memory stays bounded."""
    wire = Path(__file__).parent / "fixtures/asr/ASR-701-one-stream-per-session/wire.jsonl"
    r = run_tool("asr", "-o", str(tmp_path / "s"), str(wire))
    assert r.returncode == 0, r.stderr
    stream = sorted((tmp_path / "s").iterdir())[0]
    init = INIT + b"\n"
    start = b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"x":"'
    status, out, err, rss = _run_streaming(
        tool_argv("replay", "--serve", str(stream)), [init, start, 200 * MIB, b'"}}\n'])
    assert status == 2
    assert err.decode() == _message("acp-replay", "stdin:2", DEFAULT)
    assert orjson.loads(out.splitlines()[0])["id"] == 0  # answered before
    assert rss < 150 * MIB, f"peak RSS {rss / MIB:.0f} MiB"


@pytest.mark.parametrize("tool", ["frame", "fold", "asr", "view", "align", "replay"])
def test_the_limit_is_the_flags_to_the_byte_and_names_the_line(tmp_path, tool):
    """A line of N bytes is read, one of N+1 is not: FILE:LINE names it, whatever the
    tool; ``K`` is KiB."""
    limit = 4096
    ok = tmp_path / "ok.jsonl"
    start, filler, end = _long(1, limit)
    ok.write_bytes(HEAD + _rec(0) + start + b"x" * filler + end)
    assert len(ok.read_bytes().splitlines()[2]) == limit
    over = tmp_path / "over.jsonl"
    start, filler, end = _long(1, limit + 1)
    over.write_bytes(HEAD + _rec(0) + start + b"x" * filler + end + _rec(2))
    args = {"view": ["-o", str(tmp_path / "page.html")], "align": [str(ok)],
            "replay": []}.get(tool, [])
    r = run_tool(tool, "--max-line-bytes", "4K", str(ok), *args, stdin=subprocess.DEVNULL)
    assert b"line of more than" not in r.stderr, r.stderr
    r = run_tool(tool, "--max-line-bytes", "4K", str(over), *args, stdin=subprocess.DEVNULL)
    assert r.returncode == 2
    assert r.stderr.decode().endswith(_message(f"acp-{tool}", f"{over}:3", limit)), r.stderr


def test_a_gz_line_is_capped_as_it_is_decompressed(tmp_path):
    """The cap counts the decompressed bytes: a small .gz holding a 100 MB line is
    refused, not inflated whole."""
    start, filler, end = _long(1, 100 * MIB)
    gz = tmp_path / "w.jsonl.gz"
    with gzip.open(gz, "wb") as f:
        f.write(HEAD + _rec(0) + start)
        block = b"x" * MIB
        for _ in range(filler // MIB):
            f.write(block)
        f.write(end)
    assert gz.stat().st_size < 1 * MIB
    status, out, err, rss = _run_streaming(
        tool_argv("frame", "--max-line-bytes", "1M", str(gz)), [])
    assert status == 2
    assert err.decode() == _message("acp-frame", f"{gz}:3", MIB)
    assert rss < 100 * MIB, f"peak RSS {rss / MIB:.0f} MiB"
    assert len(out.splitlines()) == 2


def test_every_reading_tool_has_the_flag_and_acp_tee_has_not():
    for tool in ("frame", "fold", "asr", "replay", "align", "view", "batch", "echo-agent",
                 "export"):
        r = run_tool(tool, "--help")
        assert b"--max-line-bytes N" in r.stdout, tool
    assert b"--max-line-bytes" not in run_tool("tee", "--help").stdout
    r = run_tool("frame", "--max-line-bytes", "0")
    assert r.returncode == 2 and b"--max-line-bytes: a number of bytes" in r.stderr

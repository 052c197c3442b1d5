"""The pipeline streams while the session runs: filters write what they have as soon as
their input has no more bytes ready, and --follow reads a wire log as it grows (tail -F)
until its end record. Real processes and real pipes throughout: acp-tee, the echo agent,
the tools as executables."""

from __future__ import annotations

import gzip
import os
import select
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from acp_pipes.echo.client import client_session
from acp_pipes.io.wire import end_record, frame_record, header
from tests.conftest import run_tool, tool_argv, tool_env

pytestmark = pytest.mark.process  # processes are the point: real pipes, signals, exits

TIMEOUT = 60.0


class Reader:
    """The lines a process writes to a pipe, read as they arrive (never waiting past a
    deadline): what a watcher sees while the writer is still at work."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buf = b""
        self.lines: list[bytes] = []
        self.eof = False

    def until(self, pred, timeout: float = TIMEOUT) -> list[bytes]:
        """Read until ``pred(lines)`` holds; fails at the deadline or at EOF before."""
        deadline = time.monotonic() + timeout
        while not pred(self.lines):
            assert not self.eof, f"EOF before expected: {self.lines[-3:]!r}"
            left = deadline - time.monotonic()
            assert left > 0, f"not seen in {timeout} s: {self.lines[-3:]!r}"
            if select.select([self.fd], [], [], left)[0]:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    self.eof = True
                    continue
                self.buf += chunk
                *done, self.buf = self.buf.split(b"\n")
                self.lines += done
        return self.lines

    def rest(self) -> list[bytes]:
        self.until(lambda _: self.eof)
        return self.lines


def _spawn(*argv: str, stdin=subprocess.DEVNULL) -> subprocess.Popen:
    return subprocess.Popen(list(argv), stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=tool_env())


def _wire(frames: list[tuple[str, bytes]], *, start: int = 0) -> bytes:
    return b"".join(orjson.dumps(frame_record(start + i, 0, d, raw)) + b"\n"
                    for i, (d, raw) in enumerate(frames))


HEAD = orjson.dumps(header(["agent"], started_ns=0, clock="epoch", host=False)) + b"\n"
INIT = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2}}'
INIT_OK = b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2}}'


@pytest.mark.parametrize("tool", ["frame", "fold"])
def test_a_record_is_written_before_the_writer_closes(tool):
    """Over a real pipe: what a frame makes is on the reader's side while the writer
    still holds the pipe open (no waiting for 64 more frames, or for EOF)."""
    p = _spawn(*tool_argv(tool), stdin=subprocess.PIPE)
    try:
        out = Reader(p.stdout.fileno())
        p.stdin.write(HEAD + _wire([("c2a", INIT)]))
        p.stdin.flush()
        seen = out.until(lambda ls: len(ls) >= (2 if tool == "frame" else 1), timeout=20)
        assert orjson.loads(seen[0])["format"] == f"acp-pipes/{tool}s".replace("folds", "fold")
        if tool == "frame":
            assert orjson.loads(seen[1])["method"] == "initialize"
        p.stdin.write(_wire([("a2c", INIT_OK)], start=1))
        p.stdin.flush()
        if tool == "frame":
            out.until(lambda ls: len(ls) >= 3, timeout=20)
        p.stdin.close()
        assert p.wait(TIMEOUT) == 0
        offline = run_tool(tool, input=HEAD + _wire([("c2a", INIT), ("a2c", INIT_OK)]))
        assert b"\n".join(out.rest()) + b"\n" == offline.stdout
    finally:
        p.kill()
        p.wait()


def test_a_reader_gone_downstream_ends_a_live_filter_quietly():
    """``slow-writer | acp-frame | head -1``: the closed pipe is met while the filter
    waits for input (flushing what it framed); it ends quietly (exit 0), not as
    unreadable input."""
    p = _spawn(*tool_argv("frame"), stdin=subprocess.PIPE)
    try:
        out = Reader(p.stdout.fileno())
        p.stdin.write(HEAD + _wire([("c2a", INIT)]))
        p.stdin.flush()
        out.until(lambda ls: len(ls) >= 1, timeout=20)
        p.stdout.close()  # head has what it wanted
        for i in range(1, 50):
            time.sleep(0.01)
            p.stdin.write(_wire([("a2c", INIT_OK)], start=i))
            p.stdin.flush()
        p.stdin.close()
        assert p.wait(TIMEOUT) == 0
        assert p.stderr.read() == b""
    except BrokenPipeError:  # the filter ended before all was written: also quiet
        assert p.wait(TIMEOUT) == 0 and p.stderr.read() == b""
    finally:
        p.kill()
        p.wait()


def _prompt_count(lines: list[bytes], n: int) -> bool:
    """Has the fold written the agent's answer to prompt ``n`` (the echo agent's
    message)?"""
    done = 0
    for line in lines:
        rec = orjson.loads(line)
        if rec.get("ev") == "entity" and rec.get("entity") == "agent_message":
            done += 1
    return done >= n


def _echo_session(tmp_path: Path, wire: Path) -> tuple[subprocess.Popen, list[bytes]]:
    """A live acp-tee session with the echo agent: the client's frames, and the acp-tee
    process whose stdin the test writes them to."""
    tee = subprocess.Popen(
        tool_argv("tee", "-o", str(wire), "--clock", "epoch", "--no-host", "--",
                  *tool_argv("echo-agent")),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=tool_env())
    return tee, list(client_session(3))


def _feed(tee: subprocess.Popen, frames: list[bytes], agent_out: Reader, answers: int
          ) -> None:
    for f in frames:
        tee.stdin.write(f + b"\n")
    tee.stdin.flush()
    agent_out.until(lambda ls: sum(b'"id"' in x and b'"result"' in x for x in ls) >= answers)


@pytest.mark.parametrize(("tool", "suffix"), [("fold", ""), ("frame", ""), ("frame", ".gz")])
def test_follow_reads_a_live_acp_tee_log_until_its_end_record(tmp_path, tool, suffix):
    """``acp-tee -o wire.jsonl`` in one place, ``acp-fold --follow wire.jsonl`` in
    another: the fold shows each prompt's answer while the session runs, ends by itself
    at the end record, and has written what a fold of the finished log writes. A .gz
    log (acp-tee flushes it with every record) is followed the same way."""
    wire = tmp_path / f"wire.jsonl{suffix}"
    follower = _spawn(*tool_argv(tool, "--follow", str(wire)))  # before the log exists
    tee, client = _echo_session(tmp_path, wire)
    try:
        seen = Reader(follower.stdout.fileno())
        agent_out = Reader(tee.stdout.fileno())
        _feed(tee, client[:3], agent_out, 3)  # initialize, session/new, prompt 1
        if tool == "fold":
            seen.until(lambda ls: _prompt_count(ls, 1))
        else:
            seen.until(lambda ls: sum(b'"session/prompt"' in x for x in ls) >= 2)
        _feed(tee, client[3:4], agent_out, 4)  # prompt 2
        if tool == "fold":
            seen.until(lambda ls: _prompt_count(ls, 2))
        assert follower.poll() is None  # still following: the session is not over
        _feed(tee, client[4:], agent_out, len(client))
        tee.stdin.close()
        assert tee.wait(TIMEOUT) == 0
        assert follower.wait(TIMEOUT) == 0  # the end record ended it
        assert follower.stderr.read() == b""
        offline = run_tool(tool, str(wire))
        assert b"\n".join(seen.rest()) + b"\n" == offline.stdout
        log = gzip.decompress(wire.read_bytes()) if suffix else wire.read_bytes()
        assert orjson.loads(log.splitlines()[-1])["end"] is True
    finally:
        for p in (tee, follower):
            p.kill()
            p.wait()


def test_acp_tee_logging_into_a_fifo_feeds_a_live_fold(tmp_path):
    """``mkfifo log; acp-fold log & acp-tee -o log -- AGENT``: the fold shows each
    prompt's answer while the session runs, and ends with acp-tee."""
    fifo = tmp_path / "log"
    os.mkfifo(fifo)
    fold = _spawn(*tool_argv("fold", str(fifo)))  # opens the FIFO: waits for a writer
    time.sleep(0.3)
    tee, client = _echo_session(tmp_path, fifo)
    try:
        seen = Reader(fold.stdout.fileno())
        agent_out = Reader(tee.stdout.fileno())
        _feed(tee, client[:3], agent_out, 3)
        seen.until(lambda ls: _prompt_count(ls, 1))
        _feed(tee, client[3:4], agent_out, 4)
        seen.until(lambda ls: _prompt_count(ls, 2))
        assert fold.poll() is None and tee.poll() is None  # both still at work
        _feed(tee, client[4:], agent_out, len(client))
        tee.stdin.close()
        assert tee.wait(TIMEOUT) == 0
        assert fold.wait(TIMEOUT) == 0
        assert fold.stderr.read() == b""
        assert _prompt_count(seen.rest(), 3)
    finally:
        for p in (tee, fold):
            p.kill()
            p.wait()


def test_follow_waits_on_a_torn_last_line_and_a_truncated_log(tmp_path):
    """A last line without its LF is a record still being written: waited on, not
    reported. A log truncated and written again is read again from its start, with a
    note (the torn line was waited on: it is not reported)."""
    wire = tmp_path / "wire.jsonl"
    first = orjson.dumps(frame_record(0, 0, "c2a", INIT)) + b"\n"
    wire.write_bytes(HEAD + first[:30])
    p = _spawn(*tool_argv("frame", "--follow", str(wire)))
    try:
        seen = Reader(p.stdout.fileno())
        seen.until(lambda ls: len(ls) >= 1)  # the header
        time.sleep(0.3)
        with wire.open("ab") as f:
            f.write(first[30:])
        seen.until(lambda ls: len(ls) >= 2)
        assert orjson.loads(seen.lines[1])["method"] == "initialize"
        wire.write_bytes(HEAD)  # truncated: a new session in the same file
        seen.until(lambda ls: len(ls) >= 3)  # its header, read from the start again
        with wire.open("ab") as f:
            f.write(_wire([("a2c", INIT_OK)], start=0))
            f.write(orjson.dumps(end_record(0, 0, 1)) + b"\n")
        assert p.wait(TIMEOUT) == 0
        assert p.stderr.read().decode() == (
            f"acp-frame: {wire}: rewritten (a new log under the name): read again from "
            "its start\n")
        out = [orjson.loads(x) for x in seen.rest()]
        assert [r.get("format") or r["kind"] for r in out] == [
            "acp-pipes/frames", "request", "acp-pipes/frames", "response"]
    finally:
        p.kill()
        p.wait()


def test_follow_stops_at_ctrl_c_with_what_it_read_written(tmp_path):
    import signal

    wire = tmp_path / "wire.jsonl"
    wire.write_bytes(HEAD + _wire([("c2a", INIT)]))
    p = _spawn(*tool_argv("fold", "--follow", str(wire)))
    try:
        seen = Reader(p.stdout.fileno())
        seen.until(lambda ls: len(ls) >= 1)
        time.sleep(0.2)
        p.send_signal(signal.SIGINT)
        assert p.wait(TIMEOUT) == 130
        assert orjson.loads(seen.rest()[0])["format"] == "acp-pipes/fold"
    finally:
        p.kill()
        p.wait()


def test_a_gzip_pipe_is_read_as_it_comes():
    """``... | acp-frame`` over gzip that is still being written: each flushed record is
    framed at once, not when gzip's block or the member is complete."""
    import zlib

    p = _spawn(*tool_argv("frame"), stdin=subprocess.PIPE)
    try:
        out = Reader(p.stdout.fileno())
        z = zlib.compressobj(wbits=31)
        p.stdin.write(z.compress(HEAD + _wire([("c2a", INIT)])) + z.flush(zlib.Z_SYNC_FLUSH))
        p.stdin.flush()
        seen = out.until(lambda ls: len(ls) >= 2, timeout=20)
        assert orjson.loads(seen[1])["method"] == "initialize"
        p.stdin.write(z.compress(_wire([("a2c", INIT_OK)], start=1)) + z.flush())
        p.stdin.close()
        assert p.wait(TIMEOUT) == 0
        assert len(out.rest()) == 3
    finally:
        p.kill()
        p.wait()


def test_tail_f_pipeline_sees_records_as_the_log_grows(tmp_path):
    """``tail -f wire.jsonl | acp-frame``: a pipe that never ends still shows each
    frame as it is logged."""
    wire = tmp_path / "wire.jsonl"
    wire.write_bytes(HEAD)
    tail = subprocess.Popen(["tail", "-f", "-n", "+1", str(wire)], stdout=subprocess.PIPE)
    p = _spawn(*tool_argv("frame"), stdin=tail.stdout)
    tail.stdout.close()
    try:
        seen = Reader(p.stdout.fileno())
        for i in range(3):
            with wire.open("ab") as f:
                f.write(_wire([("c2a", b'{"jsonrpc":"2.0","method":"n%d"}' % i)], start=i))
            seen.until(lambda ls, i=i: len(ls) >= i + 2, timeout=20)
            assert orjson.loads(seen.lines[-1])["method"] == f"n{i}"
    finally:
        for proc in (tail, p):
            proc.kill()
            proc.wait()


def _head(started_ns: int) -> bytes:
    return orjson.dumps(header(["agent"], started_ns=started_ns, clock="epoch",
                               host=False)) + b"\n"


END = orjson.dumps(end_record(0, 0, 1)) + b"\n"


@pytest.mark.parametrize("size", ["same", "bigger", "smaller"])
def test_follow_reads_a_log_rewritten_between_two_looks_as_a_new_log(tmp_path, size):
    """A log rewritten under a follower (acp-tee -o FILE truncates and writes a new
    session) is noticed whatever its new size: a new header (its start time) is a new
    log, read from its start, with a note; none of its frames is lost or misread."""
    wire = tmp_path / "wire.jsonl"
    old = _head(0) + _wire([("c2a", INIT)])
    wire.write_bytes(old)
    if size == "same":  # another start time of the same length: the same size in all
        new = _head(1_000_000) + _wire([("c2a", INIT)])
        assert len(new) == len(old)
    elif size == "bigger":
        new = _head(1_000_000) + _wire([("c2a", INIT), ("a2c", INIT_OK), ("c2a", INIT)])
    else:
        new = _head(1_000_000)
    p = _spawn(*tool_argv("frame", "--follow", str(wire)))
    try:
        seen = Reader(p.stdout.fileno())
        seen.until(lambda ls: len(ls) >= 2)  # the old log's header and frame
        time.sleep(0.3)  # at the old log's end, looking for more
        fd = os.open(wire, os.O_WRONLY)
        try:  # in place, the same file, in one write: never seen empty in between
            os.pwrite(fd, new, 0)
            os.ftruncate(fd, len(new))
        finally:
            os.close(fd)
        seen.until(lambda ls: len(ls) >= 3)  # the new log's header
        with wire.open("ab") as f:
            f.write(END)
        assert p.wait(TIMEOUT) == 0
        out = [orjson.loads(x) for x in seen.rest()]
        kinds = [r.get("format") or r["kind"] for r in out]
        frames = {"same": ["request"], "bigger": ["request", "response", "request"],
                  "smaller": []}[size]
        assert kinds == ["acp-pipes/frames", "request", "acp-pipes/frames", *frames]
        assert out[2]["source"]["started"] == "1970-01-01T00:00:00.001000Z"
        assert p.stderr.read().decode() == (
            f"acp-frame: {wire}: rewritten (a new log under the name): read again from "
            "its start\n")
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("tool", ["frame", "asr"])
def test_follow_ends_at_an_end_record_written_with_spaces(tmp_path, tool):
    """The end record is what the readers parse as one ({"end": true}), however it is
    written: with spaces, or with its key escaped, it ends --follow as acp-tee's does."""
    import json

    wire = tmp_path / "wire.jsonl"
    spaced = json.dumps(end_record(0, 0, 1)).encode() + b"\n"
    assert spaced.startswith(b'{"end": true, ')
    escaped = b'{"\\u0065nd" : true, "t": 0, "status": 0, "frames": 1}\n'
    for i, end in enumerate((spaced, escaped)):
        wire.write_bytes(HEAD + _wire([("c2a", INIT)]))
        p = _spawn(*tool_argv(tool, "--follow", str(wire)))
        try:
            seen = Reader(p.stdout.fileno())
            if tool == "frame":
                seen.until(lambda ls: len(ls) >= 2)
            time.sleep(0.3)
            with wire.open("ab") as f:
                f.write(end)
            assert p.wait(TIMEOUT) == 0, (i, p.stderr.read())
            # the log is one initialize: acp-asr says it holds no session, nothing else
            said = f"acp-asr: {wire}: the recording holds no session: no session/new was " \
                   "answered\n"
            assert p.stderr.read() == (said.encode() if tool == "asr" else b"")
        finally:
            p.kill()
            p.wait()


def test_follow_tells_a_new_session_from_the_old_one_under_the_same_header(tmp_path):
    """Two recordings with ``--clock epoch --no-host`` start with the same header bytes:
    a log rewritten with the other is still told from the one read (the bytes before
    the offset differ), read from its start, every one of its frames framed."""
    from tests.conftest import record_lockstep

    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    record_lockstep(list(client_session(1, text="one")), one)
    record_lockstep(list(client_session(3, text="two")), two)
    a, b = one.read_bytes().splitlines(True), two.read_bytes().splitlines(True)
    assert a[0] == b[0]  # the same header
    wire = tmp_path / "wire.jsonl"
    wire.write_bytes(b"".join(a[:-1]))  # the first session, its end record not yet there
    p = _spawn(*tool_argv("frame", "--follow", str(wire)))
    try:
        seen = Reader(p.stdout.fileno())
        seen.until(lambda ls: len(ls) >= len(a) - 1)  # its header and frames
        time.sleep(0.3)
        fd = os.open(wire, os.O_WRONLY)
        try:
            os.pwrite(fd, b"".join(b), 0)  # bigger, in place, in one write, with its end
        finally:
            os.close(fd)
        assert p.wait(TIMEOUT) == 0
        out = [orjson.loads(x) for x in seen.rest()]
        assert len(out) == len(a) - 1 + len(b) - 1  # each log's header and frames
        assert [r["raw"] for r in out[len(a):]] == [
            orjson.loads(x)["raw"] for x in b[1:-1]]
        assert b"rewritten (a new log under the name)" in p.stderr.read()
    finally:
        p.kill()
        p.wait()

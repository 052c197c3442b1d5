"""acp-asr -o DIR while the session runs: each session's file grows as its records are
made, after a provisional header replaced atomically at the end; a killed converter
leaves a provisional prefix of the final stream; live and offline conversions of one
log are byte-identical once the session ended. Real acp-tee, echo agent and acp-asr
processes over real files."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from acp_pipes.asr.output import file_name
from acp_pipes.echo.client import client_session
from tests.conftest import run_tool, tool_argv, tool_env
from tests.test_live import TIMEOUT, Reader

pytestmark = pytest.mark.process  # processes are the point: real pipes, signals, exits

SESSION = "sess-1"  # the echo agent's first session


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines() if path.exists() else []


def _wait_for(pred, timeout: float = TIMEOUT, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"not seen in {timeout} s: {what}"
        time.sleep(0.01)


def _messages(path: Path) -> int:
    return sum(b'"type":"message"' in x and b'"role":"assistant"' in x for x in _lines(path))


class Session:
    """A live acp-tee session with the echo agent, driven frame by frame."""

    def __init__(self, wire: Path):
        self.tee = subprocess.Popen(
            tool_argv("tee", "-o", str(wire), "--clock", "epoch", "--no-host", "--",
                      *tool_argv("echo-agent")),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=tool_env())
        self.out = Reader(self.tee.stdout.fileno())
        self.client = list(client_session(3, permission_every=2))
        self.sent = 0
        self.answers = 0

    def send(self, n: int) -> None:
        """Send the next ``n`` client frames; wait for the answers to the requests."""
        for f in self.client[self.sent:self.sent + n]:
            self.tee.stdin.write(f + b"\n")
            if b'"method"' in f and b'"id"' in f:
                self.answers += 1
        self.tee.stdin.flush()
        self.sent += n
        self.out.until(lambda ls: sum(b'"result"' in x for x in ls) >= self.answers)

    def end(self) -> None:
        self.send(len(self.client) - self.sent)
        self.tee.stdin.close()
        assert self.tee.wait(TIMEOUT) == 0

    def kill(self) -> None:
        self.tee.kill()
        self.tee.wait()


def test_follow_grows_each_sessions_file_and_ends_as_a_one_shot_conversion(tmp_path):
    wire, live, offline = tmp_path / "wire.jsonl", tmp_path / "live", tmp_path / "offline"
    asr = subprocess.Popen(tool_argv("asr", "--follow", "-o", str(live), str(wire)),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=tool_env())
    s = Session(wire)
    try:
        out = live / file_name(SESSION)
        s.send(3)  # initialize, session/new, prompt 1
        _wait_for(lambda: _messages(out) >= 1, what="prompt 1's answer in the ASR file")
        head = orjson.loads(_lines(out)[0])
        assert head["type"] == "header" and head["native"]["provisional"] is True
        first = _lines(out)
        # what the validator says of it: provisional, not broken
        r = run_tool("asr", "--validate", str(out))
        assert r.returncode == 1
        assert r.stderr.decode().splitlines() == [
            f"{out}:1: /native/provisional: a provisional stream: acp-asr -o is still "
            "converting its session, or was stopped before the input's end (run it "
            "again); its records so far are checked"]
        s.send(1)  # prompt 2
        _wait_for(lambda: _messages(out) >= 2, what="prompt 2's answer")
        grown = _lines(out)
        assert grown[:len(first)] == first  # appended to, never rewritten while live
        assert asr.poll() is None
        s.end()
        assert asr.wait(TIMEOUT) == 0, asr.stderr.read()
        assert asr.stderr.read() == b""
        r = run_tool("asr", "-o", str(offline), str(wire))
        assert r.returncode == 0, r.stderr
        assert sorted(p.name for p in live.iterdir()) == sorted(p.name for p in offline.iterdir())
        for p in offline.iterdir():
            assert (live / p.name).read_bytes() == p.read_bytes()  # byte-identical
        final = _lines(out)
        assert b"provisional" not in final[0]
        assert final[1:len(grown)] == grown[1:]  # the live records were the final ones
        assert run_tool("asr", "--validate", str(out)).returncode == 0
    finally:
        s.kill()
        asr.kill()
        asr.wait()


def test_a_killed_converter_leaves_a_provisional_prefix_and_a_rerun_the_same_bytes(tmp_path):
    wire, live, again, offline = (tmp_path / n for n in ("wire.jsonl", "live", "again",
                                                          "offline"))
    s = Session(wire)
    asr = subprocess.Popen(tool_argv("asr", "--follow", "-o", str(live), str(wire)),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=tool_env())
    try:
        out = live / file_name(SESSION)
        s.send(4)  # two prompts
        _wait_for(lambda: _messages(out) >= 2, what="two answers")
        asr.send_signal(signal.SIGKILL)
        asr.wait(TIMEOUT)
        killed = out.read_bytes()
        s.end()
    finally:
        s.kill()
        asr.kill()
        asr.wait()
    assert killed.endswith(b"\n")
    lines = killed.splitlines()
    assert orjson.loads(lines[0])["native"]["provisional"] is True
    for line in lines:
        orjson.loads(line)  # valid JSONL, every line
    r = run_tool("asr", "-o", str(offline), str(wire))
    assert r.returncode == 0
    final = (offline / file_name(SESSION)).read_bytes().splitlines()
    assert lines[1:] == final[1:len(lines)]  # a prefix of the final stream's records
    # rerun over the killed one's directory: the same bytes as a one-shot conversion
    r = run_tool("asr", "-o", str(live), str(wire))
    assert r.returncode == 0
    assert (live / file_name(SESSION)).read_bytes() == (offline / file_name(SESSION)).read_bytes()
    r = run_tool("asr", "--follow", "-o", str(again), str(wire))  # a finished log
    assert r.returncode == 0
    assert (again / file_name(SESSION)).read_bytes() == (offline / file_name(SESSION)).read_bytes()


def test_ctrl_c_ends_follow_with_the_streams_written_as_a_cut_recording(tmp_path):
    wire, live = tmp_path / "wire.jsonl", tmp_path / "live"
    s = Session(wire)
    asr = subprocess.Popen(tool_argv("asr", "--follow", "-o", str(live), str(wire)),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=tool_env())
    try:
        out = live / file_name(SESSION)
        s.send(3)
        _wait_for(lambda: _messages(out) >= 1, what="prompt 1's answer")
        asr.send_signal(signal.SIGINT)
        assert asr.wait(TIMEOUT) == 130
    finally:
        s.kill()
        asr.kill()
        asr.wait()
    # what was read is converted as a recording cut off there: a final, valid stream
    assert b"provisional" not in _lines(out)[0]
    r = run_tool("asr", "--validate", str(out))
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("big", [False, True])
def test_one_shot_output_is_unchanged_by_the_live_spool(tmp_path, big):
    """A session larger than the spool's memory is spilled into its live file while
    converting; superseding records read earlier ones back from there (ASR-706)."""
    from acp_pipes.asr import output

    wire = tmp_path / "wire.jsonl"
    prompts = 600 if big else 3
    data = b"".join(f + b"\n" for f in client_session(prompts))
    r = subprocess.run(tool_argv("tee", "-o", str(wire), "--clock", "epoch", "--no-host",
                                 "--", *tool_argv("echo-agent")),
                       input=data, capture_output=True, env=tool_env(), timeout=TIMEOUT)
    assert r.returncode == 0
    stdout = run_tool("asr", str(wire)).stdout
    r = run_tool("asr", "-o", str(tmp_path / "o"), str(wire))
    assert r.returncode == 0 and r.stderr == b""
    written = (tmp_path / "o" / file_name(SESSION)).read_bytes()
    assert written == stdout
    if big:
        assert len(written) > output.SPOOL_MEMORY  # it did spill into the live file
    assert [p.name for p in (tmp_path / "o").iterdir()] == [file_name(SESSION)]  # no .part


# -- --snapshots: a long stream seen as it grows (ASR-705) ------------------------------


def _streaming_log(path: Path, chunks: int) -> None:
    """A v2 session whose agent streams one message in ``chunks`` chunks."""
    from acp_pipes.io.wire import frame_record, header

    def upd(u: dict) -> bytes:
        return orjson.dumps({"jsonrpc": "2.0", "method": "session/update",
                             "params": {"sessionId": "s", "update": u}})

    frames = [
        ("c2a", b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2}}'),
        ("a2c", b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2}}'),
        ("c2a", b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w"}}'),
        ("a2c", b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}'),
        ("c2a", b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s",'
                b'"messageId":"u1","prompt":[{"type":"text","text":"go"}]}}'),
        ("a2c", b'{"jsonrpc":"2.0","id":2,"result":{"userMessageId":"u1"}}'),
        ("a2c", upd({"sessionUpdate": "state_update", "state": "running"})),
        *(("a2c", upd({"sessionUpdate": "agent_message_chunk", "messageId": "m1",
                       "content": {"type": "text", "text": f"{i} "}})) for i in range(chunks)),
        ("a2c", upd({"sessionUpdate": "state_update", "state": "idle",
                     "stopReason": "end_turn"})),
    ]
    path.write_bytes(orjson.dumps(header(["agent"], started_ns=0, clock="epoch", host=False))
                     + b"\n" + b"".join(orjson.dumps(frame_record(i, 0, d, raw)) + b"\n"
                                        for i, (d, raw) in enumerate(frames)))


def test_snapshots_show_a_long_message_as_it_streams(tmp_path):
    """ASR-705: with --snapshots a message streamed in 300 chunks is written as partial
    snapshots when 64, 128 and 256 chunks have come, each with the text so far, and its
    final record supersedes them; without, only the final record."""
    wire = tmp_path / "wire.jsonl"
    _streaming_log(wire, 300)
    r = run_tool("asr", "--snapshots", str(wire))
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    recs = [orjson.loads(x) for x in r.stdout.splitlines()[1:]]
    msgs = [x for x in recs if x["type"] == "message" and x["role"] == "assistant"]
    texts = [x["content"][0]["text"] for x in msgs]
    full = "".join(f"{i} " for i in range(300))
    assert texts == [full[:len("".join(f"{i} " for i in range(n)))] for n in (64, 128, 256)] \
        + [full]
    assert [x.get("capture", {}).get("record") for x in msgs] == [{"state": "partial"}] * 3 \
        + [None]
    assert [x.get("supersedes") for x in msgs] == [None, msgs[0]["id"], msgs[1]["id"],
                                                  msgs[2]["id"]]
    stream = tmp_path / "s.asr.jsonl"
    stream.write_bytes(r.stdout)
    assert run_tool("asr", "--validate", str(stream)).returncode == 0
    plain = [orjson.loads(x) for x in run_tool("asr", str(wire)).stdout.splitlines()[1:]]
    assert [x["content"][0]["text"] for x in plain
            if x["type"] == "message" and x["role"] == "assistant"] == [full]


def test_follow_reads_a_log_rewritten_by_a_new_recording_from_its_start(tmp_path):
    """acp-tee -o FILE again over a log being followed: the new log (its header, a new
    connection) is read from its start, as a stream following the old one in the same
    file, so none of its records is lost; a note says so."""
    from tests.conftest import record_lockstep

    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    record_lockstep(list(client_session(1, text="one")), one)
    record_lockstep(list(client_session(2, text="two")), two)
    wire = tmp_path / "wire.jsonl"
    wire.write_bytes(b"".join(one.read_bytes().splitlines(True)[:-1]))  # no end record
    live = tmp_path / "live"
    out = live / file_name(SESSION)
    asr = subprocess.Popen(tool_argv("asr", "--follow", "-o", str(live), str(wire)),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=tool_env())
    try:
        _wait_for(lambda: b'"text":"one 1"' in b"".join(_lines(out)), what="one 1")
        time.sleep(0.3)
        wire.write_bytes(two.read_bytes())  # truncated and written again, bigger
        assert asr.wait(TIMEOUT) == 0
        final = b"\n".join(_lines(out))
        assert b'"text":"two 1"' in final and b'"text":"two 2"' in final
        assert asr.stderr.read().decode() == (
            f"acp-asr: {wire}: rewritten (a new log under the name): read again from its "
            "start\n")
    finally:
        asr.kill()
        asr.wait()

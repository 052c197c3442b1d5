"""acp-replay's reports on stderr: JSON lines in a pipe, readable lines at a terminal;
-q; --session on trace replay (acp_pipes/cli/reports.py, acp_pipes/cli/replay.py)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from acp_pipes.errors import InputError
from tests.conftest import run_tool
from tests.test_contract import TWO_SESSIONS, two_sessions  # noqa: F401 - a fixture
from tests.ttys import run_tool_tty


@pytest.fixture(scope="module")
def two(request) -> dict[str, Path]:
    """The two-session recording (test_contract's), and its second session's ASR stream."""
    wire = request.getfixturevalue("two_sessions")
    asr = wire.parent / "s.asr.jsonl"
    asr.write_bytes(run_tool("asr", "--session", "sess-2", str(wire)).stdout)
    return {"wire": wire, "asr": asr}


def test_loss_report_is_json_in_a_pipe_and_readable_at_a_terminal(two):
    piped = run_tool("replay", str(two["asr"]))
    assert piped.returncode == 0, piped.stderr
    event = orjson.loads(piped.stderr)
    assert event["event"] == "replay_losses" and event["sessionId"] == "sess-2"
    shown = run_tool_tty("replay", str(two["asr"]), out_tty=False, err_tty=True)
    assert shown.returncode == 0 and shown.stdout == piped.stdout
    first = shown.stderr.decode().splitlines()[0]
    assert first.startswith("\x1b[33macp-replay: ") and first.endswith("\x1b[0m")
    assert f"{two['asr']}: session sess-2: {event['records']} records replayed as " \
           f"{event['updates']} updates" in first
    assert b"{" not in shown.stderr  # no JSON for a person
    plain = run_tool_tty("replay", str(two["asr"]), out_tty=False, err_tty=True,
                         env={"NO_COLOR": "1"})
    assert plain.stderr.startswith(b"acp-replay: ") and b"\x1b" not in plain.stderr


def test_q_silences_the_loss_report_of_a_run_that_succeeds(two, tmp_path):
    report = tmp_path / "report.jsonl"
    quiet = run_tool("replay", "-q", str(two["asr"]), "--report", str(report))
    assert (quiet.returncode, quiet.stderr) == (0, b"")
    assert orjson.loads(report.read_bytes())["event"] == "replay_losses"  # still in FILE
    assert run_tool("replay", "--quiet", str(two["asr"])).stderr == b""
    assert run_tool("replay", "--quiet", str(two["asr"])).stderr == b""


def test_q_still_says_the_loss_report_of_a_run_that_fails(cut_asr_stream):
    """A .gz cut short replays what was read, then exits 2: not a success, so -q holds
    nothing back."""
    r = run_tool("replay", "-q", str(cut_asr_stream["cut"]))
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert orjson.loads(lines[0])["event"] == "replay_losses"
    assert lines[-1].startswith(f"acp-replay: {cut_asr_stream['cut']}:".encode())


def test_a_miss_at_a_terminal_reads_as_lines(two):
    client = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":9}}\n'
    piped = run_tool("replay", str(two["wire"]), input=client)
    assert piped.returncode == 1
    miss = orjson.loads(piped.stderr.splitlines()[-1])
    assert miss["event"] == "miss"
    shown = run_tool_tty("replay", str(two["wire"]), out_tty=False, err_tty=True,
                         input=client)
    assert shown.returncode == 1
    lines = shown.stderr.decode().splitlines()
    assert lines[0] == ("\x1b[1;31macp-replay: miss: client frame 1 of "
                        f"{miss['total']} matches nothing recorded\x1b[0m")
    assert "  diff (recorded -> received):" in lines
    assert "    /params/protocolVersion: 2 -> 9" in lines


def test_session_replays_one_session_of_a_trace(two):
    """``acp-replay --session ID`` replays that session alone (and the connection's own
    frames): a client of that one session is served as recorded."""
    client = b"".join(x + b"\n" for x in (TWO_SESSIONS[0], TWO_SESSIONS[2], TWO_SESSIONS[4]))
    whole = run_tool("replay", str(two["wire"]), input=client)
    assert whole.returncode == 1  # the whole trace expects the first session/new first
    one = run_tool("replay", "--session", "sess-2", str(two["wire"]), input=client)
    assert (one.returncode, one.stderr) == (0, b"")
    emitted = run_tool("replay", "--emit", "a2c", "--session", "sess-2", str(two["wire"]))
    assert emitted.returncode == 0 and one.stdout == emitted.stdout
    assert b'"sessionId":"sess-2"' in one.stdout and b'"sessionId":"sess-1"' not in one.stdout
    missing = run_tool("replay", "--session", "nope", str(two["wire"]), input=client)
    assert missing.returncode == 2 and b"no session 'nope'" in missing.stderr


def test_of_session_reads_a_trace_as_it_goes():
    """The filter behind --session on traces: a request of no session waits for its answer
    (whose session says whether it stays), the frames after it wait with it, order is
    kept, and nothing is read further ahead than that."""
    from acp_pipes.replay.trace.tracefile import of_session

    def frame(d: str, msg: str) -> tuple[dict, bytes]:
        return {"dir": d}, msg.encode()

    trace = [
        frame("c2a", '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}'),
        frame("a2c", '{"jsonrpc":"2.0","id":0,"result":{}}'),
        frame("c2a", '{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}'),
        frame("c2a", '{"jsonrpc":"2.0","id":2,"method":"session/new","params":{}}'),
        frame("a2c", '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"a"}}'),
        frame("a2c", '{"jsonrpc":"2.0","id":2,"result":{"sessionId":"b"}}'),
        frame("c2a", '{"jsonrpc":"2.0","id":3,"method":"x/ping"}'),
        frame("a2c", '{"jsonrpc":"2.0","id":3,"result":{}}'),
        frame("c2a", '{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"b"}}'),
        frame("c2a", '{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"a"}}'),
        frame("c2a", '{"jsonrpc":"2.0","id":4,"method":"x/ping"}'),  # never answered
    ]
    read: list[int] = []

    def reading():
        for i, pair in enumerate(trace):
            read.append(i)
            yield pair

    got = []
    for rec, raw in of_session(reading(), "b"):
        got.append(trace.index((rec, raw)))
        if got[-1] in (0, 6):
            assert read[-1] == got[-1] + 1  # a request of no session: once answered
        if got[-1] == 3:
            assert read[-1] == 5  # held until its answer named session b
        if got[-1] == 8:
            assert read[-1] == 8  # a frame of the session, as soon as it is read
    assert got == [0, 1, 3, 5, 6, 7, 8, 10]
    with pytest.raises(InputError, match="no session 'c'"):
        list(of_session(iter(trace), "c", "t.jsonl"))


# Two sessions prompting at once: the answers to the prompts name no session, and each
# belongs to the session its request named.
INTERLEAVED = [
    ("c2a", '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}'),
    ("a2c", '{"jsonrpc":"2.0","id":0,"result":{}}'),
    ("c2a", '{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}'),
    ("a2c", '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"a"}}'),
    ("c2a", '{"jsonrpc":"2.0","id":2,"method":"session/new","params":{}}'),
    ("a2c", '{"jsonrpc":"2.0","id":2,"result":{"sessionId":"b"}}'),
    ("c2a", '{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"a"}}'),
    ("c2a", '{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"b"}}'),
    ("a2c", '{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}'),
    ("a2c", '{"jsonrpc":"2.0","id":4,"result":{"stopReason":"cancelled"}}'),
]


def test_of_session_leaves_out_the_answers_to_another_sessions_requests():
    from acp_pipes.replay.trace.tracefile import of_session

    trace = [({"dir": d}, m.encode()) for d, m in INTERLEAVED]
    for sid, made, prompt, other in (("a", 2, 6, 7), ("b", 4, 7, 6)):
        got = [trace.index(pair) for pair in of_session(iter(trace), sid)]
        assert got == [0, 1, made, made + 1, prompt, prompt + 2], sid
        assert other not in got and other + 2 not in got


def test_session_leaves_out_the_answers_to_another_sessions_prompts(tmp_path):
    """On a wire log, through the CLIs: acp-replay --session emits, and acp-frame
    --session writes, the answer to its own prompt and not to the other's."""
    from acp_pipes.io import wire

    log = tmp_path / "two.wire.jsonl"
    records = [wire.header(["agent"], started_ns=0)] + [
        wire.frame_record(i, i, d, m.encode()) for i, (d, m) in enumerate(INTERLEAVED)]
    log.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    for sid, mine, theirs in (("b", 4, 3), ("a", 3, 4)):  # the ids of the two prompts
        emitted = run_tool("replay", "--emit", "a2c", "--session", sid, str(log))
        assert emitted.returncode == 0, emitted.stderr
        answered = [orjson.loads(line)["id"] for line in emitted.stdout.splitlines()]
        assert answered == [0, 1 if sid == "a" else 2, mine], answered
        r = run_tool("frame", "--session", sid, str(log))
        assert r.returncode == 0, r.stderr
        frames = [f for f in map(orjson.loads, r.stdout.splitlines()) if "dir" in f]
        ids = [(f["dir"], f.get("id")) for f in frames]
        assert ("c2a", mine) in ids and ("a2c", mine) in ids, ids
        assert ("c2a", theirs) not in ids and ("a2c", theirs) not in ids, ids

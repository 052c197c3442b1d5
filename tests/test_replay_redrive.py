"""``acp-replay --client TRACE -- AGENT`` re-drives a live agent from its own recording:
the ids it mints are learned as a renaming, its requests are answered from the
recording, the run is paced by the protocol, and it stops (exit 1) at the first frame
that differs. Against the echo agent and the real fast-agent, each session recorded
fresh by the real acp-tee."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import orjson
import pytest

from acp_pipes.echo.client import client_session
from acp_pipes.io.wire import decode_raw
from tests.conftest import record_lockstep, run_tool, tool_argv


def _records(path: Path) -> list[dict]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def _write(path: Path, recs: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return path


def _frames(log: Path, direction: str) -> list[bytes]:
    return [decode_raw(r)
            for r in _records(log)[1:] if r.get("dir") == direction]


def _events(p) -> list[dict]:
    return [orjson.loads(x) for x in p.stderr.splitlines()]


@pytest.fixture(scope="module")
def echo(tmp_path_factory) -> Path:
    """A 6-prompt echo session (every 2nd asks permission, every 3rd elicits)."""
    wire = tmp_path_factory.mktemp("redrive") / "echo.wire.jsonl"
    record_lockstep(list(client_session(6, permission_every=2, elicit_every=3)), wire)
    return wire


def _redrive(trace: Path, out: Path, *agent: str, timeout: str = "20",
             limit: float | None = None):
    """``limit``: a process of its own, failed (not waited on for ever) after so many s."""
    kw = {} if limit is None else {"process": True, "timeout": limit}
    return run_tool("replay", "--client", str(trace), "-o", str(out), "--timeout", timeout,
                    "--", *(agent or tool_argv("echo-agent")), **kw)


def test_a_recorded_echo_session_redrives_with_exit_0(echo, tmp_path):
    out = tmp_path / "rerun.jsonl"
    p = _redrive(echo, out)
    assert p.returncode == 0, p.stderr.decode()
    assert p.stderr == b""
    # what the agent was sent is what it was sent in the recording, answers included,
    # and each recorded answer went once, to a request the live agent made
    assert _frames(out, "c2a") == _frames(echo, "c2a")
    assert _frames(out, "a2c") == _frames(echo, "a2c")


def test_a_session_id_minted_otherwise_is_learned_as_a_renaming(echo, tmp_path):
    """The recording's agent minted another session id (every occurrence edited): the
    live agent's own id is learned from its session/new answer and every client frame
    sent after carries it, so the run equals the recording under the renaming."""
    recs = _records(echo)
    assert any("sess-1" in r.get("raw", "") for r in recs)
    for r in recs:
        if "raw" in r:
            r["raw"] = r["raw"].replace('"sess-1"', '"minted-elsewhere-7"')
    trace = _write(tmp_path / "renamed.jsonl", recs)
    out = tmp_path / "rerun.jsonl"
    p = _redrive(trace, out)
    assert p.returncode == 0, p.stderr.decode()
    sent = _frames(out, "c2a")
    assert not any(b"minted-elsewhere-7" in x for x in sent)
    assert sent == _frames(echo, "c2a")  # the live agent's id, in every frame after


def test_a_renaming_that_is_not_one_to_one_is_a_divergence(echo, tmp_path):
    """Only the session/new answer edited: the recording then names one live session by
    two ids, which no renaming explains; exit 1 names the first frame that breaks it."""
    recs = _records(echo)
    at = next(i for i, r in enumerate(recs)
              if r.get("dir") == "a2c" and '"result":{"sessionId":"sess-1"' in r["raw"])
    recs[at]["raw"] = recs[at]["raw"].replace("sess-1", "sess-9")
    p = _redrive(_write(tmp_path / "t.jsonl", recs), tmp_path / "o.jsonl")
    assert p.returncode == 1
    (event,) = _events(p)
    assert event["event"] == "difference" and event["kind"] == "renaming"
    again = next(r for r in recs[at + 1:] if r.get("dir") == "a2c" and "sess-1" in r["raw"])
    assert event["seq"] == again["seq"]  # the first agent frame naming sess-1 again
    assert event["renaming_broken"] == ["/params/sessionId"]


def test_a_changed_prompt_stops_at_the_first_differing_frame(echo, tmp_path):
    recs = _records(echo)
    at = next(i for i, r in enumerate(recs)
              if r.get("dir") == "c2a" and '"hello 5"' in r["raw"])
    recs[at]["raw"] = recs[at]["raw"].replace('"hello 5"', '"changed 5"')
    first = next(r for r in recs[at + 1:] if r.get("dir") == "a2c" and "hello 5" in r["raw"])
    out = tmp_path / "o.jsonl"
    p = _redrive(_write(tmp_path / "t.jsonl", recs), out)
    assert p.returncode == 1
    (event,) = _events(p)
    assert event["event"] == "difference" and event["kind"] == "content"
    assert event["seq"] == first["seq"]
    assert event["after_client_seq"] == recs[at]["seq"]
    assert any("hello 5" in str(d.get("recorded")) and "changed 5" in str(d.get("received"))
               for d in event["diff"])
    assert f"agent frame seq {first['seq']}" in event["message"]
    assert _records(out)[-1].get("end")  # the new run's wire log is whole


def test_a_request_the_recording_cannot_answer_is_a_divergence(echo, tmp_path):
    """The recorded answer to a permission request removed: the live agent asks, the
    recording has nothing to say, and the run stops at once instead of waiting."""
    recs = _records(echo)
    ask = next(r for r in recs if r.get("dir") == "a2c"
               and "session/request_permission" in r["raw"])
    rid = orjson.loads(ask["raw"])["id"]
    recs = [r for r in recs if not (r.get("dir") == "c2a" and "result" in r["raw"]
                                    and orjson.loads(r["raw"]).get("id") == rid
                                    and "method" not in orjson.loads(r["raw"]))]
    p = _redrive(_write(tmp_path / "t.jsonl", recs), tmp_path / "o.jsonl", timeout="60")
    assert p.returncode == 1
    (event,) = _events(p)
    assert (event["event"], event["kind"]) == ("difference", "unanswerable")
    assert event["seq"] == ask["seq"]


#: an agent request whose keys are spelt with escapes: bytes without a plain "id"
_ESCAPED_ASK = (b'{"jsonrpc":"2.0","\\u0069d":7,"\\u006dethod":"session/request_permission",'
                b'"params":{"sessionId":"s","options":[{"optionId":"y","kind":"allow_once"}]}}')


def test_a_request_spelt_with_escapes_is_still_answered(tmp_path):
    """The recorded agent is the agent (acp-replay TRACE, byte for byte): its permission
    request names ``id`` and ``method`` by \\u escapes only, so no byte search for
    ``"id"`` finds it; the re-drive still knows it for a request and answers it from the
    recording (a missed request would leave the replayed agent waiting: exit 1)."""
    from acp_pipes.io.wire import encode_raw

    frames = [("c2a", b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}'),
              ("a2c", b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}'),
              ("c2a", b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":'
                      b'{"sessionId":"s","prompt":[]}}'),
              ("a2c", _ESCAPED_ASK),
              ("c2a", b'{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"selected",'
                      b'"optionId":"y"}}}'),
              ("a2c", b'{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}')]
    head = {"format": "acp-pipes/wire", "version": 1, "recorder": "test", "argv": [],
            "started": "1970-01-01T00:00:00.000000Z", "clock": "epoch", "env": {}}
    recs = [head] + [{"seq": i, "t": 0, "dir": d, "raw": encode_raw(raw)[1]}
                     for i, (d, raw) in enumerate(frames)]
    trace = _write(tmp_path / "escaped.wire.jsonl", recs)
    out = tmp_path / "rerun.jsonl"
    p = _redrive(trace, out, *tool_argv("replay", str(trace)), limit=60)
    assert p.returncode == 0, p.stderr.decode()
    assert _frames(out, "c2a") == [raw for d, raw in frames if d == "c2a"]
    assert _frames(out, "a2c") == [raw for d, raw in frames if d == "a2c"]


def test_unusable_input_exits_2(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"not json\n")
    p = run_tool("replay", "--client", str(bad), "--", *tool_argv("echo-agent"))
    assert p.returncode == 2, p.stderr


def test_what_refuses_the_run_does_so_before_the_agent_starts(echo, tmp_path):
    """The agent starts as soon as the run can go, before the driver is loaded (its
    start-up overlaps acp-replay's): an unusable trace, a bad option or a file that
    cannot be written still exits 2 with the reason, and the agent never ran."""
    mark = tmp_path / "started"
    agent = ["sh", "-c", f'touch "{mark}"; exec "$@"', "sh", *tool_argv("echo-agent")]
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"not json\n")
    cases = [
        ([str(bad)], b"expected a wire log (acp-tee) or frames (acp-frame)"),
        (["--ignore", "params", str(echo)], b"--ignore: JSON pointer must be empty"),
        (["--timeout", "0", str(echo)], b"--timeout must be positive"),
        (["--clock", "bogus", str(echo)], b"--clock must be system, epoch or nanos:N"),
        (["--remap-ids", "--remap-log", str(tmp_path / "no" / "r.jsonl"), str(echo)],
         b"cannot write"),
    ]
    for argv, said in cases:
        p = run_tool("replay", "--client", *argv, "--", *agent)
        assert p.returncode == 2 and said in p.stderr, (argv, p.stderr)
        assert not mark.exists(), argv
    p = run_tool("replay", "--client", str(echo), "-o", str(tmp_path / "o.jsonl"), "--",
                 *agent)
    assert p.returncode == 0 and mark.exists(), p.stderr  # (the agent of the cases above)


def test_what_is_found_unusable_once_the_agent_runs_ends_it(echo, tmp_path):
    """A trace found unusable once the agent runs (a second stream in it): exit 2 with
    the file and line, and the agent was ended, not left behind."""
    lines = echo.read_bytes().splitlines(keepends=True)
    spoilt = tmp_path / "two.jsonl"
    spoilt.write_bytes(b"".join(lines[:4]) + lines[0] + b"".join(lines[4:]))
    pid = tmp_path / "pid"
    agent = ["sh", "-c", f'echo $$ > "{pid}"; exec "$@"', "sh", *tool_argv("echo-agent")]
    p = run_tool("replay", "--client", str(spoilt), "--", *agent)
    assert p.returncode == 2, p.stderr
    assert b"two.jsonl:5: a trace is one recorded session" in p.stderr
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid.read_text()), 0)  # ended and reaped
    pid.unlink()
    # a plain command line starts the agent before parsing: an -o that cannot be
    # written is found after, and ends it the same way
    nowhere = tmp_path / "no" / "o.jsonl"
    p = run_tool("replay", "--client", str(echo), "-o", str(nowhere), "--", *agent,
                 process=True, timeout=60)
    assert p.returncode == 2 and f"cannot write {nowhere}".encode() in p.stderr, p.stderr
    if pid.exists():  # (it may be ended before its shell wrote its pid)
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid.read_text()), 0)


# fast-agent: a real agent that mints its own session and tool-call ids

@pytest.fixture(scope="module")
def fast(tmp_path_factory) -> dict:
    from tests.test_fast_agent import _session, fast_agent_argv

    pytest.importorskip("acp")
    tmp = tmp_path_factory.mktemp("fast-redrive")
    ws = tmp / "ws"
    ws.mkdir()
    wire = tmp / "fast.wire.jsonl"
    asyncio.run(asyncio.wait_for(_session(wire, ws), 120))
    return {"wire": wire, "argv": fast_agent_argv(), "tmp": tmp}


@pytest.mark.slow  # the real fast-agent
def test_a_fast_agent_session_with_tool_calls_redrives_with_exit_0(fast, tmp_path):
    recs = _records(fast["wire"])
    methods = {orjson.loads(r["raw"]).get("method") for r in recs if r.get("dir") == "a2c"}
    assert {"session/request_permission", "fs/write_text_file", "fs/read_text_file",
            "terminal/create"} <= methods  # the session is what this test says it is
    out = tmp_path / "rerun.jsonl"
    p = _redrive(fast["wire"], out, *fast["argv"], timeout="60")
    assert p.returncode == 0, p.stderr.decode()
    assert p.stderr == b""
    old = orjson.loads(next(r["raw"] for r in recs if '"sessionId"' in r.get("raw", "")
                            and r["dir"] == "a2c"))["result"]["sessionId"]
    sent = _frames(out, "c2a")
    prompts = [orjson.loads(x) for x in sent if b'"session/prompt"' in x]
    assert len(prompts) == 5
    live = {x["params"]["sessionId"] for x in prompts}
    assert len(live) == 1 and old not in live  # every prompt carries the new session id


@pytest.mark.slow  # the real fast-agent
def test_a_changed_prompt_in_a_fast_agent_trace_exits_1(fast, tmp_path):
    recs = _records(fast["wire"])
    at = next(i for i, r in enumerate(recs) if r.get("dir") == "c2a" and "goodbye" in r["raw"])
    recs[at]["raw"] = recs[at]["raw"].replace("goodbye", "farewell")
    echoed = next(r for r in recs[at:] if r.get("dir") == "a2c" and "goodbye" in r["raw"])
    p = _redrive(_write(tmp_path / "t.jsonl", recs), tmp_path / "o.jsonl", *fast["argv"],
                 timeout="60")
    assert p.returncode == 1
    (event,) = _events(p)
    assert (event["event"], event["kind"]) == ("difference", "content")
    assert event["seq"] == echoed["seq"]
    assert {"op": "replace", "path": "/params/update/content/text", "recorded": "goodbye",
            "received": "farewell"} in event["diff"]


@pytest.mark.slow  # the real fast-agent
def test_a_changed_agent_exits_1_at_its_first_frame(fast, tmp_path):
    """The echo agent driven with fast-agent's recording: its initialize answer is not
    fast-agent's."""
    p = _redrive(fast["wire"], tmp_path / "o.jsonl")
    assert p.returncode == 1
    (event,) = _events(p)
    assert (event["event"], event["kind"]) == ("difference", "result")
    assert event["seq"] == 1 and event["method"] is None and event["diff"]


# the pipes: one thread writes the agent's input and reads its output

#: An agent that answers initialize, then, once the prompt starts to come (bigger than the
#: pipe holds), writes FLOOD notifications of its turn (its stdout pipe fills) before it
#: reads the rest of the prompt, then answers that; it says hello on stderr. With a
#: driver that writes while nothing reads the agent, both sides would wait on each other
#: for ever.
_FLOODING_AGENT = r"""
import sys
out, inp = sys.stdout.buffer, sys.stdin.buffer
sys.stderr.write("agent says hi\n"); sys.stderr.flush()
first = inp.readline()
out.write(b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}\n'); out.flush()
start = inp.read(1)
for i in range(FLOOD):
    out.write(NOTE % i + b"\n")
out.write(b'{"jsonrpc":"2.0","method":"x/odd","params":{"b":"\xff\xfe"}}\n')
out.flush()
prompt = start + inp.readline()
assert len(prompt) > (1 << 20), len(prompt)
out.write(b'{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn","n":%d}}\n'
          % len(prompt))
out.flush()
inp.read()
"""

#: a notification with what the log must escape (a quote, a backslash, non-ASCII), ~1 KB
_NOTE = (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s",'
         b'"update":{"text":"%d \\"quoted\\" back\\\\slash \xc3\xa9 ' + b"x" * 900 + b'"}}}')
_FLOOD = 600  # ~600 KB: several times what a pipe holds


def _flooding_agent(tmp_path: Path) -> list[str]:
    import sys

    script = tmp_path / "flood_agent.py"
    script.write_text(_FLOODING_AGENT.replace("FLOOD", str(_FLOOD))
                      .replace("NOTE", repr(_NOTE)))
    return [sys.executable, str(script)]


def _flood_trace(tmp_path: Path, prompt: bytes) -> Path:
    from acp_pipes.io.wire import encode_raw

    frames = [("c2a", b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}'),
              ("a2c", b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}'),
              ("c2a", prompt)]
    frames += [("a2c", _NOTE % i) for i in range(_FLOOD)]
    frames.append(("a2c", b'{"jsonrpc":"2.0","method":"x/odd","params":{"b":"\xff\xfe"}}'))
    frames.append(("a2c", b'{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn","n":%d}}'
                   % (len(prompt) + 1)))
    head = {"format": "acp-pipes/wire", "version": 1, "recorder": "test", "argv": [],
            "started": "1970-01-01T00:00:00.000000Z", "clock": "epoch", "env": {}}
    recs = [head]
    for i, (d, raw) in enumerate(frames):
        key, value = encode_raw(raw)
        recs.append({"seq": i, "t": 0, "dir": d, key: value})
    return _write(tmp_path / "flood.wire.jsonl", recs)


def _big_prompt(size: int) -> bytes:
    return (b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s",'
            b'"prompt":[{"type":"text","text":"' + b"y" * size + b'"}]}}')


def test_a_big_prompt_goes_while_the_agent_floods_its_output(tmp_path):
    """The prompt (2 MB) is sent while the agent writes 600 KB without reading: neither
    pipe can hold its side, so the prompt goes in pieces as the agent reads, its output
    read meanwhile. The run passes, its log holds every frame (the one that is not
    UTF-8 too) as orjson writes a record, and the agent's stderr is passed through."""
    prompt = _big_prompt(2 << 20)
    trace = _flood_trace(tmp_path, prompt)
    out = tmp_path / "rerun.jsonl"
    p = _redrive(trace, out, *_flooding_agent(tmp_path), limit=60)  # a deadlock fails
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    assert p.stderr == b"agent says hi\n"
    assert _frames(out, "c2a") == _frames(trace, "c2a")
    assert _frames(out, "a2c") == _frames(trace, "a2c")
    lines = out.read_bytes().splitlines()
    assert all(line == orjson.dumps(orjson.loads(line)) for line in lines)
    assert [r["seq"] for r in _records(out)[1:-1]] == list(range(len(lines) - 2))


#: An agent that answers initialize and then neither reads nor writes again.
_DEAF_AGENT = r"""
import sys, time
sys.stdin.buffer.readline()
sys.stdout.buffer.write(b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}\n')
sys.stdout.flush()
time.sleep(60)
"""


def test_an_agent_that_stops_reading_is_a_timeout_not_a_hang(tmp_path):
    """The prompt is bigger than the agent's input pipe holds and the agent never reads
    it: the run does not wait for ever on the write, it stops at --timeout (exit 1)."""
    import sys

    script = tmp_path / "deaf_agent.py"
    script.write_text(_DEAF_AGENT)
    trace = _flood_trace(tmp_path, _big_prompt(1 << 20))
    p = _redrive(trace, tmp_path / "o.jsonl", sys.executable, str(script), timeout="1",
                 limit=60)
    assert p.returncode == 1
    (event,) = _events(p)
    assert (event["event"], event["kind"]) == ("difference", "timeout")
    assert event["received"] == 1
    assert _records(tmp_path / "o.jsonl")[-1].get("end")  # the agent ended, and said so


@pytest.mark.parametrize("options", [
    [],
    ["-o", "{out}"],
    ["--output", "{out}", "--timeout", "5", "--clock", "epoch", "--no-host"],
    ["--strict", "--remap-ids", "--session", "s1", "--pace", "recorded", "--color", "never"],
    ["--timeout", "0.5", "-o", "{out}", "--strict"],
])
def test_a_plain_client_command_line_is_one_the_parser_accepts(echo, tmp_path, options):
    """acp-replay starts --client's agent before parsing only for command lines
    ``plain_client`` accepts: each is a --client run the parser takes, with the same
    command, the checks of the mode passed (so no usage error follows a start)."""
    from acp_pipes.cli.replay import plain_client
    from acp_pipes.cli.replay_tool import TOOL, _sniff, choose

    words = [w.format(out=tmp_path / "o.jsonl") for w in options]
    for argv in (["--client", *words, str(echo)], [str(echo), *words, "--client"]):
        command = ["acp-echo-agent", "--x", "--", "y"]
        assert plain_client([*argv, "--", *command]) == command, argv
        args = TOOL.parser().parse_args(argv)
        args.command = command
        name, _fmt, _lines = choose(args, _sniff)
        assert name == "client"


def test_anything_else_goes_the_usual_way(echo, tmp_path):
    from acp_pipes.cli.replay import plain_client

    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"not json\n")
    asr = tmp_path / "s.asr.jsonl"
    asr.write_bytes(b'{"type":"header","asr":"1.0"}\n')
    gz = tmp_path / "t.jsonl.gz"
    gz.write_bytes(b"")
    trace, agent = str(echo), ["--", "agent"]
    for argv in (
        [trace, *agent],  # not --client
        ["--client", trace],  # no command
        ["--client", trace, "--"],
        ["--client", "--client", trace, *agent],
        ["--client", trace, trace, *agent],  # two traces
        ["--client", *agent],  # none
        ["--client", "-", *agent],  # stdin
        ["--client", str(bad), *agent],
        ["--client", str(asr), *agent],
        ["--client", str(gz), *agent],
        ["--client", str(tmp_path / "none.jsonl"), *agent],
        ["--client", str(tmp_path), *agent],  # a directory
        ["--client", trace, "-o", trace, *agent],  # the output is the input
        ["--client", trace, "--timeout", "0", *agent],
        ["--client", trace, "--timeout", "x", *agent],
        ["--client", trace, "--clock", "bogus", *agent],
        ["--client", trace, "--pace", "slow", *agent],
        ["--client", trace, "--ignore", "/x", *agent],
        ["--client", trace, "--remap-ids", "--remap-log", "r.jsonl", *agent],
        ["--client", trace, "--output=o.jsonl", *agent],
        ["--client", trace, "--out", "o.jsonl", *agent],  # an abbreviation
        ["--client", trace, "-o", *agent],
        ["--client", trace, "--help", *agent],
        ["--client", trace, "--max-line-bytes", "1K", *agent],
    ):
        assert plain_client(argv) is None, argv


# the model of the same session (docs/sameness.md), with a recorded agent as the agent:
# acp-replay TRACE plays it byte for byte, in its own order

_HEAD = {"format": "acp-pipes/wire", "version": 1, "recorder": "test", "argv": [],
         "started": "1970-01-01T00:00:00.000000Z", "clock": "epoch", "env": {}}


def _trace(path: Path, frames: list[tuple[str, dict]]) -> Path:
    recs = [_HEAD] + [{"seq": i, "t": 0, "dir": d, "raw": orjson.dumps(m).decode()}
                      for i, (d, m) in enumerate(frames)]
    return _write(path, recs)


def _v1(cwd: str, *turns: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """A v1 session: initialize, session/new in ``cwd``, a prompt per turn (its answer
    last)."""
    out = [("c2a", {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                    "params": {"protocolVersion": 1}}),
           ("a2c", {"jsonrpc": "2.0", "id": 0, "result": {
               "protocolVersion": 1, "agentInfo": {"name": "t", "version": "1"}}}),
           ("c2a", {"jsonrpc": "2.0", "id": 1, "method": "session/new",
                    "params": {"cwd": cwd, "mcpServers": []}}),
           ("a2c", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s"}})]
    for n, frames in enumerate(turns, 2):
        out.append(("c2a", {"jsonrpc": "2.0", "id": n, "method": "session/prompt",
                            "params": {"sessionId": "s", "prompt": [
                                {"type": "text", "text": f"prompt {n}"}]}}))
        out += frames
        out.append(("a2c", {"jsonrpc": "2.0", "id": n, "result": {"stopReason": "end_turn"}}))
    return out


def _update(kind: str, **fields) -> tuple[str, dict]:
    return ("a2c", {"jsonrpc": "2.0", "method": "session/update",
                    "params": {"sessionId": "s", "update": {"sessionUpdate": kind, **fields}}})


def _say(text: str) -> tuple[str, dict]:
    return _update("agent_message_chunk", content={"type": "text", "text": text})


_USAGE = _update("usage_update", used=5, size=100)


def test_a_floating_notification_the_agent_sends_a_turn_later_is_the_same_session(tmp_path):
    """The recording has the usage report before turn 1's answer; the agent under test
    (the other recording, played) sends it after prompt 2: the same session, exit 0. In
    recorded order (--strict-order) it is a difference, as every re-drive was before."""
    a = _trace(tmp_path / "a.jsonl", _v1("/w", [_say("one"), _USAGE], [_say("two")]))
    frames = _v1("/w", [_say("one")], [_USAGE, _say("two")])
    b = _trace(tmp_path / "b.jsonl", frames)
    agent = tool_argv("replay", str(b))
    p = _redrive(a, tmp_path / "o.jsonl", *agent, limit=60)
    assert p.returncode == 0, p.stderr.decode()
    assert p.stderr == b""
    p = run_tool("replay", "--client", str(a), "-o", str(tmp_path / "o2.jsonl"),
                 "--strict-order", "--timeout", "20", "--", *agent, process=True, timeout=60)
    assert p.returncode == 1
    # (the agent, a replay whose client stopped early, may say so on its stderr too)
    (event,) = [e for e in _events(p) if e["event"] != "client_ended"]
    assert (event["event"], event["kind"], event["seq"]) == ("difference", "order", 6)
    assert event["update"] == "usage_update"  # in its place came turn 1's answer


def test_a_floating_notification_that_never_comes_is_a_note(tmp_path):
    a = _trace(tmp_path / "a.jsonl", _v1("/w", [_say("one"), _USAGE]))
    b = _trace(tmp_path / "b.jsonl", _v1("/w", [_say("one")]))
    p = _redrive(a, tmp_path / "o.jsonl", *tool_argv("replay", str(b)), limit=60)
    assert p.returncode == 0, p.stderr.decode()
    (note,) = _events(p)
    assert (note["event"], note["kind"], note["seq"]) == ("note", "floating_missing", 6)


def test_keep_going_lists_every_difference(tmp_path):
    a = _trace(tmp_path / "a.jsonl", _v1("/w", [_say("one")], [_say("two")]))
    b = _trace(tmp_path / "b.jsonl", _v1("/w", [_say("ONE")], [_say("TWO")]))
    agent = tool_argv("replay", str(b))
    p = _redrive(a, tmp_path / "o.jsonl", *agent, limit=60)
    # (the agent, a replay that lost its client at the stop, says so on its stderr too)
    assert p.returncode == 1
    assert [e["seq"] for e in _events(p) if e["event"] == "difference"] == [5]
    p = run_tool("replay", "--client", str(a), "-o", str(tmp_path / "o2.jsonl"),
                 "--keep-going", "--", *agent, process=True, timeout=60)
    assert p.returncode == 1
    assert [(e["kind"], e["seq"], e["pointers"]) for e in _events(p)] == [
        ("content", 5, ["/params/update/content/text"]),
        ("content", 8, ["/params/update/content/text"])]


def _write_request(n: int, path: str) -> list[tuple[str, dict]]:
    """The agent asks to write ``path`` and the recorded client did (``{}``)."""
    return [("a2c", {"jsonrpc": "2.0", "id": 100 + n, "method": "fs/write_text_file",
                     "params": {"sessionId": "s", "path": path, "content": f"text {n}\n"}}),
            ("c2a", {"jsonrpc": "2.0", "id": 100 + n, "result": {}})]


def test_the_recorded_clients_writes_are_performed_under_the_workspace_alone(tmp_path):
    """--workspace DIR performs each write the recorded client performed, under DIR; a
    hostile recording's writes outside it (a path outside, a '..', a symbolic link on
    the way) are not performed, each said as a note, and the run goes on. Without
    --workspace nothing is written."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "link").symlink_to(outside)
    (ws / "file-link").symlink_to(outside / "target.txt")
    asks = [str(ws / "sub" / "notes.txt"), str(outside / "x.txt"), f"{ws}/../escape.txt",
            str(ws / "link" / "y.txt"), str(ws / "file-link"), "relative.txt"]
    turn = [f for n, path in enumerate(asks) for f in _write_request(n, path)]
    trace = _trace(tmp_path / "t.jsonl", _v1(str(ws), turn + [_say("done")]))
    agent = tool_argv("replay", str(trace))
    p = _redrive(trace, tmp_path / "none.jsonl", *agent, limit=60)
    assert p.returncode == 0 and p.stderr == b"", p.stderr
    assert not (ws / "sub").exists()  # without --workspace: nothing written
    p = run_tool("replay", "--client", str(trace), "-o", str(tmp_path / "o.jsonl"),
                 "--workspace", str(ws), "--", *agent, process=True, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    assert (ws / "sub" / "notes.txt").read_text() == "text 0\n"
    refused = [(e["kind"], e["path"]) for e in _events(p)]
    assert refused == [("write_refused", path) for path in asks[1:]]
    assert sorted(os.listdir(outside)) == []  # nothing got out
    assert not (tmp_path / "escape.txt").exists()
    assert sorted(os.listdir(ws)) == ["file-link", "link", "sub"]


def test_a_difference_after_a_write_not_performed_says_so(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    frames = _v1(str(ws), _write_request(0, str(ws / "notes.txt")) + [_say("cat: one")])
    trace = _trace(tmp_path / "t.jsonl", frames)
    frames[-2] = _say("cat: notes.txt: No such file or directory")  # what the agent saw
    agent = tool_argv("replay", str(_trace(tmp_path / "live.jsonl", frames)))
    p = _redrive(trace, tmp_path / "o.jsonl", *agent, limit=60)
    assert p.returncode == 1
    (event,) = [e for e in _events(p) if e["event"] != "client_ended"]
    assert event["kind"] == "content"
    assert event["unperformed_writes"] == [{"path": str(ws / "notes.txt"), "seq": 5}]
    assert "--workspace" in event["message"]


def test_an_agent_that_exits_before_it_says_anything_did_not_start(echo, tmp_path):
    p = _redrive(echo, tmp_path / "o.jsonl", "sh", "-c", "exit 3", limit=60)
    assert p.returncode == 2
    (event,) = _events(p)
    assert event["event"] == "agent_failed" and event["returncode"] == 3


@pytest.mark.slow  # a second of grace
def test_an_agent_that_outlives_the_recording_is_ended_with_all_it_started(tmp_path):
    """The recording done, the agent's input is closed; an agent that does not exit
    (here: a shell that goes on, with a child of its own) is ended after a grace, its
    whole process group, long before --timeout (a re-drive costs the agent's time)."""
    import time

    trace = _trace(tmp_path / "t.jsonl", _v1("/w", [_say("one")]))
    pids = tmp_path / "pids"
    script = (f'echo $$ > "{pids}"; "$@"; sleep 120 & echo $! >> "{pids}"; sleep 120')
    started = time.monotonic()
    p = run_tool("replay", "--client", str(trace), "-o", str(tmp_path / "o.jsonl"),
                 "--timeout", "100", "--", "sh", "-c", script, "sh",
                 *tool_argv("replay", str(trace)), process=True, timeout=60)
    took = time.monotonic() - started
    assert p.returncode == 0, p.stderr.decode()
    assert took < 50  # (the --timeout is 100 s, the shell would sleep 120)
    for pid in map(int, pids.read_text().split()):  # gone (or a zombie no one reaped)
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    assert _records(tmp_path / "o.jsonl")[-1]["signal"] == 15


def test_a_workspace_writes_only_regular_files(tmp_path):
    """A FIFO (or a device) at the path is refused at once, never waited on; a file there
    is replaced whole."""
    from acp_pipes.replay.trace.workspace import Workspace

    ws = Workspace(str(tmp_path))
    os.mkfifo(tmp_path / "fifo")
    assert ws.write(str(tmp_path / "fifo"), "x") is not None
    (tmp_path / "f.txt").write_text("a long old text\n")
    assert ws.write(str(tmp_path / "f.txt"), "new\n") is None
    assert (tmp_path / "f.txt").read_text() == "new\n"
    assert ws.write(str(tmp_path), "x") == "the workspace itself"
    ws.close()


@pytest.mark.slow  # an agent that takes 1.5 s to start
def test_an_agent_may_take_as_long_as_it_took_when_recorded_three_times_over(tmp_path):
    """The recording's agent took a second to answer initialize (its start-up): the live
    one may take up to three, whatever --timeout says; without such a gap in the
    recording (an epoch clock), --timeout is all it has."""
    frames = _v1("/w", [_say("one")])
    slow = _trace(tmp_path / "slow.jsonl", frames)
    recs = _records(slow)
    recs[2]["t"] = 1_000_000_000  # initialize answered a second after it was sent
    for r in recs[3:-1]:
        r["t"] = 1_000_000_000
    slow = _write(tmp_path / "slow.jsonl", recs)
    agent = ["sh", "-c", 'sleep 1.5; exec "$@"', "sh", *tool_argv("replay", str(slow))]
    p = _redrive(slow, tmp_path / "o.jsonl", *agent, timeout="0.5", limit=60)
    assert p.returncode == 0, p.stderr.decode()
    flat = _trace(tmp_path / "flat.jsonl", frames)
    p = _redrive(flat, tmp_path / "o2.jsonl", *agent[:-1], str(flat), timeout="0.5",
                 limit=60)
    assert p.returncode == 1
    (event,) = [e for e in _events(p) if e["event"] == "difference"]
    assert (event["kind"], event["waiting_for"]) == ("timeout", 1)


def test_a_request_matched_by_its_bytes_is_answered_whatever_was_read_ahead(tmp_path):
    """The agent's permission request matched by its bytes is answered from the
    recording whether the trace was read ahead (a file) or is read as the run goes (a
    pipe: every frame admitted to the model before it is matched); and a usage report
    recorded before it that never comes is a note."""
    ask = [("a2c", {"jsonrpc": "2.0", "id": 7, "method": "session/request_permission",
                    "params": {"sessionId": "s", "toolCall": {"toolCallId": "t"},
                               "options": [{"optionId": "ok", "kind": "allow_once"}]}}),
           ("c2a", {"jsonrpc": "2.0", "id": 7, "result": {"outcome": {
               "outcome": "selected", "optionId": "ok"}}})]
    a = _trace(tmp_path / "a.jsonl", _v1("/w", [_USAGE, *ask, _say("done")]))
    b = _trace(tmp_path / "b.jsonl", _v1("/w", [*ask, _say("done")]))
    for trace, given in ((a, {"args": [str(a)]}), (a, {"args": ["-"], "input": a}),
                         (b, {"args": ["-"], "input": b})):
        p = run_tool("replay", "--client", *given["args"], "-o", str(tmp_path / "o.jsonl"),
                     "--timeout", "20", "--", *tool_argv("replay", str(b)),
                     input=given["input"].read_bytes() if "input" in given else None,
                     process=True, timeout=60)
        assert p.returncode == 0, p.stderr.decode()
        notes = [("note", "floating_missing")] if trace is a else []
        assert [(e["event"], e["kind"]) for e in _events(p)] == notes
        assert b'"optionId":"ok"' in b"".join(_frames(tmp_path / "o.jsonl", "c2a"))


# a client that piped its whole script at once: its answers are in its stream before the
# agent asked, and the recorded agent read them in that order


def _tee(wire: Path, *how: str, script: bytes = b"") -> bytes:
    """Record the echo agent through the real acp-tee (``how``: its options, ``script``
    its input); returns what it said on stderr."""
    import subprocess

    from tests.conftest import tool_env

    proc = subprocess.run(tool_argv("tee", *how, "-o", str(wire), "--clock", "epoch",
                                    "--no-host", "--", *tool_argv("echo-agent")),
                          input=script, capture_output=True, env=tool_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stderr


def _record_piped(script: bytes, wire: Path) -> Path:
    """Record ``script`` piped whole into the echo agent through the real acp-tee."""
    assert _tee(wire, script=script) == b""
    return wire


def _answered_ahead(wire: Path) -> int:
    """How many recorded client answers were written before the agent asked."""
    asked: set = set()
    ahead = 0
    for r in _records(wire)[1:]:
        if "dir" not in r:
            continue
        v = orjson.loads(decode_raw(r))
        if r["dir"] == "a2c" and "method" in v and "id" in v:
            asked.add(v["id"])
        elif r["dir"] == "c2a" and "method" not in v:
            ahead += v["id"] not in asked
    return ahead


@pytest.mark.parametrize("script", [
    pytest.param(lambda: (Path(__file__).parent.parent / "examples/hello/client.jsonl")
                 .read_bytes(), id="hello"),
    pytest.param(lambda: b"".join(x + b"\n" for x in client_session(
        6, permission_every=2, elicit_every=3)), id="permissions-and-elicitations"),
])
@pytest.mark.parametrize("order", [[], ["--strict-order"]], ids=["model", "strict-order"])
def test_a_piped_recording_redrives_in_the_recorded_clients_own_order(script, order,
                                                                       tmp_path):
    wire = _record_piped(script(), tmp_path / "piped.wire.jsonl")
    assert _answered_ahead(wire) > 0  # (the case: answers recorded before their requests)
    out = tmp_path / "rerun.jsonl"
    p = run_tool("replay", "--client", str(wire), "-o", str(out), "--timeout", "20",
                 *order, "--", *tool_argv("echo-agent"))
    assert p.returncode == 0, p.stderr.decode()
    # each step after an answer went after it, as the recorded client wrote them: the
    # agent read the same stream and answered the same
    assert _frames(out, "c2a") == _frames(wire, "c2a")
    assert _frames(out, "a2c") == _frames(wire, "a2c")


def test_an_answer_to_no_request_holds_no_step_back(tmp_path):
    """A recorded client answer the agent never asked for (none in the whole recording)
    is never sent, and the step the client wrote after it still goes."""
    script = [x for x in (Path(__file__).parent.parent / "examples/hello/client.jsonl")
              .read_bytes().splitlines() if b"/permission" not in x and b'"result"' not in x]
    script.insert(len(script) - 1, b'{"jsonrpc":"2.0","id":99,"result":{}}')
    wire, client = tmp_path / "stray.wire.jsonl", tmp_path / "stray.client.jsonl"
    client.write_bytes(b"".join(x + b"\n" for x in script))
    said = _tee(wire, "--script", str(client))  # (each frame once the one before went)
    assert said == b"acp-echo-agent: stdin:4: response to unknown request id 99, ignored\n"
    assert _answered_ahead(wire) == 1
    out = tmp_path / "rerun.jsonl"
    p = _redrive(wire, out, timeout="5")
    assert p.returncode == 0, p.stderr.decode()
    stray = b'{"jsonrpc":"2.0","id":99,"result":{}}'
    assert _frames(out, "c2a") == [x for x in _frames(wire, "c2a") if x != stray]
    assert _frames(out, "a2c") == _frames(wire, "a2c")

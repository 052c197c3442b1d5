"""acp-replay TRACE facing a hostile client (or agent): lone surrogates (valid JSON
escapes that orjson refuses to read or write) in a value, the method or the id, and ids
no double holds. Each is matched, or reported as a miss, as any frame is: never an
internal error. Over real pipes, on a session recorded by acp-tee."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from acp_pipes.echo.client import client_session
from tests.conftest import record_lockstep, run_tool, tool_argv


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("hostile")
    client = list(client_session(3))
    wire = d / "wire.jsonl"
    agent = record_lockstep(client, wire)
    framed = run_tool("frame", str(wire), "-o", str(d / "frames.jsonl"))
    assert framed.returncode == 0, framed.stderr
    assert client[2].startswith(b'{"jsonrpc":"2.0","id":2,"method":"session/prompt"')
    assert b'"text":"hello 1"' in client[2]
    return {"client": client, "agent": agent, "wire": wire, "frames": d / "frames.jsonl"}


def _send(client: list[bytes], k: int, old: bytes, new: bytes) -> bytes:
    out = list(client)
    assert old in out[k]
    out[k] = out[k].replace(old, new, 1)
    return b"".join(x + b"\n" for x in out)


def _one_report(stderr: bytes) -> bytes:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    orjson.loads(lines[0].replace(b"\\ud800", b"").replace(b"\\udc00", b""))  # JSON
    return lines[0]


@pytest.mark.parametrize("kind", ["wire", "frames"])
@pytest.mark.parametrize(("old", "new", "received", "diff"), [
    (b'"hello 1"', b'"hello \\ud800"',
     b'"received":{"method":"session/prompt","id":2,',
     b'"diff":[{"op":"replace","path":"/params/prompt/0/text","recorded":"hello 1",'
     b'"received":"hello \\ud800"}]'),
    (b'"id":2,', b'"id":"\\ud800",',
     b'"received":{"method":"session/prompt","id":"\\ud800",',
     b'"diff":[{"op":"replace","path":"/id","recorded":2,"received":"\\ud800"}]'),
    (b'"method":"session/prompt"', b'"method":"\\udc00"',
     b'"received":{"method":"\\udc00","id":2,',
     b'"diff":[{"op":"replace","path":"/method","recorded":"session/prompt",'
     b'"received":"\\udc00"}]'),
], ids=["value", "id", "method"])
def test_a_lone_surrogate_in_a_client_frame_is_reported_as_a_miss(trace, kind, old, new,
                                                                    received, diff):
    """The miss report is one JSON line holding the surrogate as the escape the client
    sent; the frames before it were replayed."""
    p = run_tool("replay", str(trace[kind]), input=_send(trace["client"], 2, old, new))
    assert p.returncode == 1, p.stderr
    line = _one_report(p.stderr)
    assert line.startswith(b'{"event":"miss","tool":"acp-replay","expected":{"seq":')
    assert received in line and line.endswith(diff + b"}")
    assert b'"consumed":2,' in line
    assert p.stdout and trace["agent"].startswith(p.stdout)


def test_match_any_reports_a_lone_surrogate_as_a_miss(trace):
    p = run_tool("replay", "--match", "any", str(trace["wire"]),
                 input=_send(trace["client"], 2, b'"hello 1"', b'"hello \\ud800"'))
    assert p.returncode == 1, p.stderr
    line = _one_report(p.stderr)
    assert line.startswith(b'{"event":"miss",') and b'"received":"hello \\ud800"' in line


@pytest.mark.parametrize("token", [b'"\\ud800"', b"1e400", b"1e-400", b"1" * 30,
                                   b'"a\\u0041"'])
def test_remap_log_writes_each_live_id_as_sent(trace, tmp_path: Path, token):
    """--remap-ids answers the client's own id token, and --remap-log writes it byte for
    byte: a lone surrogate, numbers no double holds, an escaped string."""
    log = tmp_path / "ids.jsonl"
    p = run_tool("replay", "--remap-ids", "--remap-log", str(log), str(trace["frames"]),
                 input=_send(trace["client"], 2, b'"id":2,', b'"id":' + token + b","))
    assert p.returncode == 0 and p.stderr == b"", p.stderr
    assert (b'{"recorded":2,"live":' + token + b',"dir":"c2a","seq":') in log.read_bytes()
    assert b'\n{"jsonrpc":"2.0","id":' + token + b',"result":{"messageId":' in p.stdout


def test_client_mode_reports_an_agent_frame_with_a_lone_surrogate(trace, tmp_path: Path,
                                                                   monkeypatch):
    """--client: an agent that answers with lone surrogates (its text and an id) gets
    the first difference reported as one JSON line, with the escapes it sent."""
    spoil = ("import sys\nfor line in sys.stdin.buffer:\n"
             "    sys.stdout.buffer.write(line.replace(b'Echo:', b'\\\\ud800')"
             ".replace(b'\"id\":2,', b'\"id\":\"\\\\udc00\",'))\n"
             "    sys.stdout.buffer.flush()\n")
    agent = " ".join(tool_argv("echo-agent")) + f" | {sys.executable} -c \"$SPOIL\""
    monkeypatch.setenv("SPOIL", spoil)  # the agent's shell reads it
    p = run_tool("replay", "--client", str(trace["wire"]), "-o", str(tmp_path / "run.jsonl"),
                 "--", "sh", "-c", agent, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 1, p.stderr
    assert b"internal error" not in p.stderr
    (report,) = p.stderr.splitlines()
    assert report.startswith(b'{"event":"difference",')
    assert b'"received":"\\udc00"' in report  # the id it sent, in the diff


def test_a_client_value_nested_1000_deep_is_reported_as_a_miss(trace):
    """orjson reads 1000 levels, but the miss report around that value nests past what it
    (and the json module) writes: the report is still one JSON line holding the value."""
    deep = b"[" * 1000 + b'"x"' + b"]" * 1000
    p = run_tool("replay", str(trace["wire"]),
                 input=_send(trace["client"], 2, b'"hello 1"', deep))
    assert p.returncode == 1, p.stderr
    line = _one_report(p.stderr)
    assert line.endswith(b'"diff":[{"op":"replace","path":"/params/prompt/0/text",'
                         b'"recorded":"hello 1","received":' + deep + b"}]}")

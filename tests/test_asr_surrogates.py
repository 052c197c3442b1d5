"""Lone surrogates in a recording (``"\\ud800"``: valid JSON, no Unicode text; orjson
refuses to read or write it). acp-asr stores such a frame with each lone surrogate
replaced by U+FFFD, says so naming the file and line, and declares the loss
``_org.agent-session.acp/lone_surrogates`` in the session's stream; nothing around it is
lost. Every reader of ASR streams reads a record holding one the same way, and
``acp-asr --validate`` reports it. Through the real executables (docs/asr.md, "Paths")."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from acp_pipes.protocol.canonical import parse_json, without_surrogates
from tests.conftest import run_tool

LOSS = "_org.agent-session.acp/lone_surrogates"
HEADER = {"format": "acp-pipes/wire", "version": 1, "recorder": "test", "argv": ["agent"],
          "started": "2025-11-24T16:00:00.000000Z", "clock": "nanos", "env": {}}
# the raw text of each frame, as an agent or client sent it: the escapes are literal
FRAMES = [
    ("c2a", r'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,'
            r'"info":{"name":"c","version":"1"},"capabilities":{}}}'),
    ("a2c", r'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"info":{"name":"a",'
            r'"version":"1"},"capabilities":{}}}'),
    ("c2a", r'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/ws",'
            r'"mcpServers":[]}}'),
    ("a2c", r'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}'),
    ("c2a", r'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s",'
            r'"prompt":[{"type":"text","text":"bad \ud800 here"}]}}'),
    ("a2c", r'{"jsonrpc":"2.0","id":2,"result":{"messageId":"u1"}}'),
    ("a2c", r'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":'
            r'{"sessionUpdate":"agent_message_chunk","messageId":"a1","content":{"type":'
            r'"text","text":"ok \udc01"}}}}'),
    ("a2c", r'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":'
            r'{"sessionUpdate":"agent_message_chunk","messageId":"a1","content":{"type":'
            r'"text","text":" and \ud83d\ude00"}}}}'),  # a pair: a real character, kept
    ("a2c", r'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":'
            r'{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}}}'),
]


@pytest.fixture
def wire(tmp_path: Path) -> Path:
    lines = [orjson.dumps(HEADER)]
    for seq, (d, raw) in enumerate(FRAMES):
        lines.append(orjson.dumps({"seq": seq, "t": 1764000000000000000 + seq * 1000000,
                                   "dir": d, "raw": raw}))
    path = tmp_path / "s.wire.jsonl"
    path.write_bytes(b"".join(x + b"\n" for x in lines))
    return path


def _records(out: bytes) -> list[dict]:
    return [orjson.loads(x) for x in out.splitlines()]


def test_frames_with_lone_surrogates_are_stored_with_u_fffd(wire):
    got = run_tool("asr", str(wire))
    assert got.returncode == 0, got.stderr.decode()
    recs = _records(got.stdout)
    assert recs[0]["type"] == "header" and LOSS in recs[0]["producer"]["lossy"]
    texts = {r["messageId"]: r["content"][0]["text"] for r in recs if r["type"] == "message"}
    assert texts == {"u1": "bad \ufffd here", "a1": "ok \ufffd and \U0001f600"}
    # each replaced frame named by its line (the header is line 1, frame n is line n+2)
    assert got.stderr.decode().splitlines() == [
        f"acp-asr: {wire}:{n}: a string holds a lone surrogate (no UTF-8 form): stored "
        "as U+FFFD" for n in (6, 8)]
    # the stream is valid ASR, and acp-fold | acp-asr stores the same bytes
    checked = run_tool("asr", "--validate", "-", input=got.stdout)
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()
    folded = run_tool("fold", str(wire))
    assert folded.returncode == 0
    assert run_tool("asr", "-", input=folded.stdout).stdout == got.stdout


def test_a_clean_recording_declares_no_such_loss(wire):
    clean = wire.read_bytes().replace(rb"\\ud800", b"x").replace(rb"\\udc01", b"y")
    got = run_tool("asr", "-", input=clean)
    assert got.returncode == 0 and got.stderr == b""
    assert LOSS not in _records(got.stdout)[0]["producer"]["lossy"]


@pytest.fixture
def stream(wire, tmp_path) -> Path:
    """An ASR stream whose user message holds the escape (written by another tool)."""
    out = run_tool("asr", str(wire)).stdout
    assert out.count("\ufffd".encode()) == 2
    path = tmp_path / "s.asr.jsonl"
    path.write_bytes(out.replace("bad \ufffd".encode(), rb"bad \ud800", 1))
    return path


def test_replay_reads_a_record_with_a_lone_surrogate(stream):
    got = run_tool("replay", str(stream))
    assert got.returncode == 0, got.stderr.decode()
    sent = [orjson.loads(x) for x in got.stdout.splitlines()]
    user = [m["params"]["update"] for m in sent
            if m["params"]["update"]["sessionUpdate"] == "user_message"]
    assert user[0]["content"][0]["text"] == "bad \ufffd here"  # not skipped as "not JSON"
    assert (f"acp-replay: {stream}:2: a string holds a lone surrogate (no UTF-8 form): "
            "read as U+FFFD") in got.stderr.decode()


def test_validate_reports_the_lone_surrogate_and_checks_the_rest(stream):
    got = run_tool("asr", "--validate", str(stream))
    assert got.returncode == 1
    assert got.stderr.decode().splitlines() == [
        f"{stream}:2: : a string holds a lone surrogate (no UTF-8 form); the rest of the "
        "record is checked"]  # no "seq must count up" for the record after it


def test_without_surrogates_replaces_in_keys_and_values_at_any_depth():
    value = parse_json(rb'{"k\ud800":["a\udc00b",{"n":1,"ok":"\ud83d\ude00"}]}')
    got, replaced = without_surrogates(value)
    assert replaced and got == {"k\ufffd": ["a\ufffdb", {"n": 1, "ok": "\U0001f600"}]}
    assert value == parse_json(rb'{"k\ud800":["a\udc00b",{"n":1,"ok":"\ud83d\ude00"}]}')
    assert without_surrogates({"a": [1, "x"]}) == ({"a": [1, "x"]}, False)
    deep: list = ["\ud800"]
    for _ in range(5000):  # deeper than recursion goes
        deep = [deep]
    assert without_surrogates(deep)[1] is True

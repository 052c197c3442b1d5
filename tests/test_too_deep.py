"""A frame (or a record line) nested deeper than the parsers read (1024 levels) is JSON
for all a reader can tell: every reader says it is too deep to parse, never "not JSON",
and exits as it exits for a frame that is not JSON (the real executables, a 100,000-deep
frame as a peer could send it)."""

from __future__ import annotations

import orjson
import pytest

from acp_pipes.io.wire import end_record, frame_record, header
from tests.conftest import run_tool

DEPTH = 100_000
INIT = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'
DEEP = (b'{"jsonrpc":"2.0","method":"x/deep","params":{"v":' + b"[" * DEPTH + b"]" * DEPTH
        + b"}}")
BROKEN = b'{"jsonrpc":"2.0","method":"x/broken","params":'


def _log(path, third: bytes | None = None, line: bytes | None = None) -> str:
    """A wire log: initialize, its answer, then a client frame ``third`` (or a record
    ``line`` written as it is), then the end record."""
    recs = [header(["agent"], started_ns=0, clock="epoch", host=False),
            frame_record(0, 0, "c2a", INIT),
            frame_record(1, 0, "a2c", b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}')]
    lines = [orjson.dumps(r) for r in recs]
    if third is not None:
        lines.append(orjson.dumps(frame_record(2, 0, "c2a", third)))
    if line is not None:
        lines.append(line)
    lines.append(orjson.dumps(end_record(0, 0, 3)))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return str(path)


READERS = {
    "frame": lambda p: ("frame", p),
    "frame --validate": lambda p: ("frame", "--validate", p),
    "fold": lambda p: ("fold", p),
    "asr": lambda p: ("asr", p),
    "view": lambda p: ("view", p, "-o", p + ".html"),
    "export": lambda p: ("export", "otlp", p, "-o", p + ".otlp.json"),
    "align": lambda p: ("align", p, p),
    "replay --emit": lambda p: ("replay", "--emit", "c2a", p),
}


@pytest.mark.parametrize("reader", READERS)
def test_a_deep_frame_is_too_deep_with_the_status_of_any_bad_frame(tmp_path, reader):
    deep = run_tool(*READERS[reader](_log(tmp_path / "deep.jsonl", DEEP)))
    broken = run_tool(*READERS[reader](_log(tmp_path / "broken.jsonl", BROKEN)))
    assert deep.returncode == broken.returncode, (deep.stderr, broken.stderr)
    assert b"not JSON" in broken.stderr or reader == "replay --emit", broken.stderr
    assert b"not JSON" not in deep.stderr, deep.stderr
    if reader != "replay --emit":  # (it emits the bytes; it parses none)
        assert b"deep.jsonl:4: " in deep.stderr and b"too deep to parse" in deep.stderr, \
            deep.stderr


@pytest.mark.parametrize("reader", ["frame", "fold", "asr", "view", "replay --emit"])
def test_a_deep_record_line_is_too_deep_with_the_status_of_any_bad_line(tmp_path, reader):
    line = b'{"seq":2,"t":0,"dir":"c2a","raw":"{}","x":' + b"[" * DEPTH + b"]" * DEPTH + b"}"
    deep = run_tool(*READERS[reader](_log(tmp_path / "deep.jsonl", line=line)))
    broken = run_tool(*READERS[reader](_log(tmp_path / "broken.jsonl",
                                            line=b'{"seq":2,"t":0,')))
    assert deep.returncode == broken.returncode, (deep.stderr, broken.stderr)
    assert b"broken.jsonl:4: not JSON" in broken.stderr, broken.stderr
    assert b"deep.jsonl:4: too deep to parse" in deep.stderr, deep.stderr
    assert b"not JSON" not in deep.stderr


def test_replay_as_the_agent_says_a_deep_client_frame_is_too_deep(tmp_path):
    """The miss report's ``received`` says what the client's frame was."""
    trace = _log(tmp_path / "t.jsonl")
    deep = run_tool("replay", trace, input=DEEP + b"\n")
    broken = run_tool("replay", trace, input=BROKEN + b"\n")
    assert deep.returncode == broken.returncode == 1
    assert orjson.loads(deep.stderr.splitlines()[0])["received"]["error"] == \
        "too deep to parse"
    assert orjson.loads(broken.stderr.splitlines()[0])["received"]["error"] == "not JSON"

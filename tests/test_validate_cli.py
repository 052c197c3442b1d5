"""acp-frame --validate as a user runs it: exit status, JSON lines, the summary line,
the table on a terminal, bare streams, usage errors."""

from __future__ import annotations

import orjson

from acp_pipes.frame.core import read_frames
from acp_pipes.frame.validate import reports
from tests.conftest import run_tool
from tests.test_frame import echo_wire, wire_log
from tests.test_validate import m, v1, v2
from tests.ttys import run_tool_tty


def bad_wire() -> bytes:
    """A real echo session, then a prompt for a session that does not exist."""
    return wire_log([*echo_wire(1), ("c2a", orjson.dumps(m(id=90, method="session/prompt",
                     params={"sessionId": "nope", "prompt": []})))])


def test_valid_recording_exits_0_with_one_summary_line(tmp_path):
    p = tmp_path / "wire.jsonl"
    p.write_bytes(wire_log(echo_wire(2)))
    r = run_tool("frame", "--validate", str(p))
    assert r.returncode == 0 and r.stderr == b""
    (s,) = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert s == {"type": "summary", "source": str(p), "protocolVersion": 2,
                 "versionFrom": "agreed", "schema": "v2.0.0-alpha.9", "stable": False,
                 "paired": True, "frames": len(echo_wire(2)), "unstable": 0,
                 "violations": 0, "warnings": 0, "rules": {}, "schemaFrom": "default"}


def test_violations_exit_1_one_json_line_each_then_the_summary(tmp_path):
    p = tmp_path / "wire.jsonl"
    p.write_bytes(bad_wire())
    r = run_tool("frame", "--validate", str(p))
    assert r.returncode == 1
    lines = [orjson.loads(x) for x in r.stdout.splitlines()]
    seq = len(echo_wire(1))
    assert [(x["type"], x.get("rule"), x.get("seq")) for x in lines] == [
        ("violation", "unknown-session", seq), ("violation", "unanswered", seq),
        ("summary", None, None)]
    assert list(lines[0]) == ["type", "seq", "dir", "kind", "method", "id", "rule", "pointer",
                              "message", "schema", "location", "words"]
    assert lines[-1]["violations"] == 2
    assert lines[-1]["rules"] == {"unanswered": 1, "unknown-session": 1}
    # the CLI writes exactly what the library reports
    lib = [r for r in reports(read_frames(p, headers=True))]
    lib[-1] = {"type": "summary", "source": str(p), **{k: v for k, v in lib[-1].items()
                                                        if k != "type"}}
    assert lines == lib


def test_stdin_several_files_and_a_bare_stream(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_bytes(wire_log(echo_wire(1)))
    bare = tmp_path / "agent.jsonl"
    bare.write_bytes(b"".join(raw + b"\n" for d, raw in echo_wire(1) if d == "a2c"))
    r = run_tool("frame", "--validate", "--dir", "a2c", str(good), str(bare))
    assert r.returncode == 0, r.stdout
    s1, s2 = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert (s1["source"], s1["paired"]) == (str(good), True)
    assert (s2["source"], s2["paired"], s2["protocolVersion"]) == (str(bare), False, 2)
    r = run_tool("frame", "--validate", input=bad_wire())
    assert r.returncode == 1 and orjson.loads(r.stdout.splitlines()[-1])["source"] == "stdin"


def test_bad_input_lines_are_reported_on_stderr_and_as_violations(tmp_path):
    p = tmp_path / "wire.jsonl"
    p.write_bytes(wire_log([*echo_wire(1), ("c2a", b"{torn")]))
    r = run_tool("frame", "--validate", str(p))
    assert r.returncode == 1
    assert b"not JSON" in r.stderr and str(p).encode() in r.stderr
    v = orjson.loads(r.stdout.splitlines()[0])
    assert (v["rule"], v["seq"]) == ("not-json", len(echo_wire(1)))


def test_an_error_with_id_null_answers_what_could_not_be_read(tmp_path):
    """JSON-RPC 2.0 answers a request whose id could not be detected (a parse error, an
    invalid request) with id null: no unknown response, in each revision (v1 and
    alpha.9 take a null RequestId, SDK 2.4.0's error response id takes null alone). The
    frame it answers need not be one the wire shows unreadable; a result with id null
    still answers nothing."""
    p = tmp_path / "wire.jsonl"
    parse = orjson.dumps(m(id=None, error={"code": -32700, "message": "Parse error"}))
    invalid = orjson.dumps(m(id=None, error={"code": -32600, "message": "Invalid Request"}))
    for convo, schema in ((v1(), "v1"), (v2(), "v2.0.0-alpha.9"), (v2(), "v2-sdk-2.4.0")):
        base = [(d, orjson.dumps(x)) for d, x in convo]
        seq = len(base)

        def rules(extra, schema=schema, base=base):
            p.write_bytes(wire_log([*base, *extra]))
            r = run_tool("frame", "--validate", "--schema", schema, str(p))
            return [(x["rule"], x["seq"]) for x in map(orjson.loads, r.stdout.splitlines())
                    if x["type"] == "violation"]

        assert rules([("c2a", b"{torn"), ("a2c", parse),
                      ("c2a", b'{"id":5,"method":"session/prompt"}'), ("a2c", invalid)]) \
            == [("not-json", seq), ("not-jsonrpc", seq + 2)], schema
        assert rules([("a2c", invalid), ("a2c", invalid)]) == [], schema
        assert ("unknown-response", seq) in rules(
            [("a2c", orjson.dumps(m(id=None, result={})))]), schema


def test_protocol_and_stable_options(tmp_path):
    p = tmp_path / "wire.jsonl"
    p.write_bytes(wire_log(echo_wire(1)))
    r = run_tool("frame", "--validate", "--protocol", "1", str(p))
    s = orjson.loads(r.stdout.splitlines()[-1])
    assert r.returncode == 1 and (s["protocolVersion"], s["versionFrom"]) == (1, "forced")
    r = run_tool("frame", "--validate", "--stable", str(p))
    s = orjson.loads(r.stdout.splitlines()[-1])
    assert r.returncode == 0 and s["stable"] is True


def test_usage_errors():
    for args in (["--protocol", "2"], ["--stable"], ["--format", "json"],
                 ["--validate", "--summary"], ["--validate", "--protocol", "3"]):
        r = run_tool("frame", *args, input=b"")
        assert r.returncode == 2, args
        assert r.stdout == b""


def test_help_tells_validate():
    r = run_tool("frame", "--help")
    text = r.stdout.decode()
    assert r.returncode == 0
    for word in ("--validate", "--protocol", "--stable", "1 --validate found violations"):
        assert word in text


def test_a_table_on_a_terminal_with_colour_unless_no_color(tmp_path):
    p = tmp_path / "wire.jsonl"
    p.write_bytes(bad_wire())
    run = run_tool_tty("frame", "--validate", str(p), env={"NO_COLOR": "1"})
    lines = run.stdout.decode().strip().splitlines()
    assert run.returncode == 1
    assert lines[0].split() == ["seq", "dir", "method", "rule", "pointer", "message"]
    seq = len(echo_wire(1))
    assert lines[1].split()[:5] == [str(seq), "c2a", "session/prompt", "unknown-session",
                                    "/params/sessionId"]
    assert lines[-1] == (f"{p}: {seq + 1} frames, ACP 2 (agreed), v2.0.0-alpha.9: "
                         "2 violations: unanswered 1, unknown-session 1")
    assert b"\x1b[" not in run.stdout
    coloured = run_tool_tty("frame", "--validate", str(p))
    assert b"\x1b[1;31m2 violations\x1b[0m" in coloured.stdout
    # --format json on a terminal, and a table through a pipe when asked
    assert run_tool_tty("frame", "--validate", "--format", "json", str(p)).stdout[:1] == b"{"
    r = run_tool("frame", "--validate", "--format", "table", str(p))
    assert r.stdout.startswith(b"    seq  dir") and b"\x1b[" not in r.stdout


def test_a_recorded_string_cannot_drive_the_terminal(tmp_path):
    p = tmp_path / "wire.jsonl"
    evil = m(id=5, method="session/\x1b[2Jx", params={})
    p.write_bytes(wire_log([*echo_wire(1), ("c2a", orjson.dumps(evil)),
                            ("a2c", orjson.dumps(m(id=5, result={})))]))
    r = run_tool("frame", "--validate", "--format", "table", str(p))
    assert r.returncode == 1
    assert b"\x1b" not in r.stdout and b"\\u001b[2Jx" in r.stdout

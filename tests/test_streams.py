"""One judge for every stream header (acp_pipes.io.streams.judge), the wire log's end record,
and old recordings kept readable: one fixture per old format version
(tests/fixtures/formats/<format>-v<version>.jsonl), read by every reader."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import orjson
import pytest

from acp_pipes.errors import InputError
from acp_pipes.io.streams import (
    ASR,
    FOLD,
    FRAMES,
    MIGRATIONS,
    VERSIONS,
    WIRE,
    judge,
    migrate,
)
from acp_pipes.replay.trace.tracefile import load_trace
from tests.conftest import REPO, record_lockstep, run_tool, tool_argv, tool_env

FORMATS = REPO / "tests" / "fixtures" / "formats"
WIRE_V1 = FORMATS / "wire-v1.jsonl"
FRAMES_V1 = FORMATS / "frames-v1.jsonl"
ALL = (WIRE, FRAMES, FOLD)


# -- the judge ------------------------------------------------------------------------


def test_a_record_is_no_header():
    assert judge({"seq": 0, "t": 0, "dir": "c2a", "raw": "{}"}, "f", 2, ALL) is None
    assert judge({"jsonrpc": "2.0", "method": "x"}, "f", 1, ALL) is None
    assert judge(["not", "a", "dict"], "f", 1, ALL) is None


def test_the_wrong_kind_is_named():
    asr = {"type": "header", "asr": "1.0", "sessionId": "s"}
    with pytest.raises(InputError) as e:
        judge(asr, "s.asr.jsonl", 1, (FRAMES,))
    assert str(e.value) == "s.asr.jsonl:1: expected frames, got an ASR stream"
    with pytest.raises(InputError) as e:
        judge({"format": FOLD, "version": 1}, "f", 7, (WIRE, FRAMES), "a wire log or ACP JSONL")
    assert str(e.value) == "f:7: expected a wire log or ACP JSONL, got folded entities"


@pytest.mark.parametrize("fmt", sorted(VERSIONS))
def test_a_newer_version_asks_for_an_update(fmt):
    newer = VERSIONS[fmt] + 1
    with pytest.raises(InputError) as e:
        judge({"format": fmt, "version": newer}, "x.jsonl", 1, ALL)
    msg = str(e.value)
    assert msg.startswith("x.jsonl:1: ") and f"of version {newer}, newer than" in msg
    assert msg.endswith("please update acp-pipes")


@pytest.mark.parametrize("version", [0, -1, "1", 1.0, None, True])
def test_a_version_no_acp_pipes_wrote(version):
    with pytest.raises(InputError, match="no acp-pipes wrote that version"):
        judge({"format": WIRE, "version": version}, "x", 1, ALL)


def test_an_unknown_acp_pipes_format_asks_for_an_update():
    with pytest.raises(InputError, match="please update acp-pipes"):
        judge({"format": "acp-pipes/graph", "version": 1}, "x", 1,
              (*ALL, "acp-pipes/graph"))


def test_asr_any_minor_of_the_major_read():
    for v in ("1.0", "1.7", "1.12"):
        h = {"type": "header", "asr": v, "sessionId": "s"}
        assert judge(h, "x", 1, (ASR,)) is h
    with pytest.raises(InputError, match=r"version 2\.0, newer .*please update acp-pipes"):
        judge({"type": "header", "asr": "2.0", "sessionId": "s"}, "x", 1, (ASR,))
    for bad in ("1", "one.zero", "0.9", 1.0):
        with pytest.raises(InputError, match="not an ASR revision"):
            judge({"type": "header", "asr": bad, "sessionId": "s"}, "x", 1, (ASR,))


def test_every_old_version_has_a_migration_step_and_a_fixture():
    """A format whose version is bumped without a step from the old one, or without a
    fixture of the old version, fails here."""
    for fmt, current in VERSIONS.items():
        for v in range(1, current):
            assert (fmt, v) in MIGRATIONS, f"no migration of {fmt} {v} to {v + 1}"
            assert (FORMATS / f"{fmt.split('/')[1]}-v{v}.jsonl").is_file()
    assert all(v < VERSIONS[fmt] for fmt, v in MIGRATIONS)


def test_migration_is_step_by_step_to_the_current_version():
    old = orjson.loads(WIRE_V1.read_bytes().split(b"\n", 1)[0])
    assert old["version"] == 1
    new = judge(old, "w", 1, ALL)
    # 1 -> 2 adds the end record (no header field); 2 -> 3 says the session was stdio's
    assert new == {**old, "version": VERSIONS[WIRE],
                   "transport": {"client": "stdio", "agent": "stdio"}}
    assert old["version"] == 1  # the record read is not changed in place
    assert migrate(new) == new


def test_a_version_2_log_reads_as_the_stdio_session_it_was(tmp_path):
    """Wire log 3 records remote transports; a version 2 log (acp-tee knew stdio only)
    is migrated to a stdio one, and its frames read as they did."""
    v2 = FORMATS / "wire-v2.jsonl"
    old = orjson.loads(v2.read_bytes().split(b"\n", 1)[0])
    assert old["version"] == 2 and "transport" not in old
    assert judge(old, "w", 1, ALL) == {**old, "version": 3,
                                        "transport": {"client": "stdio", "agent": "stdio"}}
    out = run_tool("frame", str(v2))
    assert out.returncode == 0 and out.stderr == b""
    frames = [orjson.loads(x) for x in out.stdout.splitlines()[1:]]
    assert [f["raw"] for f in frames] == [r["raw"] for r in _lines(v2)[1:-1]]


# -- the end record -------------------------------------------------------------------


def _lines(path: Path) -> list[dict]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def _client_of(fixture: Path) -> list[bytes]:
    """The client's frames of a recording, to record the same session again."""
    return [r["raw"].encode() for r in _lines(fixture)[1:] if r.get("dir") == "c2a"]


def test_acp_tee_ends_its_log_with_an_end_record(tmp_path):
    wire = tmp_path / "w.jsonl"
    record_lockstep(_client_of(WIRE_V1), wire)
    recs = _lines(wire)
    assert recs[0]["format"] == WIRE and recs[0]["version"] == VERSIONS[WIRE] == 3
    frames = [r for r in recs[1:] if "dir" in r]
    assert recs[-1] == {"end": True, "t": 0, "ended": "1970-01-01T00:00:00.000000Z",
                        "status": 0, "frames": len(frames)}
    assert len(recs) == len(frames) + 2  # header, frames, end
    # the same session as the version 1 fixture, but for the version and the end record
    old = WIRE_V1.read_bytes().splitlines()
    assert [orjson.loads(x) for x in old[1:]] == frames


def test_the_end_record_says_how_the_agent_ended(tmp_path):
    wire = tmp_path / "w.jsonl"
    r = subprocess.run(tool_argv("tee", "-o", str(wire), "--", "sh", "-c",
                                 "read x; echo hi; kill -TERM $$"),
                       input=b"{}\n", capture_output=True, env=tool_env(), timeout=60)
    assert r.returncode == 128 + signal.SIGTERM
    end = _lines(wire)[-1]
    assert end["end"] is True and end["status"] == 128 + signal.SIGTERM
    assert end["signal"] == signal.SIGTERM and end["frames"] == 2
    r = subprocess.run(tool_argv("tee", "-o", str(wire), "--", "sh", "-c", "exit 3"),
                       input=b"", capture_output=True, env=tool_env(), timeout=60)
    assert r.returncode == 3
    end = _lines(wire)[-1]
    assert end["status"] == 3 and "signal" not in end and end["frames"] == 0
    assert end["t"] > 0  # a real time, by the system clock
    assert end["ended"].endswith("Z") and not end["ended"].startswith("1970")


# -- every reader reads every old version as the current one ----------------------------


@pytest.fixture(scope="module")
def current(tmp_path_factory) -> Path:
    """The session of the version 1 fixture, recorded again by today's acp-tee (the
    agent's argv in its header set to the fixture's: the agent is the same, started
    from this checkout)."""
    wire = tmp_path_factory.mktemp("current") / "w.jsonl"
    record_lockstep(_client_of(WIRE_V1), wire)
    head, rest = wire.read_bytes().split(b"\n", 1)
    argv = orjson.loads(WIRE_V1.read_bytes().split(b"\n", 1)[0])["argv"]
    wire.write_bytes(orjson.dumps({**orjson.loads(head), "argv": argv}) + b"\n" + rest)
    return wire


@pytest.mark.parametrize("tool", [("frame",), ("fold",), ("fold", "--snapshots"), ("asr",),
                                  ("frame", "--summary")])
def test_old_versions_read_as_the_current_one(tool, current):
    """The wire log of version 1 (no end record) gives the very bytes its recording of
    today gives; so does the frames fixture made from it, where the tool reads frames."""
    now = run_tool(*tool, str(current))
    assert now.returncode == 0 and now.stderr == b"", now.stderr
    old = run_tool(*tool, str(WIRE_V1))
    assert old.returncode == 0 and old.stderr == b"", old.stderr
    if tool == ("frame", "--summary"):  # a v1 log has no end record: the summary says so
        a, b = orjson.loads(now.stdout), orjson.loads(old.stdout)
        assert a.pop("end")["status"] == 0 and b.pop("end") is None
        assert a.pop("source") != b.pop("source") and a == b
        return
    assert old.stdout == now.stdout
    framed = run_tool(*tool, str(FRAMES_V1))
    assert framed.returncode == 0 and framed.stderr == b"", framed.stderr
    assert framed.stdout == now.stdout


def test_old_versions_replay_align_and_validate(current, tmp_path):
    for path in (WIRE_V1, FRAMES_V1, current):
        assert len(load_trace(str(path))) == 42
        r = run_tool("align", str(path), str(current))
        assert r.returncode == 0, r.stderr
        r = run_tool("frame", "--validate", str(path))
        assert r.returncode == 0, r.stdout
    asr = tmp_path / "s.asr.jsonl"
    asr.write_bytes(run_tool("asr", str(WIRE_V1)).stdout)
    r = run_tool("asr", "--validate", str(asr))
    assert r.returncode == 0 and r.stderr == b"", r.stderr


@pytest.mark.parametrize("tool", ["frame", "fold", "asr", "align", "replay"])
def test_every_reader_refuses_a_newer_wire_log(tool, tmp_path):
    newer = tmp_path / "newer.jsonl"
    head = orjson.loads(WIRE_V1.read_bytes().split(b"\n", 1)[0])
    newer.write_bytes(orjson.dumps({**head, "version": VERSIONS[WIRE] + 1}) + b"\n"
                      + WIRE_V1.read_bytes().split(b"\n", 1)[1])
    args = {"align": (str(newer), str(WIRE_V1)), "replay": ("--emit", "a2c", str(newer))}
    r = run_tool(tool, *args.get(tool, (str(newer),)), input=b"", timeout=60)
    assert r.returncode == 2, (r.stdout, r.stderr)
    # the header is the file's first line: some name the file alone, some line 1 too
    assert re.search(rb"newer\.jsonl(:1)?: a wire log of version 4, newer than this "
                     rb"acp-pipes reads \(up to 3\): please update acp-pipes\n", r.stderr), r.stderr


def test_asr_readers_refuse_a_newer_asr_stream(tmp_path):
    stream = run_tool("asr", str(WIRE_V1)).stdout.replace(b'"asr":"1.0"', b'"asr":"2.0"', 1)
    path = tmp_path / "s.asr.jsonl"
    path.write_bytes(stream)
    for args in (("asr", "--validate", str(path)), ("align", str(path), str(path)),
                 ("replay", str(path))):
        r = run_tool(*args, input=b"", timeout=60)
        assert r.returncode == 2, (args, r.stderr)
        assert b"s.asr.jsonl:1: an ASR stream of version 2.0, newer than this acp-pipes " \
               b"reads (1.x): please update acp-pipes" in r.stderr, (args, r.stderr)

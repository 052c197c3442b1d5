"""acp-asr --validate: negative fixtures each break one thing; valid streams pass."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.conftest import REPO, run_tool

INVALID = REPO / "tests" / "fixtures" / "asr" / "invalid"
CASES = sorted(INVALID.glob("*.asr.jsonl"))


@pytest.mark.parametrize("case", CASES, ids=[p.name.removesuffix(".asr.jsonl") for p in CASES])
def test_invalid_stream_is_reported(case):
    expect = case.with_name(case.name.removesuffix(".asr.jsonl") + ".expect").read_text().strip()
    got = run_tool("asr", "--validate", str(case))
    assert got.returncode == 1
    err = got.stderr.decode()
    lines = err.strip().splitlines()
    assert expect in err, err
    # one problem, one line, naming the file and the line
    assert all(ln.startswith(f"{case}:") for ln in lines), err
    # stdout, a pipe: the file's summary as JSON, counting the problems said on stderr
    (summary,) = [orjson.loads(x) for x in got.stdout.splitlines()]
    assert summary == {"type": "summary", "source": str(case), "streams": summary["streams"],
                       "records": summary["records"], "problems": len(lines), "notes": 0,
                       "valid": False}


def test_each_negative_fixture_breaks_one_thing():
    for case in CASES:
        got = run_tool("asr", "--validate", str(case))
        n = len(got.stderr.decode().strip().splitlines())
        # a wrong seq shifts every later one; everything else is a single problem
        assert n == 1 or case.name.startswith("seq-"), (case.name, got.stderr.decode())


def test_valid_streams_pass(tmp_path):
    wire = REPO / "tests" / "fixtures" / "asr" / "ASR-717-resume-no-duplicates" / "wire.jsonl"
    out = tmp_path / "out"
    assert run_tool("asr", str(wire), "-o", str(out)).returncode == 0
    files = sorted(str(p) for p in out.iterdir())
    got = run_tool("asr", "--validate", *files)
    assert got.returncode == 0, got.stderr.decode()
    assert got.stderr == b""
    records = [len(Path(f).read_bytes().splitlines()) - 1 for f in files]
    assert [orjson.loads(x) for x in got.stdout.splitlines()] == [
        {"type": "summary", "source": f, "streams": 1, "records": n, "problems": 0,
         "notes": 0, "valid": True} for f, n in zip(files, records, strict=True)]
    table = run_tool("asr", "--validate", "--format", "table", *files)
    assert (table.returncode, table.stderr) == (0, b"")
    assert table.stdout.decode() == "".join(
        f"{f}: 1 stream, {n} records: valid\n" for f, n in zip(files, records, strict=True))


def _valid_stream():
    """A fixture's wire log and the valid ASR stream it converts to."""
    d = REPO / "tests" / "fixtures" / "asr" / "ASR-709-enums-unchanged"
    return d / "wire.jsonl", (d / "expected.asr.jsonl").read_bytes()


@pytest.mark.parametrize("what", ["missing", "directory"])
def test_unopenable_input_is_unusable_not_invalid(tmp_path, what):
    """Exit 2 with the real cause, as every tool says it; not a fake problem at line 0."""
    path = tmp_path / "x.asr.jsonl"
    if what == "directory":
        path.mkdir()
    got = run_tool("asr", "--validate", str(path))
    err = got.stderr.decode()
    assert got.returncode == 2, err
    cause = "No such file or directory" if what == "missing" else "Is a directory"
    assert err == f"acp-asr: {path}: cannot open: {cause}\n"


def test_truncated_gz_checks_the_lines_before_the_cut(tmp_path):
    """A .gz cut short: the lines read before the cut are checked (a duplicate id at
    line 3 is reported), then the cut itself is unusable input (exit 2)."""
    import gzip
    import os

    _, stream = _valid_stream()
    recs = [orjson.loads(x) for x in stream.splitlines()]
    dup = dict(recs[2], seq=recs[-1]["seq"] + 1)
    # incompressible padding so the cut falls well after line 3
    pad = [{**recs[-1], "id": f"pad-{i}", "seq": dup["seq"] + 1 + i,
            "_meta": {"pad": os.urandom(600).hex()}} for i in range(200)]
    lines = recs[:3] + [dup] + pad
    body = b"".join(orjson.dumps(r) + b"\n" for r in lines)
    whole = tmp_path / "whole.asr.jsonl.gz"
    whole.write_bytes(gzip.compress(body))
    cut = tmp_path / "cut.asr.jsonl.gz"
    cut.write_bytes(whole.read_bytes()[: len(whole.read_bytes()) // 2])
    full = run_tool("asr", "--validate", str(whole)).stderr.decode()
    assert f"{whole}:4: /id: duplicate id" in full
    got = run_tool("asr", "--validate", str(cut))
    err = got.stderr.decode()
    assert got.returncode == 2, err
    assert f"{cut}:4: /id: duplicate id" in err
    assert "cannot read: Compressed file ended" in err.splitlines()[-1]
    assert err.splitlines()[-1].startswith(f"acp-asr: {cut}:")


@pytest.mark.parametrize("stage,name", [("wire", "a wire log"), ("frame", "frames"),
                                        ("fold", "folded entities")])
def test_other_stream_kinds_are_refused_by_name(tmp_path, stage, name):
    """A wire log, frames or folded entities given to --validate: refused as what it is
    (exit 2), like every tool refuses the wrong stream kind."""
    wire, _ = _valid_stream()
    path = tmp_path / f"{stage}.jsonl"
    if stage == "wire":
        path.write_bytes(wire.read_bytes())
    else:
        made = run_tool(stage, str(wire))
        assert made.returncode == 0, made.stderr.decode()
        path.write_bytes(made.stdout)
    got = run_tool("asr", "--validate", str(path))
    assert got.returncode == 2
    assert got.stderr.decode() == f"acp-asr: {path}:1: expected an ASR stream, got {name}\n"


def test_each_file_starts_a_stream(tmp_path):
    """Records of a second file do not continue the first file's stream."""
    _, stream = _valid_stream()
    a = tmp_path / "a.asr.jsonl"
    b = tmp_path / "b.asr.jsonl"
    a.write_bytes(stream)
    b.write_bytes(b"".join(stream.splitlines(keepends=True)[1:]))
    got = run_tool("asr", "--validate", str(a), str(b))
    assert got.returncode == 1
    assert got.stderr.decode().startswith(f"{b}:1: : no header: a stream must start")


@pytest.mark.slow  # real acp-asr processes over a large stream, stopped early
def test_invalid_stays_invalid_when_the_reader_stops_early(tmp_path):
    """``acp-asr --validate F 2>&1 | head``: once the reader has gone, the verdict is
    still 1 (not the quiet 0 of a tool whose output was cut), with no complaint at exit
    (a failed final flush would make it 120)."""
    import subprocess

    from tests.conftest import tool_argv, tool_env

    lines = (INVALID / "duplicate-id.asr.jsonl").read_bytes().splitlines()
    head, record = lines[0], lines[1]
    many = tmp_path / "many.asr.jsonl"  # ~20,000 duplicate ids: more than a pipe holds
    many.write_bytes(head + b"\n" + b"".join(
        record.replace(b'"seq":1,', b'"seq":%d,' % n) + b"\n" for n in range(1, 20_001)))
    p = subprocess.Popen(tool_argv("asr", "--validate", str(many)), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, env=tool_env())
    assert b"duplicate id" in p.stdout.readline()
    p.stdout.close()
    assert p.wait(timeout=60) == 1


def test_every_rule_the_validator_quotes_has_a_fixture():
    """Each rule --validate enforces beyond the schemas (a rule ID its messages quote)
    has a negative fixture named by it, as the conformance fixtures are."""
    import re

    source = (REPO / "acp_pipes" / "asr" / "validate.py").read_text()
    quoted = re.findall(r'\((ASR-7\d\d(?:, ASR-7\d\d)*)\)"', source)  # a message's end
    rules = {r.removeprefix("ASR-") for q in quoted for r in q.split(", ")}
    assert {"706", "711", "717", "722"} <= rules
    names = " ".join(p.name for p in CASES)
    for rule in sorted(rules):
        assert f"ASR-{rule}-" in names, f"no negative fixture for ASR-{rule}"


REAL = REPO / "tests" / "fixtures" / "asr" / "real"


def test_a_real_agents_prompts_stored_twice_are_refused_by_rule():
    """opencode 1.18.33's load replays its prompts under IDs of its own: an older acp-asr
    stored each prompt twice, and --validate accepted it. Each doubled prompt is refused
    now, naming the rule and the prompt it repeats."""
    stream = REAL / "opencode-1.18.33-load-stored-twice.asr.jsonl"
    got = run_tool("asr", "--validate", str(stream))
    assert got.returncode == 1
    lines = got.stderr.decode().splitlines()
    assert len(lines) == 3, lines
    for line, prompt in zip(lines, ("hello there", "CALL write", "CALL bash"), strict=True):
        assert line.startswith(f"{stream}:") and line.endswith(
            "same message, stored twice (ASR-717)"), line
        number = int(line.split(":")[1])
        rec = orjson.loads(stream.read_bytes().splitlines()[number - 1])
        assert rec["content"][0]["text"].startswith(prompt)


def test_the_same_real_recording_stores_each_prompt_once(tmp_path):
    """Today's acp-asr on those two wire logs: each prompt one message, the load adding
    nothing but the last turn's, and the stream valid."""
    wires = [str(REAL / "opencode-1.18.33.wire.jsonl"),
             str(REAL / "opencode-1.18.33.load.wire.jsonl")]
    got = run_tool("asr", *wires)
    assert got.returncode == 0, got.stderr.decode()
    recs = [orjson.loads(x) for x in got.stdout.splitlines()]
    latest = {(r["role"], r["messageId"]): r for r in recs if r["type"] == "message"}
    users = [r["content"][0]["text"][:11] for (role, _), r in latest.items() if role == "user"]
    assert users == ["hello there", "CALL write ", "CALL bash {", "goodbye"]
    first = run_tool("asr", wires[0])
    n_first = sum(1 for x in first.stdout.splitlines() if b'"type":"message"' in x)
    assert len(latest) == n_first + 2  # the goodbye turn: its prompt and the reply
    stream = tmp_path / "s.asr.jsonl"
    stream.write_bytes(got.stdout)
    assert run_tool("asr", "--validate", str(stream)).returncode == 0

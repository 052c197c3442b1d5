"""acp-asr --validate: negative fixtures each break one thing; valid streams pass."""

from __future__ import annotations

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
    assert got.stdout == b""


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

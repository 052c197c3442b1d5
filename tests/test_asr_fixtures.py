"""Conformance fixtures: ACP wire in, expected ASR out, one folder per rule (by glob).

Every expected.asr.jsonl was reviewed line by line against the mapping (seed 000) when
it was written; tests/fixtures/asr/make_fixtures.py holds the scenarios. The tool runs as
a real subprocess and its stdout is compared byte for byte (only producer.version is
normalised, so a version bump does not break every golden file).
"""

from __future__ import annotations

import orjson
import pytest

from acp_pipes import __version__
from tests.conftest import REPO, run_tool

FIXTURES = REPO / "tests" / "fixtures" / "asr"
CASES = sorted(p for p in FIXTURES.glob("ASR-*") if (p / "wire.jsonl").exists())


def _normalise(data: bytes) -> bytes:
    return data.replace(b'"version":"' + __version__.encode() + b'","method":"recorder"',
                        b'"version":"X","method":"recorder"')


def test_every_rule_has_a_fixture():
    names = " ".join(p.name for p in CASES)
    for rule in [*range(701, 724), 734, 735]:
        if rule == 723:
            continue  # native.ref is in every fixture's records
        assert f"ASR-{rule}-" in names, f"no fixture for ASR-{rule}"


@pytest.mark.parametrize("case", CASES, ids=[p.name for p in CASES])
def test_fixture(case):
    expected = (case / "expected.asr.jsonl").read_bytes()
    got = run_tool("asr", str(case / "wire.jsonl"))
    assert got.returncode == 0, got.stderr.decode()
    assert _normalise(got.stdout) == _normalise(expected)


@pytest.mark.parametrize("case", CASES[:6], ids=[p.name for p in CASES[:6]])
def test_fold_then_asr_gives_the_same_bytes(case):
    """acp-fold | acp-asr == acp-asr: the stages compose over real pipes."""
    folded = run_tool("fold", str(case / "wire.jsonl"))
    assert folded.returncode == 0
    via = run_tool("asr", input=folded.stdout)
    direct = run_tool("asr", str(case / "wire.jsonl"))
    assert via.stdout == direct.stdout


def test_expected_outputs_validate():
    paths = [str(c / "expected.asr.jsonl") for c in CASES]
    got = run_tool("asr", "--validate", *paths)
    assert got.returncode == 0, got.stderr.decode()


def test_native_ref_points_at_real_frames():
    """ASR-723: every record's native.ref names frames of the wire log it came from."""
    for case in CASES:
        seqs_by_conn: dict[int, set] = {}
        conn = -1
        for line in (case / "wire.jsonl").read_bytes().splitlines():
            rec = orjson.loads(line)
            if "format" in rec:
                conn += 1
                continue
            seqs_by_conn.setdefault(conn, set()).add(rec["seq"])
        for line in (case / "expected.asr.jsonl").read_bytes().splitlines():
            rec = orjson.loads(line)
            if rec["type"] == "header":
                continue
            ref = rec["native"]["ref"]
            assert set(ref["frames"]) <= seqs_by_conn[ref["connection"]], (case.name, rec)


def test_mcp_configuration_never_recorded():
    """ASR-712: env, headers and args of MCP servers appear nowhere in the output."""
    case = FIXTURES / "ASR-712-mcp-config-not-recorded"
    assert b"SECRET" in (case / "wire.jsonl").read_bytes()
    out = run_tool("asr", str(case / "wire.jsonl")).stdout
    fold = run_tool("fold", str(case / "wire.jsonl")).stdout
    assert b"SECRET" not in out and b"SECRET" not in fold

"""acp-batch export: each recording's OTLP/JSON or Agent Trail files, the bytes acp-export
writes for it alone; a rerun skips what was done. (To a collector: test_export_phoenix.)"""

from __future__ import annotations

import orjson

from tests.conftest import REPO, run_tool

CORPUS = REPO / "examples" / "batch" / "wire"


def test_batch_export_writes_what_acp_export_writes(tmp_path):
    r = run_tool("batch", "export", str(CORPUS), "-o", str(tmp_path / "out"), "-j", "2",
                 timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    inputs = sorted(CORPUS.rglob("*.jsonl"))
    assert inputs
    for wire in inputs:
        stem = str(wire.relative_to(CORPUS)).removesuffix(".jsonl")
        alone = run_tool("export", "otlp", str(wire))
        assert alone.returncode == 0
        assert (tmp_path / "out" / f"{stem}.otlp.json").read_bytes() == alone.stdout, stem
    entries = [orjson.loads(x) for x in (tmp_path / "out" / "manifest.jsonl").read_bytes()
               .splitlines()]
    assert {e["status"] for e in entries} == {"ok"}
    again = run_tool("batch", "export", str(CORPUS), "-o", str(tmp_path / "out"), timeout=300)
    assert again.returncode == 0
    assert f"0 done, {len(inputs)} skipped (done before)" in again.stderr.decode()


def test_batch_export_agent_trail(tmp_path):
    r = run_tool("batch", "export", str(CORPUS), "--format", "agent-trail", "-o",
                 str(tmp_path / "out"), "-j", "1", timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    for wire in sorted(CORPUS.rglob("*.jsonl")):
        stem = str(wire.relative_to(CORPUS)).removesuffix(".jsonl")
        alone = tmp_path / "alone" / stem
        assert run_tool("export", "agent-trail", str(wire), "-o", str(alone)).returncode == 0
        want = {p.name: p.read_bytes() for p in alone.glob("*.trail.jsonl")}
        got = {p.name: p.read_bytes() for p in (tmp_path / "out" / stem).glob("*.trail.jsonl")}
        assert got == want and want, stem


def test_batch_export_options_are_checked_before_anything_runs(tmp_path):
    r = run_tool("batch", "export", str(CORPUS), "--format", "agent-trail", "--endpoint",
                 "http://127.0.0.1:1", "-o", str(tmp_path / "o"))
    assert r.returncode == 2 and b"are for --format otlp" in r.stderr
    assert not (tmp_path / "o").exists()
    r = run_tool("batch", "export", str(CORPUS), "--resource", "x", "-o", str(tmp_path / "o"))
    assert r.returncode == 2 and b"NAME=VALUE" in r.stderr

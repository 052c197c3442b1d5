"""examples/batch: `make -j` converts a folder of wire logs into valid ASR streams."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from acp_pipes.asr import session_from_name
from tests.conftest import REPO, tool_env

BATCH = REPO / "examples" / "batch"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_j_converts_every_log(tmp_path):
    out = tmp_path / "asr"
    run = subprocess.run(["make", "-j4", "-C", str(BATCH), f"OUT_DIR={out}", "validate"],
                         capture_output=True, env=tool_env(), timeout=120)
    assert run.returncode == 0, run.stderr.decode()
    names = sorted(session_from_name(p.name) for p in out.glob("*.asr.jsonl"))
    assert names == sorted(["s-a", "s-b", "sess/ü 1", "parent", "child", "boss", "worker"])
    logs = sorted(p.name for p in (BATCH / "wire").glob("*.jsonl"))
    assert sorted(p.name for p in (out / ".done").iterdir()) == logs
    # nothing to do the second time: stamps are newer than the logs
    again = subprocess.run(["make", "-C", str(BATCH), f"OUT_DIR={out}"], capture_output=True,
                           env=tool_env(), timeout=60)
    assert again.returncode == 0 and b"acp-asr" not in again.stdout + again.stderr

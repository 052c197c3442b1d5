"""`make demo` (scripts/demo): the main job on the bundled example, end to end, as the
README promises it runs on a fresh machine."""

from __future__ import annotations

import os
import subprocess

from tests.conftest import REPO, tool_env


def test_the_demo_runs_and_records_the_bundled_session(tmp_path):
    out = tmp_path / "demo"
    r = subprocess.run([str(REPO / "scripts/demo")], env={**tool_env(), "DEMO_OUT": str(out)},
                       cwd=REPO, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    # the client saw byte for byte what the bundled session holds, and replay gave it again
    agent = (REPO / "examples/hello/agent.jsonl").read_bytes()
    assert (out / "agent.jsonl").read_bytes() == agent
    assert (out / "replayed.jsonl").read_bytes() == agent
    assert sorted(os.listdir(out / "asr")) == ["sess-1.asr.jsonl"]
    assert b"hello one" in (out / "align.diff").read_bytes()
    assert (out / "align.svg").read_bytes().lstrip().startswith((b"<?xml", b"<svg"))

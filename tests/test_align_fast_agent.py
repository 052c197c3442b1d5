"""acp-align on a real agent: two runs of fast-agent (ACP v1, tests/test_fast_agent.py)
recorded through the real acp-tee, driven by the official Python SDK. The agent makes up
its session id and tool-call ids and stamps the time on what it says: by default that is
no difference, and with no flag two identical runs are equal; a run whose first prompt
differs has that prompt as its first difference.
"""

from __future__ import annotations

import asyncio
import shutil
import sys

import orjson
import pytest

from tests.conftest import run_tool, skip_unless_installed
from tests.test_fast_agent import _session

pytestmark = pytest.mark.slow  # the real fast-agent

skip_unless_installed("acp")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """Three runs in one workspace path (the prompts name a file in it): two alike, and
    one whose first prompt says something else."""
    import tests.test_fast_agent as fa

    tmp = tmp_path_factory.mktemp("fast-agent-align")
    ws = tmp / "ws"
    out = {}
    plain = fa.prompts_for
    for name in ("a", "a2", "b"):
        shutil.rmtree(ws, ignore_errors=True)
        ws.mkdir()
        if name == "b":
            fa.prompts_for = lambda w: ["hello here", *plain(w)[1:]]
        try:
            out[name] = tmp / f"{name}.wire.jsonl"
            asyncio.run(asyncio.wait_for(_session(out[name], ws), 120))
        finally:
            fa.prompts_for = plain
    return out


def align(*args) -> tuple[int, dict]:
    p = run_tool("align", *map(str, args), "--format", "json")
    s = orjson.loads(p.stdout)
    assert p.returncode == (0 if s["equal"] else 1), p.stderr  # 0 the same, 1 they differ
    return p.returncode, s


def test_two_identical_runs_align_with_no_difference_and_no_flag(runs):
    status, s = align(runs["a"], runs["a2"])
    assert status == 0 and s["distance"] == 0 and s["first_divergence"] is None
    kinds = {r["kind"] for r in s["renamed"]}
    assert "session" in kinds and "toolCall" in kinds  # the agent did make up others
    status, s = align(runs["a"], runs["a2"], "--strict")
    assert status == 1  # as sent, the runs differ in those ids and times
    paths = {d["path"] for c in s["changed"] for d in c["diff"]}
    assert {"/params/sessionId", "/params/update/updatedAt"} <= paths


def test_a_run_whose_first_prompt_differs_shows_that_prompt_first(runs):
    status, s = align(runs["a"], runs["b"])
    assert status == 1
    first = s["first_divergence"]
    assert first["op"] == "changed" and first["step_a"]["method"] == "session/prompt"
    assert first["diff"] == [{"op": "replace", "path": "/params/prompt/0/text",
                              "a": "hello there", "b": "hello here"}]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))

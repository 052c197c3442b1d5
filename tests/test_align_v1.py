"""acp-align on ACP v1 recordings: what real agents speak.

Two peers on the official Python SDK (``agent-client-protocol``, v1), recorded through
the real acp-tee (tests/clients/v1_sdk_session.py): labels, pairing and changed steps
must not lean on anything only v2 has.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import REPO, run_tool, tool_argv, tool_env

pytestmark = pytest.mark.slow  # peers on the official Python SDK

SESSION = REPO / "tests" / "clients" / "v1_sdk_session.py"


def record_v1(log: Path, prompts: int) -> Path:
    p = subprocess.run([sys.executable, str(SESSION), "client", str(prompts), "--",
                        *tool_argv("tee", "-o", str(log), "--clock", "epoch", "--no-host",
                                   "--", sys.executable, str(SESSION), "agent")],
                       capture_output=True, env=tool_env(), timeout=120)
    assert p.returncode == 0, p.stderr
    assert orjson.loads(p.stdout.splitlines()[-1]) == {"done": True}
    return log


@pytest.fixture(scope="module")
def v1(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("v1")
    return {"a": record_v1(tmp / "a.jsonl", 4), "a2": record_v1(tmp / "a2.jsonl", 4),
            "short": record_v1(tmp / "short.jsonl", 3), "tmp": tmp}


def test_two_recordings_of_one_v1_session_are_equal(v1):
    head = v1["a"].read_bytes().splitlines()[1]
    assert orjson.loads(orjson.loads(head)["raw"])["params"]["protocolVersion"] == 1
    p = run_tool("align", str(v1["a"]), str(v1["a2"]), "--format", "json")
    assert p.returncode == 0, p.stdout
    s = orjson.loads(p.stdout)
    assert s["counts"]["equal"] == s["a"]["steps"] == s["b"]["steps"]


def test_a_v1_prompt_changed_is_one_changed_step_with_its_pointer(v1, tmp_path):
    lines = v1["a"].read_bytes().splitlines()
    out = []
    for line in lines:
        rec = orjson.loads(line)
        if "raw" in rec and '"hello 3"' in rec["raw"] and '"session/prompt"' in rec["raw"]:
            rec["raw"] = rec["raw"].replace('"hello 3"', '"hello three, said later"')
            line = orjson.dumps(rec)
        out.append(line)
    edited = tmp_path / "edited.jsonl"
    edited.write_bytes(b"\n".join(out) + b"\n")
    p = run_tool("align", str(v1["a"]), str(edited), "--format", "json")
    assert p.returncode == 1, p.stderr
    s = orjson.loads(p.stdout)
    assert s["counts"]["changed"] == 1 and s["distance"] == 2
    first = s["first_divergence"]
    assert first["step_a"]["summary"] == 'session/prompt "hello 3"'
    assert first["diff"] == [{"op": "replace", "path": "/params/prompt/0/text",
                              "a": "hello 3", "b": "hello three, said later"}]


def test_a_v1_run_with_a_prompt_less_reads_as_one(v1):
    """The last turn only in A: its frames are only-a, each told by what it is in v1
    (message chunks, the tool call, the permission request, the file read)."""
    p = run_tool("align", str(v1["a"]), str(v1["short"]), "--format", "diff", "-U", "0")
    assert p.returncode == 1, p.stderr
    text = p.stdout.decode()
    removed = [line for line in text.splitlines() if line.startswith("-") and
               not line.startswith("---")]
    assert removed and not any(line.startswith("+") and not line.startswith("+++")
                               for line in text.splitlines())
    assert '-→ session/prompt "hello 4"' in removed
    assert any(line.startswith("-← session/update agent_message_chunk") for line in removed)
    assert any("tool_call" in line for line in removed)
    assert any("session/request_permission" in line for line in removed)
    assert any("fs/read_text_file" in line for line in removed)
    assert "?" not in "".join(removed)  # every step was described

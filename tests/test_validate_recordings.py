"""acp-frame --validate on real recordings: real peers through the real acp-tee.

- ACP v2: the official TypeScript SDK client (tests/clients/sdk_client.mjs) against the
  echo agent;
- ACP v1: a client and an agent on the official Python SDK (agent-client-protocol 0.12,
  tests/clients/v1_sdk_session.py), with permission requests and file reads;
- the README's recording (the scripted client, turn by turn, against the echo agent).

Each is valid; each broken by one edit of its log is not, and the violation names the
frame the edit touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import orjson
import pytest

from tests.conftest import REPO, record_lockstep, run_tool, tool_argv, tool_env

CLIENTS = REPO / "tests" / "clients"
NODE = shutil.which("node")
HAVE_TS_SDK = NODE is not None and (
    CLIENTS / "node_modules" / "@agentclientprotocol" / "sdk").is_dir()


def tee(log, *agent: str) -> list[str]:
    return tool_argv("tee", "-o", str(log), "--clock", "epoch", "--no-host", "--", *agent)


def validate(*args: str) -> tuple[int, list[dict]]:
    r = run_tool("frame", "--validate", *args)
    out = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert out[-1]["type"] == "summary", out[-1]
    assert r.returncode == (1 if out[-1]["violations"] else 0), r.stderr  # 1: a violation
    return r.returncode, out


def edit(log, seq: int, fn) -> None:
    """Rewrite the frame ``seq`` of a wire log with ``fn(message) -> message``."""
    lines = log.read_bytes().splitlines()
    for i, line in enumerate(lines[1:], 1):
        rec = orjson.loads(line)
        if rec.get("seq") == seq:
            rec["raw"] = orjson.dumps(fn(orjson.loads(rec["raw"]))).decode()
            lines[i] = orjson.dumps(rec)
    log.write_bytes(b"\n".join(lines) + b"\n")


def frames_of(log) -> list[dict]:
    return [orjson.loads(x) for x in run_tool("frame", str(log)).stdout.splitlines()[1:]]


@pytest.mark.slow  # the official TypeScript SDK on node
@pytest.mark.skipif(not os.environ.get("CI") and not HAVE_TS_SDK,
                    reason="needs node and `npm ci` in tests/clients (make install)")
def test_typescript_sdk_client_against_the_echo_agent_v2(tmp_path):
    log = tmp_path / "ts.jsonl"
    proc = subprocess.run([NODE, str(CLIENTS / "sdk_client.mjs"), "6", "3", "--",
                           *tee(log, *tool_argv("echo-agent"))],
                          capture_output=True, env=tool_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    status, out = validate(str(log))
    assert status == 0, out
    (s,) = out
    assert (s["type"], s["protocolVersion"], s["versionFrom"], s["schema"]) == (
        "summary", 2, "agreed", "v2.0.0-alpha.9")
    assert s["paired"] and s["violations"] == 0 and s["frames"] == len(frames_of(log))

    # the agent's answer to session/new loses its sessionId: the schema says so, and the
    # session it named is unknown to everything after it
    new = next(f for f in frames_of(log) if f.get("method") == "session/new"
               and f["kind"] == "response")
    edit(log, new["seq"], lambda m: {**m, "result": {}})
    status, out = validate(str(log))
    assert status == 1
    first = out[0]
    assert (first["rule"], first["seq"], first["pointer"], first["message"]) == (
        "schema", new["seq"], "/result", '"sessionId" is a required property')
    assert {v["rule"] for v in out[1:-1]} == {"unknown-session"}


@pytest.mark.slow  # peers on the official Python SDK
def test_python_sdk_v1_client_and_agent(tmp_path):
    log = tmp_path / "v1.jsonl"
    script = str(CLIENTS / "v1_sdk_session.py")
    proc = subprocess.run([sys.executable, script, "client", "4", "--",
                           *tee(log, sys.executable, script, "agent")],
                          capture_output=True, env=tool_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert orjson.loads(proc.stdout.splitlines()[-1]) == {"done": True}
    status, out = validate(str(log))
    assert status == 0, out
    assert (out[0]["protocolVersion"], out[0]["schema"], out[0]["violations"]) == (1, "v1", 0)
    methods = {f.get("method") for f in frames_of(log)}
    assert {"fs/read_text_file", "session/request_permission"} <= methods

    # the client stops advertising fs.readTextFile: the agent's reads are now violations
    edit(log, 0, lambda m: {**m, "params": {**m["params"], "clientCapabilities": {}}})
    status, out = validate(str(log))
    reads = [f["seq"] for f in frames_of(log) if f.get("method") == "fs/read_text_file"
             and f["kind"] == "request"]
    assert status == 1
    assert [(v["rule"], v["seq"]) for v in out[:-1]] == [("capability", s) for s in reads]
    assert out[0]["words"] == "Whether the Client supports `fs/read_text_file` requests."


def test_the_readme_recording_is_valid(tmp_path):
    client = (REPO / "examples" / "hello" / "client.jsonl").read_bytes().splitlines()
    log = tmp_path / "wire.jsonl"
    record_lockstep(client, log)
    status, out = validate(str(log))
    assert status == 0, out

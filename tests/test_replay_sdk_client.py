"""A real ACP v2 client (the official TypeScript SDK) replayed against: it completes the
same session against acp-replay as against the live echo agent and gets the same bytes.

Needs node and ``npm ci`` in tests/clients (``make install`` does it).
"""

from __future__ import annotations

import os
import shutil
import subprocess

import orjson
import pytest

from tests.conftest import REPO, tool_argv, tool_env

CLIENTS = REPO / "tests" / "clients"
NODE = shutil.which("node")

# Outside CI a checkout without node may skip this; in CI (`make install` ran) a missing
# SDK is a failure, never a silent skip.
pytestmark = pytest.mark.skipif(
    not os.environ.get("CI")
    and (NODE is None or not (CLIENTS / "node_modules" / "@agentclientprotocol" / "sdk").is_dir()),
    reason="needs node and `npm ci` in tests/clients (make install)",
)
pytestmark = [pytestmark, pytest.mark.slow]  # the official TypeScript SDK on node

PROMPTS, PERMISSION_EVERY = 20, 5


def sdk_client(*agent: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [NODE, str(CLIENTS / "sdk_client.mjs"), str(PROMPTS), str(PERMISSION_EVERY), "--",
         *agent],
        capture_output=True, env=tool_env(), timeout=60)


def tee(log, *agent: str) -> list[str]:
    return tool_argv("tee", "-o", str(log), "--clock", "epoch", "--no-host", "--", *agent)


def a2c(log) -> list[bytes]:
    recs = [orjson.loads(x) for x in log.read_bytes().splitlines()[1:]]
    return [r["raw"].encode() for r in recs if r.get("dir") == "a2c"]  # not the end record


def test_the_sdk_client_completes_the_same_session_against_the_replay(tmp_path):
    recorded = tmp_path / "recorded.jsonl"
    live = sdk_client(*tee(recorded, *tool_argv("echo-agent")))
    assert live.returncode == 0, live.stderr
    summary = [orjson.loads(x) for x in live.stdout.splitlines()]
    assert summary[-1] == {"done": True, "permissions": PROMPTS // PERMISSION_EVERY}
    assert summary[1] == {"prompt": 1, "messageId": "msg-user-1", "text": "Echo: hello 1"}

    # the same client against the replay, with acp-tee in between to see the bytes
    seen = tmp_path / "seen.jsonl"
    replayed = sdk_client(*tee(seen, *tool_argv("replay", str(recorded))))
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == live.stdout
    assert a2c(seen) == a2c(recorded)  # byte for byte, permission requests included
    assert any(b"session/request_permission" in f for f in a2c(seen))

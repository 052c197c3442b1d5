"""Shared test fixtures: where things are, and running the real executables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCHEMAS = REPO / "schemas" / "acp"
ACP_V2_SCHEMA = SCHEMAS / "v2.0.0-alpha.9" / "schema.unstable.json"


def tool_argv(name: str, *args: str) -> list[str]:
    """argv running the real executable ``acp-<name>`` from this checkout."""
    return [sys.executable, "-m", f"acp_pipes.cli.{name.replace('-', '_')}", *args]


def tool_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_tool(name: str, *args: str, input: bytes | None = None, **kw) -> subprocess.CompletedProcess:
    """Run ``acp-<name> ARGS`` as a subprocess over real pipes; returns bytes out/err."""
    return subprocess.run(
        tool_argv(name, *args), input=input, capture_output=True, env=tool_env(), **kw
    )


@pytest.fixture
def repo() -> Path:
    return REPO

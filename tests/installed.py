"""acp-pipes installed as a user installs it, shared by the tests that need it
(tests/test_installed.py, tests/test_first_hour.py): one wheel, built from a copy of the
checkout, installed once into a fresh virtual environment outside the checkout.

Built once per test run, whichever workers (pytest-xdist) ask for it: the first to ask
builds under a file lock in the run's shared temporary directory, the others wait and
take what it made.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# What a fresh installation may rely on besides itself: the system's tools (sh, sed,
# cmp, make, Graphviz's dot), never the checkout's bin/ or its virtual environment.
SYSTEM_PATH = "/usr/bin:/bin"
BUILD_TIMEOUT = 600
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", ".peers", "node_modules", "__pycache__",
                                    "build", "dist", "out", ".hypothesis", ".pytest_cache",
                                    ".ruff_cache", ".mypy_cache", "*.egg-info")


def _shared_dir(request: pytest.FixtureRequest, tmp_path_factory) -> Path:
    """The run's temporary directory that every worker sees (one per worker otherwise)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(request.config, "workerinput") else base


@contextlib.contextmanager
def _once(path: Path) -> Iterator[Path]:
    """Hold the lock of ``path`` (a directory made for what is built there)."""
    path.mkdir(parents=True, exist_ok=True)
    with open(path / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield path
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def wheel(request, tmp_path_factory) -> tuple[Path, str]:
    """The wheel pip builds from a copy of the checkout, and the build's verbose log."""
    with _once(_shared_dir(request, tmp_path_factory) / "acp-pipes-wheel") as tmp:
        made = tmp / "made.json"
        if made.exists():
            done = json.loads(made.read_text())
            return Path(done["wheel"]), done["log"]
        source = tmp / "acp-pipes"
        shutil.rmtree(source, ignore_errors=True)
        shutil.copytree(REPO, source, symlinks=True, ignore=NOT_SOURCE)
        r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps",
                            "-w", str(tmp / "dist"), str(source)],
                           capture_output=True, text=True, cwd=tmp, timeout=BUILD_TIMEOUT)
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
        (built,) = (tmp / "dist").glob("acp_pipes-*.whl")
        made.write_text(json.dumps({"wheel": str(built), "log": r.stdout + r.stderr}))
        return built, r.stdout + r.stderr


@pytest.fixture(scope="session")
def venv(request, wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel and its runtime dependencies only, and
    the extra `export` (acp-export otlp's OpenTelemetry SDK) as a user who exports has it."""
    with _once(_shared_dir(request, tmp_path_factory) / "acp-pipes-venv") as tmp:
        root = tmp / "env"
        if (tmp / "made").exists():
            return root
        shutil.rmtree(root, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True,
                       timeout=BUILD_TIMEOUT)
        r = subprocess.run([sys.executable, "-m", "pip", "--python", str(root / "bin" / "python"),
                            "install", "-q", f"{wheel[0]}[export]"],
                           capture_output=True, text=True, cwd=root, timeout=BUILD_TIMEOUT)
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
        (tmp / "made").touch()
        return root


def user_env(venv: Path) -> dict[str, str]:
    """The environment of a user who installed acp-pipes: its scripts first on PATH, then
    the system's; nothing pointing into the checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSAFEPATH")}
    env["PATH"] = f"{venv / 'bin'}:{SYSTEM_PATH}"
    env.pop("COLUMNS", None)
    return env


def sh(command: str, venv: Path, cwd: Path, stdin: Path | None = None,
       timeout: float = 120) -> subprocess.CompletedProcess:
    with open(stdin or os.devnull, "rb") as inp:
        return subprocess.run(["bash", "-c", command], cwd=cwd, env=user_env(venv), stdin=inp,
                              capture_output=True, timeout=timeout)

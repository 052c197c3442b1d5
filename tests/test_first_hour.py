"""A newcomer's first hour, as the README walks it: the make targets on a machine that has
python3 and make alone, then the README's pipelines typed into one shell, in a scratch
directory, with the installed executables (the wheel of tests/installed.py) and nothing
from the checkout on PATH."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.installed import NOT_SOURCE, user_env
from tests.test_readme import console_sessions

pytestmark = pytest.mark.slow  # a wheel installed; a .venv built by make

#: What the Makefile, scripts/demo and bin/ launchers run besides python3 and make.
PLAIN_TOOLS = ("sh", "bash", "cat", "cp", "mv", "rm", "mkdir", "ls", "sed", "head", "tail",
               "wc", "cmp", "touch", "env", "id", "dirname", "basename", "readlink", "grep",
               "sort", "cut", "mktemp", "tee", "true", "false", "printf", "tr", "uname",
               "chmod", "sleep", "expr")


def _setup_lines(readme: str) -> list[str]:
    """The ```sh block that starts the pipelines: what a reader types first."""
    part = readme.split("## Three pipelines", 1)[1]
    block = re.search(r"```sh\n(.*?)```", part, flags=re.S).group(1)
    return [re.sub(r"\s+#\s.*$", "", line) for line in block.splitlines() if line.strip()]


def test_the_readme_in_one_shell_from_a_scratch_directory(venv, tmp_path):
    """The set-up lines and every console command, in order, in one bash: outputs as
    shown, everything written in the scratch directory `mktemp -d` made (none in the
    directory the reader started in), and what was made from the 0600 log 0600 too."""
    readme = (REPO / "README.md").read_text()
    setup = _setup_lines(readme)
    assert setup[-1] == 'cd "$(mktemp -d)"'
    sessions = console_sessions(readme)
    start = tmp_path / "start"  # where the reader stands: no checkout, nothing of it
    start.mkdir()
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    script = [*setup, f'echo "$PWD" > {outputs}/scratch']
    for i, (command, _) in enumerate(sessions):
        script.append(f"{{ {command}\n}} > {outputs}/{i}.out 2> {outputs}/{i}.err")
    env = {**user_env(venv), "TMPDIR": str(scratch)}
    r = subprocess.run(["bash", "-c", "\n".join(script)], cwd=start, env=env,
                       capture_output=True, timeout=600)
    assert r.returncode == 0, r.stderr.decode()
    assert list(start.iterdir()) == []
    work = Path((outputs / "scratch").read_text().strip())
    assert work.parent == scratch
    for i, (command, expected) in enumerate(sessions):
        got = (outputs / f"{i}.out").read_bytes().decode().rstrip("\n")
        assert got == expected, (command, (outputs / f"{i}.err").read_text())
        assert (outputs / f"{i}.err").read_bytes() == b"", command
    assert stat.S_IMODE((work / "wire.jsonl").stat().st_mode) == 0o600
    for made in ("divergence.svg", "session.html", "asr/sess-1.asr.jsonl"):
        assert stat.S_IMODE((work / made).stat().st_mode) == 0o600, made


def _plain_path(tmp: Path) -> Path:
    """A directory holding python3 (this interpreter's base: 3.11), make and the few tools
    the Makefile and the scripts run; no node, npm, python3.13, Chromium or Graphviz."""
    bin_dir = tmp / "plain-bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(os.path.realpath(sys._base_executable))
    for tool in ("make", *PLAIN_TOOLS):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    for absent in ("node", "npm", "python3.13", "chromium", "dot", "man", "apt-get"):
        assert shutil.which(absent, path=str(bin_dir)) is None
    return bin_dir


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory) -> tuple[Path, Path]:
    """The checkout's sources, as a fresh clone has them, and the plain PATH."""
    tmp = tmp_path_factory.mktemp("plain")
    clone = tmp / "acp-pipes"
    shutil.copytree(REPO, clone, symlinks=True, ignore=NOT_SOURCE)
    return clone, _plain_path(tmp)


def test_make_demo_needs_python_and_make_alone(fresh_clone):
    clone, plain = fresh_clone
    env = {**os.environ, "PATH": str(plain)}
    env.pop("PYTHONPATH", None)
    r = subprocess.run(["make", "demo"], cwd=clone, env=env, capture_output=True, timeout=900)
    said = r.stderr.decode()
    assert r.returncode == 0, said[-3000:]
    out = clone / "out" / "demo"
    assert (out / "session.html").exists() and (out / "align.dot").exists()
    assert not (out / "align.svg").exists()  # no Graphviz here: the demo said how to draw it
    assert "apt-get install graphviz" in said
    assert not (clone / ".peers").exists() and not (clone / "tests/clients/node_modules").exists()


def test_make_test_names_what_is_missing_at_once(fresh_clone):
    """Before anything is built: each missing piece, what it is for, how to get it."""
    clone, plain = fresh_clone
    env = {**os.environ, "PATH": str(plain)}
    env.pop("PYTHONPATH", None)
    began = time.monotonic()
    r = subprocess.run(["make", "test"], cwd=clone, env=env, capture_output=True, timeout=120)
    took = time.monotonic() - began
    said = r.stderr.decode()
    assert r.returncode == 2, said
    assert took < 120
    named = re.findall(r"^  (\S+) +\S.*\n  +get it: (.+)$", said, flags=re.M)
    assert [name for name, _ in named] == ["node", "npm", "python3.13", "dot", "chromium", "man"]
    assert all(how.strip() for _, how in named)
    assert "make test needs what this machine lacks:" in said
    assert r.stdout.decode().count("\n") <= 2  # make's own echo of the check, nothing built

"""`make demo` (scripts/demo): the main job on the bundled example, end to end, as the
README promises it runs on a fresh machine: Python and the acp-* tools, nothing else."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, tool_env

pytestmark = pytest.mark.slow  # the whole demo: a dozen tools started, two sessions recorded


def _demo(out: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run([str(REPO / "scripts/demo")],
                       env={**(env or tool_env()), "DEMO_OUT": str(out)},
                       cwd=REPO, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    return r


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("demo") / "demo"
    return out, _demo(out).stderr.decode()


def test_the_demo_runs_and_records_the_bundled_session(demo):
    out, _ = demo
    # the client saw byte for byte what the bundled session holds, and replay gave it again
    agent = (REPO / "examples/hello/agent.jsonl").read_bytes()
    assert (out / "agent.jsonl").read_bytes() == agent
    assert (out / "replayed.jsonl").read_bytes() == agent
    assert sorted(os.listdir(out / "asr")) == ["sess-1.asr.jsonl"]
    assert b"hello one" in (out / "align.diff").read_bytes()
    assert (out / "align.svg").read_bytes().lstrip().startswith((b"<?xml", b"<svg"))
    page = (out / "session.html").read_bytes()
    assert page.startswith(b"<!DOCTYPE html>") and b"hello 1" in page


def test_the_demo_says_its_clock_and_what_to_open(demo):
    out, said = demo
    clock = [line for line in said.splitlines() if "--clock epoch" in line and "$" not in line]
    assert clock and "1970-01-01" in clock[0]
    listing = said.split(f"open these (all in {out}/):\n", 1)[1].splitlines()
    opened = [line.split()[0] for line in listing if line.startswith("  ")]
    assert opened[:2] == ["session.html", "align.svg"]
    assert all((out / name).exists() for name in opened)
    rest = listing[len(opened)].removeprefix("and the rest: ").split()
    assert sorted(opened + rest) == sorted(p.name + "/" * p.is_dir() for p in out.iterdir())


def test_the_commands_it_prints_are_what_it_runs(demo):
    """Each `$ ` line, run by hand in order (the demo's files moved aside first), makes
    the same files: what a reader copies from the demo is what the demo did."""
    out, said = demo
    first = out.with_name("first")
    shutil.copytree(out, first)
    shutil.rmtree(out)
    out.mkdir()
    commands = [line[2:] for line in said.splitlines() if line.startswith("$ ")]
    assert len(commands) >= 12  # a floor: the demo was read (each command is run below)
    env = tool_env()
    env["PATH"] = os.pathsep.join([str(REPO / "bin"), env["PATH"]])
    for command in commands:
        r = subprocess.run(["bash", "-c", command], cwd=REPO, env=env, capture_output=True,
                           timeout=120)
        assert r.returncode == (1 if command.startswith("acp-align") else 0), (
            command, r.stderr)
    made = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert made == sorted(str(p.relative_to(first)) for p in first.rglob("*"))
    for name in made:
        if (first / name).is_file():
            assert (out / name).read_bytes() == (first / name).read_bytes(), name


def test_without_graphviz_the_demo_writes_the_graph_as_dot(tmp_path):
    """Graphviz is no prerequisite of the demo: without `dot` it writes align.dot, says how
    to draw it, and lists it to open."""
    nodot = tmp_path / "bin"  # the PATH, less Graphviz
    nodot.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):
        for tool in Path(d).glob("*") if Path(d).is_dir() else ():
            if tool.name != "dot" and not (nodot / tool.name).exists():
                (nodot / tool.name).symlink_to(tool)
    assert shutil.which("dot", path=str(nodot)) is None
    env = {**tool_env(), "PATH": f"{REPO / 'bin'}:{nodot}"}
    out = tmp_path / "demo"
    said = _demo(out, env).stderr.decode()
    assert not (out / "align.svg").exists()
    assert (out / "align.dot").read_text().startswith("digraph")
    assert f"dot -Tsvg {out}/align.dot -o {out}/align.svg" in said
    assert re.search(r"^  align\.dot +where the two runs parted ways", said, re.M)

"""acp-pipes installed as a user installs it: the wheel, in a fresh virtual environment
outside the checkout, with nothing but its console scripts on PATH.

One wheel is built (from a copy of the checkout, pip's cache reused) and installed once
per test run (tests/installed.py, shared with tests/test_first_hour.py); every test then runs the installed commands in a scratch directory
outside the checkout: the README's pipelines, the example commands of every docs page
and of every ``--help``, byte for byte where the README shows output.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.installed import BUILD_TIMEOUT, SYSTEM_PATH, sh, user_env

pytestmark = pytest.mark.slow  # a wheel built and installed in fresh environments

def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def console_scripts() -> dict[str, str]:
    return _pyproject()["project"]["scripts"]


def test_nothing_else_provides_the_tools():
    """The system path holds no acp-* of its own, so what runs below is the wheel's."""
    for name in console_scripts():
        assert shutil.which(name, path=SYSTEM_PATH) is None, name


# -- the wheel ---------------------------------------------------------------------------


def test_the_wheel_ships_the_license_the_manual_the_schemas_and_the_page_assets(wheel):
    with zipfile.ZipFile(wheel[0]) as z:
        names = set(z.namelist())
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        assert z.read(f"{dist_info}/licenses/LICENSE") == (REPO / "LICENSE").read_bytes()
        assert (z.read(f"{dist_info}/licenses/acp_pipes/schemas/acp/LICENSE")
                == (REPO / "acp_pipes/schemas/acp/LICENSE").read_bytes())
        for page in sorted((REPO / "docs").glob("*.md")):
            assert z.read(f"acp_pipes/docs/{page.name}") == page.read_bytes(), page.name
        for schema in sorted((REPO / "acp_pipes" / "schemas").rglob("*.json")):
            assert f"acp_pipes/schemas/{schema.relative_to(REPO / 'acp_pipes/schemas')}" in names
        # the pages' own markup, style and script, inlined as read (their CSP hashes)
        assets = sorted((REPO / "acp_pipes/view/static").iterdir())
        assert {a.suffix for a in assets} == {".html", ".css", ".js"}
        for asset in assets:
            assert z.read(f"acp_pipes/view/static/{asset.name}") == asset.read_bytes()
        metadata = z.read(f"{dist_info}/METADATA").decode()
    assert "\nLicense-Expression: Apache-2.0\n" in metadata
    assert "\nLicense-File: LICENSE\n" in metadata
    # what a user reads beside the installed manual: the protocol, and where the shipped
    # schemas come from (acp_pipes/schemas/acp/README.md)
    assert re.findall(r"^Project-URL: (.*)$", metadata, re.M) == [
        "Agent Client Protocol, https://agentclientprotocol.com",
        "ACP specification, https://agentclientprotocol.com/protocol/overview",
        "ACP schemas, https://www.npmjs.com/package/@agentclientprotocol/sdk"]
    assert "package `@agentclientprotocol/sdk` on the npm registry" in \
        (REPO / "acp_pipes/schemas/acp/README.md").read_text().replace("\n", " ")
    assert "\nRequires-Python: >=3.11\n" in metadata
    assert "Apache License" in (REPO / "LICENSE").read_text()


def test_the_build_warns_of_nothing(wheel):
    """No deprecation warnings from setuptools (a TOML-table license stops building in
    2027) nor any other Python warning category."""
    warnings = re.findall(r"^.*\b\w*(?:Warning|deprecated)\b.*$", wheel[1], flags=re.M)
    assert warnings == []


def test_every_module_imports_in_the_fresh_environment(venv):
    """With only the runtime dependencies installed, every module of the package imports:
    no test extra is needed at run time, and the package is the installed one."""
    # the pytest plugin is loaded by pytest alone (its pytest11 entry point), which
    # brings pytest with it: a user without pytest never imports it
    script = ("import importlib, pkgutil, acp_pipes\n"
              "print(acp_pipes.__file__)\n"
              "for m in pkgutil.walk_packages(acp_pipes.__path__, 'acp_pipes.'):\n"
              "    if m.name != 'acp_pipes.testing.pytest_plugin':\n"
              "        importlib.import_module(m.name)\n")
    r = subprocess.run([str(venv / "bin" / "python"), "-c", script], capture_output=True,
                       text=True, env=user_env(venv), cwd=venv, timeout=120)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()).is_relative_to(venv)


def _runtime_imports(path: Path) -> set[str]:
    """Top-level names of the modules ``path`` imports, outside ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(), str(path))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for child in node.body for n in ast.walk(child))
    names = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_runtime_import_is_a_runtime_dependency():
    """Anything under acp_pipes/ imports only the standard library, itself, and
    distributions named in the project's runtime dependencies (not a test extra)."""
    project = _pyproject()["project"]
    # the cluster and export extras are features (acp-batch --scheduler and fsspec URLs;
    # acp-export's OpenTelemetry SDK), imported only on their paths
    extras = project["optional-dependencies"]
    declared = {_normalise(re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0])
                for dep in project["dependencies"] + extras["cluster"] + extras["export"]}
    providers = packages_distributions()
    undeclared = {}
    for path in sorted((REPO / "acp_pipes").rglob("*.py")):
        for name in _runtime_imports(path):
            if name in sys.stdlib_module_names or name in ("acp_pipes", "__future__"):
                continue
            if name == "pytest" and path.name == "pytest_plugin.py":  # pytest loads it
                continue
            dists = {_normalise(d) for d in providers.get(name, [name])}
            if not dists & declared:
                undeclared.setdefault(name, []).append(str(path.relative_to(REPO)))
    assert undeclared == {}


# -- the installed commands --------------------------------------------------------------


def test_acp_batch_without_the_cluster_extra_says_what_to_install(venv, tmp_path):
    """The base install converts on local workers; a URL or --scheduler, which need the
    cluster extra, say how to get it (exit 2), and nothing is written."""
    shutil.copytree(REPO / "examples/batch/wire", tmp_path / "logs")
    r = sh("acp-batch asr logs -o streams -j 2", venv, tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    assert len(list((tmp_path / "streams").rglob("*.asr.jsonl"))) == 7
    python = venv / "bin" / "python"  # (made without pip: pip is asked to install there)
    for command in ("acp-batch asr s3://bucket/logs/ -o out",
                    "acp-batch asr logs -o out --scheduler tcp://127.0.0.1:8786"):
        r = sh(command, venv, tmp_path)
        assert r.returncode == 2, (command, r.stderr)
        hint = r.stderr.decode().split("(acp-pipes' extra 'cluster'): ", 1)[1].strip()
        assert hint == (f"pip --python {python} install 'distributed>=2024.1' "
                        "'fsspec>=2024.2'"), r.stderr
        assert not (tmp_path / "out").exists()
    # the hint works: pip resolves it for that environment (without installing it)
    dry = subprocess.run([sys.executable, "-m", *shlex.split(hint), "--dry-run", "-q"],
                         capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    assert dry.returncode == 0, dry.stderr[-2000:]


def test_help_names_the_installed_manual(venv, tmp_path):
    """Every tool's --help names its manual page by a path that exists in the
    installation (no docs/ or acp_pipes/io/wire.py of a checkout the user does not have)."""
    for name in console_scripts():
        r = sh(f"{name} --help", venv, tmp_path)
        assert r.returncode == 0, (name, r.stderr)
        text = r.stdout.decode()
        assert "docs/" not in text.replace("/acp_pipes/docs/", ""), name
        assert "wire.py" not in text, name
        pages = re.findall(r"^(?:Manual|The [\w ]+format)[\w ,]*: (/\S+\.md)$", text, flags=re.M)
        if (REPO / "docs" / f"{name}.md").is_file():
            assert pages and Path(pages[0]).name == f"{name}.md", (name, text)
        for page in pages:
            assert Path(page).is_relative_to(venv), page
            assert Path(page).read_bytes() == (REPO / "docs" / Path(page).name).read_bytes()


# -- the documented examples, run with the installed commands only -------------------------


def _run_all(venv: Path, cwd: Path, commands: list[str], stdin: Path | None = None
             ) -> list[tuple[str, subprocess.CompletedProcess]]:
    return [(command, sh(command, venv, cwd, stdin)) for command in commands]


@pytest.fixture(scope="session")
def recordings(venv, tmp_path_factory) -> Path:
    """A scratch directory outside the checkout holding the files the examples name, made
    with the installed commands: the examples/ folder; client.jsonl (examples/hello);
    wire.jsonl, original.wire.jsonl, s.jsonl, run1.jsonl (its recording, made with
    --script), wire.jsonl.gz; run3.jsonl (a second recording of its script); run2.jsonl
    (the session with "hello one"); runs/ (three
    runs); run.jsonl (two sessions, sess-1 and sess-2, on one connection); S.asr.jsonl,
    S2.asr.jsonl, a.asr.jsonl, b.asr.jsonl (its ASR stream); parent.asr.jsonl and
    child.asr.jsonl (a fork); logs/ (examples/batch/wire); agent.jsonl (the agent's side
    of examples/hello)."""
    d = tmp_path_factory.mktemp("recordings")
    shutil.copytree(REPO / "examples", d / "examples",
                    ignore=shutil.ignore_patterns("asr", ".done"))
    shutil.copy(d / "examples/hello/client.jsonl", d / "client.jsonl")
    shutil.copy(d / "examples/hello/agent.jsonl", d / "agent.jsonl")
    shutil.copytree(d / "examples/batch/wire", d / "logs")
    (d / "runs").mkdir()
    two_sessions = b"".join(line + b"\n" for line in [
        b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2}}',
        b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}',
        b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}',
        b'{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"sess-1",'
        b'"prompt":[{"type":"text","text":"one"}]}}',
        b'{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"sess-2",'
        b'"prompt":[{"type":"text","text":"two"}]}}'])
    (d / "two.jsonl").write_bytes(two_sessions)
    record = "acp-tee --script {} -o {} -- acp-echo-agent > /dev/null"
    made = _run_all(venv, d, [
        record.format("client.jsonl", "wire.jsonl"),
        record.format("client.jsonl", "run3.jsonl"),
        "sed 's/\"hello 1\"/\"hello one\"/' client.jsonl > client-b.jsonl",
        "sed 's/\"hello 1\"/\"hello three\"/' client.jsonl > client-c.jsonl",
        record.format("client-b.jsonl", "run2.jsonl"),
        record.format("client-c.jsonl", "runs/run3.jsonl"),
        record.format("two.jsonl", "run.jsonl"),
        "for f in original.wire.jsonl s.jsonl run1.jsonl runs/run1.jsonl; do cp wire.jsonl $f;"
        " done; cp run2.jsonl runs/run2.jsonl; gzip -k wire.jsonl",
        "acp-asr wire.jsonl > S.asr.jsonl && cp S.asr.jsonl S2.asr.jsonl"
        " && cp S.asr.jsonl a.asr.jsonl && cp S.asr.jsonl b.asr.jsonl",
        "acp-asr -o forks/ logs/ASR-718-fork-lineage.jsonl"
        " && cp forks/parent.asr.jsonl forks/child.asr.jsonl .",
    ])
    for command, r in made:
        assert r.returncode == 0 and not r.stderr, (command, r.stderr)
    return d


def _scratch(recordings: Path, tmp_path: Path) -> Path:
    work = tmp_path / "work"
    shutil.copytree(recordings, work)
    return work


def _without_comment(line: str) -> str:
    return re.sub(r"\s+#\s.*$", "", line).strip()


def docs_examples(text: str) -> list[tuple[str, list[str]]]:
    """The commands of a page's ```sh blocks, each with the output shown for it: a block
    of ``$ `` lines shows output under each; otherwise every line is a command."""
    examples: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        lines = block.splitlines()
        if any(line.startswith("$ ") for line in lines):
            for line in lines:
                if line.startswith("$ "):
                    examples.append((_without_comment(line[2:]), []))
                elif examples:
                    examples[-1][1].append(line)
        else:
            examples += [(_without_comment(line), []) for line in lines
                         if _without_comment(line)]
    return examples


def _runnable(command: str) -> bool:
    """Whether every program the command runs is here: an acp-* tool, a shell builtin or
    one of the system's (a page may pipe into jq, which a machine may lack)."""
    words = [part.split()[0] for part in re.split(r"\||&&|;", command) if part.split()]
    return all(w.startswith("acp-") or w in ("echo", "cd", "for", "do", "done")
               or shutil.which(w, path=SYSTEM_PATH) for w in words)


def _failed(results: list[tuple[str, subprocess.CompletedProcess]]) -> list[tuple]:
    """Commands that failed: an exit status beyond 1 (0 ok, 1 a difference found), or a
    diagnostic that is a bug (a traceback, an internal error)."""
    return [(command, r.returncode, r.stderr.decode(errors="replace")[-600:])
            for command, r in results
            # loose on purpose: a page's example may compare two runs that differ (exit 1)
            if r.returncode not in (0, 1) or b"Traceback" in r.stderr
            or b"internal error" in r.stderr]


@pytest.mark.parametrize("page", sorted(p.name for p in (REPO / "docs").glob("*.md")))
def test_every_docs_example_runs_installed(page, venv, recordings, tmp_path):
    """Each command shown in a docs page runs with the installed commands, in the order
    shown, with the client script on stdin (where a command is an agent or a replay
    that an editor would drive); where output is shown, its labels are there."""
    examples = docs_examples((REPO / "docs" / page).read_text())
    work = _scratch(recordings, tmp_path)
    results = []
    for command, shown in examples:
        if not _runnable(command):
            continue
        r = sh(command, venv, work, stdin=work / "client.jsonl")
        results.append((command, r))
        labels = [re.split(r"\s{2,}", line)[0] for line in shown if line.strip() != "..."]
        out = r.stdout.decode()
        assert all(re.search(rf"^{re.escape(label)}(\s|$)", out, flags=re.M)
                   for label in labels), (command, out)
    assert _failed(results) == []


def test_every_help_example_runs_installed(venv, recordings, tmp_path):
    """The example pipelines at the end of every tool's --help run as shown."""
    work = _scratch(recordings, tmp_path)
    commands = []
    for name in console_scripts():
        text = sh(f"{name} --help", venv, work).stdout.decode()
        block = text.split("\nexample:\n", 1)[1].split("\n\n", 1)[0]
        commands += [_without_comment(line) for line in block.splitlines()]
    assert len(commands) >= len(console_scripts())
    results = _run_all(venv, work, commands, stdin=work / "client.jsonl")
    assert _failed(results) == []


def test_the_examples_use_the_installed_tools_outside_a_checkout(venv, tmp_path):
    """examples/roundtrip and examples/batch copied out of the checkout (no bin/ beside
    them) run on the acp-* tools on PATH."""
    shutil.copytree(REPO / "examples", tmp_path / "examples",
                    ignore=shutil.ignore_patterns("asr", ".done"))
    r = sh("sh examples/roundtrip/roundtrip.sh rt", venv, tmp_path)
    assert r.returncode == 0 and b'"equivalent":true' in r.stderr, r.stderr
    r = sh("make -s -j4 -C examples/batch OUT_DIR=$PWD/streams validate", venv, tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(list((tmp_path / "streams").glob("*.asr.jsonl"))) == 7


def test_the_examples_fall_back_to_the_checkouts_bin(tmp_path):
    """With no acp-* on PATH, the examples run the checkout's bin/ launchers."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = SYSTEM_PATH
    r = subprocess.run(["sh", str(REPO / "examples/roundtrip/roundtrip.sh"), str(tmp_path / "rt")],
                       capture_output=True, env=env, timeout=120)
    assert r.returncode == 0 and b'"equivalent":true' in r.stderr, r.stderr
    r = subprocess.run(["make", "-s", "-C", str(REPO / "examples/batch"),
                        f"OUT_DIR={tmp_path / 'streams'}", "validate"],
                       capture_output=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(list((tmp_path / "streams").glob("*.asr.jsonl"))) == 7

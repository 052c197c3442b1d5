"""acp-pipes installed as a user installs it: the wheel, in a fresh virtual environment
outside the checkout, with nothing but its console scripts on PATH.

One wheel is built (from a copy of the checkout, pip's cache reused) and installed once
per test session; every test then runs the installed commands in a scratch directory
outside the checkout: the README's pipelines, the example commands of every docs page
and of every ``--help``, byte for byte where the README shows output.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from tests.conftest import REPO

# What a fresh installation may rely on besides itself: the system's tools (sh, sed,
# cmp, make, Graphviz's dot), never the checkout's bin/ or its virtual environment.
SYSTEM_PATH = "/usr/bin:/bin"
BUILD_TIMEOUT = 600
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "node_modules", "__pycache__", "build",
                                    "dist", "out", ".hypothesis", ".pytest_cache",
                                    ".ruff_cache", "*.egg-info")


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def console_scripts() -> dict[str, str]:
    return _pyproject()["project"]["scripts"]


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> tuple[Path, str]:
    """The wheel pip builds from a copy of the checkout, and the build's verbose log."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "acp-pipes"
    shutil.copytree(REPO, source, symlinks=True, ignore=NOT_SOURCE)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps",
                        "-w", str(tmp / "dist"), str(source)],
                       capture_output=True, text=True, cwd=tmp, timeout=BUILD_TIMEOUT)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    (built,) = (tmp / "dist").glob("acp_pipes-*.whl")
    return built, r.stdout + r.stderr


@pytest.fixture(scope="session")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel and its runtime dependencies only."""
    root = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True,
                   timeout=BUILD_TIMEOUT)
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(root / "bin" / "python"),
                        "install", "-q", str(wheel[0])],
                       capture_output=True, text=True, cwd=root, timeout=BUILD_TIMEOUT)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
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


def test_nothing_else_provides_the_tools():
    """The system path holds no acp-* of its own, so what runs below is the wheel's."""
    for name in console_scripts():
        assert shutil.which(name, path=SYSTEM_PATH) is None, name


# -- the wheel ---------------------------------------------------------------------------


def test_the_wheel_ships_the_license_the_manual_and_the_schemas(wheel):
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
        metadata = z.read(f"{dist_info}/METADATA").decode()
    assert "\nLicense-Expression: Apache-2.0\n" in metadata
    assert "\nLicense-File: LICENSE\n" in metadata
    assert "\nProject-URL: " in metadata
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
    script = ("import importlib, pkgutil, acp_pipes\n"
              "print(acp_pipes.__file__)\n"
              "for m in pkgutil.walk_packages(acp_pipes.__path__, 'acp_pipes.'):\n"
              "    importlib.import_module(m.name)\n")
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
    declared = {_normalise(re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0])
                for dep in _pyproject()["project"]["dependencies"]}
    providers = packages_distributions()
    undeclared = {}
    for path in sorted((REPO / "acp_pipes").rglob("*.py")):
        for name in _runtime_imports(path):
            if name in sys.stdlib_module_names or name in ("acp_pipes", "__future__"):
                continue
            dists = {_normalise(d) for d in providers.get(name, [name])}
            if not dists & declared:
                undeclared.setdefault(name, []).append(str(path.relative_to(REPO)))
    assert undeclared == {}


# -- the installed commands --------------------------------------------------------------


def test_help_names_the_installed_manual(venv, tmp_path):
    """Every tool's --help names its manual page by a path that exists in the
    installation (no docs/ or acp_pipes/wire.py of a checkout the user does not have)."""
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

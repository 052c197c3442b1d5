"""The house rules that the code's own imports can be held to, read from its syntax trees
(nothing is imported or run): no private name crosses a module boundary (a name another
module uses is public), and argument parsing lives in acp_pipes/cli alone (the shared
runner; docs/ and --help are made from it)."""

from __future__ import annotations

import ast
import subprocess
import sys
from functools import cache
from pathlib import Path

from tests.conftest import REPO

PACKAGE = REPO / "acp_pipes"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    """Whether ``name`` (dotted) is a module or package of acp_pipes, not a name in one."""
    path = REPO.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@cache
def sources() -> list[tuple[Path, str, ast.Module]]:
    """Every module of acp_pipes: its path, dotted name and tree."""
    return [(p, module_name(p), ast.parse(p.read_bytes(), str(p)))
            for p in sorted(PACKAGE.rglob("*.py"))]


def absolute(node: ast.ImportFrom, importer: str, path: Path) -> str:
    """The module a ``from ... import`` reads from, relative levels resolved."""
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    if path.name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private_crossings(path: Path, importer: str, tree: ast.Module) -> list[str]:
    """``from acp_pipes.m import _name`` (or ``import acp_pipes.m._sub``), and
    ``m._name`` where ``m`` names another acp_pipes module, in one module."""
    where = path.relative_to(REPO)
    found: list[tuple[int, str]] = []
    modules: dict[str, str] = {}  # local name -> the acp_pipes module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not alias.name.startswith("acp_pipes."):
                    continue
                if any(is_private(part) for part in alias.name.split(".")):
                    found.append((node.lineno, f"import {alias.name}"))
                if alias.asname:
                    modules[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            source = absolute(node, importer, path)
            if source != "acp_pipes" and not source.startswith("acp_pipes."):
                continue
            if any(is_private(part) for part in source.split(".")):
                found.append((node.lineno, f"from {source} import ..."))
            for alias in node.names:
                if is_private(alias.name):
                    found.append((node.lineno, f"{alias.name} from {source}"))
                elif is_module(f"{source}.{alias.name}"):
                    modules[alias.asname or alias.name] = f"{source}.{alias.name}"
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and is_private(node.attr)
                and isinstance(node.value, ast.Name) and node.value.id in modules
                and modules[node.value.id] != importer):
            found.append((node.lineno, f"{node.attr} of {modules[node.value.id]}"))
    return [f"{where}:{line}: {what}" for line, what in sorted(found)]


def test_the_house_is_read_whole():
    """The checks below see every room (a package moved or renamed still is read)."""
    names = {name for _p, name, _t in sources()}
    assert {"acp_pipes.cli.runner", "acp_pipes.io.wire", "acp_pipes.protocol.jsonrpc",
            "acp_pipes.fold", "acp_pipes.errors"} <= names
    assert len(names) == len(list(PACKAGE.rglob("*.py")))


def test_the_check_for_private_names_finds_them():
    """The checker finds each form of crossing, and leaves a module's own names, dunders
    and names from outside acp_pipes alone (a check that cannot fail proves nothing)."""
    code = ("from acp_pipes.io.lines import _Followed, raw_lines, __all__\n"
            "from ..io import wire\n"
            "import acp_pipes.io.live as live\n"
            "from os import _exit\n"
            "x = wire._hidden + live._LiveRaw + wire.A2C + raw_lines._x\n")
    path = PACKAGE / "fold" / "example.py"
    got = private_crossings(path, "acp_pipes.fold.example", ast.parse(code))
    assert got == ["acp_pipes/fold/example.py:1: _Followed from acp_pipes.io.lines",
                   "acp_pipes/fold/example.py:5: _LiveRaw of acp_pipes.io.live",
                   "acp_pipes/fold/example.py:5: _hidden of acp_pipes.io.wire"]


def test_no_private_name_crosses_a_module_boundary():
    """A name another module uses is public: its underscore dropped, or the code moved."""
    found = [f for path, name, tree in sources() for f in private_crossings(path, name, tree)]
    assert found == [], "private names imported across modules:\n" + "\n".join(found)


def argparse_imports(path: Path, tree: ast.Module) -> list[str]:
    where = path.relative_to(REPO)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"{where}:{node.lineno}: import {a.name}" for a in node.names
                      if a.name.split(".")[0] == "argparse"]
        elif (isinstance(node, ast.ImportFrom) and not node.level
              and (node.module or "").split(".")[0] == "argparse"):
            found.append(f"{where}:{node.lineno}: from {node.module} import ...")
    return found


def test_argparse_is_imported_in_cli_alone():
    """Argument parsing is the CLI's (acp_pipes/cli, its shared runner): a module below
    it takes its options as values, so it can be used in-process."""
    cli = PACKAGE / "cli"
    found = [f for path, _name, tree in sources() if cli not in path.parents
             for f in argparse_imports(path, tree)]
    assert found == [], "argparse outside acp_pipes/cli:\n" + "\n".join(found)
    assert any(argparse_imports(p, t) for p, _n, t in sources() if cli in p.parents)


def test_the_floors_hold_and_no_package_has_a_circle():
    """The layers contract of pyproject.toml ([tool.importlinter]: cli over batch over
    export and testing over replay, view and align over asr and sameness over fold,
    frame, tee and echo over io over protocol over errors), and no import circle inside
    any package: import-linter itself, as `make layers` runs it."""
    tool = Path(sys.executable).with_name("lint-imports")
    assert tool.is_file(), f"{tool} is missing: make install (the dev extra) installs it"
    p = subprocess.run([str(tool), "--no-cache"], cwd=REPO, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2 kept, 0 broken" in p.stdout, p.stdout

"""The hint for a missing extra is a command that works where acp-pipes is installed:
pipx's own for a pipx environment, else the pip of the interpreter running the tool
(acp_pipes.extras). The installed wheel's case is in tests/test_installed.py."""

from __future__ import annotations

import shlex
import sys

from acp_pipes.extras import install_hint, requirements
from tests.conftest import REPO


def test_the_requirements_are_the_extras_own():
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for extra in ("export", "cluster"):
        assert requirements(extra) == [r.replace(" ", "") for r in extras[extra]]


def test_a_pipx_environment_gets_pipx_inject(tmp_path):
    (tmp_path / "pipx_metadata.json").write_text("{}")
    hint = install_hint("export", prefix=str(tmp_path), python=str(tmp_path / "bin/python"))
    assert shlex.split(hint) == ["pipx", "inject", "acp-pipes", *requirements("export")]


def test_elsewhere_the_interpreter_running_the_tool_installs_them(tmp_path):
    hint = install_hint("cluster", prefix=str(tmp_path), python=sys.executable)
    assert shlex.split(hint) == [sys.executable, "-m", "pip", "install",
                                 *requirements("cluster")]

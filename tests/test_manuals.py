"""Man pages and shell completion, made from each executable's own argument parser by
`make manuals` (argparse-manpage, shtab) and put under PREFIX by `make install-manuals`:
each man page renders without a warning and documents every option --help lists; bash
completes every option, each option's choices and acp-export's modes."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from acp_pipes.cli.manual import tool
from tests.conftest import REPO

pytestmark = pytest.mark.slow  # ten man pages and completions made, each rendered by man

EXECUTABLES = sorted(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"])


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    """`make install-manuals` into a scratch PREFIX (.venv taken as it is: -o)."""
    tmp = tmp_path_factory.mktemp("manuals")
    r = subprocess.run(["make", "-s", "-o", ".venv/.installed-stamp", "install-manuals",
                        f"OUT={tmp / 'out'}", f"PREFIX={tmp / 'prefix'}"],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return tmp / "prefix"


def _options(name: str) -> set[str]:
    return {s for a in tool(name).parser()._actions for s in a.option_strings}


def test_every_executable_gets_its_page_and_completions(prefix):
    share = prefix / "share"
    assert sorted(p.stem for p in (share / "man/man1").iterdir()) == EXECUTABLES
    assert sorted(p.name for p in (share / "bash-completion/completions").iterdir()) == EXECUTABLES
    zsh = sorted((share / "zsh/site-functions").iterdir())
    assert [p.name for p in zsh] == [f"_{name}" for name in EXECUTABLES]
    for name, page in zip(EXECUTABLES, zsh, strict=True):
        assert page.read_text().startswith(f"#compdef {name}\n")


@pytest.mark.parametrize("name", EXECUTABLES)
def test_the_man_page_renders_and_says_what_help_says(name, prefix):
    page = prefix / "share/man/man1" / f"{name}.1"
    r = subprocess.run(["man", "--warnings", "-l", str(page)], capture_output=True, text=True,
                       env={**os.environ, "MANWIDTH": "200", "MAN_KEEP_FORMATTING": "0"},
                       timeout=60)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    text = re.sub(r".\x08", "", r.stdout)  # overstrike (bold, underline) as plain text
    summary = tool(name).summary.rstrip(".")
    assert re.search(rf"^NAME\n\s+{re.escape(name)} - {re.escape(summary[0].lower() + summary[1:])}",
                     " ".join(text.split(" ")), flags=re.M), text[:400]
    for option in _options(name) - {"-h", "--help"}:  # (a man page is no --help)
        assert re.search(rf"(^|[\s,\[]){re.escape(option)}\b", text, flags=re.M), option
    example = tool(name).example.strip().splitlines()[0]
    assert example in text


def _complete(prefix: Path, words: list[str]) -> list[str]:
    """What bash completes for the last of ``words``, with the installed completion."""
    script = prefix / "share/bash-completion/completions" / words[0]
    line = " ".join(words)
    cmd = (f"source {script}; fn=$(complete -p {words[0]} | sed 's/.*-F \\([^ ]*\\).*/\\1/'); "
           f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
           f"COMP_LINE={line!r}; COMP_POINT={len(line)}; "
           f"$fn {words[0]} {words[-1]!r} {words[-2]!r}; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return sorted(filter(None, r.stdout.splitlines()))


@pytest.mark.parametrize("name", EXECUTABLES)
def test_bash_completes_every_option(name, prefix):
    offered = _complete(prefix, [name, "--"])
    wanted = sorted(o for o in _options(name) if o.startswith("--"))
    assert offered == wanted


def test_bash_completes_choices_and_modes(prefix):
    assert _complete(prefix, ["acp-frame", "--format", ""]) == ["json", "pretty", "table"]
    assert _complete(prefix, ["acp-export", ""]) == ["agent-trail", "otlp"]
    assert _complete(prefix, ["acp-tee", "--clo"]) == ["--clock"]

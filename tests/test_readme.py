"""The README's console examples are real: each command is run and its output compared.

Each ```console block is a shell session: ``$ `` starts a command (a trailing ``\\``
continues it), the lines up to the next command are its expected output. The blocks
run in order in one empty scratch directory, with the checkout's ``bin/`` first on PATH,
as a reader following along has (tests/test_installed.py and tests/test_first_hour.py
run them again with the installed commands).
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from tests.conftest import REPO, tool_env


def console_sessions(text: str) -> list[tuple[str, str]]:
    """(command, expected output) pairs of every ```console block, in order."""
    pairs: list[tuple[str, str]] = []
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.S):
        cmd: list[str] | None = None
        out: list[str] = []
        cont = False
        for line in block.splitlines():
            if cont:
                cmd.append(line.strip())
                cont = line.endswith("\\")
            elif line.startswith("$ "):
                if cmd is not None:
                    pairs.append((" ".join(cmd), "\n".join(out)))
                cmd, out = [line[2:]], []
                cont = line.endswith("\\")
            else:
                out.append(line)
        if cmd is not None:
            pairs.append((" ".join(cmd), "\n".join(out)))
    return [(c.replace("\\ ", " "), o) for c, o in pairs]


@pytest.mark.slow  # every README pipeline, each tool a real process
def test_readme_console_examples_run_as_shown(tmp_path):
    """In an empty scratch directory, as the README says to run them: they need nothing
    from the checkout but the tools."""
    env = tool_env()
    env["PATH"] = os.pathsep.join([str(REPO / "bin"), env.get("PATH", "")])
    sessions = console_sessions((REPO / "README.md").read_text())
    assert len(sessions) >= 8  # a floor: the three pipelines are there (the README grows)
    for command, expected in sessions:
        r = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env,
                           capture_output=True, timeout=120)
        assert r.stdout.decode().rstrip("\n") == expected, (command, r.stderr.decode())


def test_every_tool_has_a_docs_page_and_a_readme_row():
    readme = (REPO / "README.md").read_text()
    scripts = re.findall(r'^(acp-[a-z-]+) = "acp_pipes\.cli\.([a-z_]+):main"',
                         (REPO / "pyproject.toml").read_text(), flags=re.M)
    assert len(scripts) == 10
    for name, module in scripts:
        assert (REPO / "acp_pipes" / "cli" / f"{module}.py").is_file()
        assert (REPO / "bin" / name).is_file()
        assert f"| `{name}" in readme, f"{name} has no row in the README's tool table"
        if name != "acp-echo-agent":  # a test fixture: documented by its --help
            assert (REPO / "docs" / f"{name}.md").is_file(), f"{name} has no docs page"


def _zed_settings(text: str) -> list[str]:
    return [block for block in re.findall(r"```json\n(.*?)```", text, flags=re.S)
            if '"agent_servers"' in block]


def test_the_zed_settings_are_one_example_that_acp_tee_takes():
    """README.md and docs/acp-tee.md show the same Zed settings; they parse as JSON, name
    a custom agent server whose command is acp-tee by an absolute path, and whose args are
    a command line acp-tee takes as it is (the plain form: the agent starts at once), with
    an -o that gives each session a log of its own."""
    from acp_pipes.cli.tee import make_tool, plain_command
    from acp_pipes.tee.logfile import check, resolve

    (readme,) = _zed_settings((REPO / "README.md").read_text())
    (docs,) = _zed_settings((REPO / "docs" / "acp-tee.md").read_text())
    assert readme == docs
    ((name, server),) = json.loads(readme)["agent_servers"].items()
    assert name and server["type"] == "custom" and server["env"] == {}
    assert set(server) == {"type", "command", "args", "env"}
    assert os.path.isabs(server["command"]) and os.path.basename(server["command"]) == "acp-tee"
    args = server["args"]
    assert all(isinstance(a, str) for a in args)
    command, clock = plain_command(args)
    cut = args.index("--")
    parsed = make_tool().parser().parse_args(args[:cut])
    assert (command, clock) == (args[cut + 1:], parsed.clock)
    check(parsed.output)
    path, new = resolve(parsed.output, command)
    assert new and os.path.isabs(path)  # a new file per session, wherever the editor runs it


RULE = re.compile(r"ASR-7\d\d")


def _prose(text: str) -> str:
    """A page without its code blocks, code spans and headings (where IDs stay plain)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    return re.sub(r"`[^`\n]*`", "", text)


def test_every_rule_id_links_to_the_rules_text():
    """ASR-700..735 each have their text in docs/asr.md under a heading of their own, and
    every rule ID the README and the docs pages name in prose is a link to it."""
    asr = (REPO / "docs" / "asr.md").read_text()
    headings = re.findall(r"^#### (ASR-7\d\d)\n(.+)", asr, flags=re.M)
    assert [h for h, _ in headings] == [f"ASR-{n}" for n in range(700, 736)]
    assert all(text.strip() for _, text in headings)
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        prose = _prose(page.read_text())
        target = {"README.md": "docs/asr.md", "asr.md": ""}.get(page.name, "asr.md")
        for rule, link in re.findall(r"\[(ASR-7\d\d)\]\(([^)]*)\)", prose):
            assert link == f"{target}#{rule.lower()}", (page.name, rule, link)
        bare = RULE.findall(re.sub(r"\[ASR-7\d\d\]\([^)]*\)", "", prose))
        assert bare == [], (page.name, bare)


def test_the_readme_says_what_acp_asr_and_the_diff_marks_are():
    """A newcomer meets ACP, ASR and acp-align's diff before any page explains them."""
    readme = (REPO / "README.md").read_text()
    intro = readme.split("## Install", 1)[0]
    assert "ACP is how an editor (the client) and a coding agent talk" in intro
    assert "ASR is the durable form acp-pipes stores a session in" in intro
    first_diff = readme.index("acp-align --format diff")
    legend = readme[:first_diff]
    for mark in ("`→` a frame from client to", "`←` one from agent to client", "`!` changed",
                 "`-` only", "`+` only"):
        assert mark in legend, mark

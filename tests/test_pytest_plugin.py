"""The pytest plugin, run as its users run it: real inner pytest sessions (pytester, in
this process; the entry point's in a process of its own, as an installation loads it;
the real fast-agent's too) whose tests drive a real client, the official TypeScript SDK's
(tests/clients/sdk_client.mjs), against the command ``acp_agent`` gives them, with the echo
agent as the real agent. The first run records the cassette through acp-tee; the next
plays it with the agent gone (its path no longer exists), and a client that sends what
the cassette does not hold fails with acp-replay's report. The real fast-agent with the
official Python SDK client is in tests/test_pytest_plugin_fast_agent.py.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib

import orjson
import pytest

from acp_pipes.io.wire import decode_raw
from tests.conftest import REPO, tool_argv, tool_env
from tests.test_replay_sdk_client import CLIENTS, NODE, pytestmark  # noqa: F401

pytest_plugins = ["pytester"]

CASSETTE = "cassettes/test_client/test_the_client_says_hello.wire.jsonl"

CLIENT_TEST = """
import json, os, subprocess, sys
from pathlib import Path

import pytest

AGENT = json.loads(os.environ["ACP_TEST_AGENT"])

@pytest.mark.acp_cassette(tee_args=["--no-host", "--clock", "epoch"])
def test_the_client_says_hello(acp_agent):
    argv = acp_agent(AGENT)
    Path("argv.json").write_text(json.dumps(argv))
    got = subprocess.run([os.environ["ACP_TEST_NODE"], os.environ["ACP_TEST_CLIENT"],
                          os.environ.get("PROMPTS", "3"), os.environ.get("PERMISSION_EVERY", "2"),
                          "--", *argv], capture_output=True, timeout=60)
    Path(os.environ.get("OUT", "out.jsonl")).write_bytes(got.stdout)
    assert got.returncode == 0, got.stderr.decode()
    assert os.environ.get("FAIL_AFTER") is None, "the test failed after the session"
"""

ECHO = tool_argv("echo-agent")
GONE = ["/nonexistent/acp-echo-agent"]  # no agent: what plays must be the cassette


@pytest.fixture
def inner(pytester, monkeypatch):
    """Run the inner session with ``--`` options and environment ``env``; the plugin is
    loaded by name, as the entry point loads it."""
    pytester.makepyfile(test_client=CLIENT_TEST)
    for k, v in tool_env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("ACP_TEST_NODE", NODE or "node")
    monkeypatch.setenv("ACP_TEST_CLIENT", str(CLIENTS / "sdk_client.mjs"))

    def run(*args: str, agent: list[str] = ECHO, **env: str):
        with monkeypatch.context() as m:
            m.setenv("ACP_TEST_AGENT", orjson.dumps(agent).decode())
            for k, v in env.items():
                m.setenv(k, v)
            return pytester.runpytest_inprocess("-p", "acp_pipes.testing.pytest_plugin",
                                                "-p", "no:cacheprovider", *args)

    return run


def _frames(log: bytes, direction: str) -> list[bytes]:
    recs = [orjson.loads(x) for x in log.splitlines()[1:]]
    return [decode_raw(r) for r in recs if r.get("dir") == direction]


def _left(pytester) -> list[str]:
    """Every file under cassettes/, so a partial recording left behind shows."""
    root = pytester.path / "cassettes"
    return sorted(str(p.relative_to(pytester.path)) for p in root.rglob("*") if p.is_file()) \
        if root.exists() else []


def test_the_entry_point_loads_the_plugin(pytester, monkeypatch):
    """pyproject's ``pytest11`` entry point, as an installation declares it (a dist-info
    on the path), is what pytest loads without ``-p``; and ``-p acp_pipes.testing.pytest_plugin``
    beside it loads it once (the entry point is named as the module)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    points = project["entry-points"]["pytest11"]
    assert points == {"acp_pipes.testing.pytest_plugin": "acp_pipes.testing.pytest_plugin"}
    site = pytester.mkdir("site")
    info = site / "acp_pipes_probe-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acp-pipes-probe\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[pytest11]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()))
    pytester.makepyfile(test_client=CLIENT_TEST)
    for k, v in tool_env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PYTHONPATH", f"{site}:{tool_env()['PYTHONPATH']}")
    monkeypatch.setenv("ACP_TEST_AGENT", orjson.dumps(GONE).decode())
    for extra in ((), ("-p", "acp_pipes.testing.pytest_plugin")):
        got = pytester.runpytest_subprocess(*extra, "-p", "no:cacheprovider",
                                            "--acp-record-mode", "none", timeout=120)
        got.assert_outcomes(failed=1)
        assert "no cassette " in got.stdout.str(), got.stderr.str()


def test_a_missing_cassette_is_recorded_then_played_without_the_agent(inner, pytester, tmp_path):
    first = inner(OUT="recorded.jsonl")
    first.assert_outcomes(passed=1)
    assert _left(pytester) == [CASSETTE]
    cassette = (pytester.path / CASSETTE).read_bytes()

    # byte for byte what acp-tee logs of the same session (same options) run by hand
    reference = tmp_path / "reference.wire.jsonl"
    by_hand = subprocess.run(
        [NODE, str(CLIENTS / "sdk_client.mjs"), "3", "2", "--",
         *tool_argv("tee", "-o", str(reference), "--no-host", "--clock", "epoch", "--", *ECHO)],
        capture_output=True, env=tool_env(), timeout=60)
    assert by_hand.returncode == 0, by_hand.stderr
    assert cassette == reference.read_bytes()
    assert by_hand.stdout == (pytester.path / "recorded.jsonl").read_bytes()

    # the agent is gone; the cassette plays, the client gets the same session
    second = inner(OUT="played.jsonl", agent=GONE)
    second.assert_outcomes(passed=1)
    played = (pytester.path / "played.jsonl").read_bytes()
    assert played == (pytester.path / "recorded.jsonl").read_bytes()
    assert b'"done":true,"permissions":1' in played
    assert GONE[0] not in (pytester.path / "argv.json").read_text()
    assert (pytester.path / CASSETTE).read_bytes() == cassette  # played, not rewritten
    assert _left(pytester) == [CASSETTE]


def test_the_played_cassette_sends_the_recorded_bytes(inner, pytester, tmp_path):
    """What the client is sent from the cassette is the recorded agent's bytes (seen
    through acp-tee put between the client and the command acp_agent gave)."""
    inner().assert_outcomes(passed=1)
    inner(agent=GONE).assert_outcomes(passed=1)
    played = orjson.loads((pytester.path / "argv.json").read_text())  # the command it was given
    seen = tmp_path / "seen.wire.jsonl"
    got = subprocess.run(
        [NODE, str(CLIENTS / "sdk_client.mjs"), "3", "2", "--",
         *tool_argv("tee", "-o", str(seen), "--", *played)],
        capture_output=True, env=tool_env(), timeout=60)
    assert got.returncode == 0, got.stderr
    cassette = (pytester.path / CASSETTE).read_bytes()
    assert _frames(seen.read_bytes(), "a2c") == _frames(cassette, "a2c")
    assert _frames(seen.read_bytes(), "c2a") == _frames(cassette, "c2a")


def test_a_client_that_sends_another_prompt_fails_with_the_divergence(inner, pytester):
    """The divergence is the test's one failure, raised in its call (not an error at
    teardown after the client's own failed assertion), and says the frames that differ;
    what the client did after it lost its agent is said after, as its consequence."""
    inner(PERMISSION_EVERY="0").assert_outcomes(passed=1)
    cassette = (pytester.path / CASSETTE).read_bytes()
    changed = inner(agent=GONE)  # prompt 2 is now "/permission hello 2"
    changed.assert_outcomes(failed=1)
    out = changed.stdout.str()
    assert "ERROR at teardown" not in out
    assert "_ test_the_client_says_hello _" in out
    assert out.index("as the agent stopped (exit 1)") < out.index(
        "(the test then failed with AssertionError")
    assert "miss: client frame 4 of 6 matches nothing recorded" in out
    assert '/params/prompt/0/text: "hello 2" -> "/permission hello 2"' in out
    assert (pytester.path / CASSETTE).read_bytes() == cassette


def test_a_client_that_sends_more_than_the_cassette_holds_fails(inner, pytester):
    inner(PROMPTS="2").assert_outcomes(passed=1)
    more = inner(PROMPTS="3", agent=GONE)
    more.assert_outcomes(failed=1)
    out = more.stdout.str()
    assert "miss: client frame 6 of 6 matches nothing recorded" in out
    assert "expected: seq 40, method session/close" in out
    assert "received: method session/prompt, id 4" in out


def test_mode_none_without_a_cassette_fails_and_starts_nothing(inner, pytester):
    got = inner("--acp-record-mode", "none")
    got.assert_outcomes(failed=1)
    out = got.stdout.str()
    assert "no cassette " in out and CASSETTE in out
    # Said once in the failure's report; the short summary may repeat its first line,
    # truncated or not by the terminal's width, so it is left out of the count.
    report = out.split("short test summary info")[0]
    assert report.count("record it with --acp-record-mode once") == 1
    assert "During handling of the above exception" not in out
    assert not (pytester.path / "out.jsonl").exists()  # the client never ran
    assert _left(pytester) == []


def test_mode_none_plays_a_cassette_that_is_there(inner, pytester):
    inner().assert_outcomes(passed=1)
    inner("--acp-record-mode", "none", agent=GONE).assert_outcomes(passed=1)


def test_mode_all_records_again(inner, pytester):
    inner(PROMPTS="2").assert_outcomes(passed=1)
    before = (pytester.path / CASSETTE).read_bytes()
    again = inner("--acp-record-mode", "all", PROMPTS="3")
    again.assert_outcomes(passed=1)
    after = (pytester.path / CASSETTE).read_bytes()
    prompts = [f for f in _frames(after, "c2a") if b'"session/prompt"' in f]
    assert len(prompts) == 3 and after != before
    assert _left(pytester) == [CASSETTE]
    # and mode all records even where the agent is needed: without it, the test fails
    inner("--acp-record-mode", "all", agent=GONE).assert_outcomes(failed=1)
    assert (pytester.path / CASSETTE).read_bytes() == after


def test_a_failing_test_writes_no_cassette(inner, pytester):
    got = inner(FAIL_AFTER="1")
    got.assert_outcomes(failed=1)
    assert _left(pytester) == []  # neither the cassette nor a partial recording
    inner("--acp-record-mode", "all", PROMPTS="1").assert_outcomes(passed=1)
    kept = (pytester.path / CASSETTE).read_bytes()
    inner("--acp-record-mode", "all", FAIL_AFTER="1").assert_outcomes(failed=1)
    assert (pytester.path / CASSETTE).read_bytes() == kept
    assert _left(pytester) == [CASSETTE]


LEFT_RUNNING = """
import json, os, subprocess

def test_the_client_leaves_its_agent_running(acp_agent):
    agent = subprocess.Popen(acp_agent(json.loads(os.environ["ACP_TEST_AGENT"])),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    agent.stdin.write(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":'
                      b'{"protocolVersion":2,"info":{"name":"c","version":"1"},"capabilities":{}}}\\n')
    agent.stdin.flush()
    assert agent.stdout.readline()  # answered; the agent is never closed
"""


def test_a_recording_whose_agent_is_still_running_is_not_written(pytester, inner):
    """The wait is the ini's acp_exit_wait (10 s unless set)."""
    pytester.makepyfile(test_client=LEFT_RUNNING)
    got = inner("-o", "acp_exit_wait=0.5")
    got.assert_outcomes(passed=1, errors=1)
    out = got.stdout.str()
    assert "was still running 0.5 s after the test" in out
    assert "the cassette was not written" in out
    assert _left(pytester) == []
    bad = inner("-o", "acp_exit_wait=soon")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "acp_exit_wait: 'soon' is not a number of seconds" in bad.stderr.str()


def test_the_marker_names_the_cassette(pytester, inner):
    pytester.makepyfile(test_client=CLIENT_TEST.replace(
        'acp_cassette(tee_args', 'acp_cassette("recorded/hello.wire.jsonl", tee_args'))
    inner().assert_outcomes(passed=1)
    assert (pytester.path / "recorded" / "hello.wire.jsonl").is_file()
    assert _left(pytester) == []
    inner(agent=GONE).assert_outcomes(passed=1)


def test_the_marker_and_the_ini_set_the_mode_and_what_is_not_compared(pytester, inner):
    marked = CLIENT_TEST.replace('acp_cassette(tee_args', 'acp_cassette(record_mode="none", '
                                 'ignore=["/params/prompt/*/text"], tee_args')
    pytester.makepyfile(test_client=marked)
    inner().assert_outcomes(failed=1)  # none: no cassette, nothing recorded
    assert _left(pytester) == []
    inner("--acp-record-mode", "once").assert_outcomes(failed=1)  # the marker wins
    pytester.makepyfile(test_client=CLIENT_TEST)
    inner(PERMISSION_EVERY="0").assert_outcomes(passed=1)
    pytester.makeini("[pytest]\nacp_record_mode = none\n")
    inner(agent=GONE, PERMISSION_EVERY="0").assert_outcomes(passed=1)
    (pytester.path / CASSETTE).unlink()
    got = inner(agent=GONE)  # the ini's none: a missing cassette fails
    got.assert_outcomes(failed=1)
    assert "no cassette " in got.stdout.str()
    inner("--acp-record-mode", "once", PERMISSION_EVERY="0").assert_outcomes(passed=1)
    # prompt 2 sent otherwise, its text not compared: the cassette still plays
    pytester.makepyfile(test_client=marked)
    inner(agent=GONE).assert_outcomes(passed=1)
    pytester.makepyfile(test_client=CLIENT_TEST)
    inner(agent=GONE).assert_outcomes(failed=1)


# -- for agent builders: acp_client_replay ------------------------------------------

AGENT_TEST = """
import json, os
import pytest

AGENT = json.loads(os.environ["ACP_TEST_AGENT"])

def test_the_agent_answers_as_recorded(acp_client_replay):
    run = acp_client_replay(os.environ["TRACE"], AGENT)
    assert run.ok and run.log.is_file()
"""

# The echo agent changed: "hello" became "HELLO" in everything it says.
CHANGED_AGENT = """
import subprocess, sys
agent = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)
for line in agent.stdout:
    sys.stdout.buffer.write(line.replace(b"hello", b"HELLO"))
    sys.stdout.buffer.flush()
sys.exit(agent.wait())
"""


@pytest.fixture
def echo_cassette(tmp_path) -> bytes:
    from acp_pipes.echo.client import client_session
    from tests.conftest import record_lockstep

    wire = tmp_path / "echo.wire.jsonl"
    record_lockstep(list(client_session(4, permission_every=2)), wire)
    return wire.read_bytes()


def _agent_run(pytester, monkeypatch, trace: str, agent: list[str]):
    pytester.makepyfile(test_agent=AGENT_TEST)
    for k, v in tool_env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("ACP_TEST_AGENT", orjson.dumps(agent).decode())
    monkeypatch.setenv("TRACE", trace)
    return pytester.runpytest_inprocess("-p", "acp_pipes.testing.pytest_plugin",
                                        "-p", "no:cacheprovider")


def test_a_recorded_session_redrives_its_agent_with_a_pass(pytester, monkeypatch, echo_cassette):
    (pytester.path / "cassettes").mkdir()
    (pytester.path / "cassettes" / "echo.wire.jsonl").write_bytes(echo_cassette)
    got = _agent_run(pytester, monkeypatch, "cassettes/echo.wire.jsonl", ECHO)
    got.assert_outcomes(passed=1)


def test_a_changed_agent_fails_naming_the_first_differing_frame(pytester, monkeypatch,
                                                                echo_cassette):
    (pytester.path / "echo.wire.jsonl").write_bytes(echo_cassette)
    (pytester.path / "changed.py").write_text(CHANGED_AGENT)
    recs = [orjson.loads(x) for x in echo_cassette.splitlines()]
    first = next(r for r in recs if r.get("dir") == "a2c" and "hello" in r["raw"])

    got = _agent_run(pytester, monkeypatch, "echo.wire.jsonl",
                     [sys.executable, str(pytester.path / "changed.py"), *ECHO])
    got.assert_outcomes(failed=1)
    out = got.stdout.str()
    assert "(exit 1: the agent's frames differ from the cassette)" in out
    # the kind, the recorded and the live frame, where they differ: in the test's failure
    assert f"difference (content): agent frame seq {first['seq']}" in out
    assert f"recorded (seq {first['seq']}): " in out and "live (seq " in out
    assert '/params/update/content/0/text: "hello 1" -> "HELLO 1"' in out
    assert "the run's wire log: " in out
    assert "Traceback" not in out and "Divergence" not in out


def test_an_edited_cassette_prompt_fails_naming_the_first_differing_frame(
        pytester, monkeypatch, echo_cassette):
    recs = [orjson.loads(x) for x in echo_cassette.splitlines()]
    at = next(i for i, r in enumerate(recs) if r.get("dir") == "c2a" and '"hello 3"' in r["raw"])
    recs[at]["raw"] = recs[at]["raw"].replace('"hello 3"', '"changed 3"')
    first = next(r for r in recs[at + 1:] if r.get("dir") == "a2c" and "hello 3" in r["raw"])
    (pytester.path / "edited.wire.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n"
                                                                for r in recs))
    got = _agent_run(pytester, monkeypatch, "edited.wire.jsonl", ECHO)
    got.assert_outcomes(failed=1)
    out = got.stdout.str()
    assert f"agent frame seq {first['seq']}" in out
    assert '"hello 3" -> "changed 3"' in out


def test_a_missing_cassette_to_redrive_fails_clearly(pytester, monkeypatch):
    got = _agent_run(pytester, monkeypatch, "cassettes/none.wire.jsonl", ECHO)
    got.assert_outcomes(failed=1)
    assert "no cassette " in got.stdout.str() and "none.wire.jsonl" in got.stdout.str()


def test_the_commands_run_the_package_the_tests_run(tmp_path):
    """The commands acp_agent gives run the acp_pipes the test runs: by ``python -m`` when
    a fresh interpreter imports that one, else by putting its directory first on the
    path. Here the test's interpreter finds this checkout only because its own path
    says so (no PYTHONPATH), as a conftest's ``sys.path.insert`` would."""

    env = {k: v for k, v in tool_env().items() if k != "PYTHONPATH"}
    probe = (f"import sys; sys.path.insert(0, {str(REPO)!r}); import json; "
             "from acp_pipes.testing.cassette import tool_argv; print(json.dumps(tool_argv('cli.tee', '--help')))")
    got = subprocess.run([sys.executable, "-c", probe], capture_output=True, env=env,
                         cwd=tmp_path, timeout=60)
    assert got.returncode == 0, got.stderr
    argv = orjson.loads(got.stdout)
    assert argv[0] == sys.executable
    ran = subprocess.run(argv, capture_output=True, env=env, cwd=tmp_path, timeout=60)
    assert ran.returncode == 0, ran.stderr
    # --help names the manual of the package it runs
    assert f"{REPO}/acp_pipes/docs/acp-tee.md".encode() in ran.stdout, ran.stdout[-300:]


def test_the_docs_examples_run(pytester, monkeypatch):
    """docs/pytest.md's test module (its ``# test_echo.py`` blocks, in order) records its
    cassettes on the first run and plays them in mode none on the second."""
    import re

    text = (REPO / "docs" / "pytest.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S)
              if b.startswith("# test_echo.py")]
    assert len(blocks) == 3
    pytester.makepyfile(test_echo="\n\n".join(blocks))
    for k, v in tool_env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PATH", f"{REPO / 'bin'}:{tool_env()['PATH']}")
    run = ("-p", "acp_pipes.testing.pytest_plugin", "-p", "no:cacheprovider")
    pytester.runpytest_inprocess(*run).assert_outcomes(passed=3)
    assert _left(pytester) == ["cassettes/shared/echo.wire.jsonl",
                               "cassettes/test_echo/test_echo_session.wire.jsonl"]
    pytester.runpytest_inprocess(*run, "--acp-record-mode", "none").assert_outcomes(passed=3)

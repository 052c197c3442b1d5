"""Usage and file errors, each raised by the library function that meets it (an
OptionError for a value an option does not take, a file's error where the file is
opened) and said once by the runner: through the real tools, byte for byte, exit 2.
The messages are those the tools said when cli/ translated a ValueError or OSError."""

from __future__ import annotations

import pytest

from tests.conftest import REPO, run_tool

FX = REPO / "tests/fixtures/asr/ASR-704-chunks-upserts-reset"
WIRE = str(FX / "wire.jsonl")
STREAM = str(FX / "expected.asr.jsonl")
NOWHERE = "/nonexistent-dir"


@pytest.mark.parametrize("args, said", [
    (["--clock", "bogus", "-o", "{tmp}/w.jsonl", "--", "true"],
     "--clock must be system, epoch or nanos:N, got 'bogus'"),
    (["--clock", "nanos:x", "-o", "{tmp}/w.jsonl", "--", "true"],
     "--clock nanos:N needs an integer, got 'nanos:x'"),
    (["-o", "{tmp}/{{nope}}.jsonl", "--", "true"],
     "-o {tmp}/{{nope}}.jsonl: no field {{nope}} (there are {{agent}}, {{start}} and {{pid}})"),
    (["-o", "{tmp}/{{agent.jsonl", "--", "true"],
     "-o {tmp}/{{agent.jsonl: not a name template (expected '}}' before end of string); "
     "write {{{{ and }}}} for braces"),
    (["--header", "nocolon", "--connect", "ws://127.0.0.1:9/acp"],
     "--header needs 'Name: value', got 'nocolon'"),
    (["--connect", "ftp://x/acp"],
     "'ftp://x/acp': expected a ws:// or wss:// or http:// or https:// URL"),
    (["--listen", "wss://127.0.0.1:0/acp", "--", "true"],
     "'wss://127.0.0.1:0/acp': expected a ws:// or http:// URL"),
    (["--script", f"{NOWHERE}/client.jsonl", "-o", "{tmp}/w.jsonl", "--", "true"],
     f"cannot read the script {NOWHERE}/client.jsonl: No such file or directory"),
], ids=["clock", "clock-nanos", "template-field", "template-brace", "header", "url-scheme",
        "listen-scheme", "script"])
def test_acp_tee(tmp_path, args, said):
    args = [a.format(tmp=tmp_path) for a in args]
    r = run_tool("tee", *args, input=b"")
    assert (r.returncode, r.stderr.decode()) == (2, f"acp-tee: {said.format(tmp=tmp_path)}\n")
    assert r.stdout == b"" and not (tmp_path / "w.jsonl").exists()  # no agent, no log


@pytest.mark.parametrize("args, said", [
    (["--listen", "ftp://x/acp", WIRE], "'ftp://x/acp': expected a ws:// or http:// URL"),
    (["--client", "--clock", "bogus", WIRE, "--", "/nonexistent-agent"],
     "--clock must be system, epoch or nanos:N, got 'bogus'"),
    (["--client", WIRE, "--", "/nonexistent-agent"],
     "cannot start /nonexistent-agent: No such file or directory"),
    (["--remap-ids", "--remap-log", f"{NOWHERE}/remap.jsonl", WIRE],
     f"cannot write {NOWHERE}/remap.jsonl: No such file or directory"),
    ([STREAM, "--wire", f"{NOWHERE}/wire.jsonl"],
     f"{NOWHERE}/wire.jsonl: cannot open: No such file or directory"),
], ids=["listen-scheme", "clock", "agent", "remap-log", "wire-log"])
def test_acp_replay(args, said):
    r = run_tool("replay", *args, input=b"")
    assert (r.returncode, r.stderr.decode()) == (2, f"acp-replay: {said}\n")


def test_acp_replay_report_it_cannot_write():
    """The report is written once the replay is done: the notifications went out, then
    the file it cannot write is named (the report events are on stderr before it)."""
    whole = run_tool("replay", STREAM)
    r = run_tool("replay", STREAM, "--report", f"{NOWHERE}/r.jsonl")
    assert r.returncode == 2 and r.stdout == whole.stdout
    assert r.stderr.decode().endswith(
        f"\nacp-replay: cannot write {NOWHERE}/r.jsonl: No such file or directory\n")


@pytest.mark.parametrize("out, said", [
    ("/dev/null/x", "cannot write /dev/null/x: Not a directory"),
    ("/proc/acp-pipes-dir", "cannot write /proc/acp-pipes-dir: No such file or directory"),
], ids=["under-a-file", "where-none-can-be-made"])
def test_acp_asr_output_directory(out, said):
    r = run_tool("asr", WIRE, "-o", out)
    assert (r.returncode, r.stderr.decode(), r.stdout) == (2, f"acp-asr: {said}\n", b"")


def test_acp_echo_agent_warns_through_the_one_warn():
    """The agent's Warn names its source (stdin) and line, counted as a problem it
    ignores: exit 0."""
    r = run_tool("echo-agent", input=b'{"jsonrpc":"2.0","id":99,"result":{}}\n')
    assert (r.returncode, r.stdout) == (0, b"")
    assert r.stderr == b"acp-echo-agent: stdin:1: response to unknown request id 99, ignored\n"

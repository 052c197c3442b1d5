"""acp-tee never hangs the editor on an agent that does not end by itself.

Real launchers run the agent as a child (an npm launcher that execs a native binary, a
CLI that restarts itself as a second process, `npx`), and some agents do not end when
their input does (codex-acp). acp-tee starts the agent in a process group of its own
and ends the group, with SIGTERM and then SIGKILL, when it would otherwise wait forever;
the client gets every byte the agent sent, and the log always ends with its end record.
Each agent here is a real process tree, run through the real acp-tee.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from acp_pipes.tee import GRACE
from tests.conftest import tool_argv, tool_env

HELLO = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n'
# the bound on each wait below: far beyond acp-tee's two grace periods, far below forever
BOUND = 6 * GRACE + 30
# the tests that wait out a grace period take a short one (--grace; the default is GRACE)
SHORT = ("--grace", "0.5")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(
        f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]


def _gone(pid: int) -> bool:
    """Whether ``pid`` ends within 10 s: a process signalled as acp-tee ends is gone
    soon after, not always before acp-tee's own exit is seen (a loaded machine); one
    left running (a ``sleep 300``) is still there."""
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    return not _alive(pid)


def _started(argv: list[str]) -> tuple[subprocess.Popen, bytes]:
    """acp-tee running ``argv``, sent HELLO; returns it once the agent has echoed it (so
    whatever the agent's script does before its ``read`` is done), with that line."""
    proc = subprocess.Popen(tool_argv("tee", *argv), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=tool_env())
    proc.stdin.write(HELLO)
    proc.stdin.flush()
    return proc, proc.stdout.readline()


def _pid_from(path: Path) -> int:
    for _ in range(200):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} never got a pid")


def _end(log: Path) -> dict:
    last = orjson.loads(log.read_bytes().splitlines()[-1])
    assert last.get("end") is True, last
    return last


def test_a_launcher_whose_child_keeps_stdout_ends(tmp_path):
    """The launcher answers and exits; the child it started keeps the agent's stdout open
    (as a process a launcher leaves behind does). acp-tee reads the pipe for a grace
    period, then ends the agent's process group: the child is gone, the session over."""
    child = tmp_path / "child.pid"
    agent = ["sh", "-c", f'sleep 300 & echo $! > {child}; read line; echo "$line"']
    log = tmp_path / "wire.jsonl"
    proc = subprocess.Popen(tool_argv("tee", *SHORT, "-o", str(log), "--", *agent),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=tool_env())
    out, _ = proc.communicate(HELLO, timeout=BOUND)
    assert out == HELLO  # the launcher's answer reached the client, byte for byte
    assert proc.returncode == 0  # the launcher's own exit status
    assert _gone(_pid_from(child))
    assert _end(log)["status"] == 0


def test_an_agent_that_outlives_its_input_is_ended(tmp_path):
    """An agent that goes on after the client's input ends, saying nothing (codex-acp
    does): after the grace period its process group gets SIGTERM, and the exit status
    says so. What it sent before is the client's and the log's."""
    script = "read line; echo \"$line\"; exec sleep 300"
    log = tmp_path / "wire.jsonl"
    proc, first = _started([*SHORT, "-o", str(log), "--", "sh", "-c", script])
    rest, _ = proc.communicate(timeout=BOUND)  # the input ends here
    assert first + rest == HELLO
    assert proc.returncode == 128 + signal.SIGTERM
    end = _end(log)
    assert end["signal"] == signal.SIGTERM
    frames = [orjson.loads(line) for line in log.read_bytes().splitlines()[1:-1]]
    assert [(f["dir"], f["raw"]) for f in frames] == [
        ("c2a", HELLO.decode().rstrip("\n")), ("a2c", HELLO.decode().rstrip("\n"))]


@pytest.mark.slow  # waits out an agent's 3 s, twice
def test_grace_is_how_long_an_agent_that_outlives_its_input_is_waited_for(tmp_path):
    """An agent that ends by itself 3 s after its input: within a --grace of 30 it is
    not signalled (its own exit status), past one of 0.5 it gets SIGTERM."""
    script = "read line; echo \"$line\"; exec sleep 3"
    for grace, status in (("30", 0), ("0.5", 128 + signal.SIGTERM)):
        log = tmp_path / f"wire-{grace}.jsonl"
        proc, first = _started(["--grace", grace, "-o", str(log), "--", "sh", "-c", script])
        rest, _ = proc.communicate(timeout=BOUND)
        assert first + rest == HELLO
        assert proc.returncode == status, grace
        assert _end(log)["status"] == status


def test_an_agent_that_ignores_sigterm_is_killed(tmp_path):
    """SIGTERM ignored (a trap): SIGKILL follows a grace period later."""
    script = "trap '' TERM; read line; echo \"$line\"; while :; do sleep 1; done"
    log = tmp_path / "wire.jsonl"
    # the input ends once the trap is set: else a SIGTERM could come before it
    proc, first = _started([*SHORT, "-o", str(log), "--", "sh", "-c", script])
    rest, _ = proc.communicate(timeout=BOUND)
    assert first + rest == HELLO
    assert proc.returncode == 128 + signal.SIGKILL
    assert _end(log)["signal"] == signal.SIGKILL


def test_sigterm_to_acp_tee_reaches_the_launchers_child(tmp_path):
    """An editor stopping acp-tee stops the whole agent: the signal goes to its process
    group, so a launcher's child (here a second process that holds the session) ends
    with it, and acp-tee ends instead of waiting on the pipe the child held."""
    child = tmp_path / "child.pid"
    # the child is the agent (it echoes); its launcher waits for it, as npx does
    inner = f'echo $$ > {child}; exec {sys.executable} -c "import sys, time\n' \
            'for line in sys.stdin: sys.stdout.write(line); sys.stdout.flush()"'
    agent = ["sh", "-c", f"sh -c '{inner}'; exit 3"]
    log = tmp_path / "wire.jsonl"
    proc = subprocess.Popen(tool_argv("tee", "-o", str(log), "--", *agent),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=tool_env())
    proc.stdin.write(HELLO)
    proc.stdin.flush()
    assert proc.stdout.readline() == HELLO  # the session is live, through the child
    pid = _pid_from(child)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=BOUND)
    assert _gone(pid)
    _end(log)
    proc.stdin.close()
    proc.stdout.close()


def test_a_stopped_acp_tee_ends_an_agent_that_ignores_sigterm(tmp_path):
    """An editor stopping acp-tee (SIGTERM, its input still open: the official Python
    SDK kills what has not ended 2 s later) must not wait on an agent that traps
    SIGTERM: STOP_GRACE after the signal, the agent's group gets SIGKILL and the log its
    end record."""
    script = "trap '' TERM; read line; echo \"$line\"; while :; do sleep 1; done"
    log = tmp_path / "wire.jsonl"
    proc = subprocess.Popen(tool_argv("tee", "-o", str(log), "--", "sh", "-c", script),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=tool_env())
    proc.stdin.write(HELLO)
    proc.stdin.flush()
    assert proc.stdout.readline() == HELLO
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=BOUND)  # before: forever (the input never ended)
    assert proc.returncode == 128 + signal.SIGKILL
    assert _end(log)["signal"] == signal.SIGKILL
    proc.stdin.close()
    proc.stdout.close()


def test_a_stopped_acp_tee_does_not_wait_on_a_client_that_stopped_reading(tmp_path):
    """The Python SDK's teardown as qwen-code meets it: the client stops reading and
    closes acp-tee's stdin; the agent, at EOF, sends a large frame (qwen-code: a 560 KB
    available_commands_update) and exits; acp-tee's forward of it blocks on the full
    pipe. The SDK's SIGTERM 2 s later must end acp-tee, with the log's end record (the
    frame is in the log: logged before it is forwarded), before the SDK's SIGKILL 2 s
    after that."""
    pid_file, log = tmp_path / "agent.pid", tmp_path / "wire.jsonl"
    code = ("import os, sys\n"
            f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
            "sys.stdout.buffer.write(sys.stdin.buffer.readline()); sys.stdout.flush()\n"
            "sys.stdin.buffer.read()\n"
            "sys.stdout.buffer.write(b'{\"pad\":\"' + b'p' * (1 << 20) + b'\"}\\n')\n")
    proc = subprocess.Popen(tool_argv("tee", "-o", str(log), "--", sys.executable, "-c",
                                      code),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=tool_env())
    proc.stdin.write(HELLO)
    proc.stdin.flush()
    assert proc.stdout.readline() == HELLO
    pid = _pid_from(pid_file)
    proc.stdin.close()  # and stdout is never read again, yet open
    deadline = time.monotonic() + BOUND
    while _alive(pid) or b'p' * 4096 not in log.read_bytes():
        assert time.monotonic() < deadline, "the agent never sent its last frame and ended"
        time.sleep(0.05)
    time.sleep(0.2)  # acp-tee is now in its forward to the client
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=BOUND)
    took = time.monotonic() - start
    assert took < 1.5, f"acp-tee took {took:.1f} s after SIGTERM"  # before: ~15 s
    assert proc.returncode == 0  # the agent's own status: it had exited by itself
    end = _end(log)
    assert end["status"] == 0 and end["frames"] == 3
    proc.stdout.close()

"""Running a real executable with stdout and/or stderr on a real terminal (a pty), to
test what a person sees at a terminal against what a pipe gets."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import termios
import tty
from dataclasses import dataclass

from tests.conftest import tool_argv, tool_env


@dataclass
class TtyRun:
    returncode: int
    stdout: bytes
    stderr: bytes


def run_tool_tty(name: str, *args: str, out_tty: bool = True, err_tty: bool = False,
                 env: dict[str, str] | None = None, input: bytes = b"",
                 timeout: float = 60, size: tuple[int, int] | None = None) -> TtyRun:
    """Run ``acp-<name> ARGS`` with stdout (``out_tty``) and stderr (``err_tty``) each on
    a pty of its own in raw mode (bytes arrive as written, no CR added), else on a pipe.
    ``size``: the ptys' (rows, columns), as a terminal window has them (a new pty has
    0 x 0)."""
    full_env = tool_env()
    full_env.pop("NO_COLOR", None)
    full_env.update(env or {})
    ends: dict[str, tuple[int, int]] = {}
    for stream, wanted in (("out", out_tty), ("err", err_tty)):
        if wanted:
            master, slave = os.openpty()
            tty.setraw(slave)
            if size is not None:
                fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", *size, 0, 0))
        else:
            master, slave = os.pipe()
        ends[stream] = (master, slave)
    proc = subprocess.Popen(tool_argv(name, *args), stdin=subprocess.PIPE,
                            stdout=ends["out"][1], stderr=ends["err"][1], env=full_env)
    for _, slave in ends.values():
        os.close(slave)
    assert proc.stdin is not None
    proc.stdin.write(input)
    proc.stdin.close()
    got = {"out": bytearray(), "err": bytearray()}
    fds = {master: stream for stream, (master, _) in ends.items()}
    while fds:
        ready, _, _ = select.select(list(fds), [], [], timeout)
        assert ready, "the tool did not finish"
        for fd in ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the pty's other end is closed
                chunk = b""
            if chunk:
                got[fds[fd]] += chunk
            else:
                os.close(fd)
                del fds[fd]
    return TtyRun(proc.wait(timeout=timeout), bytes(got["out"]), bytes(got["err"]))

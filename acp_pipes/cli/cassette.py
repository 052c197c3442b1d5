"""``python -m acp_pipes.cli.cassette play REPORTS -- TRACE [ACP-REPLAY OPTIONS]``: the
agent a client under test launches when its cassette plays (:mod:`acp_pipes.testing.cassette`).
acp-replay plays TRACE; its stderr (JSON reports: it is no terminal) and its exit status
go to files in REPORTS, since a client's SDK keeps its agent's stderr to itself."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from acp_pipes.cli.replay_tool import TOOL


def _play(reports: Path, argv: list[str]) -> int:
    """Run acp-replay with ``argv`` here, its stderr into ``reports/<pid>.stderr`` (so its
    reports are JSON lines) and its exit status into ``reports/<pid>.status`` after."""
    base = reports / str(os.getpid())
    fd = os.open(f"{base}.stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 2)
    os.close(fd)
    status = 2
    try:
        status = TOOL.main(argv)
    finally:
        with open(f"{base}.status.tmp", "w") as f:
            f.write(str(status))
        os.replace(f"{base}.status.tmp", f"{base}.status")
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m acp_pipes.cli.cassette play REPORTS -- TRACE [ACP-REPLAY OPTIONS]``: the
    command a client under test launches as its agent when a cassette plays."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 4 or argv[0] != "play" or argv[2] != "--":
        print("usage: python -m acp_pipes.cli.cassette play REPORTS -- TRACE [OPTIONS]",
              file=sys.stderr)
        return 2
    return _play(Path(argv[1]), argv[3:])


if __name__ == "__main__":
    sys.exit(main())

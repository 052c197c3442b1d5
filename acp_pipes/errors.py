"""What goes wrong and how it is said: the error every reader raises for unusable input,
and :func:`say`, the one way a diagnostic line reaches stderr. A module that imports
nothing but sys.

They live apart from :mod:`acp_pipes.jsonl` (which re-exports InputError) and the CLI
runner so that both can be had without importing orjson or argparse: acp-tee starts its
agent before it pays for those, and every tool's start-up is shorter for it.
"""

import sys


class InputError(Exception):
    """Unusable input, reported as ``SOURCE:LINE: message`` (line 0: the whole source)."""

    def __init__(self, source: str, line: int, message: str):
        super().__init__(message)
        self.source = source
        self.line = line
        self.message = message

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        return f"{where}: {self.message}"


def say(line: str) -> None:
    """One line on stderr, for diagnostics; never raises, and never lands on stdout: with
    stderr closed (``2>&-``: ``sys.stderr`` is None, and ``print(file=None)`` would write
    to stdout, into acp-tee's client stream) or gone (a broken pipe) it is dropped."""
    err = sys.stderr
    if err is None:
        return
    try:
        err.write(line + "\n")
        err.flush()
    except (OSError, ValueError):
        pass

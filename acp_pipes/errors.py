"""The error every reader raises for unusable input, in a module that imports nothing.

It lives apart from :mod:`acp_pipes.jsonl` (which re-exports it) so that the CLI runner
can catch it without importing orjson: acp-tee starts its agent before it pays for
that, and every tool's start-up is shorter for it.
"""


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

"""The settings of a run, which every reader and writer honours without a parameter.

Below :mod:`acp_pipes.io.lines` and :mod:`acp_pipes.io.live` alike: both read an input
under the run's line limit and name the program in what they say, and neither should
have to import the other for it.
"""

from __future__ import annotations

#: The longest line (bytes, without its LF) a reader takes unless told otherwise.
MAX_LINE_BYTES = 64 << 20


class RunSettings:
    """What the CLI runner decides once for every input and output of a run: the
    program's name (for a note said deep in a reader), the longest line a reader takes
    (``--max-line-bytes``), and whether an input is private (then so is every output).
    Kept here rather than passed down: the readers are many and deep, and each one
    honours them without a parameter of its own. A library caller that sets nothing
    gets the defaults."""

    __slots__ = ("max_line_bytes", "private", "prog")

    def __init__(self) -> None:
        self.prog = "acp-pipes"
        self.max_line_bytes = MAX_LINE_BYTES
        self.private = False


#: The settings of this run (:class:`RunSettings`).
RUN = RunSettings()


class LineTooLong(OSError):
    """A line longer than the limit (``--max-line-bytes``): the input is read no further,
    as at any read error (what came before it is kept; the reader names its line)."""

    def __init__(self, limit: int):
        super().__init__(f"line of more than {limit} bytes (limit --max-line-bytes {limit})")
        self.limit = limit

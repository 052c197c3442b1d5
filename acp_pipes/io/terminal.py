"""Terminal or pipe: decided once per run, read by every tool (as ripgrep and bat do).

A tool's output at a terminal is for a person (tables, colour, readable report lines);
in a pipe or a file it stays what the next program reads (JSONL). The CLI runner
decides this once, before a tool runs, and hands the :class:`Terminal` over as
``ctx.term``; nothing else asks ``isatty``.

Colour follows the output being a terminal, unless ``NO_COLOR`` is set to anything
non-empty (https://no-color.org) or ``TERM`` is ``dumb``; ``--color always|never``
overrides all of that. stderr, where diagnostics go, is decided the same way on its own.

:func:`printable` is the one escaping of recorded strings shown to a person: a method
name or argv from a recording may hold ESC, BEL or newlines that would drive the
terminal or break the layout.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, TextIO

__all__ = ["COLOR_CHOICES", "Rendered", "Terminal", "pretty", "printable"]

COLOR_CHOICES = ("auto", "always", "never")

#: SGR codes by role, so tools colour by meaning, never by raw code.
STYLES = {
    "added": "32",  # green
    "removed": "31",  # red
    "context": "2",  # faint
    "heading": "1",  # bold
    "warning": "33",  # yellow
    "error": "1;31",  # bold red
    # JSON shown for reading (:func:`pretty`), in jq's colours
    "key": "1;34",  # bold blue
    "string": "32",  # green
    "null": "1;30",  # bold black: grey on most terminals
}


class Terminal:
    """What the output and stderr are, for this run.

    ``tty``: the tool's output (stdout, not a ``-o`` file) is a terminal, so layout for
    a person (tables) is the default. ``color``: colour may be written to the output.
    ``err_tty`` / ``err_color``: the same for stderr. ``width``: the output's columns.
    """

    __slots__ = ("color", "err_color", "err_tty", "tty", "width")

    def __init__(self, *, tty: bool = False, color: bool = False, err_tty: bool = False,
                 err_color: bool = False, width: int = 80):
        self.tty = tty
        self.color = color
        self.err_tty = err_tty
        self.err_color = err_color
        self.width = width

    @classmethod
    def decide(cls, out: BinaryIO | None, err: TextIO | None, when: str = "auto",
               environ: Mapping[str, str] | None = None) -> Terminal:
        """The decision for a run writing to ``out`` with diagnostics on ``err``."""
        env = os.environ if environ is None else environ
        if when not in COLOR_CHOICES:
            raise ValueError(f"--color: expected one of {', '.join(COLOR_CHOICES)}, got {when!r}")
        tty, err_tty = _isatty(out), _isatty(err)
        plain = bool(env.get("NO_COLOR")) or env.get("TERM") == "dumb"

        def colour(is_tty: bool) -> bool:
            return when == "always" or (when == "auto" and is_tty and not plain)

        width = 80
        if tty:
            try:
                # (a tty: out is one)
                width = os.get_terminal_size(out.fileno()).columns or 80  # type: ignore[union-attr]
            except (OSError, ValueError):
                pass
        return cls(tty=tty, color=colour(tty), err_tty=err_tty, err_color=colour(err_tty),
                   width=width)

    def paint(self, text: str, role: str) -> str:
        """``text`` in the colour of ``role`` (see :data:`STYLES`) when the output has
        colour, else as it is."""
        return f"\x1b[{STYLES[role]}m{text}\x1b[0m" if self.color else text

    def paint_err(self, text: str, role: str) -> str:
        """As :meth:`paint`, for a line on stderr."""
        return f"\x1b[{STYLES[role]}m{text}\x1b[0m" if self.err_color else text

    def __repr__(self) -> str:
        return (f"Terminal(tty={self.tty}, color={self.color}, err_tty={self.err_tty}, "
                f"err_color={self.err_color}, width={self.width})")


def _isatty(stream: BinaryIO | TextIO | None) -> bool:
    if stream is None:
        return False
    try:
        return os.isatty(stream.fileno())
    except (AttributeError, OSError, ValueError):  # no descriptor (a BytesIO), or closed
        return False


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# C0 controls, DEL, C1 controls, the line and paragraph separators (a new line to some
# terminals, pagers and browsers), and the bidirectional overrides and isolates that
# reorder what follows them on screen (the "Trojan Source" characters); lone surrogates
# (valid JSON escapes, with no UTF-8 form: no terminal or file can take them raw).
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    "\ud800-\udfff]")


def printable(text: str) -> str:
    r"""``text`` safe to show at a terminal on one line: every control character (ESC,
    BEL, newline, ...) and every bidirectional override written as an escape, the rest
    untouched.

    >>> printable("session/\x1b[31mprompt\x07\nnext")
    'session/\\u001b[31mprompt\\u0007\\nnext'
    """
    return _UNSAFE.sub(_escape, text)


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    return _NAMED.get(c) or f"\\u{ord(c):04x}"


def pretty(value: Any, term: Terminal, indent: int = 0) -> str:
    """``value`` as JSON for a person, as jq shows it: two spaces an indent level, keys
    and strings coloured when ``term`` has colour, every string :func:`printable` (a
    recorded string cannot drive the terminal), with the final newline.

    >>> record = {"type": "message", "seq": 1, "tags": [], "text": "hi\x1b"}
    >>> print(pretty(record, Terminal()), end="")
    {
      "type": "message",
      "seq": 1,
      "tags": [],
      "text": "hi\\u001b"
    }
    """
    return _pretty(value, term, indent) + "\n"


def _pretty(value: Any, term: Terminal, indent: int) -> str:
    import json

    if isinstance(value, dict):
        if not value:
            return "{}"
        pad = "  " * (indent + 1)
        items = [f"{pad}{term.paint(printable(json.dumps(k, ensure_ascii=False)), 'key')}: "
                 f"{_pretty(v, term, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        pad = "  " * (indent + 1)
        items = [pad + _pretty(v, term, indent + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + "  " * indent + "]"
    if isinstance(value, str):
        return term.paint(printable(json.dumps(value, ensure_ascii=False)), "string")
    if value is None:
        return term.paint("null", "null")
    return json.dumps(value)


class Rendered:
    """A writer that takes JSONL, as a tool writes it to stdout, and shows each line as
    ``render`` makes it for a person (at a terminal, or with ``--format``): the tool
    writes the same records either way. A line that is not JSON is shown as it is,
    :func:`printable`."""

    def __init__(self, out: BinaryIO, render: Callable[[Any], str]):
        self.out = out
        self.render = render
        self.rest = b""

    def write(self, data: bytes | bytearray | memoryview) -> int:
        data = bytes(data)
        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        for line in lines:
            if line.strip():
                self.out.write(self._show(line).encode("utf-8", "backslashreplace"))
        return len(data)

    def _show(self, line: bytes) -> str:
        import json

        try:  # the standard library's reader takes lone surrogates, which orjson refuses
            value = json.loads(line)
        except ValueError:
            return printable(line.decode("utf-8", "replace")) + "\n"
        return self.render(value)

    def flush(self) -> None:
        self.out.flush()

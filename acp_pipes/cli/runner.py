"""The one CLI runner every acp-pipes tool stands on.

It owns what must be the same in every tool, so no tool gets it subtly different:
``[FILE ...]`` with ``-`` for stdin and ``.gz`` read transparently, ``-o FILE``,
``--help`` with an example pipeline, ``--version``, ``--color``, "terminal or pipe"
decided once (``ctx.term``, an :class:`acp_pipes.io.terminal.Terminal`), diagnostics on
stderr only, and the exit statuses of the stream contract:

====  =====================================================
0     ok
1     a difference or divergence was found (align, replay)
2     usage error or unusable input
130   interrupted (SIGINT)
====  =====================================================

``-o FILE`` is written beside FILE and renamed over it when the run ends with 0 or 1;
a run that fails leaves the file that was there. Every output is as private as the most
private input (mode 0600 when an input is a file only its owner may read). An output
that is one of the inputs (the same file, whatever the path says) is refused before
anything is read. stdout is written as it goes: what came before a bad line reaches the
pipe. An output that cannot be written (``>/dev/full``) and a closed stdin (``<&-``)
are errors like any other.

A broken pipe downstream (``acp-frame big.jsonl | head``) ends the tool quietly with 0.
A tool returns its exit status; for bad input or arguments it (or the library under it)
raises an :class:`~acp_pipes.errors.AcpPipesError` (``InputError``, ``UsageError``, ...),
which the runner says once, ``prog: message``, exit 2. Anything else escaping a tool is
a bug, reported in one line (set ``ACP_PIPES_DEBUG=1`` for the traceback).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO

from acp_pipes import __version__
from acp_pipes.errors import AcpPipesError, InputError, UsageError, say
from acp_pipes.io.lines import Line, read_lines, stdin_stream
from acp_pipes.io.output import (
    Output,
    file_id,
    made_from,
    refuse_input_as_output,
    stdout_fd,
    stdout_sink,
)
from acp_pipes.io.settings import MAX_LINE_BYTES, RUN
from acp_pipes.io.terminal import Rendered, Terminal, pretty

EXIT_OK = 0
EXIT_DIFFERENT = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class Context:
    """What a tool's ``run`` gets besides its parsed arguments."""

    def __init__(self, prog: str, files: list[str], out: BinaryIO,
                 term: Terminal | None = None, fmt: str = "json"):
        self.prog = prog
        self.files = files
        self.out = out
        #: ``--format``, decided: as given, else the tool's form for reading at a
        #: terminal, else ``json`` (JSONL, one record a line).
        self.fmt = fmt
        #: Terminal or pipe, decided once for the run: read it, never ask ``isatty``.
        self.term = term if term is not None else Terminal()
        self.warnings = 0
        self._said = Said(prog)

    def records_out(self, table: Callable[[Any], str] | None = None) -> BinaryIO:
        """Where a tool writes its JSONL records: ``ctx.out`` itself for ``json``;
        otherwise a writer that shows each record for reading, as ``table`` renders a
        row (``--format table``; without ``table``, the tool writes its table itself)
        or indented (``pretty``, as jq shows JSON)."""
        if self.fmt == "json" or (self.fmt == "table" and table is None):
            return self.out
        if self.fmt == "table":
            return Rendered(self.out, table)  # type: ignore[arg-type,return-value]
        term = self.term
        return Rendered(self.out, lambda value: pretty(value, term))  # type: ignore[return-value]

    def stdin(self) -> BinaryIO:
        """Standard input (binary) for a tool that reads it as a stream; an InputError
        when the process has none (started with ``<&-``). Its lines are capped as every
        input's (``--max-line-bytes``)."""
        return stdin_stream()

    def lines(self) -> Iterator[Line]:
        """The lines of every input file in order (stdin when none was named)."""
        for path in self.files:
            yield from read_lines(path)

    def warn(self, source: str, line: int, message: str) -> None:
        """A problem in the input, reported and skipped (an :data:`acp_pipes.errors.Warn`:
        pass ``ctx.warn`` itself to a reader): ``prog: SOURCE:LINE: message`` on stderr,
        ``prog: SOURCE: message`` for line 0."""
        if not isinstance(line, int):  # the order of the one Warn: (source, line, message)
            raise TypeError(f"warn(source, line, message) got line={line!r}")
        self.warnings += 1
        where = f"{source}:{line}" if line else source
        self._said(source, f"{self.prog}: {where}: {message}")

    def problem(self, source: str, line: str) -> None:
        """A line of a report of problems in ``source`` (acp-asr --validate's), said on
        stderr under the same cap as :meth:`warn`'s."""
        self._said(source, line)

    def counted(self) -> None:
        """At the end of a run: how many problems each input had that were not said."""
        self._said.close()

    def note(self, message: str) -> None:
        """Informational stderr line (progress, where the output went)."""
        say(f"{self.prog}: {message}")


#: At most this many problems of one input are said, each on its own line; past that
#: they are counted, and the count is said at the end (a file of binary junk after its
#: first line would otherwise give thousands of lines, as a compiler's error limit).
SAID_PER_SOURCE = 20


class Said:
    """Problem lines said on stderr, at most :data:`SAID_PER_SOURCE` for one source:
    the next one is replaced by a line saying the rest are counted, and :meth:`close`
    says each source's total."""

    def __init__(self, prog: str, limit: int = SAID_PER_SOURCE):
        self.prog = prog
        self.limit = limit
        self.seen: dict[str, int] = {}

    def __call__(self, source: str, line: str) -> None:
        n = self.seen[source] = self.seen.get(source, 0) + 1
        if n <= self.limit:
            say(line)
        elif n == self.limit + 1:
            say(f"{self.prog}: {source}: more than {self.limit} problems: the rest are "
                "counted, not shown")

    def close(self) -> None:
        for source, n in self.seen.items():
            if n > self.limit:
                say(f"{self.prog}: {source}: {n:,} problems in all, the first "
                    f"{self.limit} shown")
        self.seen.clear()


class Tool:
    """A tool's declaration: its name, help text, arguments and body.

    ``example`` is a real pipeline shown at the end of ``--help``; ``exits`` lists every
    exit status the tool returns and what it means (tests/test_contract.py makes each
    one happen); ``usage`` replaces argparse's usage line where one line cannot say how
    the tool is called. ``takes_files`` adds
    the ``[FILE ...]`` positional; ``takes_output`` adds ``-o FILE``; ``takes_color``
    adds ``--color WHEN`` (not for a tool whose stdout is a protocol stream).
    ``inputs`` names the files a tool reads besides ``FILE ...`` (from its options),
    so that none of them can be its output either; ``outputs``, the files it writes
    besides ``-o`` (a report), none of which may be an input. With
    ``takes_command``, everything after the first ``--`` is a command to run (the agent),
    split off before parsing so options after the files still count as the tool's own;
    it arrives as ``args.command`` (a list, empty when there was no ``--``), and
    ``command_metavar`` ends the usage line (empty: the tool writes its own usage).
    ``reads_lines`` adds ``--max-line-bytes N``, the longest line any of its readers
    takes (not for acp-tee, which forwards a session's bytes whatever their size).
    ``formats`` adds ``--format``: the first is what a terminal gets (``table`` or
    ``pretty``), ``json`` what a pipe or a file gets (see :meth:`Context.records_out`).
    """

    def __init__(
        self,
        *,
        prog: str,
        summary: str,
        example: str,
        run: Callable[[argparse.Namespace, Context], int],
        configure: Callable[[argparse.ArgumentParser], None] | None = None,
        description: str = "",
        takes_files: bool = True,
        takes_output: bool = True,
        takes_command: bool = False,
        inputs: Callable[[argparse.Namespace], list[str]] | None = None,
        outputs: Callable[[argparse.Namespace], list[str | None]] | None = None,
        takes_color: bool = True,
        command_metavar: str = "-- AGENT [ARGS ...]",
        exits: str = "0 ok, 2 usage or unusable input, 130 interrupted",
        usage: str | None = None,
        files_metavar: str = "FILE",
        files_help: str = "input files (default: stdin; '-' is stdin; .gz is read transparently)",
        reads_lines: bool = True,
        formats: tuple[str, ...] = (),
        formats_help: str = "",
    ):
        self.prog = prog
        self.summary = summary
        self.example = example
        self.run = run
        self.configure = configure
        self.description = description
        self.takes_files = takes_files
        self.takes_output = takes_output
        self.takes_command = takes_command
        self.inputs = inputs or (lambda args: [])
        self.outputs = outputs or (lambda args: [])
        self.takes_color = takes_color
        self.command_metavar = command_metavar
        self.exits = exits
        self.usage = usage
        self.files_metavar = files_metavar
        self.files_help = files_help
        self.reads_lines = reads_lines
        self.formats = formats
        self.formats_help = formats_help

    def parser(self) -> argparse.ArgumentParser:
        epilog = "example:\n" + "\n".join("  " + ln for ln in self.example.strip().splitlines())
        epilog += "\n\nexit status: " + self.exits
        p = argparse.ArgumentParser(
            prog=self.prog,
            description=self.summary + ("\n\n" + self.description if self.description else ""),
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            usage=self.usage,
        )
        if self.takes_files:
            p.add_argument("files", nargs="*", metavar=self.files_metavar, help=self.files_help)
        if self.takes_output:
            p.add_argument(
                "-o", "--output", metavar="FILE", help="write to FILE instead of stdout"
            )
        if self.takes_color:
            p.add_argument(
                "--color", choices=("auto", "always", "never"), default="auto",
                metavar="WHEN", help="colour at a terminal: auto (default; NO_COLOR turns "
                "it off), always, never")
        if self.formats:
            shown = self.formats[0]
            p.add_argument(
                "--format", choices=("json", *self.formats), dest="fmt", metavar="FORMAT",
                help=f"{', '.join(self.formats)} or json: at a terminal {shown} (for reading; "
                f"--format json gives the JSONL there), in a pipe or a file json (one record "
                f"a line; --format {shown} gives the {shown} there){self.formats_help}")
        if self.reads_lines:
            p.add_argument(
                "--max-line-bytes", type=byte_count, default=MAX_LINE_BYTES, metavar="N",
                help="refuse an input line longer than N bytes (K, M, G: KiB, MiB, GiB; "
                "default 64M): the input is read no further, as at a read error, exit 2")
        p.add_argument(
            "--version", action="version", version=f"{self.prog} (acp-pipes) {__version__}"
        )
        if self.configure:
            self.configure(p)
        if self.takes_command and self.command_metavar and self.usage is None:
            p.usage = p.format_usage().removeprefix("usage: ").rstrip() + " " + self.command_metavar
        return p

    def main(self, argv: Sequence[str] | None = None) -> int:
        """Parse ``argv``, run the tool, map every outcome to an exit status."""
        RUN.prog = self.prog
        args = self._parse(list(sys.argv[1:] if argv is None else argv))
        if isinstance(args, int):
            return args
        RUN.max_line_bytes = getattr(args, "max_line_bytes", MAX_LINE_BYTES)
        files = list(getattr(args, "files", None) or ["-"])  # "-": stdin
        out: BinaryIO | None = None
        sink: Output | None = None
        try:
            out, sink = self._open_output(args, files)
            return self._run(args, files, out, sink)
        except AcpPipesError as e:  # InputError, UsageError and the library's own
            _say(self.prog, str(e))
            _flush_quietly(out, sink)
            return e.status
        except BrokenPipeError:
            silence_stdout()
            return EXIT_OK
        except KeyboardInterrupt:
            return self._interrupted(args, out, sink)
        except Exception as e:  # a bug, not the user's input
            if os.environ.get("ACP_PIPES_DEBUG"):
                import traceback

                traceback.print_exc()
            _say(self.prog, f"internal error: {type(e).__name__}: {e} "
                 "(set ACP_PIPES_DEBUG=1 for a traceback)")
            _flush_quietly(out, sink)
            return EXIT_USAGE
        finally:
            if sink is not None:
                sink.discard()  # nothing left to drop once committed
            # a run in-process leaves the library's defaults behind it (RUN is a RunSettings)
            RUN.__init__()  # type: ignore[misc]

    def _parse(self, argv: list[str]) -> argparse.Namespace | int:
        """The arguments (a command after ``--`` for a tool that takes one), or the exit
        status of ``--help``, ``--version`` (0) or a usage error (2)."""
        parser = self.parser()
        command: list[str] = []
        if self.takes_command and "--" in argv:
            cut = argv.index("--")
            argv, command = argv[:cut], argv[cut + 1 :]
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:  # argparse: --help/--version (0) or usage error (2)
            return int(e.code or 0)
        if self.takes_command:
            args.command = command
        return args

    def _open_output(self, args: argparse.Namespace, files: list[str]
                     ) -> tuple[BinaryIO, Output | None]:
        """Where the output goes (``-o FILE`` through an :class:`Output` committed at the
        end, else stdout), refused when it is one of the inputs."""
        inputs = (files if self.takes_files else []) + list(self.inputs(args))
        made_from(inputs)  # an output is as private as the most private input
        target = getattr(args, "output", None) if self.takes_output else None
        for extra in self.outputs(args):
            if extra and extra != "-":
                refuse_input_as_output(extra, file_id(extra), inputs)
        if target and target != "-":
            refuse_input_as_output(target, file_id(target), inputs)
            sink = Output(target)
            return sink.stream, sink
        if sys.stdout is not None:
            refuse_input_as_output("stdout", file_id(stdout_fd()), inputs)
            return stdout_sink(), None
        # fd 1 was closed at start: nothing written there can arrive anywhere
        sink = Output(os.devnull)
        return sink.stream, sink

    def _run(self, args: argparse.Namespace, files: list[str], out: BinaryIO,
             sink: Output | None) -> int:
        """Run the tool on its context; the output flushed, or committed when the run
        finished."""
        term = Terminal.decide(out, sys.stderr, getattr(args, "color", "auto"))
        fmt = getattr(args, "fmt", None) or (
            self.formats[0] if self.formats and term.tty else "json")
        ctx = Context(prog=self.prog, files=files, out=out, term=term, fmt=fmt)
        try:
            status = self.run(args, ctx)
        finally:  # before the error that ended the run, if one did: it is said last
            ctx.counted()
        if sink is None:
            out.flush()
        elif status in (EXIT_OK, EXIT_DIFFERENT) or (
                status == EXIT_INTERRUPTED and _following(args)):  # a run that finished
            sink.commit()
        return status

    def _interrupted(self, args: argparse.Namespace, out: BinaryIO | None,
                     sink: Output | None) -> int:
        """^C: a following run's output is kept (it finished as far as it could)."""
        if sink is not None and _following(args):
            try:
                sink.commit()
            except AcpPipesError as e:
                _say(self.prog, str(e))
                return e.status
        _flush_quietly(out, sink)
        return EXIT_INTERRUPTED


def run(tool: Tool, argv: Sequence[str] | None = None,
        exit: Callable[[int], object] = sys.exit) -> None:
    """Entry point for console scripts: run ``tool`` and ``exit`` with its status
    (acp-tee passes :func:`exit_now`)."""
    signal.signal(signal.SIGPIPE, signal.SIG_IGN) if hasattr(signal, "SIGPIPE") else None
    try:
        status = tool.main(argv)
    except KeyboardInterrupt:  # while the parser was being built, before main's own guard
        status = EXIT_INTERRUPTED
    exit(status)


def exit_now(status: int) -> None:
    """End the process at once with ``status``, stdout and stderr flushed first, skipping
    the interpreter's teardown (~5 ms of freeing modules and objects one by one). Only
    for a tool that has closed everything else it wrote: acp-tee, whose session waits
    for its exit."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:  # None: that fd was closed when the process started
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


def byte_count(text: str) -> int:
    """``N``, ``NK``, ``NM`` or ``NG`` (KiB, MiB, GiB) as a number of bytes, at least 1."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    unit = units.get(text[-1:].upper(), 1)
    digits = text[:-1] if unit > 1 else text
    if not (digits.isascii() and digits.isdigit()) or int(digits) < 1:
        raise argparse.ArgumentTypeError(f"a number of bytes (1 or more; K, M, G for KiB, "
                                         f"MiB, GiB), not {text!r}")
    return int(digits) * unit


def _following(args: argparse.Namespace) -> bool:
    """``--follow``: Ctrl-C is how the run ends (a frames stream has no end record), so
    an -o file gets what was made, as stdout does; otherwise Ctrl-C leaves it as it was."""
    return bool(getattr(args, "follow", False))


def _say(prog: str, message: str) -> None:
    say(f"{prog}: {message}")


def _flush_quietly(out: BinaryIO | None, sink: Output | None) -> None:
    """After an error, what a failed run wrote to stdout still goes out (a pipeline
    keeps what came before the bad line); to an ``-o`` file, nothing does."""
    if out is None or sink is not None:
        return
    try:
        out.flush()
    except BrokenPipeError:
        silence_stdout()
    except (OSError, AcpPipesError):
        pass


def silence_stdout() -> None:
    """After EPIPE, point stdout at /dev/null so the interpreter's final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


__all__ = [
    "AcpPipesError",
    "EXIT_DIFFERENT",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "Context",
    "InputError",
    "Tool",
    "UsageError",
    "exit_now",
    "say",
    "run",
    "silence_stdout",
]

"""`acp-replay`'s entry point; the tool itself (its modes, options and bodies) is
:mod:`acp_pipes.cli.replay_tool`, whose names this module also gives.

Start-up, for ``--client`` alone: the agent under test starts before acp-replay loads
the runner, argparse and the driver, when the command line is plain (see
:func:`plain_client`) and the trace's header is good (:func:`header_is_a_trace`), so
the agent's start-up overlaps acp-replay's own (~45 ms of imports; the agent started
~75 ms after acp-replay when it came after them, ~25 ms now: ``python -m bench
redrive``). Whatever :func:`plain_client` accepts, the parser accepts as ``--client``
with the same command (tests/test_replay_redrive.py holds that), so a usage error never
starts an agent; what the usual path refuses after that (an ``-o`` that cannot be
written) ends the agent started (:func:`acp_pipes.replay.trace.spawn.end_agent`) before
the error is said. Any other command line goes the usual way: parse, check, then start.

What this module imports before that start is the interpreter's core and
:mod:`acp_pipes.cli.plain` (the command-line reading it shares with acp-tee),
:mod:`acp_pipes.errors`, :mod:`acp_pipes.io.streams`, :mod:`acp_pipes.io.wire`, orjson and
:mod:`acp_pipes.replay.trace.spawn` (``subprocess``).
"""

from __future__ import annotations

import importlib
import os
import sys

from acp_pipes.cli.plain import plain_words

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["header_is_a_trace", "main", "plain_client"]

#: The options :func:`plain_client` takes: flags, and options with one value each.
_FLAGS = frozenset({"--client", "--no-host", "--strict", "--remap-ids", "--keep-going",
                    "--strict-order", "--no-preset"})
_VALUED = frozenset({"-o", "--output", "--timeout", "--clock", "--session", "--pace",
                     "--color", "--workspace"})
_CHOICES = {"--pace": ("fast", "recorded"), "--color": ("auto", "always", "never")}
_HEAD_BYTES = 1 << 20  # a header line longer than this: the usual path judges it


def plain_client(argv: list[str]) -> list[str] | None:
    """The agent command when ``argv`` is a ``--client`` run plain enough to start the
    agent before parsing: ``--client``, acp-replay's own options for it spelled out in
    full, each value a separate word not starting with ``-`` (and a valid one), one
    TRACE that is a regular file (not ``.gz``, not the ``-o`` file) whose header says a
    wire log or frames, then ``--`` and a command. Anything else (abbreviations,
    ``--opt=value``, ``--help``, ``--ignore``, ``--remap-log``, stdin, ...) gives None
    and the usual order."""
    plain = plain_words(argv, _FLAGS, _VALUED)
    if plain is None or argv[:argv.index("--")].count("--client") != 1:
        return None
    options, operands, command = plain
    if len(operands) != 1 or not all(_good_value(o, v) for o, v in options):
        return None
    trace = operands[0]
    output = next((v for o, v in reversed(options) if o in ("-o", "--output")), None)
    if trace.endswith(".gz") or not header_is_a_trace(trace):
        return None
    if output is not None and os.path.exists(output):
        try:
            if os.path.samefile(output, trace):
                return None
        except OSError:
            return None
    return command


def _good_value(option: str, value: str) -> bool:
    if option in _CHOICES:
        return value in _CHOICES[option]
    if option == "--timeout":
        try:
            return float(value) > 0
        except ValueError:
            return False
    if option == "--clock":
        from acp_pipes.io.wire import make_clock

        try:
            make_clock(value)
        except ValueError:
            return False
    return True


def header_is_a_trace(path: str) -> bool:
    """Whether the first non-blank line of the regular file ``path`` is the header of a
    wire log or frames that this acp-pipes reads (:func:`acp_pipes.io.streams.judge`, as
    :func:`acp_pipes.replay.trace.tracefile.open_trace` judges it)."""
    import orjson

    from acp_pipes.errors import InputError
    from acp_pipes.io.streams import FRAMES, WIRE, judge

    try:
        if not os.path.isfile(path):  # (a FIFO is not opened: that could wait)
            return False
        with open(path, "rb") as f:
            number, line = 1, f.readline(_HEAD_BYTES)
            while line.endswith(b"\n") and not line.strip() and number < 1000:
                number, line = number + 1, f.readline(_HEAD_BYTES)
        if not line.endswith(b"\n") or not line.strip():
            return False
    except OSError:
        return False
    try:
        return judge(orjson.loads(line), path, number, (WIRE, FRAMES)) is not None
    except (orjson.JSONDecodeError, InputError):
        return False


def main() -> None:
    early = None
    command = plain_client(sys.argv[1:])
    if command is not None:
        from acp_pipes.errors import UsageError
        from acp_pipes.replay.trace.spawn import start_agent

        try:
            early = start_agent(command)
        except UsageError:  # cannot be started: the usual path says so
            early = None
    from acp_pipes.cli import replay_tool

    replay_tool.main(early)


def __getattr__(name: str) -> Any:
    """The tool's names (``TOOL``, ``MODES``, ``choose``, ...), from
    :mod:`acp_pipes.cli.replay_tool`."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(importlib.import_module("acp_pipes.cli.replay_tool"), name)


if __name__ == "__main__":
    main()

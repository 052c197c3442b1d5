"""The trace modes of ``acp-replay`` (as the agent, ``--client``, ``--emit``), over
:mod:`acp_pipes.replay.trace`. Arguments were checked against the mode table in
:mod:`acp_pipes.cli.replay`; what is left here are the values only a body can judge."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable

from acp_pipes.cli.runner import EXIT_DIFFERENT, EXIT_OK, Context, UsageError
from acp_pipes.output import create

__all__ = ["run"]


def _options(args: argparse.Namespace, remap_log, report: Callable[[dict], None]):
    from acp_pipes.normalize import Normalizer
    from acp_pipes.replay.trace import ReplayOptions

    Normalizer.from_option(args.ignore)  # refused before the agent starts
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    return ReplayOptions(match=args.match, pace=args.pace, ignore=list(args.ignore),
                         remap_ids=args.remap_ids, remap_log=remap_log, report=report,
                         timeout=args.timeout, strict=args.strict)


def run(args: argparse.Namespace, ctx: Context, mode: str, path: str,
        lines: Iterable[bytes] | None, report: Callable[[dict], None]) -> int:
    """``mode`` is ``agent``, ``client`` or ``emit``; ``lines`` the trace's lines when its
    start was already read (None: read ``path``)."""
    from acp_pipes.replay.trace import drive_agent, emit, open_trace, replay_agent

    trace = open_trace(path, lines=lines, warn=ctx.warn)  # read as the replay goes
    trace.session = args.session  # None: every session
    if mode == "emit":
        emit(trace, args.emit, ctx.out)
        return EXIT_OK
    remap_log = None
    if args.remap_log:
        remap_log = create(args.remap_log)  # as private as the trace; closed below
    try:
        options = _options(args, remap_log, report)
        if mode == "client":
            agent = list(args.command)
            result = drive_agent(trace, agent, ctx.out, options, clock=args.clock,
                                 host=not args.no_host)
            return EXIT_OK if result.ok else EXIT_DIFFERENT  # 1 at the first divergence
        result = replay_agent(trace, ctx.stdin(), ctx.out, options)
        return EXIT_OK if result.ok else EXIT_DIFFERENT
    finally:
        if remap_log is not None:
            remap_log.close()

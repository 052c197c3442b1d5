"""The trace modes of ``acp-replay`` (as the agent, ``--client``, ``--emit``), over
:mod:`acp_pipes.replay.trace`. Arguments were checked against the mode table in
:mod:`acp_pipes.cli.replay`; what is left here are the values only a body can judge.

The arguments become one :class:`~acp_pipes.replay.trace.options.ReplayOptions`, built
once (:func:`options_of`), which is all the replay below is handed: its presets and the
noise learned, its clock made.

``--client`` starts the agent as soon as everything that could refuse the run has been
checked (the arguments, the trace's header, the files to write, the options), before the
driver is loaded: the agent's start-up overlaps the rest of acp-replay's own."""

from __future__ import annotations

import argparse
import subprocess
from collections.abc import Callable, Iterable

from acp_pipes.cli.runner import EXIT_DIFFERENT, EXIT_OK, EXIT_USAGE, Context, UsageError
from acp_pipes.io.output import create
from acp_pipes.replay.trace.spawn import end_agent, start_agent

TYPE_CHECKING = False
if TYPE_CHECKING:
    from acp_pipes.replay.trace.options import ReplayOptions

__all__ = ["options_of", "run"]


def options_of(args: argparse.Namespace, ctx: Context, path: str, remap_log,
               report: Callable[[dict], None]) -> ReplayOptions:
    """The replay's options from the arguments, every value checked (a usage error
    before the agent starts): ``--client``'s presets loaded, its noise learned from the
    other recordings (:meth:`ReplayOptions.learn_noise`) and its clock made."""
    from acp_pipes.replay.trace.options import ReplayOptions

    if args.ignore:  # refused before the agent starts
        from acp_pipes.sameness.normalize import Normalizer

        Normalizer.from_option(args.ignore)
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    opt = ReplayOptions(match=args.match, pace=args.pace, ignore=list(args.ignore),
                        remap_ids=args.remap_ids, remap_log=remap_log, report=report,
                        timeout=args.timeout, strict=args.strict)
    if getattr(args, "client", False):
        opt.strict_order = args.strict_order
        opt.keep_going = args.keep_going
        opt.workspace = args.workspace
        if args.preset or args.no_preset:  # else the package's alone, loaded when asked
            from acp_pipes.sameness.volatile import presets_of

            opt.presets = presets_of(args.preset, args.no_preset)
        if args.noise:
            report(opt.learn_noise(path, args.noise, args.session, ctx.warn))
        opt.clock, opt.host = args.clock, not args.no_host
        opt.tick()  # refused before the agent starts
    return opt


def run(args: argparse.Namespace, ctx: Context, mode: str, path: str,
        lines: Iterable[bytes] | None, report: Callable[[dict], None],
        early: subprocess.Popen[bytes] | None = None) -> int:
    """``mode`` is ``agent``, ``client`` or ``emit``; ``lines`` the trace's lines when its
    start was already read (None: read ``path``); ``early``: ``--client``'s agent when
    it was started before parsing (:func:`acp_pipes.cli.replay.plain_client`), ended
    here when the run stops before driving it."""
    try:
        from acp_pipes.replay.trace.tracefile import open_trace

        trace = open_trace(path, lines=lines, warn=ctx.warn)  # read as the replay goes
        trace.session = args.session  # None: every session
        if mode == "emit":
            from acp_pipes.replay.trace.tracefile import emit

            emit(trace, args.emit, ctx.out)
            return EXIT_OK
        remap_log = None
        if args.remap_log:
            remap_log = create(args.remap_log)  # as private as the trace; closed below
        try:
            options = options_of(args, ctx, path, remap_log, report)
            if mode == "client":
                agent, early = early, None  # the driver's from here
                return _client(list(args.command), ctx, trace, options, agent)
            from acp_pipes.replay.trace.agent import replay_agent

            result = replay_agent(trace, ctx.stdin(), ctx.out, options)
            return EXIT_OK if result.ok else EXIT_DIFFERENT
        finally:
            if remap_log is not None:
                remap_log.close()
    finally:
        if early is not None:
            end_agent(early)


def _client(command: list[str], ctx: Context, trace, options: ReplayOptions,
            agent: subprocess.Popen[bytes] | None) -> int:
    """Drive the agent: ``agent`` when it was started already, else started here, once
    everything that could refuse the run has been checked, before the driver is loaded
    (the agent's start-up overlaps the import); ended whatever happens."""
    try:
        if agent is None:
            agent = start_agent(command)
        from acp_pipes.replay.trace.client import drive_agent
    except BaseException:
        if agent is not None:
            end_agent(agent)
        raise
    result = drive_agent(trace, command, ctx.out, options, agent=agent)
    if result.status == "agent_failed":
        return EXIT_USAGE  # no run to judge: the agent did not start
    return EXIT_OK if result.ok else EXIT_DIFFERENT  # 1: a difference

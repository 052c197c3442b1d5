"""The trace modes of ``acp-replay`` (as the agent, ``--client``, ``--emit``), over
:mod:`acp_pipes.replay.trace`. Arguments were checked against the mode table in
:mod:`acp_pipes.cli.replay`; what is left here are the values only a body can judge.

``--client`` starts the agent as soon as everything that could refuse the run has been
checked (the arguments, the trace's header, the files to write), before the driver is
loaded: the agent's start-up overlaps the rest of acp-replay's own."""

from __future__ import annotations

import argparse
import subprocess
from collections.abc import Callable, Iterable

from acp_pipes.cli.runner import EXIT_DIFFERENT, EXIT_OK, EXIT_USAGE, Context, UsageError
from acp_pipes.io.lines import display_name
from acp_pipes.io.output import create
from acp_pipes.replay.trace.spawn import end_agent, start_agent

__all__ = ["run"]


def _options(args: argparse.Namespace, remap_log, report: Callable[[dict], None]):
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
        opt.presets = _presets(args)
    return opt


def _presets(args: argparse.Namespace) -> list | None:
    """The presets of the volatile values (:func:`presets_of`); None: the package's alone
    (loaded when first asked)."""
    if not args.preset and not args.no_preset:
        return None
    return presets_of(args.preset, args.no_preset)


def presets_of(paths: list[str], no_preset: bool) -> list:
    """``--preset FILE`` and ``--no-preset`` (acp-replay --client, acp-align): the
    package's presets (unless ``no_preset``), then each file's; a file that cannot be read
    or is no preset file is the file's error (exit 2, naming it)."""
    from acp_pipes.io.lines import open_source
    from acp_pipes.sameness.volatile import default_presets, load_presets

    presets = [] if no_preset else default_presets()
    for path in paths:
        with open_source(path) as f:
            presets += load_presets(f.read(), display_name(path))
    return presets


def _noise(args: argparse.Namespace, ctx: Context, path: str, options, report) -> None:
    """``--noise TRACE``: what differs between the recording and each of these is
    learned (:func:`acp_pipes.sameness.noise.learn_noise`) and said."""
    if not args.noise:
        return
    from acp_pipes.replay.trace.tracefile import open_trace
    from acp_pipes.sameness.noise import learn_noise

    def frames(p: str) -> list:
        trace = open_trace(p, warn=ctx.warn)
        trace.session = args.session
        return list(trace)

    primary = frames(path)
    others = [(display_name(p), frames(p)) for p in args.noise]
    options.noise = learn_noise(primary, others, rules_for=options.rules_for)
    report(options.noise.summary())


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
            options = _options(args, remap_log, report)
            if mode == "client":
                _noise(args, ctx, path, options, report)
                agent, early = early, None  # the driver's from here
                return _client(args, ctx, trace, options, agent)
            from acp_pipes.replay.trace.agent import replay_agent

            result = replay_agent(trace, ctx.stdin(), ctx.out, options)
            return EXIT_OK if result.ok else EXIT_DIFFERENT
        finally:
            if remap_log is not None:
                remap_log.close()
    finally:
        if early is not None:
            end_agent(early)


def _client(args: argparse.Namespace, ctx: Context, trace, options,
            agent: subprocess.Popen[bytes] | None) -> int:
    """Drive the agent: ``agent`` when it was started already, else started here, once
    everything that could refuse the run has been checked, before the driver is loaded
    (the agent's start-up overlaps the import); ended whatever happens."""
    from acp_pipes.io.wire import make_clock

    command = list(args.command)
    try:
        make_clock(args.clock)  # refused before the agent starts
        if agent is None:
            agent = start_agent(command)
        from acp_pipes.replay.trace.client import drive_agent
    except BaseException:
        if agent is not None:
            end_agent(agent)
        raise
    result = drive_agent(trace, command, ctx.out, options, clock=args.clock,
                         host=not args.no_host, agent=agent)
    if result.status == "agent_failed":
        return EXIT_USAGE  # no run to judge: the agent did not start
    return EXIT_OK if result.ok else EXIT_DIFFERENT  # 1: a difference

"""`acp-replay`: replay a recorded session byte for byte against a live peer (a thin layer
over :mod:`acp_pipes.replay`). Dispatches on the input kind: a trace (wire log or
frames) is replayed by :mod:`acp_pipes.replay.trace`; an ASR stream by
:mod:`acp_pipes.replay.asr`."""

from __future__ import annotations

import argparse
import itertools
import sys

import orjson

from acp_pipes.cli.manual import page
from acp_pipes.cli.runner import EXIT_DIFFERENT, EXIT_OK, Context, Tool, UsageError, run
from acp_pipes.jsonl import STDIN, display_name
from acp_pipes.streams import ASR, header_format
from acp_pipes.wire import make_clock

SUMMARY = "Replay a recorded ACP session byte for byte against a live client or agent."

DESCRIPTION = """\
TRACE is a wire log (acp-tee) or frames (acp-frame; faster: the hashes are already there).

As the agent (default): acp-replay TRACE is put where the agent command goes. Each
client frame is matched against the recording (equal bytes, or equal canonical hash
after --ignore, so reordered keys are fine); the agent frames recorded after it are
written with their exact bytes. Agent requests (permission, elicitation, fs/*,
terminal/*) are sent as recorded and the client's answers matched like any frame.
Nothing is executed and no file is touched.

A frame that matches nothing stops the replay (exit 1) with one JSON line on stderr:
expected (seq, method, hash), received (method, id, hash), consumed, and a JSON-pointer
diff to the nearest recorded candidate. A client that sends more than was recorded, or
a trace cut off mid-session, is reported the same way (events trace_ended, trace_cut).

As the client (--client TRACE -- AGENT [ARGS...]): starts AGENT, sends it the recorded
client frames, each once the agent frames recorded before it have arrived (or after
--timeout), and writes a wire log of the run (-o, default stdout). An agent frame that
differs from the recording is reported on stderr as a JSON line; exit 1 only with
--strict (which stops at the first difference).

--emit a2c|c2a writes one direction's recorded bytes verbatim (offline, no peer).

""" + f"Manual: {page('acp-replay.md')}"

EXAMPLE = """\
acp-tee -o s.jsonl -- acp-echo-agent < client.jsonl > /dev/null   # record once
acp-replay s.jsonl < client.jsonl | cmp - <(acp-replay --emit a2c s.jsonl)
acp-replay --remap-ids --ignore /params/cwd s.jsonl                # in the editor
acp-replay --client s.jsonl -o rerun.jsonl -- acp-echo-agent"""


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--emit", choices=("a2c", "c2a"),
                   help="write the recorded bytes of one direction and exit (offline)")
    p.add_argument("--client", action="store_true",
                   help="replay the client side against a live agent: --client TRACE -- "
                        "AGENT [ARGS...]; -o gets the run's wire log")
    p.add_argument("--match", choices=("order", "any"), default="order",
                   help="order (default): client frames in recorded order; any: serve "
                        "each client frame from the earliest unserved recorded frame with "
                        "its hash, with the agent frames that recorded frame owns")
    p.add_argument("--pace", choices=("fast", "recorded"), default="fast",
                   help="fast (default), or keep the recorded gaps between frames")
    p.add_argument("--ignore", action="append", default=[], metavar="POINTER",
                   help="JSON pointer (RFC 6901, * = any key or index) not to match on: "
                        "removed (object member) or masked (array element) before "
                        "hashing; repeatable")
    p.add_argument("--remap-ids", action="store_true",
                   help="match modulo JSON-RPC id; give each side its own ids (spliced "
                        "into the recorded bytes, nothing else changes)")
    p.add_argument("--remap-log", metavar="FILE",
                   help="with --remap-ids: write each id mapping as JSONL (recorded, live, "
                        "dir, seq)")
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="--client: how long to wait for the agent's recorded frames "
                        "(default 10)")
    p.add_argument("--strict", action="store_true",
                   help="--client: stop at the first difference, exit 1")
    p.add_argument("--clock", default="system", metavar="system|epoch|nanos:N",
                   help="--client: receipt times in the run's wire log (as acp-tee)")
    p.add_argument("--no-host", action="store_true",
                   help="--client: leave host os/arch/cwd/pid out of the wire log header")
    # ASR streams (acp_pipes.replay.asr; docs/acp-replay.md "Replaying ASR streams")
    p.add_argument("--session-id", metavar="ID",
                   help="ASR stream: replay under this session id")
    p.add_argument("--report", metavar="FILE",
                   help="ASR stream: also write the loss report (JSON lines) to FILE")
    p.add_argument("--wire", action="append", default=[], metavar="WIRELOG",
                   help="ASR stream: resend the captured agent frames from the wire log(s) "
                        "it was recorded from (one per connection, in order)")
    p.add_argument("--serve", action="store_true",
                   help="serve ASR streams as a read-only ACP v2 agent on stdio: "
                        "--serve STREAM...")
    p.add_argument("--compare", action="store_true",
                   help="compare the context views of two ASR streams: --compare S S2")


def report_line(event: dict) -> None:
    """A diagnostic event as one JSON line on stderr (machine-readable by design)."""
    try:
        sys.stderr.buffer.write(orjson.dumps(event) + b"\n")
        sys.stderr.buffer.flush()
    except OSError:
        pass


def _options(args: argparse.Namespace, remap_log):
    from acp_pipes.normalize import parse_pointer
    from acp_pipes.replay import ReplayOptions

    for pointer in args.ignore:
        try:
            parse_pointer(pointer)
        except ValueError as e:
            raise UsageError(f"--ignore: {e}") from None
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    return ReplayOptions(match=args.match, pace=args.pace, ignore=list(args.ignore),
                         remap_ids=args.remap_ids, remap_log=remap_log, report=report_line,
                         timeout=args.timeout, strict=args.strict)


def _run(args: argparse.Namespace, ctx: Context) -> int:
    if args.serve or args.compare:
        from acp_pipes.replay import asr_cli

        return asr_cli.run_files(args, ctx)
    agent = list(args.command)
    files = list(args.files or [])
    if len(files) != 1:
        raise UsageError("give exactly one TRACE (usage: acp-replay [OPTIONS] TRACE "
                         "[-- AGENT ARGS...])")
    path = files[0]
    if args.client and not agent:
        raise UsageError("--client needs the agent command: acp-replay --client TRACE -- "
                         "AGENT [ARGS...]")
    if agent and not args.client:
        raise UsageError("an agent command is only used with --client")
    if args.emit and args.client:
        raise UsageError("--emit and --client do not go together")
    if args.remap_log and not args.remap_ids:
        raise UsageError("--remap-log needs --remap-ids")
    if path == STDIN and not (args.emit or args.client):
        raise UsageError("TRACE cannot be stdin when replaying as the agent: stdin is "
                         "the client's")

    # dispatch on the input kind, reading the first line only once (stdin works too)
    from acp_pipes.replay import raw_lines

    lines = raw_lines(path)
    head = []
    fmt = None
    for raw in lines:
        head.append(raw)
        if raw.strip():
            try:
                fmt = header_format(orjson.loads(raw))
            except orjson.JSONDecodeError:
                fmt = None
            break
    all_lines = itertools.chain(head, lines)
    if fmt == ASR:
        return _run_asr(args, ctx, path, all_lines)
    return _run_trace(args, ctx, path, all_lines, agent)


def _run_asr(args: argparse.Namespace, ctx: Context, path: str, lines) -> int:
    """The ASR-stream replay (``acp_pipes.replay.asr.cli_run``) gets the same arguments and
    the input's lines as bytes, its first line included."""
    try:
        from acp_pipes.replay import asr  # type: ignore[attr-defined]
    except ImportError:
        raise UsageError(f"{display_name(path)}: replaying an ASR stream is not built yet "
                         "in this version; give a wire log or frames") from None
    return asr.cli_run(args, ctx, path, lines)


def _run_trace(args, ctx: Context, path: str, lines, agent: list[str]) -> int:
    from acp_pipes.replay import drive_agent, emit, load_trace, replay_agent

    trace = load_trace(path, lines=lines, warn=ctx.warn)
    if args.emit:
        emit(trace, args.emit, ctx.out)
        return EXIT_OK
    remap_log = None
    if args.remap_log:
        try:
            remap_log = open(args.remap_log, "wb")  # noqa: SIM115 - closed below
        except OSError as e:
            raise UsageError(f"cannot write {args.remap_log}: {e.strerror or e}") from None
    try:
        options = _options(args, remap_log)
        if args.client:
            try:
                make_clock(args.clock)
            except ValueError as e:
                raise UsageError(str(e)) from None
            try:
                result = drive_agent(trace, agent, ctx.out, options, clock=args.clock,
                                     host=not args.no_host)
            except OSError as e:
                raise UsageError(f"cannot start {agent[0]}: {e.strerror or e}") from None
            if result.status == "stopped" or (args.strict and not result.ok):
                return EXIT_DIFFERENT
            return EXIT_OK
        result = replay_agent(trace, sys.stdin.buffer, ctx.out, options)
        return EXIT_OK if result.ok else EXIT_DIFFERENT
    finally:
        if remap_log is not None:
            remap_log.close()


TOOL = Tool(
    prog="acp-replay",
    summary=SUMMARY,
    example=EXAMPLE,
    run=_run,
    configure=configure,
    description=DESCRIPTION,
    takes_command=True,
    command_metavar="[-- AGENT [ARGS ...]]",
)


def main() -> None:
    run(TOOL)


if __name__ == "__main__":
    main()

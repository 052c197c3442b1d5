"""`acp-asr`: convert ACP recordings (v1 and v2) into ASR streams, one per ACP session."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from typing import BinaryIO

import orjson

from acp_pipes.asr.mapping import Converted, convert_paths
from acp_pipes.cli.manual import page
from acp_pipes.cli.runner import (
    EXIT_INTERRUPTED,
    Context,
    Tool,
    UsageError,
    run,
    silence_stdout,
)
from acp_pipes.io.output import OutputError
from acp_pipes.io.terminal import printable

DESCRIPTION = """\
Reads wire logs (acp-tee), frames (acp-frame) or folded entities (acp-fold) and runs the
missing stages in-process. Writes one ASR stream per ACP session (ASR-701): with
-o DIR as DIR/<sessionId>.asr.jsonl (the ID percent-encoded), each file growing as its
records are made (after a provisional header, replaced by the final one at the end),
otherwise all streams back to back on stdout when the input is done. Converting the
same input twice gives the same bytes: times come from the recording, never the clock.
A recording cut off mid-session still converts (open entities are written as they
stand, ASR-705); an update kind this version does not know is kept as an audit record
(ASR-710). A recording that negotiated ACP v1 (every agent and editor in use today)
converts by the same rules, with the choices and losses in the ASR format's section "ACP
v1"; v1 and v2 recordings may be given together. A recording that holds no session (the
agent refused session/new) writes nothing and says why on stderr (exit 0). --validate
checks ASR streams instead: exit 0 valid, 1 invalid with one line per problem
(FILE:LINE: POINTER: what is wrong), 2 for a file that cannot be read or is another kind
of stream; a note (a path the agent sent that is not absolute, kept as sent) is no
problem.

""" + (f"Manual: {page('acp-asr.md')}\n"
                f"The ASR format, with every choice: {page('asr.md')}")


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", metavar="DIR",
                   help="a directory (made if missing): DIR/<sessionId>.asr.jsonl is written "
                        "for each session; a session that cannot be written is named and "
                        "does not stop the others (default: every stream on stdout)")
    p.add_argument("--session", metavar="ID", help="write only the stream of session ID")
    p.add_argument("--agent-name", metavar="NAME",
                   help="agent.name to record: the registry or reverse-DNS name the agent is "
                        "known by (default: org.agent-session.acp.<label>, ASR-703)")
    p.add_argument("--secret-field", action="append", default=[], metavar="NAME",
                   help="also treat form field NAME as secret in elicitation answers")
    p.add_argument("--keep-field", action="append", default=[], metavar="NAME",
                   help="record form field NAME even when the schema marks it secret")
    p.add_argument("--snapshots", action="store_true",
                   help="also write partial snapshots at checkpoints (ASR-705)")
    p.add_argument("--follow", action="store_true",
                   help="read each FILE as it grows, like tail -F, until the wire log's "
                        "end record or Ctrl-C; with -o, each session's file grows as its "
                        "records are made")
    p.add_argument("--validate", action="store_true",
                   help="validate ASR streams (FILE...) instead of converting")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    if args.validate and args.follow:
        raise UsageError("--follow converts a growing log: not with --validate")
    if args.validate:
        return _validate(args, ctx)
    if args.fmt == "table":
        raise UsageError("--format table goes with --validate (the streams: json or pretty)")
    done = _convert(args, ctx)
    unreadable = done.unreadable
    if (unreadable is None and not done.interrupted and args.session is not None
            and args.session not in done.headers):
        raise UsageError(f"no session {args.session!r} in the input")
    if unreadable is None and not done.interrupted and args.session is None:
        _no_session(done, ctx)
    _write(done, args, ctx)
    if unreadable is not None:
        raise unreadable
    return EXIT_INTERRUPTED if done.interrupted else 0


def _convert(args: argparse.Namespace, ctx: Context) -> Converted:
    """Every input converted (a line of progress on a terminal when there are several)."""
    # everything imported so far lives as long as the process: keep it out of the
    # collector's scans; records are many, short-lived and acyclic, so the young
    # generation is collected every 50,000 allocations, not every 700 (a few MB at most
    # between collections; memory stays bounded)
    if args.output is not None:
        _check_output_dir(args.output, ctx.files)
        from acp_pipes.asr.output import make_dir

        make_dir(args.output)  # before converting: an -o that cannot be is said first
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    progress = ctx.term.err_tty and len(ctx.files) > 1

    def on_file(i: int, path: str) -> None:
        if progress:
            print(f"\racp-asr: {i + 1}/{len(ctx.files)} {path}"[:120], end="",
                  file=sys.stderr, flush=True)

    done = convert_paths(ctx.files, warn=ctx.warn, agent_name=args.agent_name,
                         secret_fields=args.secret_field, keep_fields=args.keep_field,
                         snapshots=args.snapshots, only=args.session, on_file=on_file,
                         note=ctx.note, directory=args.output, follow=args.follow)
    if progress and done.unreadable is None:
        print(file=sys.stderr)
    return done


def _no_session(done: Converted, ctx: Context) -> None:
    """A recording read correctly that holds no session to write: why, said (exit 0)."""
    why = done.no_session()
    if why is None:
        return
    if why.startswith("the recording"):  # no error to point at: name the input(s)
        names = ", ".join("stdin" if f == "-" else f for f in ctx.files) or "stdin"
        why = f"{names}: {why}"
    ctx.note(why)


def _write(done: Converted, args: argparse.Namespace, ctx: Context) -> None:
    """The streams: one file per session under ``-o``, else one after another on
    stdout."""
    spool, headers = done.spool, done.headers
    if not args.output:
        spool.write_to(ctx.records_out(), headers)
        return
    written, failed = spool.write_dir(args.output, headers)
    for sid, why in failed:
        ctx.note(f"session {sid!r} not written: {why}")
    if failed:
        raise OutputError(f"{len(failed)} of {len(failed) + len(written)} sessions not "
                          f"written (named above); the others are in {args.output}")


def _validate(args: argparse.Namespace, ctx: Context) -> int:
    """``--validate``: each problem on stderr (``FILE:LINE: POINTER: what``, at most
    20 of a file, then a count), and a summary of each file on stdout: a line for
    reading (``table``, a terminal's default) or a JSON object (a pipe's)."""
    from acp_pipes.asr.validate import NoteLine, validate_paths
    from acp_pipes.io.lines import display_name

    fmt = "table" if args.fmt is None and ctx.fmt == "pretty" else ctx.fmt
    names = sorted({display_name(f) for f in ctx.files}, key=len, reverse=True)
    tally: dict[str, list[int]] = {}
    problems: dict[str, int] = {}
    notes: dict[str, int] = {}
    for line in validate_paths(ctx.files, tally):
        source = next((n for n in names if line.startswith(n + ":")), "")
        counts = notes if isinstance(line, NoteLine) else problems
        counts[source] = counts.get(source, 0) + 1
        ctx.problem(source, line)
    # the summaries once every file is read: a problem of one file (a copy from its
    # parent's stream) may be found only once another is
    out = ctx.records_out()
    for name in dict.fromkeys(display_name(f) for f in ctx.files):
        try:
            _summary(ctx, out, fmt, name, tally.get(name, [0, 0]), problems.get(name, 0),
                     notes.get(name, 0))
        except BrokenPipeError:  # `| head` has read enough: the verdict still counts
            silence_stdout()
            break
    return 1 if any(problems.values()) else 0


def _summary(ctx: Context, out: BinaryIO, fmt: str, name: str, tally: list[int], bad: int,
             noted: int) -> None:
    """One file's line of ``--validate``."""
    streams, records = tally
    if fmt == "table":
        verdict = (ctx.term.paint(f"{bad:,} problem{'s' * (bad != 1)}", "error")
                   + " (on stderr)" if bad else ctx.term.paint("valid", "added"))
        extra = f", {noted} note{'s' * (noted != 1)}" if noted else ""
        ctx.out.write(f"{printable(name)}: {streams} stream{'s' * (streams != 1)}, "
                      f"{records:,} record{'s' * (records != 1)}{extra}: {verdict}\n"
                      .encode("utf-8", "backslashreplace"))
    else:
        out.write(orjson.dumps({"type": "summary", "source": name, "streams": streams,
                                "records": records, "problems": bad, "notes": noted,
                                "valid": not bad}) + b"\n")
    out.flush()


def _check_output_dir(path: str, inputs: list[str]) -> None:
    """``-o`` is a directory here (one file per session): say so before converting, for
    ``-o -`` and for a file that is there; and refuse an input in it named as a stream
    (its session's file would replace it while it is read)."""
    from acp_pipes.asr.output import SUFFIX

    wanted = "-o wants a directory: DIR/<sessionId>.asr.jsonl is written for each session"
    if path == "-":
        raise UsageError(f"{wanted} (without -o the streams go to stdout)")
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{path} is not a directory; {wanted}")
    where = os.path.realpath(path)
    for name in inputs:
        real = os.path.realpath(name)
        if name != "-" and real.endswith(SUFFIX) and os.path.dirname(real) == where:
            raise UsageError(f"{name} is an input in {path}, named as a stream acp-asr "
                             "writes there: write the streams elsewhere")


TOOL = Tool(
    prog="acp-asr",
    summary="Convert ACP recordings (v1 and v2) into ASR streams, one per ACP session.",
    example="acp-asr wire.jsonl -o streams/\nacp-asr --validate streams/*.asr.jsonl",
    run=_run,
    configure=configure,
    description=DESCRIPTION,
    takes_output=False,
    formats=("pretty", "table"),
    formats_help="; pretty: each record indented, as jq shows JSON; table: --validate's "
                 "summary of each file, a line for reading (its terminal default)",
    exits="0 ok (--validate: every stream is valid), 1 --validate found an invalid stream, "
          "2 usage or unusable input, 130 interrupted",
)


def main() -> None:
    run(TOOL)


if __name__ == "__main__":
    main()

"""The ASR-stream modes of ``acp-replay`` (the stream as ACP, ``--wire``, ``--serve``,
``--compare``): files, reports and exit statuses over :mod:`acp_pipes.replay.asr`. Arguments
were checked against the mode table in :mod:`acp_pipes.cli.replay`; what is left here
needs the streams read."""

from __future__ import annotations

import argparse
import gc
from collections.abc import Callable, Iterable
from itertools import islice

from acp_pipes.asr.reader import UntilCut, read_streams
from acp_pipes.cli.runner import EXIT_DIFFERENT, EXIT_OK, UsageError
from acp_pipes.errors import InputError
from acp_pipes.io.lines import display_name, raw_lines
from acp_pipes.io.output import create
from acp_pipes.protocol.jsontext import dumps  # lone surrogates stay escapes
from acp_pipes.replay.asr.index import read_indexed
from acp_pipes.replay.asr.updates import Replay
from acp_pipes.replay.asr.v1 import V1Replay

__all__ = ["compare", "replay", "serve"]

Report = Callable[[dict], None]


class _Reports:
    """ASR-731: every loss report as one JSON line on stderr (``echo``), and in
    ``--report FILE``."""

    def __init__(self, path: str | None, echo: Report):
        self.path = path
        self.echo = echo
        self.items: list[dict] = []

    def __call__(self, event: dict) -> None:
        self.items.append(event)
        self.echo(event)

    def close(self) -> None:
        if not self.path:
            return
        with create(self.path) as f:  # as private as the streams it reports on
            for event in self.items:
                f.write(dumps(event) + b"\n")


def _load(path: str, ctx, lines: Iterable[bytes] | None = None, *, keep: bool = True,
          cuts: list[InputError]) -> list:
    """Every stream in the file, parsed whole before anything is written; ``keep=False``:
    only what plain replay sends. A line that is not JSON (a torn last line after a
    crash) or not a JSON object is reported on stderr with its file:line and skipped:
    what was read is still replayed, and the exit status stays that of the replay (as
    for a bad line in a trace). A file unreadable past a point (a .gz cut short) is a
    recording that stopped there: what was read is kept and the read error goes to
    ``cuts``, raised by :func:`_cut` once the output is written (exit 2)."""
    read = read_streams if keep else read_indexed
    src = UntilCut(lines if lines is not None else raw_lines(path), display_name(path))
    streams = list(read(src, display_name(path), ctx.warn))
    if src.error is not None:
        if not streams:
            raise src.error
        cuts.append(src.error)
    if not streams:
        raise InputError(display_name(path), 0, "no ASR stream in this file")
    return streams


def _cut(cuts: list[InputError], ctx) -> None:
    """After the output: the first input that stopped being readable, as an InputError
    (``FILE:LINE: cannot read: ...``, exit 2); the others on stderr before it."""
    if not cuts:
        return
    ctx.out.flush()
    for e in cuts[1:]:
        ctx.warn(e.source, e.line, e.message)
    raise cuts[0]


def replay(args: argparse.Namespace, ctx, path: str, lines: Iterable[bytes] | None,
           report: Report) -> int:
    """``acp-replay STREAM.asr.jsonl``: the notifications on stdout (or -o)."""
    # the parsed stream is a large acyclic tree: the cyclic collector would re-scan it
    # over and over while it is built (5x the parse time at 100k records), for nothing
    gc.disable()
    wire = list(args.wire)
    cuts: list[InputError] = []
    streams = _load(path, ctx, lines, keep=bool(wire), cuts=cuts)  # --wire: every ref
    sid = args.session_id
    if sid is not None and len(streams) > 1:
        raise UsageError(f"--session-id: {display_name(path)} holds {len(streams)} streams; "
                         "give a file with one")
    reports = _Reports(args.report, report)
    out = ctx.out
    try:
        for stream in streams:
            if wire:
                _resend(stream, wire, out)
                continue
            rep = Replay(stream, sid) if args.protocol == 2 else V1Replay(stream, sid)
            frames = rep.notifications()
            while buf := list(islice(frames, 512)):
                out.write(b"\n".join(buf) + b"\n")
            out.flush()
            reports(rep.report())
    finally:
        reports.close()
    _keep_until_exit(streams)
    _cut(cuts, ctx)
    return EXIT_OK


def _keep_until_exit(obj) -> None:
    """Leave ``obj`` to the OS at exit: freeing a parsed stream object by object costs a
    sixth of a replay's time (2 million objects at 100k records). A reference cycle moved
    to the permanent generation (``gc.freeze``) is never collected, not even at
    interpreter shutdown; only for the command line, which exits next."""
    cycle: list = [obj]
    cycle.append(cycle)
    gc.freeze()


def _resend(stream, wire: list[str], out) -> None:
    from acp_pipes.replay.asr.capture import captured_frames

    for frame in captured_frames(stream, wire):  # an unreadable log: the reader's InputError
        out.write(frame + b"\n")
    out.flush()


def serve(args: argparse.Namespace, ctx, files: list[str], report: Report) -> int:
    """``--serve STREAM...``: a read-only ACP agent on stdin/stdout."""
    cuts: list[InputError] = []
    streams = [s for f in files for s in _load(f, ctx, cuts=cuts)]
    sid = args.session_id
    if sid is not None:
        if len(streams) != 1:
            raise UsageError("--session-id: serve one stream to rename it")
        streams[0].header = {**streams[0].header, "sessionId": sid}
    from acp_pipes.replay.asr.serve import serve as serve_on

    reports = _Reports(args.report, report)
    try:
        serve_on(streams, ctx.stdin(), ctx.out, report=reports,
                 warn=ctx.warn)
    finally:
        reports.close()
    _cut(cuts, ctx)
    return EXIT_OK


def compare(args: argparse.Namespace, ctx, files: list[str], report: Report) -> int:
    """ASR-732: the context views of two streams, compared; differences as JSON lines on
    stdout, exit 1 when there is one."""
    from acp_pipes.replay.asr.equivalence import compare_streams

    cuts: list[InputError] = []
    a, b = (_load(f, ctx, cuts=cuts) for f in files)
    if len(a) != 1 or len(b) != 1:
        raise UsageError("--compare: give files holding one stream each")
    diffs = compare_streams(a[0], b[0])
    for d in diffs:
        ctx.out.write(dumps(d) + b"\n")
    ctx.out.flush()
    summary = {"event": "compare", "equivalent": not diffs, "differences": len(diffs),
               "a": display_name(files[0]), "b": display_name(files[1])}
    report(summary)
    _cut(cuts, ctx)
    return EXIT_DIFFERENT if diffs else EXIT_OK

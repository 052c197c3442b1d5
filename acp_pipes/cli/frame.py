"""`acp-frame`: classify and hash the frames of a wire log or a bare ACP JSONL stream."""

from __future__ import annotations

import argparse
from itertools import islice, repeat
from typing import Any

import orjson

from acp_pipes.cli.manual import page
from acp_pipes.cli.runner import EXIT_INTERRUPTED, Context, Tool, UsageError, run
from acp_pipes.frame.core import read_frames
from acp_pipes.frame.session import of_session
from acp_pipes.frame.validate.schema import NEWEST_V2, REVISIONS
from acp_pipes.io.live import Live
from acp_pipes.io.terminal import Terminal, printable
from acp_pipes.schemas import ACP_REVISIONS, ACP_V1, ACP_V2, bundled_text

DESCRIPTION = """\
Reads wire logs (acp-tee -o), frames streams (re-framed, idempotently) or bare ACP JSONL
(one JSON-RPC message a line; needs --dir, which streams with a header ignore), and writes
a frames header per input stream and one record per frame: seq, t, dir, raw|raw_b64,
[nolf], [redacted], kind, method, id, sessionId, size, hash.

A frame that is not JSON or not JSON-RPC is reported on stderr (FILE:LINE) and kept as an
invalid_json / not_jsonrpc frame; a broken wire record (a torn last line) is reported and
skipped. Both exit 0. Input of the wrong kind, or a bare stream without --dir, exits 2.

--summary prints what the recording holds instead: header, counts by direction, kind,
method, session and update kind, sizes, time span, redactions, invalid lines, the
negotiated protocol version; and latency: per method, request to answer (count, p50,
p90, p99, max in ms), and per prompt turn, the time to the agent's first update and the
turn's duration (v1: until the prompt's response; v2: until the session's idle
state_update).

--validate checks every frame against the official ACP JSON Schema of the protocol
version the recording negotiated (its stable definitions, then its unstable ones; with
--stable the stable ones alone), by direction and method, a response as the result of
the request it answers; and what a schema cannot say: each request answered exactly
once, no response to an unknown id, no id reused while in flight, each method in its
direction, sessions used only while live, capability-gated calls only when advertised,
the stop reason `cancelled` after session/cancel, absolute paths where the schema says
absolute; warnings (v1) for permission requests naming tool calls never announced.
v2 is checked against v2.0.0-alpha.9, or against the SDK 2.4.0 schema when initialize
advertises a capability only that one defines (--schema REVISION forces one).
It writes one JSON line per violation (seq, dir, method, rule, JSON pointer, message,
the schema file, location and words) and a summary line per stream, or a table on a
terminal; exit 1 when anything is wrong (warnings alone: 0).

ACP schemas bundled (--schema REVISION):
""" + bundled_text() + f"\n\nManual: {page('acp-frame.md')}"

#: Records encoded and written together while input is ready; when it has no more bytes
#: ready, what was framed is written and flushed at once (acp_pipes.io.live.Live).
BATCH = 64

EXAMPLE = """\
acp-frame wire.jsonl | acp-fold | acp-asr
acp-frame --dir c2a client.jsonl > client.frames.jsonl
acp-frame --summary wire.jsonl.gz
acp-frame --validate wire.jsonl || echo "not valid ACP"
"""


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", choices=("c2a", "a2c"), dest="direction",
                   help="direction of a bare ACP JSONL stream (c2a: client to agent)")
    p.add_argument("--follow", action="store_true",
                   help="read each FILE as it grows, like tail -F, until the wire log's "
                        "end record or Ctrl-C")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--summary", action="store_true",
                      help="print a summary of each stream instead of the frames")
    mode.add_argument("--validate", action="store_true",
                      help="check every frame against the ACP spec; print the violations")
    p.add_argument("--protocol", type=int, choices=sorted(REVISIONS),
                   help="--validate: check as this protocol version, whatever initialize "
                        "negotiated (for a recording without initialize)")
    p.add_argument("--schema", metavar="REVISION", choices=ACP_REVISIONS, dest="revision",
                   help="--validate: check against this schema revision (" +
                        ", ".join(ACP_REVISIONS) + "); by default v2 is checked against "
                        f"{ACP_V2}, or {NEWEST_V2} when initialize advertises a capability "
                        "only it defines")
    p.add_argument("--session", metavar="ID",
                   help="write only the frames of session ID, and those of no session "
                        "(initialize, authenticate), so the output still folds")
    p.add_argument("--stable", action="store_true",
                   help="--validate: the stable schema alone (unstable features are "
                        "violations)")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    _refuse_conflicts(args)
    if args.validate:
        return _validate(args, ctx, ctx.fmt)
    if args.summary:
        return _summary(args, ctx, ctx.fmt)
    return _frames(args, ctx)


def _refuse_conflicts(args: argparse.Namespace) -> None:
    """Options that do not go together: a usage error (exit 2) naming them."""
    if (args.protocol is not None or args.stable or args.revision) and not args.validate:
        raise UsageError("--protocol, --schema and --stable go with --validate")
    if args.revision and args.protocol is not None and (args.revision == ACP_V1) != (
            args.protocol == 1):
        raise UsageError(f"--schema {args.revision} is not a schema of protocol version "
                         f"{args.protocol}")
    if args.follow and (args.summary or args.validate):
        raise UsageError("--follow frames a growing log: not with --summary or --validate")
    if args.session is not None and (args.summary or args.validate):
        raise UsageError("--session selects frames to write; it does not go with --summary "
                         "or --validate")


def _frames(args: argparse.Namespace, ctx: Context) -> int:
    """The frame records of every input (of ``--session``'s alone, with it)."""
    # Records are encoded by map() in C and written BATCH at a time: measured ~0.1 us a
    # frame less than one write per record. list.extend keeps what it took before an
    # error (a .gz cut short), and the finally writes it: nothing framed is lost.
    out = ctx.records_out(FrameTable(ctx.term))
    write = out.write
    dumps, no_default, newline = orjson.dumps, repeat(None), repeat(orjson.OPT_APPEND_NEWLINE)
    lines: list[bytes] = []

    def flush() -> None:
        chunk = b"".join(lines)
        lines.clear()
        write(chunk)

    def idle() -> None:
        """No more input ready: what was framed goes out now, not BATCH frames later.
        Called from inside the ``extend`` below, which appends as it goes."""
        if lines:
            flush()
        out.flush()

    live = Live(idle, follow=args.follow)
    seen: list[bool] = []
    try:
        for path in ctx.files:
            records = read_frames(path, direction=args.direction, warn=ctx.warn, headers=True,
                                  live=live)
            if args.session is not None:
                records = of_session(records, args.session, seen)
            while True:  # dumps(record, None, OPT_APPEND_NEWLINE) for each record
                lines.extend(map(dumps, islice(records, BATCH), no_default, newline))
                if not lines:
                    break
                flush()
    finally:
        if lines:
            flush()
    if args.session is not None and not seen and not live.interrupted:
        raise UsageError(f"no session {args.session!r} in the input")
    return EXIT_INTERRUPTED if live.interrupted else 0


def _summary(args: argparse.Namespace, ctx: Context, fmt: str) -> int:
    """``--summary``: one summary per input stream, JSON lines or tables."""
    from acp_pipes.frame.summary import render_table, summaries
    from acp_pipes.io.lines import display_name

    write = ctx.records_out().write
    first = True
    for path in ctx.files:
        source = display_name(path)
        holder: dict[str, Any] = {}

        def warn(src: str, line: int, message: str, _h: dict[str, Any] = holder) -> None:
            ctx.warn(src, line, message)
            _h["warn"](src, line, message)

        records = read_frames(path, direction=args.direction, warn=warn, headers=True,
                              ends=True)
        gen, holder["warn"] = summaries(records, source)
        for s in gen:
            if fmt != "table":
                write(orjson.dumps(s, option=orjson.OPT_APPEND_NEWLINE))
            else:
                write((("" if first else "\n") + render_table(s)).encode("utf-8"))
            first = False
    return 0


def _validate(args: argparse.Namespace, ctx: Context, fmt: str) -> int:
    """``--validate``: violation lines and a summary line per stream; 1 if any."""
    from acp_pipes.frame.validate import reports
    from acp_pipes.io.lines import display_name

    write = ctx.records_out().write
    term = ctx.term
    found = 0
    table = fmt == "table"
    start, first = True, True  # at a stream's start; nothing written yet
    for path in ctx.files:
        source = display_name(path)
        records = read_frames(path, direction=args.direction, warn=ctx.warn, headers=True)
        for r in reports(records, protocol=args.protocol, stable=args.stable,
                         revision=args.revision):
            if r["type"] == "summary":
                r = {"type": "summary", "source": source, **r}
                found += r["violations"]
            if not table:
                write(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE))
                continue
            if start:  # streams apart by a blank line; a table head before violations
                write(b"" if first else b"\n")
                if r["type"] == "violation":
                    write(_TABLE_HEAD)
            start, first = r["type"] == "summary", False
            write(_table_row(r, term).encode("utf-8", "backslashreplace"))
    return 1 if found else 0


_COLUMNS = (("seq", 7), ("dir", 3), ("method", 26), ("rule", 18), ("pointer", 28))
_INDENT = " " * (_COLUMNS[0][1] + 2)
_TABLE_HEAD = ("  ".join(n.rjust(w) if n == "seq" else n.ljust(w) for n, w in _COLUMNS)
               + "  message\n").encode()


def _table_row(r: dict, term: Terminal) -> str:
    """One violation (two lines: the problem, then the schema's words) or a summary.
    Recorded strings (methods, pointers, messages quoting values) are :func:`printable`."""
    if r["type"] == "summary":
        rules = ", ".join(f"{k} {n}" for k, n in r["rules"].items())
        schema = r["schema"] or "no schema"
        how = f"ACP {r['protocolVersion']} ({r['versionFrom']}), {schema}"
        if not r["paired"]:
            how += ", one direction only"
        found = (term.paint(f"{r['violations']} violations", "error") + f": {rules}"
                 if r["violations"] else term.paint("valid", "added"))
        return f"{printable(r['source'])}: {r['frames']} frames, {how}: {found}\n"
    cells = [str(r["seq"]), r["dir"], r["method"] or "-", r["rule"], r["pointer"] or "/"]
    line = "  ".join(
        (_cut(printable(c), w).rjust(w) if n == "seq" else _cut(printable(c), w).ljust(w))
        for c, (n, w) in zip(cells, _COLUMNS, strict=True))
    line += "  " + printable(r["message"]) + "\n"
    if r["words"]:  # the schema's own words, under the row
        words = f"{r['schema']}{r['location']}: {printable(r['words'])}"
        line += _INDENT + term.paint(words, "context") + "\n"
    return line


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


class FrameTable:
    """Frame records as rows for reading (``--format table``, a terminal's default):
    seq, seconds since the stream's first frame, direction (→ client to agent, ← agent
    to client), kind, method, id, session and size; a stream's header as a line saying
    what was recorded. Recorded strings are :func:`printable`."""

    HEAD = (f"{'seq':>5} {'t (s)':>8}  dir {'kind':<12} {'method':<26} {'id':>4} "
            f"{'session':<8} {'bytes':>6}\n")

    def __init__(self, term: Terminal):
        self.term = term
        self.start: int | None = None

    def __call__(self, rec: Any) -> str:
        if not isinstance(rec, dict):
            return printable(str(rec)) + "\n"
        if "seq" not in rec:  # a frames header: the next stream starts here
            self.start = None
            src = rec.get("source") or {}
            what = ", ".join(printable(str(x)) for x in (
                " ".join(src.get("argv") or []) or None, src.get("recorder"),
                src.get("started"), src.get("clock") and f"clock {src['clock']}")
                if x) or "a bare ACP JSONL stream"
            return self.term.paint(f"# {what}", "heading") + "\n" + self.HEAD
        t = rec.get("t")
        if isinstance(t, int) and self.start is None:
            self.start = t
        at = f"{(t - self.start) / 1e9:.3f}" if isinstance(t, int) and self.start is not None \
            else "-"
        arrow = {"c2a": "→", "a2c": "←"}.get(str(rec.get("dir")), "?")
        kind = str(rec.get("kind") or "")
        rid = rec.get("id")
        row = (f"{rec.get('seq', ''):>5} {at:>8}  {arrow:<3} {kind:<12} "
               f"{_cut(printable(str(rec.get('method') or '-')), 26):<26} "
               f"{_cut('-' if rid is None else printable(str(rid)), 4):>4} "
               f"{_cut(printable(str(rec.get('sessionId') or '-')), 8):<8} "
               f"{rec.get('size', ''):>6}")
        if kind in ("error", "invalid_json", "not_jsonrpc"):
            row = self.term.paint(row, "error")
        return row + "\n"


TOOL = Tool(
    prog="acp-frame",
    summary="Classify and hash the frames of a wire log or a bare ACP JSONL stream.",
    description=DESCRIPTION,
    example=EXAMPLE,
    run=_run,
    configure=configure,
    formats=("table", "pretty"),
    formats_help="; the frames, --summary and --validate alike; pretty: each record "
                 "indented, as jq shows JSON",
    exits="0 ok (frames that are not JSON or not JSON-RPC are reported and kept), "
          "1 --validate found violations, 2 usage or unusable input, 130 interrupted",
)


def main() -> None:
    run(TOOL)


if __name__ == "__main__":
    main()

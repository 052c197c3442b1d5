"""`acp-frame`: classify and hash the frames of a wire log or a bare ACP JSONL stream."""

from __future__ import annotations

import argparse
from itertools import islice, repeat

import orjson

from acp_pipes.cli.manual import page
from acp_pipes.cli.runner import Context, Tool, UsageError, run
from acp_pipes.frame import read_frames

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
negotiated protocol version.

""" + f"Manual: {page('acp-frame.md')}"

#: Records encoded and written together: a frame reaches stdout at most this many frames
#: later than it would one at a time (stdout is block-buffered either way).
BATCH = 64

EXAMPLE = """\
acp-frame wire.jsonl | acp-fold | acp-asr
acp-frame --dir c2a client.jsonl > client.frames.jsonl
acp-frame --summary wire.jsonl.gz
"""


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", choices=("c2a", "a2c"), dest="direction",
                   help="direction of a bare ACP JSONL stream (c2a: client to agent)")
    p.add_argument("--summary", action="store_true",
                   help="print a summary of each stream instead of the frames")
    p.add_argument("--format", choices=("json", "table"), dest="fmt",
                   help="--summary output: json (default when not a terminal) or table")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    if args.fmt and not args.summary:
        raise UsageError("--format goes with --summary")
    if args.summary:
        from acp_pipes.summary import run_summary

        fmt = args.fmt or ("table" if ctx.term.tty else "json")
        return run_summary(ctx, args.direction, fmt)

    # Records are encoded by map() in C and written BATCH at a time: measured ~0.1 us a
    # frame less than one write per record. list.extend keeps what it took before an
    # error (a .gz cut short), and the finally writes it: nothing framed is lost.
    write = ctx.out.write
    dumps, no_default, newline = orjson.dumps, repeat(None), repeat(orjson.OPT_APPEND_NEWLINE)
    lines: list[bytes] = []

    def flush() -> None:
        chunk = b"".join(lines)
        lines.clear()
        write(chunk)

    try:
        for path in ctx.files:
            records = read_frames(path, direction=args.direction, warn=ctx.warn, headers=True)
            while True:  # dumps(record, None, OPT_APPEND_NEWLINE) for each record
                lines.extend(map(dumps, islice(records, BATCH), no_default, newline))
                if not lines:
                    break
                flush()
    finally:
        if lines:
            flush()
    return 0


TOOL = Tool(
    prog="acp-frame",
    summary="Classify and hash the frames of a wire log or a bare ACP JSONL stream.",
    description=DESCRIPTION,
    example=EXAMPLE,
    run=_run,
    configure=configure,
    exits="0 ok (frames that are not JSON or not JSON-RPC are reported and kept), "
          "2 usage or unusable input, 130 interrupted",
)


def main() -> None:
    run(TOOL)


if __name__ == "__main__":
    main()

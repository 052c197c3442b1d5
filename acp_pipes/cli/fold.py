"""`acp-fold`: fold ACP frames into one record per entity when it becomes final."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator

from acp_pipes.cli.manual import page
from acp_pipes.cli.runner import EXIT_INTERRUPTED, Context, Tool, UsageError, run
from acp_pipes.fold import fold_paths
from acp_pipes.io.lines import write_records
from acp_pipes.io.live import Live

DESCRIPTION = """\
Reads wire logs (acp-tee) or frames (acp-frame); each is one ACP connection. Applies
ACP v2's patch rule per session and entity (omitted unchanged, null clears, a value
replaces, a chunk appends, full content replaces what chunks built; _meta key by key)
and writes a fold stream: a header, then session events and one record per entity when
it becomes final (ASR-704..706), in timeline order. A connection that negotiated ACP v1
is lifted into v2's shapes first (asr.md, "ACP v1"); an ACP version other than 1 or 2 is
refused (exit 2).

""" + f"Manual, with the format: {page('acp-fold.md')}"


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--session", metavar="ID",
                   help="write only the records of session ID (and the connection's own, "
                        "initialize), as acp-asr --session does")
    p.add_argument("--snapshots", action="store_true",
                   help="also write partial snapshots of open entities at each checkpoint "
                        "(state running/requires_action, permission and elicitation "
                        "requests); the final record supersedes them")
    p.add_argument("--follow", action="store_true",
                   help="read each FILE as it grows, like tail -F, until the wire log's "
                        "end record or Ctrl-C")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    # records go out as soon as the input has nothing more ready (a live acp-tee behind)
    out = ctx.records_out()
    live = Live(out.flush, follow=args.follow)
    records = fold_paths(ctx.files, snapshots=args.snapshots, warn=ctx.warn, live=live)
    if args.session is None:
        write_records(records, out)
        return EXIT_INTERRUPTED if live.interrupted else 0
    seen: list[bool] = []
    write_records(of_session(records, args.session, seen), out)
    if not seen and not live.interrupted:
        raise UsageError(f"no session {args.session!r} in the input")
    return EXIT_INTERRUPTED if live.interrupted else 0


def of_session(records: Iterable[dict], sid: str, seen: list[bool]) -> Iterator[dict]:
    """The fold records of session ``sid`` and those of none (the fold headers).

    Not the rule of frames (:func:`acp_pipes.frame.session.of_session`): the fold has already
    matched every answer to its request and says whose each record is, so a record of
    another session names it (the ``session/new`` that made it is that session's
    ``{"ev": "session", "op": "new"}``), and nothing of no session waits for an answer.
    ``seen`` gets an entry once a record of ``sid`` went by."""
    for rec in records:
        s = rec.get("session")
        if s is None or s == sid:
            if s is not None and not seen:
                seen.append(True)
            yield rec


TOOL = Tool(
    prog="acp-fold",
    summary="Fold ACP frames (v1 and v2) into one record per entity when it becomes final.",
    example="acp-fold wire.jsonl | acp-asr -o streams/",
    run=_run,
    configure=configure,
    description=DESCRIPTION,
    formats=("pretty",),
    formats_help="; pretty: each record indented, as jq shows JSON",
)


def main() -> None:
    run(TOOL)


if __name__ == "__main__":
    main()

"""`acp-view`: a recording as one self-contained HTML page (transcript and timeline)."""

from __future__ import annotations

import argparse
import os

from acp_pipes.cli.manual import page
from acp_pipes.cli.runner import Context, Tool, UsageError, run
from acp_pipes.io.lines import STDIN
from acp_pipes.schemas import ACP_REVISIONS

DESCRIPTION = """\
Reads any stage: wire logs (acp-tee), frames (acp-frame), bare ACP JSONL (with --dir),
folded entities (acp-fold) or ASR streams (acp-asr), converting in-process what it needs,
and writes one HTML file that needs nothing else: no network, no fonts or scripts from
elsewhere, the data inside it. It opens from file:// in any browser.

The page shows, per session, the transcript: messages, thoughts (collapsed), tool calls
with kind, status, input and output, diffs, terminal output, plans, permissions and
questions with their answers, subagents and forks linked to their sessions, the losses
the stream declares. And the protocol timeline of a trace: every frame with time,
direction, kind, method, id, session, size, the latency to its pair and each spec
violation (the checks of acp-frame --validate, unless --no-validate); chunk runs
collapsed; filters by session, kind, method and direction; search; a click shows the
frame's exact bytes. ASR streams and folded entities have no frames: transcript only.

Everything recorded is shown as text, never as markup: the data is embedded as escaped
JSON and the page's Content-Security-Policy allows no network and no script but its own.
Lines the readers skip are reported on stderr and listed in the page; an input cut short
is shown as read, then reported (exit 2).

""" + f"Manual: {page('acp-view.md')}"

EXAMPLE = """\
acp-view wire.jsonl -o session.html
acp-asr -o streams/ wire.jsonl && acp-view streams/*.asr.jsonl -o sessions.html
acp-frame wire.jsonl | acp-view > frames.html
"""


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", choices=("c2a", "a2c"), dest="direction",
                   help="direction of a bare ACP JSONL input (streams with a header ignore it)")
    p.add_argument("--no-validate", dest="validate", action="store_false",
                   help="do not check the frames against the ACP spec (the timeline's spec "
                   "column stays empty; saves the time acp-frame --validate takes)")
    p.add_argument("--schema", metavar="REVISION", choices=ACP_REVISIONS, dest="revision",
                   help="check the frames against this ACP schema revision, as acp-frame "
                        "--validate --schema (" + ", ".join(ACP_REVISIONS) + "); by default "
                        "the one of the protocol version the recording negotiated")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from acp_pipes.view import load, session_page

    if ctx.term.tty:  # a page of HTML is for a browser, not for the screen
        raise UsageError("writes an HTML page: give -o PAGE.html, or redirect stdout")
    if args.revision and not args.validate:
        raise UsageError("--schema picks the schema the frames are checked against: not with "
                         "--no-validate")
    files = list(ctx.files)
    spooled = None
    if STDIN in files:  # read twice (frames, then the transcript): spool it once
        from acp_pipes.align.steps import spool_stdin

        spooled = spool_stdin()
    try:
        paths = [spooled if f == STDIN else f for f in files]
        names = ["stdin" if f == STDIN else f for f in files]

        # (paths: no None, as spooled is set when STDIN is among the files)
        recording = load(paths, names,  # type: ignore[arg-type]
                         direction=args.direction, warn=ctx.warn,
                         validate=args.validate, revision=args.revision)
    finally:
        if spooled:
            os.unlink(spooled)
    ctx.out.write(session_page(recording))
    if recording.cut:  # shown as read; the input still could not be read whole
        ctx.out.flush()
        for e in recording.cut[1:]:
            ctx.warn(e.source, e.line, e.message)
        raise recording.cut[0]
    return 0


TOOL = Tool(
    prog="acp-view",
    summary="Write a recording as one self-contained HTML page: transcript and timeline.",
    description=DESCRIPTION,
    example=EXAMPLE,
    run=_run,
    configure=configure,
    exits="0 ok, 2 usage or unusable input (an input cut short: the page shows what was "
          "read), 130 interrupted",
)


def main() -> None:
    run(TOOL)


if __name__ == "__main__":
    main()

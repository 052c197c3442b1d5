"""`acp-export`: ACP sessions into the tools teams already use: OpenTelemetry GenAI
traces (OTLP/HTTP to a collector, or OTLP/JSON) and Agent Trail files."""

from __future__ import annotations

import argparse

from acp_pipes.cli.manual import page
from acp_pipes.cli.runner import Context, Tool, UsageError, byte_count, run

DESCRIPTION = """\
Reads any stage: ASR streams (acp-asr), its natural input, or wire logs (acp-tee),
frames (acp-frame) and folded entities (acp-fold), converted in-process as acp-asr
converts them.

  otlp         one trace per ACP session (gen_ai.conversation.id: the session ID; the
               first _meta.traceparent its records carry is honoured as the parent), a
               span for the session, an invoke_agent span per prompt turn (v1: request
               to response; v2: running to idle) with its stop reason, an execute_tool
               span per tool call (name, kind, status, input and output capped at
               --max-attribute-bytes), permissions and elicitations as span events,
               usage_update and cost as gen_ai.usage.*, forks and subagents as span
               links. Times are the recorder's receipt times; replayed history is no
               turn. IDs are derived from the session, so exporting again gives the same
               trace. --endpoint sends OTLP/HTTP (protobuf) to a collector; otherwise
               OTLP/JSON is written (-o FILE or stdout), the format of the OpenTelemetry
               collector's file exporter: one request a line. Needs the OpenTelemetry
               SDK, acp-pipes' extra 'export' (without it acp-export says how to add it
               to this installation). To a collector on this machine:
               acp-export otlp wire.jsonl --endpoint http://127.0.0.1:4318
  agent-trail  one Agent Trail file per session in -o DIR.

""" + f"Manual: {page('acp-export.md')}"

EXAMPLE = """\
acp-asr -o streams/ wire.jsonl && acp-export otlp streams/*.asr.jsonl -o spans.json
acp-asr wire.jsonl | acp-export otlp > spans.json
acp-export agent-trail wire.jsonl parent.asr.jsonl child.asr.jsonl -o trails/
"""

MODE_HELP = {
    "otlp": "OpenTelemetry GenAI traces: OTLP/HTTP to --endpoint, or OTLP/JSON",
    "agent-trail": "Agent Trail files, one per session, in -o DIR",
}


def endpoint_url(text: str) -> str:
    """A collector's traces URL; one with no path gets OTLP's ``/v1/traces``."""
    from urllib.parse import urlsplit

    u = urlsplit(text)
    if u.scheme not in ("http", "https") or not u.netloc:
        raise argparse.ArgumentTypeError(f"an http:// or https:// URL, not {text!r}")
    return text if u.path not in ("", "/") else text.rstrip("/") + "/v1/traces"


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"a number, 0 or more, not {text!r}")
    return int(text)


def configure(p: argparse.ArgumentParser) -> None:
    modes = p.add_subparsers(dest="mode", metavar="MODE", required=True)

    def mode(name: str) -> argparse.ArgumentParser:
        sub = modes.add_parser(name, help=MODE_HELP[name], description=MODE_HELP[name],
                               formatter_class=p.formatter_class)
        sub.add_argument("files", nargs="*", metavar="FILE",
                         help="input files (default: stdin; '-' is stdin; .gz is read "
                         "transparently)")
        return sub

    otlp = mode("otlp")
    to = otlp.add_mutually_exclusive_group()
    to.add_argument("--endpoint", type=endpoint_url, metavar="URL",
                    help="send OTLP/HTTP (protobuf) to the collector at URL "
                    "(http://HOST:PORT/v1/traces; a URL without a path gets /v1/traces)")
    to.add_argument("-o", "--output", metavar="FILE",
                    help="write OTLP/JSON to FILE instead of stdout")
    otlp.add_argument("--header", action="append", default=[], metavar="NAME=VALUE",
                      help="an HTTP header for --endpoint (authentication); repeatable")
    otlp.add_argument("--resource", action="append", default=[], metavar="NAME=VALUE",
                      help="a resource attribute to add to every span's resource "
                      "(deployment.environment.name=ci; a receiver's project); repeatable")
    otlp.add_argument("--id-namespace", default="", metavar="TEXT",
                      help="derive trace and span IDs from TEXT too: keeps apart sessions "
                      "of other recordings that have the same session IDs (default: the "
                      "session ID alone, so a fork or subagent exported on its own still "
                      "links to its parent's trace)")
    otlp.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                      help="--endpoint: how long one request may take (default 10)")
    otlp.add_argument("--retries", type=_count, default=4, metavar="N",
                      help="--endpoint: retry a request the collector may take later (no "
                      "connection, no answer, HTTP 408, 429, 502, 503, 504) N times, "
                      "waiting 1, 2, 4 ... s or as Retry-After says; each said on stderr "
                      "(default 4; anything else fails at once)")
    otlp.add_argument("--max-attribute-bytes", type=byte_count, default=None, metavar="N",
                      help="keep at most N bytes of a tool call's input and output "
                      "(default 4K; the size is kept beside it)")

    trail = mode("agent-trail")
    trail.add_argument("-o", "--output", metavar="DIR", required=True,
                       help="the directory the Agent Trail files go to (made if missing)")
    trail.add_argument("--max-attribute-bytes", type=byte_count, default=None, metavar="N",
                       help="keep at most N bytes of a tool call's input and output "
                       "(default 4K; the size is kept beside it)")


def _headers(pairs: list[str], option: str = "--header") -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not name.strip():
            raise UsageError(f"{option} wants NAME=VALUE, not {pair!r}")
        out[name.strip()] = value
    return out


def _otlp(args: argparse.Namespace, ctx: Context) -> int:
    from acp_pipes.export import DEFAULT_CAP, export_otlp
    from acp_pipes.export.otlp import Encoder, Sender
    from acp_pipes.io.output import Output

    encoder = Encoder()  # the SDK, or a clear error, before anything is read
    cap = args.max_attribute_bytes or DEFAULT_CAP
    extra = _headers(args.resource, "--resource")
    if args.endpoint:
        sender = Sender(args.endpoint, timeout=args.timeout, headers=_headers(args.header),
                        retries=args.retries, note=ctx.note)
        try:
            done = export_otlp(ctx.files, sender.send, warn=ctx.warn, cap=cap,
                               note=ctx.note, encoder=encoder, resource=extra,
                               namespace=args.id_namespace)
        finally:
            sender.close()
        ctx.note(f"{done.sessions} session{'s' * (done.sessions != 1)}, {done.spans} "
                 f"span{'s' * (done.spans != 1)} sent to {args.endpoint}")
    else:
        if args.header:
            raise UsageError("--header is for --endpoint")
        if args.retries != 4:
            raise UsageError("--retries is for --endpoint")
        if ctx.term.tty and not args.output:
            raise UsageError("writes OTLP/JSON: give -o FILE, --endpoint URL, or redirect "
                             "stdout")
        sink = Output(args.output) if args.output and args.output != "-" else None
        out = sink.stream if sink is not None else ctx.out
        try:
            done = export_otlp(ctx.files, lambda spans: out.write(encoder.json_line(spans)),
                               warn=ctx.warn, cap=cap, note=ctx.note, encoder=encoder,
                               resource=extra, namespace=args.id_namespace)
            if sink is not None and done.cut is None:
                sink.commit()
        finally:
            if sink is not None:
                sink.discard()
    _no_session(ctx, done)
    if done.cut is not None:
        raise done.cut
    return 0


def _no_session(ctx: Context, done) -> None:
    """A recording that holds no session is read correctly: said on stderr, exit 0 (as
    acp-asr says it, naming the inputs where the reason names none)."""
    if not done.note or done.sessions:
        return
    why = done.note
    if why.startswith("the recording"):
        why = ", ".join("stdin" if f == "-" else f for f in ctx.files) + ": " + why
    ctx.note(why)


def _trail(args: argparse.Namespace, ctx: Context) -> int:
    from acp_pipes.export import DEFAULT_CAP
    from acp_pipes.export.trail import export_trail

    done = export_trail(ctx.files, args.output, warn=ctx.warn, note=ctx.note,
                        cap=args.max_attribute_bytes or DEFAULT_CAP)
    _no_session(ctx, done)
    if done.cut is not None:
        raise done.cut
    return 0


def _run(args: argparse.Namespace, ctx: Context) -> int:
    return _otlp(args, ctx) if args.mode == "otlp" else _trail(args, ctx)


def _outputs(args: argparse.Namespace) -> list[str | None]:
    return [args.output] if args.mode == "otlp" else []


TOOL = Tool(
    prog="acp-export",
    summary="Export ACP sessions as OpenTelemetry GenAI traces (OTLP) or Agent Trail files.",
    description=DESCRIPTION,
    example=EXAMPLE,
    run=_run,
    configure=configure,
    takes_files=False,
    takes_output=False,
    takes_color=False,
    inputs=lambda args: list(args.files or []),
    outputs=_outputs,
    exits="0 ok, 2 usage or unusable input (an input cut short: what was read is "
          "exported), or a collector that did not take the spans, 130 interrupted",
)


def main() -> None:
    run(TOOL)


if __name__ == "__main__":
    main()

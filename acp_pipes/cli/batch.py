"""`acp-batch`: convert, validate, view or align a corpus of recordings, resumably, on
local worker processes or a Dask cluster."""

from __future__ import annotations

import argparse
import sys

from acp_pipes.cli.manual import page
from acp_pipes.cli.runner import EXIT_INTERRUPTED, Context, Tool, UsageError, run

DESCRIPTION = """\
Runs one tool over every recording SRC names, each input on its own, and writes what
that tool would write for it under DEST:

  asr       acp-asr -o DEST/STEM/ SRC               DEST/STEM/<sessionId>.asr.jsonl
  validate  acp-frame --validate SRC                DEST/STEM.validate.jsonl
  view      acp-view SRC -o ...                     DEST/STEM.html
  align     acp-align --format diff BASELINE SRC    DEST/STEM.diff, and DEST/align.tsv:
            where each run first diverged from the baseline, and by how much
  export    acp-export otlp SRC                     DEST/STEM.otlp.json; with --endpoint
            the spans go to the collector (the manifest says what was sent);
            --format agent-trail: DEST/STEM/<sessionId>.trail.jsonl

STEM is the input's path under the SRC it was found in, less .jsonl/.jsonl.gz. SRC is a
file, a directory (its *.jsonl and *.jsonl.gz, recursively), a glob, or a URL (s3://,
gs://, file://, memory://, any fsspec file system: acp-pipes' extra 'cluster'); DEST a
directory or a URL. The outputs are the same bytes the tool writes.

DEST/manifest.jsonl gets a line per input as it is done: its content hash (blake3), the
version and options, its outputs, status, error and duration. A rerun skips every input
done before from the same bytes by the same version with the same options, so a batch
stopped half-way (Ctrl-C, a kill, a lost worker) carries on where it stopped. An output
is never seen half-written (written aside, then renamed). An input that cannot be read
is reported, its error kept in the manifest, and the others go on. Output names stay
apart where case is ignored (macOS, Windows): Run.jsonl beside run.jsonl is written as
Run~<hash>. One batch at a time on a DEST: a second is refused (exit 2).

The jobs run in -j local worker processes (default: one per core), or with --scheduler
on a Dask cluster (acp-pipes' extra 'cluster'), whose workers need acp-pipes
installed and SRC and DEST within their reach. A progress bar on a terminal.

""" + f"Manual: {page('acp-batch.md')}"

EXAMPLE = """\
acp-batch asr logs/ -o streams/
acp-batch validate 'runs/*.jsonl' -o reports/ -j 2
acp-batch align runs/ --baseline run1.jsonl -o aligned/ && cat aligned/align.tsv
acp-batch asr logs/ -o streams/   # again: every input skipped, as done before
acp-batch export logs/ -o traces/ && ls traces/
"""

MODE_HELP = {
    "asr": "convert each recording to ASR streams (acp-asr)",
    "validate": "check each recording against the ACP spec (acp-frame --validate)",
    "view": "write each recording as an HTML page (acp-view)",
    "align": "align each run against --baseline (acp-align)",
    "export": "export each recording as OpenTelemetry traces or Agent Trail (acp-export)",
}


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("sources", nargs="+", metavar="SRC",
                   help="recordings: files, directories, globs or fsspec URLs")
    p.add_argument("-o", "--output", required=True, metavar="DEST",
                   help="the directory (or URL) outputs and the manifest go to")
    engine = p.add_mutually_exclusive_group()
    engine.add_argument("-j", "--jobs", type=int, metavar="N",
                        help="local worker processes (default: the cores)")
    engine.add_argument("--scheduler", metavar="ADDRESS",
                        help="run on the Dask cluster whose scheduler is at ADDRESS "
                        "(tcp://host:8786)")


def _direction(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", choices=("c2a", "a2c"), dest="direction",
                   help="direction of bare ACP JSONL inputs (streams with a header ignore it)")


def configure(p: argparse.ArgumentParser) -> None:
    from acp_pipes.frame.validate.schema import REVISIONS
    from acp_pipes.schemas import ACP_REVISIONS

    modes = p.add_subparsers(dest="mode", metavar="MODE", required=True)

    def mode(name: str) -> argparse.ArgumentParser:
        sub = modes.add_parser(name, help=MODE_HELP[name], description=MODE_HELP[name],
                               formatter_class=p.formatter_class)
        _common(sub)
        return sub

    asr = mode("asr")
    asr.add_argument("--agent-name", metavar="NAME", help="as acp-asr --agent-name")
    asr.add_argument("--secret-field", action="append", default=[], metavar="NAME",
                     help="as acp-asr --secret-field")
    asr.add_argument("--keep-field", action="append", default=[], metavar="NAME",
                     help="as acp-asr --keep-field")
    asr.add_argument("--snapshots", action="store_true", help="as acp-asr --snapshots")

    val = mode("validate")
    _direction(val)
    val.add_argument("--protocol", type=int, choices=sorted(REVISIONS),
                     help="as acp-frame --validate --protocol")
    val.add_argument("--stable", action="store_true", help="as acp-frame --validate --stable")
    val.add_argument("--schema", metavar="REVISION", choices=ACP_REVISIONS, dest="revision",
                     help="as acp-frame --validate --schema (" + ", ".join(ACP_REVISIONS) + ")")

    view = mode("view")
    _direction(view)
    view.add_argument("--no-validate", dest="validate", action="store_false",
                      help="as acp-view --no-validate")

    align = mode("align")
    align.add_argument("--baseline", required=True, metavar="FILE",
                       help="the run every input is aligned against (a path or URL)")
    align.add_argument("--format", choices=("diff", "ops", "json", "html"), default="diff",
                       help="each run's output: as acp-align --format (default: diff)")
    align.add_argument("-U", "--context", type=int, default=3, metavar="N",
                       help="diff, html: N steps of context (default 3)")
    align.add_argument("--ignore", action="append", default=[], metavar="POINTER",
                       help="as acp-align --ignore; repeatable")
    _direction(align)

    from acp_pipes.cli.export import endpoint_url
    from acp_pipes.cli.runner import byte_count

    exp = mode("export")
    exp.add_argument("--format", choices=("otlp", "agent-trail"), default="otlp",
                     help="otlp (default): as acp-export otlp; agent-trail: as acp-export "
                     "agent-trail")
    exp.add_argument("--endpoint", type=endpoint_url, metavar="URL",
                     help="otlp: send every input's spans to the collector at URL, as "
                     "acp-export otlp --endpoint (no file is written)")
    exp.add_argument("--id-namespace", metavar="TEXT", help="as acp-export --id-namespace")
    exp.add_argument("--resource", action="append", default=[], metavar="NAME=VALUE",
                     help="as acp-export --resource; repeatable")
    exp.add_argument("--max-attribute-bytes", type=byte_count, metavar="N",
                     help="as acp-export --max-attribute-bytes")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    from acp_pipes.batch import Batch, DaskWorkers, LocalWorkers, default_jobs

    if getattr(args, "context", 0) < 0:
        raise UsageError("-U must be at least 0")
    if args.mode == "align" and args.ignore:
        from acp_pipes.sameness.normalize import Normalizer

        Normalizer.from_option(args.ignore)  # refused before any job starts
    if args.mode == "export":
        if args.format == "agent-trail" and (args.endpoint or args.resource):
            raise UsageError("--endpoint and --resource are for --format otlp")
        if any("=" not in r or not r.split("=", 1)[0].strip() for r in args.resource):
            raise UsageError("--resource wants NAME=VALUE")
        if args.format == "otlp":
            from acp_pipes.export.otlp import require_sdk

            require_sdk()  # before any worker starts
    batch = Batch(args.mode, args.sources, args.output, vars(args))
    if args.scheduler:
        workers: DaskWorkers | LocalWorkers = DaskWorkers(args.scheduler)
    else:
        workers = LocalWorkers(args.jobs if args.jobs is not None else default_jobs(),
                               note=ctx.note)
    if ctx.term.err_tty:
        ctx.note(f"{len(batch.inputs)} recordings, {workers.describe()}")
    bar = _progress(ctx, len(batch.inputs))

    def on_entry(entry: dict) -> None:
        if bar is not None:
            bar.update(1)
        say = bar.write if bar is not None else None
        for w in entry.get("warned", ()) if not entry.get("skipped") else ():
            _say(ctx, w, say)
        more = entry.get("warnings", 0) - len(entry.get("warned", ()))
        if more > 0 and not entry.get("skipped"):
            _say(ctx, f"{entry['input']}: {more} more lines skipped", say)
        if entry["status"] == "failed":
            error = entry["error"] or "failed"
            named = error.startswith(entry["input"] + ":")
            _say(ctx, error if named else f"{entry['input']}: {error}", say)

    try:
        tally = batch.run(workers, on_entry)
    finally:
        if bar is not None:
            bar.close()
    _summary(ctx, batch, tally)
    if tally.interrupted:
        return EXIT_INTERRUPTED
    if tally.counts.get("failed") or (args.mode == "validate" and tally.counts.get("invalid")):
        return 1
    return 0


def _progress(ctx: Context, total: int):
    """tqdm's bar (done/total, rate, ETA) on stderr at a terminal; none in a pipe."""
    if not ctx.term.err_tty:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="file", file=sys.stderr, dynamic_ncols=True,
                desc=ctx.prog, smoothing=0.1)


def _say(ctx: Context, line: str, write=None) -> None:
    from acp_pipes.io.terminal import printable

    text = f"{ctx.prog}: {printable(line)}"
    if write is not None:
        write(text, file=sys.stderr)
    else:
        from acp_pipes.errors import say

        say(text)


def _summary(ctx: Context, batch, tally) -> None:
    """One line: done, skipped and failed add up to the inputs finished; violations and
    differences are counted among them (done now or before)."""
    c = tally.counts
    failed = c.get("failed", 0)
    done = tally.finished - tally.skipped - failed
    parts = [f"{done} done", f"{tally.skipped} skipped (done before)"]
    if failed:
        parts.append(f"{failed} failed")
    among = [f"{c[status]} {what}" for status, what in
             (("invalid", "with violations"), ("differs", "differ from the baseline"))
             if c.get(status)]
    rate = (tally.finished - tally.skipped) / tally.elapsed if tally.elapsed > 0 else 0.0
    line = (f"{tally.finished} of {tally.total} recordings: " + ", ".join(parts)
            + "".join(f"; {a}" for a in among)
            + f"; {tally.elapsed:.1f} s, {rate:.1f} files/s")
    ctx.note(line)
    if tally.interrupted:
        ctx.note(f"interrupted: run the same command again to go on from here "
                 f"({tally.total - tally.finished} to do)")
    if batch.mode == "align" and not tally.interrupted:
        ctx.note(f"table: {batch.table_path}")
    ctx.note(f"manifest: {batch.manifest_path}")


TOOL = Tool(
    prog="acp-batch",
    summary="Convert, validate, view, align or export a corpus of ACP recordings, "
            "resumably, on local workers or a Dask cluster.",
    description=DESCRIPTION,
    example=EXAMPLE,
    run=_run,
    configure=configure,
    takes_files=False,
    takes_output=False,
    exits="0 every input done, 1 an input failed (validate: or has violations), "
          "2 usage error, 130 interrupted (a rerun goes on from there)",
)


def main() -> None:
    run(TOOL)


if __name__ == "__main__":
    main()

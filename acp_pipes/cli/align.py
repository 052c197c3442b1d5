"""`acp-align`: where two runs parted ways, exact at any size, as ops, diff or graph."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal

import orjson

from acp_pipes.cli.manual import page
from acp_pipes.cli.runner import EXIT_DIFFERENT, EXIT_OK, Context, Tool, UsageError, run
from acp_pipes.io.lines import STDIN
from acp_pipes.protocol.jsontext import dumps

DESCRIPTION = """\
Aligns two recordings step by step with an exact longest common subsequence (Myers'
O((N+M)D) algorithm, linear memory) and shows where they parted ways. Inputs: traces
(wire logs from acp-tee, frames streams from acp-frame, bare ACP JSONL with --dir) or ASR
streams. A trace step is (direction, canonical hash of the message); an ASR step is
(record type, canonical hash of the record without its bookkeeping fields: seq, id, ts,
tsSource, observedAt, native, supersedes, parent, copiedFrom).

By default two traces are compared by the model of the same session (its manual is
named below): the identifiers an agent mints (sessionId, toolCallId, terminalId, messageId,
elicitationId, the JSON-RPC ids of the agent's requests) are a consistent renaming
(--format json lists it under "renamed"); the protocol's clocks are no difference; the
vendor presets whose agent either run's initialize answer names apply (JSON pointers left
out, scrubbers masking ids, clocks and pids inside text; --preset FILE adds presets,
--no-preset leaves the package's out); floating notifications (available_commands_update,
usage_update, session_info_update, ...) are matched within a window of client steps,
and one a run lacks is a note, as is a frame a preset says the agent sends only
sometimes; with --noise TRACE (other recordings of A's script) what differs between them
and A is learned where it was found, said on stderr, and tolerated. Notes are no
difference (exit 0): the JSON lists them, stderr counts them. Each difference has the
model's kind (content, request, result, client, missing, extra, order, renaming). The
steps are printed in an order that keeps both runs' happens-before (an answer after the
request it answers). --strict compares the bytes as sent, in the order logged.

Order the protocol does not fix is no difference: each direction of each session is
aligned on its own (where session/close lands among the agent's updates is scheduling),
while a response still has to come after its request. Steps of the same kind that say
something else (a prompt and a prompt) are one changed step, shown with the JSON
pointers that differ and both values.

--format ops (default in a pipe): JSONL, one op per step:
  {"op":"equal"|"changed"|"only-a"|"only-b"|"note","a":INDEX|null,"b":INDEX|null,
   "dir"|"type", "kind", "method", "hash"}; changed also "hash_b" and
   "diff": [{"op","path","a","b"}]; by default a difference also "difference" (its
   kind), a note "note" (floating_missing, optional_extra, ...)
--format diff (default at a terminal, in colour unless NO_COLOR is set): a unified diff
  (-U N context), one line per step: direction arrow and a short summary (method,
  prompt text, update kind); "!" marks a changed step, followed by its pointers. json:
  counts, LCS length, edit distance, the first divergence and every changed step; for
  traces, per method the request latency of each run and the change (latency_ms).
  dot / svg: a divergence graph (svg needs Graphviz's dot program, and a file or pipe:
  it is not written to a terminal); at most 40 places where the runs differ are drawn.
  html: the two runs side by side in one self-contained page (-U N as for diff; see
  the acp-view manual).

Three or more inputs draw one divergence tree (a prefix tree, shared runs of steps
merged; formats dot, svg, json). --lineage STREAM... draws the sessions of ASR streams:
forks, subagents, resumes (formats dot, svg, json).

--max-cost D bounds the edit distance searched per subproblem: past it the split is a
heuristic, the result may not be minimal, and it is marked "approximate" (ops, json,
diff, graph title) with a note on stderr. Without it the alignment is always exact.

Exit status: 0 the runs are equal, 1 they differ, 2 usage or unusable input.

""" + f"Manual: {page('acp-align.md')}\nThe model of the same session: {page('sameness.md')}"

EXAMPLE = """\
acp-align run1.jsonl run2.jsonl
acp-align run1.jsonl run2.jsonl --format json
acp-align run1.jsonl run2.jsonl --noise run3.jsonl   # what varies between runs of one script
acp-align run1.jsonl run2.jsonl --strict --ignore /params/sessionId --format json
acp-align run.jsonl --session sess-1 --session sess-2 --format diff
acp-align runs/*.jsonl --format svg -o tree.svg
acp-align --lineage parent.asr.jsonl child.asr.jsonl --format svg -o lineage.svg
"""

FORMATS = ("ops", "diff", "json", "dot", "svg", "html")


def json_line(rec: dict) -> bytes:
    """One JSONL line; the strings of a recording may hold lone surrogates (valid JSON
    escapes orjson refuses to write): they stay escapes."""
    try:
        return orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return dumps(rec) + b"\n"


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=FORMATS, dest="fmt",
                   help="output: ops (JSONL; the default for two inputs in a pipe), diff "
                   "(the default at a terminal), json, dot, svg, html (json for three or "
                   "more inputs, dot for --lineage)")
    p.add_argument("-U", "--context", type=int, default=3, metavar="N",
                   help="--format diff, html: N steps of context around each change (default 3)")
    p.add_argument("--ignore", action="append", default=[], metavar="POINTER",
                   help="JSON pointer (RFC 6901, '*' matches any key or index) of a volatile "
                   "field to leave out before hashing; repeatable (same meaning as in "
                   "acp-replay)")
    p.add_argument("--strict", action="store_true",
                   help="compare traces byte for byte: identifiers the agent mints, "
                   "clock fields and vendor values count, steps stay in the order they "
                   "were logged, floating notifications are steps like any other")
    p.add_argument("--preset", action="append", default=[], metavar="FILE",
                   help="a preset file (the format of acp_pipes/sameness/presets.json) "
                   "whose presets apply with the package's: more volatile values and "
                   "scrubbers, floating kinds, frames an agent sends only sometimes; "
                   "repeatable")
    p.add_argument("--no-preset", action="store_true",
                   help="leave the package's vendor presets out (--preset files still "
                   "apply)")
    p.add_argument("--noise", action="append", default=[], metavar="TRACE",
                   help="another recording of A's script: what differs between it and A "
                   "is noise, tolerated where it was found (said on stderr and in the "
                   "JSON summary); repeatable")
    p.add_argument("--session", action="append", default=[], metavar="ID",
                   help="align only session ID of an input; give it once per input "
                   "(once: for every input). One file with two --session aligns two "
                   "sessions of one recording")
    p.add_argument("--max-cost", type=int, metavar="D",
                   help="bound the edit distance searched; past it the result is "
                   "approximate (marked so). Default: unbounded, always exact")
    p.add_argument("--dir", choices=("c2a", "a2c"), dest="direction",
                   help="direction of bare ACP JSONL inputs (streams with a header ignore it)")
    p.add_argument("--lineage", action="store_true",
                   help="draw the session lineage of ASR streams (forks, subagents, resumes)")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    files = list(ctx.files)
    if files.count(STDIN) > 1:
        raise UsageError("stdin ('-') can be only one of the inputs")
    if args.context < 0:
        raise UsageError("-U must be at least 0")
    if args.max_cost is not None and args.max_cost < 1:
        raise UsageError("--max-cost must be at least 1")
    spooled = None
    if STDIN in files:
        from acp_pipes.align.steps import spool_stdin

        spooled = spool_stdin()
    try:
        paths = [spooled if f == STDIN else f for f in files]
        names = ["stdin" if f == STDIN else f for f in files]
        if args.lineage:
            return _lineage(args, ctx, paths, names)
        return _align(args, ctx, paths, names)
    finally:
        if spooled:
            os.unlink(spooled)


def _lineage(args, ctx: Context, paths, names) -> int:
    from acp_pipes.align.lineage import lineage_graph
    from acp_pipes.align.steps import read_lineage

    fmt = args.fmt or "dot"
    if fmt not in ("dot", "svg", "json"):
        raise UsageError(f"--lineage writes dot, svg or json, not {fmt}")

    streams = []
    for path, name in zip(paths, names, strict=True):
        streams.extend(read_lineage(path, name, ctx.warn))
    g = lineage_graph(streams)
    if fmt == "json":
        rec = {
            "sessions": [{"session": n, "label": d.get("label", "")}
                         for n, d in g.nodes(data=True)],
            "edges": [{"from": u, "to": v, "kind": d.get("kind")}
                      for u, v, d in g.edges(data=True)],
        }
        ctx.out.write(json_line(rec))
        return EXIT_OK
    from acp_pipes.align.lineage import bounded_lineage

    _write_graph(ctx, bounded_lineage(g), fmt)
    return EXIT_OK


def _model(args, ctx: Context):
    """The default comparison's rules (None under --strict): the package's presets
    (unless --no-preset) and each --preset FILE's, and --ignore."""
    if args.strict:
        if args.preset or args.no_preset or args.noise:
            raise UsageError("--preset, --no-preset and --noise are the default "
                             "comparison's: --strict compares the bytes as sent")
        return None
    from acp_pipes.align.volatile import Volatile
    from acp_pipes.sameness.volatile import presets_of

    return Volatile(presets_of(args.preset, args.no_preset), args.ignore)


def _align(args, ctx: Context, paths, names) -> int:
    from acp_pipes.align.steps import StepTable, load_steps
    from acp_pipes.sameness.normalize import Normalizer

    sessions = list(args.session)
    if len(paths) == 1 and len(sessions) == 2:
        paths, names = paths * 2, names * 2
    if len(paths) < 2:
        raise UsageError("needs two inputs to align (or one input with two --session)")
    if sessions and len(sessions) not in (1, len(paths)):
        raise UsageError(f"--session: give it once, or once per input ({len(paths)})")
    if len(sessions) == 1:
        sessions = sessions * len(paths)
    normalizer = Normalizer.from_option(args.ignore)
    model = _model(args, ctx)
    if args.noise and len(paths) != 2:
        raise UsageError("--noise takes other recordings of A's script to align A with B: "
                         "two inputs")

    # What is read lives to the end and holds no cycle: the collector need not walk it
    # while it grows nor after (its collections were a tenth of the time at 200,000
    # steps, measured: BENCHMARKS.md)
    import gc

    gc.disable()
    table = StepTable()
    try:
        runs = [
            load_steps(path, table, normalizer=normalizer,
                       session=sessions[i] if sessions else None, warn=ctx.warn,
                       source=names[i], direction=args.direction, keep_cut=True,
                       strict=args.strict, model=model)
            for i, path in enumerate(paths)
        ]
    finally:
        gc.freeze()
        gc.enable()
    kinds = {r.kind for r in runs}
    if len(kinds) > 1:
        what = "; ".join(f"{r.source} is {r.what}" for r in runs)
        raise UsageError(f"cannot align a trace with an ASR stream ({what}): give inputs "
                         "of one kind")
    if len(runs) > 2:
        status = _nway(args, ctx, runs, table)
    else:
        status = _pair(args, ctx, runs[0], runs[1], table)
    cuts = [r.cut for r in runs if r.cut is not None]
    if cuts:  # a file unreadable past a point: aligned as read, then reported (exit 2)
        ctx.out.flush()
        for e in cuts[1:]:
            ctx.warn(e.source, e.line, e.message)
        raise cuts[0]
    return status


def _pair(args, ctx: Context, a, b, table) -> int:
    from acp_pipes.align import render
    from acp_pipes.align.compare import compare

    fmt = args.fmt or ("diff" if ctx.term.tty else "ops")
    if fmt == "svg":
        _no_svg_on_terminal(ctx)
    learned = _learned(args, ctx, a, b) if args.noise else None
    cmp = compare(a, b, table, args.max_cost, learned)
    if cmp.approximate:
        ctx.note(f"approximate: the edit distance passed --max-cost {args.max_cost}; the "
                 "alignment is valid but may not be minimal")
    out = ctx.out
    if fmt == "ops":
        write = out.write
        for rec in render.ops(cmp):
            write(json_line(rec))
    elif fmt == "diff":
        if cmp.distance:
            for line in render.diff_lines(cmp, args.context, term=ctx.term):
                out.write(line.encode("utf-8") + b"\n")
    elif fmt == "json":
        out.write(json_line(render.summary(cmp)))
    elif fmt == "html":
        from acp_pipes.view.sidebyside import align_page

        changes = cmp.changes()
        out.write(align_page(render.ops(cmp, changes), a, b, render.summary(cmp, changes),
                             args.context))
    else:
        from acp_pipes.align.graph import pair_graph

        _write_graph(ctx, pair_graph(cmp), fmt)
    if cmp.notes:  # (said once the output is written: a closed pipe ends the run quietly)
        kinds: dict[str, int] = {}
        for kind in cmp.notes.values():
            kinds[kind] = kinds.get(kind, 0) + 1
        ctx.note(f"{len(cmp.notes)} step{'s' * (len(cmp.notes) != 1)} one run lacks, "
                 "tolerated by the model of the same session (not differences): "
                 + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
                 + ("; --format json lists them" if fmt != "json" else ""))
    return EXIT_OK if cmp.equal else EXIT_DIFFERENT


def _learned(args, ctx: Context, a, b):
    """The noise between A and each --noise recording (by the model, under the rules
    both runs are compared by), said on stderr before the comparison."""
    from acp_pipes.align.model import learn
    from acp_pipes.replay.trace import open_trace

    if a.kind != "trace" or a.model is None:
        raise UsageError("--noise learns from traces (wire logs, frames streams), not "
                         "ASR streams")
    a.model.decide([a.agent, b.agent])
    def frames(path: str) -> list:
        return list(open_trace(path, warn=ctx.warn))

    learned = learn(frames(a.path), [(n, frames(n)) for n in args.noise], a.model)
    s = learned.summary()
    ctx.note(s["message"])
    for v in s.get("values") or []:
        shown = f"as {v.get('template')!r}" if v.get("as") == "text" else "ignored"
        ctx.note(f"  seq {v.get('seq')} ({v.get('label')}) {v.get('path')} {shown} "
                 f"(from {v.get('from')})")
    for index, why in s.get("optional") or []:
        ctx.note(f"  frame {index} of {a.source}: sent only sometimes ({why})")
    for extra in s.get("extras") or []:
        ctx.note(f"  {extra.get('label')}: allowed extra ({extra.get('from')} has it)")
    return learned


def _no_svg_on_terminal(ctx: Context) -> None:
    if ctx.term.tty:
        raise UsageError("--format svg writes an SVG document, not for a terminal: give "
                         "-o FILE.svg or redirect the output (> FILE.svg)")


def _nway(args, ctx: Context, runs, table) -> int:
    from acp_pipes.align.graph import build_tree, tree_graph, tree_json

    fmt = args.fmt or "json"
    if fmt not in ("dot", "svg", "json"):
        raise UsageError(f"three or more inputs draw a tree: --format dot, svg or json, not {fmt}")
    seqs = None
    if runs[0].model is not None:  # the steps as the model sees them, in the order logged
        from acp_pipes.align.model import viewed_seqs

        seqs = viewed_seqs(runs, table)
    tree = build_tree(runs, seqs)
    if fmt == "json":
        rec = tree_json(runs, table, tree)
        ctx.out.write(json_line(rec))
        return EXIT_OK if rec["equal"] else EXIT_DIFFERENT
    _write_graph(ctx, tree_graph(runs, table, tree), fmt)
    from acp_pipes.align.graph import first_branch

    return EXIT_OK if first_branch(tree) is None else EXIT_DIFFERENT


def _write_graph(ctx: Context, g, fmt: str) -> None:
    from acp_pipes.align.dot import to_dot, to_svg

    src = to_dot(g)
    if fmt == "dot":
        ctx.out.write(src.encode("utf-8"))
        return
    _no_svg_on_terminal(ctx)
    with _signals_raise():
        svg = to_svg(src)  # DotMissing: an AcpPipesError, said by the runner (exit 2)
    ctx.out.write(svg)


class _Ended(BaseException):
    """A SIGTERM or SIGHUP arrived: unwind (so `dot` is killed), then exit 128+N."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _signals_raise():
    """While a child runs, SIGTERM and SIGHUP unwind this process like Ctrl-C does, so
    the child is killed and reaped on the way out; then the process ends by the same
    signal, as if it had not been caught."""
    def raise_(signum, _frame):
        raise _Ended(signum)

    old = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) == signal.SIG_DFL:
            old[sig] = signal.signal(sig, raise_)
    try:
        yield
    except _Ended as e:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        old.clear()
        os.kill(os.getpid(), e.signum)  # the default action: end, as killed
        raise SystemExit(128 + e.signum) from None
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


TOOL = Tool(
    prog="acp-align",
    summary="Align two or more recordings and show where they parted ways.",
    description=DESCRIPTION,
    example=EXAMPLE,
    run=_run,
    configure=configure,
    exits="0 the runs are equal, 1 they differ, 2 usage or unusable input, 130 interrupted",
)


def main() -> None:
    run(TOOL)


if __name__ == "__main__":
    main()

"""acp-export otlp over the 114k-update session, against acp-asr on the same log.

The recording is bench_asr's: one echo-agent session with prompts, permission requests,
elicitations, streamed chunks and tool calls, deterministic and cached. Both run through
the real CLI, side by side, alternating: ``acp-asr WIRE`` (stdout to a file) and
``acp-export otlp WIRE -o spans.json``, which converts the wire log exactly as acp-asr
does and then maps the stream to spans and writes OTLP/JSON through the SDK's encoder;
so the ratio is what the export adds to the conversion. ``acp-export otlp STREAM`` from
the ASR stream acp-asr wrote (its natural input: no conversion) is measured beside them.
Peak RSS of the export at two sizes, to show it flat: spans are held a turn at a time.
"""

from __future__ import annotations

from functools import partial

from bench.bench_asr import wire_log_in_child
from bench.common import (
    max_rss,
    median_cpu,
    median_wall,
    run_cmd,
    side_by_side,
    table,
    tool,
    workdir,
)

SIZES = (114_000, 341_000)
REPEAT = 3


def main(quick: bool) -> str:
    sizes = (2_000, 6_000) if quick else SIZES
    repeat = 1 if quick else REPEAT
    work = workdir("export")
    rows = []
    ratios = []
    for updates in sizes:
        wire, n, lines = wire_log_in_child(updates)
        stream = work / f"s-{updates}.asr.jsonl"
        spans = work / f"spans-{updates}.json"
        subjects = {
            "acp-asr WIRE": partial(run_cmd, tool("asr", str(wire)), stdout=stream),
            "acp-export otlp WIRE": partial(run_cmd, tool("export", "otlp", str(wire), "-o",
                                                          str(spans))),
            "acp-export otlp STREAM": partial(run_cmd, tool("export", "otlp", str(stream),
                                                            "-o", str(spans))),
        }
        subjects["acp-asr WIRE"]()  # the stream the third reads, before the timed runs
        runs = side_by_side(subjects, repeat)
        base_w, base_c = median_wall(runs["acp-asr WIRE"]), median_cpu(runs["acp-asr WIRE"])
        for name, rs in runs.items():
            rows.append([f"{n:,}", name, f"{median_wall(rs):.2f}", f"{median_cpu(rs):.2f}",
                         f"{median_wall(rs) / base_w:.2f}x", f"{median_cpu(rs) / base_c:.2f}x",
                         f"{max_rss(rs):.1f}"])
        ratios.append((n, median_wall(runs["acp-export otlp WIRE"]) / base_w,
                       median_cpu(runs["acp-export otlp WIRE"]) / base_c,
                       max_rss(runs["acp-export otlp WIRE"]), spans.stat().st_size))
    out = ["## acp-export: OTLP/JSON of the big session: `python -m bench export`\n",
           f"Medians of {repeat} interleaved runs; ratios to acp-asr on the same log, "
           "same run.\n",
           table(["updates", "command", "wall s", "CPU s", "wall / acp-asr",
                  "CPU / acp-asr", "peak RSS MB"], rows), ""]
    for n, rw, rc, rss, size in ratios:
        out.append(f"- {n:,} updates: export {rw:.2f}x acp-asr's wall, {rc:.2f}x its CPU; "
                   f"peak RSS {rss:.1f} MB; OTLP/JSON {size / 1e6:.1f} MB")
    return "\n".join(out)

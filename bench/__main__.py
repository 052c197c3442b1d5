"""Run every benchmark (``make bench``) and print a Markdown report.

Each ``bench/bench_*.py`` module has ``main(quick: bool) -> str`` returning its section.
``python -m bench [NAME ...] [--quick]`` runs some of them; ``--quick`` uses small sizes
(to check the benchmarks themselves still run), never for published figures.
"""

from __future__ import annotations

import importlib
import platform
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    names = [a for a in argv if not a.startswith("-")]
    here = Path(__file__).parent
    found = sorted(p.stem[len("bench_"):] for p in here.glob("bench_*.py"))
    for name in names or found:
        if name not in found:
            print(f"bench: no benchmark {name!r}; have: {', '.join(found)}", file=sys.stderr)
            return 2
    print(f"# acp-pipes benchmarks\n\n`python -m bench {' '.join(argv)}`".rstrip("` ") + "`")
    print(f"\n{platform.python_implementation()} {platform.python_version()}, "
          f"{platform.machine()}, {time.strftime('%Y-%m-%d')}\n")
    for name in names or found:
        mod = importlib.import_module(f"bench.bench_{name}")
        print(mod.main(quick), flush=True)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

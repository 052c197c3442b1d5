"""Run a command and report its wall time, peak RSS and CPU time: ``python -m
bench._measure REPORT -- ARGV...`` (stdin and stdout are the command's own).

Why a separate process: on Linux a child's ``ru_maxrss`` is never below its parent's
RSS at fork time, so a benchmark that built a large input in memory would report that
size for every command it starts. This small, freshly started process forks the command
instead, so the figure is the command's own.
"""

import os
import subprocess
import sys
import time

report, argv = sys.argv[1], sys.argv[3:]
t0 = time.perf_counter()
p = subprocess.Popen(argv)
_, status, usage = os.wait4(p.pid, 0)
wall = time.perf_counter() - t0
with open(report, "w") as f:
    f.write(f"{wall} {usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}\n")
sys.exit(os.waitstatus_to_exitcode(status))

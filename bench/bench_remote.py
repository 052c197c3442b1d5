"""acp-tee's WebSocket proxy: the latency it adds to each message.

Workload: N sequential JSON-RPC requests (quick: 50; else 1000) from one WebSocket
client (aiohttp), each sent once the answer to the previous one came, against the echo
agent served by acpremote (a real WebSocket server), directly and through
``acp-tee --listen ws:// --connect ws://`` logging to a file, in the same run, the two
connections interleaved request by request so a busy host slows both alike. The
figure is the round trip per request, p50 and p99, and the difference, which is what
the proxy adds (two WebSocket hops, and the log written before each frame goes on).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(port: int) -> None:
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def _drive(urls: list[str], n: int) -> list[list[float]]:
    """Round trips per request on one connection to each of ``urls``, interleaved."""
    import aiohttp

    times: dict[str, list[float]] = {url: [] for url in urls}
    init = ('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,'
            '"info":{"name":"bench","version":"1"},"capabilities":{}}}')
    async with aiohttp.ClientSession() as http:
        sockets = {url: await http.ws_connect(url, max_msg_size=0) for url in times}
        for ws in sockets.values():
            await ws.send_str(init)
            await ws.receive()
        order = list(sockets.items())
        for i in range(1, n + 1):
            # interleaved (a busy host slows all alike), each connection first in turn
            for url, ws in order[i % len(order):] + order[:i % len(order)]:
                frame = f'{{"jsonrpc":"2.0","id":{i},"method":"session/list","params":{{}}}}'
                start = time.perf_counter()
                await ws.send_str(frame)
                await ws.receive()
                times[url].append(time.perf_counter() - start)
        for ws in sockets.values():
            await ws.close()
    return [times[url] for url in urls]


def start_tee(args: list[str], tree: Path = REPO) -> tuple[subprocess.Popen, str]:
    """``acp-tee ARGS`` (a listener) from ``tree``'s code: the process and where it
    listens. It runs in ``tree`` (``python -m`` puts the working directory first on
    the path, before PYTHONPATH)."""
    e = env()
    e["PYTHONPATH"] = str(tree) + os.pathsep + e.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "acp_pipes.cli.tee", *args], env=e,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tree)
    line = proc.stderr.readline().decode()  # type: ignore[union-attr]  # (a pipe)
    return proc, line.split("listening on ", 1)[1].strip()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used (``/proc/PID/stat``): steadier than
    a round trip on a busy host, where other work's scheduling is in every wall time."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def against() -> Path | None:
    """The other checkout ``ACP_BENCH_AGAINST`` names, if any."""
    tree = os.environ.get("ACP_BENCH_AGAINST")
    return Path(tree).resolve() if tree else None


def main(quick: bool) -> str:
    n = 50 if quick else 1000
    remote = shutil.which("acpremote") or str(Path(sys.executable).parent / "acpremote")
    port = _free_port()
    agent = [sys.executable, "-m", "acp_pipes.cli.echo_agent"]
    e = env()
    served = subprocess.Popen([remote, "expose", "--host", "127.0.0.1", "--port", str(port),
                               "--", *agent], env=e, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, cwd=REPO)
    proxies: list[subprocess.Popen] = []
    other = against()
    try:
        _wait(port)
        direct = f"ws://127.0.0.1:{port}/acp/ws"
        log = Path(tempfile.mkdtemp()) / "bench-remote.jsonl"
        urls = [direct]
        for tree in [REPO] + ([other] if other else []):
            proc, url = start_tee(["-o", str(log.with_suffix(f".{len(urls)}.jsonl")),
                                   "--listen", "ws://127.0.0.1:0/acp", "--connect", direct],
                                  tree)
            proxies.append(proc)
            urls.append(url)
        before = [cpu_seconds(proc.pid) for proc in proxies]
        times = asyncio.run(_drive(urls, n))
        cpu = [(cpu_seconds(proc.pid) - b) / n for proc, b in zip(proxies, before, strict=True)]
    finally:
        for proc in (*proxies, served):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
    d, p = times[0], times[1]
    rows = [("direct (acpremote)", d), ("through acp-tee --listen --connect", p)]
    if other:
        rows.append((f"through {other.name}'s acp-tee (ACP_BENCH_AGAINST)", times[2]))
    out = [f"## acp-tee over WebSocket: added latency per message ({n} requests)\n",
           "| path | p50 µs | p99 µs |", "|---|---:|---:|"]
    for name, xs in rows:
        out.append(f"| {name} | {_pct(xs, 50) * 1e6:.0f} | {_pct(xs, 99) * 1e6:.0f} |")
    for name, xs in rows[1:]:
        out.append(f"| added by {name.removeprefix('through ')} | "
                   f"{(_pct(xs, 50) - _pct(d, 50)) * 1e6:.0f} | "
                   f"{(_pct(xs, 99) - _pct(d, 99)) * 1e6:.0f} |")
    out.append(f"\nCPU of this acp-tee per request (both messages): {cpu[0] * 1e6:.0f} µs.")
    if other:
        out.append(f"CPU of {other.name}'s acp-tee per request: {cpu[1] * 1e6:.0f} µs.")
        out.append(f"This acp-tee against {other.name}'s, request by request (the two "
                   f"requests of a round paired): median difference "
                   f"{paired(p, times[2]) * 1e6:+.0f} µs.")
    return "\n".join(out)


def paired(xs: list[float], ys: list[float]) -> float:
    """The median of ``x - y`` over requests made in the same round: what a host's
    drift during the run does to both cancels out."""
    import statistics

    return statistics.median(x - y for x, y in zip(xs, ys, strict=True))

"""acp-tee's Streamable HTTP listener over HTTP/1.1 and HTTP/2: the round trip per request.

Workload: N sequential requests (quick: 50; else 1000) on each of two ACP connections
to one ``acp-tee --listen http:// -- echo-agent`` (logging to a file): one over HTTP/1.1
(aiohttp's client), one over HTTP/2 with prior knowledge (acp-tee's own HTTP/2 client,
:class:`acp_pipes.tee.h2.H2Client`), the two interleaved request by request in the same
run so a busy host slows both alike. A request is a POST of ``session/list`` (answered
202) and its answer's arrival on the connection's SSE stream; the figure is that round
trip, p50 and p99, and the HTTP/2 one over the HTTP/1.1 one.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_remote import _pct
from bench.common import REPO, env

INIT = ('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,'
        '"info":{"name":"bench","version":"1"},"capabilities":{}}}')


async def _connection(http, url: str) -> tuple[str, asyncio.Queue, asyncio.Task]:
    """initialize, then the connection's SSE stream read into a queue (one item per
    event)."""
    json_type = [("Content-Type", "application/json"),
                 ("Accept", "application/json, text/event-stream")]
    async with http.post(url, data=INIT.encode(), headers=json_type) as resp:
        cid = resp.headers["Acp-Connection-Id"]
        await resp.read()
    events: asyncio.Queue = asyncio.Queue()

    async def read() -> None:
        headers = [("Acp-Connection-Id", cid), ("Accept", "text/event-stream")]
        async with http.get(url, headers=headers) as resp:
            buf = b""
            async for chunk in resp.content.iter_any():
                buf += chunk
                while b"\n\n" in buf:
                    event, buf = buf.split(b"\n\n", 1)
                    events.put_nowait(event)

    return cid, events, asyncio.ensure_future(read())


async def _drive(url: str, n: int) -> tuple[list[float], list[float]]:
    import aiohttp

    from acp_pipes.tee.h2 import H2Client

    async with aiohttp.ClientSession() as h1, H2Client(url) as h2:
        conns = [(h1, *await _connection(h1, url)), (h2, *await _connection(h2, url))]
        times: list[list[float]] = [[], []]
        try:
            for i in range(1, n + 1):
                for k, (http, cid, events, _task) in enumerate(conns):  # interleaved
                    body = f'{{"jsonrpc":"2.0","id":{i},"method":"session/list","params":{{}}}}'
                    headers = [("Content-Type", "application/json"),
                               ("Accept", "application/json, text/event-stream"),
                               ("Acp-Connection-Id", cid)]
                    start = time.perf_counter()
                    async with http.post(url, data=body.encode(), headers=headers) as resp:
                        await resp.read()
                    await events.get()
                    times[k].append(time.perf_counter() - start)
            for http, cid, _events, _task in conns:
                async with http.delete(url, headers=[("Acp-Connection-Id", cid)]) as resp:
                    await resp.read()
        finally:
            for _http, _cid, _events, task in conns:
                task.cancel()
    return times[0], times[1]


def main(quick: bool) -> str:
    n = 50 if quick else 1000
    log = Path(tempfile.mkdtemp()) / "bench-http2.jsonl"
    tee = subprocess.Popen([sys.executable, "-m", "acp_pipes.cli.tee", "-o", str(log),
                            "--listen", "http://127.0.0.1:0/acp", "--", sys.executable, "-m",
                            "acp_pipes.cli.echo_agent"],
                           env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           cwd=REPO)
    try:
        line = tee.stderr.readline().decode()  # type: ignore[union-attr]  # (a pipe)
        url = line.split("listening on ", 1)[1].strip()
        h1, h2 = asyncio.run(_drive(url, n))
    finally:
        if tee.poll() is None:
            tee.send_signal(signal.SIGTERM)
            tee.wait(timeout=30)
    out = [f"## acp-tee's Streamable HTTP listener: HTTP/1.1 and HTTP/2 ({n} requests)\n",
           "| client | p50 µs | p99 µs |", "|---|---:|---:|"]
    for name, xs in (("HTTP/1.1 (aiohttp)", h1), ("HTTP/2, h2c (acp-tee's H2Client)", h2)):
        out.append(f"| {name} | {_pct(xs, 50) * 1e6:.0f} | {_pct(xs, 99) * 1e6:.0f} |")
    out.append(f"| HTTP/2 / HTTP/1.1 | {_pct(h2, 50) / _pct(h1, 50):.2f}× | "
               f"{_pct(h2, 99) / _pct(h1, 99):.2f}× |")
    return "\n".join(out)

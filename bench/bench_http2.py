"""acp-tee's Streamable HTTP listener over HTTP/1.1 and HTTP/2: the round trip per request.

Workload: N sequential requests (quick: 50; else 1000) on each of two ACP connections
to one ``acp-tee --listen http:// -- echo-agent`` (logging to a file): one over HTTP/1.1
(aiohttp's client), one over HTTP/2 with prior knowledge (acp-tee's own HTTP/2 client,
:class:`acp_pipes.tee.h2_client.H2Client`), the two interleaved request by request in the same
run so a busy host slows both alike. A request is a POST of ``session/list`` (answered
202) and its answer's arrival on the connection's SSE stream; the figure is that round
trip, p50 and p99, and the HTTP/2 one over the HTTP/1.1 one.

``ACP_BENCH_AGAINST=TREE`` adds TREE's listener (another checkout: say, the code before
a change), one connection over each HTTP version, interleaved with the others in the
same run.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_remote import _pct, against, cpu_seconds, paired, start_tee

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


async def _drive(urls: list[str], n: int) -> list[tuple[list[float], list[float]]]:
    """For each listener of ``urls``, the round trips over HTTP/1.1 and HTTP/2, every
    connection's requests interleaved with the others'."""
    import aiohttp

    from acp_pipes.tee.h2_client import H2Client

    clients = []
    for url in urls:
        clients += [(aiohttp.ClientSession(), url), (H2Client(url), url)]
    conns = [(http, url, *await _connection(http, url)) for http, url in clients]
    times: list[list[float]] = [[] for _ in conns]
    try:
        for i in range(1, n + 1):
            # interleaved, and each connection first in turn: a round's place costs
            for k in [(i + j) % len(conns) for j in range(len(conns))]:
                http, url, cid, events, _task = conns[k]
                body = f'{{"jsonrpc":"2.0","id":{i},"method":"session/list","params":{{}}}}'
                headers = [("Content-Type", "application/json"),
                           ("Accept", "application/json, text/event-stream"),
                           ("Acp-Connection-Id", cid)]
                start = time.perf_counter()
                async with http.post(url, data=body.encode(), headers=headers) as resp:
                    await resp.read()
                await events.get()
                times[k].append(time.perf_counter() - start)
        for http, url, cid, _events, _task in conns:
            async with http.delete(url, headers=[("Acp-Connection-Id", cid)]) as resp:
                await resp.read()
    finally:
        for http, _url, _cid, _events, task in conns:
            task.cancel()
            await http.close()
    return [(times[k], times[k + 1]) for k in range(0, len(times), 2)]


def main(quick: bool) -> str:
    n = 50 if quick else 1000
    other = against()
    tees, urls = [], []
    try:
        for tree in [None] + ([other] if other else []):
            log = Path(tempfile.mkdtemp()) / "bench-http2.jsonl"
            args = ["-o", str(log), "--listen", "http://127.0.0.1:0/acp", "--",
                    sys.executable, "-m", "acp_pipes.cli.echo_agent"]
            tee, url = start_tee(args) if tree is None else start_tee(args, tree)
            tees.append(tee)
            urls.append(url)
        before = [cpu_seconds(tee.pid) for tee in tees]
        measured = asyncio.run(_drive(urls, n))
        cpu = [(cpu_seconds(tee.pid) - b) / (2 * n) for tee, b in zip(tees, before, strict=True)]
    finally:
        for tee in tees:
            if tee.poll() is None:
                tee.send_signal(signal.SIGTERM)
                tee.wait(timeout=30)
    out = [f"## acp-tee's Streamable HTTP listener: HTTP/1.1 and HTTP/2 ({n} requests)\n",
           "| listener | client | p50 µs | p99 µs |", "|---|---|---:|---:|"]
    names = ["this tree"] + ([f"{other.name} (ACP_BENCH_AGAINST)"] if other else [])
    for name, (h1, h2) in zip(names, measured, strict=True):
        for client, xs in (("HTTP/1.1 (aiohttp)", h1), ("HTTP/2, h2c (acp-tee's H2Client)", h2)):
            out.append(f"| {name} | {client} | {_pct(xs, 50) * 1e6:.0f} | "
                       f"{_pct(xs, 99) * 1e6:.0f} |")
    h1, h2 = measured[0]
    out.append(f"| this tree | HTTP/2 / HTTP/1.1 | {_pct(h2, 50) / _pct(h1, 50):.2f}× | "
               f"{_pct(h2, 99) / _pct(h1, 99):.2f}× |")
    if other:
        for k, version in enumerate(("HTTP/1.1", "HTTP/2")):
            ours, theirs = measured[0][k], measured[1][k]
            out.append(f"| this tree / {other.name} | {version} | "
                       f"{_pct(ours, 50) / _pct(theirs, 50):.2f}× | "
                       f"{_pct(ours, 99) / _pct(theirs, 99):.2f}× |")
        out.append("")
        out.append(f"CPU of the listener per request (its own process, both versions): "
                   f"this tree {cpu[0] * 1e6:.0f} µs, {other.name} {cpu[1] * 1e6:.0f} µs.")
        for k, version in enumerate(("HTTP/1.1", "HTTP/2")):
            out.append(f"This tree against {other.name} over {version}, request by request "
                       f"(paired within a round): median difference "
                       f"{paired(measured[0][k], measured[1][k]) * 1e6:+.0f} µs.")
    return "\n".join(out)

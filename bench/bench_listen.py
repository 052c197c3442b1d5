"""acp-tee's listener under one very large message: the memory it and its agent take.

Workload: one message of 200 MB (an ``initialize`` whose params hold 200 MB of ``a``)
sent to a fresh ``acp-tee --listen http://127.0.0.1:0/acp`` three ways: one WebSocket
text message, one HTTP/1.1 POST, one HTTP/2 POST (h2c), each to a listener of its own
(so each peak is that message's). The agent behind it is a sink that reads its stdin in
1 MiB chunks, keeps nothing and answers each line. Figures: the peak resident set of the listener
(``VmHWM`` in ``/proc/PID/status``, read before it is stopped) and of the agent (its
own ``VmHWM``, which it writes at its end); "-" where no agent was started.

Rows: the default ``--max-message`` (the message is refused: WebSocket 1009, HTTP 413,
never read whole), and ``--max-message 256M`` (taken, relayed and logged).
``ACP_BENCH_AGAINST=TREE`` adds the same rows from another checkout (the code before a
change) in the same run.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_remote import against, start_tee

MIB = 1 << 20

#: The agent: reads 1 MiB at a time, keeps nothing, answers each line (id 0) at its LF.
#: (Its peak is VmHWM, its own address space's: ru_maxrss keeps the spawning process's
#: peak across exec, which is the listener's.)
SINK = ("import os, sys\n"
        "while chunk := os.read(0, 1 << 20):\n"
        "    for _ in range(chunk.count(b'\\n')):\n"
        "        os.write(1, b'{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}\\n')\n"
        "peak = [x for x in open('/proc/self/status') if x.startswith('VmHWM:')][0]\n"
        "open(sys.argv[1], 'w').write(peak)\n")


def _peak_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


async def _send(url: str, how: str, size: int) -> str:
    """Send one message of ``size`` bytes; what came back (a status or a close code)."""
    import aiohttp

    from acp_pipes.tee.h2_client import H2Client

    big = (b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"x":"' + b"a" * size
           + b'"}}')
    headers = {"Content-Type": "application/json"}
    try:
        if how == "WebSocket":
            async with aiohttp.ClientSession() as http:
                async with http.ws_connect(url.replace("http", "ws", 1), max_msg_size=0) as ws:
                    try:
                        await ws.send_frame(big, aiohttp.WSMsgType.TEXT)
                    except ConnectionError:  # closed while it was sent: the close says why
                        pass
                    msg = await asyncio.wait_for(ws.receive(), 120)
                    if msg.type is aiohttp.WSMsgType.TEXT:
                        return "answered"
                    return f"closed {ws.close_code}"
        if how == "HTTP/1.1":
            async with aiohttp.ClientSession() as http:
                async with http.post(url, data=big, headers=headers) as r:
                    return str(r.status)
        async with H2Client(url) as h2:
            async with h2.post(url, data=big, headers=list(headers.items())) as r:
                return str(r.status)
    except (aiohttp.ClientError, ConnectionError) as e:
        return type(e).__name__
    finally:
        del big


def _one(tree: Path | None, cap: str | None, how: str, size: int) -> tuple[str, int, str]:
    d = Path(tempfile.mkdtemp())
    args = ["-o", str(d / "l.jsonl"), *(["--max-message", cap] if cap else []),
            "--listen", "http://127.0.0.1:0/acp", "--", sys.executable, "-c", SINK,
            str(d / "agent.peak")]
    tee, url = start_tee(args) if tree is None else start_tee(args, tree)
    try:
        got = asyncio.run(_send(url, how, size))
        time.sleep(1.0)  # what the listener relays after the answer
        peak = _peak_kb(tee.pid)
    finally:
        tee.send_signal(signal.SIGTERM)
        tee.wait(timeout=60)
    agent = d / "agent.peak"
    agent_kb = agent.read_text().split()[1] if agent.exists() else "-"
    agent_mb = f"{int(agent_kb) / 1024:.0f}" if agent_kb != "-" else "-"
    return got, peak, agent_mb


def main(quick: bool) -> str:
    size = (20 if quick else 200) * MIB
    other = against()
    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if other:
        trees.append((f"{other.name} (ACP_BENCH_AGAINST)", other))
    out = [f"## acp-tee's listener and one message of {size // MIB} MB: peak memory\n",
           "| listener | --max-message | sent as | answer | listener peak MB | agent peak MB |",
           "|---|---|---|---|---:|---:|"]
    for name, tree in trees:
        for cap in (None, "256M"):
            if tree is not None and cap is not None:
                continue  # (a tree from before --max-message takes any size anyway)
            for how in ("WebSocket", "HTTP/1.1", "HTTP/2"):
                got, peak, agent = _one(tree, cap, how, size)
                out.append(f"| {name} | {cap or 'default'} | {how} | {got} | "
                           f"{peak / 1024:.0f} | {agent} |")
    return "\n".join(out)

"""Micro-bench of canonical hashing: fast path vs the rfc8785 reference vs bare orjson.

A plain script: ``python bench/bench_canonical.py [--repeat N]``. It prints, per frame
kind and for the whole list, the median time per frame of repeated runs, side by side.
Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import statistics
import time

import blake3
import orjson

from acp_pipes.protocol import canonical
from bench.common import table

CODE = (
    "def fold(records):\n"
    "    \"\"\"Yield one entity per final state.\"\"\"\n"
    "    for rec in records:\n"
    "        if rec.get('kind') == 'update' and rec['value'] is not None:\n"
    "            yield {'id': rec['id'], 'text': rec['text'].strip()}\n"
) * 12


def acp_frames() -> list[tuple[str, bytes]]:
    """A realistic ACP v2 session: mostly strings and small ints, a few floats."""
    sid = "sess_01HZX3K4Q8V1T2M9N6B7C5D0E"

    def rpc(**kw):
        return orjson.dumps({"jsonrpc": "2.0", **kw})

    def update(u):
        return rpc(method="session/update", params={"sessionId": sid, "update": u})

    frames = [
        ("initialize", rpc(id=0, method="initialize", params={
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True},
                                   "terminal": True},
            "clientInfo": {"name": "zed", "version": "0.201.3"}})),
        ("initialize-result", rpc(id=0, result={
            "protocolVersion": 1,
            "agentCapabilities": {"loadSession": True,
                                  "promptCapabilities": {"image": True, "audio": False,
                                                         "embeddedContext": True},
                                  "mcpCapabilities": {"http": True, "sse": False}},
            "authMethods": []})),
        ("session/new", rpc(id=1, method="session/new", params={
            "cwd": "/home/dev/src/acp-pipes", "mcpServers": []})),
        ("session/new-result", rpc(id=1, result={"sessionId": sid})),
        ("session/prompt", rpc(id=2, method="session/prompt", params={
            "sessionId": sid,
            "prompt": [{"type": "text", "text": "Refactor fold() so it streams; keep the "
                        "tests green and explain the change in two sentences."},
                       {"type": "resource_link", "uri": "file:///home/dev/src/acp-pipes/"
                        "acp_pipes/fold.py", "name": "fold.py", "mimeType": "text/x-python"}]})),
    ]
    words = "I'll read fold.py first, then change the loop into a generator. ".split()
    for i in range(0, len(words), 2):
        frames.append(("agent_message_chunk", update({
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": " ".join(words[i:i + 2]) + " "}})))
    frames += [
        ("agent_thought_chunk", update({
            "sessionUpdate": "agent_thought_chunk",
            "content": {"type": "text", "text": "The caller materialises a list; "
                        "a generator keeps memory flat for long sessions. " * 3}})),
        ("plan", update({"sessionUpdate": "plan", "entries": [
            {"content": "Read acp_pipes/fold.py", "priority": "high", "status": "completed"},
            {"content": "Turn fold() into a generator", "priority": "high",
             "status": "in_progress"},
            {"content": "Run the test suite", "priority": "medium", "status": "pending"}]})),
        ("tool_call", update({
            "sessionUpdate": "tool_call", "toolCallId": "call_7f3a", "title": "Read fold.py",
            "kind": "read", "status": "pending",
            "locations": [{"path": "/home/dev/src/acp-pipes/acp_pipes/fold.py", "line": 1}],
            "rawInput": {"path": "/home/dev/src/acp-pipes/acp_pipes/fold.py", "offset": 0,
                         "limit": 400}})),
        ("fs/read_text_file", rpc(id=3, method="fs/read_text_file", params={
            "sessionId": sid, "path": "/home/dev/src/acp-pipes/acp_pipes/fold.py",
            "line": 1, "limit": 400})),
        ("fs/read_text_file-result", rpc(id=3, result={"content": CODE})),
        ("tool_call_update", update({
            "sessionUpdate": "tool_call_update", "toolCallId": "call_7f3a",
            "status": "completed",
            "content": [{"type": "diff", "path": "/home/dev/src/acp-pipes/acp_pipes/fold.py",
                         "oldText": CODE[:600], "newText": CODE[:600].replace("yield", "emit")}]})),
        ("session/request_permission", rpc(id=4, method="session/request_permission", params={
            "sessionId": sid,
            "toolCall": {"toolCallId": "call_8b1c", "title": "Run pytest", "kind": "execute"},
            "options": [{"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
                        {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]})),
        ("request_permission-result", rpc(id=4, result={
            "outcome": {"outcome": "selected", "optionId": "allow-once"}})),
        ("usage_update", update({
            "sessionUpdate": "usage_update", "used": 48213, "size": 200000,
            "cost": {"amount": 0.0731, "currency": "USD"}})),
        ("session/prompt-result", rpc(id=2, result={"stopReason": "end_turn"})),
    ]
    return frames


def median_us(fn, items, repeat: int) -> float:
    """Median over ``repeat`` runs of the mean time per item, in microseconds."""
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for it in items:
            fn(it)
        runs.append((time.perf_counter() - t0) / len(items) * 1e6)
    return statistics.median(runs)


def measure(repeat: int) -> list[tuple[str, int, float, float, float]]:
    """(frame kind, mean bytes, bare us, fast us, rfc8785 us) per kind and for all frames."""
    frames = acp_frames()

    def bare(raw: bytes) -> str:
        value = orjson.loads(raw)
        return "blake3:" + blake3.blake3(
            orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()

    def reference(raw: bytes) -> str:
        return "blake3:" + blake3.blake3(
            canonical.reference_bytes(canonical.parse_json(raw))).hexdigest()

    def fast(raw: bytes) -> str:
        return canonical.hash_raw(raw)[1]

    for raw in (r for _, r in frames):
        if fast(raw) != reference(raw):
            raise AssertionError(f"fast path differs from rfc8785 on {raw[:80]!r}")

    groups: dict[str, list[bytes]] = {}
    for kind, raw in frames:
        groups.setdefault(kind, []).append(raw)
    groups[f"ALL ({len(frames)} frames)"] = [r for _, r in frames]
    rows = []
    for kind, raws in groups.items():
        size = sum(map(len, raws)) // len(raws)
        b = median_us(bare, raws, repeat)
        f = median_us(fast, raws, repeat)
        r = median_us(reference, raws, max(5, repeat // 10))
        rows.append((kind, size, b, f, r))
    return rows


def main(quick: bool = False) -> str:
    """The Markdown section for ``python -m bench canonical``."""
    repeat = 10 if quick else 200
    rows = measure(repeat)
    return (
        "## Canonical hash (in-process)\n\n"
        f"us per frame, median of {repeat} runs over realistic ACP v2 frames; baseline: "
        "orjson.loads + orjson.dumps(OPT_SORT_KEYS) + blake3 (not JCS); reference: rfc8785.\n\n"
        + table(
            ["frame", "bytes", "baseline us", "fast us", "rfc8785 us", "fast/baseline",
             "rfc8785/fast"],
            [(k, n, f"{b:.2f}", f"{f:.2f}", f"{r:.2f}", f"{f / b:.2f}", f"{r / f:.2f}")
             for k, n, b, f, r in rows],
        )
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    print(main(ap.parse_args().quick))

"""Byte-exact replay of a recorded ACP session (a wire log or frames) as the agent.

The trace is loaded by :mod:`acp_pipes.trace.tracefile` (:class:`Trace`,
:func:`load_trace`, :func:`emit`, importable from here too) and indexed once: every
frame's bytes decoded, the client frames' matching hashes
computed (the frames' own hashes unless ``--ignore``/``--remap-ids`` normalise), and the
agent frames grouped into *bursts*: each recorded client (c2a) frame owns the agent (a2c)
frames that follow it up to the next client frame, and the a2c frames before the first
client frame form the prelude. Replay as the agent (:func:`replay_agent`) is then one
loop: read a client line, match it, write its burst with one write and one flush.

Matching: a live frame matches a recorded one when their bytes are equal (a fast path:
equal bytes have equal canonical hashes) or their canonical hashes are equal after the
declared normalisers (:mod:`acp_pipes.normalize`), so a client that reorders keys or
spaces differently is accepted. ``--match order`` expects the client frames in recorded
order; ``--match any`` takes, for a client frame, the earliest not yet served recorded
client frame with the same hash (first in, first out per hash) and writes the burst that
frame owns. A blank client line is skipped unless it is the frame expected.

Replay never runs tools, never touches the file system on the agent's behalf and never
starts a process: agent-initiated requests (``session/request_permission``,
``elicitation/create``, ``fs/*``, ``terminal/*``) are written as recorded, and the
client's answers are matched like any other client frame.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from acp_pipes.canonical import CanonicalError, ParseError, hash_raw, parse_json
from acp_pipes.frame import raw_hash
from acp_pipes.normalize import Normalizer
from acp_pipes.trace.ids import id_key, id_span, note_live_id
from acp_pipes.trace.report import nearest
from acp_pipes.trace.tracefile import Trace, emit, load_trace
from acp_pipes.wire import A2C, C2A

__all__ = [
    "ReplayOptions",
    "ReplayResult",
    "Trace",
    "emit",
    "live_hash",
    "load_trace",
    "replay_agent",
]

Report = Callable[[dict[str, Any]], None]


# -- hashing live frames -----------------------------------------------------------------


def live_hash(raw: bytes, normalizer: Normalizer, drop_id: bool) -> tuple[Any, str]:
    """``(value, matching hash)`` of a live frame, computed as acp-frame computes the
    recorded one: the canonical hash, or ``blake3-raw:`` of the bytes when they have no
    canonical form (value is then None)."""
    if normalizer.identity and not drop_id:
        try:
            value, h = hash_raw(raw)
        except ParseError:
            return None, raw_hash(raw)
        return value, h if h is not None else raw_hash(raw)
    try:
        value = parse_json(raw)
    except ParseError:
        return None, raw_hash(raw)
    try:
        return value, normalizer.hash(value, drop_id=drop_id)
    except CanonicalError:
        return value, raw_hash(raw)


# -- replay as the agent -----------------------------------------------------------------


@dataclass
class ReplayOptions:
    """How to replay; the defaults replay byte-exact, in order, as fast as possible."""

    match: str = "order"  # "order" | "any"
    pace: str = "fast"  # "fast" | "recorded"
    ignore: Sequence[str] = ()  # --ignore JSON pointers (acp_pipes.normalize)
    remap_ids: bool = False
    remap_log: BinaryIO | None = None  # JSONL: recorded id, live id, dir, seq
    report: Report | None = None  # one dict per diagnostic (the CLI prints JSON lines)
    timeout: float = 10.0  # --client: how long to wait for the agent's frames
    strict: bool = False  # --client: stop at the first difference (exit 1)
    sleep: Callable[[float], None] = time.sleep

    def normalizer(self) -> Normalizer:
        return Normalizer.from_pointers(list(self.ignore))


@dataclass
class ReplayResult:
    """What happened: ``status`` is ``ok``, or the event that stopped the replay
    (``miss``, ``trace_ended``, ``trace_cut``, ``client_ended``); ``consumed`` client
    frames of ``total`` were matched; ``reports`` are the diagnostics emitted."""

    status: str
    consumed: int
    total: int
    reports: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class _Plan:
    """The trace indexed for replay as the agent (see the module docstring)."""

    def __init__(self, trace: Trace, norm: Normalizer, remap: bool) -> None:
        frames, raws = trace.frames, trace.raws
        self.trace = trace
        self.c2a: list[int] = []  # frame index of each client frame
        self.hashes: list[str | None] = []
        self.bursts: list[Any]  # per client frame: bytes, or parts to splice
        self.ranges: list[tuple[int, int]]  # per client frame: its a2c frame indices
        self.by_raw: dict[bytes, str | None] = {}  # recorded bytes -> matching hash
        self.exact: list[bool] = []  # per client frame: equal bytes imply a match
        self.req_keys: set[bytes] = set()  # recorded ids of client requests (remap)
        identity = norm.identity and not remap
        c2a_idx = [i for i, f in enumerate(frames) if f["dir"] == C2A]
        for i in c2a_idx:
            f = frames[i]
            h = f.get("hash") if identity else norm.hash_frame(f, drop_id=remap)
            self.c2a.append(i)
            self.hashes.append(h)
            exact = not f.get("redacted")  # redacted: the logged bytes were not sent
            self.exact.append(exact)
            if exact:
                self.by_raw.setdefault(raws[i], h)
            if remap and f.get("kind") == "request":
                self.req_keys.add(id_key(f.get("id")))
        bounds = [*c2a_idx, len(frames)]
        self.prelude_range = (0, bounds[0])
        self.prelude = _burst(trace, self.req_keys, 0, bounds[0], remap)
        self.ranges = [(bounds[k] + 1, bounds[k + 1]) for k in range(len(c2a_idx))]
        if remap:
            self.bursts = [_burst(trace, self.req_keys, lo, hi, remap) for lo, hi in self.ranges]
        else:  # the hot path: one join per burst; only a trace's last frame can lack its LF
            join = b"\n".join
            self.bursts = [join(raws[lo:hi]) + b"\n" if lo < hi else b""
                           for lo, hi in self.ranges]
            if self.bursts and frames[-1].get("nolf") and frames[-1]["dir"] == A2C:
                self.bursts[-1] = self.bursts[-1][:-1]


def _burst(trace: Trace, req_keys: set[bytes], lo: int, hi: int, remap: bool) -> Any:
    """The bytes of a2c frames lo..hi, each + LF; with ``remap``, a list of constant
    parts and ``(recorded id key, recorded token)`` places where a live id is spliced."""
    frames, raws = trace.frames, trace.raws
    parts: list[Any] = []
    chunk: list[bytes] = []
    for j in range(lo, hi):
        raw = raws[j]
        f = frames[j]
        tail = b"" if f.get("nolf") else b"\n"
        if remap and f.get("kind") in ("response", "error"):
            key = id_key(f.get("id"))
            span = id_span(raw) if key in req_keys else None
            if span is not None:
                chunk.append(raw[: span[0]])
                parts.append(b"".join(chunk))
                chunk = []
                parts.append((key, raw[span[0] : span[1]]))
                chunk.append(raw[span[1] :])
                chunk.append(tail)
                continue
        chunk.append(raw)
        chunk.append(tail)
    parts.append(b"".join(chunk))
    return parts[0] if len(parts) == 1 else parts


def _render(burst: Any, ids: dict[bytes, bytes]) -> bytes:
    if burst.__class__ is bytes:
        return burst
    return b"".join(p if p.__class__ is bytes else ids.get(p[0], p[1]) for p in burst)


def _describe_frame(f: dict[str, Any]) -> dict[str, Any]:
    d = {"seq": f.get("seq"), "method": f.get("method"), "hash": f.get("hash")}
    if "id" in f:
        d["id"] = f["id"]
    return d


class _AgentReplay:
    """One replay as the agent; see :func:`replay_agent`."""

    def __init__(self, trace: Trace, out: BinaryIO, options: ReplayOptions) -> None:
        self.opt = options
        self.norm = options.normalizer()
        self.remap = options.remap_ids
        self.plan = _Plan(trace, self.norm, self.remap)
        self.out = out
        self.ids: dict[bytes, bytes] = {}  # recorded client request id -> live id token
        self.reports: list[dict[str, Any]] = []
        self.consumed = 0

    # diagnostics
    def say(self, event: dict[str, Any]) -> None:
        self.reports.append(event)
        if self.opt.report is not None:
            self.opt.report(event)

    def received(self, raw: bytes, value: Any, h: str) -> dict[str, Any]:
        d: dict[str, Any] = {"method": None, "id": None, "hash": h}
        if isinstance(value, dict):
            m = value.get("method")
            d["method"] = m if isinstance(m, str) else None
            d["id"] = value.get("id")
        elif value is None:
            d["error"] = "not JSON"
        return d

    def miss(self, k: int | None, raw: bytes, value: Any, h: str, candidates: list[int]) -> dict:
        plan = self.plan
        frames = plan.trace.frames
        event: dict[str, Any] = {"event": "miss", "tool": "acp-replay"}
        if k is not None:
            exp = _describe_frame(frames[plan.c2a[k]])
            exp["hash"] = plan.hashes[k]
            event["expected"] = exp
        event["received"] = self.received(raw, value, h)
        event["consumed"] = self.consumed
        event["total"] = len(plan.c2a)
        if value is not None:
            got = self.norm.view(value, drop_id=self.remap)
            method = event["received"]["method"]
            order = ([k] if k is not None else []) + [
                c for c in candidates if c != k and frames[plan.c2a[c]].get("method") == method
            ]
            best = nearest(got, ((c, self._recorded_value(c)) for c in order))
            if best is not None:
                c, diff = best
                near = _describe_frame(frames[plan.c2a[c]])
                near["hash"] = plan.hashes[c]
                event["nearest"] = near
                event["diff"] = diff
        return event

    def _recorded_value(self, k: int) -> Any:
        raw = self.plan.trace.raws[self.plan.c2a[k]]
        try:
            return self.norm.view(parse_json(raw), drop_id=self.remap)
        except ParseError:
            return None

    def note_ids(self, k: int, raw: bytes) -> None:
        """Remember the live id of a client request matched to recorded frame ``k``."""
        f = self.plan.trace.frames[self.plan.c2a[k]]
        if f.get("kind") != "request":
            return
        note_live_id(self.ids, f, raw, C2A, self.opt.remap_log)

    # writing
    def write_burst(self, k: int | None, arrived: float) -> None:
        plan = self.plan
        burst = plan.prelude if k is None else plan.bursts[k]
        if self.opt.pace == "recorded":
            lo, hi = plan.prelude_range if k is None else plan.ranges[k]
            self.paced(k, lo, hi, arrived)
            return
        data = _render(burst, self.ids)
        if data:
            self.out.write(data)
            self.out.flush()

    def paced(self, k: int | None, lo: int, hi: int, arrived: float) -> None:
        """Write frames lo..hi one at a time, each at its recorded offset from the client
        frame that owns them (from the first frame for the prelude)."""
        plan = self.plan
        frames = plan.trace.frames
        anchor_t = frames[plan.c2a[k]].get("t") if k is not None else (
            frames[lo].get("t") if lo < hi else None)
        for j in range(lo, hi):
            t = frames[j].get("t")
            if anchor_t is not None and t is not None:
                delay = arrived + (t - anchor_t) / 1e9 - time.monotonic()
                if delay > 0:
                    self.opt.sleep(delay)
            part = _burst(plan.trace, plan.req_keys, j, j + 1, self.remap)
            self.out.write(_render(part, self.ids))
            self.out.flush()

    def run(self, client_in: BinaryIO) -> ReplayResult:
        plan = self.plan
        n = len(plan.c2a)
        any_mode = self.opt.match == "any"
        queues: dict[str | None, deque[int]] = {}
        if any_mode:
            for k, h in enumerate(plan.hashes):
                queues.setdefault(h, deque()).append(k)
        by_raw = plan.by_raw
        exact = plan.exact
        hashes = plan.hashes
        raws = plan.trace.raws
        c2a = plan.c2a
        norm, remap = self.norm, self.remap
        ids_on = remap
        pacing = self.opt.pace == "recorded"
        bursts = plan.bursts
        out = self.out
        write, flush = out.write, out.flush
        ids = self.ids
        served = 0 if not any_mode else None
        self.write_burst(None, time.monotonic())
        if n == 0:
            return self.finish(client_in)
        for line in client_in:
            raw = line[:-1] if line.endswith(b"\n") else line
            if any_mode:
                h = by_raw.get(raw)
                value = None
                if h is None:
                    value, h = live_hash(raw, norm, remap)
                q = queues.get(h)
                if not q:
                    if not raw.strip():
                        continue
                    if value is None:
                        value, h = live_hash(raw, norm, remap)
                    return self.stop_unmatched(None, raw, value, h, queues)
                k = q.popleft()
            else:
                k = served
                if not (exact[k] and raw == raws[c2a[k]]):
                    value, h = live_hash(raw, norm, remap)
                    if h != hashes[k]:
                        if not raw.strip():
                            continue
                        return self.stop_unmatched(k, raw, value, h, None)
                served += 1
            self.consumed += 1
            if ids_on:
                self.note_ids(k, raw)
            if pacing:
                self.write_burst(k, time.monotonic())
            else:
                b = bursts[k]
                data = b if b.__class__ is bytes else _render(b, ids)
                if data:
                    write(data)
                    flush()
            if self.consumed == n:
                return self.finish(client_in)
        return self.client_ended()

    def stop_unmatched(self, k, raw, value, h, queues) -> ReplayResult:
        plan = self.plan
        if queues is not None:  # any: expected = the earliest client frame not yet served
            left = sorted(q[0] for q in queues.values() if q)
            k = left[0] if left else None
            candidates = sorted(c for q in queues.values() for c in q)
        else:
            candidates = list(range(k, len(plan.c2a))) + list(range(0, k))
        event = self.miss(k, raw, value, h, candidates)
        self.say(event)
        return ReplayResult("miss", self.consumed, len(plan.c2a), self.reports)

    def finish(self, client_in: BinaryIO) -> ReplayResult:
        """Every recorded client frame was served: a cut trace says so at once (the client
        may be waiting for an answer that was never recorded); otherwise the client may
        only end its input."""
        n = len(self.plan.c2a)
        cut = self.plan.trace.cut
        if cut is not None:
            self.say({"event": "trace_cut", "tool": "acp-replay", "consumed": self.consumed,
                      "total": n, "message": f"the trace ends here: it was cut off "
                      f"mid-session ({cut}); replayed up to the cut"})
            return ReplayResult("trace_cut", self.consumed, n, self.reports)
        for line in client_in:
            raw = line.rstrip(b"\r\n")
            if not raw.strip():
                continue
            value, h = live_hash(raw, self.norm, self.remap)
            self.say({"event": "trace_ended", "tool": "acp-replay", "consumed": self.consumed,
                      "total": n, "received": self.received(raw, value, h),
                      "message": "the client sent more than was recorded: the trace ends "
                      "here (cut off mid-session?)"})
            return ReplayResult("trace_ended", self.consumed, n, self.reports)
        return ReplayResult("ok", self.consumed, n, self.reports)

    def client_ended(self) -> ReplayResult:
        plan = self.plan
        n = len(plan.c2a)
        event: dict[str, Any] = {"event": "client_ended", "tool": "acp-replay",
                                 "consumed": self.consumed, "total": n,
                                 "message": "the client closed its output before the "
                                 "recorded session ended"}
        if self.opt.match == "order" and self.consumed < n:
            k = self.consumed
            exp = _describe_frame(plan.trace.frames[plan.c2a[k]])
            exp["hash"] = plan.hashes[k]
            event["expected"] = exp
        self.say(event)
        return ReplayResult("client_ended", self.consumed, n, self.reports)


def replay_agent(
    trace_frames: Trace | Iterable[dict[str, Any]],
    client_in: BinaryIO,
    out: BinaryIO,
    options: ReplayOptions | None = None,
) -> ReplayResult:
    """Act as the recorded agent: read the live client's frames from ``client_in`` and
    write the recorded agent bytes to ``out``, flushing after each burst.

    A synthetic two-frame recording, replayed to a client that orders its keys
    differently (accepted: matching is by canonical hash) gets the recorded bytes:

    >>> import io
    >>> wire = [
    ...     {"seq": 0, "t": 0, "dir": "c2a", "raw": '{"jsonrpc":"2.0","id":1,"method":"ping"}'},
    ...     {"seq": 1, "t": 0, "dir": "a2c", "raw": '{"jsonrpc":"2.0", "id":1, "result":{}}'},
    ... ]
    >>> out = io.BytesIO()
    >>> client = io.BytesIO(b'{"method":"ping","id":1,"jsonrpc":"2.0"}\\n')
    >>> replay_agent(wire, client, out).status
    'ok'
    >>> out.getvalue() == wire[1]["raw"].encode() + b"\\n"
    True

    A client frame that matches nothing stops the replay with a report:

    >>> r = replay_agent(wire, io.BytesIO(b'{"jsonrpc":"2.0","id":1,"method":"pong"}\\n'),
    ...                  io.BytesIO())
    >>> r.status, r.reports[0]["expected"]["method"], r.reports[0]["diff"][0]["path"]
    ('miss', 'ping', '/method')
    """
    trace = trace_frames if isinstance(trace_frames, Trace) else Trace.of(trace_frames)
    opts = options or ReplayOptions()
    if opts.match not in ("order", "any"):
        raise ValueError(f"match must be order or any, got {opts.match!r}")
    if opts.pace not in ("fast", "recorded"):
        raise ValueError(f"pace must be fast or recorded, got {opts.pace!r}")
    return _AgentReplay(trace, out, opts).run(client_in)

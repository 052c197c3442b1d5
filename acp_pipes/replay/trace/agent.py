"""Byte-exact replay of a recorded ACP session (a wire log or frames) as the agent.

The trace is read as the replay goes (:func:`acp_pipes.replay.trace.tracefile.open_trace`; a
:class:`Trace` in memory works too), in *bursts*: each recorded client (c2a) frame owns
the agent (a2c) frames that follow it up to the next client frame, and the a2c frames
before the first client frame form the prelude. Replay as the agent
(:func:`replay_agent`) is one loop: read a client line, match it with the next recorded
client frame, read that frame's burst and write it with one write and one flush. Memory
holds one burst; ``--match any``, which may serve any client frame next, reads and
indexes the whole trace first.

Matching: a live frame matches a recorded one when their bytes are equal (a fast path:
equal bytes have equal canonical hashes) or their canonical hashes are equal after the
declared normalisers (:mod:`acp_pipes.sameness.normalize`), so a client that reorders keys or
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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from acp_pipes.io.wire import C2A
from acp_pipes.protocol.canonical import (
    CanonicalError,
    ParseError,
    canonical_hash,
    hash_raw,
    parse_json,
    raw_hash,
)
from acp_pipes.protocol.jsonrpc import IdKey, id_key
from acp_pipes.protocol.redact import conceal, may_hold_secrets
from acp_pipes.replay.trace.ids import id_span, note_live_id
from acp_pipes.replay.trace.options import ReplayOptions
from acp_pipes.replay.trace.report import MAX_CANDIDATES, nearest
from acp_pipes.replay.trace.tracefile import (
    CutWatch,
    Pair,
    Trace,
    TraceReader,
    classify,
    emit,
    load_trace,
    open_trace,
)
from acp_pipes.sameness.normalize import Normalizer

__all__ = [
    "ReplayOptions",
    "ReplayResult",
    "Trace",
    "emit",
    "live_hash",
    "load_trace",
    "open_trace",
    "recorded_hash",
    "replay_agent",
]

# -- hashing live frames -----------------------------------------------------------------


def live_hash(raw: bytes, normalizer: Normalizer, drop_id: bool) -> tuple[Any, str]:
    """``(value, matching hash)`` of a live frame, computed as acp-frame computes the
    recorded one: the canonical hash, or ``blake3-raw:`` of the bytes when they have no
    canonical form (value is then None); a frame that holds secrets is hashed concealed
    (:func:`acp_pipes.protocol.redact.conceal`), as the recorded one is (secrets never count)."""
    if normalizer.identity and not drop_id:
        try:
            value, h = hash_raw(raw)
        except ParseError:
            return None, raw_hash(raw)
        if h is None:
            return value, raw_hash(raw)
        if may_hold_secrets(raw):
            concealed = conceal(value)
            if concealed is not value:
                try:
                    h = canonical_hash(concealed)
                except CanonicalError:
                    pass
        return value, h
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


def recorded_hash(rec: dict[str, Any], raw: bytes, norm: Normalizer, drop_id: bool) -> Any:
    """The matching hash of a recorded frame, computed as :func:`live_hash` computes a live
    one: the record's own hash when nothing is normalised and it can hold no secret, else
    that of its concealed, normalised value (:meth:`Normalizer.hash_frame`); a wire record
    has no hash of its own and is hashed here, when a replay first needs it."""
    own = rec.get("hash")
    if own is None:
        return live_hash(raw, norm, drop_id)[1]
    if norm.identity and not drop_id and not rec.get("redacted") and not may_hold_secrets(raw):
        return own
    return norm.hash_frame(rec, drop_id=drop_id)


class _Cursor:
    """The trace read step by step as the replay asks: the prelude (the agent frames
    before the first client frame), then each client frame with its burst (the agent
    frames recorded after it, up to the next client frame). Only the next client frame
    is read ahead, so memory holds one burst."""

    def __init__(self, pairs: Iterable[Pair], watch: CutWatch) -> None:
        self.it = iter(pairs)
        self.watch = watch
        self.next: Pair | None = None  # the next client frame, read ahead
        self.read_c2a = 0  # client frames read so far

    def burst(self) -> list[Pair]:
        """The agent frames up to the next client frame (which becomes :attr:`next`)."""
        out: list[Pair] = []
        watch = self.watch
        learn = watch.learn
        pair = None
        for pair in self.it:
            rec, raw = pair
            # CutWatch.wants, inline: most frames are notifications it skips
            kind = rec.get("kind")
            if (b'"id"' in raw or b"\\u" in raw or b"state_update" in raw) if kind is None \
                    else (kind != "notification" or b"state_update" in raw):
                learn(rec, raw)
            if rec["dir"] == C2A:
                self.next = pair
                self.read_c2a += 1
                return out
            out.append(pair)
        last = pair if pair is not None else self.next
        if last is not None:
            watch.last_nolf = bool(last[0].get("nolf"))
        self.next = None
        return out

    def rest(self, keep: Callable[[Pair], bool], limit: int) -> list[Pair]:
        """Read to the end of the trace; the client frames (:attr:`next` first) for which
        ``keep`` holds, at most ``limit``."""
        kept: list[Pair] = []
        while self.next is not None:
            if len(kept) < limit and keep(self.next):
                kept.append(self.next)
            self.burst()
        return kept


def _write_burst(burst: list[Pair], out: BinaryIO, ids: dict[IdKey, bytes] | None) -> None:
    """The recorded bytes of a burst, each frame + LF (a last frame recorded without LF
    stays without), in one write and one flush; with ``ids`` (``--remap-ids``), the live id
    of the client's request spliced into each response to it."""
    if not burst:
        return
    if ids is None:
        data = b"\n".join([raw for _, raw in burst]) + b"\n"
        if burst[-1][0].get("nolf"):
            data = data[:-1]
    else:
        parts = []
        for rec, raw in burst:
            if ids and (b'"id"' in raw or b"\\u" in raw):
                f = classify(rec, raw)
                if f["kind"] in ("response", "error"):
                    token = ids.get(id_key(f.get("id")))
                    if token is not None:
                        span = id_span(raw)
                        if span is not None:
                            raw = raw[: span[0]] + token + raw[span[1]:]
            parts.append(raw)
            parts.append(b"" if rec.get("nolf") else b"\n")
        data = b"".join(parts)
    out.write(data)
    out.flush()


def _describe_frame(f: dict[str, Any], raw: bytes, h: Any) -> dict[str, Any]:
    f = classify(f, raw)
    d = {"seq": f.get("seq"), "method": f.get("method"), "hash": h}
    if "id" in f:
        d["id"] = f["id"]
    return d


class _AgentReplay:
    """One replay as the agent; see :func:`replay_agent`."""

    def __init__(self, pairs: Iterable[Pair], out: BinaryIO, options: ReplayOptions) -> None:
        self.opt = options
        self.norm = options.normalizer()
        self.remap = options.remap_ids
        self.watch = CutWatch()
        self.cursor = _Cursor(pairs, self.watch)
        self.out = out
        self.ids: dict[IdKey, bytes] = {}  # recorded client request id -> live id token
        self.reports: list[dict[str, Any]] = []
        self.consumed = 0

    # diagnostics
    def say(self, event: dict[str, Any]) -> None:
        self.reports.append(event)
        if self.opt.report is not None:
            self.opt.report(event)

    def hash_of(self, pair: Pair) -> Any:
        return recorded_hash(pair[0], pair[1], self.norm, self.remap)

    def received(self, raw: bytes, value: Any, h: str) -> dict[str, Any]:
        d: dict[str, Any] = {"method": None, "id": None, "hash": h}
        if isinstance(value, dict):
            m = value.get("method")
            d["method"] = m if isinstance(m, str) else None
            d["id"] = value.get("id")
        elif value is None:
            from acp_pipes.io.lines import unparsable
            from acp_pipes.protocol.canonical import ParseError, parse_json

            try:  # (a miss, once a run: parsing again is cheap)
                parse_json(raw)  # JSON's null: no error, as for any value not an object
            except ParseError as e:
                d["error"] = unparsable(True, e)
        return d

    def miss(self, expected: Pair | None, raw: bytes, value: Any, h: str,
             candidates: list[Pair], total: int) -> dict[str, Any]:
        event: dict[str, Any] = {"event": "miss", "tool": "acp-replay"}
        if expected is not None:
            event["expected"] = _describe_frame(*expected, self.hash_of(expected))
        event["received"] = self.received(raw, value, h)
        event["consumed"] = self.consumed
        event["total"] = total
        if value is not None:
            got = self.norm.view(value, drop_id=self.remap)
            best = nearest(got, ((i, self._recorded_value(p)) for i, p in enumerate(candidates)))
            if best is not None:
                i, diff = best
                event["nearest"] = _describe_frame(*candidates[i], self.hash_of(candidates[i]))
                event["diff"] = diff
        return event

    def _recorded_value(self, pair: Pair) -> Any:
        try:
            return self.norm.view(parse_json(pair[1]), drop_id=self.remap)
        except ParseError:
            return None

    def note_ids(self, rec: dict[str, Any], raw: bytes, live: bytes) -> None:
        """Remember the live id of a client request matched to the recorded one."""
        f = classify(rec, raw)
        if f.get("kind") != "request":
            return
        note_live_id(self.ids, f, live, C2A, self.opt.remap_log)

    # writing
    def write(self, owner: Pair | None, burst: list[Pair], arrived: float) -> None:
        if self.opt.pace == "recorded":
            self.paced(owner, burst, arrived)
        else:
            _write_burst(burst, self.out, self.ids if self.remap else None)

    def paced(self, owner: Pair | None, burst: list[Pair], arrived: float) -> None:
        """Write a burst one frame at a time, each at its recorded offset from the client
        frame that owns it (from the first frame for the prelude)."""
        anchor_t = owner[0].get("t") if owner is not None else (
            burst[0][0].get("t") if burst else None)
        for pair in burst:
            t = pair[0].get("t")
            if anchor_t is not None and t is not None:
                delay = arrived + (t - anchor_t) / 1e9 - time.monotonic()
                if delay > 0:
                    self.opt.sleep(delay)
            _write_burst([pair], self.out, self.ids if self.remap else None)

    def run(self, client_in: BinaryIO) -> ReplayResult:
        cursor = self.cursor
        self.write(None, cursor.burst(), time.monotonic())
        if cursor.next is None:
            return self.finish(client_in)
        if self.opt.match == "any":
            return self.run_any(client_in)
        norm, remap = self.norm, self.remap
        ids_on = remap
        fast = self.opt.pace != "recorded" and not remap
        out = self.out
        write, flush = out.write, out.flush
        join = b"\n".join
        for line in client_in:
            raw = line[:-1] if line.endswith(b"\n") else line
            expected = cursor.next
            rec, rraw = expected
            if raw != rraw or rec.get("redacted"):
                value, h = live_hash(raw, norm, remap)
                if h != recorded_hash(rec, rraw, norm, remap):
                    if not raw.strip():
                        continue
                    return self.stop_in_order(raw, value, h)
            self.consumed += 1
            if ids_on:
                self.note_ids(rec, rraw, raw)
            burst = cursor.burst()
            if fast:  # the hot path: one join, one write, one flush per burst
                if burst:
                    data = join([r for _, r in burst]) + b"\n"
                    if burst[-1][0].get("nolf"):
                        data = data[:-1]
                    write(data)
                    flush()
            else:
                self.write(expected, burst, time.monotonic())
            if cursor.next is None:
                return self.finish(client_in)
        return self.client_ended()

    def run_any(self, client_in: BinaryIO) -> ReplayResult:
        """``--match any``: any recorded client frame may be asked for next, so the whole
        trace is read and indexed first (by bytes, and by matching hash:
        :meth:`index`)."""
        steps, queues, by_raw = self.index()
        norm, remap = self.norm, self.remap
        n = len(steps)
        for line in client_in:
            raw = line[:-1] if line.endswith(b"\n") else line
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
                return self.stop_any(steps, queues, raw, value, h)
            k = q.popleft()
            self.consumed += 1
            owner, burst = steps[k]
            if remap:
                self.note_ids(owner[0], owner[1], raw)
            self.write(owner, burst, time.monotonic())
            if self.consumed == n:
                return self.finish(client_in)
        return self.client_ended()

    def index(self) -> tuple[list[tuple[Pair, list[Pair]]], dict[Any, deque[int]],
                             dict[bytes, Any]]:
        """``--match any``: the whole trace read, as steps (each recorded client frame with
        the agent frames it owns), each step's number queued under its matching hash,
        and the hash of each unredacted step's bytes."""
        cursor = self.cursor
        steps: list[tuple[Pair, list[Pair]]] = []
        while cursor.next is not None:
            c = cursor.next
            steps.append((c, cursor.burst()))
        queues: dict[Any, deque[int]] = {}
        by_raw: dict[bytes, Any] = {}
        for k, (pair, _) in enumerate(steps):
            h = self.hash_of(pair)
            queues.setdefault(h, deque()).append(k)
            if not pair[0].get("redacted"):
                by_raw.setdefault(pair[1], h)
        return steps, queues, by_raw

    def stop_any(self, steps: list[tuple[Pair, list[Pair]]], queues: dict[Any, deque[int]],
                 raw: bytes, value: Any, h: Any) -> ReplayResult:
        """A miss with ``--match any``: the earliest step not served first, then the
        others of the same method."""
        n = len(steps)
        left = sorted(k for q in queues.values() for k in q)
        expected = steps[left[0]][0] if left else None
        cands = [steps[k][0] for k in left]
        method = value.get("method") if isinstance(value, dict) else None
        cands = ([expected] if expected is not None else []) + [
            c for c in cands if c is not expected
            and classify(*c).get("method") == method]
        self.say(self.miss(expected, raw, value, h, cands[:MAX_CANDIDATES], n))
        return ReplayResult("miss", self.consumed, n, self.reports)

    def stop_in_order(self, raw: bytes, value: Any, h: str) -> ReplayResult:
        """A miss in order: the expected frame first, then later client frames of the
        same method, read to the end of the trace (it ends here)."""
        expected = self.cursor.next
        method = value.get("method") if isinstance(value, dict) else None
        cands = self.cursor.rest(
            lambda p: p is expected or (method is not None and b'"method"' in p[1]
                                        and classify(*p).get("method") == method),
            MAX_CANDIDATES)
        total = self.cursor.read_c2a
        self.say(self.miss(expected, raw, value, h, cands, total))
        return ReplayResult("miss", self.consumed, total, self.reports)

    def finish(self, client_in: BinaryIO) -> ReplayResult:
        """Every recorded client frame was served: a cut trace says so at once (the client
        may be waiting for an answer that was never recorded); otherwise the client may
        only end its input."""
        n = self.cursor.read_c2a
        cut = self.watch.why()
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
        expected = self.cursor.next
        exp = None
        if self.opt.match == "order" and expected is not None:
            exp = _describe_frame(*expected, self.hash_of(expected))
        self.cursor.rest(lambda p: False, 0)
        n = self.cursor.read_c2a
        event: dict[str, Any] = {"event": "client_ended", "tool": "acp-replay",
                                 "consumed": self.consumed, "total": n,
                                 "message": "the client closed its output before the "
                                 "recorded session ended"}
        if exp is not None:
            event["expected"] = exp
        self.say(event)
        return ReplayResult("client_ended", self.consumed, n, self.reports)


def replay_agent(
    trace: Trace | TraceReader | Iterable[dict[str, Any]],
    client_in: BinaryIO,
    out: BinaryIO,
    options: ReplayOptions | None = None,
) -> ReplayResult:
    """Act as the recorded agent: read the live client's frames from ``client_in`` and
    write the recorded agent bytes to ``out``, flushing after each burst. ``trace`` is
    read as the replay goes when it is a :class:`TraceReader` (:func:`open_trace`).

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
    opts = options or ReplayOptions()
    if opts.match not in ("order", "any"):
        raise ValueError(f"match must be order or any, got {opts.match!r}")
    if opts.pace not in ("fast", "recorded"):
        raise ValueError(f"pace must be fast or recorded, got {opts.pace!r}")
    pairs = trace if isinstance(trace, (Trace, TraceReader)) else Trace.of(trace)
    return _AgentReplay(pairs, out, opts).run(client_in)

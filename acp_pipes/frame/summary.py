"""What a recording holds, at a glance: ``acp-frame --summary``.

One summary per stream, built in one pass over its frames in memory that does not grow
with the log (counters keyed by direction, kind, method, session and update kind; the
list of invalid lines is capped at :data:`MAX_LINES`)::

    {"source":"wire.jsonl","format":"acp-pipes/wire",
     "header":{"recorder":...,"argv":[...],"started":...,"clock":...,"host":{...}},
     "frames":42,"directions":{"c2a":7,"a2c":35},"kinds":{"request":9,...},
     "methods":{"session/prompt":{"request":2,"response":2}, ...},
     "sessions":{"sess-1":38},"updates":{"agent_message_chunk":6,...},
     "bytes":{"c2a":1234,"a2c":5678},
     "largest":{"seq":12,"dir":"a2c","size":812,"kind":"notification","method":"session/update"},
     "time":{"first":...,"last":...,"duration_s":0.25},
     "redacted":0,"protocolVersion":{"requested":2,"agreed":2},
     "problems":{"count":1,"lines":[{"line":17,"message":"not JSON: ..."}]},
     "end":{"t":...,"ended":"2026-11-30T17:15:31.000000Z","status":0,"frames":42},
     "latency_ms":{"session/prompt":{"count":2,"p50":0.3,"p90":0.4,"p99":0.4,"max":0.4,
                                     "errors":0}, ...},
     "turns":{"count":2,"unfinished":0,"first_update_ms":{...},"duration_ms":{...},
              "each":[{"seq":4,"sessionId":"sess-1","id":2,"first_update_ms":0.25,
                       "duration_ms":12.5,"stopReason":"end_turn"}, ...]}}

``problems`` holds every diagnostic of the stream (frames that are not JSON or not
JSON-RPC, skipped broken wire records) with its line number. ``end`` is the wire log's
end record (how the session ended), null for a log cut off or older than version 2.
``latency_ms`` and ``turns`` are :class:`acp_pipes.frame.latency.Latency`'s: they keep a number
per answered request and per prompt turn, the rest is counters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from acp_pipes.frame.core import frame_field
from acp_pipes.frame.latency import Latency
from acp_pipes.io.streams import FRAMES
from acp_pipes.io.terminal import printable
from acp_pipes.io.wire import iso_time

__all__ = ["MAX_LINES", "Summary", "render_table", "summaries"]

#: How many diagnostics a summary lists by line (all are counted).
MAX_LINES = 20
#: How many of the slowest prompt turns a summary table lists (the JSON has them all).
SLOWEST = 5

_HEADER_KEYS = ("recorder", "argv", "started", "clock", "host")
_END_KEYS = ("t", "ended", "status", "signal", "frames")


class Summary:
    """Counters over one stream's frames; ``add`` per frame, ``problem`` per diagnostic."""

    def __init__(self, source: str, header: dict[str, Any] | None):
        self.source = source
        wire = header.get("source") if header and header.get("format") == FRAMES else header
        self.header = (
            {k: wire[k] for k in _HEADER_KEYS if k in wire} if isinstance(wire, dict) else None
        )
        self.format = wire.get("format") if isinstance(wire, dict) else None
        self.frames = 0
        self.directions: dict[str, int] = {}
        self.kinds: dict[str, int] = {}
        self.methods: dict[str, dict[str, int]] = {}
        self.sessions: dict[str, int] = {}
        self.updates: dict[str, int] = {}
        self.bytes: dict[str, int] = {}
        self.largest: dict[str, Any] | None = None
        self.first: int | None = None
        self.last: int | None = None
        self.redacted = 0
        self.requested: Any = None
        self.agreed: Any = None
        self.problem_count = 0
        self.problem_lines: list[dict[str, Any]] = []
        self.end: dict[str, Any] | None = None  # the wire log's end record, if any
        self.latency = Latency()

    def add(self, f: dict[str, Any]) -> None:
        self.latency.add(f)
        self.frames += 1
        d = f["dir"]
        kind = f["kind"]
        size = f["size"]
        self.directions[d] = self.directions.get(d, 0) + 1
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        self.bytes[d] = self.bytes.get(d, 0) + size
        method = f.get("method")
        if method is not None:
            per = self.methods.setdefault(method, {})
            per[kind] = per.get(kind, 0) + 1
        sid = f.get("sessionId")
        if sid is not None:
            self.sessions[sid] = self.sessions.get(sid, 0) + 1
        if self.largest is None or size > self.largest["size"]:
            self.largest = {"seq": f["seq"], "dir": d, "size": size, "kind": kind}
            if method is not None:
                self.largest["method"] = method
        t = f.get("t")
        if t is not None:
            if self.first is None or t < self.first:
                self.first = t
            if self.last is None or t > self.last:
                self.last = t
        if f.get("redacted"):
            self.redacted += 1
        if method == "session/update" and kind == "notification":
            upd = frame_field(f, "params", "update")
            name = upd.get("sessionUpdate") if isinstance(upd, dict) else None
            if isinstance(name, str):
                self.updates[name] = self.updates.get(name, 0) + 1
        elif method == "initialize":
            if kind == "request":
                self.requested = frame_field(f, "params", "protocolVersion")
            elif kind == "response":
                self.agreed = frame_field(f, "result", "protocolVersion")

    def problem(self, line: int, message: str) -> None:
        self.problem_count += 1
        if len(self.problem_lines) < MAX_LINES:
            self.problem_lines.append({"line": line, "message": message})

    def as_dict(self) -> dict[str, Any]:
        duration = None
        if self.first is not None and self.last is not None:
            duration = (self.last - self.first) / 1e9
        return {
            "source": self.source,
            "format": self.format or "bare",
            "header": self.header,
            "frames": self.frames,
            "directions": self.directions,
            "kinds": self.kinds,
            "methods": dict(sorted(self.methods.items())),
            "sessions": self.sessions,
            "updates": dict(sorted(self.updates.items(), key=lambda kv: (-kv[1], kv[0]))),
            "bytes": self.bytes,
            "largest": self.largest,
            "time": {"first": self.first, "last": self.last, "duration_s": duration},
            "redacted": self.redacted,
            "protocolVersion": {"requested": self.requested, "agreed": self.agreed},
            "problems": {"count": self.problem_count, "lines": self.problem_lines},
            "end": self.end,
            **self.latency.as_dict(),
        }


def summaries(
    records: Iterable[dict[str, Any]], source: str
) -> tuple[Iterator[dict[str, Any]], Callable[[str, int, str], None]]:
    """Summaries (as dicts) of the streams in ``records`` (frames with their headers, as
    :func:`acp_pipes.frame.core.read_frames` yields with ``headers=True``), and the ``warn``
    callback to pass to the reader so diagnostics land in the current stream's summary."""
    state: dict[str, Summary | None] = {"cur": None}

    def warn(src: str, line: int, message: str) -> None:
        cur = state["cur"]
        if cur is not None:
            cur.problem(line, message)

    def gen() -> Iterator[dict[str, Any]]:
        for rec in records:
            if "format" in rec:
                if state["cur"] is not None:
                    yield state["cur"].as_dict()
                state["cur"] = Summary(source, rec)
            elif "dir" not in rec:  # the recorder's end record (cur: the header came first)
                state["cur"].end = {k: rec[k] for k in _END_KEYS  # type: ignore[union-attr]
                                    if k in rec}
            else:
                state["cur"].add(rec)  # type: ignore[union-attr]  # (as above)
        if state["cur"] is not None:
            yield state["cur"].as_dict()

    return gen(), warn


def render_table(s: dict[str, Any]) -> str:
    """A summary as aligned text, for a terminal: its sections in turn (:data:`_SECTIONS`),
    those with nothing to show left out. Every cell is :func:`printable`: method names,
    argv and cwd come from the recording and may hold ESC, BEL or newlines."""
    return "\n\n".join(t for t in (section(s) for section in _SECTIONS) if t) + "\n"


def _about(s: dict[str, Any]) -> str:
    """The recording itself: where from, what recorded it, when, how it ended."""
    rows: list[tuple[str, str]] = [("source", s["source"]), ("format", s["format"])]
    h = s["header"] or {}
    for k in _HEADER_KEYS:
        if k in h:
            v = h[k]
            if k == "argv":
                v = " ".join(v) if isinstance(v, list) else v
            elif isinstance(v, dict):
                v = ", ".join(f"{a}={b}" for a, b in v.items())
            rows.append((k, str(v)))
    pv = s["protocolVersion"]
    rows.append(("protocol version", f"requested {pv['requested']}, agreed {pv['agreed']}"))
    t = s["time"]
    if t["first"] is not None:
        rows.append(("time", f"{iso_time(t['first'])} .. {iso_time(t['last'])} "
                             f"({t['duration_s']:.3f} s)"))
    rows.append(("end", _end(s["end"])))
    rows.append(("frames", str(s["frames"])))
    rows.append(("redacted", str(s["redacted"])))
    lg = s["largest"]
    if lg:
        rows.append(("largest frame", f"seq {lg['seq']} {lg['dir']} {lg['size']} B "
                                      f"{lg['kind']} {lg.get('method', '')}".rstrip()))
    return _kv(rows)


def _end(end: dict[str, Any] | None) -> str:
    if end is None:
        return "none: cut off, or recorded before wire log version 2"
    how = f"status {end.get('status')}" + (
        f" (signal {end['signal']})" if end.get("signal") is not None else "")
    return f"{end.get('ended')}, {how}"


def _directions(s: dict[str, Any]) -> str:
    dirs = [d for d in ("c2a", "a2c") if d in s["directions"]]
    return _grid(["direction", "frames", "bytes"],
                 [[d, s["directions"].get(d, 0), s["bytes"].get(d, 0)] for d in dirs])


def _kinds(s: dict[str, Any]) -> str:
    return _grid(["kind", "frames"], [[k, n] for k, n in s["kinds"].items()])


_ANSWERED = ["request", "response", "error", "notification"]


def _methods(s: dict[str, Any]) -> str:
    return _grid(["method", *_ANSWERED],
                 [[m, *(per.get(k, 0) for k in _ANSWERED)] for m, per in s["methods"].items()])


def _counts(key: str, title: str) -> Callable[[dict[str, Any]], str | None]:
    """A section counting frames per ``s[key]`` (sessions, update kinds), when any."""
    def section(s: dict[str, Any]) -> str | None:
        return _grid([title, "frames"], [[k, n] for k, n in s[key].items()]) if s[key] else None

    return section


_PERCENTILES = ["p50", "p90", "p99", "max"]


def _latency(s: dict[str, Any]) -> str | None:
    if not s["latency_ms"]:
        return None
    return _grid(["latency (ms)", "count", *_PERCENTILES, "errors"],
                 [[m, st["count"], *(_ms(st[c]) for c in _PERCENTILES), st["errors"]]
                  for m, st in s["latency_ms"].items()])


def _turns(s: dict[str, Any]) -> str | None:
    turns = s["turns"]
    if not turns["count"]:
        return None
    out = [_grid([f"prompt turns ({turns['unfinished']} unfinished)", "count", *_PERCENTILES],
                 [[label, turns[key]["count"], *(_ms(turns[key][c]) for c in _PERCENTILES)]
                  for label, key in (("first update (ms)", "first_update_ms"),
                                     ("duration (ms)", "duration_ms"))])]
    slow = sorted((t for t in turns["each"] if t["duration_ms"] is not None),
                  key=lambda t: -t["duration_ms"])[:SLOWEST]
    if slow:
        out.append(_grid(["slowest turns: seq", "session", "first update (ms)",
                          "duration (ms)", "stop reason"],
                         [[t["seq"], t["sessionId"], _ms(t["first_update_ms"]),
                           _ms(t["duration_ms"]), t["stopReason"] or ""] for t in slow]))
    return "\n\n".join(out)


def _problems(s: dict[str, Any]) -> str | None:
    p = s["problems"]
    if not p["count"]:
        return None
    lines = [[ln["line"], ln["message"]] for ln in p["lines"]]
    more = p["count"] - len(lines)
    if more:
        lines.append(["...", f"{more} more"])
    return _grid(["line", f"problems ({p['count']})"], lines)


#: The sections of :func:`render_table`, in order; each gives its text, or None.
_SECTIONS: tuple[Callable[[dict[str, Any]], str | None], ...] = (
    _about, _directions, _kinds, _methods, _counts("sessions", "session"),
    _counts("updates", "sessionUpdate"), _latency, _turns, _problems,
)


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _kv(rows: list[tuple[str, str]]) -> str:
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(w)}  {printable(str(v))}" for k, v in rows)


def _grid(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [headers, *[[printable(str(c)) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [i > 0 and all(_numeric(str(r[i])) for r in rows) for i in range(len(headers))]

    def fmt(r: list[str]) -> str:
        return "  ".join(c.rjust(w) if numeric[i] else c.ljust(w)
                         for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()

    return "\n".join([fmt(cells[0]), fmt(["-" * w for w in widths]), *map(fmt, cells[1:])])


def _numeric(cell: str) -> bool:
    return cell == "-" or cell.replace(".", "", 1).isdigit()

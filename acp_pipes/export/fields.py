"""What both exports (OpenTelemetry spans, :mod:`acp_pipes.export.spans`; Agent Trail,
:mod:`acp_pipes.export.trail`) read off ASR records the same way: a receipt time in
nanoseconds, a value cut to a size, a W3C trace context, and IDs derived from the
session so that exporting a stream twice gives the same IDs.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import orjson
from blake3 import blake3

__all__ = ["DEFAULT_CAP", "Ids", "capped", "parse_traceparent", "trace_context", "ts_ns"]

#: The most bytes of a tool call's input or output kept in an attribute (UTF-8, cut at a
#: character boundary): a trace store is for finding and timing, the ASR stream keeps it all.
DEFAULT_CAP = 4096


_EPOCH_CACHE: dict[str, int] = {}


def _digest(*parts: str, size: int) -> int:
    h = blake3(b"acp-export\0" + "\0".join(parts).encode("utf-8", "surrogatepass"))
    n = int.from_bytes(h.digest(size), "big")
    return n or 1  # an all-zero ID is invalid in OpenTelemetry


class Ids:
    """Deterministic trace and span IDs for the sessions of one export.

    ``traces`` maps a session to the trace context its own records carry (the first
    ``_meta.traceparent``), so a session whose agent or client sent one joins that
    trace, and a link to it from another session points into it."""

    def __init__(self, traces: dict[str, tuple[int, int]] | None = None,
                 namespace: str = ""):
        self.traces = traces or {}
        #: kept apart: sessions of other recordings that have the same IDs (fixtures,
        #: an agent that numbers its sessions from 1) get other trace and span IDs
        self.namespace = namespace

    def trace(self, sid: str) -> int:
        got = self.traces.get(sid)
        return got[0] if got else _digest("trace", self.namespace, sid, size=16)

    def remote_parent(self, sid: str) -> int | None:
        got = self.traces.get(sid)
        return got[1] if got else None

    def span(self, sid: str, key: str) -> int:
        return _digest("span", self.namespace, sid, key, size=8)


def parse_traceparent(value: Any) -> tuple[int, int] | None:
    """(trace ID, parent span ID) of a W3C ``traceparent`` (version 00), or None for a
    value that is not one (an invalid one is ignored, as W3C Trace Context says)."""
    if not isinstance(value, str):
        return None
    parts = value.strip().split("-")
    if len(parts) < 4 or len(parts[0]) != 2 or parts[0] == "ff":
        return None
    version, tid, sid = parts[0], parts[1], parts[2]
    if len(tid) != 32 or len(sid) != 16 or (version == "00" and len(parts) != 4):
        return None
    try:
        t, s = int(tid, 16), int(sid, 16)
        int(version, 16)
    except ValueError:
        return None
    if tid != tid.lower() or sid != sid.lower() or not t or not s:
        return None
    return t, s


def trace_context(records: Iterable[dict]) -> tuple[int, int] | None:
    """The first valid ``_meta.traceparent`` among a session's records (ASR-708 keeps
    trace context on every entity and event it came with)."""
    for rec in records:
        meta = rec.get("_meta")
        if type(meta) is dict and "traceparent" in meta:
            got = parse_traceparent(meta["traceparent"])
            if got is not None:
                return got
    return None


def ts_ns(value: Any) -> int | None:
    """An ASR time (RFC 3339 UTC, microseconds) as ns since the epoch; None if not one."""
    if not isinstance(value, str):
        return None
    # the date and hour change rarely: parse them once, add the minutes and seconds
    head = value[:13]
    base = _EPOCH_CACHE.get(head)
    try:
        if base is None:
            base = int(datetime.fromisoformat(head + ":00:00+00:00").timestamp()) * 10**9
            if len(_EPOCH_CACHE) > 4096:
                _EPOCH_CACHE.clear()
            _EPOCH_CACHE[head] = base
        if (len(value) >= 20 and value[13] == ":" and value[16] == ":"
                and value[-1] in "Zz"):
            mins, secs = int(value[14:16]), value[17:-1]
            whole, _, frac = secs.partition(".")
            return (base + (mins * 60 + int(whole)) * 10**9
                    + int((frac + "000000000")[:9]) if frac else
                    base + (mins * 60 + int(whole)) * 10**9)
        return int(datetime.fromisoformat(value).timestamp() * 10**9)
    except ValueError:
        return None


def capped(value: Any, cap: int) -> tuple[str, int] | None:
    """``value`` as text for an attribute (a string as it is, anything else as JSON), at
    most ``cap`` bytes of UTF-8, and its whole size in bytes; None for no value."""
    if value is None:
        return None
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
    else:
        try:
            data = orjson.dumps(value)
        except TypeError:
            data = orjson.dumps(str(value))
    size = len(data)
    if size > cap:
        data = data[:cap]
    return data.decode("utf-8", "ignore"), size

"""Frames -> the protocol timeline a page shows: one column per field, one entry per frame.

Columns rather than one object per frame: a 100,000-frame recording is one array per
field in the page, which the browser parses into a few flat arrays instead of 100,000
objects, and repeated words (methods, session IDs, update kinds) are indices into one
string table. What the timeline shows beyond the frame record itself is computed here:
the pair of each request and response (matched as :class:`acp_pipes.frame.core.Framer`
matches them: by direction and JSON id, per connection) with the latency between them,
and the ``sessionUpdate`` kind of each ``session/update`` (chunk runs are collapsed by it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from acp_pipes.frame.core import KINDS

__all__ = ["KIND_NAMES", "Timeline"]

#: The kind column's codes: an index into this tuple (the page has the same list).
KIND_NAMES = KINDS

_KIND_CODE: dict[object, int] = {k: i for i, k in enumerate(KINDS)}  # (any JSON looks up)
_OTHER_DIR = {"c2a": "a2c", "a2c": "c2a"}


class Strings:
    """A string table: each distinct string once, referred to by its index."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.items: list[str] = []

    def __call__(self, s: str | None) -> int:
        if s is None:
            return -1
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.items)
            self.items.append(s)
        return i


class Timeline:
    """Frame records in (:meth:`add`, one connection after another), columns out
    (:meth:`columns`). ``strings`` is shared with the rest of the page."""

    def __init__(self, strings: Strings):
        self.strings = strings
        self.seq: list[int] = []
        self.t: list[int | None] = []
        self.conn: list[int] = []
        self.dir: list[int] = []
        self.kind: list[int] = []
        self.method: list[int] = []
        self.id: list[str | None] = []
        self.sid: list[int] = []
        self.upd: list[int] = []
        self.size: list[int] = []
        self.raw: list[str] = []
        self.b64: list[int] = []  # frames whose raw is base64 (bytes that are not UTF-8)
        self.redacted: list[int] = []
        self.nolf: list[int] = []
        self.pair: list[int] = []
        self.lat: list[int | None] = []
        self.violations: dict[int, list[dict[str, Any]]] = {}
        self._pending: dict[tuple[str, type, Any], int] = {}
        self._at: dict[tuple[int, Any], int] = {}  # (connection, seq) -> index

    def __len__(self) -> int:
        return len(self.seq)

    def new_connection(self) -> None:
        """Requests are answered within their connection: forget the open ones."""
        self._pending.clear()

    def add(self, frame: dict[str, Any], conn: int) -> int:
        """Append one frame record (as :func:`acp_pipes.frame.core.read_frames` gives it);
        returns its index."""
        i = len(self.seq)
        self._at[(conn, frame["seq"])] = i
        s = self.strings
        d = frame["dir"]
        kind = frame.get("kind")
        self.seq.append(frame["seq"])
        self.t.append(frame.get("t"))
        self.conn.append(conn)
        self.dir.append(0 if d == "c2a" else 1)
        self.kind.append(_KIND_CODE.get(kind, _KIND_CODE["not_jsonrpc"]))
        method = frame.get("method")
        self.method.append(s(method))
        self.id.append(orjson.dumps(frame["id"]).decode() if "id" in frame else None)
        self.sid.append(s(frame.get("sessionId")))
        self.size.append(frame.get("size", 0))
        raw = frame.get("raw")
        if raw.__class__ is str and _utf8(raw):
            self.raw.append(raw)
        else:
            self.raw.append(_base64(frame))
            self.b64.append(i)
        if frame.get("redacted"):
            self.redacted.append(i)
        if frame.get("nolf"):
            self.nolf.append(i)
        upd = None
        if kind == "notification" and method == "session/update":
            upd = _update_kind(raw)
        self.upd.append(s(upd))
        self.pair.append(-1)
        self.lat.append(None)
        if kind == "request":
            key = (d, frame["id"].__class__, frame["id"])
            self._pending[key] = i
        elif kind in ("response", "error"):
            rid = frame["id"]
            j = self._pending.pop((_OTHER_DIR[d], rid.__class__, rid), None)
            if j is not None:
                self.pair[i] = j
                self.pair[j] = i
                t0, t1 = self.t[j], self.t[i]
                if t0 is not None and t1 is not None:
                    self.lat[i] = self.lat[j] = t1 - t0
        return i

    def violation(self, conn: int, v: dict[str, Any]) -> None:
        """Attach a spec violation (:mod:`acp_pipes.frame.validate`) to the frame it names."""
        i = self._at.get((conn, v.get("seq")))
        if i is None:
            return
        self.violations.setdefault(i, []).append(
            {k: v[k] for k in ("rule", "pointer", "message", "words", "schema", "location",
                               "related") if v.get(k) is not None})

    def extend(self, frames: Iterable[dict[str, Any]], conn: int) -> None:
        for fr in frames:
            self.add(fr, conn)

    def columns(self) -> dict[str, Any]:
        """The page's ``frames`` object. Times are ns after ``t0`` (the first frame's
        time, given as a decimal string: epoch nanoseconds exceed what a JavaScript
        number holds exactly)."""
        t0 = next((t for t in self.t if t is not None), None)
        return {
            "n": len(self.seq),
            "t0": None if t0 is None else str(t0),
            "seq": self.seq,
            "t": [None if t is None else t - t0  # type: ignore[operator]  # t0: a t, if any
                  for t in self.t],
            "conn": self.conn,
            "dir": self.dir,
            "kind": self.kind,
            "method": self.method,
            "id": self.id,
            "sid": self.sid,
            "upd": self.upd,
            "size": self.size,
            "pair": self.pair,
            "lat": self.lat,
            "raw": self.raw,
            "b64": self.b64,
            "redacted": self.redacted,
            "nolf": self.nolf,
            "viol": {str(i): v for i, v in self.violations.items()},
        }


def _utf8(raw: str) -> bool:
    """Can the text be written as JSON (no lone surrogate from a ``\\ud800`` escape)?"""
    if raw.isascii():
        return True
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _base64(frame: dict[str, Any]) -> str:
    raw = frame.get("raw")
    if raw.__class__ is str:  # text holding a lone surrogate: its bytes as logged
        import base64

        return base64.b64encode(raw.encode("utf-8", "surrogatepass")).decode("ascii")
    return frame.get("raw_b64") or ""


def _update_kind(raw: Any) -> str | None:
    if raw.__class__ is not str:
        return None
    try:
        msg = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    params = msg.get("params") if msg.__class__ is dict else None
    upd = params.get("update") if params.__class__ is dict else None
    kind = upd.get("sessionUpdate") if upd.__class__ is dict else None
    return kind if kind.__class__ is str else None

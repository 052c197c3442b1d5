"""Fold records -> ASR streams, one per ACP session (ASR-700..723, 734, 735).

:class:`Converter` takes fold records (acp_pipes.fold) of any number of connections and
returns ``(sessionId, record)`` pairs in order; :meth:`Converter.headers` gives each
stream's header once the input is done, since some header fields (``producer.lossy``,
``lineage.inherits.localThroughId``) depend on the whole stream. The writer
(:mod:`acp_pipes.asr.output`) spools records and writes header-first streams.

Per stream the converter keeps one ``(record id, content hash)`` per entity it wrote,
which is all ASR-706 (supersede a changed final) and ASR-717 (no duplicates on resume,
supersede when replayed content differs) need.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import blake3
import orjson

from acp_pipes.asr.model import ALWAYS_LOST, ENVELOPE, agent_name, header, iso, record_id
from acp_pipes.asr.paths import declare_roots
from acp_pipes.asr.records import Ctx, entity_bodies, event_bodies
from acp_pipes.canonical import CanonicalError, canonical_hash
from acp_pipes.streams import FOLD

_blake3 = blake3.blake3
_dumps = orjson.dumps
_SORT = orjson.OPT_SORT_KEYS
_ENVELOPE_FREE = ENVELOPE.isdisjoint

__all__ = ["Converter", "V1Error", "convert"]

CONTEXT_TYPES = frozenset({"message", "tool_call", "tool_result", "compaction"})


class V1Error(ValueError):
    """The recording negotiated ACP v1: the mapping is for v2."""


class _Stream:
    __slots__ = ("sid", "seq", "keys", "ctx", "agent", "lineage", "connections",
                 "parent", "copying", "local_through", "declared")

    def __init__(self, sid: str, conn: int, losses_always: bool = True):
        self.sid = sid
        self.seq = 0
        self.keys: dict[Any, tuple[str, str]] = {}
        self.ctx = Ctx(sid=sid, roots=[], losses=set(ALWAYS_LOST), conn=conn)
        self.agent: dict | None = None
        self.lineage: dict[str, Any] = {}
        self.connections: list[int] = [conn]
        self.parent: str | None = None
        self.copying = False
        self.local_through: str | None = None
        self.declared = False


def _hash(body: dict) -> bytes:
    """Identity of a record's content, for "already recorded, same content" (ASR-717).
    Internal only (never written): blake3 of orjson's key-sorted form, which is
    deterministic for the values a fold produces; canonical_hash where orjson cannot
    serialise (integers beyond 64 bits)."""
    core = body if _ENVELOPE_FREE(body) else {
        k: v for k, v in body.items() if k not in ENVELOPE}
    try:
        return _blake3(_dumps(core, option=_SORT)).digest(16)
    except TypeError:
        try:
            return canonical_hash(core).encode()
        except CanonicalError:
            return repr(core).encode()


def _key(key: tuple) -> bytes:
    return _blake3(_dumps(key)).digest(16)


class Converter:
    def __init__(self, *, agent_name: str | None = None, secret_fields=(), keep_fields=()):
        self.configured_name = agent_name
        self.secret = frozenset(secret_fields)
        self.keep = frozenset(keep_fields)
        self.streams: dict[str, _Stream] = {}
        self.conn = 0
        self.agents: dict[int, dict] = {}

    # -- input ----------------------------------------------------------------------------

    def feed(self, rec: dict) -> list[tuple[str, dict]]:
        ev = rec.get("ev")
        if ev is None and rec.get("format") == FOLD:
            self.conn = int(rec.get("connection") or 0)
            return []
        if ev == "entity":
            return self._entity(rec)
        if ev == "update":
            return self._event(rec)
        if ev == "session":
            return self._session(rec)
        if ev == "initialize":
            version = rec.get("protocolVersion")
            if version != 2:
                raise V1Error(f"this recording negotiated ACP protocol version {version!r}; "
                              "the ACP->ASR mapping covers ACP v2 (protocol version 2) only")
            info = rec.get("agent") if isinstance(rec.get("agent"), dict) else {}
            self.agents[self.conn] = {"name": agent_name(info.get("name"), self.configured_name),
                                      "version": info.get("version")}
        return []

    def headers(self) -> dict[str, dict]:
        """Each stream's header, in the order the sessions were first seen."""
        out = {}
        for sid, st in self.streams.items():
            agent = st.agent or self.agents.get(st.connections[0]) or {
                "name": agent_name(None, self.configured_name), "version": None}
            lineage = dict(st.lineage) if st.lineage else None
            if lineage and "inherits" in lineage and st.local_through:
                lineage["inherits"] = {**lineage["inherits"], "localThroughId": st.local_through}
            out[sid] = header(sid, agent=agent, roots=st.ctx.roots, losses=st.ctx.losses,
                              lineage=lineage, connections=st.connections)
        return out

    # -- streams --------------------------------------------------------------------------

    def _stream(self, sid: str) -> _Stream:
        st = self.streams.get(sid)
        if st is None:
            st = self.streams[sid] = _Stream(sid, self.conn)
            st.ctx.secret_fields = self.secret
            st.ctx.keep_fields = self.keep
            st.agent = self.agents.get(self.conn)
        elif self.conn not in st.connections:
            st.connections.append(self.conn)
        st.ctx.conn = self.conn
        return st

    def _write(self, st: _Stream, key: Any, body: dict, rec: dict, replayed: bool) -> list:
        """Envelope and write one record, unless it repeats what the stream holds.
        Per entity only a 16-byte key digest, the record's seq and a 16-byte content
        digest are kept, so memory per written entity is small and fixed."""
        prev_id = None
        if key is not None:
            key = _key(key)
            h = _hash(body)
            prev = st.keys.get(key)
            if prev is not None:
                if prev[1] == h:
                    return []  # ASR-717: already recorded, same content
                prev_id = record_id(prev[0])
        else:
            h = None
        st.seq = seq = st.seq + 1
        rid = f"r{seq}"  # record_id
        out: dict[str, Any] = {"type": body["type"], "seq": seq, "id": rid}
        t = rec.get("t")
        if t is not None:  # ts_fields, inlined (ASR-707)
            if replayed:
                out["observedAt"] = iso(t)
            else:
                out["ts"] = iso(t)
                out["tsSource"] = "recorder"
        if prev_id is not None:
            out["supersedes"] = prev_id  # ASR-706 / ASR-717
        elif replayed and st.copying and st.parent is not None and key is not None:
            parent = self.streams.get(st.parent)
            src = parent.keys.get(key) if parent is not None else None
            if src is not None:  # ASR-718: history copied into the fork
                out["copiedFrom"] = {"session": st.parent, "id": record_id(src[0]),
                                     "proof": "native_id"}
                st.local_through = rid
        for k, v in body.items():
            if k != "type" and k != "native":
                out[k] = v
        native = {"ref": {"connection": self.conn, "frames": rec.get("frames") or []}}
        if "native" in body:
            native.update(body["native"])
        out["native"] = native  # ASR-723
        if key is not None:
            st.keys[key] = (seq, h)
        if out["type"] in CONTEXT_TYPES and out.get("origin") != "notice":
            st.ctx.last_context = rid
        return [(st.sid, out)]

    def _entity(self, rec: dict) -> list:
        sid = rec.get("session")
        if not isinstance(sid, str):
            return []
        st = self._stream(sid)
        out = []
        replayed = bool(rec.get("replayed"))
        for key, body in entity_bodies(rec, st.ctx):
            out += self._write(st, key, body, rec, replayed)
        if rec.get("entity") == "subagent" and isinstance(rec.get("id"), str):
            # ASR-721: the child's stream names its parent; never guessed
            child = self._stream(rec["id"])
            child.lineage.setdefault("spawnedBy", {"session": sid, "evidence": "native_field"})
        return out

    def _event(self, rec: dict) -> list:
        sid = rec.get("session")
        if not isinstance(sid, str):
            return []
        st = self._stream(sid)
        out = []
        for key, body in event_bodies(rec, st.ctx):
            out += self._write(st, key, body, rec, bool(rec.get("replayed")))
        return out

    def _session(self, rec: dict) -> list:
        sid = rec.get("session")
        if not isinstance(sid, str):
            return []
        st = self._stream(sid)
        op = rec.get("op")
        if op in ("new", "fork", "resume") and not st.ctx.roots:
            st.ctx.roots.extend(declare_roots(rec.get("cwd"),
                                              rec.get("additionalDirectories") or []))
        if op == "fork":
            parent = rec.get("from")
            if isinstance(parent, str):
                st.parent = parent
                st.copying = True
                st.lineage["forkedFrom"] = {"session": parent, "evidence": "native_field"}
                st.lineage["inherits"] = {"mode": "copied", "from": parent,
                                          "evidence": "native_field"}
            return []
        if op == "replay_end":
            st.copying = False
            return []
        if op == "resume":
            return self._write(st, None, {"type": "state", "state": "resumed"}, rec, False)
        if op == "close":
            return self._write(st, None, {"type": "state", "state": "ended"}, rec, False)
        return []


def convert(records: Iterable[dict], **options: Any) -> dict[str, list[dict]]:
    """In memory: fold records -> {sessionId: [header, records...]} (tests, small inputs)."""
    conv = Converter(**options)
    bodies: dict[str, list[dict]] = {}
    for rec in records:
        for sid, out in conv.feed(rec):
            bodies.setdefault(sid, []).append(out)
    return {sid: [h, *bodies.get(sid, [])] for sid, h in conv.headers().items()}


def iter_convert(conv: Converter, records: Iterable[dict]) -> Iterator[tuple[str, dict]]:
    for rec in records:
        yield from conv.feed(rec)

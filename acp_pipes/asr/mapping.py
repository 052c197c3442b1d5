"""Fold records -> ASR streams, one per ACP session (ASR-700..723, 734, 735).

:class:`Converter` takes fold records (acp_pipes.fold) of any number of connections and
returns ``(sessionId, record)`` pairs in order; :meth:`Converter.headers` gives each
stream's header once the input is done, since some header fields (``producer.lossy``,
``lineage.inherits.localThroughId``) depend on the whole stream. The writer
(:mod:`acp_pipes.asr.output`) spools records and writes header-first streams.

Records go to a store as they are made: the CLI's :class:`~acp_pipes.asr.output.Spool`
(bytes, spilled to disk) or, by default, lists in memory (:func:`convert`). Per entity
written the converter keeps one index entry: a 16-byte digest of (session, entity key)
-> the record's seq and where the store holds it (:class:`~acp_pipes.fold.index.
DigestIndex`: memory stays flat, old entries spill to disk). That is all ASR-706
(supersede a changed final) and ASR-717 (no duplicates on resume, supersede when
replayed content differs) need: the content hash of the earlier record is computed only
when the same entity comes again, from the stored record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import blake3
import orjson

from acp_pipes.asr.events import event_bodies
from acp_pipes.asr.model import ALWAYS_LOST, ENVELOPE, agent_name, header, iso
from acp_pipes.asr.paths import declare_roots
from acp_pipes.asr.records import BUILDERS, Ctx, Key, Unmappable, audit
from acp_pipes.errors import InputError, Note, Warn
from acp_pipes.fold import v1
from acp_pipes.fold.core import ProtocolVersionError
from acp_pipes.fold.entities import TRACE_KEYS
from acp_pipes.fold.index import DigestIndex, key_digest
from acp_pipes.io.streams import FOLD
from acp_pipes.protocol.canonical import CanonicalError, canonical_hash

if TYPE_CHECKING:
    from acp_pipes.asr.output import Spool

_blake3 = blake3.blake3
_dumps = orjson.dumps
_SORT = orjson.OPT_SORT_KEYS
_ENVELOPE_FREE = ENVELOPE.isdisjoint
_TRACE_FREE = frozenset(TRACE_KEYS).isdisjoint

__all__ = ["Converter", "convert"]

CONTEXT_TYPES = frozenset({"message", "tool_call", "tool_result", "compaction"})


class _Stream:
    __slots__ = ("sid", "seq", "ctx", "agent", "lineage", "connections",
                 "parent", "copying", "local_through", "declared")

    def __init__(self, sid: str, conn: int, losses_always: bool = True):
        self.sid = sid
        self.seq = 0
        self.ctx = Ctx(sid=sid, roots=[], losses=set(ALWAYS_LOST), conn=conn)
        self.agent: dict[str, Any] | None = None
        self.lineage: dict[str, Any] = {}
        self.connections: list[int] = [conn]
        self.parent: str | None = None
        self.copying = False
        self.local_through: str | None = None
        self.declared = False


def _content(body: dict[str, Any]) -> dict[str, Any]:
    """What a record says (ASR-717's "same content"): the record without its envelope
    (model.ENVELOPE), without how its content was assembled anywhere (a terminal's
    ``output.assembly``: bytes streamed live and replayed whole are the same bytes), and
    without trace context in ``_meta`` (it names the transport of the updates, and a
    replay comes with its own) (acp-pipes choices)."""
    core = body if _ENVELOPE_FREE(body) else {
        k: v for k, v in body.items() if k not in ENVELOPE}
    out = core.get("output")
    if out.__class__ is dict and "assembly" in out:
        core = {**core, "output": {k: v for k, v in out.items() if k != "assembly"}}
    meta = core.get("_meta")
    if meta.__class__ is dict and not _TRACE_FREE(meta):
        core = {k: v for k, v in core.items() if k != "_meta"}
        meta = {k: v for k, v in meta.items() if k not in TRACE_KEYS}
        if meta:
            core["_meta"] = meta
    return core


def _hash(body: dict[str, Any]) -> bytes:
    """Identity of a record's content (:func:`_content`), for "already recorded, same
    content" (ASR-717). Internal only (never written): blake3 of orjson's key-sorted
    form, which is deterministic for the values a fold produces; canonical_hash where
    orjson cannot serialise (integers beyond 64 bits)."""
    core = _content(body)
    try:
        return _blake3(_dumps(core, option=_SORT)).digest(16)
    except TypeError:
        try:
            return canonical_hash(core).encode()
        except CanonicalError:
            return repr(core).encode()


class Store(Protocol):
    """Where a :class:`Converter` puts its records: ``put`` returns the record's
    position, ``get`` reads it back (ASR-706/717 compare with an earlier record)."""

    def put(self, sid: str, rec: dict[str, Any], /) -> int: ...

    def get(self, sid: str, pos: int, /) -> dict[str, Any]: ...


class _Lists:
    """The default store: each session's records in a list (small inputs, tests)."""

    def __init__(self) -> None:
        self.lists: dict[str, list[dict[str, Any]]] = {}

    def put(self, sid: str, rec: dict[str, Any]) -> int:
        recs = self.lists.get(sid)
        if recs is None:
            recs = self.lists[sid] = []
        recs.append(rec)
        return len(recs) - 1

    def get(self, sid: str, pos: int) -> dict[str, Any]:
        return self.lists[sid][pos]


def _envelope(kind: Any, seq: int, rid: str, rec: dict[str, Any], replayed: bool
              ) -> dict[str, Any]:
    """A record's envelope: its type first, seq, id, and its time (ts_fields, inlined,
    ASR-707: the entity's first sight gives the time, a revision's too; replayed
    history has only an observedAt)."""
    t = rec.get("t")
    if t.__class__ is not int:  # no time (null; a fold stream's other values too)
        return {"type": kind, "seq": seq, "id": rid}
    if rec.get("firstReplayed", replayed):
        return {"type": kind, "seq": seq, "id": rid, "observedAt": iso(t)}
    return {"type": kind, "seq": seq, "id": rid, "ts": iso(t), "tsSource": "recorder"}


class Converter:
    """Fold records in (:meth:`feed`), records out to ``store`` (an object with
    ``put(sid, rec) -> pos`` and ``get(sid, pos) -> rec``, e.g. a Spool; default: lists
    in memory, :attr:`records`), headers at the end (:meth:`headers`)."""

    def __init__(self, *, agent_name: str | None = None, secret_fields: Iterable[str] = (),
                 keep_fields: Iterable[str] = (), store: Store | None = None,
                 note: Note | None = None):
        self.configured_name = agent_name
        self.note = note
        self.noted: set[tuple[str, str]] = set()  # (kind, problem) said once a run
        self.secret = frozenset(secret_fields)
        self.keep = frozenset(keep_fields)
        self.streams: dict[str, _Stream] = {}
        self.conn = 0
        self.agents: dict[int, dict[str, Any]] = {}
        self.v1: set[int] = set()  # connections that negotiated ACP v1
        # the default store, which :attr:`records` reads
        self._lists: _Lists | None = None
        if store is None:
            store = self._lists = _Lists()
        self.store = store
        self._put = self.store.put
        self.index = DigestIndex()
        #: (connection, fold record) of each session/new or session/fork the agent
        #: refused: why a recording holds no session (acp-asr says it on stderr)
        self.refused: list[tuple[int, dict[str, Any]]] = []

    def close(self) -> None:
        """Release the index's temporary database (if it spilled to one)."""
        self.index.close()

    @property
    def records(self) -> dict[str, list[dict[str, Any]]]:
        """Each session's records, with the default (in-memory) store."""
        if self._lists is None:
            raise AttributeError("Converter.records: only with the default store")
        return self._lists.lists

    # -- input ----------------------------------------------------------------------------

    def feed(self, rec: dict[str, Any]) -> None:
        """Map one fold record; what it makes goes to the store."""
        ev = rec.get("ev")
        if ev == "entity":
            self._entity(rec)
        elif ev == "update":
            self._event(rec)
        elif ev == "session":
            self._session(rec)
        elif ev is None and rec.get("format") == FOLD:
            self.conn = int(rec.get("connection") or 0)
        elif ev == "refused":  # the agent answered session/new or fork with an error
            self.refused.append((self.conn, rec))
        elif ev == "lossy":  # a loss the v1 lift incurred (ASR-722)
            sid = rec.get("session")
            if sid.__class__ is str and sid and isinstance(rec.get("lossy"), str):
                self._stream(sid).ctx.losses.add(rec["lossy"])
        elif ev == "initialize":
            version = rec.get("protocolVersion")
            if version == 1:
                self.v1.add(self.conn)
            elif version != 2:
                raise ProtocolVersionError(
                    f"this recording negotiated ACP protocol version {version!r}; acp-pipes "
                    "reads ACP v1 and v2 (protocol version 2)")
            info = rec.get("agent")
            if not isinstance(info, dict):
                info = {}
            self.agents[self.conn] = {"name": agent_name(info.get("name"), self.configured_name),
                                      "version": info.get("version")}

    def headers(self) -> dict[str, dict[str, Any]]:
        """Each stream's header, in the order the sessions were first seen."""
        return {sid: self.header(sid) for sid in self.streams}

    def header(self, sid: str) -> dict[str, Any]:
        """The header of session ``sid``'s stream as known so far (final once the input
        is done)."""
        st = self.streams[sid]
        agent = st.agent or self.agents.get(st.connections[0]) or {
            "name": agent_name(None, self.configured_name), "version": None}
        lineage = dict(st.lineage) if st.lineage else None
        if lineage and "inherits" in lineage and st.local_through:
            lineage["inherits"] = {**lineage["inherits"], "localThroughId": st.local_through}
        # a stream with records from an ACP v1 connection was mapped by the v1 choices
        source = v1.SOURCE if not self.v1.isdisjoint(st.connections) else None
        return header(sid, agent=agent, roots=st.ctx.roots, losses=st.ctx.losses,
                      lineage=lineage, connections=st.connections, source=source)

    # -- streams --------------------------------------------------------------------------

    def _stream(self, sid: str) -> _Stream:
        st = self.streams.get(sid)
        if st is not None and st.ctx.conn == self.conn:
            return st  # the common case: this connection's stream, already set up
        if st is None:
            st = self.streams[sid] = _Stream(sid, self.conn)
            st.ctx.secret_fields = self.secret
            st.ctx.keep_fields = self.keep
            st.agent = self.agents.get(self.conn)
        elif self.conn not in st.connections:
            st.connections.append(self.conn)
        st.ctx.conn = self.conn
        return st

    def _write(self, st: _Stream, key: Key, body: dict[str, Any], rec: dict[str, Any],
               replayed: bool) -> None:
        """Envelope and store one record, unless it repeats what the stream holds.
        Per entity the index keeps a 16-byte key digest -> seq and store position; the
        content digest of the earlier record is computed from the store only when the
        same entity comes again (ASR-706/717), so a new entity costs no content hash."""
        prev_id = None
        sid = st.sid
        index = self.index
        if key is not None:
            digest = key_digest((sid, key))
            prev = index.get(digest)
            if prev is not None:
                if _hash(body) == _hash(self.store.get(sid, prev >> 32)):
                    return  # ASR-717: already recorded, same content
                prev_id = f"r{prev & 0xFFFFFFFF}"
        st.seq = seq = st.seq + 1
        rid = f"r{seq}"  # record_id
        out = _envelope(body["type"], seq, rid, rec, replayed)
        if prev_id is not None:
            out["supersedes"] = prev_id  # ASR-706 / ASR-717
        elif replayed and st.copying and st.parent is not None and key is not None:
            self._copied(st, out, key, rid)
        # body's "type" keeps its first place (update keeps a key where it is), native
        # comes last (ASR-723)
        ref = {"ref": {"connection": self.conn, "frames": rec.get("frames") or []}}
        if "native" in body:  # an audit record: native.record beside the ref (ASR-710)
            ref.update(body["native"])
            body = {k: v for k, v in body.items() if k != "native"}
        out.update(body)
        out["native"] = ref
        pos = self._put(sid, out)
        if key is not None:
            index.put(digest, pos << 32 | seq)
        if out["type"] in CONTEXT_TYPES and out.get("origin") != "notice":
            self._in_context(st, out, rec, rid, prev_id is None)

    def _copied(self, st: _Stream, out: dict[str, Any], key: Key, rid: str) -> None:
        """ASR-718: history replayed into a fork that its parent holds is copied from
        the parent's record."""
        src = self.index.get(key_digest((st.parent, key)))
        if src is not None:
            out["copiedFrom"] = {"session": st.parent, "id": f"r{src & 0xFFFFFFFF}",
                                 "proof": "native_id"}
            st.local_through = rid

    def _in_context(self, st: _Stream, out: dict[str, Any], rec: dict[str, Any], rid: str,
                    new: bool) -> None:
        """A record of the model's context: the latest, and (a new entity) where it came
        to be, for a compaction's extent (ASR-719)."""
        ctx = st.ctx
        ctx.last_context = rid
        if new:
            frames = rec.get("frames")
            seen = max(frames) if out["type"] == "tool_result" and frames else rec.get("pos")
            ctx.recent.append((rid, self.conn, seen))

    def _of(self, rec: dict[str, Any]) -> _Stream | None:
        """The stream of the session a fold record names (None: it names none that can
        have one)."""
        sid = rec.get("session")
        if sid.__class__ is not str or not sid:
            self._no_stream(sid)
            return None
        return self._stream(sid)

    def _entity(self, rec: dict[str, Any]) -> None:
        st = self._of(rec)
        if st is None:
            return
        sid = st.sid
        replayed = bool(rec.get("replayed"))
        write = self._write
        kind = rec.get("entity")
        build = BUILDERS.get(kind)  # entity_bodies, inlined
        try:
            bodies: Sequence[tuple[Key, dict[str, Any]]] = build(rec, st.ctx) if (
                build is not None) else ((None, audit(str(kind), rec.get("value"))),)
        except Unmappable as e:  # never write what the validator rejects (ASR-710)
            self._unmappable(str(kind), sid, rec.get("id"), e)
            bodies = ((("audit", kind, rec.get("id")), audit(str(kind), rec.get("value"))),)
        for key, body in bodies:
            write(st, key, body, rec, replayed)
        if kind == "subagent" and rec.get("id").__class__ is str and rec["id"]:
            # ASR-721: the child's stream names its parent; never guessed
            child = self._stream(rec["id"])
            child.lineage.setdefault("spawnedBy", {"session": sid, "evidence": "native_field"})

    def _event(self, rec: dict[str, Any]) -> None:
        st = self._of(rec)
        if st is None:
            return
        sid = st.sid
        replayed = bool(rec.get("replayed"))
        try:
            bodies = event_bodies(rec, st.ctx)
        except Unmappable as e:  # never write what the validator rejects (ASR-710)
            kind = rec.get("kind")
            self._unmappable(str(kind), sid, None, e)
            bodies = [(None, audit(kind if isinstance(kind, str) and kind else "unknown",
                                   rec.get("update")))]
        trace = rec.get("trace")
        for key, body in bodies:
            if trace.__class__ is dict:  # the notification's trace context (ASR-708)
                meta = body.get("_meta") or {}
                body["_meta"] = {**meta, **{k: v for k, v in trace.items() if k not in meta}}
            self._write(st, key, body, rec, replayed)

    def _no_stream(self, sid: Any) -> None:
        """A session named by the empty string has no ASR stream (a header's sessionId is
        never empty): its records are left out, and that is said once a run."""
        if sid != "" or self.note is None or ("session", "") in self.noted:
            return
        self.noted.add(("session", ""))
        self.note("a session whose ID is the empty string: an ASR stream needs an ID, so "
                  "its records are left out; said once a run")

    def _unmappable(self, kind: str, sid: str, key: Any, problem: Unmappable) -> None:
        """Say (once a run for each kind of problem) what was kept as an audit record."""
        if self.note is None or (kind, str(problem)) in self.noted:
            return
        self.noted.add((kind, str(problem)))
        which = f"{kind} {key!r}" if key is not None else kind
        self.note(f"{which} in session {sid!r}: {problem}: kept as an audit record "
                  "(ASR-710); said once a run")

    def _session(self, rec: dict[str, Any]) -> None:
        sid = rec.get("session")
        if sid.__class__ is not str or not sid:
            self._no_stream(sid)
            return
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
        elif op == "replay_end":
            st.copying = False
        elif op == "resume":
            self._write(st, None, {"type": "state", "state": "resumed"}, rec, False)
        elif op == "close":
            self._write(st, None, {"type": "state", "state": "ended"}, rec, False)


class Converted:
    """What :func:`convert_paths` made: the streams in ``spool`` (write them with
    ``spool.write_to``/``write_dir``), their ``headers``, and ``unreadable``, the read
    error that cut the input short (what came before it is converted), or None;
    ``interrupted`` when Ctrl-C ended the reading (what was read is converted)."""

    __slots__ = ("headers", "interrupted", "refused", "spool", "unreadable")

    def __init__(self, spool: Spool, headers: dict[str, dict[str, Any]],
                 unreadable: InputError | None, interrupted: bool = False,
                 refused: list[tuple[str, int, dict[str, Any]]] | None = None):
        self.spool = spool
        self.headers = headers
        self.unreadable = unreadable
        self.interrupted = interrupted
        #: (input path, connection, fold record) of each session/new or session/fork
        #: the agent answered with an error
        self.refused = refused or []

    def no_session(self) -> str | None:
        """What to say when the recording holds no session: that it holds none, and
        why (the error the agent answered session/new with); None when it holds one."""
        if self.headers:
            return None
        if not self.refused:
            return "the recording holds no session: no session/new was answered"
        path, conn, rec = self.refused[-1]
        err = rec.get("error")
        what = orjson.dumps(err).decode() if err is not None else "an error"
        frames = rec.get("frames") or []
        more = f" ({len(self.refused)} refused in all)" if len(self.refused) > 1 else ""
        return (f"{path}: the recording holds no session: the agent answered "
                f"{rec.get('method')} (connection {conn}, frame {frames[-1] if frames else '?'}) "
                f"with error {what}{more}; nothing written")


def convert_paths(paths: Iterable[str], *, warn: Warn, agent_name: str | None = None,
                  secret_fields: Iterable[str] = (), keep_fields: Iterable[str] = (),
                  snapshots: bool = False, only: str | None = None,
                  on_file: Callable[[int, str], object] | None = None,
                  note: Note | None = None, directory: str | None = None,
                  follow: bool = False) -> Converted:
    """Convert recordings (wire logs, frames or fold streams) as acp-asr does: each path
    is its own connection, numbered on from the last. ``on_file(i, path)`` is called
    before each path (acp-asr's progress); ``note`` hears of what was kept as an audit
    record (see :class:`Converter`). acp-asr and acp-batch both convert here, so their
    streams are the same bytes.

    With ``directory`` (``acp-asr -o DIR``) each session's records also go to its file
    there as they are made, after a provisional header (:mod:`acp_pipes.asr.output`),
    whenever the input has no more bytes ready; ``follow`` reads each path as it grows
    until its end record (:class:`acp_pipes.io.live.Live`). Ctrl-C ends the reading as an
    end of input would (``interrupted``)."""
    from acp_pipes.asr.output import Spool
    from acp_pipes.fold import fold_paths
    from acp_pipes.fold.state import States
    from acp_pipes.io.lines import display_name
    from acp_pipes.io.live import Live

    spool = Spool(only=only, directory=directory,
                  provisional=lambda sid: conv.header(sid))
    conv = Converter(agent_name=agent_name, secret_fields=secret_fields,
                     keep_fields=keep_fields, store=spool, note=note)
    live = Live(spool.flush if directory is not None else None, follow=follow)
    unreadable: InputError | None = None
    interrupted = False
    states = States()  # one entity state per session, for every connection (ASR-704)
    refused: list[tuple[str, int, dict[str, Any]]] = []
    try:
        for i, path in enumerate(paths):
            if on_file is not None:
                on_file(i, path)
            records = fold_paths([path], snapshots=snapshots, warn=warn, live=live,
                                 connection=conv.conn + (1 if i else 0), states=states)
            feed = conv.feed
            try:
                for rec in records:
                    feed(rec)
            finally:
                refused.extend((display_name(path), c, r) for c, r in conv.refused)
                conv.refused.clear()
    except InputError as e:  # unreadable past a point: what came before is converted
        unreadable = e
    except KeyboardInterrupt:  # Ctrl-C (the end of --follow): as at the input's end
        interrupted = True
    interrupted = interrupted or live.interrupted  # Ctrl-C while following: input's end
    states.close()
    conv.close()
    return Converted(spool, conv.headers(), unreadable, interrupted, refused)


def convert(records: Iterable[dict[str, Any]], **options: Any) -> dict[str, list[dict[str, Any]]]:
    """In memory: fold records -> {sessionId: [header, records...]} (tests, small inputs)."""
    conv = Converter(**options)
    for rec in records:
        conv.feed(rec)
    conv.close()
    bodies = conv.records
    return {sid: [h, *bodies.get(sid, [])] for sid, h in conv.headers().items()}

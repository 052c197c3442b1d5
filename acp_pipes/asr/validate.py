"""`acp-asr --validate`: schema checks plus what a schema cannot say.

Each problem is one line ``FILE:LINE: POINTER: what is wrong`` (POINTER is a JSON
pointer into the record; empty for the record as a whole). Checked beyond the schemas:
each stream starts with a header; ``seq`` counts 1, 2, 3, ... and ``id``s are unique;
``supersedes`` names the latest earlier record of the same entity, and an entity recorded
again supersedes its latest record (ASR-706, ASR-717: never two records of one entity
side by side, never two revisions of one record); in an ACP v1 stream, a user message
replayed under the agent's own ID is not one the stream holds under a derived ID at the
same place (docs/asr.md "One rule for identity"); ``replaces.throughId`` and
``lineage.inherits.localThroughId`` name records of the stream; ``copiedFrom`` names a
record of the stream the header says it inherits from (checked when that stream is
among the inputs); every PathRef names a declared root; the losses ASR-722 requires
for what the stream holds are declared in ``producer.lossy`` (and, in a stream of ACP
v1, the lost message boundaries when a message ID was derived); every line ends with LF
alone (the stream contract: a CR LF line is a problem). A PathRef holding a path that is
not absolute is no problem of the stream (the recorder kept what the agent sent) but a
:class:`NoteLine` saying the agent broke ACP's schema; a stream with one marked ``relative``
declares ``_org.agent-session.acp/relative_paths``. A file
with no line at all has no header: a problem of the whole file (``FILE: : ...``).

Not a problem but unusable input (``InputError``, exit 2): a file that cannot be opened or
read (a truncated .gz: the lines before the cut are checked first), and a stream of
another kind (a wire log, frames, folded entities), refused as such.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator
from typing import Any

import orjson

from acp_pipes.asr.entities import entity_key
from acp_pipes.asr.model import ALWAYS_LOST
from acp_pipes.asr.output import is_provisional
from acp_pipes.asr.paths import LOSS_RELATIVE, is_relative
from acp_pipes.asr.reader import LONE_SURROGATE, record_without_surrogates
from acp_pipes.asr.schema import validator_for
from acp_pipes.fold import v1
from acp_pipes.io.lines import display_name, json_error, read_lines, unparsable
from acp_pipes.io.streams import ASR, ASR_MAJOR, asr_major, header_format, judge

__all__ = ["NoteLine", "validate_paths", "validate_streams"]


class NoteLine(str):
    """A line of the output that is not a problem: the stream is valid (exit status 0)."""

_ASR = (ASR,)


def _ptr(path: Iterable[Any]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


class _Stream:
    def __init__(self, header: dict[str, Any], source: str, line: int):
        self.header = header
        self.source = source
        self.line = line
        self.sid = header.get("sessionId")
        self.ids: dict[str, object] = {}  # id -> type
        self.seq = 0
        self.types: set[str] = set()
        self.derived_message = False  # a message whose ID the recorder derived
        self.relative = False  # a PathRef marked relative (ASR-711, acp-pipes choice)
        roots = (header.get("workspace") or {}).get("roots") or []
        self.roots = {r.get("id") for r in roots if isinstance(r, dict)}
        self.copied: list[tuple[int, dict[str, Any]]] = []
        self.later: list[tuple[int, str, str]] = []  # (line, pointer, id) to check at end
        # ASR-706/717: each entity's latest record; what each record recorded and the
        # line of the record that superseded it
        self.latest: dict[tuple[Any, ...], str] = {}
        self.entity: dict[str, tuple[Any, ...] | None] = {}
        self.superseded: dict[str, int] = {}
        self.v1 = (header.get("producer") or {}).get("source") == v1.SOURCE
        # ACP v1 identity (docs/asr.md): user messages under derived IDs by content
        # digest, (line, id) in order; how many of them replayed native IDs matched
        self.derived_users: dict[str, list[tuple[int, str]]] = {}
        self.matched: dict[str, int] = {}


def _pathrefs(rec: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    t = rec.get("type")
    if t == "tool_call":
        for i, loc in enumerate(rec.get("locations") or ()):
            if isinstance(loc, dict):
                yield f"/locations/{i}/path", loc.get("path")
    elif t == "file_change":
        for i, ch in enumerate(rec.get("changes") or ()):
            if isinstance(ch, dict):
                yield f"/changes/{i}/path", ch.get("path")
                if "oldPath" in ch:
                    yield f"/changes/{i}/oldPath", ch["oldPath"]
    elif t == "terminal" and "cwd" in rec:
        yield "/cwd", rec["cwd"]


def _content_digest(rec: dict[str, Any]) -> str | None:
    content = rec.get("content")
    if not isinstance(content, list):
        return None
    return v1.content_digest(v1.folded(content))


def _entity_name(key: tuple[Any, ...]) -> str:
    kind, ident = key[0], key[1]
    return f"{kind} {ident!r}"


def _supersedes(st: _Stream, where: str, number: int, rid: str, t: Any,
                rec: dict[str, Any]) -> Iterator[str]:
    """ASR-706, ASR-717: one line of records per entity. A record of an entity already
    recorded supersedes the entity's latest record; ``supersedes`` names a record of
    the same entity, which no other record superseded."""
    key = entity_key(rec)
    sup = rec.get("supersedes")
    if sup is not None:
        if sup not in st.ids:
            yield f"{where}: /supersedes: {sup!r} is not an earlier record"
        elif st.ids[sup] != t:
            yield f"{where}: /supersedes: {sup!r} is a {st.ids[sup]}, not a {t}"
        elif key is not None and st.entity.get(sup) != key:
            other = st.entity.get(sup)
            what = _entity_name(other) if other is not None else "no entity"
            yield (f"{where}: /supersedes: {sup!r} records {what}, not this record's "
                   f"{_entity_name(key)}: a record supersedes only its own entity's (ASR-706)")
        elif sup in st.superseded:
            yield (f"{where}: /supersedes: {sup!r} is superseded already, at line "
                   f"{st.superseded[sup]}: each revision supersedes the entity's latest "
                   "record, one at a time (ASR-706, ASR-717)")
        st.superseded.setdefault(sup, number)
    if key is None:
        return
    st.entity[rid] = key
    prev = st.latest.get(key)
    if prev is not None and sup is None and key[0] != "file_change":
        # (a call's file changes are one record per diff: several stand side by side)
        yield (f"{where}: : {_entity_name(key)} is recorded already ({prev}) and this "
               "record does not supersede it: an entity recorded again supersedes its latest "
               "record (ASR-706, ASR-717)")
    st.latest[key] = rid
    if st.v1 and key[0] == "user":
        yield from _v1_identity(st, where, number, rid, rec)


def _v1_identity(st: _Stream, where: str, number: int, rid: str,
                 rec: dict[str, Any]) -> Iterator[str]:
    """docs/asr.md, "One rule for identity": a v1 user message is the same entity as
    its load replay when text and place agree. A message replayed (``observedAt``, not
    a fork's copy) under the agent's own ID whose text is that of a prompt the stream
    holds, seen live under a derived ID and not yet matched by an earlier replayed one,
    is that prompt stored twice. (A stream whose recording began in the middle of its
    session, then loaded it, can show an earlier prompt of the same text replayed: it
    is refused too, though it may be another message.)"""
    digest = _content_digest(rec)
    if digest is None:
        return
    if rec.get("idSource") == "derived":
        if rec.get("origin") == "prompt" and "ts" in rec:  # a prompt seen live
            st.derived_users.setdefault(digest, []).append((number, str(rec.get("messageId"))))
        return
    if "observedAt" not in rec or "ts" in rec or rec.get("supersedes") is not None or (
            rec.get("copiedFrom") is not None):
        return  # (a fork's copy is judged in the stream it was copied from)
    held = st.derived_users.get(digest) or ()
    n = st.matched.get(digest, 0)
    if n < len(held):
        st.matched[digest] = n + 1
        line, mid = held[n]
        yield (f"{where}: /messageId: {rec.get('messageId')!r} is user message {mid!r} "
               f"(line {line}) again: replayed with the same text at the same place, it is "
               "the same message, stored twice (ASR-717)")


def validate_streams(lines: Iterable[tuple[str, int, bytes | None]],
                     tally: dict[str, list[int]] | None = None) -> Iterator[str]:
    """Problems, one line each, for ASR lines given as (source, line number, bytes without
    the LF; a CR before it kept); bytes ``None``: the source is empty. Each source starts
    a stream. Raises InputError for a stream of another kind. ``tally`` gets, for each
    source, ``[streams, records]`` (headers, and the records after them), for a summary."""
    run = _Validation({} if tally is None else tally)
    for source, number, raw in lines:
        yield from run.line(source, number, raw)
    yield from run.close()
    yield from run.copies()


class _Validation:
    """One run of :func:`validate_streams`: the stream being read, those read (by
    session: ``copiedFrom`` looks parents up in them, at the end), and what is counted."""

    def __init__(self, tally: dict[str, list[int]]):
        self.tally = tally
        self.streams: dict[str, _Stream] = {}
        self.done: list[_Stream] = []
        self.cur: _Stream | None = None
        self.headless = False  # a record without a header was said for this source
        self.source: str | None = None

    def line(self, source: str, number: int, raw: bytes | None) -> Iterator[str]:
        if source != self.source:  # a file starts a stream of its own
            yield from self.close()
            self.cur, self.headless, self.source = None, False, source
        if raw is None:
            yield f"{source}: : no header (the file is empty)"
            return
        where = f"{source}:{number}"
        rec = yield from _parsed(where, raw)
        if rec is None:
            return
        if header_format(rec) != ASR or (asr_major(rec) or 0) > ASR_MAJOR:
            judge(rec, source, number, _ASR)  # another kind, or a newer ASR: unusable
        is_header = rec.get("type") == "header"
        counts = self.tally.setdefault(source, [0, 0])
        counts[0 if is_header else 1] += 1
        if is_header:
            yield from self.header(rec, source, number, where)
        elif self.cur is None:
            if not self.headless:
                what = "a bare ACP JSONL message" if isinstance(rec.get("jsonrpc"), str) else (
                    "a record")
                yield f"{where}: : no header: a stream must start with its header, not {what}"
            self.headless = True
            return
        yield from _schema_problems(rec, is_header, where)
        if not is_header and self.cur is not None:  # (a record: its stream's)
            yield from _record(self.cur, rec, number, where)

    def header(self, rec: dict[str, Any], source: str, number: int, where: str
               ) -> Iterator[str]:
        """A header: the stream before it is over, its own starts."""
        yield from self.close()
        cur = self.cur = _Stream(rec, source, number)
        if is_provisional(rec):  # told apart from a broken stream (docs/asr.md)
            yield (f"{where}: /native/provisional: a provisional stream: acp-asr -o is "
                   "still converting its session, or was stopped before the input's "
                   "end (run it again); its records so far are checked")
        sid = cur.sid
        if isinstance(sid, str):
            self.streams[sid] = cur  # copiedFrom looks parents up by session
        lin = (rec.get("lineage") or {}).get("inherits") or {}
        if isinstance(lin.get("localThroughId"), str):
            cur.later.append((number, "/lineage/inherits/localThroughId",
                              lin["localThroughId"]))

    def close(self) -> Iterator[str]:
        """The end of the stream being read: what only its end tells."""
        st = self.cur
        if st is None:
            return
        self.cur = None
        self.done.append(st)
        if is_provisional(st.header):  # its header's facts are not final: not checked
            return
        lossy = set(((st.header.get("producer") or {}).get("lossy")) or ())
        for loss in sorted(_required_losses(st) - lossy):
            yield (f"{st.source}:{st.line}: /producer/lossy: required loss {loss!r} "
                   "is not declared (ASR-722)")
        for line, ptr, rid in st.later:
            if rid not in st.ids:
                yield f"{st.source}:{line}: {ptr}: names {rid!r}, no such record in the stream"

    def copies(self) -> Iterator[str]:
        """``copiedFrom`` of every stream read, against its parent stream when read."""
        for st in self.done:
            inherits = ((st.header.get("lineage") or {}).get("inherits") or {})
            for number, rec in st.copied:
                cf = rec["copiedFrom"]
                where = f"{st.source}:{number}"
                if cf.get("session") != inherits.get("from"):
                    yield (f"{where}: /copiedFrom/session: {cf.get('session')!r} is not the "
                           "session the header inherits from")
                    continue
                parent = self.streams.get(cf.get("session"))
                if parent is not None and cf.get("id") not in parent.ids:
                    yield (f"{where}: /copiedFrom/id: {cf.get('id')!r} is not a record of "
                           "the parent")


def _parsed(where: str, raw: bytes) -> Generator[str, None, dict[str, Any] | None]:
    """Problems of a line as a line (CR LF, not JSON, no Unicode text, not an object);
    returns the record, or None when there is none to check further."""
    if raw.endswith(b"\r"):
        yield f"{where}: : line ends with CR LF; an ASR stream's lines end with LF alone"
    try:
        rec = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        rec = record_without_surrogates(raw)
        if rec is None:
            yield f"{where}: : {unparsable(True, e)}: {json_error(raw, e)}"
            return None
        # JSON, but no Unicode text: RFC 8259 8.2 (and I-JSON) want none in a store
        yield f"{where}: : {LONE_SURROGATE}; the rest of the record is checked"
    if not isinstance(rec, dict):
        yield f"{where}: : not a JSON object"
        return None
    return rec


def _schema_problems(rec: dict[str, Any], is_header: bool, where: str) -> Iterator[str]:
    v = validator_for(rec, is_header)
    if v is None:
        yield f"{where}: /type: unknown record type {rec.get('type')!r}"
        return
    for err in sorted(v.iter_errors(rec), key=lambda e: list(e.absolute_path)):
        msg = err.message
        if err.validator == "not":
            msg = "has a forbidden shape: " + orjson.dumps(err.validator_value).decode()
        yield f"{where}: {_ptr(err.absolute_path)}: {msg}"


def _required_losses(st: _Stream) -> set[str]:
    """ASR-722: the losses a stream must declare for what it holds."""
    need = set(ALWAYS_LOST)
    if "tool_result" in st.types:
        need.add("tool_result.content")
    if "tool_call" in st.types:
        need.add("_org.agent-session.acp/tool_status_transitions")
    source = (st.header.get("producer") or {}).get("source")
    if st.derived_message and source == v1.SOURCE:  # docs/asr.md, "ACP v1"
        need.add(v1.LOSS_BOUNDARIES)
    if st.relative:
        need.add(LOSS_RELATIVE)
    return need


def _record(st: _Stream, rec: dict[str, Any], number: int, where: str) -> Iterator[str]:
    """The problems of a record beyond its schema, against its stream so far."""
    seq = rec.get("seq")
    if isinstance(seq, int):
        if seq != st.seq + 1:
            yield f"{where}: /seq: {seq} after {st.seq}: seq must count up by one"
        st.seq = seq
    rid = rec.get("id")
    t = rec.get("type")
    if isinstance(t, str):
        st.types.add(t)
        if t == "message" and rec.get("idSource") == "derived" and (
                rec.get("origin") != "notice"):
            st.derived_message = True
    if isinstance(rid, str):
        yield from _identity(st, rec, number, where, rid, t)
    yield from _paths(st, rec, where)
    if isinstance(rec.get("copiedFrom"), dict):
        st.copied.append((number, rec))


def _identity(st: _Stream, rec: dict[str, Any], number: int, where: str, rid: str,
              t: Any) -> Iterator[str]:
    """A record's ``id``: unique, superseding as ASR-706 says, replacing an earlier one."""
    if rid in st.ids:
        yield f"{where}: /id: duplicate id {rid!r}"
    yield from _supersedes(st, where, number, rid, t, rec)
    rep = (rec.get("replaces") or {}).get("throughId") if isinstance(
        rec.get("replaces"), dict) else None
    if rep is not None and rep not in st.ids:
        yield f"{where}: /replaces/throughId: {rep!r} is not an earlier record"
    st.ids[rid] = t


def _paths(st: _Stream, rec: dict[str, Any], where: str) -> Iterator[str]:
    """ASR-711: each PathRef names a declared root; one that is not absolute is noted."""
    for ptr, ref in _pathrefs(rec):
        if isinstance(ref, dict) and ref.get("root") is not None and (
                ref["root"] not in st.roots):
            yield f"{where}: {ptr}/root: {ref['root']!r} is not a declared root (ASR-711)"
        elif is_relative(ref):
            if ref.get("relative") is True:
                st.relative = True
            older = "" if "relative" in ref else (
                " (an older acp-asr stored it unmarked, as if absolute)")
            yield NoteLine(f"{where}: {ptr}/path: note: {ref['path']!r} is not absolute: "
                           "the agent broke ACP's schema, whose paths are absolute; kept as "
                           f"the agent sent it, resolved against no directory{older} "
                           "(ASR-711)")


def validate_paths(paths: Iterable[str],
                   tally: dict[str, list[int]] | None = None) -> Iterator[str]:
    """Problems in the ASR streams of ``paths`` (each file one or more streams). A file
    that cannot be opened or read raises InputError (after the problems of the lines
    read before it). ``tally``: as :func:`validate_streams` fills it."""

    def lines() -> Iterator[tuple[str, int, bytes | None]]:
        for path in paths:
            source = display_name(path)
            any_line = False
            for line in read_lines(path):
                if not line.raw.strip():
                    continue
                any_line = True
                yield source, line.number, line.raw
            if not any_line:
                yield source, 0, None

    yield from validate_streams(lines(), tally)

"""ASR-732: is a recorded replay equivalent to the stream it replayed?

Recording a replay of stream S (``acp-replay --serve S`` resumed by a client, through
``acp-tee`` and ``acp-asr``) gives S'. The two are equivalent when their **context views**
at the primary head hold the same entities in the same order, with the same IDs, roles,
content blocks, tool names (titles, kinds), inputs, mapped statuses, display content and
file change operations, except for what the replay reports as lost (ASR-731).

The context view (:func:`context_view`) is what a model's context is made of, in path
order (an entity at its first record, with its latest revision):

- messages, except notices (ASR-730), inter-session and system messages (not replayed),
  each known by its type and ID (user, agent and thought messages have an ID space
  each, as in ACP: the three may share an ID); an assistant message with reasoning
  beside other parts is split as replay splits it (ASR-727: ``<messageId>#thought-<n>``
  thoughts first); refusal parts become text; a reasoning-only message is a thought
  whose text is its parts' text joined; reasoning with neither text nor summary (opaque
  only) is no thought, as replay sends none;
- tool calls with their result's status mapped as a replay maps it and a recorder maps
  it back (ASR-728: denied -> failed, interrupted -> cancelled), display content, and the
  operations of the file changes they caused, with absolute paths (a change whose root is
  redacted is left out: replay declares it, ASR-729);
- compactions (status, or completed when absent; summary);
- plans (their type, entries, uri and content): what a client shows beside the
  conversation (acp-pipes choice: ASR-732 names no plans, but a replay that lost one
  is not the same session to its user).

:func:`compare_streams` returns the differences as dicts (empty: equivalent).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from acp_pipes.asr.entities import message_space
from acp_pipes.asr.paths import resolve
from acp_pipes.asr.reader import AsrStream, read_streams
from acp_pipes.protocol.messages import is_reasoning
from acp_pipes.replay.asr.updates import thought_text

__all__ = ["compare_streams", "compare_views", "context_view", "load_stream"]

#: A replayed status as it comes back through a recorder: ASR-728, then the recording
#: table (other -> unknown).
#: An entity of the context view while it is built: (kind, ID), a message (kind, ID
#: space, ID).
_Entity = tuple[str, Any] | tuple[str, str, Any]

_ROUND = {"denied": "failed", "interrupted": "cancelled", "other": "unknown"}


def _status(s: Any) -> Any:
    return _ROUND.get(s, s) if isinstance(s, str) else s


def _blocks(parts: list[Any]) -> list[Any]:
    out = []
    for p in parts:
        if not isinstance(p, dict) or is_reasoning(p):
            continue
        if p.get("type") == "refusal":
            text = p.get("text", p.get("refusal"))
            out.append({"type": "text", "text": text if isinstance(text, str) else ""})
        else:
            out.append(p)
    return out


def context_view(stream: AsrStream) -> list[dict[str, Any]]:
    """The stream's context view: one normalised dict per entity, in path order."""
    roots = (stream.header.get("workspace") or {}).get("roots") or []
    ents = _Entities()
    by_type = ents.by_type.get
    for rec in stream.records:
        add = by_type(rec.get("type"))
        if add is not None:
            add(rec)
    view: list[dict[str, Any]] = []
    for key in ents.order:
        # (a record superseding another kind's takes that kind's key: shown as compaction)
        _VIEWS.get(key[0], _compaction_view)(ents.latest[key], ents, roots, view)
    return view


class _Entities:
    """The entities of a stream at their first record with their latest revision, as
    replay sends them (ASR-724), one handler per record type."""

    __slots__ = ("by_rid", "by_type", "changes", "latest", "order", "results")

    def __init__(self) -> None:
        self.order: list[_Entity] = []
        self.latest: dict[_Entity, dict[str, Any]] = {}
        self.by_rid: dict[str, _Entity] = {}
        self.results: dict[Any, dict[str, Any]] = {}
        self.changes: dict[Any, list[_Entity]] = {}
        self.by_type: dict[Any, Callable[[dict[str, Any]], None]] = {
            "message": self.message, "tool_call": self.tool_call,
            "tool_result": self.tool_result, "file_change": self.file_change,
            "compaction": self.compaction, "plan": self.plan}

    def place(self, rec: dict[str, Any], key: _Entity) -> None:
        """The record is the latest revision of its entity: the one it supersedes, else
        the one its key names, else a new one at the end."""
        sup = rec.get("supersedes")
        if sup is not None and sup in self.by_rid:
            key = self.by_rid[sup]
        if key not in self.latest:
            self.order.append(key)
        self.latest[key] = rec
        if rec.get("id") is not None:
            self.by_rid[rec["id"]] = key

    def message(self, rec: dict[str, Any]) -> None:
        if rec.get("origin") in ("notice", "inter_session") or rec.get("role") == "system":
            return
        # ASR-724: a prompt, a thought and an agent message may share an ID (ACP
        # gives each message type its own ID space) and are three entities
        self.place(rec, ("message", message_space(rec), rec.get("messageId")))

    def tool_call(self, rec: dict[str, Any]) -> None:
        self.place(rec, ("tool_call", rec.get("callId")))

    def _call_here(self, cid: Any) -> None:
        """A result or change before its call (or with none): replay sends the call
        here."""
        call = ("tool_call", cid)
        if isinstance(cid, str) and call not in self.latest:
            self.order.append(call)
            self.latest[call] = {"type": "tool_call", "callId": cid}

    def tool_result(self, rec: dict[str, Any]) -> None:
        self.results[rec.get("callId")] = rec
        self._call_here(rec.get("callId"))

    def file_change(self, rec: dict[str, Any]) -> None:
        sup = rec.get("supersedes")
        key = self.by_rid.get(sup) if sup is not None else None
        if key is None:
            key = ("file_change", rec.get("id") or len(self.latest))
            cause = rec.get("cause")
            if not isinstance(cause, dict):
                cause = {}
            cid = cause.get("callId")
            self.changes.setdefault(cid, []).append(key)
            self._call_here(cid)
        self.latest[key] = rec
        if rec.get("id") is not None:
            self.by_rid[rec["id"]] = key

    def compaction(self, rec: dict[str, Any]) -> None:
        self.place(rec, ("compaction", rec.get("compactionId")))

    def plan(self, rec: dict[str, Any]) -> None:
        self.place(rec, ("plan", rec.get("planId")))


View = list[dict[str, Any]]
Roots = list[dict[str, Any]]


def _message_view(rec: dict[str, Any], ents: _Entities, roots: Roots, view: View) -> None:
    """A message, its reasoning as thoughts (ASR-727), as replay sends it."""
    parts = rec.get("content")
    if not isinstance(parts, list):
        parts = []
    mid = rec.get("messageId")
    # a thought of opaque reasoning only has no text: never sent, declared
    texts = [thought_text(p) for p in parts if is_reasoning(p)]
    space = message_space(rec)  # the latest revision's, as replay sends it
    if space == "thought":
        if any(x is not None for x in texts):
            view.append({"entity": "thought", "id": mid,
                         "text": "".join(x for x in texts if x is not None)})
        return
    if space == "agent":
        for n, x in enumerate(texts):  # ASR-727
            if x is not None:
                view.append({"entity": "thought", "id": f"{mid}#thought-{n}", "text": x})
    view.append({"entity": "message", "id": mid, "role": rec.get("role"),
                 "content": _blocks(parts)})


def _tool_view(rec: dict[str, Any], ents: _Entities, roots: Roots, view: View) -> None:
    """A tool call with its result and file changes, as one entity (ASR-724)."""
    cid = rec.get("callId")
    res = ents.results.get(cid)
    entry: dict[str, Any] = {"entity": "tool_call", "id": cid, "name": rec.get("name"),
                             "title": rec.get("title"), "kind": rec.get("kind"),
                             "input": rec.get("input"),
                             "status": _status(res.get("status")) if res else None}
    shown = None
    if res is not None:
        shown = res.get("displayContent")
        if shown is None:
            shown = res.get("content")
    entry["display"] = list(shown or [])
    ops = []
    for ck in ents.changes.get(cid, ()):
        op = _operations(ents.latest[ck], roots)
        if op is not None:
            ops.append(op)
    entry["fileChanges"] = ops
    view.append(entry)


def _plan_view(rec: dict[str, Any], ents: _Entities, roots: Roots, view: View) -> None:
    view.append({"entity": "plan", "id": rec.get("planId"),
                 **{f: rec.get(f) for f in ("planType", "entries", "uri", "content")}})


def _compaction_view(rec: dict[str, Any], ents: _Entities, roots: Roots, view: View) -> None:
    view.append({"entity": "compaction", "id": rec.get("compactionId"),
                 "status": rec.get("status") or "completed",
                 "summary": rec.get("summary") if isinstance(rec.get("summary"), list)
                 else None})


#: Each entity kind's place in the view, by kind.
_VIEWS: dict[str, Callable[[dict[str, Any], _Entities, Roots, View], None]] = {
    "message": _message_view, "tool_call": _tool_view, "plan": _plan_view,
    "compaction": _compaction_view}


def _operations(fc: dict[str, Any], roots: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A file change's operations with absolute paths; None when a root is redacted
    (ASR-729: the replay omits that diff and says so)."""
    ops = []
    for ch in fc.get("changes") or ():
        if not isinstance(ch, dict):
            continue
        op: dict[str, Any] = {"op": ch.get("op")}
        for f in ("path", "oldPath"):
            if f in ch:
                ref = ch[f]
                p = resolve(ref, roots) if isinstance(ref, dict) else ref
                if p is None:
                    return None
                op[f] = p
        ops.append(op)
    patch = fc.get("patch")
    text = patch.get("text") if isinstance(patch, dict) else None
    return {"changes": ops, "patch": text}


def _key(e: dict[str, Any]) -> tuple[Any, Any, str | None]:
    """What an entity is known by: its kind (a message by its role too, each message
    type having its own ID space) and its ID."""
    i = e.get("id")
    return (e["entity"], e.get("role"), i if isinstance(i, str) or i is None else repr(i))


def _who(e: dict[str, Any]) -> dict[str, Any]:
    """An entity as a difference names it: kind, ID, and a message's role."""
    out = {"entity": e["entity"], "id": e.get("id")}
    if e["entity"] == "message":
        out["role"] = e.get("role")
    return out


def compare_views(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Differences between two context views: the views aligned by what each entity is
    known by (:func:`_key`, a longest common subsequence), then, in A's order:

    - ``missing``: an entity of A that B lacks (``index`` in A); ``extra``: one B has and
      A does not (``index`` in B); ``moved``: one both have at another place (``index``
      in A, ``to`` in B), its fields compared too;
    - ``differs``: a field of an entity both have (``field``, ``a``, ``b``); an entity in
      the place of another of its kind that B does not know by the same key differs in
      ``id`` or ``role``."""
    ka, kb = [_key(x) for x in a], [_key(y) for y in b]
    pairs, gone, new = _align(ka, kb)
    # an entity both have, at other places: moved (compared as well), not missing + extra
    where_new = {kb[j]: j for j in new}
    moved: dict[int, int] = {}
    for i in gone:
        to = where_new.pop(ka[i], None)
        if to is not None:
            moved[i] = to
    gone = [i for i in gone if i not in moved]
    new = sorted(where_new.values())
    items: list[tuple[int, int, dict[str, Any]]] = []  # (place in A, order, difference)
    for i, j in [*pairs, *moved.items()]:
        if i in moved:
            items.append((i, 0, {"op": "moved", "index": i, "to": j, **_who(a[i])}))
        _differs(items, i, a[i], b[j])
    for i in gone:
        items.append((i, 0, {"op": "missing", "index": i, **_who(a[i])}))
    # an extra entity is placed after the entities of A before it in B
    before = {j: i for i, j in [*pairs, *moved.items()]}
    prev = [-1] * (len(b) + 1)  # prev[j]: the last place in A of B's entities before j
    for j in range(len(b)):
        prev[j + 1] = max(prev[j], before.get(j, -1))
    for j in new:
        items.append((prev[j], 3, {"op": "extra", "index": j, **_who(b[j])}))
    items.sort(key=lambda t: (t[0], t[1]))
    return [d for _, _, d in items]


def _align(ka: list[Any], kb: list[Any]) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """Two views' keys aligned (a longest common subsequence): the pairs of places of one
    entity, A's places without a pair, B's places without a pair. In a replaced run an
    entity of B's in the place of one of A's of its kind, neither known by the other
    view, is that entity changed."""
    from difflib import SequenceMatcher

    in_a, in_b = set(ka), set(kb)
    pairs: list[tuple[int, int]] = []
    gone: list[int] = []
    new: list[int] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, ka, kb, autojunk=False).get_opcodes():
        if op == "equal":
            pairs.extend(zip(range(i1, i2), range(j1, j2), strict=True))
            continue
        n = min(i2 - i1, j2 - j1) if op == "replace" else 0
        for i, j in zip(range(i1, i1 + n), range(j1, j1 + n), strict=True):
            if ka[i][0] == kb[j][0] and kb[j] not in in_a and ka[i] not in in_b:
                pairs.append((i, j))  # in its place, an entity of its kind: changed
            else:
                gone.append(i)
                new.append(j)
        gone.extend(range(i1 + n, i2))
        new.extend(range(j1 + n, j2))
    return pairs, gone, new


def _differs(items: list[tuple[int, int, dict[str, Any]]], i: int, x: dict[str, Any],
             y: dict[str, Any]) -> None:
    """The fields in which A's entity ``x`` (at ``i``) and B's ``y`` differ: its ID
    first, then the others by name."""
    if x.get("id") != y.get("id"):
        items.append((i, 1, {"op": "differs", "index": i, "entity": x["entity"],
                             "id": x.get("id"), "field": "id", "a": x.get("id"),
                             "b": y.get("id")}))
    for f in sorted((set(x) | set(y)) - {"entity", "id"}):
        if x.get(f) != y.get(f):
            items.append((i, 2, {"op": "differs", "index": i, "entity": x["entity"],
                                 "id": x.get("id"), "field": f, "a": x.get(f),
                                 "b": y.get(f)}))


def compare_streams(a: AsrStream, b: AsrStream) -> list[dict[str, Any]]:
    """ASR-732: the differences between two streams' context views (empty: equivalent)."""
    return compare_views(context_view(a), context_view(b))


def load_stream(lines: Iterable[bytes], source: str = "-") -> AsrStream:
    """The one stream in ``lines`` (a convenience for scripts and tests)."""
    streams = list(read_streams(lines, source))
    if len(streams) != 1:
        raise ValueError(f"{source}: expected one ASR stream, got {len(streams)}")
    return streams[0]

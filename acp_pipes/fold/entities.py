"""What each ACP v2 ``session/update`` kind folds into: entity kind, key, and how.

An entity is one thing ACP identifies by a stable ID within a session (a message, a
tool call, a plan, ...). ``UPDATES`` maps each ``sessionUpdate`` value to
``(entity kind, id field, how)`` where ``how`` is ``upsert`` (patch the fields),
``chunk`` (append one block to the content), ``plan`` (a whole snapshot) or ``bytes``
(append terminal output). Kinds not listed here are session events, not entities.
Entities are keyed by their ACP ID as ACP sent it, never normalised (ASR-702).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any, NamedTuple, final

from acp_pipes.fold.patch import append_block, patch_fields, patch_meta

__all__ = ["CONTENT_FIELD", "EVENTS", "FOLDS", "TRACE_KEYS", "UPDATES", "Apply", "Entity", "Fold",
           "apply_update", "keep_trace", "settle", "trace_of"]

UPDATES: dict[str, tuple[str, str, str]] = {
    "user_message": ("user_message", "messageId", "upsert"),
    "user_message_chunk": ("user_message", "messageId", "chunk"),
    "agent_message": ("agent_message", "messageId", "upsert"),
    "agent_message_chunk": ("agent_message", "messageId", "chunk"),
    "agent_thought": ("agent_thought", "messageId", "upsert"),
    "agent_thought_chunk": ("agent_thought", "messageId", "chunk"),
    "session_message": ("session_message", "messageId", "upsert"),
    "session_message_chunk": ("session_message", "messageId", "chunk"),
    "tool_call_update": ("tool_call", "toolCallId", "upsert"),
    "tool_call_content_chunk": ("tool_call", "toolCallId", "chunk"),
    "terminal_update": ("terminal", "terminalId", "upsert"),
    "terminal_output_chunk": ("terminal", "terminalId", "bytes"),
    "compaction_update": ("compaction", "compactionId", "upsert"),
    "compaction_summary_chunk": ("compaction", "compactionId", "chunk"),
    "plan_update": ("plan", "planId", "plan"),
    "subagent_update": ("subagent", "sessionId", "upsert"),
}

#: Session-level updates the fold passes on as events (the rest of the known kinds).
EVENTS = frozenset({
    "state_update", "usage_update", "config_option_update", "session_info_update",
    "available_commands_update", "notice", "plan_removed",
})

#: Which field holds an entity's chunk-built content.
CONTENT_FIELD = {"compaction": "summary"}

#: Kinds whose text chunks concatenate into one block (tool call content items do not:
#: each chunk is one ToolCallContent item).
_CONCAT = frozenset({"user_message", "agent_message", "agent_thought", "session_message",
                     "compaction"})
#: The reserved trace context keys (W3C Trace Context, Baggage) ASR-708 preserves.
TRACE_KEYS = ("traceparent", "tracestate", "baggage")
#: ACP: "omission or null retains a known value" for these (SessionMessage[Chunk]).
_KEEP_ON_NULL = {"session_message": ("senderSessionId", "recipientSessionId")}


@final  # the fold tells an entity from an event record by its exact type
class Entity:
    """One entity being folded: its value so far and where it came from."""

    __slots__ = ("kind", "key", "session", "pos", "t", "frames", "value", "chunked",
                 "replayed", "released", "final", "ready", "dead", "origin",
                 "output", "after_final", "why", "own", "parts", "trace", "first_replayed")

    def __init__(self, kind: str, key: str | None, session: str, pos: int, t: int | None,
                 replayed: bool = False):
        self.kind = kind
        self.key = key
        self.session = session
        self.pos = pos
        self.t = t
        self.frames: list[int] = []
        self.value: dict[str, Any] = {}
        self.chunked = False  # the current content came (at least partly) from chunks
        self.replayed = replayed
        self.released = False  # a record for it has left the timeline already
        self.final = False
        self.ready: dict[str, Any] | None = None  # its final record, waiting for its turn
        self.dead = False  # dropped (a prompt that was refused); skipped in the timeline
        self.origin: str | None = None  # "prompt" for a session/prompt message
        self.output: bytearray | None = None  # terminal output bytes
        self.after_final = False
        self.why = ""
        self.own: list[Any] | None = None  # the content list this entity made (chunks append)
        # text chunks joining the last block of ``own``, joined once when the value is
        # read (settle): streaming n chunks costs O(n), not O(n^2) string copies
        self.parts: list[str] | None = None
        # trace context keys of every update that contributed, first value kept (ASR-708)
        self.trace: dict[str, Any] | None = None
        # the entity was first seen before this record's updates (on another connection,
        # or as history when these are live, or live when these are history): whether
        # that first sight was history; its time is ``t`` (ASR-707)
        self.first_replayed: bool | None = None


def keep_trace(ent: Entity, meta: Any) -> None:
    """ASR-708: the reserved trace context keys of an update's ``_meta`` (a chunk's own,
    an upsert's, or the notification's ``params._meta``) are kept for the entity's
    record, the first value of each (acp-pipes choice)."""
    if meta.__class__ is not dict:
        return
    for k in TRACE_KEYS:
        v = meta.get(k)
        if v is not None:
            trace = ent.trace
            if trace is None:
                ent.trace = {k: v}
            elif k not in trace:
                trace[k] = v


def trace_of(meta: Any) -> dict[str, Any] | None:
    """The trace context keys of a ``_meta`` (None when it has none)."""
    if meta.__class__ is not dict:
        return None
    out = {k: meta[k] for k in TRACE_KEYS if meta.get(k) is not None}
    return out or None


def settle(ent: Entity) -> None:
    """Join pending text chunks into the last content block (before the value is read)."""
    parts = ent.parts
    if parts is not None:
        ent.parts = None
        content = ent.own
        if content:  # always: parts join the last block of own, and are set with it
            content[-1] = {**content[-1], "text": "".join(parts)}


def apply_update(ent: Entity, how: str, upd: dict[str, Any], id_field: str) -> str | None:
    """Fold one update into ``ent`` (ACP's patch rule, ASR-704). Returns a problem to
    report, or None."""
    fn = _APPLY.get(how)
    if fn is None:
        return f"unknown fold {how!r}"
    return fn(ent, upd, id_field)


def _chunk(ent: Entity, upd: dict[str, Any], id_field: str) -> str | None:
    """``*_chunk``: one block appended; plain text joins plain text (ASR-704, ASR-211)."""
    meta = upd.get("_meta")
    if meta is not None:  # chunk-scoped, but its trace context is kept (ASR-708)
        keep_trace(ent, meta)
    block = upd.get("content")
    if block is None:
        return "chunk without content"
    kind = ent.kind
    value = ent.value
    cfield = CONTENT_FIELD.get(kind, "content")
    content = ent.own
    current: object = value.get(cfield)
    if content is None or content is not current:
        # copied once, then appended in place: linear in the chunks, not quadratic
        # (a record copies the list when it is made, so none shares it)
        content = list(current) if current.__class__ is list else []
        ent.own = content
        value[cfield] = content
    ent.chunked = True
    if kind in _CONCAT and content and block.__class__ is dict and len(block) == 2 and (
            block.get("type") == "text" and block.get("text").__class__ is str):
        last = content[-1]
        if last.__class__ is dict and len(last) == 2 and last.get("type") == "text" and (
                last.get("text").__class__ is str):
            # the common case of append_block's rule: plain text onto plain text
            parts = ent.parts
            if parts is None:
                ent.parts = [last["text"], block["text"]]
            else:
                parts.append(block["text"])
            if kind == "session_message":
                _sender(value, upd)
            return None
    settle(ent)
    append_block(content, block, kind in _CONCAT)
    if kind == "session_message":  # a chunk may name sender and recipient too
        _sender(value, upd)
    return None


def _upsert(ent: Entity, upd: dict[str, Any], id_field: str) -> str | None:
    """An upsert: fields patched (ASR-704, ASR-708); full content replaces chunks."""
    if ent.parts is not None:
        settle(ent)
    kind = ent.kind
    value = ent.value
    skip = _SKIP_ID[id_field]
    cfield = CONTENT_FIELD.get(kind, "content")
    if cfield in upd:
        ent.chunked = False  # full content replaces what chunks built ([] resets)
    if kind == "terminal" and "output" in upd:
        out = upd["output"]
        if out is None:
            ent.output = None
        elif isinstance(out, dict) and isinstance(out.get("data"), str):
            data = _b64(out["data"])
            if data is None:
                return "terminal output is not base64"
            ent.output = bytearray(data)
            ent.chunked = False
        skip = skip | {"output"}
    patch_fields(value, upd, skip, keep_on_null=_KEEP_ON_NULL.get(kind, ()))
    if "_meta" in upd:
        keep_trace(ent, upd["_meta"])
    if kind == "tool_call" and "content" in upd and value.get("content") == []:
        value.pop("content")  # ACP: both null and [] clear a tool call's collection
    return None


def _bytes(ent: Entity, upd: dict[str, Any], id_field: str) -> str | None:
    """``terminal_output_chunk``: the decoded bytes appended."""
    meta = upd.get("_meta")
    if meta is not None:
        keep_trace(ent, meta)
    data = _b64(upd.get("data"))
    if data is None:
        return "terminal output chunk is not base64"
    if ent.output is None:
        ent.output = bytearray()
    ent.output += data
    ent.chunked = True
    return None


def _plan(ent: Entity, upd: dict[str, Any], id_field: str) -> str | None:
    """``plan_update``: each update is a full snapshot of the plan, so the plan's record
    comes from the last one: it cites that frame only (a plan updated every turn for a
    whole session, as ACP v1's is, would otherwise cite every frame since it began)."""
    if ent.parts is not None:
        settle(ent)
    del ent.frames[:-1]
    value = ent.value
    plan: Any = upd.get("plan")  # an object: the fold keys the plan by its planId
    meta = value.get("_meta")
    if "_meta" in upd:
        meta = patch_meta(meta, upd["_meta"])
        keep_trace(ent, upd["_meta"])
    if isinstance(plan.get("_meta"), dict):
        meta = patch_meta(meta, plan["_meta"])
        keep_trace(ent, plan["_meta"])
    value.clear()
    value.update(plan)  # the plan's fields in its order; its own _meta is patched in
    value.pop("_meta", None)
    if meta:
        value["_meta"] = meta
    return None


#: One update into an entity: the entity, the update, its ID field -> a problem or None.
Apply = Callable[[Entity, dict[str, Any], str], "str | None"]


class Fold(NamedTuple):
    """How one ``sessionUpdate`` kind folds (a tuple: the fold unpacks it per update)."""

    kind: str  # the entity kind
    id_field: str  # the update's field holding the entity's ACP ID
    how: str  # upsert, chunk, plan or bytes
    apply: Apply  # the function that folds it


_APPLY: dict[str, Apply] = {"chunk": _chunk, "upsert": _upsert, "bytes": _bytes,
                            "plan": _plan}
_SKIP_ID = {f: frozenset({"sessionUpdate", f}) for _, f, _ in UPDATES.values()}
#: ``sessionUpdate`` -> how it folds.
FOLDS: dict[str, Fold] = {
    k: Fold(kind, f, how, _APPLY[how]) for k, (kind, f, how) in UPDATES.items()}


def _sender(value: dict[str, Any], upd: dict[str, Any]) -> None:
    for k in ("senderSessionId", "recipientSessionId"):
        if upd.get(k) is not None:
            value[k] = upd[k]


def _b64(s: Any) -> bytes | None:
    if not isinstance(s, str):
        return None
    try:
        return base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return None

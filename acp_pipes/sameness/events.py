"""What a frame is to the model of "the same session": an :class:`Event`.

The model orders frames by what they are, not by where a log put them, so each frame is
read once for the few things the order and the matching need: its direction, its
JSON-RPC kind, method and id, its session, the ``sessionUpdate`` kind of an update, the
*entity* it belongs to (one tool call, one message, one terminal, one plan, one file),
and whether the protocol lets it float (:mod:`acp_pipes.sameness.floating`).

Entities follow the fold's table (:data:`acp_pipes.fold.entities.UPDATES`, ACP v2) with
what ACP v1 adds: a ``tool_call`` creation and a ``session/request_permission`` belong to
the tool call they name, v1's ``plan`` to the session's one plan, ``terminal/*`` requests
to the terminal they name, ``fs/*`` requests to the file they name, and v1's message
chunks, which carry no ``messageId``, to the stream of their kind in the turn they are
sent in (:class:`acp_pipes.sameness.order.Order` adds the turn). Reading the fold's
table, not a copy, keeps one rule in one place.
"""

from __future__ import annotations

from typing import Any

import orjson

from acp_pipes.protocol.jsonrpc import classify as classify_message
from acp_pipes.protocol.jsonrpc import id_key
from acp_pipes.sameness.floating import FLOATING, FLOATING_METHODS

__all__ = ["Event", "UNPARSED", "describe", "entity_of", "parse"]

A2C, C2A = "a2c", "c2a"

#: A frame whose bytes are not JSON: compared as text.
UNPARSED = object()

#: The chunk kinds that v1 sends without a ``messageId``: a turn's stream of each kind.
CHUNKS = frozenset({"agent_message_chunk", "agent_thought_chunk", "user_message_chunk",
                    "session_message_chunk"})


def parse(raw: bytes) -> Any:
    """A frame's JSON value (orjson, then the parser of what orjson refuses: lone
    surrogates, numbers beyond a double); :data:`UNPARSED` when it is not JSON."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        from acp_pipes.protocol.canonical import ParseError, parse_json

        try:
            return parse_json(raw)
        except ParseError:
            return UNPARSED


class Event:
    """One frame as the model sees it. ``index``: its place in its run (the order the
    run's log holds its frames in, both directions counted); ``seq``: the seq its log
    gave it; ``kind``: request, notification, response, error, not_jsonrpc or
    invalid_json; ``key``: the JSON-RPC id as a dict key (``1`` and ``"1"`` apart);
    ``update``: a ``session/update``'s ``sessionUpdate``; ``entity``: what it belongs to,
    without the session (None: nothing); ``floating``: the protocol does not fix when it
    comes (:data:`acp_pipes.sameness.floating.FLOATING`)."""

    __slots__ = ("index", "dir", "kind", "method", "rid", "key", "session", "update",
                 "entity", "floating", "value", "raw", "seq")

    def __init__(self, index: int, dir: str, kind: str, method: str | None, rid: Any,
                 key: Any, session: str | None, update: str | None, entity: tuple | None,
                 floating: bool, value: Any, raw: bytes, seq: Any = None):
        self.index, self.dir, self.kind, self.method = index, dir, kind, method
        self.rid, self.key, self.session, self.update = rid, key, session, update
        self.entity, self.floating, self.value, self.raw = entity, floating, value, raw
        self.seq = seq

    def __repr__(self) -> str:
        return f"Event({self.index}, {self.dir}, {self.label}, seq={self.seq!r})"

    @property
    def is_request(self) -> bool:
        return self.kind == "request"

    @property
    def is_answer(self) -> bool:
        return self.kind in ("response", "error")

    @property
    def label(self) -> str:
        """What a report calls it: the method, and the update kind of an update."""
        if self.update is not None:
            return f"{self.method} {self.update}"
        if self.method is not None:
            return self.method
        if self.is_answer:
            return f"{self.kind} to id {self.rid!r}"
        return self.kind

    def cls(self) -> tuple:
        """The class a frame is matched within: a frame only ever matches a frame of its
        class (an answer only the answer to the same request)."""
        if self.is_answer:
            return ("answer", self.key)
        return (self.kind, self.method, self.update)


def describe(index: int, direction: str, raw: bytes, value: Any = None,
             seq: Any = None) -> Event:
    """The event of one frame; ``value``: its parsed JSON when the caller has it."""
    if value is None:
        value = parse(raw)
    if value is UNPARSED:
        return Event(index, direction, "invalid_json", None, None, None, None, None, None,
                     False, raw.decode("utf-8", "replace"), raw, seq)
    kind, method, rid, sid = classify_message(value)
    update = None
    if method == "session/update" and kind == "notification":
        params = value.get("params")
        upd = params.get("update") if params.__class__ is dict else None
        if upd.__class__ is dict:
            u = upd.get("sessionUpdate")
            update = u if u.__class__ is str else None
    floating = (update in FLOATING) if update is not None else (
        direction == A2C and kind == "notification" and method in FLOATING_METHODS)
    entity = None if floating else entity_of(method, update, value)
    key = id_key(rid) if kind in ("request", "response", "error") else None
    return Event(index, direction, kind, method, rid, key, sid, update, entity, floating,
                 value, raw, seq)


def _tool_call_id(params: dict[str, Any]) -> Any:
    """The tool call a request names: v1's ``toolCall``, v2's ``subject``."""
    for holder in (params.get("toolCall"), params.get("subject")):
        if holder.__class__ is dict:
            tid = holder.get("toolCallId")
            if tid is None and holder.get("toolCall").__class__ is dict:
                tid = holder["toolCall"].get("toolCallId")
            if tid is not None:
                return tid
    return None


def entity_of(method: str | None, update: str | None, value: Any) -> tuple | None:
    """The entity a frame belongs to, as ``(kind, id)``; a v1 chunk's is ``(kind,
    None)``: the turn's stream of that kind (the order adds the turn). None: the frame
    is no entity's (an answer, a session-level request)."""
    params = value.get("params") if value.__class__ is dict else None
    if params.__class__ is not dict:
        return None
    if update is not None:
        upd = params.get("update")
        if upd.__class__ is not dict:
            return None
        if update in ("tool_call", "tool_call_update", "tool_call_content_chunk"):
            return ("tool_call", _hashable(upd.get("toolCallId")))
        if update == "plan":  # v1: the session's one plan
            return ("plan", None)
        if update == "state_update":
            return ("state", None)
        from acp_pipes.fold.entities import UPDATES  # (the fold's table, when first needed)

        known = UPDATES.get(update)
        if known is not None:
            kind, field, _how = known
            ident = upd.get(field)
            if ident is None and update in CHUNKS:
                return (kind, None)
            return (kind, _hashable(ident))
        return None
    if method is None:
        return None
    if method == "session/request_permission":
        tid = _tool_call_id(params)
        return ("tool_call", _hashable(tid)) if tid is not None else None
    if method.startswith("fs/"):
        return ("file", _hashable(params.get("path")))
    if method.startswith("terminal/") and method != "terminal/create":
        return ("terminal", _hashable(params.get("terminalId")))
    if method.startswith("elicitation/"):
        eid = params.get("elicitationId")
        return ("elicitation", _hashable(eid)) if eid is not None else None
    return None


def _hashable(x: Any) -> Any:
    return x if x is None or isinstance(x, (str, int, float, bool)) else repr(x)

"""What an ASR record is the record of: its entity's key, and a message's ID space.

The recorder (:mod:`acp_pipes.asr.records`) keys each record as it writes it; every
reader of a stream (``acp-asr --validate``, the replay, its equivalence check) keys it
again from the record alone, here, by the same rule: an entity is its kind and its native
ID (ASR-706, ASR-717), and a message's kind is its ID space, since ACP's message types
each have their own (ASR-724): a user message, an agent message and a thought (an
assistant message of reasoning parts only, ASR-727) may share an ID and stay three.
"""

from __future__ import annotations

from typing import Any

from acp_pipes.protocol.messages import reasoning_only

__all__ = ["entity_key", "message_space"]

#: The field holding an entity's native ID, by record type; "cause": a file change is
#: its tool call's.
ENTITY_ID = {"tool_call": "callId", "tool_result": "callId", "file_change": "cause",
             "plan": "planId", "permission": "requestId", "input_request": "requestId",
             "terminal": "terminalId", "compaction": "compactionId",
             "subagent": "childSession"}


def entity_key(rec: dict[str, Any]) -> tuple[Any, ...] | None:
    """The entity a record records, as the recorder keys it: its type, and for a message
    its ID space; None for an event (state, usage_summary, ...) or an audit record.

    >>> entity_key({"type": "message", "role": "assistant", "messageId": "m",
    ...             "content": [{"type": "reasoning", "text": "hm"}]})
    ('thought', 'm')
    >>> entity_key({"type": "file_change", "cause": {"callId": "c1"}})
    ('file_change', 'c1')
    >>> entity_key({"type": "state"}) is None
    True
    """
    t = rec.get("type")
    if t == "message":
        mid = rec.get("messageId")
        origin = rec.get("origin")
        if origin == "notice" or origin == "inter_session":
            return (origin, mid)
        if rec.get("role") == "assistant" and reasoning_only(rec.get("content")):
            return ("thought", mid)
        return (rec.get("role"), mid)
    field = ENTITY_ID.get(t) if isinstance(t, str) else None
    if field is None:
        return None
    if field == "cause":
        cause = rec.get("cause")
        return (t, cause.get("callId") if isinstance(cause, dict) else None)
    return (t, rec.get(field))


def message_space(rec: dict[str, Any]) -> str:
    """The ACP message type a message record replays as, which is its ID space (ACP's
    MessageId: "messages of different types may share an ID and remain distinct
    messages"): ``user``, ``thought`` (reasoning parts only, ASR-727) or ``agent``.
    Another role than user is replayed as an agent message.

    >>> message_space({"role": "assistant", "content": [{"type": "reasoning"}]})
    'thought'
    >>> message_space({"role": "assistant", "content": []})
    'agent'
    """
    if rec.get("role") == "user":
        return "user"
    return "thought" if reasoning_only(rec.get("content")) else "agent"

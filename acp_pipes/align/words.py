"""Words for people: one short line for a frame or an ASR record, safe for a terminal.

What a diff line or a graph label says about a step: the method, the update kind, a
state, a snippet of the prompt or message text. Recorded strings are untrusted: every
character that would act on a terminal (ESC, BEL, bidirectional overrides) is written as
an escape (:func:`acp_pipes.io.terminal.printable`).
"""

from __future__ import annotations

from typing import Any

import orjson

from acp_pipes.io.terminal import printable
from acp_pipes.io.wire import decode_raw
from acp_pipes.protocol.canonical import parse_json
from acp_pipes.protocol.jsontext import dumps as _dumps  # lone surrogates escaped, not refused

__all__ = ["asr_kind", "clip", "message_of_record", "summarize_message",
           "summarize_record", "summary_of_line", "text_of"]


def asr_kind(rec: dict) -> str | None:
    """The sub-kind worth showing next to an ASR record's type (role, state, status)."""
    for name in ("role", "state", "kind", "status"):
        v = rec.get(name)
        if isinstance(v, str):
            return v
    return None


def message_of_record(rec: Any) -> Any:
    """The JSON-RPC message a trace line holds: a wire or frame record's bytes, parsed
    (the text itself when they are not JSON), or the line itself in a bare stream."""
    return _message(rec)[0]


_UNREADABLE = "(unreadable frame)"


def _message(rec: Any) -> tuple[Any, bool]:
    """:func:`message_of_record`, and whether it is JSON (False: the text, or
    :data:`_UNREADABLE` when the record's bytes cannot be had)."""
    if isinstance(rec, dict) and "dir" in rec and ("raw" in rec or "raw_b64" in rec):
        try:
            msg_raw = decode_raw(rec)
        except ValueError:
            return _UNREADABLE, False
        try:
            return parse_json(msg_raw), True
        except ValueError:
            return msg_raw.decode("utf-8", "replace"), False
    return rec, True


def summary_of_line(raw: bytes, kind: str) -> str:
    try:
        rec = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return clip(raw.decode("utf-8", "replace"))
    if kind == "asr":
        return summarize_record(rec) if isinstance(rec, dict) else clip(str(rec))
    msg, is_json = _message(rec)
    if is_json:
        return summarize_message(msg)
    return msg if msg is _UNREADABLE else "(not JSON) " + clip(msg)


def clip(text: str, width: int = 60) -> str:
    text = printable(" ".join(text.split()))
    return text if len(text) <= width else text[: width - 1] + "…"


def text_of(value: Any) -> str | None:
    """The first text found in a content block, a list of blocks, or a chunk."""
    if isinstance(value, dict):
        t = value.get("text")
        if isinstance(t, str):
            return t
        for k in ("content", "prompt"):
            if k in value:
                found = text_of(value[k])
                if found is not None:
                    return found
    elif isinstance(value, list):
        for v in value:
            found = text_of(v)
            if found is not None:
                return found
    return None


def summarize_message(msg: Any) -> str:
    """One short line for an ACP JSON-RPC message: method, update kind, a snippet of text,
    every character that would act on a terminal escaped (:func:`printable`).

    >>> summarize_message({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
    ...   "params": {"prompt": [{"type": "text", "text": "hello 1"}]}})
    'session/prompt "hello 1"'
    """
    return printable(_summarize_message(msg))


def _summarize_message(msg: Any) -> str:
    if not isinstance(msg, dict):
        return clip(_dumps(msg).decode())
    method = msg.get("method")
    params = msg.get("params")
    if isinstance(method, str):
        parts = [method]
        if isinstance(params, dict):
            upd = params.get("update")
            if isinstance(upd, dict):
                su = upd.get("sessionUpdate")
                if isinstance(su, str):
                    parts.append(su)
                for k in ("state", "status", "stopReason"):
                    if isinstance(upd.get(k), str):
                        parts.append(upd[k])
                text = text_of(upd)
            else:
                text = text_of(params)
            if text is not None:
                parts.append(_dumps(clip(text, 40)).decode())
        return " ".join(parts)
    if "error" in msg:
        err = msg["error"]
        if isinstance(err, dict):
            return f"error {err.get('code')} {clip(str(err.get('message', '')), 40)}"
        return "error"
    if "result" in msg:
        res = msg["result"]
        if isinstance(res, dict):
            if not res:
                return "result {}"
            keys = ",".join(list(res)[:4])
            for k in ("stopReason", "sessionId", "messageId"):
                if isinstance(res.get(k), str):
                    return f"result {k}={clip(res[k], 30)}"
            return f"result {{{keys}}}"
        return "result " + clip(_dumps(res).decode(), 40)
    return clip(_dumps(msg).decode())


def summarize_record(rec: dict) -> str:
    """One short line for an ASR record: its type, sub-kind and a snippet of text."""
    return printable(_summarize_record(rec))


def _summarize_record(rec: dict) -> str:
    parts = [str(rec.get("type"))]
    kind = asr_kind(rec)
    if kind:
        parts.append(kind)
    for k in ("name", "childSession", "title"):
        if isinstance(rec.get(k), str):
            parts.append(clip(rec[k], 30))
            break
    text = text_of(rec)
    if text is not None:
        parts.append(_dumps(clip(text, 40)).decode())
    return " ".join(parts)

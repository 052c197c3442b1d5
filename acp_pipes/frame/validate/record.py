"""A violation record as ``--validate`` writes it, and the small rules of how it quotes a
frame: ids as JSON, lone surrogates as escapes (a record must be UTF-8).

Every part of the checker (:mod:`acp_pipes.frame.validate.checker`, the turn rules in
:mod:`acp_pipes.frame.validate.turns`) makes its records here, so they all have the one
field order the docs show.
"""

from __future__ import annotations

from typing import Any

import orjson

from acp_pipes.frame.validate.schema import Schema
from acp_pipes.protocol.jsonrpc import why_not_jsonrpc

__all__ = ["escaped", "show_id", "violation", "why_not"]


def violation(f: dict[str, Any], rule: str, pointer: str, message: str,
              s: Schema | str | None = None, location: str | None = None,
              words: str | None = None, related: int | None = None,
              level: str | None = None) -> dict[str, Any]:
    """The violation record of frame ``f`` breaking ``rule`` at ``pointer``; ``s`` the
    schema (or the name of its file) that states the rule, ``location`` and ``words``
    where and how it does."""
    v: dict[str, Any] = {"seq": f["seq"], "dir": f["dir"], "kind": f["kind"],
                         "method": f.get("method")}
    if "id" in f:
        v["id"] = f["id"]
    v["rule"] = rule
    v["pointer"] = _utf8(pointer)
    v["message"] = _utf8(message)
    v["schema"] = s.file if isinstance(s, Schema) else s
    v["location"] = location
    v["words"] = words
    if related is not None:
        v["related"] = related
    if level is not None:
        v["level"] = level
    return v


def why_not(msg: Any) -> str:
    """Why acp-frame did not take a JSON value for a JSON-RPC message."""
    if msg.__class__ is dict and msg.get("jsonrpc") == "2.0" and (
            msg.get("method").__class__ is str or ("id" in msg and "method" not in msg
                                                   and ("result" in msg) != ("error" in msg))):
        return "a lone surrogate in its method, id or sessionId"  # all else is JSON-RPC
    return why_not_jsonrpc(msg)


def escaped(value: Any) -> Any:
    """``value`` with every string holding a lone surrogate (which has no UTF-8 form, so
    no validator takes it) written with the surrogate as an escape: still a string."""
    if value.__class__ is str:
        return _utf8(value)
    if value.__class__ is dict:
        return {_utf8(k): escaped(v) for k, v in value.items()}
    if value.__class__ is list:
        return [escaped(v) for v in value]
    return value


def _utf8(text: str) -> str:
    """``text``, its lone surrogates (a frame's ``"\\udc00"``, quoted in a message)
    written as escapes: a record must be UTF-8."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def show_id(rid: Any) -> str:
    """An id (or any value) as a message quotes it: as JSON."""
    return orjson.dumps(rid).decode()

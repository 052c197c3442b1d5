"""JSON-RPC 2.0 messages as ACP sends them: one compact JSON object, no trailing LF.

The agents acp-pipes runs (the echo agent, ``acp-replay --serve``) build their frames
here, so error codes and member order are the same everywhere. Members come in the
order ``jsonrpc, id, method|result|error, params``, as ACP's SDKs write them.

>>> response(1, {"sessionId": "s"})
b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}'
>>> error("x", METHOD_NOT_FOUND, "method not found: foo")
b'{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"method not found: foo"}}'

The agents also answer what they cannot parse whole (nesting deeper than the parser
reads): :func:`member_spans` finds the top-level members of a JSON object in its bytes,
walking only as deep as the top level, so the request's own ``id`` can be answered.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from acp_pipes.protocol.jsontext import dumps as _dumps

# JSON-RPC 2.0's own codes, and the ACP ones acp-pipes uses.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002  # ACP: unknown session
REQUEST_CANCELLED = -32800  # ACP: the request was cancelled

def _id(rid: Any) -> bytes:
    """A request id as JSON, the one the peer sent: an integer exactly, whatever its size
    (orjson stops at 64 bits), a string with a lone surrogate escaped (orjson refuses
    one); an ``orjson.Fragment`` (the id's token from the request line) as it is."""
    if type(rid) is int:
        return str(rid).encode()
    return _dumps(rid)


def response(rid: Any, result: Any) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + _id(rid) + b',"result":' + _dumps(result) + b"}"


def error(rid: Any, code: int, message: str, data: Any = None) -> bytes:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return b'{"jsonrpc":"2.0","id":' + _id(rid) + b',"error":' + _dumps(err) + b"}"


def request(rid: Any, method: str, params: Any) -> bytes:
    return _dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def notification(method: str, params: Any) -> bytes:
    return _dumps({"jsonrpc": "2.0", "method": method, "params": params})


# -- what a message is --------------------------------------------------------------------

_INT64, _UINT64 = -(2**63), 2**64


def is_jsonrpc_id(x: Any) -> bool:
    """A JSON-RPC id a record can carry as sent: a string, a number or null; an integer
    within 64 bits (orjson writes no wider one)."""
    c = x.__class__
    return x is None or c is str or c is float or (c is int and _INT64 <= x < _UINT64)


#: A request id as a dict key (:func:`id_key`).
IdKey = tuple[str, Any]


def id_key(rid: Any) -> IdKey:
    """A request id as a dict key: the one rule every tool pairs a response with its
    request by. JSON-RPC compares ids as the JSON values they are, so ``1``, ``1.0``,
    ``"1"`` and ``true`` are four ids (Python alone would take ``1``, ``1.0`` and ``True``
    for one key); an id that is no JSON-RPC id (an object, an array) keys by its text.

    >>> len({id_key(1), id_key(1.0), id_key("1"), id_key(True)})
    4
    >>> id_key([1]) == id_key([1])
    True
    """
    c = rid.__class__
    return (c.__name__, repr(rid) if c is dict or c is list else rid)


def classify(value: Any) -> tuple[str, Any, Any, Any]:
    """``(kind, method, id, sessionId)`` of a parsed message: kind is request,
    notification, response, error or not_jsonrpc; method and id as they apply (None
    otherwise); sessionId a string of the params, or of a response's result, or None.
    The one reading of JSON-RPC 2.0 every tool shares (acp-frame inlines it, measured)."""
    if value.__class__ is not dict or value.get("jsonrpc") != "2.0":
        return "not_jsonrpc", None, None, None
    method = value.get("method")
    rid = value.get("id")
    sid = None
    if method.__class__ is str:
        params = value.get("params")
        if params.__class__ is dict:
            sid = params.get("sessionId")
        if "id" not in value:
            return "notification", method, None, sid if sid.__class__ is str else None
        if is_jsonrpc_id(rid):
            return "request", method, rid, sid if sid.__class__ is str else None
    elif method is None and "id" in value and is_jsonrpc_id(rid) and (
            ("result" in value) is not ("error" in value)):
        result = value.get("result")
        if result.__class__ is dict:
            sid = result.get("sessionId")
        return ("response" if "result" in value else "error", None, rid,
                sid if sid.__class__ is str else None)
    return "not_jsonrpc", None, None, None


def why_not_jsonrpc(value: Any) -> str:
    """Why a parsed value is not a JSON-RPC 2.0 message (for the diagnostic)."""
    if isinstance(value, list):
        return "a batch (JSON array)" if value else "an empty JSON array"
    if not isinstance(value, dict):
        return f"a JSON {type(value).__name__.replace('str', 'string')}, not an object"
    if value.get("jsonrpc") != "2.0":
        return 'no "jsonrpc": "2.0"'
    if "method" in value and not isinstance(value["method"], str):
        return "method is not a string"
    if "id" in value and not is_jsonrpc_id(value["id"]):
        return "id is not a string, a number (an integer within 64 bits) or null"
    if "result" in value and "error" in value:
        return "both result and error"
    if "method" not in value and "id" not in value:
        return "neither a method nor an id"
    return "neither a method nor a result or error"


# -- the top level of a JSON object, in its bytes ------------------------------------------

_WS = re.compile(rb"[ \t\r\n]*")
#: _WS.match: it matches the empty string, so it is never None
_ws: Callable[[bytes, int], re.Match[bytes]] = _WS.match  # type: ignore[assignment]
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
# inside a nested value: the next byte that matters (a string start or a bracket)
_NESTED = re.compile(rb'["{}\[\]]')
# a scalar token: number, true, false, null (ends before , } ] or whitespace)
_SCALAR = re.compile(rb"[^,}\]\s]+")


def _skip_value(raw: bytes, i: int) -> int:
    """The index just past the JSON value starting at ``i``; ValueError if malformed.
    Nested values are skipped by counting brackets: no recursion, any depth."""
    c = raw[i : i + 1]
    if c == b'"':
        m = _STRING.match(raw, i)
        if m is None:
            raise ValueError("unterminated string")
        return m.end()
    if c in (b"{", b"["):
        depth = 0
        pos = i
        n = len(raw)
        while pos < n:
            m = _NESTED.search(raw, pos)
            if m is None:
                break
            ch = raw[m.start()]
            if ch == 0x22:  # '"'
                s = _STRING.match(raw, m.start())
                if s is None:
                    raise ValueError("unterminated string")
                pos = s.end()
                continue
            pos = m.end()
            if ch in (0x7B, 0x5B):  # { [
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    return pos
        raise ValueError("unterminated object or array")
    m = _SCALAR.match(raw, i)
    if m is None:
        raise ValueError("no value")
    return m.end()


def _key(token: bytes) -> str:
    """An escaped key, decoded (a lone surrogate too, which orjson refuses)."""
    try:
        return orjson.loads(token)
    except orjson.JSONDecodeError:
        import json

        return json.loads(token)


def top_level_members(line: bytes, parse: Callable[[bytes], Any],
                      refused: tuple[type[BaseException], ...]) -> dict | None:
    """What a line too deep to parse whole says at its top level: ``jsonrpc``,
    ``method`` and ``id`` parsed from their own bytes by ``parse``, the other members
    present as None; None when the line is no object. A member ``parse`` refuses (one of
    ``refused``) becomes ``[None]``, a value no method or id can be: the agent answers
    "invalid request" under the id it could read, rather than die."""
    spans = member_spans(line)
    if spans is None:
        return None
    msg: dict[str, Any] = {}
    for key, (start, end) in spans.items():
        value = None
        if key in ("jsonrpc", "method", "id"):
            try:
                value = parse(line[start:end])
            except refused:
                value = [None]
        msg[key] = value
    return msg


def member_spans(raw: bytes) -> dict[str, tuple[int, int]] | None:
    """``{key: (start, end)}`` of each top-level member's value token in the JSON object
    ``raw`` (None when ``raw`` is not an object). Keys are decoded (``"\\u0069d"`` is
    ``id``); a repeated key gives its last value, as orjson and the json module read it.
    Values are skipped, not parsed: any depth, tolerant of what lies inside them.

    >>> raw = b'{ "params": {"id": 1, "s": "\\\\"id\\\\": 2"}, "id" :\\t"a\\\\"b" }'
    >>> start, end = member_spans(raw)["id"]
    >>> raw[start:end]
    b'"a\\\\"b"'
    """
    try:
        i = _ws(raw, 0).end()
        if raw[i : i + 1] != b"{":
            return None
        i = _ws(raw, i + 1).end()
        found: dict[str, tuple[int, int]] = {}
        if raw[i : i + 1] == b"}":
            return found
        n = len(raw)
        while i < n:
            m = _STRING.match(raw, i)
            if m is None:
                return None
            key = m.group()
            name = key[1:-1].decode("utf-8") if b"\\" not in key else _key(key)
            i = _ws(raw, m.end()).end()
            if raw[i : i + 1] != b":":
                return None
            i = _ws(raw, i + 1).end()
            end = _skip_value(raw, i)
            found[name] = (i, end)
            i = _ws(raw, end).end()
            c = raw[i : i + 1]
            if c == b",":
                i = _ws(raw, i + 1).end()
                continue
            if c == b"}":
                return found
            return None
    except (ValueError, orjson.JSONDecodeError):  # UnicodeDecodeError is a ValueError
        return None
    return None


def element_spans(raw: bytes) -> list[tuple[int, int]] | None:
    """``(start, end)`` of each element of the JSON array ``raw`` (a batch), skipped as
    :func:`member_spans` skips values; None when ``raw`` is not an array.

    >>> element_spans(b'[ {"id":1}, [[2]] ]')
    [(2, 10), (12, 17)]
    """
    try:
        i = _ws(raw, 0).end()
        if raw[i : i + 1] != b"[":
            return None
        i = _ws(raw, i + 1).end()
        found: list[tuple[int, int]] = []
        if raw[i : i + 1] == b"]":
            return found
        n = len(raw)
        while i < n:
            end = _skip_value(raw, i)
            found.append((i, end))
            i = _ws(raw, end).end()
            c = raw[i : i + 1]
            if c == b",":
                i = _ws(raw, i + 1).end()
                continue
            if c == b"]":
                return found
            return None
    except ValueError:
        return None
    return None


def id_span(raw: bytes) -> tuple[int, int] | None:
    """``(start, end)`` of the value token of the top-level ``"id"`` member, or None.

    >>> raw = b'{"params":{"id":1},"id":7}'
    >>> start, end = id_span(raw)
    >>> raw[start:end]
    b'7'
    >>> id_span(b'{"method":"x"}') is None
    True
    """
    spans = member_spans(raw)
    return None if spans is None else spans.get("id")

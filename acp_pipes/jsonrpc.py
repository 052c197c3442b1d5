"""JSON-RPC 2.0 messages as ACP sends them: one compact JSON object, no trailing LF.

The agents acp-pipes runs (the echo agent, ``acp-replay --serve``) build their frames
here, so error codes and member order are the same everywhere. Members come in the
order ``jsonrpc, id, method|result|error, params``, as ACP's SDKs write them.

>>> response(1, {"sessionId": "s"})
b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}'
>>> error("x", METHOD_NOT_FOUND, "method not found: foo")
b'{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"method not found: foo"}}'
"""

from __future__ import annotations

from typing import Any

import orjson

# JSON-RPC 2.0's own codes, and the ACP ones acp-pipes uses.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002  # ACP: unknown session
REQUEST_CANCELLED = -32800  # ACP: the request was cancelled

_dumps = orjson.dumps


def _id(rid: Any) -> bytes:
    """A request id as JSON, the one the peer sent: an integer exactly, whatever its size
    (orjson stops at 64 bits), a string with a lone surrogate escaped (orjson refuses
    one)."""
    if type(rid) is int:
        return str(rid).encode()
    try:
        return _dumps(rid)
    except TypeError:
        import json  # only for such ids

        return json.dumps(rid).encode()


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

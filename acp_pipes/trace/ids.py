"""JSON-RPC id surgery on raw bytes, for ``--remap-ids``.

Replay must stay byte-exact while giving each side its own ids, so a recorded frame is
never re-serialised: the id token is spliced into the recorded bytes at the position of
the top-level ``"id"`` member, and every other byte stays as recorded. The scanner below
walks just enough JSON to find that member: it skips nested values and strings whole
(so ``{"params":{"id":1},"x":"\\"id\\":2","id":3}`` finds the ``3``), tolerates any JSON
whitespace, decodes escaped keys (``"\\u0069d"`` is ``id``), and gives the last ``id``
when a (bad) sender repeats it, as orjson and the stdlib parser do.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

__all__ = ["id_key", "id_span", "note_live_id", "splice_id"]

_WS = re.compile(rb"[ \t\r\n]*")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
# inside a nested value: the next byte that matters (a string start or a bracket)
_NESTED = re.compile(rb'["{}\[\]]')
# a scalar token: number, true, false, null (ends before , } ] or whitespace)
_SCALAR = re.compile(rb"[^,}\]\s]+")


def id_key(value: Any) -> bytes:
    """A dict key for a JSON-RPC id that keeps ``1`` and ``"1"`` apart."""
    return orjson.dumps(value)


def _skip_value(raw: bytes, i: int) -> int:
    """The index just past the JSON value starting at ``i``; ValueError if malformed."""
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


def id_span(raw: bytes) -> tuple[int, int] | None:
    """``(start, end)`` of the value token of the top-level ``"id"`` member, or None.

    >>> raw = b'{ "params": {"id": 1, "s": "\\\\"id\\\\": 2"}, "id" :\\t"a\\\\"b" }'
    >>> start, end = id_span(raw)
    >>> raw[start:end]
    b'"a\\\\"b"'
    >>> id_span(b'{"method":"x"}') is None
    True
    """
    try:
        i = _WS.match(raw, 0).end()
        if raw[i : i + 1] != b"{":
            return None
        i = _WS.match(raw, i + 1).end()
        found = None
        if raw[i : i + 1] == b"}":
            return None
        n = len(raw)
        while i < n:
            m = _STRING.match(raw, i)
            if m is None:
                return None
            key = m.group()
            if key == b'"id"' or (b"\\" in key and orjson.loads(key) == "id"):
                is_id = True
            else:
                is_id = False
            i = _WS.match(raw, m.end()).end()
            if raw[i : i + 1] != b":":
                return None
            i = _WS.match(raw, i + 1).end()
            end = _skip_value(raw, i)
            if is_id:
                found = (i, end)
            i = _WS.match(raw, end).end()
            c = raw[i : i + 1]
            if c == b",":
                i = _WS.match(raw, i + 1).end()
                continue
            if c == b"}":
                return found
            return None
    except (ValueError, orjson.JSONDecodeError):
        return None
    return None


def splice_id(raw: bytes, token: bytes, span: tuple[int, int] | None = None) -> bytes:
    """``raw`` with its top-level id token replaced by ``token`` (JSON text of the new
    id); unchanged when it has no top-level id.

    >>> splice_id(b'{"jsonrpc":"2.0", "id": 7 ,"result":{"id":7}}', b'"x-1"')
    b'{"jsonrpc":"2.0", "id": "x-1" ,"result":{"id":7}}'
    """
    if span is None:
        span = id_span(raw)
        if span is None:
            return raw
    return raw[: span[0]] + token + raw[span[1] :]


def note_live_id(ids: dict[bytes, bytes], recorded: dict[str, Any], raw: bytes,
                 direction: str, remap_log: Any = None) -> None:
    """Remember the live id token of ``raw`` (the live frame matched to the ``recorded``
    request) under the recorded id's key, and log the pair to ``remap_log`` (a binary
    file, ``--remap-log``) as one JSON line: both replay engines remap this way."""
    span = id_span(raw)
    if span is None:
        return
    token = raw[span[0] : span[1]]
    ids[id_key(recorded.get("id"))] = token
    if remap_log is not None:
        remap_log.write(orjson.dumps({
            "recorded": recorded.get("id"), "live": orjson.loads(token), "dir": direction,
            "seq": recorded.get("seq")}) + b"\n")

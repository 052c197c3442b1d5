"""JSON-RPC id surgery on raw bytes, for ``--remap-ids``.

Replay must stay byte-exact while giving each side its own ids, so a recorded frame is
never re-serialised: the id token is spliced into the recorded bytes at the position of
the top-level ``"id"`` member, and every other byte stays as recorded. The scanner
(:func:`acp_pipes.protocol.jsonrpc.id_span`, which the echo agent uses too) walks just enough
JSON to find that member: it skips nested values and strings whole (so
``{"params":{"id":1},"x":"\\"id\\":2","id":3}`` finds the ``3``), tolerates any JSON
whitespace, decodes escaped keys (``"\\u0069d"`` is ``id``), and gives the last ``id``
when a (bad) sender repeats it, as orjson and the stdlib parser do; where the bytes
allow, :func:`top_id_span` finds it with one search instead.
"""

from __future__ import annotations

import re
from typing import Any

from acp_pipes.protocol.jsonrpc import IdKey, id_key, id_span
from acp_pipes.protocol.jsontext import dumps
from acp_pipes.sameness.events import UNPARSED, parse

__all__ = ["frame_value", "id_span", "note_live_id", "splice_id", "top_id_span"]

#: a top-level id member's value token, when ``"id"`` is in the bytes once (see top_id_span)
_ID_TOKEN = re.compile(rb'"id"[ \t\r\n]*:[ \t\r\n]*("(?:[^"\\]|\\.)*"|[^,}\]\s{\[][^,}\]\s]*)',
                       re.S)


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


def note_live_id(ids: dict[IdKey, bytes], recorded: dict[str, Any], raw: bytes,
                 direction: str, remap_log: Any = None) -> None:
    """Remember the live id token of ``raw`` (the live frame matched to the ``recorded``
    request) under the recorded id's key, and log the pair to ``remap_log`` (a binary
    file, ``--remap-log``) as one JSON line: both replay engines remap this way."""
    span = id_span(raw)
    if span is None:
        return
    token = raw[span[0] : span[1]]
    ids[id_key(recorded.get("id"))] = token
    if remap_log is not None:  # the live id as its token: byte for byte, whatever it is
        remap_log.write(b'{"recorded":' + dumps(recorded.get("id")) + b',"live":' + token
                        + b',"dir":' + dumps(direction) + b',"seq":'
                        + dumps(recorded.get("seq")) + b"}\n")


def top_id_span(raw: bytes, has_id: bool) -> tuple[int, int] | None:
    """:func:`acp_pipes.protocol.jsonrpc.id_span` of a JSON object that has a top-level ``id``
    (``has_id``), found at once when ``"id"`` is in its bytes once and no ``\\u``
    escape could spell it otherwise: then that one is the top-level key. Else (a nested
    id too, or an object or array as the id) the scanner walks the object, which for a
    request with big params took ~0.1 ms.

    >>> raw = b'{"jsonrpc":"2.0","id" :\t"r-1","method":"m","params":{"x":[1]}}'
    >>> raw[slice(*top_id_span(raw, True))], top_id_span(raw, True) == id_span(raw)
    (b'"r-1"', True)
    >>> raw = b'{"id":7,"params":{"id":1}}'  # twice: the scanner's answer
    >>> top_id_span(raw, True) == id_span(raw) == (6, 7)
    True
    """
    if has_id and b"\\u" not in raw and raw.count(b'"id"') == 1:
        m = _ID_TOKEN.search(raw)
        if m is not None:
            return m.span(1)
    return id_span(raw)


def frame_value(raw: bytes) -> Any:
    """A frame's JSON value (:func:`acp_pipes.sameness.events.parse`); the text itself
    when it is not JSON (then nothing equals it but the same text)."""
    value = parse(raw)
    return raw.decode("utf-8", "replace") if value is UNPARSED else value

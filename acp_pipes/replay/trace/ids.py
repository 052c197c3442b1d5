"""JSON-RPC id surgery on raw bytes, for ``--remap-ids``.

Replay must stay byte-exact while giving each side its own ids, so a recorded frame is
never re-serialised: the id token is spliced into the recorded bytes at the position of
the top-level ``"id"`` member, and every other byte stays as recorded. The scanner
(:func:`acp_pipes.protocol.jsonrpc.id_span`, which the echo agent uses too) walks just enough
JSON to find that member: it skips nested values and strings whole (so
``{"params":{"id":1},"x":"\\"id\\":2","id":3}`` finds the ``3``), tolerates any JSON
whitespace, decodes escaped keys (``"\\u0069d"`` is ``id``), and gives the last ``id``
when a (bad) sender repeats it, as orjson and the stdlib parser do.
"""

from __future__ import annotations

from typing import Any

from acp_pipes.protocol.jsonrpc import id_span
from acp_pipes.sameness.jsondiff import dumps

__all__ = ["id_key", "id_span", "note_live_id", "splice_id"]


def id_key(value: Any) -> bytes:
    """A dict key for a JSON-RPC id that keeps ``1`` and ``"1"`` apart."""
    return dumps(value)


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
    if remap_log is not None:  # the live id as its token: byte for byte, whatever it is
        remap_log.write(b'{"recorded":' + dumps(recorded.get("id")) + b',"live":' + token
                        + b',"dir":' + dumps(direction) + b',"seq":'
                        + dumps(recorded.get("seq")) + b"}\n")

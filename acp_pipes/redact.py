"""Keep MCP credentials out of wire logs, without changing what replay matches on.

ACP clients hand the agent its MCP servers in the params of session requests
(``session/new``, ``session/resume``, ``session/fork`` in v2; also ``session/load`` in
v1): ``mcpServers`` is an array of server configurations whose ``env`` (stdio
transport) and ``headers`` (http, and sse in v1) are arrays of ``{name, value}``, and
those values are API keys and bearer tokens. A wire log is a file people share, so
acp-tee logs such frames with every ``env``/``headers`` value replaced by
:data:`PLACEHOLDER`, keeping the names so the log still says what was configured.

Why this shape:

- The match is by *place*, not by method: any request (or batch member) whose
  ``params.mcpServers`` is an array has its servers' ``env``/``headers`` redacted, so a
  method added later, a v1 ``session/load`` or an ``other`` transport is covered too.
  An ``env``/``headers`` given as a JSON object (``{"NAME": "value"}``, a shape some
  clients use) has every value replaced.
- ``args``, ``url`` and ``command`` are left as sent: they name what runs and where, and
  are what a reader of the log needs; a credential passed on a command line or in a URL
  is not recognised (use ``--keep-secrets`` consciously, or keep such logs private).
- The caller keeps the canonical hash of the frame *as sent*
  (:func:`acp_pipes.canonical.canonical_hash`), so replay still matches the live
  client's frame although the logged bytes differ.
- The bytes forwarded to the agent are never touched: this module only computes the
  logged stand-in.
- A frame that names ``mcpServers`` but cannot be checked (not JSON, not UTF-8) is
  logged as :data:`UNCHECKED` with the ``blake3-raw:`` identity of its bytes, so broken
  bytes never carry a secret into the log. One whose JSON text repeats a key is logged
  as its parsed (last-key-wins), redacted value: the shadowed copy is what a first-wins
  parser would read, and it would otherwise stay in the log verbatim.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PLACEHOLDER", "UNCHECKED", "redact", "redact_value"]

PLACEHOLDER = "<redacted>"
#: Logged for a frame naming mcpServers that is not JSON (so not checkable for secrets).
UNCHECKED = b'"<redacted: frame could not be checked for secrets>"'
_MARK = b"mcpServers"
_SECRET_FIELDS = ("env", "headers")


def redact(raw: bytes) -> tuple[bytes | None, str | None]:
    """``(logged_bytes, original_hash)`` for one frame (bytes without LF).

    ``(None, None)`` when there is nothing to redact: the frame does not mention
    ``mcpServers`` or carries no secret value. Otherwise the redacted frame serialised
    compactly with orjson, and the canonical hash of the frame as sent (None if it has
    no canonical form, e.g. a lone surrogate). A trailing CR is kept. A frame naming
    ``mcpServers`` that is not JSON gives ``(UNCHECKED, "blake3-raw:<hex>")``.
    """
    if _MARK not in raw:  # the cheap check that keeps the per-frame path fast
        return None, None
    from acp_pipes.canonical import CanonicalError, ParseError, canonical_hash, parse_json
    from acp_pipes.frame import raw_hash

    try:
        value = parse_json(raw)
    except (ParseError, UnicodeDecodeError, RecursionError):
        return UNCHECKED, raw_hash(raw)
    redacted, changed = redact_value(value)
    if not changed and not _repeats_a_key(raw):
        return None, None
    try:
        original_hash: str | None = canonical_hash(value)
    except (CanonicalError, RecursionError):
        original_hash = None
    out = _dumps(redacted)
    if raw.endswith(b"\r"):
        out += b"\r"
    return out, original_hash


def redact_value(message: Any) -> tuple[Any, bool]:
    """A copy of a JSON-RPC message (or batch) with MCP secrets replaced, and whether
    anything was. The input is not modified."""
    if isinstance(message, list):  # a batch: its members are messages (one level only)
        changed = False
        out = []
        for item in message:
            r, c = _redact_message(item) if isinstance(item, dict) else (item, False)
            out.append(r)
            changed |= c
        return (out, True) if changed else (message, False)
    if not isinstance(message, dict):
        return message, False
    return _redact_message(message)


def _redact_message(message: dict) -> tuple[Any, bool]:
    params = message.get("params")
    if not isinstance(params, dict):
        return message, False
    servers = params.get("mcpServers")
    if not isinstance(servers, list):
        return message, False
    changed = False
    new_servers = []
    for server in servers:
        s, c = _redact_server(server)
        new_servers.append(s)
        changed |= c
    if not changed:
        return message, False
    return {**message, "params": {**params, "mcpServers": new_servers}}, True


def _redact_server(server: Any) -> tuple[Any, bool]:
    if not isinstance(server, dict):
        return server, False
    changed = False
    out = server
    for field in _SECRET_FIELDS:
        entries = server.get(field)
        new: Any
        if isinstance(entries, list):
            new = []
            hit = False
            for e in entries:
                if isinstance(e, dict) and "value" in e and e["value"] != PLACEHOLDER:
                    e = {**e, "value": PLACEHOLDER}
                    hit = True
                new.append(e)
        elif isinstance(entries, dict):
            hit = any(v != PLACEHOLDER for v in entries.values())
            new = {k: PLACEHOLDER for k in entries}
        else:
            continue
        if hit:
            if out is server:
                out = dict(server)
            out[field] = new
            changed = True
    return out, changed


class _RepeatedKey(Exception):
    pass


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({k for k, _ in pairs}) != len(pairs):
        raise _RepeatedKey
    return dict(pairs)


def _repeats_a_key(raw: bytes) -> bool:
    """Whether any object in the JSON text ``raw`` has a key twice (parsed value loses it)."""
    import json

    try:
        json.loads(raw, object_pairs_hook=_no_repeats)
    except _RepeatedKey:
        return True
    except (ValueError, RecursionError):
        return False
    return False


def _dumps(value: Any) -> bytes:
    import orjson

    try:
        return orjson.dumps(value)
    except TypeError:  # an integer beyond 64 bits, which orjson cannot write
        import json

        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(
            "utf-8", "surrogatepass"
        )

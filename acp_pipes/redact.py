"""Keep MCP credentials out of wire logs and reports, without changing what replay matches on.

ACP clients hand the agent its MCP servers in the params of session requests
(``session/new``, ``session/resume``, ``session/fork`` in v2; also ``session/load`` in
v1): ``mcpServers`` is an array of server configurations whose ``env`` (stdio
transport) and ``headers`` (http, and sse in v1) are arrays of ``{name, value}``, and
those values are API keys and bearer tokens. A wire log is a file people share, so
acp-tee logs such frames with every ``env``/``headers`` value replaced by a *token*,
``"<redacted blake3:HEX>"`` (:func:`token`), keeping the names so the log still says
what was configured.

Why this shape:

- The token holds the canonical hash of the value it stands for, so a redacted frame
  still says everything about the frame as sent except the secret itself: two frames
  compared with their secrets tokenised (:func:`redact_value`, on both sides, before
  any ``--ignore`` or ``--remap-ids`` normaliser) are equal exactly when the frames as
  sent are. That is how replay and align match a redacted recording against a live
  client or a ``--keep-secrets`` recording under any normaliser
  (:meth:`acp_pipes.normalize.Normalizer.view`), and why every diff and report shows
  tokens, never values. The hash says no more than the frame's own hash already did (a
  guess of the secret can be checked against either).
- The match is by *place*, not by method: any request (or batch member) whose
  ``params.mcpServers`` is an array has its servers' ``env``/``headers`` redacted, so a
  method added later, a v1 ``session/load`` or an ``other`` transport is covered too.
  An ``env``/``headers`` given as a JSON object (``{"NAME": "value"}``, a shape some
  clients use) has every value replaced.
- ``args``, ``url`` and ``command`` are left as sent: they name what runs and where, and
  are what a reader of the log needs; a credential passed on a command line or in a URL
  is not recognised (use ``--keep-secrets`` consciously, or keep such logs private).
- The caller keeps the canonical hash of the frame *as sent*
  (:func:`acp_pipes.canonical.canonical_hash`), so replay without normalisers matches the
  live client's frame on that hash alone, although the logged bytes differ.
- The bytes forwarded to the agent are never touched: this module only computes the
  logged stand-in.
- The decision is made on the parsed value, which is what every parser reads: a key
  spelt with escapes (``"mcp\\u0053ervers"``) is the key. The byte test that keeps the
  per-frame path fast (:func:`may_hold_secrets`) therefore lets through every frame that
  names ``mcpServers`` *or holds any* ``\\u`` escape.
- A frame that may hold secrets but cannot be checked (not JSON, not UTF-8) is logged as
  :data:`UNCHECKED` with the ``blake3-raw:`` identity of its bytes, so broken bytes never
  carry a secret into the log. One whose JSON text repeats a key at any depth is logged
  as its parsed (last-key-wins), redacted value: the shadowed copy is what a first-wins
  parser would read, and it would otherwise stay in the log verbatim. The repeat check
  walks the text without recursion (:func:`repeats_a_key`), so no depth makes it give up.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "PLACEHOLDER",
    "UNCHECKED",
    "is_token",
    "may_hold_secrets",
    "redact",
    "redact_value",
    "repeats_a_key",
    "token",
]

#: A value whose hash cannot be taken (no canonical form), and what older logs hold.
PLACEHOLDER = "<redacted>"
_TOKEN_HEAD = "<redacted blake3:"
#: Logged for a frame naming mcpServers that is not JSON (so not checkable for secrets).
UNCHECKED = b'"<redacted: frame could not be checked for secrets>"'
_MARK = b"mcpServers"
_ESCAPE = b"\\u"  # any letter of the key may be written as \\uXXXX
_SECRET_FIELDS = ("env", "headers")


def may_hold_secrets(raw: bytes) -> bool:
    """False when the bytes of a frame cannot hold an MCP secret, whatever its JSON: it
    neither names ``mcpServers`` nor holds a ``\\u`` escape that could spell it."""
    return _MARK in raw or _ESCAPE in raw


def token(value: Any) -> str:
    """What a secret ``value`` is replaced by: ``"<redacted blake3:HEX>"``, the canonical
    hash of the value (:data:`PLACEHOLDER` for a value that has none).

    >>> token("sk-1")[:17], token("sk-1") == token("sk-1") != token("sk-2")
    ('<redacted blake3:', True)
    """
    from acp_pipes.canonical import CanonicalError, canonical_hash

    try:
        return "<redacted " + canonical_hash(value) + ">"
    except (CanonicalError, RecursionError):
        return PLACEHOLDER


def is_token(value: Any) -> bool:
    """Whether ``value`` already stands for a secret (a token, or an older log's
    :data:`PLACEHOLDER`), so redacting it again leaves it as it is."""
    return value.__class__ is str and (
        value == PLACEHOLDER or (value.startswith(_TOKEN_HEAD) and value.endswith(">")))


def redact(raw: bytes) -> tuple[bytes | None, str | None]:
    """``(logged_bytes, original_hash)`` for one frame (bytes without LF).

    ``(None, None)`` when there is nothing to redact: the frame carries no secret value
    (and repeats no key). Otherwise the redacted frame serialised compactly with orjson,
    and the hash acp-frame gives the frame as sent: its canonical hash, or the
    ``blake3-raw:`` identity of its bytes when it has no canonical form (a lone
    surrogate). A trailing CR is kept. A frame that names ``mcpServers`` but is not JSON
    (or nests too deep to write back) gives ``UNCHECKED`` and that hash.
    """
    if not may_hold_secrets(raw):  # the cheap check that keeps the per-frame path fast
        return None, None
    from acp_pipes.canonical import CanonicalError, ParseError, canonical_hash, parse_json
    from acp_pipes.frame import raw_hash

    try:
        value = parse_json(raw)
    except (ParseError, UnicodeDecodeError, RecursionError):
        if not _names_mcp_servers(raw):
            return None, None  # broken bytes that do not name mcpServers: logged as sent
        return UNCHECKED, raw_hash(raw)
    redacted, changed = redact_value(value)
    if not changed and not repeats_a_key(raw):
        return None, None
    try:
        original_hash = canonical_hash(value)
    except (CanonicalError, RecursionError):  # no canonical form: acp-frame's identity
        original_hash = raw_hash(raw)
    out = _dumps(redacted)
    if out is None:
        return UNCHECKED, original_hash
    if raw.endswith(b"\r"):
        out += b"\r"
    return out, original_hash


_UNICODE_ESCAPE = re.compile(rb"\\u([0-9a-fA-F]{4})")


def _names_mcp_servers(raw: bytes) -> bool:
    """Whether bytes that are not JSON name ``mcpServers``, escapes decoded."""
    if _MARK in raw:
        return True
    if _ESCAPE not in raw:
        return False
    text = _UNICODE_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)).encode("utf-8", "replace"),
                               raw)
    return _MARK in text


def redact_value(message: Any) -> tuple[Any, bool]:
    """A copy of a JSON-RPC message (or batch) with each MCP secret replaced by its
    :func:`token`, and whether anything was. The input is not modified; a value that is
    already a token stays as it is (so redacting twice changes nothing)."""
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
                if isinstance(e, dict) and "value" in e and not is_token(e["value"]):
                    e = {**e, "value": token(e["value"])}
                    hit = True
                new.append(e)
        elif isinstance(entries, dict):
            hit = not all(is_token(v) for v in entries.values())
            new = {k: v if is_token(v) else token(v) for k, v in entries.items()}
        else:
            continue
        if hit:
            if out is server:
                out = dict(server)
            out[field] = new
            changed = True
    return out, changed


# A JSON text's strings and structural characters (numbers, literals and whitespace lie
# between them); the text has been parsed, so it is well formed.
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\],]')


def repeats_a_key(raw: bytes) -> bool:
    """Whether any object in the JSON text ``raw`` (already known to parse) has a key
    twice, keys compared as decoded (``"a"`` and ``"\\u0061"`` are one key). A loop over
    the text's tokens with a stack of its own: no depth is too deep.

    >>> repeats_a_key(b'{"a":{"b":1,"\\\\u0062":2}}'), repeats_a_key(b'[{"a":1},{"a":2}]')
    (True, False)
    """
    import json

    stack: list[set | None] = []  # per open container: its keys so far (None: an array)
    expect_key = False
    for m in _TOKENS.finditer(raw):
        tok = m.group()
        c = tok[0]
        if c == 0x22:  # a string
            if expect_key:
                key = json.loads(tok) if b"\\" in tok else tok[1:-1].decode()
                keys = stack[-1]
                if key in keys:
                    return True
                keys.add(key)
                expect_key = False
        elif c == 0x7B:  # {
            stack.append(set())
            expect_key = True
        elif c == 0x5B:  # [
            stack.append(None)
            expect_key = False
        elif c == 0x2C:  # ,
            expect_key = bool(stack) and stack[-1] is not None
        else:  # } or ]
            if stack:
                stack.pop()
            expect_key = False
    return False


def _dumps(value: Any) -> bytes | None:
    """Compact JSON of ``value``; None when no writer can (nesting past the recursion
    limit): the caller then logs :data:`UNCHECKED`, never the bytes as sent."""
    import orjson

    try:
        return orjson.dumps(value)
    except TypeError:  # an integer beyond 64 bits, or nesting orjson does not write
        import json

        try:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(
                "utf-8", "surrogatepass")
        except RecursionError:
            return None

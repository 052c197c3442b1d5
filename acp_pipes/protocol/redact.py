"""Keep credentials out of wire logs and reports, and out of every comparison.

A wire log is a file people share. acp-tee logs every value the ACP schemas (v1, v2)
define as credential-bearing replaced by a *token* (:meth:`Redactor.token`), keeping the
names beside it so the log still says what was configured. The places, found by the
parsed value (a key spelt with escapes, ``"mcp\\u0053ervers"``, is the key):

- ``params.mcpServers[*].env`` and ``.headers`` of any request (``session/new``,
  ``session/load``, ``session/resume``, ``session/fork``, and any later method): API keys
  and bearer tokens for MCP servers;
- ``params.headers`` of ``providers/set``: the LLM provider's ``Authorization``;
- every member of the params of ``authenticate`` (v1) and ``auth/login`` (v2) but
  ``methodId``: the schemas define only ``methodId`` and ``_meta``, and anything else a
  client sends with a login is presumably a credential;
- ``params.env`` of ``terminal/create`` and ``result.authMethods[*].env`` (an
  ``initialize`` response): environment variables, the usual carrier of tokens;
- ``result.content[F]`` of the client's answer to an ``elicitation/create`` form whose
  schema marks field F secret (:func:`secret_fields`, the rule acp-asr applies too,
  ASR-734): a :class:`Redactor` remembers the secret fields of each form in flight, by
  request id (at most :data:`MAX_FORMS`), until its answer passes.

``env`` and ``headers`` are ``[{name, value}]`` arrays or ``{NAME: value}`` objects (a
shape some clients use): each value is replaced. ``args``, ``url``, ``command`` and
``baseUrl`` are left as sent: they say what runs and where; a credential in a command
line or a URL is not recognised.

The token is ``"<redacted hmac-blake3:HEX>"``: blake3 in keyed mode (an HMAC) of the
value's canonical form, under a key drawn at random for each recording and never
written anywhere. Within one recording the same secret gives the same token (a reader
sees that two frames carried the same key, and replay and align keep working); without
the key nothing about the secret can be checked, so a guess cannot be confirmed from the
log. Logs written before this hold ``"<redacted blake3:HEX>"`` (an unkeyed hash: a short
secret can be found from it) or ``"<redacted>"``; both still read as tokens
(:func:`is_token`).

Comparisons (:func:`conceal`): tokens of different recordings differ, so replay and
align never compare tokens. Every secret place of either side (a live frame, a
``--keep-secrets`` recording, a redacted one, an older log) is replaced by the one
:data:`PLACEHOLDER`, and so is any token in an elicitation answer: two frames compare
equal when they are equal but for their secrets. The one place concealing cannot find
alone is a live client's secret elicitation answer (only the form says it is secret):
it matches a redacted recording with ``--ignore /result/content/FIELD``.

The frame's identity in the log (acp-frame's ``hash``) is that of the redacted frame as
logged, never of the frame as sent (which would let a guess of the secret be checked
against it).

A frame that may hold a secret but cannot be checked (not JSON, not UTF-8) is logged as
:data:`UNCHECKED`. One whose JSON text repeats a key is logged as its parsed
(last-key-wins) value: the shadowed copy is what a first-wins parser reads, and it would
otherwise stay in the log verbatim. The repeat check walks the text without recursion
(:func:`repeats_a_key`), so no depth makes it give up. The bytes forwarded to the peer are
never touched: this module only computes the logged stand-in.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # acp-tee imports this module while it forwards: keep it light
    from typing import Any

__all__ = [
    "MAX_FORMS",
    "PLACEHOLDER",
    "TOKEN_HEAD",
    "UNCHECKED",
    "Redactor",
    "conceal",
    "is_token",
    "logged_hash",
    "may_hold_secrets",
    "redact_value",
    "repeats_a_key",
    "secret_fields",
]

#: What every secret is compared as, and what the oldest logs hold.
PLACEHOLDER = "<redacted>"
#: How a token starts (followed by 64 hex digits and ``>``).
TOKEN_HEAD = "<redacted hmac-blake3:"
_OLD_HEAD = "<redacted blake3:"  # an unkeyed token, in logs written before HMAC tokens
#: Logged for a frame that may hold a secret but is not JSON (so cannot be checked).
UNCHECKED = b'"<redacted: frame could not be checked for secrets>"'
#: Forms in flight remembered by a :class:`Redactor` (the oldest is forgotten first).
MAX_FORMS = 1024
_AUTH_METHODS = ("authenticate", "auth/login")
_KEEP_IN_AUTH = "methodId"

# The byte tests that keep the per-frame path fast (Redactor.wants_c2a, wants_a2c and
# may_hold_secrets): a frame none of whose bytes match cannot hold a secret at any place
# above, whatever its JSON (``\\u`` could spell any key; ``auth`` is in authenticate,
# auth/login, auth\\/login and authMethods).
_ANY_MARKS = (b"mcpServers", b'"headers"', b"auth", b'"env"', b"<redacted", b"\\u")
_ANY_TEXT_MARKS = tuple(m.decode() for m in _ANY_MARKS)


def may_hold_secrets(raw: bytes | str) -> bool:
    """False when a frame (bytes or text) can hold no secret and no token at any place
    :func:`conceal` looks at: then its own hash is its matching hash."""
    marks = _ANY_TEXT_MARKS if raw.__class__ is str else _ANY_MARKS
    for m in marks:
        if m in raw:  # type: ignore[operator]  # (marks of raw's own type)
            return True
    return False


def is_token(value: Any) -> bool:
    """Whether ``value`` already stands for a secret (a token, an older log's unkeyed one
    or :data:`PLACEHOLDER`), so redacting it again leaves it as it is."""
    return value.__class__ is str and (value == PLACEHOLDER or (
        value.endswith(">") and (value.startswith(TOKEN_HEAD) or value.startswith(_OLD_HEAD))))


def logged_hash(logged: bytes) -> str:
    """The identity acp-frame gives a redacted frame: that of its bytes as logged (the
    canonical hash, or ``blake3-raw:`` when they have none), never of the frame as sent."""
    from acp_pipes.protocol.canonical import ParseError, hash_raw, raw_hash

    try:
        h = hash_raw(logged)[1]
    except ParseError:
        h = None
    return h if h is not None else raw_hash(logged)


def secret_fields(schema: Any) -> list[str]:
    """Form fields an elicitation's requested schema marks as secret: the one rule acp-tee
    (which redacts their answers when it logs them) and acp-asr (ASR-734) share. ACP
    (alpha.9) has no marker of its own and says form mode is for non-sensitive data; we
    honour the markers a schema can carry: ``format: "password"`` (a custom StringFormat,
    which ACP preserves), JSON Schema's ``writeOnly: true``, and a ``_meta`` key named
    ``secret``, ``password`` or ``sensitive`` (or ending in ``/secret`` etc.) set to true
    (acp-pipes choice).

    >>> secret_fields({"properties": {"pin": {"type": "string", "format": "password"},
    ...                               "name": {"type": "string"}}})
    ['pin']
    """
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return []
    out = []
    for name, p in props.items():
        if not isinstance(p, dict):
            continue
        meta = p.get("_meta")
        if not isinstance(meta, dict):
            meta = {}
        marked = p.get("format") == "password" or p.get("writeOnly") is True or any(
            v is True and k.replace(".", "/").rsplit("/", 1)[-1].lower()
            in ("secret", "password", "sensitive") for k, v in meta.items())
        if marked:
            out.append(name)
    return out


def _placeholder(value: Any) -> str:
    return PLACEHOLDER


def conceal(message: Any) -> Any:
    """What a JSON-RPC message (or batch) is compared as: every secret place and every
    token in an elicitation answer replaced by :data:`PLACEHOLDER` (not a token: tokens
    of two recordings differ). The input is not modified.

    >>> conceal({"method": "providers/set", "params": {"headers": {"K": "sk-1"}}})
    {'method': 'providers/set', 'params': {'headers': {'K': '<redacted>'}}}
    """
    return redact_value(message, _placeholder)[0]


def redact_value(message: Any, token: Any = _placeholder,
                 forms: dict | None = None) -> tuple[Any, bool]:
    """A copy of a JSON-RPC message (or batch) with the value at each secret place
    replaced by ``token(value)``, and whether anything was. ``forms`` maps ``(type, id)``
    of an elicitation in flight to its secret field names (:class:`Redactor`): the answer
    to it has those fields replaced too, and its entry is taken out. Without ``forms`` an
    answer's fields that are tokens already are the ones replaced (so a redacted answer
    is concealed). The input is not modified."""
    if message.__class__ is list:  # a batch: its members are messages (one level only)
        changed = False
        out = []
        for item in message:
            r, c = _redact_message(item, token, forms) if item.__class__ is dict else (item, False)
            out.append(r)
            changed |= c
        return (out, True) if changed else (message, False)
    if message.__class__ is not dict:
        return message, False
    return _redact_message(message, token, forms)


def _redact_message(message: dict, token: Any, forms: dict | None) -> tuple[Any, bool]:
    out = message
    params = message.get("params")
    if params.__class__ is dict:
        new = _redact_params(message.get("method"), params, token)
        if new is not params:
            out = {**message, "params": new}
    result = message.get("result")
    if "id" in message and ("result" in message or "error" in message):
        fields = None
        if forms:
            rid = message["id"]
            fields = forms.pop((rid.__class__, rid), None)
        if result.__class__ is dict:
            new = _redact_result(result, token, fields)
            if new is not result:
                out = {**out, "result": new}
    return out, out is not message


def _redact_params(method: Any, params: dict, token: Any) -> dict:
    out = params
    servers = params.get("mcpServers")
    if servers.__class__ is list:
        new_servers = [_redact_fields(s, ("env", "headers"), token) for s in servers]
        if any(a is not b for a, b in zip(new_servers, servers, strict=True)):
            out = {**out, "mcpServers": new_servers}
    if method == "providers/set":
        out = _redact_fields(out, ("headers",), token)
    elif method == "terminal/create":
        out = _redact_fields(out, ("env",), token)
    elif method in _AUTH_METHODS:
        new = {k: (v if k == _KEEP_IN_AUTH else _swap(v, token)) for k, v in out.items()}
        if any(new[k] is not v for k, v in out.items()):
            out = new
    return out


def _redact_result(result: dict, token: Any, fields: Any) -> dict:
    out = result
    methods = result.get("authMethods")
    if methods.__class__ is list:
        new_methods = [_redact_fields(m, ("env",), token) for m in methods]
        if any(a is not b for a, b in zip(new_methods, methods, strict=True)):
            out = {**out, "authMethods": new_methods}
    content = result.get("content")
    if content.__class__ is dict:
        new = {k: _swap(v, token) if (fields is not None and k in fields) or is_token(v)
               else v for k, v in content.items()}
        if any(new[k] is not v for k, v in content.items()):
            out = {**out, "content": new}
    return out


def _swap(value: Any, token: Any) -> Any:
    """``value``'s stand-in: a token stays as it is, unless concealing."""
    if token is not _placeholder and is_token(value):
        return value
    return token(value)


def _redact_fields(holder: Any, names: tuple[str, ...], token: Any) -> Any:
    """``holder`` (an MCP server, auth method or params) with the values of its
    ``names`` fields (``[{name, value}]`` or ``{NAME: value}``) replaced; itself when
    nothing was."""
    if holder.__class__ is not dict:
        return holder
    out = holder
    for field in names:
        entries = holder.get(field)
        new: Any
        if entries.__class__ is list:
            new = [{**e, "value": _swap(e["value"], token)}
                   if e.__class__ is dict and "value" in e else e for e in entries]
            hit = any(a is not b and a["value"] is not b["value"]
                      for a, b in zip(new, entries, strict=True))
        elif entries.__class__ is dict:
            new = {k: _swap(v, token) for k, v in entries.items()}
            hit = any(new[k] is not v for k, v in entries.items())
        else:
            continue
        if hit:
            if out is holder:
                out = dict(holder)
            out[field] = new
    return out


_DIGITS_ONLY = bytes(48 if 48 <= c <= 57 else 32 for c in range(256))
_LONG_DIGITS = b"0" * 20


class Redactor:
    """One recording's redaction: its HMAC key (random unless given; never logged) and
    the secret fields of the elicitation forms in flight (learnt from the agent's
    requests, used on the client's answers; at most :data:`MAX_FORMS`). Not thread-safe:
    acp-tee calls it under its log's lock."""

    __slots__ = ("key", "forms")

    def __init__(self, key: bytes | None = None):
        self.key = os.urandom(32) if key is None else key
        self.forms: dict[tuple[type, Any], frozenset[str]] = {}

    def token(self, value: Any) -> str:
        """``"<redacted hmac-blake3:HEX>"``: the keyed blake3 of the canonical form of
        ``value`` (:data:`PLACEHOLDER` for a value that has none).

        >>> r = Redactor(b"k" * 32)
        >>> r.token("sk-1") == r.token("sk-1") != Redactor(b"j" * 32).token("sk-1")
        True
        """
        import blake3

        from acp_pipes.protocol.canonical import CanonicalError, canonical_bytes

        try:
            data = canonical_bytes(value)
        except (CanonicalError, RecursionError):
            return PLACEHOLDER
        return TOKEN_HEAD + blake3.blake3(data, key=self.key).hexdigest() + ">"

    def wants(self, direction: str, raw: bytes) -> bool:
        """Whether a frame's bytes may hold a secret (or, from the agent, a form this
        needs to know): the byte test before :meth:`frame`."""
        return self.wants_c2a(raw) if direction == "c2a" else self.wants_a2c(raw)

    def wants_c2a(self, raw: bytes) -> bool:
        """:meth:`wants` for a client's frame: the places' keys or methods (``auth`` is in
        authenticate, auth/login and auth\\/login), or an answer while a form is in
        flight. Spelt out, not a loop over marks: this runs once a frame."""
        return (b"mcpServers" in raw or b'"headers"' in raw or b"auth" in raw
                or (b"\\" in raw and b"\\u" in raw)
                or (bool(self.forms) and (b'"result"' in raw or b'"error"' in raw)))

    def wants_a2c(self, raw: bytes) -> bool:
        """:meth:`wants` for an agent's frame: a request or response (``"id"``) naming
        ``create`` (``elicitation/create``, ``terminal/create``, also escaped as
        ``\\/create``) or ``authMethods``. Most frames are the agent's notifications,
        which hold no place: for them one search and a memchr (a backslash first: most
        frames hold no ``\\u``), where the four keys would be four searches."""
        return ((b'"id"' in raw and (b"create" in raw or b"authMethods" in raw))
                or (b"\\" in raw and b"\\u" in raw))

    def frame(self, direction: str, raw: bytes) -> bytes | None:
        """The bytes to log for one frame (bytes without LF) sent in ``direction``
        (``c2a``/``a2c``), or None to log it as sent. A frame from the agent may be an
        elicitation form, whose secret fields are remembered for the client's answer.
        A trailing CR is kept. Parsed by orjson (acp-tee has it loaded), and by
        :func:`acp_pipes.protocol.canonical.parse_json` (~15 ms to import) only when orjson
        refuses the text (a lone surrogate, not JSON) or could round a number in it (a
        run of 20 digits: an integer beyond 64 bits, which orjson makes a float)."""
        import orjson

        try:
            if _LONG_DIGITS in raw.translate(_DIGITS_ONLY):  # orjson would round it
                raise orjson.JSONDecodeError("a long integer", "", 0)
            value = orjson.loads(raw)
        except (orjson.JSONDecodeError, RecursionError):
            from acp_pipes.protocol.canonical import ParseError, parse_json

            try:
                value = parse_json(raw)
            except (ParseError, UnicodeDecodeError, RecursionError):
                return UNCHECKED if _names_a_place(raw) else None
        if direction != "c2a":
            self._learn(value)
        forms = self.forms if direction == "c2a" and self.forms else None
        redacted, changed = redact_value(value, self._swap, forms)
        if not changed and not ((direction == "c2a" or _names_a_place(raw))
                                and repeats_a_key(raw)):
            return None
        out = _dumps(redacted)
        if out is None:
            return UNCHECKED
        if raw.endswith(b"\r"):
            out += b"\r"
        return out

    def _swap(self, value: Any) -> str:
        return self.token(value)

    def _learn(self, value: Any) -> None:
        """Remember the secret fields of each ``elicitation/create`` request in
        ``value`` (a message or a batch)."""
        for msg in value if value.__class__ is list else (value,):
            if msg.__class__ is not dict or msg.get("method") != "elicitation/create" \
                    or "id" not in msg:
                continue
            params = msg.get("params")
            fields = secret_fields(params.get("requestedSchema")
                                   if params.__class__ is dict else None)
            if fields:
                rid = msg["id"]
                key = (rid.__class__, rid)
                self.forms.pop(key, None)
                self.forms[key] = frozenset(fields)
                if len(self.forms) > MAX_FORMS:
                    del self.forms[next(iter(self.forms))]


_PLACE_MARKS = (b"mcpServers", b'"headers"', b"authenticate", b"auth/login", b"auth\\/login",
                b'"env"', b"authMethods", b"requestedSchema")


def _names_a_place(raw: bytes) -> bool:
    """Whether bytes (that may not be JSON) name a secret place, escapes decoded."""
    for m in _PLACE_MARKS:
        if m in raw:
            return True
    if b"\\u" not in raw:
        return False
    import re

    text = re.sub(rb"\\u([0-9a-fA-F]{4})",
                  lambda m: chr(int(m.group(1), 16)).encode("utf-8", "replace"), raw)
    return any(m in text for m in _PLACE_MARKS)


# A JSON text's strings and structural characters (numbers, literals and whitespace lie
# between them); the text has been parsed, so it is well formed.
_TOKENS = rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\],]'


def repeats_a_key(raw: bytes) -> bool:
    """Whether any object in the JSON text ``raw`` (already known to parse) has a key
    twice, keys compared as decoded (``"a"`` and ``"\\u0061"`` are one key). A loop over
    the text's tokens with a stack of its own: no depth is too deep.

    >>> repeats_a_key(b'{"a":{"b":1,"\\\\u0062":2}}'), repeats_a_key(b'[{"a":1},{"a":2}]')
    (True, False)
    """
    import json
    import re

    stack: list[set[str] | None] = []  # per open container: its keys so far (None: an array)
    expect_key = False
    for m in re.finditer(_TOKENS, raw):
        tok = m.group()
        c = tok[0]
        if c == 0x22:  # a string
            if expect_key:
                key = json.loads(tok) if b"\\" in tok else tok[1:-1].decode()
                keys: set[str] = stack[-1]  # type: ignore[assignment]  # a key: in an object
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

"""Secret redaction for wire logs (acp_pipes.protocol.redact): pure-function properties.

acp-tee's own behaviour (the real executable over real pipes) is in tests/test_tee.py."""

from __future__ import annotations

import blake3
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_pipes.protocol.canonical import canonical_bytes, canonical_hash, parse_json, raw_hash
from acp_pipes.protocol.redact import (
    MAX_FORMS,
    PLACEHOLDER,
    TOKEN_HEAD,
    UNCHECKED,
    Redactor,
    conceal,
    is_token,
    logged_hash,
    redact_value,
    repeats_a_key,
    secret_fields,
)
from acp_pipes.sameness.normalize import Normalizer

KEY = b"k" * 32
R = Redactor(KEY)


def token(value) -> str:
    return R.token(value)


def redact(raw: bytes, direction: str = "c2a", r: Redactor | None = None) -> bytes | None:
    return (r or Redactor(KEY)).frame(direction, raw)


def _new(servers, method="session/new", **extra) -> bytes:
    params = {"cwd": "/w", "mcpServers": servers, **extra}
    return orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})


def _unkeyed(value) -> str:
    """The hex of the unkeyed hash earlier logs held for a secret: blake3 of its JCS form."""
    return blake3.blake3(canonical_bytes(value)).hexdigest()


STDIO = {
    "type": "stdio",
    "name": "files",
    "command": "/usr/bin/mcp-files",
    "args": ["--token-file", "/etc/tok"],
    "env": [{"name": "API_KEY", "value": "sk-live-123"}, {"name": "LANG", "value": "C"}],
}
HTTP = {
    "type": "http",
    "name": "web",
    "url": "https://mcp.example/v1",
    "headers": [{"name": "Authorization", "value": "Bearer abc.def"}],
}


def test_values_replaced_names_kept_rest_untouched():
    raw = _new([STDIO, HTTP])
    logged = redact(raw)
    assert logged is not None
    assert b"sk-live-123" not in logged and b"Bearer abc.def" not in logged
    msg = orjson.loads(logged)
    stdio, http = msg["params"]["mcpServers"]
    assert stdio["env"] == [
        {"name": "API_KEY", "value": token("sk-live-123")},
        {"name": "LANG", "value": token("C")},
    ]
    assert http["headers"] == [{"name": "Authorization", "value": token("Bearer abc.def")}]
    # args, url, command are kept as sent (a choice: they say what runs and where)
    assert stdio["args"] == STDIO["args"] and stdio["command"] == STDIO["command"]
    assert http["url"] == HTTP["url"]


def test_the_token_is_keyed_per_recording_and_no_unkeyed_hash_is_left():
    """A six-digit secret came back from an unkeyed token in 2 s: the token is blake3 in
    keyed mode under a recording's own random key, so a guess cannot be checked."""
    t = token("314159")
    assert t.startswith(TOKEN_HEAD) and t.endswith(">") and len(t) == len(TOKEN_HEAD) + 65
    assert t[len(TOKEN_HEAD):-1] == blake3.blake3(canonical_bytes("314159"), key=KEY).hexdigest()
    assert t == token("314159") != token("314158")  # the same secret, the same token
    assert Redactor(b"j" * 32).token("314159") != t  # another recording, another token
    assert Redactor().key != Redactor().key and len(Redactor().key) == 32  # drawn at random
    assert _unkeyed("314159") not in t and canonical_hash("314159")[7:] not in t
    assert is_token(t) and is_token(PLACEHOLDER) and is_token("<redacted blake3:ab>")
    assert not is_token("<redacted") and not is_token("sk-1")


def test_providers_set_headers():
    raw = orjson.dumps({"jsonrpc": "2.0", "id": 3, "method": "providers/set", "params": {
        "providerId": "main", "apiType": "openai", "baseUrl": "https://llm.example/v1",
        "headers": {"Authorization": "Bearer sk-prov-9", "X-Org": "acme"}}})
    logged = redact(raw)
    assert logged is not None and b"sk-prov-9" not in logged and b"acme" not in logged
    params = orjson.loads(logged)["params"]
    assert params["headers"] == {"Authorization": token("Bearer sk-prov-9"),
                                 "X-Org": token("acme")}
    assert params["baseUrl"] == "https://llm.example/v1" and params["providerId"] == "main"


def test_authenticate_and_auth_login_keep_only_the_method_id():
    for method in ("authenticate", "auth/login"):
        raw = orjson.dumps({"jsonrpc": "2.0", "id": 4, "method": method, "params": {
            "methodId": "api-key", "apiKey": "sk-auth-7", "_meta": {"password": "pw-1"}}})
        logged = redact(raw)
        assert logged is not None and b"sk-auth-7" not in logged and b"pw-1" not in logged
        params = orjson.loads(logged)["params"]
        assert params == {"methodId": "api-key", "apiKey": token("sk-auth-7"),
                          "_meta": token({"password": "pw-1"})}
    # methodId alone: nothing to redact
    assert redact(b'{"jsonrpc":"2.0","id":4,"method":"authenticate",'
                  b'"params":{"methodId":"oauth"}}') is None


def test_agent_side_env_terminal_create_and_auth_methods():
    create = orjson.dumps({"jsonrpc": "2.0", "id": 9, "method": "terminal/create", "params": {
        "sessionId": "s", "command": "make", "args": ["deploy"],
        "env": [{"name": "GH_TOKEN", "value": "ghp-55"}]}})
    logged = redact(create, "a2c")
    assert logged is not None and b"ghp-55" not in logged
    params = orjson.loads(logged)["params"]
    assert params["env"] == [{"name": "GH_TOKEN", "value": token("ghp-55")}]
    assert params["command"] == "make" and params["args"] == ["deploy"]
    init = orjson.dumps({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1,
                         "authMethods": [{"id": "t", "name": "T", "type": "terminal",
                                          "env": {"LOGIN_TOKEN": "tok-66"}},
                                         {"id": "a", "name": "A"}]}})
    logged = redact(init, "a2c")
    assert logged is not None and b"tok-66" not in logged
    assert orjson.loads(logged)["result"]["authMethods"][0]["env"] == {
        "LOGIN_TOKEN": token("tok-66")}


def _form(rid, props, mode="form") -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": "elicitation/create",
                         "params": {"sessionId": "s", "mode": mode, "message": "?",
                                    "requestedSchema": {"type": "object",
                                                        "properties": props}}})


def _answer(rid, content) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid,
                         "result": {"action": "accept", "content": content}})


PIN_FORM = {"pin": {"type": "string", "format": "password"},
            "otp": {"type": "string", "writeOnly": True},
            "user": {"type": "string"}}


def test_an_elicitation_answer_to_a_secret_field_is_redacted():
    """ASR-734: the form (from the agent) marks fields secret; the client's answer to
    that request id has those fields redacted, the rest kept."""
    r = Redactor(KEY)
    assert r.wants("a2c", _form(7, PIN_FORM)) and r.frame("a2c", _form(7, PIN_FORM)) is None
    assert r.wants("c2a", _answer(7, {}))
    logged = r.frame("c2a", _answer(7, {"pin": "314159", "otp": 42, "user": "ann"}))
    assert logged is not None and b"314159" not in logged and b"42" not in logged
    content = orjson.loads(logged)["result"]["content"]
    assert content == {"pin": token("314159"), "otp": token(42), "user": "ann"}
    assert not r.forms  # answered: forgotten
    # a second answer to the same id is no longer known secret; nor is another id's
    assert r.frame("c2a", _answer(7, {"pin": "1"})) is None
    r.frame("a2c", _form(8, PIN_FORM))
    assert r.frame("c2a", _answer(9, {"pin": "1"})) is None and r.forms


def test_form_ids_are_typed_and_bounded_and_errors_forget():
    r = Redactor(KEY)
    r.frame("a2c", _form("7", PIN_FORM))
    assert r.frame("c2a", _answer(7, {"pin": "x1"})) is None  # 7 is not "7"
    assert b"x1" not in r.frame("c2a", _answer("7", {"pin": "x1"}))
    r.frame("a2c", _form(1, PIN_FORM))
    r.frame("c2a", b'{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"no"}}')
    assert not r.forms
    # a response *from the agent* with that id answers a client request: not the form
    r.frame("a2c", _form(2, PIN_FORM))
    r.frame("a2c", _answer(2, {"pin": "agent-side"}))
    assert r.forms
    # a form without a secret field is not remembered; at most MAX_FORMS are
    r.frame("a2c", _form(3, {"user": {"type": "string"}}))
    assert (int, 3) not in r.forms
    for i in range(MAX_FORMS + 10):
        r.frame("a2c", _form(1000 + i, PIN_FORM))
    assert len(r.forms) == MAX_FORMS and (int, 1000) not in r.forms
    assert (int, 1000 + MAX_FORMS + 9) in r.forms


def test_one_rule_for_secret_form_fields():
    """acp-asr (ASR-734) and acp-tee use the same function."""
    from acp_pipes.asr import records

    assert records.secret_fields is secret_fields
    assert secret_fields({"properties": PIN_FORM}) == ["pin", "otp"]
    meta = {"properties": {"k": {"type": "string", "_meta": {"vendor.x/secret": True}}}}
    assert secret_fields(meta) == ["k"]


def test_nothing_to_redact_gives_none():
    assert redact(b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{}}') is None
    assert redact(_new([])) is None
    assert redact(_new([{"type": "http", "name": "w", "url": "https://x"}])) is None
    # a response mentioning mcpServers outside params is left alone
    response = (b'{"jsonrpc":"2.0","id":1,"result":'
                b'{"mcpServers":[{"env":[{"name":"a","value":"b"}]}]}}')
    assert redact(response) is None
    # headers outside providers/set, env outside terminal/create: not secret places
    assert redact(b'{"jsonrpc":"2.0","id":1,"method":"x/y","params":{"headers":{"a":"b"},'
                  b'"env":[{"name":"a","value":"b"}]}}') is None


def test_uncheckable_frames_are_logged_as_a_placeholder():
    """Bytes naming a secret place that are not JSON could hold a secret in any shape."""
    for raw in (b'{"mcpServers": not json', b"\xff mcpServers",
                b'{"method":"providers/set","params":{"headers": {', b'{"auth/login" x'):
        assert redact(raw) == UNCHECKED
    assert redact(b"not json at all") is None


def test_repeated_key_is_logged_as_its_parsed_value():
    hidden = orjson.dumps(STDIO)
    raw = (b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w",'
           b'"mcpServers":[' + hidden + b'],"mcpServers":[]}}')
    logged = redact(raw)
    assert logged is not None and b"sk-live-123" not in logged
    assert orjson.loads(logged) == orjson.loads(raw)  # the value every parser agrees on


def test_batch_and_trailing_cr():
    single = orjson.loads(_new([STDIO]))
    raw = orjson.dumps([single, {"jsonrpc": "2.0", "method": "x"}]) + b"\r"
    logged = redact(raw)
    assert logged is not None and logged.endswith(b"\r")
    assert b"sk-live-123" not in logged


def test_input_value_not_mutated():
    msg = orjson.loads(_new([STDIO]))
    before = orjson.dumps(msg)
    redact_value(msg, R.token)
    conceal(msg)
    assert orjson.dumps(msg) == before


def test_big_integer_id_still_redacted():
    raw = _new([STDIO]).replace(b'"id":1', b'"id":123456789012345678901234567890')
    logged = redact(raw)
    assert logged is not None and b"123456789012345678901234567890" in logged
    assert b"sk-live-123" not in logged


def test_the_logged_identity_is_of_the_redacted_frame():
    """The frame hash a record keeps is computed over the frame as logged: the hash of
    the frame as sent would let a guess of the secret be checked against it."""
    raw = _new([STDIO])
    logged = redact(raw)
    assert logged_hash(logged) == canonical_hash(parse_json(logged))
    assert logged_hash(logged) != canonical_hash(parse_json(raw))
    assert logged_hash(UNCHECKED) == canonical_hash(parse_json(UNCHECKED))
    assert logged_hash(b"\xff") == raw_hash(b"\xff")


def test_conceal_compares_secrets_away_on_every_side():
    """Tokens of two recordings differ; concealed, a frame as sent, its --keep-secrets copy,
    its redactions under two keys and an older log's unkeyed token are one value."""
    raw = _new([STDIO, HTTP])
    sent = orjson.loads(raw)
    a = orjson.loads(redact(raw, r=Redactor(b"a" * 32)))
    b = orjson.loads(redact(raw, r=Redactor(b"b" * 32)))
    assert a != b
    old = orjson.loads(raw.replace(b'"sk-live-123"', b'"<redacted blake3:0f0f>"')
                       .replace(b'"C"', b'"<redacted>"')
                       .replace(b'"Bearer abc.def"', b'"<redacted blake3:abab>"'))
    assert conceal(sent) == conceal(a) == conceal(b) == conceal(old)
    assert "sk-live-123" not in orjson.dumps(conceal(sent)).decode()
    # an answer's tokens are concealed too; a clear answer cannot be known secret alone
    r = Redactor(KEY)
    r.frame("a2c", _form(7, PIN_FORM))
    answered = orjson.loads(r.frame("c2a", _answer(7, {"pin": "1", "user": "ann"})))
    assert conceal(answered)["result"]["content"] == {"pin": PLACEHOLDER, "user": "ann"}
    # and the normaliser's hashes agree, with pointers or without
    for n in (Normalizer.from_pointers([]), Normalizer.from_pointers(["/params/cwd"])):
        assert n.hash(sent) == n.hash(a) == n.hash(b)
        fa = {"kind": "request", "redacted": True, "raw": orjson.dumps(a).decode(),
              "hash": canonical_hash(a)}
        fb = {"kind": "request", "redacted": True, "raw": orjson.dumps(b).decode(),
              "hash": canonical_hash(b)}
        fk = {"kind": "request", "raw": raw.decode(), "hash": canonical_hash(sent)}
        assert n.hash_frame(fa) == n.hash_frame(fb) == n.hash_frame(fk)


_name = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=8)
_secret = st.text(st.characters(codec="utf-8"), min_size=6, max_size=20).map(lambda s: "S3CR3T" + s)
_pairs = st.lists(st.fixed_dictionaries({"name": _name, "value": _secret}), max_size=3)
_server = st.one_of(
    st.fixed_dictionaries({"type": st.just("stdio"), "name": _name, "command": st.just("/bin/x"),
                           "args": st.lists(_name, max_size=2), "env": _pairs}),
    st.fixed_dictionaries({"type": st.sampled_from(["http", "sse"]), "name": _name,
                           "url": st.just("https://x"), "headers": _pairs}),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_server, min_size=1, max_size=4),
       st.sampled_from(["session/new", "session/resume", "session/fork", "session/load"]))
def test_no_secret_survives_nor_its_unkeyed_hash(servers, method):
    raw = _new(servers, method=method)
    logged = redact(raw)
    secrets = [p["value"] for s in servers for p in s.get("env", []) + s.get("headers", [])]
    if not secrets:
        assert logged is None
        return
    assert logged is not None
    out = orjson.loads(logged)
    text = orjson.dumps(out).decode()
    assert "S3CR3T" not in text
    for s in secrets:
        assert _unkeyed(s) not in text
    assert canonical_hash(parse_json(raw))[7:] not in text
    # names survive, in order; everything outside env/headers values is unchanged
    strip = lambda srv: {k: ([p["name"] for p in v] if k in ("env", "headers") else v)  # noqa: E731
                         for k, v in srv.items()}
    assert [strip(s) for s in out["params"]["mcpServers"]] == [strip(s) for s in servers]


def test_an_escaped_key_is_the_key():
    """``"mcp\\u0053ervers"`` is ``mcpServers`` to every parser: the decision is made on the
    parsed value, so the byte test lets every frame with a \\u escape through."""
    raw = _new([STDIO]).replace(b'"mcpServers"', b'"mcp\\u0053ervers"')
    assert b"mcpServers" not in raw and orjson.loads(raw)["params"]["mcpServers"]
    assert R.wants("c2a", raw)
    logged = redact(raw)
    assert logged is not None and b"sk-live-123" not in logged
    # an escape elsewhere in a frame without secrets costs a parse, and changes nothing
    assert redact(b'{"jsonrpc":"2.0","method":"x","params":{"t":"caf\\u00e9"}}') is None
    # bytes that are not JSON but spell the key with escapes are not logged
    broken = raw[:-1]
    assert redact(broken) == UNCHECKED
    assert redact(b'{"t":"\\u0041 not json') is None
    # the method name escaped: still providers/set
    prov = (b'{"jsonrpc":"2.0","id":1,"method":"providers\\/set","params":'
            b'{"providerId":"p","headers":{"Authorization":"Bearer q-1"}}}')
    assert b"q-1" not in redact(prov)


def test_the_byte_tests_let_through_every_frame_with_a_secret_place():
    r = Redactor(KEY)
    assert not r.wants("c2a", b'{"jsonrpc":"2.0","id":2,"method":"session/prompt"}')
    assert not r.wants("a2c", b'{"jsonrpc":"2.0","method":"session/update","params":{}}')
    assert not r.wants("c2a", _answer(1, {"pin": "1"}))  # no form in flight
    for raw in (_new([STDIO]), b'{"method":"providers/set","params":{"headers":{}}}',
                b'{"method":"authenticate"}', b'{"method":"auth\\/login"}'):
        assert r.wants("c2a", raw), raw
    for raw in (_form(1, PIN_FORM), b'{"id":1,"method":"terminal/create","params":{"env":[]}}',
                b'{"id":0,"result":{"authMethods":[]}}',
                b'{"\\u0069d":1,"method":"terminal/create"}'):
        assert r.wants("a2c", raw), raw
    # an agent's notification holds no place: one search and a memchr
    assert not r.wants("a2c", b'{"method":"terminal/create","params":{"env":[]}}')


def test_redaction_is_idempotent_and_keeps_an_older_placeholder():
    logged = redact(_new([STDIO, HTTP]))
    assert redact(logged) is None  # tokens are left as they are
    old = _new([{**STDIO, "env": [{"name": "API_KEY", "value": PLACEHOLDER},
                                  {"name": "B", "value": "<redacted blake3:00ff>"}]}])
    assert redact(old) is None


def test_no_depth_hides_a_repeated_key():
    """The repeat check walks the text with a stack of its own: a repeat after 100,000
    levels of nesting is found (json's object_pairs_hook gave up at ~1,000 and said no)."""
    deep = b"[" * 100_000 + b"]" * 100_000
    assert repeats_a_key(b'{"x":' + deep + b',"a":1,"a":2}')
    assert not repeats_a_key(b'{"x":' + deep + b',"a":1,"b":2}')
    assert repeats_a_key(b'[' + b'{"k":' * 50_000 + b"0" + b"}" * 50_000 + b',{"a":1,"\\u0061":2}]')


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3)
    | st.lists(st.tuples(st.sampled_from(["a", "b", "\\u0061", '\\"', "c\\\\"]), inner),
               max_size=3),
    max_leaves=12,
)


def _text(v) -> bytes:
    """JSON text of a generated value; a list of pairs is an object, keys written as given
    (escapes kept), so keys may repeat."""
    if isinstance(v, list) and v and all(isinstance(x, tuple) for x in v):
        return b"{" + b",".join(b'"' + k.encode() + b'":' + _text(x) for k, x in v) + b"}"
    if isinstance(v, list):
        return b"[" + b",".join(_text(x) for x in v) + b"]"
    return orjson.dumps(v)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_repeats_a_key_agrees_with_the_json_module(value):
    import json

    raw = _text(value)

    def pairs(ps):
        if len({k for k, _ in ps}) != len(ps):
            raise KeyError
        return dict(ps)

    try:
        json.loads(raw, object_pairs_hook=pairs)
        expected = False
    except KeyError:
        expected = True
    assert repeats_a_key(raw) == expected


_field = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=6)
_marker = st.sampled_from([{"format": "password"}, {"writeOnly": True},
                           {"_meta": {"secret": True}}, {}, {"format": "email"}])
_answer_value = st.one_of(st.text(max_size=8).map(lambda s: "S3CR3T" + s),
                          st.integers(10**6, 10**9))


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(_field, st.tuples(_marker, _answer_value), min_size=1, max_size=5),
       st.one_of(st.integers(0, 50), st.text(max_size=4)))
def test_no_secret_answer_survives(form, rid):
    """ASR-734: whatever the form, each answer to a field it marks secret is a token in
    the log, and every other answer is kept as sent."""
    props = {name: {"type": "string", **marker} for name, (marker, _) in form.items()}
    content = {name: value for name, (_, value) in form.items()}
    r = Redactor(KEY)
    r.frame("a2c", _form(rid, props))
    raw = _answer(rid, content)
    logged = r.frame("c2a", raw) if r.wants("c2a", raw) else None
    secret = set(secret_fields({"properties": props}))
    if not secret:
        assert logged is None
        return
    out = orjson.loads(logged)["result"]["content"]
    kept = [v for name, v in content.items() if name not in secret]
    for name, value in content.items():
        if name in secret:
            assert out[name] == token(value)
            if value not in kept:  # a field not secret may hold the same value, as sent
                assert value not in out.values()
                if isinstance(value, str):
                    assert orjson.dumps(value) not in logged
        else:
            assert out[name] == value

"""MCP secret redaction for wire logs: pure-function properties."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_pipes.canonical import canonical_hash, parse_json
from acp_pipes.frame import raw_hash
from acp_pipes.redact import PLACEHOLDER, UNCHECKED, redact, redact_value, repeats_a_key, token


def _new(servers, method="session/new", **extra) -> bytes:
    params = {"cwd": "/w", "mcpServers": servers, **extra}
    return orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})


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
    logged, h = redact(raw)
    assert logged is not None
    assert b"sk-live-123" not in logged and b"Bearer abc.def" not in logged
    msg = orjson.loads(logged)
    stdio, http = msg["params"]["mcpServers"]
    assert stdio["env"] == [
        {"name": "API_KEY", "value": token("sk-live-123")},
        {"name": "LANG", "value": token("C")},
    ]
    assert http["headers"] == [{"name": "Authorization", "value": token("Bearer abc.def")}]
    assert token("C") == "<redacted " + canonical_hash("C") + ">"
    # args, url, command are kept as sent (a choice: they say what runs and where)
    assert stdio["args"] == STDIO["args"] and stdio["command"] == STDIO["command"]
    assert http["url"] == HTTP["url"]
    assert h == canonical_hash(parse_json(raw))
    assert h != canonical_hash(parse_json(logged))


def test_every_method_carrying_mcp_servers_is_covered():
    for method in ("session/new", "session/resume", "session/fork", "session/load", "x/future"):
        logged, _ = redact(_new([STDIO], method=method, sessionId="s"))
        assert logged is not None and b"sk-live-123" not in logged, method


def test_sse_acp_other_and_object_form():
    sse = {"type": "sse", "name": "s", "url": "https://x",
           "headers": [{"name": "K", "value": "v1"}]}
    acp = {"type": "acp", "name": "a", "serverId": "srv-1"}
    other = {"type": "_custom", "name": "o", "env": {"TOKEN": "v2"}, "headers": {"X-Key": "v3"}}
    logged, _ = redact(_new([sse, acp, other]))
    assert logged is not None
    for secret in (b"v1", b"v2", b"v3"):
        assert secret not in logged
    servers = orjson.loads(logged)["params"]["mcpServers"]
    assert servers[1] == acp
    assert servers[2]["env"] == {"TOKEN": token("v2")}


def test_nothing_to_redact_gives_none():
    assert redact(b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{}}') == (None, None)
    assert redact(_new([])) == (None, None)
    assert redact(_new([{"type": "http", "name": "w", "url": "https://x"}])) == (None, None)
    # a response mentioning mcpServers outside params is left alone
    response = (b'{"jsonrpc":"2.0","id":1,"result":'
                b'{"mcpServers":[{"env":[{"name":"a","value":"b"}]}]}}')
    assert redact(response) == (None, None)


def test_uncheckable_frames_are_logged_as_a_placeholder_with_their_raw_identity():
    """Bytes naming mcpServers that are not JSON could hold a secret in any shape."""
    for raw in (b'{"mcpServers": not json', b"\xff mcpServers"):
        assert redact(raw) == (UNCHECKED, raw_hash(raw))


def test_repeated_key_is_logged_as_its_parsed_value():
    hidden = orjson.dumps(STDIO)
    raw = (b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w",'
           b'"mcpServers":[' + hidden + b'],"mcpServers":[]}}')
    logged, h = redact(raw)
    assert logged is not None and b"sk-live-123" not in logged
    assert orjson.loads(logged) == orjson.loads(raw)  # the value every parser agrees on
    assert h == canonical_hash(parse_json(raw))


def test_batch_and_trailing_cr():
    single = orjson.loads(_new([STDIO]))
    raw = orjson.dumps([single, {"jsonrpc": "2.0", "method": "x"}]) + b"\r"
    logged, h = redact(raw)
    assert logged is not None and logged.endswith(b"\r")
    assert b"sk-live-123" not in logged
    assert h == canonical_hash(parse_json(raw))


def test_input_value_not_mutated():
    msg = orjson.loads(_new([STDIO]))
    before = orjson.dumps(msg)
    redact_value(msg)
    assert orjson.dumps(msg) == before


def test_big_integer_id_still_redacted():
    raw = _new([STDIO]).replace(b'"id":1', b'"id":123456789012345678901234567890')
    logged, h = redact(raw)
    assert logged is not None and b"123456789012345678901234567890" in logged
    assert b"sk-live-123" not in logged and h is not None


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
def test_no_secret_survives_and_hash_is_of_the_original(servers, method):
    raw = _new(servers, method=method)
    logged, h = redact(raw)
    secrets = [p["value"] for s in servers for p in s.get("env", []) + s.get("headers", [])]
    if not secrets:
        assert logged is None
        return
    assert logged is not None
    assert h == canonical_hash(parse_json(raw))
    out = orjson.loads(logged)
    assert "S3CR3T" not in orjson.dumps(out).decode()
    # names survive, in order; everything outside env/headers values is unchanged
    strip = lambda srv: {k: ([p["name"] for p in v] if k in ("env", "headers") else v)  # noqa: E731
                         for k, v in srv.items()}
    assert [strip(s) for s in out["params"]["mcpServers"]] == [strip(s) for s in servers]


def test_an_escaped_key_is_the_key():
    """``"mcp\\u0053ervers"`` is ``mcpServers`` to every parser: the decision is made on the
    parsed value, so the byte test lets every frame with a \\u escape through."""
    raw = _new([STDIO]).replace(b'"mcpServers"', b'"mcp\\u0053ervers"')
    assert b"mcpServers" not in raw and orjson.loads(raw)["params"]["mcpServers"]
    logged, h = redact(raw)
    assert logged is not None and b"sk-live-123" not in logged
    assert h == canonical_hash(parse_json(raw))
    # an escape elsewhere in a frame without secrets costs a parse, and changes nothing
    assert redact(b'{"jsonrpc":"2.0","method":"x","params":{"t":"caf\\u00e9"}}') == (None, None)
    # bytes that are not JSON but spell the key with escapes are not logged
    broken = raw[:-1]
    assert redact(broken) == (UNCHECKED, raw_hash(broken))
    assert redact(b'{"t":"\\u0041 not json') == (None, None)


def test_redaction_is_idempotent_and_keeps_an_older_placeholder():
    logged, _ = redact(_new([STDIO, HTTP]))
    assert redact(logged) == (None, None)  # tokens are left as they are
    old = _new([{**STDIO, "env": [{"name": "API_KEY", "value": PLACEHOLDER}]}])
    assert redact(old) == (None, None)


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

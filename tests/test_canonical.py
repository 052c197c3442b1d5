"""Canonical identity: the fast path must equal RFC 8785 (rfc8785) byte for byte.

Property tests span the JSON domain (big integers, every finite float, control
characters, lone surrogates, keys that sort differently by code point and by UTF-16);
the regression examples pin each trap by name.
"""

from __future__ import annotations

import enum
import json
import math
import re
import struct
import uuid

import blake3
import orjson
import pytest
import rfc8785
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from acp_pipes.protocol import canonical
from acp_pipes.protocol.canonical import (
    CanonicalError,
    ParseError,
    canonical_bytes,
    canonical_hash,
    hash_raw,
    jcs_number,
    parse_json,
    reference_bytes,
)

PROPS = settings(max_examples=400, deadline=None)

# ------------------------------------------------------------------------ strategies

SAFE = 2**53 - 1
EDGE_INTS = [0, -1, SAFE, -SAFE, SAFE + 1, -SAFE - 1, SAFE + 2, 2**63 - 1, 2**63, -(2**63),
             -(2**63) - 1, 2**64 - 1, 2**64, 2**64 + 1, 10**21, 10**308, 2**1024, -(2**1024)]


def _bits_to_float(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


# Uniform over bit patterns: every exponent, subnormals, -0.0 (non-finite ones dropped).
any_float = st.integers(0, 2**64 - 1).map(_bits_to_float).filter(math.isfinite)
floats = st.floats(allow_nan=False, allow_infinity=False) | any_float | st.sampled_from(
    [0.0, -0.0, 1.0, -1.0, 0.1, 1e16, 1e21, 1e-6, 1e-7, 5e-324, 1.7976931348623157e308,
     2.0**53, 123456789012345680000.0, 333333333.33333329, 1e30, 0.002, 1e-27])
ints = st.integers() | st.integers(-(2**70), 2**70) | st.sampled_from(EDGE_INTS)

# Characters where JSON writers differ: escapes, controls, DEL, line separators, the
# U+E000..U+FFFF vs non-BMP key-order trap, the Unicode edges.
TRAP_CHARS = ('"\\/\b\f\n\r\t\x00\x01\x1f\x20\x7f\x80\u00f6\u2028\u2029\u20ac'
              "\ud7ff\ue000\uf8ff\ufb33\ufeff\uff01\ufffd\uffff"
              "\U00010000\U0001f600\U0010ffff")
trap_text = st.text(st.sampled_from(TRAP_CHARS) | st.sampled_from("ab1"), max_size=6)
texts = st.text() | trap_text
keys = st.text(max_size=3) | trap_text

scalars = st.none() | st.booleans() | ints | floats | texts
json_values = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(keys, kids, max_size=5),
    max_leaves=25,
)
# Strings with lone surrogates (not Unicode text, but JSON texts can spell them).
surrogate_text = st.text(st.characters(codec=None, categories=["Cs", "Ll", "Nd", "So"]),
                         max_size=5)
parsed_values = st.recursive(
    st.none() | st.booleans() | ints | floats | texts | surrogate_text,
    lambda kids: st.lists(kids, max_size=4)
    | st.dictionaries(keys | surrogate_text, kids, max_size=4),
    max_leaves=20,
)


def outcome(fn, value):
    """bytes, or the CanonicalError class: what a canonicaliser does with ``value``."""
    try:
        return fn(value)
    except CanonicalError:
        return CanonicalError


def same(a, b) -> bool:
    """Equal, with types and float signs: 1 != 1.0 and 0.0 != -0.0 here."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b) or a != a and b != b
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same, a, b))
    return a == b


# ------------------------------------------------------------ fast path == reference

@PROPS
@given(json_values)
def test_fast_path_equals_reference(value):
    assert outcome(canonical_bytes, value) == outcome(reference_bytes, value)


@PROPS
@given(json_values)
def test_equals_rfc8785_wherever_rfc8785_accepts(value):
    try:
        expected = rfc8785.dumps(value)
    except rfc8785.CanonicalizationError:
        assume(False)
    assert canonical_bytes(value) == expected


@PROPS
@given(parsed_values)
def test_lone_surrogates_and_big_numbers_have_a_defined_outcome(value):
    assert outcome(canonical_bytes, value) == outcome(reference_bytes, value)
    # As a JSON text: "\ud800\udc00" spells one pair, so compare with what the text means.
    text = json.dumps(value, ensure_ascii=True)
    parsed, digest = hash_raw(text.encode())
    assert same(parsed, json.loads(text))
    got = outcome(reference_bytes, json.loads(text))
    assert digest == (None if got is CanonicalError else "blake3:" + blake3.blake3(got).hexdigest())


@PROPS
@given(any_float | floats)
def test_number_formatting_is_ecmascript(x):
    assert jcs_number(x) == rfc8785.dumps(x).decode()


@PROPS
@given(ints)
def test_integers_beyond_2_53_are_the_nearest_double(n):
    try:
        nearest = float(n)
    except OverflowError:
        with pytest.raises(CanonicalError):
            canonical_bytes(n)
        return
    expected = str(n) if abs(n) <= SAFE else rfc8785.dumps(nearest).decode()
    assert canonical_bytes(n) == canonical_bytes([n])[1:-1] == expected.encode()
    assert jcs_number(n) == expected


@PROPS
@given(json_values)
def test_hash_is_blake3_of_the_canonical_bytes(value):
    ref = outcome(reference_bytes, value)
    if ref is CanonicalError:
        with pytest.raises(CanonicalError):
            canonical_hash(value)
    else:
        assert canonical_hash(value) == "blake3:" + blake3.blake3(ref).hexdigest()


# -------------------------------------------------------------------------- parsing

@PROPS
@given(parsed_values, st.booleans(), st.sampled_from([None, 0, 2]), st.booleans())
def test_parse_json_reads_what_the_json_module_reads(value, ascii_only, indent, as_bytes):
    if not ascii_only:
        assume(outcome(reference_bytes, value) is not CanonicalError)  # no lone surrogates
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    raw = text.encode() if as_bytes else text
    assert same(parse_json(raw), json.loads(text))


@PROPS
@given(json_values)
def test_hash_raw_equals_parse_then_hash(value):
    raw = json.dumps(value).encode()
    parsed, digest = hash_raw(raw)
    assert same(parsed, parse_json(raw))
    try:
        assert digest == canonical_hash(parsed)
    except CanonicalError:
        assert digest is None


@pytest.mark.parametrize("text", [
    b"", b" ", b"NaN", b"Infinity", b"-Infinity", b"[NaN]", b'{"a":Infinity}', b"[1,]",
    b"{'a':1}", b"01", b"1 2", b"\xef\xbb\xbf{}", b'"\xff"', b'"\xed\xa0\x80"',
    '{}'.encode("utf-16"), b'"\x01"', b"[" * 1025 + b"]" * 1025, b"tru", b'{"a"}',
])
def test_parse_json_rejects_what_is_not_json(text):
    with pytest.raises(ParseError):
        parse_json(text)
    with pytest.raises(ValueError):
        hash_raw(text)


def test_parse_json_rejects_a_str_holding_raw_surrogates():
    with pytest.raises(ParseError):
        parse_json('"\ud800"')
    assert parse_json('"\\ud800"') == "\ud800"


@pytest.mark.parametrize("text,expected", [
    (b"18446744073709551616", 2**64),
    (b"-9223372036854775809", -(2**63) - 1),
    (b"[1.5, 123456789012345678901234567890]", [1.5, 123456789012345678901234567890]),
    (b'{"ns": "1234567890123456789", "x": 0.5}', {"ns": "1234567890123456789", "x": 0.5}),
    (b"18446744073709551615", 2**64 - 1),
    (b"1e400", math.inf),
    (b"-1e400", -math.inf),
    (b"1e-400", 0.0),
    (b'"\\ud800\\udc00\\udc00"', "\U00010000\udc00"),
    (b'{"a": 1, "a": 2}', {"a": 2}),
    (b"-0", 0),
    (b"-0.0", -0.0),
])
def test_parse_json_keeps_what_orjson_refuses_or_rounds(text, expected):
    assert same(parse_json(text), expected)


# ------------------------------------------------------------ regressions, by trap

@pytest.mark.parametrize("value,expected", [
    (1.0, b"1"), (-0.0, b"0"), (0.0, b"0"), (1e16, b"10000000000000000"),
    (1e21, b"1e+21"), (1e20, b"100000000000000000000"), (1e-6, b"0.000001"),
    (1e-7, b"1e-7"), (5e-324, b"5e-324"), (1.5e-7, b"1.5e-7"),
    (1.7976931348623157e308, b"1.7976931348623157e+308"), ([0.1 + 0.2], b"[0.30000000000000004]"),
    (123456789012345680000.0, b"123456789012345680000"),
    (2**53 - 1, b"9007199254740991"), (2**53, b"9007199254740992"),
    (2**53 + 1, b"9007199254740992"), (-(2**53) - 1, b"-9007199254740992"),
    (2**64, b"18446744073709552000"), ({"n": 2**63}, b'{"n":9223372036854776000}'),
    ({"n": 2**64 + 1, "f": 0.5}, b'{"f":0.5,"n":18446744073709552000}'),
])
def test_numbers(value, expected):
    assert canonical_bytes(value) == expected


def test_rfc8785_numbers_and_strings_example():
    # RFC 8785 section 3.2.2 (the sample input and its canonical form).
    raw = (b'{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
           b' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
           b' "literals": [null, true, false]}')
    expected = ('{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,'
                '1e-27],"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}').encode()
    assert canonical_bytes(parse_json(raw)) == expected
    assert hash_raw(raw)[1] == "blake3:" + blake3.blake3(expected).hexdigest()


def test_key_order_is_utf16_not_code_point():
    # RFC 8785 section 3.2.3: U+FB33 sorts after the emoji in UTF-16, before it by code point.
    value = {"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Dalet",
             "1": "One", "\U0001f600": "Emoji", "\u0080": "Control", "\u00f6": "o-umlaut"}
    order = ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]
    assert orjson.dumps(value, option=orjson.OPT_SORT_KEYS) != rfc8785.dumps(value)  # the trap
    assert canonical_bytes(value) == rfc8785.dumps({k: value[k] for k in order})
    assert list(json.loads(canonical_bytes(value))) == order
    nested = {"x": [{"\ue000": 1.5, "\U00010000": None}]}
    assert canonical_bytes(nested) == '{"x":[{"\U00010000":null,"\ue000":1.5}]}'.encode()


def test_string_escaping_matches_jcs_for_every_code_point():
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    assert canonical_bytes(every) == rfc8785.dumps(every)
    assert canonical_bytes({"k": [every]}) == rfc8785.dumps({"k": [every]})
    assert canonical_bytes("\x00\x08\t\n\x0b\x0c\r\x1f\x7f\u2028/") == (
        b'"\\u0000\\b\\t\\n\\u000b\\f\\r\\u001f\x7f\xe2\x80\xa8/"')


@pytest.mark.parametrize("value", [
    math.nan, math.inf, -math.inf, [1, {"a": math.nan}], {"x": [-math.inf]},
    "\ud800", {"\udfff": 1}, ["ok", "a\udc00b"], 10**400, [-(10**309)],
    {1: 2}, {None: 1}, {(1,): 2}, uuid.UUID(int=7), enum.Enum("E", "A").A,
    {"f": orjson.Fragment(b"1")},
    b"bytes", {1, 2}, object(),
])
def test_no_canonical_form_raises_canonical_error(value):
    with pytest.raises(CanonicalError):
        canonical_bytes(value)
    with pytest.raises(ValueError):
        canonical_hash(value)


def test_nan_is_not_written_as_null():
    # orjson writes non-finite floats as null; identity must not conflate them with null.
    assert orjson.dumps([math.nan]) == b"[null]"
    with pytest.raises(CanonicalError):
        canonical_bytes([math.nan])


def test_hash_raw_gives_none_for_json_without_canonical_form():
    for raw in (b'"\\ud800"', b'{"a": [1e400]}', b'{"\\udc00": 1}', b"1" + b"0" * 400):
        value, digest = hash_raw(raw)
        assert digest is None
        assert same(value, json.loads(raw))


class Str(str):
    pass


class Int(int):
    pass


class Dict(dict):
    pass


class Color(enum.IntEnum):
    RED = 1


class Mode(enum.StrEnum):
    ASK = "ask"


@pytest.mark.parametrize("value", [
    Str("x"), {Str("k"): Str("v")}, Int(5), Dict(a=1, b=[Int(2**60)]), [Color.RED, Mode.ASK],
    (1, "two", (3.5, None)), {"t": (True, False)},
])
def test_subclasses_and_tuples_are_their_json_type(value):
    assert canonical_bytes(value) == rfc8785.dumps(canonical._prepare(value))


def test_deep_nesting_has_a_form_or_a_clean_error():
    deep300 = b"[" * 300 + b"1.5" + b"]" * 300  # past orjson.dumps' depth limit
    assert canonical_bytes(parse_json(deep300)) == deep300 == rfc8785.dumps(parse_json(deep300))
    value, digest = hash_raw(b"[" * 1024 + b"]" * 1024)  # orjson's parse limit
    assert value is not None and (digest is None or digest.startswith("blake3:"))


def test_hash_format_and_a_pinned_vector():
    digest = canonical_hash({"b": [1, 2.0], "a": "x"})
    assert re.fullmatch(r"blake3:[0-9a-f]{64}", digest)
    assert digest == "blake3:" + blake3.blake3(b'{"a":"x","b":[1,2]}').hexdigest()
    assert canonical_hash({}) == "blake3:" + blake3.blake3(b"{}").hexdigest()


def test_hash_raw_accepts_all_input_kinds():
    raw = b'{"jsonrpc": "2.0", "id": 1, "result": {"amount": 1.0}}'
    expected = canonical_hash({"jsonrpc": "2.0", "id": 1, "result": {"amount": 1}})
    for form in (raw, bytearray(raw), memoryview(raw), raw.decode()):
        value, digest = hash_raw(form)
        assert digest == expected and value["result"]["amount"] == 1.0


def test_fast_path_does_not_need_the_reference(monkeypatch):
    # Plain frames, floats and the key-order trap are all served without rfc8785.
    def refuse(value):
        raise AssertionError("reference path taken")

    monkeypatch.setattr(canonical, "reference_bytes", refuse)
    frames = [
        {"jsonrpc": "2.0", "id": 3, "result": {"content": "x\n" * 50, "ok": True}},
        {"method": "session/update", "params": {"update": {"cost": {"amount": 0.0731}}}},
        {"\ue000": "private use", "\U0001f600": [1e21, -0.0, None]},
        "top", 1.0, None,
    ]
    for frame in frames:
        assert canonical_bytes(frame) == rfc8785.dumps(frame)
    with pytest.raises(AssertionError):
        canonical_bytes({"big": 2**64})


@pytest.mark.parametrize("pad", [0, 2000])  # both sides of hash_raw's short-text check
@pytest.mark.parametrize("value", [
    1.0, -1e5, 2**64, [0.5], {"a": {"b": [1, -2.5e-7]}}, {"\ue000": 1, "\U0001f600": 2},
    {"s": "1:2.5, [3e4", "n": 7}, {"big": 123456789012345678901234567890, "f": 1.5},
])
def test_hash_raw_float_and_order_checks_on_short_and_long_texts(value, pad):
    framed = {"pad": "x" * pad, "v": value} if pad else value
    raw = json.dumps(framed, separators=(",", ":")).encode()
    parsed, digest = hash_raw(raw)
    assert same(parsed, json.loads(raw))
    assert digest == "blake3:" + blake3.blake3(reference_bytes(json.loads(raw))).hexdigest()


# Strings that look like numbers after separators: false alarms for hash_raw's bytes check
# (which only sees orjson's output), never a way to hide a float from it.
number_like = st.text(st.sampled_from(':,[]{}"\\-+.eE0123456789 a'), max_size=8)
envelope_values = st.recursive(
    st.none() | st.booleans() | ints | floats | number_like | texts,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(keys | number_like, kids,
                                                              max_size=4),
    max_leaves=15,
)


@PROPS
@given(envelope_values, st.booleans())
def test_hash_raw_of_json_rpc_objects_equals_the_reference(params, compact):
    # An object within hash_raw's short-text limit: always the orjson-bytes float check.
    message = {"jsonrpc": "2.0", "method": "session/update", "params": params}
    raw = json.dumps(message, separators=(",", ":") if compact else None).encode()
    parsed, digest = hash_raw(raw)
    assert same(parsed, json.loads(raw))
    expected = outcome(reference_bytes, json.loads(raw))
    assert digest == (None if expected is CanonicalError
                      else "blake3:" + blake3.blake3(expected).hexdigest())


@PROPS
@given(st.lists(envelope_values, min_size=1, max_size=4))
def test_hash_raw_with_a_reused_hasher_equals_a_fresh_one(params_list):
    # A framer resets and reuses one blake3 hasher per stream: no state may carry over.
    hasher = blake3.blake3()
    hasher.update(b"left over from before")
    for params in params_list:
        raw = json.dumps({"jsonrpc": "2.0", "method": "m", "params": params}).encode()
        parsed, digest = hash_raw(raw, hasher)
        fresh_parsed, fresh_digest = hash_raw(raw)
        assert same(parsed, fresh_parsed) and digest == fresh_digest

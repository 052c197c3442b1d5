"""Identity of JSON values: ``blake3:<hex>`` of their RFC 8785 (JCS) canonical form.

The reference is ``rfc8785.dumps`` (:func:`reference_bytes`). :func:`canonical_bytes`
returns the same bytes faster: ``orjson.dumps(..., OPT_SORT_KEYS)`` already writes JCS for
strings (it escapes exactly ``"``, ``\\`` and U+0000..U+001F, with ``\\b \\t \\n \\f \\r``
and lowercase ``\\u00xx``; everything else is raw UTF-8, U+007F and U+2028 included),
integers and literals. It differs from JCS in three places, each detected and repaired:

- floats: orjson writes ``1.0``, ``1e+16``, ``-0.0``; JCS writes ECMAScript
  Number::toString (``1``, ``10000000000000000``, ``0``). A type scan of the value finds
  floats (and non-finite ones, which orjson would silently write as ``null``); they are
  then formatted here (:func:`jcs_number`) and spliced in as ``orjson.Fragment``.
- key order: orjson sorts keys by code point, JCS by UTF-16 code unit. The two disagree
  only between U+E000..U+FFFF and non-BMP characters, so only output holding both UTF-8
  lead bytes EE/EF and F0..F4 is re-sorted (by UTF-16) here.
- integers beyond +-(2**53-1): ``OPT_STRICT_INTEGER`` makes orjson refuse them and the
  value goes to the reference path.

Anything else (subclasses of the JSON types, other objects) takes the reference path.
``tests/test_canonical.py`` checks fast == reference byte for byte over the JSON domain.

Outside what ``rfc8785`` accepts, the behaviour is defined here:

- Integers outside +-(2**53-1) are what JCS reads them as, IEEE doubles: the nearest
  double, written as ECMAScript would (``2**64`` -> ``18446744073709552000``; ``2**53``
  and ``2**53 + 1`` share a form). Integers beyond the double range have no form.
- No form (:class:`CanonicalError`, a ValueError): NaN and infinities (including JSON
  numbers such as ``1e400`` that overflow a double), strings with lone surrogates
  (JCS requires I-JSON, i.e. valid Unicode), non-string keys, non-JSON objects, and
  nesting deeper than the interpreter's recursion limit allows (~900 levels).
  :func:`hash_raw` turns this into a ``None`` hash, never an exception.
- Duplicate keys in a JSON text: the last one wins (as in orjson and the json module),
  so such a text has the identity of its de-duplicated value.

Caveat: ``uuid.UUID``, ``enum.Enum`` members and ``orjson.Fragment`` are not JSON values;
the scan routes them to the reference path (CanonicalError). Pass JSON values only.

>>> canonical_bytes({"b": [1.0, 2**64, "\\u2028"], "a": -0.0})
b'{"a":0,"b":[1,18446744073709552000,"\\xe2\\x80\\xa8"]}'
>>> hash_raw(b'{"x": 1e400}')[1] is None
True
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import blake3
import orjson
import rfc8785

from acp_pipes.errors import AcpPipesError

__all__ = [
    "CanonicalError",
    "HASH_PREFIX",
    "ParseError",
    "canonical_bytes",
    "canonical_hash",
    "hash_raw",
    "jcs_number",
    "parse_json",
    "reference_bytes",
    "without_surrogates",
    "writable",
]

HASH_PREFIX = "blake3:"
#: The identity of bytes with no canonical form (:func:`raw_hash`): a prefix of its own,
#: so the two identities never mix.
RAW_HASH_PREFIX = "blake3-raw:"
_SAFE_INT = 2**53 - 1


class ParseError(ValueError):
    """The input is not one JSON text."""


#: How deep the parsers read (orjson's limit; the json module's recursion ends near it).
PARSE_DEPTH = 1024


class TooDeep(ParseError):
    """JSON nested deeper than :data:`PARSE_DEPTH` levels: valid for all a reader can
    tell, but too deep to parse, and said so (:func:`acp_pipes.io.lines.unparsable`),
    never "not JSON"."""


class CanonicalError(AcpPipesError, ValueError):
    """A JSON value with no JCS form (lone surrogate, non-finite number, ...)."""


# ---------------------------------------------------------------------------- parsing

_DIGITS_ONLY = bytes(48 if 48 <= c <= 57 else 32 for c in range(256))
_LONG_INT = b"0" * 19  # orjson reads integer literals outside [-2**63, 2**64) as floats


def _reject_constant(name: str) -> Any:
    raise ParseError(f"{name} is not JSON")


def _stdlib_loads(raw: bytes | bytearray | memoryview | str) -> Any:
    """The json module, kept to JSON: UTF-8 only, no BOM, no NaN/Infinity literals."""
    text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8")
    text.encode("utf-8")  # a str holding raw surrogates is not Unicode text
    return json.loads(text, parse_constant=_reject_constant, parse_int=_integer)


#: Digits Python converts to an int by default; a longer literal costs quadratic time.
_INT_DIGITS = 4300


def _integer(digits: str) -> int | float:
    """An integer literal, exact; one too long for Python to convert cheaply is read as
    the double it overflows (``inf``, as ``1e400`` is): still JSON, never "not JSON"."""
    if len(digits) <= _INT_DIGITS:
        return int(digits)
    return float(digits)


def _parse(raw: bytes | bytearray | memoryview | str) -> tuple[Any, int]:
    """Parse, and tell what the scan found (so :func:`hash_raw` scans once)."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as first:
        return _refused(raw, first), _FOREIGN
    return _checked(raw, value)


def _refused(raw: bytes | bytearray | memoryview | str, first: Exception) -> Any:
    """orjson refuses some JSON: lone-surrogate escapes, numbers that overflow a double."""
    try:
        return _stdlib_loads(raw)
    except RecursionError as e:
        raise TooDeep(f"nested deeper than {PARSE_DEPTH} levels ({first})") from e
    except ValueError as e:
        raise ParseError(str(first)) from e


def _checked(raw: bytes | bytearray | memoryview | str, value: Any) -> tuple[Any, int]:
    """Scan what orjson parsed; reparse if a float may be a big integer orjson rounded."""
    kind = _scan(value)
    if kind == _FLOATS:
        data = raw.encode() if isinstance(raw, str) else bytes(raw)
        if _LONG_INT in data.translate(_DIGITS_ONLY):
            return _stdlib_loads(raw), _FOREIGN
    return value, kind


_LONE = re.compile("[\ud800-\udfff]")


def without_surrogates(value: Any) -> tuple[Any, bool]:
    """``value`` with every lone surrogate in its strings and keys (a ``"\ud800"``
    escape :func:`parse_json` reads; no UTF-8 text can hold one) replaced by U+FFFD, and
    whether any was: for a store that is UTF-8 and must keep the rest of the value.
    Iterative, as deep as the value; the value itself is not changed."""

    changed = [False]

    def fix(s: str) -> str:
        changed[0] = True
        return _LONE.sub("\ufffd", s)

    def clean(x: Any) -> Any:
        t = x.__class__
        if t is str:
            return fix(x) if _LONE.search(x) else x
        if t is dict:
            new: dict = {}
            todo.append((x, new))
            return new
        if t is list:
            new_list: list = []
            todo.append((x, new_list))
            return new_list
        return x

    todo: list[tuple[Any, Any]] = []
    out = clean(value)
    while todo:
        src, dst = todo.pop()
        if dst.__class__ is dict:
            for k, v in src.items():
                dst[fix(k) if _LONE.search(k) else k] = clean(v)
        else:
            dst.extend(clean(v) for v in src)
    return out, changed[0]


def writable(value: Any) -> tuple[Any, bool]:
    """``value`` as a UTF-8 store can hold it, and whether lone surrogates were replaced
    (by U+FFFD, :func:`without_surrogates`) to get there; ``orjson.JSONEncodeError`` if
    even that cannot be written (an integer beyond 64 bits)."""
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        value, replaced = without_surrogates(value)
        orjson.dumps(value)  # what is left, if anything, raises
        return value, replaced
    return value, False


def parse_json(raw: bytes | bytearray | memoryview | str) -> Any:
    """Parse one JSON text (UTF-8), as the json module would; raise ParseError if not JSON.

    orjson parses first; the json module takes over for the JSON orjson refuses or
    rounds: lone-surrogate escapes (``"\\ud800"`` -> a str holding U+D800), numbers that
    overflow a double (``1e400`` -> ``inf``) and integers beyond 64 bits (kept exact up
    to 4,300 digits, Python's cheap limit; a longer one is ``inf`` like ``1e400``).
    NaN/Infinity literals, a BOM, non-UTF-8 bytes and nesting beyond 1024 levels are
    rejected.
    """
    return _parse(raw)[0]


# ------------------------------------------------------------------------- canonical

_PLAIN, _FLOATS, _FOREIGN = 0, 1, 2
_NoneType = type(None)


def _scan(value: Any) -> int:
    """_PLAIN if orjson writes ``value`` as JCS, _FLOATS if floats need repair, else _FOREIGN.

    Iterative: no recursion limit, and cheaper per node than recursive calls.
    """
    t = type(value)
    if t is dict:
        todo = [value.values()]
    elif t is list or t is tuple:
        todo = [value]
    elif t is str or t is int or t is bool or value is None:
        return _PLAIN
    elif t is float:
        return _FLOATS
    else:
        return _FOREIGN
    kind = _PLAIN
    pop, push = todo.pop, todo.append
    while todo:
        for x in pop():
            t = type(x)
            if t is str or t is int or t is bool or x is None:
                continue
            if t is dict:
                push(x.values())
            elif t is list or t is tuple:
                push(x)
            elif t is float:
                kind = _FLOATS
            else:
                return _FOREIGN
    return kind


def jcs_number(n: int | float) -> str:
    """A number as JCS writes it: ECMAScript Number::toString of its nearest double.

    >>> [jcs_number(x) for x in (1.0, -0.0, 1e21, 1e-7, 1e-6, 2**53 + 1, 0.1 + 0.2)]
    ['1', '0', '1e+21', '1e-7', '0.000001', '9007199254740992', '0.30000000000000004']
    """
    if type(n) is not float:
        if -_SAFE_INT <= n <= _SAFE_INT:
            return str(int(n))
        try:
            n = float(n)
        except OverflowError:
            raise CanonicalError(f"integer {n} is beyond the double range") from None
    if not math.isfinite(n):
        raise CanonicalError(f"{n} has no JSON form")
    if n == 0:
        return "0"
    r = repr(n)  # shortest round-trip digits, as ECMAScript picks them
    if "e" not in r:  # repr is positional for 1e-4 <= |n| < 1e16: so is ECMAScript
        return r[:-2] if r.endswith(".0") else r
    mantissa, exp = r.split("e")
    sign = ""
    if mantissa[0] == "-":
        sign, mantissa = "-", mantissa[1:]
    digits = mantissa.replace(".", "")
    k, e = len(digits), int(exp) + 1  # value = 0.digits * 10**e
    if k <= e <= 21:
        s = digits + "0" * (e - k)
    elif 0 < e <= 21:
        s = digits[:e] + "." + digits[e:]
    elif -6 < e <= 0:
        s = "0." + "0" * -e + digits
    else:
        s = digits[0] + ("." + digits[1:] if k > 1 else "") + f"e{e - 1:+d}"
    return sign + s


def _utf16_key(item: tuple[str, Any]) -> bytes:
    return item[0].encode("utf-16-be")


def _repaired(value: Any, utf16: bool) -> Any:
    """``value`` with numbers pre-written as JCS; with ``utf16``, objects in JCS key order."""
    t = type(value)
    if t is float or t is int:
        return orjson.Fragment(jcs_number(value))
    if t is dict:
        items = value.items()
        if utf16:
            items = sorted(items, key=_utf16_key)
        return {k: _repaired(v, utf16) for k, v in items}
    if t is list or t is tuple:
        return [_repaired(v, utf16) for v in value]
    return value


def _misordered(out: bytes) -> bool:
    """Could code-point and UTF-16 key order differ here? (U+E000..U+FFFF with non-BMP)

    ``find`` rather than ``in``: ``bytes.__contains__`` first tries its argument as an
    integer and discards the TypeError, which costs more than the search itself."""
    find = out.find
    return (find(b"\xee") >= 0 or find(b"\xef") >= 0) and (
        find(b"\xf0") >= 0 or find(b"\xf1") >= 0 or find(b"\xf2") >= 0
        or find(b"\xf3") >= 0 or find(b"\xf4") >= 0
    )


_SORTED = orjson.OPT_SORT_KEYS
_SORTED_STRICT = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER


def _canonical(value: Any, kind: int) -> bytes:
    if kind == _FOREIGN:
        return reference_bytes(value)
    try:
        if kind == _PLAIN:
            out = orjson.dumps(value, option=_SORTED_STRICT)
        else:
            out = orjson.dumps(_repaired(value, False), option=_SORTED)
        if not out.isascii() and _misordered(out):
            out = orjson.dumps(_repaired(value, True))
    except orjson.JSONEncodeError:  # big integer, lone surrogate, key not str, deep
        return reference_bytes(value)
    return out


def canonical_bytes(value: Any) -> bytes:
    """The JCS (RFC 8785) form of a JSON value; raise CanonicalError if it has none."""
    try:
        return _canonical(value, _scan(value))
    except RecursionError:
        raise CanonicalError("nested too deeply for a canonical form") from None


def _prepare(value: Any) -> Any:
    """Integers beyond +-(2**53-1) become the nearest double, as JCS reads every number."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if -_SAFE_INT <= value <= _SAFE_INT:
            return value
        try:
            return float(value)
        except OverflowError:
            raise CanonicalError(f"integer {value} is beyond the double range") from None
    if isinstance(value, (list, tuple)):
        return [_prepare(v) for v in value]
    if isinstance(value, dict):
        return {k: _prepare(v) for k, v in value.items()}
    return value


def reference_bytes(value: Any) -> bytes:
    """The reference JCS form: ``rfc8785.dumps`` after the big-integer rule above."""
    try:
        return rfc8785.dumps(_prepare(value))
    except (rfc8785.CanonicalizationError, UnicodeError) as e:  # a surrogate in a key
        raise CanonicalError(str(e)) from None
    except RecursionError:
        raise CanonicalError("nested too deeply for a canonical form") from None


_blake3 = blake3.blake3


def _digest(data: bytes) -> str:
    return HASH_PREFIX + _blake3(data).digest().hex()  # faster than .hexdigest()


def canonical_hash(value: Any) -> str:
    """``blake3:<hex>`` of the JCS form of ``value``; raise CanonicalError if it has none."""
    return _digest(canonical_bytes(value))


def raw_hash(raw: bytes) -> str:
    """``blake3-raw:<hex>``: the identity of bytes that have no canonical JSON form (not
    JSON, or JSON with no JCS form), what a frame, a logged stand-in or a trace's line
    gets instead of :func:`canonical_hash`."""
    return RAW_HASH_PREFIX + _blake3(raw).hexdigest()


# orjson's output with digits and "-" deleted, [:,[] as ":" and [.eE] as ".": a float
# token (always after ":", "," or "[" inside an object) then shows as ":.". Strings can
# only add false alarms (which take the exact path), never hide a float. The search is a
# compiled regex: for this two-byte needle, measured faster than ``in`` or ``find``.
_FLOAT_MARKS = bytes(58 if c in b":,[" else 46 if c in b".eE" else 32 for c in range(256))
_DIGITS_MINUS = b"0123456789-"
_float_mark = re.compile(rb":\.").search
_SHORT = 1024  # below this, the bytes check is cheaper than the type scan
_loads, _dumps = orjson.loads, orjson.dumps
_JSONDecodeError, _JSONEncodeError = orjson.JSONDecodeError, orjson.JSONEncodeError


def hash_raw(
    raw: bytes | bytearray | memoryview | str, hasher: Any = None
) -> tuple[Any, str | None]:
    """Parse one JSON text and hash it, the per-frame call: ``(value, "blake3:<hex>")``.

    The hash is None when the text is JSON but has no JCS form (see the module notes);
    ParseError when it is not JSON. Faster than parse_json + canonical_hash: orjson's
    parse yields exact JSON types and finite floats only, so for a short object (every
    JSON-RPC message) the float check runs on orjson's output bytes instead of a type
    scan, and a clean result is hashed as it is.

    ``hasher``: a ``blake3.blake3()`` to reset and reuse, cheaper per call than a new
    one; a framer keeps one per stream (never share one between threads).
    """
    try:
        value = _loads(raw)
    except _JSONDecodeError as first:
        return _hash_or_none(_refused(raw, first), _FOREIGN)
    if value.__class__ is dict and len(raw) <= _SHORT:
        try:
            out = _dumps(value, option=_SORTED_STRICT)
        except _JSONEncodeError:  # an integer beyond 53 bits, ...: the exact path
            pass
        else:
            if _float_mark(out.translate(_FLOAT_MARKS, _DIGITS_MINUS)) is None and (
                out.isascii() or not _misordered(out)
            ):
                if hasher is None:
                    return value, HASH_PREFIX + _blake3(out).digest().hex()
                hasher.reset()
                hasher.update(out)
                return value, HASH_PREFIX + hasher.digest().hex()
    return _hash_or_none(*_checked(raw, value))


def _hash_or_none(value: Any, kind: int) -> tuple[Any, str | None]:
    try:
        return value, _digest(_canonical(value, kind))
    except (CanonicalError, RecursionError):
        return value, None

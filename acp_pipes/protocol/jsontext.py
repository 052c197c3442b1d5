"""JSON text of any JSON value a peer sent, whatever it holds: compact, UTF-8, as orjson
writes it, and also what orjson refuses (a lone surrogate, valid JSON that a peer may
send; an integer beyond 64 bits; nesting past 1024 levels). Every tool that writes a
peer's value back out (a reply's id, a report, a diff, a page) writes it here.
"""

from __future__ import annotations

import math
import re
from typing import Any

import orjson

__all__ = ["dumps"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(value: Any) -> bytes:
    """Compact JSON (UTF-8) of any JSON value: orjson, or, for what it refuses (a lone
    surrogate, an integer beyond 64 bits, nesting past 1024 levels), :func:`_written`,
    which escapes each lone surrogate as ``\\uXXXX`` (the text says what was sent and
    stays UTF-8) and nests as deep as the value does.

    >>> dumps({"text": "a\\ud800", "n": 2**64, "x": [float("inf")]})
    b'{"text":"a\\\\ud800","n":18446744073709551616,"x":[null]}'
    """
    try:
        return orjson.dumps(value)
    except TypeError:
        return _written(value).encode()


def _string(s: str) -> str:
    import json  # only for such values

    text = json.dumps(s, ensure_ascii=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class _Token(str):
    """Punctuation already written, on the stack among the values still to write."""

    __slots__ = ()


def _written(value: Any) -> str:
    """JSON text of ``value`` without recursion (an explicit stack): strings with lone
    surrogates escaped, non-finite floats as null (as orjson writes them). TypeError for
    what is no JSON value."""
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        v = stack.pop()
        t = v.__class__
        if t is _Token or t is str:
            out.append(v if t is _Token else _string(v))
        elif v is None or t is bool:
            out.append("null" if v is None else "true" if v else "false")
        elif t is int:
            out.append(int.__repr__(v))
        elif t is float:
            out.append(float.__repr__(v) if math.isfinite(v) else "null")
        elif t is dict:
            stack.append(_Token("}"))
            items = list(v.items())
            for n in range(len(items) - 1, -1, -1):
                key, item = items[n]
                if key.__class__ is not str:
                    raise TypeError(f"a JSON object's key is a string, not {key!r}")
                stack.extend((item, _Token(_string(key) + ":")))
                if n:
                    stack.append(_Token(","))
            out.append("{")
        elif t is list or t is tuple:
            stack.append(_Token("]"))
            for n in range(len(v) - 1, -1, -1):
                stack.append(v[n])
                if n:
                    stack.append(_Token(","))
            out.append("[")
        else:
            raise TypeError(f"{t.__name__} is not a JSON value")
    return "".join(out)

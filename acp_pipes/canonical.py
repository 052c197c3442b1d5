"""Identity of JSON values: ``blake3:<hex>`` of the RFC 8785 (JCS) canonical form.

(First version: correct via ``rfc8785``; a fast path follows.)
"""

from __future__ import annotations

import json
from typing import Any

import blake3
import orjson
import rfc8785

__all__ = [
    "CanonicalError",
    "ParseError",
    "canonical_bytes",
    "canonical_hash",
    "hash_raw",
    "parse_json",
]

HASH_PREFIX = "blake3:"
_SAFE_INT = 2**53 - 1


class ParseError(ValueError):
    """The input is not one JSON text."""


class CanonicalError(ValueError):
    """A JSON value with no JCS form (lone surrogate, non-finite number, ...)."""


def _reject_constant(name: str) -> Any:
    raise ParseError(f"{name} is not JSON")


def parse_json(raw: bytes | str) -> Any:
    """Parse one JSON text (UTF-8); orjson first, the stdlib for what orjson refuses."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as first:
        try:
            text = raw.decode("utf-8") if not isinstance(raw, str) else raw
            text.encode("utf-8")
            return json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as e:
            raise ParseError(str(first)) from e


def _prepare(value: Any) -> Any:
    """Unsafe integers become the nearest double, as JCS reads every number."""
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
    """The reference JCS form: ``rfc8785`` after the documented integer rule."""
    try:
        return rfc8785.dumps(_prepare(value))
    except rfc8785.CanonicalizationError as e:
        raise CanonicalError(str(e)) from None


canonical_bytes = reference_bytes


def canonical_hash(value: Any) -> str:
    """``blake3:<hex>`` of the JCS form of ``value``; raises CanonicalError."""
    return HASH_PREFIX + blake3.blake3(canonical_bytes(value)).hexdigest()


def hash_raw(raw: bytes | str) -> tuple[Any, str | None]:
    """Parse one JSON text and hash it: ``(value, hash)``, hash None if it has no JCS form."""
    value = parse_json(raw)
    try:
        return value, canonical_hash(value)
    except CanonicalError:
        return value, None

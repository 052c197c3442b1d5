"""The closed copy of an ACP schema: what the official words say and the schema does not
enforce, added as constraints (see :mod:`acp_pipes.frame.validate.schema`).

Two additions, each marked so that a finding can tell it from the official schema's own
(:data:`RESERVED`, :data:`ABSOLUTE`): an ``other`` variant accepts only ``_``-prefixed
extension values (:func:`close`), and a path the schema calls absolute takes absolute
paths only (:func:`absolute_paths`, :func:`absolute_only`). A copy, never the official
files: a frame valid under it is valid under them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from acp_pipes.frame.validate.words import at

__all__ = ["ABSOLUTE", "RESERVED", "absolute_only", "absolute_paths", "close", "variant_path"]


#: Marks what the closed copy adds to an ``other`` variant (validators ignore the key).
RESERVED = "x-acp-pipes-reserved"


_RESERVED_PATTERN = "^_"


#: Marks what the closed copy adds to a path the schema calls absolute.
ABSOLUTE = "x-acp-pipes-absolute"


#: An absolute path in the native syntax of the agent's machine, as the v2 schema's
#: ``AbsolutePath`` words it: ``/home/user/project``, ``C:\\Users\\user\\project``,
#: ``\\\\server\\share\\project``.
_ABSOLUTE_PATTERN = r"^(?:/|[A-Za-z]:[\\/]|\\\\)"


_SAYS_ABSOLUTE = re.compile(r"\babsolute\b", re.I)


def close(closed: Any) -> Any:
    """``closed`` (a copy, changed in place) with its ``other`` variants accepting only
    ``_`` extension values."""
    for variant in _others(closed):
        if variant.get("type") == "string":
            variant["pattern"] = _RESERVED_PATTERN
            variant[RESERVED] = True
            continue
        tag = _tag(variant)
        if tag is None:
            continue
        props = variant.setdefault("properties", {})
        prop = dict(props.get(tag, {}))
        prop["pattern"] = _RESERVED_PATTERN
        prop[RESERVED] = True
        props[tag] = prop
    return closed


def absolute_paths(defs: dict[str, Any]) -> list[tuple[str, ...]]:
    """Where the schema calls a path absolute, as paths into ``$defs``: the definition
    ``AbsolutePath`` (v2), and each string property (or string items of an array
    property) whose own description says "absolute" (v1: "Absolute path to the file to
    read.", "Must be an absolute path.", "Each path must be absolute."). A property that
    only refers to ``AbsolutePath`` is covered by the definition."""
    out: list[tuple[str, ...]] = []
    for name, d in defs.items():
        if name == "AbsolutePath" and _types(d) == {"string"}:
            out.append((name,))
        for key, prop in (d.get("properties") or {}).items():
            if not isinstance(prop, dict) or not _SAYS_ABSOLUTE.search(
                    prop.get("description") or ""):
                continue
            if "string" in _types(prop):
                out.append((name, "properties", key))
            elif "array" in _types(prop) and isinstance(prop.get("items"), dict) \
                    and "string" in _types(prop["items"]):
                out.append((name, "properties", key, "items"))
    return out


def _types(node: dict[str, Any]) -> set[str]:
    t = node.get("type")
    return {t} if isinstance(t, str) else set(t) if isinstance(t, list) else set()


def absolute_only(wheres: Any, closed: Any) -> Any:
    """``closed`` (the closed copy of a definition, changed in place) with each path the
    schema calls absolute in it (``wheres``, from :func:`absolute_paths`) taking absolute
    paths only."""
    for where in wheres:
        node = at(closed, list(where[1:]))
        if isinstance(node, dict):
            node["pattern"] = _ABSOLUTE_PATTERN
            node[ABSOLUTE] = True
    return closed


def _others(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        for key in ("anyOf", "oneOf"):
            for variant in node.get(key, ()):
                if isinstance(variant, dict) and variant.get("title") == "other":
                    yield variant
        for value in node.values():
            yield from _others(value)
    elif isinstance(node, list):
        for value in node:
            yield from _others(value)


def _tag(variant: dict[str, Any]) -> str | None:
    """The tag property an object ``other`` variant excludes the known values of."""
    tags = set()
    for known in variant.get("not", {}).get("anyOf", ()):
        tags.update(known.get("required", ()))
    return tags.pop() if len(tags) == 1 else None


def variant_path(path: list[Any]) -> list[Any]:
    """The path of the ``other`` variant a closed-copy keyword sits in."""
    if len(path) >= 3 and path[-3] == "properties":
        return path[:-3]
    return path[:-1]

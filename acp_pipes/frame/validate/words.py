"""How a schema finding is said: JSON pointers into a value or a schema file, the
schema's own words at a place (its descriptions), a value cut short for a message.

Shared by the schema's validators (:mod:`acp_pipes.frame.validate.schema`), its closed
copy and the rules beyond it (:mod:`acp_pipes.frame.validate.rules`), so every violation
quotes the official files the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

__all__ = ["at", "error_message", "escape", "first_words", "paragraph", "show", "words_at"]


#: A rendered instance longer than this is cut in messages (a frame can be megabytes).
_SHOWN = 60


def escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def at(root: Any, path: Sequence[Any]) -> Any:
    node = root
    for p in path:
        try:
            node = node[p]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def words_at(root: dict[str, Any], path: list[Any]) -> str | None:
    """The schema's own words for the node at ``path``: its description, or the nearest
    enclosing one (a property's description over its type's)."""
    for end in range(len(path), 0, -1):
        node = at(root, path[:end])
        if isinstance(node, dict):
            words = first_words(node)
            if words:
                return words
    return None


_BANNER = ("**UNSTABLE**\n\nThis capability is not part of the spec yet, and may be removed "
           "or changed at any point.\n\n")


def first_words(node: dict[str, Any]) -> str | None:
    """The first paragraph of a node's description (without the UNSTABLE banner the
    unstable schema puts first), on one line."""
    text = node.get("description")
    if not isinstance(text, str):
        return None
    first = text.removeprefix(_BANNER).strip().split("\n\n", 1)[0]
    return " ".join(first.split()) or None


def paragraph(node: dict[str, Any], terms: list[str]) -> str | None:
    """The first paragraph of a node's description that contains one of ``terms``, on
    one line; None when none does."""
    text = node.get("description")
    if not isinstance(text, str):
        return None
    for para in text.removeprefix(_BANNER).split("\n\n"):
        if any(t in para for t in terms):
            return " ".join(para.split())
    return None


def error_message(e: Any, path: list[Any]) -> str:
    """The validator's message, with the offending value cut short; a union that no
    branch of matched says which definition's alternatives it missed."""
    name = e.kind.name
    if name in ("anyOf", "oneOf"):
        where = _def_name(path)
        return f"{show(e.instance)} matches none of the alternatives ({name}) of {where}"
    msg = e.message
    full = _render(e.instance)
    if len(full) > _SHOWN and msg.startswith(full):
        msg = show(e.instance) + msg[len(full):]
    return msg


def _def_name(path: list[Any]) -> str:
    return str(path[1]) if len(path) > 1 and path[0] == "$defs" else "the schema"


def _render(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return repr(value)


def show(value: Any) -> str:
    text = _render(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."

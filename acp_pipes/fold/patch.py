"""ACP v2's one patch rule, as small pure functions (ASR-704, ASR-708).

ACP v2 reports state as upserts keyed by stable IDs: an omitted field is unchanged,
``null`` clears it, a value replaces it (arrays as a whole), a chunk appends, and a
full-content upsert replaces what chunks built (``content: []`` resets). ``_meta`` is
patched key by key: a present key replaces, a ``null`` key is removed, ``_meta: null``
clears it all. Everything here works on plain dicts so the fold and the property tests
share one definition of the rule.
"""

from __future__ import annotations

from typing import Any

__all__ = ["append_block", "patch_fields", "patch_meta"]


def patch_meta(current: dict[str, Any] | None, patch: Any) -> dict[str, Any] | None:
    """``_meta`` after one upsert's ``_meta`` (ASR-708): None means no metadata."""
    if patch is None:
        return None
    if not isinstance(patch, dict):
        return current  # malformed: ACP deserialises it as absent
    out = dict(current) if current else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out or None


def patch_fields(value: dict[str, Any], update: dict[str, Any], skip: frozenset[str], *,
                 keep_on_null: tuple[str, ...] = ()) -> None:
    """Apply an upsert's fields to ``value`` in place: absent unchanged, null clears,
    a value replaces (arrays whole). ``_meta`` is patched key by key. Fields in
    ``keep_on_null`` keep their known value on ``null`` (ACP says so for a session
    message's sender and recipient)."""
    for k, v in update.items():
        if k in skip:
            continue
        if k == "_meta":
            m = patch_meta(value.get("_meta"), v)
            if m is None:
                value.pop("_meta", None)
            else:
                value["_meta"] = m
        elif v is None:
            if k not in keep_on_null:
                value.pop(k, None)
        else:
            value[k] = v


def _plain_text(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text" and isinstance(
        block.get("text"), str)


def append_block(content: list[Any], block: Any, concat: bool = True) -> None:
    """Append one chunk's block to ``content`` in place, joining text by concatenation
    (ASR-211 via ASR-704): a text block whose other fields equal those of a text block
    ending the content extends that block's text; anything else is a new block."""
    if concat and content and _plain_text(block) and _plain_text(content[-1]):
        last = content[-1]
        if len(last) == len(block) and all(
            k == "text" or block.get(k, _MISSING) == v for k, v in last.items()
        ):
            content[-1] = {**last, "text": last["text"] + block["text"]}
            return
    content.append(block)


_MISSING = object()

"""Minted identifiers in one message: masked for comparing, named for showing.

Two runs of one agent differ in what the agent makes up (a session id, tool-call ids)
and people do not call that a difference. Without ``--strict`` acp-align compares every
*minted identifier* (:data:`MINTED_KEYS`, wherever it sits, and the JSON-RPC id of an
agent's request and of the client's answer to it) as a renaming: :func:`mask` replaces
each by one mask before a step's identity is taken, and returns the identifiers found,
``(kind, value)`` in a fixed order, so the comparison can check that the runs' values
pair one to one (:func:`acp_pipes.align.compare.compare`). Which identifiers these are
is the model of the same session's (:mod:`acp_pipes.sameness.minted`); what else varies
(clocks, a vendor's values) is :mod:`acp_pipes.align.model`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from acp_pipes.sameness.minted import MINTED_KINDS

__all__ = ["MINTED_KEYS", "RPC", "Found", "mask"]

#: Object members whose value an agent mints, anywhere in a message, by kind.
MINTED_KEYS = MINTED_KINDS
#: The kind of the JSON-RPC ids of agent requests (and of the client's answers).
RPC = "agentRequest"
#: The identifiers of one message, in the order :func:`mask` meets them.
Found = tuple[tuple[str, Any], ...]

_MASK = "<acp-pipes:minted>"

#: Where the identifiers usually are, in the order the full walk meets them (keys sorted
#: at each level, so path order): when every occurrence of the keys in a frame's bytes
#: is at one of these, the walk over the whole message is skipped.
_KNOWN = sorted(
    (("params", "sessionId"), ("params", "terminalId"), ("params", "toolCall", "toolCallId"),
     ("params", "update", "messageId"), ("params", "update", "toolCallId"),
     ("params", "toolCallId"), ("result", "messageId"), ("result", "sessionId"),
     ("result", "terminalId")))
#: :data:`_KNOWN` per top-level member: ``(key, the member holding it or None)``.
_PLACES: dict[str, list[tuple[str, str | None]]] = {"params": [], "result": []}
for _path in _KNOWN:
    _PLACES[_path[0]].append((_path[-1], _path[1] if len(_path) == 3 else None))
_QUOTED = tuple(f'"{k}"' for k in MINTED_KEYS)

Namer = Callable[[str, Any], Any]


def _masked(_kind: str, _value: Any) -> str:
    return _MASK


def mask(msg: Any, d: str | None, kind: str | None, name: Namer | None = None,
         raw: str | None = None) -> tuple[Any, Found]:
    """``msg`` (a JSON-RPC message; ``d`` its direction, ``kind`` its frame kind) with its
    identifiers replaced by ``name(kind, value)`` (by default one mask for all), and the
    identifiers found. Pure on ``msg``: copies what changes. ``raw``, the text ``msg``
    was parsed from, allows the shortcut of :data:`_KNOWN` (its keys counted in the
    text, where no ``\\u`` escape could hide one).

    >>> mask({"params": {"sessionId": "s1", "text": "s1"}}, "a2c", "notification")
    ({'params': {'sessionId': '<acp-pipes:minted>', 'text': 's1'}}, (('session', 's1'),))
    """
    if not isinstance(msg, dict):
        return msg, ()
    name = name or _masked
    found: list[tuple[str, Any]] = []
    out = dict(msg)
    rid = out.get("id")
    if rid is not None and rid.__class__ is not bool and (
            (d == "a2c" and kind == "request")
            or (d == "c2a" and kind in ("response", "error"))):
        found.append((RPC, rid))
        out["id"] = name(RPC, rid)
    if raw is not None and "\\u" not in raw:
        total = 0
        for q in _QUOTED:
            total += raw.count(q)
        if total == 0:
            return out, tuple(found)
        if _known(out, found, name, total):
            return out, tuple(found)
    for key in sorted(out):
        if key != "id":
            out[key] = _walk(out[key], found, name)
    return out, tuple(found)


def _known(out: dict, found: list, name: Namer, total: int) -> bool:
    """Mask the identifiers at :data:`_KNOWN` places of ``out`` (in place on copies of
    what changes) when they are all ``total`` of them; else change nothing."""
    hits: list[tuple[tuple[str, ...], str, Any]] = []
    for top in ("params", "result"):
        node = out.get(top)
        if node.__class__ is not dict:
            continue
        for key, sub in _PLACES[top]:
            where = node if sub is None else node.get(sub)
            if where.__class__ is dict:
                v = where.get(key)
                if v is not None:
                    if v.__class__ is not str and v.__class__ is not int:
                        return False
                    hits.append(((top,) if sub is None else (top, sub), key, v))
    if len(hits) != total:
        return False
    for path, key, v in hits:
        kind = MINTED_KEYS[key]
        found.append((kind, v))
        node = out
        for seg in path:
            node[seg] = node = dict(node[seg])
        node[key] = name(kind, v)
    return True


def _walk(value: Any, found: list, name: Namer) -> Any:
    if isinstance(value, dict):
        out = None
        for key in sorted(value):
            sub = value[key]
            kind = MINTED_KEYS.get(key)
            if kind is not None and (sub.__class__ is str or sub.__class__ is int):
                found.append((kind, sub))
                new: Any = name(kind, sub)
            else:
                new = _walk(sub, found, name)
            if new is not sub:
                if out is None:
                    out = dict(value)
                out[key] = new
        return value if out is None else out
    if isinstance(value, list):
        out_l = None
        for i, sub in enumerate(value):
            new = _walk(sub, found, name)
            if new is not sub:
                if out_l is None:
                    out_l = list(value)
                out_l[i] = new
        return value if out_l is None else out_l
    return value

"""Which of a validator's errors a violation reports: for a union (anyOf/oneOf) that no
branch matched, the errors of the one branch that was meant (its tag and JSON type fit
the value), not every branch's.

:func:`explain` picks from an error the validator built whole; :func:`shape` is the same
test as a schema, for a large value checked part by part
(:meth:`acp_pipes.frame.validate.schema.Schema.findings`), whose errors are wrapped
(:class:`PartError`, :class:`UnmatchedUnion`) to read as the whole value's would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["MISS_BELOW", "PartError", "UnmatchedUnion", "explain", "shape"]


#: Error kinds whose branch of an anyOf plainly does not apply to the instance: the
#: branch is for another JSON type, or another value (of the instance, or of a tag
#: property), or is the ``other`` catch-all excluded by ``not``.
_MISS_HERE = frozenset({"type", "not", "const", "enum"})
MISS_BELOW = frozenset({"const", "enum"})


def explain(err: Any) -> Iterator[Any]:
    """The errors worth reporting for one validator error: an anyOf/oneOf that failed is
    replaced by the errors of the one branch that was meant (the branch whose tag value
    and JSON type fit the instance), recursively; when no single branch was meant, the
    union's own error stands."""
    kind = err.kind
    if kind.name in ("anyOf", "oneOf") and hasattr(kind, "context"):
        here = list(err.instance_path)
        meant = [b for b in kind.context if not _missed(b, here, MISS_BELOW)]
        if len(meant) > 1:  # e.g. {"stopReason": "x"} against a branch for null
            narrower = [b for b in meant if not _missed(b, here, MISS_BELOW | {"type"})]
            meant = narrower or meant
        if len(meant) == 1 and meant[0]:
            for sub in meant[0]:
                yield from explain(sub)
            return
    yield err


def _missed(branch: list[Any], here: list[Any], below: frozenset[str]) -> bool:
    """Does this branch of a union plainly not apply (its errors say the instance has
    another JSON type, or another value of a property the branch is tagged by)?"""
    depth = len(here)
    for sub in branch:
        p = list(sub.instance_path)
        name = sub.kind.name
        if name in _MISS_HERE and p == here:
            return True
        if name in below and len(p) == depth + 1 and p[:depth] == here:
            return True
    return False


def shape(node: Any, resolve: Callable[[Any], Any], below: frozenset[str]) -> Any:
    """What :func:`_missed` asks of a union's branch, as a schema: the value's type,
    ``not``, ``const`` and ``enum`` (through references and allOf), and the ``below``
    keywords of its properties. A value the branch misses fails it. ``resolve``: what a
    node only refers to (:meth:`acp_pipes.frame.validate.schema.Schema.resolve`)."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {k: node[k] for k in ("type", "const", "enum", "not") if k in node}
    members = [resolve(m) for m in node.get("allOf", ())]
    if "$ref" in node:
        members.append(resolve({"$ref": node["$ref"]}))
    parts = [shape(m, resolve, below) for m in members]
    props = node.get("properties")
    if isinstance(props, dict):
        shaped = {}
        for key, sub in props.items():
            leaf = _leaf(resolve(sub), resolve, below)
            if leaf:
                shaped[key] = leaf
        if shaped:
            out["properties"] = shaped
    if parts:
        out["allOf"] = parts
    return out


def _leaf(node: Any, resolve: Callable[[Any], Any], below: frozenset[str]) -> dict[str, Any]:
    """The ``below`` keywords of a property's schema (through references and allOf)."""
    if not isinstance(node, dict):
        return {}
    out: dict[str, Any] = {k: node[k] for k in below if k in node}
    parts = [_leaf(resolve(m), resolve, below) for m in node.get("allOf", ())]
    if "$ref" in node:
        parts.append(_leaf(resolve({"$ref": node["$ref"]}), resolve, below))
    parts = [p for p in parts if p]
    if parts:
        out["allOf"] = parts
    return out


class PartError:
    """A validator error of a part, its schema path made a path from the root (the
    validator's own keywords are named from the part's node; those it reached through a
    reference already are)."""

    __slots__ = ("_e", "instance", "instance_path", "kind", "message", "schema_path")

    def __init__(self, e: Any, prefix: list[Any]):
        self._e = e
        path = list(e.schema_path)
        self.schema_path = path if path[:1] == ["$defs"] else prefix + path
        self.instance_path = e.instance_path
        self.instance = e.instance
        self.message = e.message
        self.kind = _Kind(e.kind, prefix)


class _Kind:
    __slots__ = ("_k", "_prefix", "name")

    def __init__(self, k: Any, prefix: list[Any]):
        self._k = k
        self._prefix = prefix
        self.name = k.name

    def as_dict(self) -> Any:
        return self._k.as_dict()

    def __getattr__(self, attr: str) -> Any:
        if attr == "context":
            return [[PartError(e, self._prefix) for e in branch] for branch in self._k.context]
        return getattr(self._k, attr)


class UnmatchedUnion:
    """A union no branch of matches, none of them meant: reported as the validator
    reports it (its branches' errors are not built)."""

    __slots__ = ("instance", "instance_path", "kind", "message", "schema_path")

    def __init__(self, value: Any, path: list[Any], union: str):
        self.instance = value
        self.instance_path: list[Any] = []
        self.schema_path = path
        self.message = ""
        self.kind = _UnionKind(union)


class _UnionKind:
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

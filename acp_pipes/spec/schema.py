"""The official ACP JSON Schemas as validators: one per ``$defs`` name, compiled once.

The schema's top-level unions accept nearly anything (a response's ``result`` is an anyOf
of every result type, and some of those are ``{}``), so a frame is checked against the
definition of its method, as the schema marks it with ``x-method`` and ``x-side``: a
request's ``params`` against ``<Method>Request``, a response's ``result`` against the
``Response`` of the request it answers, an error against ``Error``.

Open variants. ACP v2 unions end with a catch-all titled ``other`` that accepts any value
of the union's tag ("Unknown values that do not begin with ``_`` are reserved for future
ACP variants"), so a misspelt ``sessionUpdate`` or ``stopReason`` passes the official
schema. :class:`Schema` also builds a *closed* copy, in which each ``other`` variant
accepts only ``_``-prefixed extension values, exactly as those words say. A frame valid
under the closed copy is valid under the official one (the copy only adds constraints);
a frame that fails the closed copy but passes the official schema uses a reserved value,
and the closed copy's error says where. Violations are always explained in the words of
the official files; the closed copy is never named.

Validation runs on ``jsonschema_rs`` (a compiled validator, ~3-5 us a frame); its
verdicts are checked against the reference ``jsonschema`` package by a property test.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from typing import Any

import jsonschema_rs
import orjson

from acp_pipes.schemas import ACP_V1, ACP_V2, acp_schema

__all__ = [
    "REVISIONS", "Finding", "Schema", "escape", "first_words", "paragraph", "schema",
    "schema_file",
]

#: Marks what the closed copy adds to an ``other`` variant (validators ignore the key).
RESERVED = "x-acp-pipes-reserved"
_RESERVED_PATTERN = "^_"

#: A rendered instance longer than this is cut in messages (a frame can be megabytes).
_SHOWN = 60

#: Error kinds whose branch of an anyOf plainly does not apply to the instance: the
#: branch is for another JSON type, or another value (of the instance, or of a tag
#: property), or is the ``other`` catch-all excluded by ``not``.
_MISS_HERE = frozenset({"type", "not", "const", "enum"})
_MISS_BELOW = frozenset({"const", "enum"})


def schema_file(revision: str, unstable: bool) -> str:
    """How violations name a schema: ``v2.0.0-alpha.9/schema.unstable.json``."""
    return f"{revision}/{'schema.unstable.json' if unstable else 'schema.json'}"


class Finding:
    """One reason a value fails a definition: where (a JSON pointer into the value),
    what is wrong, and where the schema says so (a pointer into the schema file, and the
    schema's own words: the nearest ``description``)."""

    __slots__ = ("location", "message", "pointer", "reserved", "words")

    def __init__(self, pointer: str, message: str, location: str, words: str | None,
                 reserved: bool = False):
        self.pointer = pointer
        self.message = message
        self.location = location
        self.words = words
        self.reserved = reserved

    def __repr__(self) -> str:
        return f"Finding({self.pointer!r}, {self.message!r}, {self.location!r})"


class Schema:
    """One official ACP schema file (a revision, stable or with its unstable features)
    and its closed copy; validators are compiled on first use of each definition."""

    def __init__(self, revision: str, unstable: bool):
        self.revision = revision
        self.unstable = unstable
        self.file = schema_file(revision, unstable)
        self.root = acp_schema(revision, unstable=unstable)
        self.defs: dict[str, Any] = self.root["$defs"]
        self._open: dict[str, Any] = {}
        self._closed: dict[str, Any] = {}
        self._closed_defs: dict[str, Any] = {}  # name -> its closed copy, made on demand
        self._closures: dict[str, frozenset[str]] = {}
        self._batches: dict[str, list[int]] = {}  # batch name -> indices in root anyOf
        # (method, handler side) -> {"Request"|"Response"|"Notification": $defs name}
        self.methods: dict[tuple[str, str], dict[str, str]] = {}
        for name, d in self.defs.items():
            method, side = d.get("x-method"), d.get("x-side")
            if method is None or side is None:
                continue
            for kind in ("Request", "Response", "Notification"):
                if name.endswith(kind):
                    self.methods.setdefault((method, side), {})[kind] = name

    def __repr__(self) -> str:
        return f"Schema({self.file!r})"

    def sides(self, method: str) -> set[str]:
        """The ``x-side`` values (who handles it) the schema gives ``method``."""
        return {side for (m, side) in self.methods if m == method}

    def definition(self, method: str, side: str, kind: str) -> str | None:
        """The ``$defs`` name of ``method``'s ``kind`` ("Request", "Response",
        "Notification") as handled by ``side``; None when the schema has none."""
        entry = self.methods.get((method, side))
        return entry.get(kind) if entry else None

    def batch(self, sender: str) -> str | None:
        """The ``$defs``-like name under which :meth:`is_valid` and :meth:`findings` check
        a JSON-RPC batch sent by ``sender`` ("agent"/"client"); None when this revision
        has no batches (v1)."""
        prefix = "Agent" if sender == "agent" else "Client"
        titles = {prefix + "BatchCall", prefix + "BatchResponse"}
        where = [i for i, v in enumerate(self.root.get("anyOf", ()))
                 if v.get("title") in titles]
        if not where:
            return None
        name = f"{prefix}Batch"  # a name no ACP definition has
        self._batches[name] = where
        return name

    def words_of(self, name: str) -> str | None:
        """The schema's own words for ``$defs[name]`` (its description's first paragraph)."""
        return first_words(self.defs.get(name) or {})

    def validator(self, name: str, closed: bool = False) -> Any:
        """The compiled validator of ``$defs[name]`` (of the closed copy, with ``closed``)."""
        cache = self._closed if closed else self._open
        v = cache.get(name)
        if v is None:
            where = self._batches.get(name)
            target: dict[str, Any] = {"$ref": f"#/$defs/{name}"} if where is None else {
                "anyOf": [self.root["anyOf"][i] for i in where]}
            if closed:
                target = _close(copy.deepcopy(target))
            # only the definitions it reaches: compiling all of them costs ~20x more
            defs = {n: self._closed_def(n) if closed else self.defs[n]
                    for n in self._closure(target)}
            v = cache[name] = jsonschema_rs.Draft202012Validator({"$defs": defs, **target})
        return v

    def _closure(self, node: Any) -> frozenset[str]:
        """The names of the definitions ``node`` reaches through ``$ref``s."""
        seen: set[str] = set()
        todo = list(_refs(node))
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(_refs(self.defs[n]))
        return frozenset(seen)

    def _closed_def(self, name: str) -> Any:
        d = self._closed_defs.get(name)
        if d is None:
            d = self._closed_defs[name] = _close(copy.deepcopy(self.defs[name]))
        return d

    def is_valid(self, name: str, instance: Any, *, closed: bool = False) -> bool:
        """Does ``instance`` match ``$defs[name]`` (of the closed copy, with ``closed``)?"""
        return self.validator(name, closed).is_valid(instance)

    def findings(self, name: str, instance: Any, base: str = "", *, closed: bool = False,
                 limit: int = 20) -> tuple[list[Finding], int]:
        """Why ``instance`` fails ``$defs[name]``: up to ``limit`` findings (pointers
        prefixed with ``base``), and how many there were in all. With ``closed``, only
        what the closed copy adds: the reserved values."""
        out: list[Finding] = []
        total = 0
        for err in self.validator(name, closed).iter_errors(instance):
            for e in _explain(err):
                f = self._finding(name, e, base, closed)
                if closed and not f.reserved:
                    continue
                total += 1
                if len(out) < limit:
                    out.append(f)
        return out, total

    def _finding(self, name: str, e: Any, base: str, closed: bool) -> Finding:
        pointer = base + "".join("/" + escape(str(p)) for p in e.instance_path)
        path = list(e.schema_path)
        if path[:1] == ["anyOf"] and len(path) > 1 and name in self._batches:
            path[1] = self._batches[name][path[1]]  # a batch: its place in the file
        location = "#/" + "/".join(escape(str(p)) for p in path)
        if closed and path[:1] == ["$defs"] and len(path) > 1:
            node = _at(self._closed_def(path[1]), path[2:-1])
        elif closed:
            node = _at(_close(copy.deepcopy(self.root)), path[:-1])
        else:
            node = _at(self.root, path[:-1])
        if closed and isinstance(node, dict) and node.get(RESERVED):
            value = e.instance
            words = _words(self.root, path[:-3] if path[-3:-2] == ["properties"] else path[:-1])
            return Finding(pointer, f"{_show(value)} is reserved for future ACP versions "
                           "(an extension value must begin with _)",
                           "#/" + "/".join(escape(str(p)) for p in _variant(path)),
                           words, reserved=True)
        keyword = path[-1] if path else None
        words = None
        if keyword == "required" and isinstance(node, dict):
            missing = e.kind.as_dict().get("property")
            prop = node.get("properties", {}).get(missing)
            if isinstance(prop, dict):
                words = first_words(prop)
        if words is None:
            words = _words(self.root, path[:-1])
        return Finding(pointer, _message(e, path), location, words)


def _variant(path: list[Any]) -> list[Any]:
    """The path of the ``other`` variant a closed-copy keyword sits in."""
    if len(path) >= 3 and path[-3] == "properties":
        return path[:-3]
    return path[:-1]


@functools.cache
def schema(revision: str, unstable: bool) -> Schema:
    """The :class:`Schema` of ``revision`` (one of :data:`acp_pipes.schemas.ACP_REVISIONS`),
    shared by every check in the process: validators compile once."""
    return Schema(revision, unstable)


#: Protocol versions (``initialize``'s ``protocolVersion``) and the revision checked.
REVISIONS = {1: ACP_V1, 2: ACP_V2}


def _refs(node: Any) -> Iterator[str]:
    """The ``$defs`` names ``node`` refers to directly."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            yield ref[len("#/$defs/"):]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _close(closed: Any) -> Any:
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


def _explain(err: Any) -> Iterator[Any]:
    """The errors worth reporting for one validator error: an anyOf/oneOf that failed is
    replaced by the errors of the one branch that was meant (the branch whose tag value
    and JSON type fit the instance), recursively; when no single branch was meant, the
    union's own error stands."""
    kind = err.kind
    if kind.name in ("anyOf", "oneOf") and hasattr(kind, "context"):
        here = list(err.instance_path)
        meant = [b for b in kind.context if not _missed(b, here, _MISS_BELOW)]
        if len(meant) > 1:  # e.g. {"stopReason": "x"} against a branch for null
            narrower = [b for b in meant if not _missed(b, here, _MISS_BELOW | {"type"})]
            meant = narrower or meant
        if len(meant) == 1 and meant[0]:
            for sub in meant[0]:
                yield from _explain(sub)
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


def _message(e: Any, path: list[Any]) -> str:
    """The validator's message, with the offending value cut short; a union that no
    branch of matched says which definition's alternatives it missed."""
    name = e.kind.name
    if name in ("anyOf", "oneOf"):
        where = _def_name(path)
        return f"{_show(e.instance)} matches none of the alternatives ({name}) of {where}"
    msg = e.message
    full = _render(e.instance)
    if len(full) > _SHOWN and msg.startswith(full):
        msg = _show(e.instance) + msg[len(full):]
    return msg


def _def_name(path: list[Any]) -> str:
    return str(path[1]) if len(path) > 1 and path[0] == "$defs" else "the schema"


def _render(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return repr(value)


def _show(value: Any) -> str:
    text = _render(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def _at(root: Any, path: list[Any]) -> Any:
    node = root
    for p in path:
        try:
            node = node[p]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def _words(root: dict[str, Any], path: list[Any]) -> str | None:
    """The schema's own words for the node at ``path``: its description, or the nearest
    enclosing one (a property's description over its type's)."""
    for end in range(len(path), 0, -1):
        node = _at(root, path[:end])
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

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
accepts only ``_``-prefixed extension values, exactly as those words say, and each path
the schema's words call absolute takes absolute paths only. A frame valid under the closed
copy is valid under the official one (the copy only adds constraints); a frame that fails
the closed copy but passes the official schema uses a reserved value or a relative path,
and the closed copy's error says where. Violations are always explained in the words of
the official files; the closed copy is never named.

The closed copy is made in :mod:`acp_pipes.frame.validate.closed`; which errors a
violation reports in :mod:`acp_pipes.frame.validate.explain`; how it says them in
:mod:`acp_pipes.frame.validate.words`.

Validation runs on ``jsonschema_rs`` (a compiled validator, ~3-5 us a frame); its
verdicts are checked against the reference ``jsonschema`` package by a property test.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator, Sequence
from typing import Any

import jsonschema_rs

from acp_pipes.frame.validate.closed import (
    ABSOLUTE,
    RESERVED,
    absolute_only,
    absolute_paths,
    close,
    variant_path,
)
from acp_pipes.frame.validate.explain import MISS_BELOW, PartError, UnmatchedUnion, explain, shape
from acp_pipes.frame.validate.words import (
    at,
    error_message,
    escape,
    first_words,
    show,
    words_at,
)
from acp_pipes.schemas import ACP_V1, ACP_V2, acp_schema

__all__ = ["NEWEST_V2", "REVISIONS", "Finding", "Schema", "newer_capabilities", "schema",
           "schema_file"]


def schema_file(revision: str, unstable: bool) -> str:
    """How violations name a schema: ``v2.0.0-alpha.9/schema.unstable.json``."""
    return f"{revision}/{'schema.unstable.json' if unstable else 'schema.json'}"


class Finding:
    """One reason a value fails a definition: where (a JSON pointer into the value),
    what is wrong, and where the schema says so (a pointer into the schema file, and the
    schema's own words: the nearest ``description``)."""

    __slots__ = ("location", "message", "pointer", "rule", "words")

    def __init__(self, pointer: str, message: str, location: str, words: str | None,
                 rule: str = "schema"):
        self.pointer = pointer
        self.message = message
        self.location = location
        self.words = words
        self.rule = rule  # "schema"; or what the closed copy adds: "reserved-value",
        # "relative-path"

    @property
    def reserved(self) -> bool:
        return self.rule == "reserved-value"

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
        self._parts_cache: dict[tuple[Any, ...], Any] = {}  # see _part_validator
        self._closed_root: Any = None
        self._absolute: dict[str, list[tuple[str, ...]]] = {}
        for where in absolute_paths(self.defs):
            self._absolute.setdefault(where[0], []).append(where)
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
                target = close(copy.deepcopy(target))
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
            d = self._closed_defs[name] = absolute_only(self._absolute.get(name, ()),
                                                    close(copy.deepcopy(self.defs[name])))
        return d

    def is_valid(self, name: str, instance: Any, *, closed: bool = False) -> bool:
        """Does ``instance`` match ``$defs[name]`` (of the closed copy, with ``closed``)?"""
        return self.validator(name, closed).is_valid(instance)

    def findings(self, name: str, instance: Any, base: str = "", *, closed: bool = False,
                 limit: int = 20) -> tuple[list[Finding], int | None]:
        """Why ``instance`` fails ``$defs[name]``: up to ``limit`` findings (pointers
        prefixed with ``base``), and how many there were in all (None: more than
        ``limit``, not counted). With ``closed``, only what the closed copy adds: the
        reserved values.

        The validator's error list is built whole and costs ~0.3 ms an error (a union's
        error carries every branch's), so it is asked only about small values (at most
        :data:`_WHOLE` JSON values): a larger one is explained part by part
        (:meth:`_parts`), and the work stops at ``limit + 1`` findings."""
        if _small(instance):
            out: list[Finding] = []
            total = 0
            for f in self._explained(name, self.validator(name, closed).iter_errors(instance),
                                     base, closed):
                total += 1
                if len(out) < limit:
                    out.append(f)
            return out, total
        out = []
        for f in self._parts(name, self._start(name), instance, base, "", closed):
            if len(out) == limit:
                return out, None
            out.append(f)
        return out, len(out)

    def _explained(self, name: str, errors: Any, base: str, closed: bool
                   ) -> Iterator[Finding]:
        for err in errors:
            for e in explain(err):
                f = self._finding(name, e, base, closed)
                if not closed or f.rule != "schema":
                    yield f

    # -- a large value, part by part -------------------------------------------------------
    #
    # A node is named by its path from the validator's root: ``("$defs", Name, ...)``, or
    # for a batch a path into its ``anyOf`` (as the validator's own schema paths are). Each
    # part of the value is checked by ``is_valid`` first (fast, nothing built); only a part
    # that fails and is small is asked for its errors. What the parts report is what the
    # whole would (an object's own keywords, each property, each item, each allOf member
    # and the one meant branch of a union, as :func:`explain` picks it), in another order.

    def _start(self, name: str) -> tuple[Any, ...]:
        return () if name in self._batches else ("$defs", name)

    def _node(self, name: str, path: tuple[Any, ...], closed: bool) -> Any:
        if path[:1] == ("$defs",):
            return at(self._closed_def(path[1]) if closed else self.defs[path[1]], path[2:])
        where = self._batches[name]
        target = {"anyOf": [self.root["anyOf"][i] for i in where]}
        return at(close(copy.deepcopy(target)) if closed else target, path)

    def _part_validator(self, name: str, path: tuple[Any, ...], closed: bool,
                        part: str = "") -> Any:
        """A validator of the node at ``path`` (``part``: "own" its own keywords alone,
        "meant"/"narrow" the tests :func:`_missed` makes of a union's branch, "anyOf"/
        "oneOf" its union alone)."""
        key = (name, path, closed, part)
        cache = self._parts_cache
        v = cache.get(key)
        if v is None:
            node = self._node(name, path, closed)
            if part == "own":
                node = _own(node)
            elif part in ("anyOf", "oneOf"):
                node = {part: node[part]}
            elif part:
                node = shape(self.resolve(node, closed), lambda n: self.resolve(n, closed),
                             MISS_BELOW | ({"type"} if part == "narrow" else set()))
            if isinstance(node, dict):
                defs = {n: self._closed_def(n) if closed else self.defs[n]
                        for n in self._closure(node)}
                node = {"$defs": defs, **node}
            v = cache[key] = jsonschema_rs.Draft202012Validator(node)
        return v

    def resolve(self, node: Any, closed: bool) -> Any:
        """``node``, or what it only refers to (``$ref``, or an allOf of one ``$ref``)."""
        for _ in range(64):
            target = _only_ref(node)
            if target is None:
                return node
            node = self._closed_def(target) if closed else self.defs[target]
        return node

    def _parts(self, name: str, path: tuple[Any, ...], value: Any, base: str, where: str,
               closed: bool) -> Iterator[Finding]:
        """The findings of ``value`` (at ``where`` under ``base``) against the node at
        ``path``, which it fails."""
        node = self._node(name, path, closed)
        target = _only_ref(node)
        if target is not None:  # a reference: the definition, as its own path
            yield from self._parts(name, ("$defs", target), value, base, where, closed)
            return
        if _small(value) or not isinstance(node, dict) or not _splits(node):
            yield from self._errors(name, path, "", value, base + where, closed)
            return
        if not self._part_validator(name, path, closed, "own").is_valid(value):
            yield from self._errors(name, path, "own", value, base + where, closed)
        if isinstance(value, dict):
            yield from self._properties(name, path, node, value, base, where, closed)
        if isinstance(value, list) and "items" in node:
            sub = (*path, "items")
            valid = self._part_validator(name, sub, closed).is_valid
            for i, item in enumerate(value):
                if not valid(item):
                    yield from self._parts(name, sub, item, base, f"{where}/{i}", closed)
        for i in range(len(node.get("allOf", ()))):
            yield from self._failed(name, (*path, "allOf", i), value, base, where, closed)
        ref = node.get("$ref")
        if ref is not None:
            yield from self._failed(name, ("$defs", ref[8:]), value, base, where, closed)
        for union in ("anyOf", "oneOf"):
            if union in node:
                yield from self._union(name, path, union, len(node[union]), value, base,
                                       where, closed)

    def _properties(self, name: str, path: tuple[Any, ...], node: dict[str, Any],
                    value: dict[str, Any], base: str, where: str, closed: bool
                    ) -> Iterator[Finding]:
        """The findings of an object's properties, each against its own node."""
        props = node.get("properties", {})
        extra = node.get("additionalProperties")
        for key, item in value.items():
            if key in props:
                sub = (*path, "properties", key)
            elif isinstance(extra, dict):
                sub = (*path, "additionalProperties")
            else:
                continue
            yield from self._failed(name, sub, item, base, f"{where}/{escape(str(key))}", closed)

    def _failed(self, name: str, path: tuple[Any, ...], value: Any, base: str, where: str,
                closed: bool) -> Iterator[Finding]:
        """The findings of ``value`` against the node at ``path``, if it fails it."""
        if not self._part_validator(name, path, closed).is_valid(value):
            yield from self._parts(name, path, value, base, where, closed)

    def _errors(self, name: str, path: tuple[Any, ...], part: str, value: Any, at: str,
                closed: bool) -> Iterator[Finding]:
        """The findings the validator of the node at ``path`` (``part``: see
        :meth:`_part_validator`) gives ``value``, said from the root."""
        fix = list(path)
        errors = self._part_validator(name, path, closed, part).iter_errors(value)
        yield from self._explained(name, (PartError(e, fix) for e in errors), at, closed)

    def _union(self, name: str, path: tuple[Any, ...], union: str, n: int, value: Any,
               base: str, where: str, closed: bool) -> Iterator[Finding]:
        subs = [(*path, union, i) for i in range(n)]
        valid = sum(1 for b in subs if self._part_validator(name, b, closed).is_valid(value))
        if valid == 1 or (valid and union == "anyOf"):
            return
        if valid:  # a oneOf more than one branch of matches: one error, no branch's
            yield from self._errors(name, path, union, value, base + where, closed)
            return
        # the branch meant, as explain picks it: the others miss by type or tag
        meant = [b for b in subs if self._part_validator(name, b, closed, "meant")
                 .is_valid(value)]
        if len(meant) > 1:
            meant = [b for b in meant if self._part_validator(name, b, closed, "narrow")
                     .is_valid(value)] or meant
        if len(meant) == 1:
            yield from self._parts(name, meant[0], value, base, where, closed)
        elif not closed:
            yield self._finding(name, UnmatchedUnion(value, [*path, union], union), base + where,
                                closed)

    def _finding(self, name: str, e: Any, base: str, closed: bool) -> Finding:
        pointer = base + "".join("/" + escape(str(p)) for p in e.instance_path)
        path = list(e.schema_path)
        if path[:1] == ["anyOf"] and len(path) > 1 and name in self._batches:
            path[1] = self._batches[name][path[1]]  # a batch: its place in the file
        node = self._keyword_node(path, closed)
        if closed and isinstance(node, dict):
            if node.get(RESERVED):
                words = words_at(self.root, path[:-3] if path[-3:-2] == ["properties"]
                                 else path[:-1])
                return Finding(pointer, f"{show(e.instance)} is reserved for future ACP "
                               "versions (an extension value must begin with _)",
                               _location(variant_path(path)), words, rule="reserved-value")
            if node.get(ABSOLUTE):
                return Finding(pointer, f"{show(e.instance)} is not an absolute path",
                               _location(path[:-1]), words_at(self.root, path[:-1]),
                               rule="relative-path")
        words = None
        if path and path[-1] == "required" and isinstance(node, dict):
            prop = node.get("properties", {}).get(e.kind.as_dict().get("property"))
            if isinstance(prop, dict):  # the missing property's own words
                words = first_words(prop)
        if words is None:
            words = words_at(self.root, path[:-1])
        return Finding(pointer, error_message(e, path), _location(path), words)

    def _keyword_node(self, path: list[Any], closed: bool) -> Any:
        """The schema node holding the keyword at ``path`` (of the closed copy, with
        ``closed``: the copy's additions are marked there)."""
        if closed and path[:1] == ["$defs"] and len(path) > 1:
            return at(self._closed_def(path[1]), path[2:-1])
        if closed:
            if self._closed_root is None:
                self._closed_root = close(copy.deepcopy(self.root))
            return at(self._closed_root, path[:-1])
        return at(self.root, path[:-1])


#: Up to this many JSON values a failing value is explained by the validator at once.
_WHOLE = 256

#: Keywords that only annotate: they never make a value fail.
_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "discriminator",
                          "$comment", "deprecated", "readOnly", "writeOnly"})
#: Keywords a node's value is checked by part by part: its own ones (:func:`_own`), and
#: those naming the parts (properties, items, allOf members, a union's branches).
_OWN = frozenset({"type", "required", "const", "enum", "not", "minItems", "maxItems",
                  "minProperties", "maxProperties", "format", "pattern", "minLength",
                  "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                  "multipleOf", "contentEncoding", "contentMediaType"})
_PARTS = frozenset({"properties", "additionalProperties", "items", "allOf", "anyOf",
                    "oneOf"})


def _location(path: Sequence[Any]) -> str:
    """A pointer into the schema file, as a violation's ``location``."""
    return "#/" + "/".join(escape(str(p)) for p in path)


def _small(value: Any) -> bool:
    """Is ``value`` at most :data:`_WHOLE` JSON values (counted no further)?"""
    todo = [value]
    seen = 0
    while todo:
        v = todo.pop()
        seen += 1
        if seen > _WHOLE:
            return False
        if v.__class__ is dict:
            todo.extend(v.values())
        elif v.__class__ is list:
            todo.extend(v)
    return True


def _annotation(key: str) -> bool:
    return key in _ANNOTATIONS or key.startswith("x-")


def _only_ref(node: Any) -> str | None:
    """The ``$defs`` name ``node`` is no more than a reference to (by ``$ref``, or an
    allOf of one ``$ref``, with annotations beside it); None otherwise."""
    if not isinstance(node, dict):
        return None
    rest = [k for k in node if not _annotation(k)]
    ref = None
    if rest == ["$ref"]:
        ref = node["$ref"]
    elif rest == ["allOf"] and len(node["allOf"]) == 1 and isinstance(node["allOf"][0], dict) \
            and [k for k in node["allOf"][0] if not _annotation(k)] == ["$ref"]:
        ref = node["allOf"][0]["$ref"]
    if isinstance(ref, str) and ref.startswith("#/$defs/") and "/" not in ref[8:]:
        return ref[8:]
    return None


def _splits(node: dict[str, Any]) -> bool:
    """Can a value be checked against ``node`` part by part (no keyword relates parts)?"""
    if not isinstance(node.get("properties", {}), dict) or not isinstance(
            node.get("items", {}), dict) or not isinstance(
            node.get("additionalProperties", True), (bool, dict)):
        return False
    ref = node.get("$ref")
    if ref is not None and not (isinstance(ref, str) and ref.startswith("#/$defs/")
                                and "/" not in ref[8:]):
        return False
    return all(_annotation(k) or k in _OWN or k in _PARTS or k == "$ref" for k in node)


def _own(node: dict[str, Any]) -> dict[str, Any]:
    """``node``'s own keywords: those about the value itself, not about its parts (an
    object's property names kept, so ``additionalProperties: false`` still tells)."""
    own = {k: v for k, v in node.items() if k in _OWN}
    if node.get("additionalProperties") is False:
        own["properties"] = dict.fromkeys(node.get("properties", {}), True)
        own["additionalProperties"] = False
    return own


@functools.cache
def schema(revision: str, unstable: bool) -> Schema:
    """The :class:`Schema` of ``revision`` (one of :data:`acp_pipes.schemas.ACP_REVISIONS`),
    shared by every check in the process: validators compile once."""
    return Schema(revision, unstable)


#: Protocol versions (``initialize``'s ``protocolVersion``) and the revision checked.
REVISIONS = {1: ACP_V1, 2: ACP_V2}
#: The newest v2 schema shipped: checked against when a peer shows it is on that SDK.
NEWEST_V2 = "v2-sdk-2.4.0"


@functools.cache
def _capability_paths(revision: str, holder: str) -> frozenset[tuple[str, ...]]:
    """Every property path under ``capabilities`` of the initialize request
    (``holder`` "client") or response ("agent") that ``revision`` defines, through
    references, four levels deep."""
    s = schema(revision, True)
    name = "InitializeRequest" if holder == "client" else "InitializeResponse"
    out: set[tuple[str, ...]] = set()

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if len(path) > 4 or not isinstance(node, dict):
            return
        node = s.resolve(node, True)
        for alt in (*node.get("anyOf", ()), *node.get("allOf", ())):
            walk(alt, path)
        for key, sub in (node.get("properties") or {}).items():
            if key != "_meta":
                out.add((*path, key))
                walk(sub, (*path, key))

    walk(s.defs[name].get("properties", {}).get("capabilities", {}), ("capabilities",))
    return frozenset(out)


def newer_capabilities(init: Any, holder: str) -> list[tuple[str, ...]]:
    """The capabilities an initialize ``params`` (``holder`` "client") or ``result``
    ("agent") advertises that :data:`NEWEST_V2` defines and the pinned v2 does not:
    a peer that advertises one is on the newer SDK."""
    if not isinstance(init, dict):
        return []
    new = _capability_paths(NEWEST_V2, holder) - _capability_paths(ACP_V2, holder)
    found = []
    for path in sorted(new):
        node: Any = init
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None and node is not False and node != []:
            found.append(path)
    return found


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



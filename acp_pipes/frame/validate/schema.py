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

Validation runs on ``jsonschema_rs`` (a compiled validator, ~3-5 us a frame); its
verdicts are checked against the reference ``jsonschema`` package by a property test.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterator, Sequence
from typing import Any

import jsonschema_rs
import orjson

from acp_pipes.schemas import ACP_V1, ACP_V2, acp_schema

__all__ = [
    "NEWEST_V2", "REVISIONS", "Finding", "Schema", "absolute_paths", "escape", "first_words",
    "newer_capabilities", "paragraph", "schema", "schema_file",
]

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
            d = self._closed_defs[name] = _absolute(self._absolute.get(name, ()),
                                                    _close(copy.deepcopy(self.defs[name])))
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
            for e in _explain(err):
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
    # and the one meant branch of a union, as :func:`_explain` picks it), in another order.

    def _start(self, name: str) -> tuple[Any, ...]:
        return () if name in self._batches else ("$defs", name)

    def _node(self, name: str, path: tuple[Any, ...], closed: bool) -> Any:
        if path[:1] == ("$defs",):
            return _at(self._closed_def(path[1]) if closed else self.defs[path[1]], path[2:])
        where = self._batches[name]
        target = {"anyOf": [self.root["anyOf"][i] for i in where]}
        return _at(_close(copy.deepcopy(target)) if closed else target, path)

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
                node = _shape(self._resolve(node, closed), self, closed,
                              _MISS_BELOW | ({"type"} if part == "narrow" else set()))
            if isinstance(node, dict):
                defs = {n: self._closed_def(n) if closed else self.defs[n]
                        for n in self._closure(node)}
                node = {"$defs": defs, **node}
            v = cache[key] = jsonschema_rs.Draft202012Validator(node)
        return v

    def _resolve(self, node: Any, closed: bool) -> Any:
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
            v = self._part_validator(name, path, closed)
            fix = list(path)
            yield from self._explained(name, (_At(e, fix) for e in v.iter_errors(value)),
                                       base + where, closed)
            return
        own = self._part_validator(name, path, closed, "own")
        if not own.is_valid(value):
            fix = list(path)
            yield from self._explained(name, (_At(e, fix) for e in own.iter_errors(value)),
                                       base + where, closed)
        if isinstance(value, dict):
            props = node.get("properties", {})
            extra = node.get("additionalProperties")
            for key, item in value.items():
                if key in props:
                    sub = (*path, "properties", key)
                elif isinstance(extra, dict):
                    sub = (*path, "additionalProperties")
                else:
                    continue
                if not self._part_validator(name, sub, closed).is_valid(item):
                    yield from self._parts(name, sub, item, base,
                                           f"{where}/{escape(str(key))}", closed)
        if isinstance(value, list) and "items" in node:
            sub = (*path, "items")
            valid = self._part_validator(name, sub, closed).is_valid
            for i, item in enumerate(value):
                if not valid(item):
                    yield from self._parts(name, sub, item, base, f"{where}/{i}", closed)
        for i in range(len(node.get("allOf", ()))):
            sub = (*path, "allOf", i)
            if not self._part_validator(name, sub, closed).is_valid(value):
                yield from self._parts(name, sub, value, base, where, closed)
        ref = node.get("$ref")
        if ref is not None and not self._part_validator(name, ("$defs", ref[8:]),
                                                        closed).is_valid(value):
            yield from self._parts(name, ("$defs", ref[8:]), value, base, where, closed)
        for union in ("anyOf", "oneOf"):
            if union in node:
                yield from self._union(name, path, union, len(node[union]), value, base,
                                       where, closed)

    def _union(self, name: str, path: tuple[Any, ...], union: str, n: int, value: Any,
               base: str, where: str, closed: bool) -> Iterator[Finding]:
        subs = [(*path, union, i) for i in range(n)]
        valid = sum(1 for b in subs if self._part_validator(name, b, closed).is_valid(value))
        if valid == 1 or (valid and union == "anyOf"):
            return
        if valid:  # a oneOf more than one branch of matches: one error, no branch's
            v = self._part_validator(name, path, closed, union)
            fix = list(path)
            yield from self._explained(name, (_At(e, fix) for e in v.iter_errors(value)),
                                       base + where, closed)
            return
        # the branch meant, as _explain picks it: the others miss by type or tag
        meant = [b for b in subs if self._part_validator(name, b, closed, "meant")
                 .is_valid(value)]
        if len(meant) > 1:
            meant = [b for b in meant if self._part_validator(name, b, closed, "narrow")
                     .is_valid(value)] or meant
        if len(meant) == 1:
            yield from self._parts(name, meant[0], value, base, where, closed)
        elif not closed:
            yield self._finding(name, _Union(value, [*path, union], union), base + where,
                                closed)

    def _finding(self, name: str, e: Any, base: str, closed: bool) -> Finding:
        pointer = base + "".join("/" + escape(str(p)) for p in e.instance_path)
        path = list(e.schema_path)
        if path[:1] == ["anyOf"] and len(path) > 1 and name in self._batches:
            path[1] = self._batches[name][path[1]]  # a batch: its place in the file
        location = "#/" + "/".join(escape(str(p)) for p in path)
        if closed and path[:1] == ["$defs"] and len(path) > 1:
            node = _at(self._closed_def(path[1]), path[2:-1])
        elif closed:
            if self._closed_root is None:
                self._closed_root = _close(copy.deepcopy(self.root))
            node = _at(self._closed_root, path[:-1])
        else:
            node = _at(self.root, path[:-1])
        if closed and isinstance(node, dict) and node.get(RESERVED):
            value = e.instance
            words = _words(self.root, path[:-3] if path[-3:-2] == ["properties"] else path[:-1])
            return Finding(pointer, f"{_show(value)} is reserved for future ACP versions "
                           "(an extension value must begin with _)",
                           "#/" + "/".join(escape(str(p)) for p in _variant(path)),
                           words, rule="reserved-value")
        if closed and isinstance(node, dict) and node.get(ABSOLUTE):
            words = _words(self.root, path[:-1])
            return Finding(pointer, f"{_show(e.instance)} is not an absolute path",
                           "#/" + "/".join(escape(str(p)) for p in path[:-1]), words,
                           rule="relative-path")
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


def _shape(node: Any, s: Schema, closed: bool, below: frozenset[str]) -> Any:
    """What :func:`_missed` asks of a union's branch, as a schema: the value's type,
    ``not``, ``const`` and ``enum`` (through references and allOf), and the ``below``
    keywords of its properties. A value the branch misses fails it."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {k: node[k] for k in ("type", "const", "enum", "not") if k in node}
    members = [s._resolve(m, closed) for m in node.get("allOf", ())]
    if "$ref" in node:
        members.append(s._resolve({"$ref": node["$ref"]}, closed))
    parts = [_shape(m, s, closed, below) for m in members]
    props = node.get("properties")
    if isinstance(props, dict):
        shaped = {}
        for key, sub in props.items():
            leaf = _leaf(s._resolve(sub, closed), s, closed, below)
            if leaf:
                shaped[key] = leaf
        if shaped:
            out["properties"] = shaped
    if parts:
        out["allOf"] = parts
    return out


def _leaf(node: Any, s: Schema, closed: bool, below: frozenset[str]) -> dict[str, Any]:
    """The ``below`` keywords of a property's schema (through references and allOf)."""
    if not isinstance(node, dict):
        return {}
    out: dict[str, Any] = {k: node[k] for k in below if k in node}
    parts = [_leaf(s._resolve(m, closed), s, closed, below) for m in node.get("allOf", ())]
    if "$ref" in node:
        parts.append(_leaf(s._resolve({"$ref": node["$ref"]}, closed), s, closed, below))
    parts = [p for p in parts if p]
    if parts:
        out["allOf"] = parts
    return out


class _At:
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
            return [[_At(e, self._prefix) for e in branch] for branch in self._k.context]
        return getattr(self._k, attr)


class _Union:
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
        node = s._resolve(node, True)
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


def _absolute(wheres: Any, closed: Any) -> Any:
    """``closed`` (the closed copy of a definition, changed in place) with each path the
    schema calls absolute in it (``wheres``, from :func:`absolute_paths`) taking absolute
    paths only."""
    for where in wheres:
        node = _at(closed, list(where[1:]))
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


def _at(root: Any, path: Sequence[Any]) -> Any:
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

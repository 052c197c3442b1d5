"""Declared normalisers: which parts of a frame do not count when two frames are matched.

acp-replay and acp-align both match frames by canonical hash (DESIGN: identity is the
blake3 of the JCS form). Some values differ between two runs of the same session and
must not break a match: generated ids, timestamps, a working directory. The user names
them with ``--ignore POINTER`` (RFC 6901 JSON pointers), and both tools give the flag the
same meaning through :class:`Normalizer`.

Pointer syntax: RFC 6901 (``""`` is the whole value, ``/a/b``, ``~1`` for ``/`` and ``~0``
for ``~``), plus one extension: a segment that is exactly ``*`` matches every array index
and every object key at that level (so a literal key named ``*`` is only reachable
through the wildcard). A numeric segment also matches that index of an array; ``-`` and
indices with leading zeros match no array element.

What "ignore" means (the same in every tool):

- an object member at an ignored pointer is **removed**, so its value *and its presence*
  do not count (``--ignore /params/_meta`` matches a frame without ``_meta``);
- an array element at an ignored pointer is **replaced** by :data:`IGNORED`, so the
  array keeps its length and the other indices still line up;
- the whole value (pointer ``""``) is replaced by :data:`IGNORED`;
- a pointer that does not exist in a value changes nothing.

Before any pointer applies, every secret (and every token acp-tee logged for one) is
replaced by one placeholder (:func:`acp_pipes.protocol.redact.conceal`), on every side: secrets
never count in a comparison, so a recording redacted by acp-tee (whose tokens are keyed
per recording) compares with the frame as sent, with a ``--keep-secrets`` recording and
with another redacted recording, under any pointers or none, and no diff built on
:meth:`Normalizer.view` shows a secret value or a token.

``drop_id`` (``--remap-ids``) compares two JSON-RPC messages modulo their ``id``: the
top-level ``id`` *value* is replaced by :data:`IGNORED` rather than removed, so a request
still differs from a notification with the same method and params.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from acp_pipes.errors import UsageError

__all__ = ["IGNORED", "Normalizer", "parse_pointer"]

#: What stands in for an ignored array element, a whole ignored value, or a dropped id.
IGNORED = "<acp-pipes:ignored>"

_LEAF = "leaf"


def parse_pointer(pointer: str) -> list[str]:
    """The unescaped segments of an RFC 6901 pointer; ValueError when it is not one.

    >>> parse_pointer("/params/a~1b/*")
    ['params', 'a/b', '*']
    >>> parse_pointer("")
    []
    """
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ValueError(f"JSON pointer must be empty or start with '/': {pointer!r}")
    segments = []
    for seg in pointer[1:].split("/"):
        if "~" in seg:
            check = seg.replace("~0", "").replace("~1", "")
            if "~" in check:
                raise ValueError(f"JSON pointer has a bad '~' escape (only ~0, ~1): {pointer!r}")
            seg = seg.replace("~1", "/").replace("~0", "~")
        segments.append(seg)
    return segments


def _index(segment: str) -> int | None:
    """The array index a segment names, per RFC 6901 (no sign, no leading zeros)."""
    if segment.isdigit() and segment.isascii() and (segment == "0" or segment[0] != "0"):
        return int(segment)
    return None


class _Node:
    """One level of the compiled pointer trie."""

    __slots__ = ("leaf", "children", "star")

    def __init__(self) -> None:
        self.leaf = False
        self.children: dict[str, _Node] = {}
        self.star: _Node | None = None

    def child(self, segment: str) -> _Node:
        if segment == "*":
            if self.star is None:
                self.star = _Node()
            return self.star
        node = self.children.get(segment)
        if node is None:
            node = self.children[segment] = _Node()
        return node


def _apply(node: _Node, value: Any) -> Any:
    """``value`` with the pointers under ``node`` ignored; copies only what changes."""
    if isinstance(value, dict):
        out = None
        for key, sub in value.items():
            new = _member(node, key, sub)
            if new is sub:
                continue
            if out is None:
                out = dict(value)
            if new is _REMOVED:
                del out[key]
            else:
                out[key] = new
        return value if out is None else out
    if isinstance(value, list):
        out_l = None
        for i, sub in enumerate(value):
            new = _member(node, str(i), sub)
            if new is sub:
                continue
            if out_l is None:
                out_l = list(value)
            out_l[i] = IGNORED if new is _REMOVED else new
        return value if out_l is None else out_l
    return value


_REMOVED = object()


def _member(node: _Node, key: str, value: Any) -> Any:
    """The new value of member ``key`` (``_REMOVED`` when ignored), or ``value`` itself."""
    exact = node.children.get(key) if node.children else None
    star = node.star
    if exact is None and star is None:
        return value
    if (exact is not None and exact.leaf) or (star is not None and star.leaf):
        return _REMOVED
    if exact is not None:
        value = _apply(exact, value)
    if star is not None:
        value = _apply(star, value)
    return value


class Normalizer:
    """Applies declared ``--ignore`` pointers, and hashes what is left.

    >>> n = Normalizer.from_pointers(["/params/_meta", "/params/items/*/t"])
    >>> msg = {"method": "m", "params": {"_meta": {"x": 1}, "items": [{"t": 5, "v": 1}]}}
    >>> n.apply(msg)
    {'method': 'm', 'params': {'items': [{'v': 1}]}}
    >>> msg["params"]["_meta"]   # the input is not touched
    {'x': 1}
    >>> n.hash(msg) == n.hash({"method": "m", "params": {"items": [{"t": 9, "v": 1}]}})
    True
    >>> ident = Normalizer.from_pointers([])
    >>> ident.hash({"id": 1, "b": 2}, drop_id=True) == ident.hash({"b": 2, "id": 7}, drop_id=True)
    True
    """

    __slots__ = ("pointers", "_root", "_whole")

    def __init__(self, pointers: Sequence[str] = ()) -> None:
        self.pointers = tuple(pointers)
        self._root = _Node()
        self._whole = False
        for p in self.pointers:
            segments = parse_pointer(p)
            if not segments:
                self._whole = True
                continue
            node = self._root
            for seg in segments:
                node = node.child(seg)
            node.leaf = True

    @classmethod
    def from_pointers(cls, pointers: Sequence[str]) -> Normalizer:
        """Compile ``--ignore`` pointers once; raises ValueError for a malformed one."""
        return cls(pointers)

    @classmethod
    def from_option(cls, pointers: Sequence[str]) -> Normalizer:
        """The ``--ignore POINTER`` option compiled, or the UsageError every tool that
        takes it (acp-align, acp-replay, acp-batch) says for a malformed pointer:
        ``--ignore: JSON pointer ...``, exit 2."""
        try:
            return cls(pointers)
        except ValueError as e:
            raise UsageError(f"--ignore: {e}") from None

    @property
    def identity(self) -> bool:
        """True when nothing is ignored, so a frame's own hash can be reused."""
        return not self.pointers

    def apply(self, value: Any) -> Any:
        """``value`` with every ignored pointer removed/replaced (pure: never mutates)."""
        if self._whole:
            return IGNORED
        if not self.pointers:
            return value
        return _apply(self._root, value)

    def view(self, value: Any, *, drop_id: bool = False) -> Any:
        """What a JSON-RPC message is compared as: its secrets concealed
        (:func:`acp_pipes.protocol.redact.conceal`, so a redacted recording, a ``--keep-secrets``
        one and a live frame agree, and no diff shows a secret), then the ignored pointers
        applied, then with ``drop_id`` the top-level id masked. Concealing comes first so
        an ignored pointer means the same on every side."""
        from acp_pipes.protocol.redact import conceal

        value = self.apply(conceal(value))
        if drop_id and isinstance(value, dict) and "id" in value:
            value = dict(value)
            value["id"] = IGNORED
        return value

    def hash(self, value: Any, *, drop_id: bool = False, known: str | None = None) -> str:
        """``canonical_hash`` of the :meth:`view` of a message; ``drop_id`` ignores its
        JSON-RPC id.

        ``known`` is the value's own canonical hash when the caller has it (a frame's
        ``hash``): with no pointers and no ``drop_id`` it is returned as is (with nothing
        normalised, a frame is matched on the hash of its bytes as sent).
        Raises CanonicalError for a value with no JCS form.
        """
        if known is not None and not drop_id and not self.pointers:
            return known
        from acp_pipes.protocol.canonical import canonical_hash  # (~15 ms: when a hash is asked)

        return canonical_hash(self.view(value, drop_id=drop_id))

    def hash_frame(self, frame: dict[str, Any], *, drop_id: bool = False) -> str | None:
        """The matching hash of a frame record (see the frames contract in DESIGN).

        Identity fast path: the frame's own ``hash``, unless it is redacted or its bytes
        may hold a secret (:func:`acp_pipes.protocol.redact.may_hold_secrets`): then the hash of
        its concealed value (its own hash still when there was nothing to conceal).
        Otherwise the logged bytes are parsed and hashed as :meth:`hash` does. A frame
        that is not JSON (or has no JCS form, or was logged as unchecked) keeps its own
        hash, since there is nothing to normalise.
        """
        from acp_pipes.protocol.canonical import CanonicalError, canonical_hash, parse_json
        from acp_pipes.protocol.redact import UNCHECKED, conceal, may_hold_secrets

        own = frame.get("hash")
        plain = not drop_id and not self.pointers
        raw = frame.get("raw")
        redacted = frame.get("redacted")
        if plain and not redacted and (raw.__class__ is not str or not may_hold_secrets(raw)):
            return own
        if frame.get("kind") in ("invalid_json",):
            return own
        if raw is None:
            from acp_pipes.io.wire import decode_raw

            try:
                raw = decode_raw(frame)
            except ValueError:
                return own
        if redacted and raw in (UNCHECKED, UNCHECKED.decode()):  # bytes from raw_b64
            return own  # the logged bytes do not stand for the frame as sent
        try:
            value = parse_json(raw)
            if plain:
                concealed = conceal(value)
                return own if concealed is value else canonical_hash(concealed)
            return self.hash(value, drop_id=drop_id)
        except (ValueError, CanonicalError):
            return own

    def __repr__(self) -> str:
        return f"Normalizer.from_pointers({list(self.pointers)!r})"

"""The default comparison preset of a trace: minted identifiers and clocks.

Two runs of one agent differ in what the agent makes up (a session id, tool-call ids) and
in what a clock says; people do not call that a difference. Without ``--strict``:

- every *minted identifier* (:data:`MINTED_KEYS`, and the JSON-RPC id of an agent's
  request and of the client's answer to it) is masked before a frame is hashed, so the
  alignment (an LCS over hashes, which must decide "equal" pair by pair) sees only where
  the identifiers are; each step keeps, in order of appearance, the ordinal of each of its
  identifiers in its own run (:class:`Minted`). After the alignment,
  :func:`acp_pipes.align.compare.compare` walks the equal steps in order and builds the
  renaming, a bijection per kind of identifier: the first time run A's value meets run
  B's value at the same place they are paired; a later step that pairs either with
  another value is a *changed* step;
- :data:`CLOCKS` are removed: the time an agent stamps on what it says.

Shown values (a changed step's diff) name each identifier by its kind and its ordinal in
its run (``session#1``, ``toolCall#3``), so consistently renamed identifiers make no
noise in a diff.
"""

from __future__ import annotations

from typing import Any

from acp_pipes.canonical import CanonicalError, canonical_hash, parse_json
from acp_pipes.minted import CLOCKS, MINTED_KINDS, drop_clocks
from acp_pipes.redact import may_hold_secrets

__all__ = ["CLOCKS", "MINTED_KEYS", "Minted"]

#: Object members whose value an agent mints, anywhere in a message, by kind.
MINTED_KEYS = MINTED_KINDS
#: The kind of the JSON-RPC ids of agent requests (and of the client's answers).
RPC = "agentRequest"

_MASK = "<acp-pipes:minted>"

#: Where the identifiers usually are, in the order the full walk meets them (keys sorted
#: at each level, so path order): when every occurrence of the keys in a frame's bytes
#: is at one of these, the walk over the whole message is skipped (the measured cost of
#: the preset on a frames stream was mostly that walk).
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


class Minted:
    """One run's minted identifiers: the ordinal of each value per kind, in order of
    first appearance, and the values by ordinal (for the renaming report)."""

    __slots__ = ("ordinals", "values")

    def __init__(self) -> None:
        self.ordinals: dict[tuple[str, str, Any], int] = {}  # (kind, its type, value)
        self.values: dict[str, list[Any]] = {}

    def _ordinal(self, kind: str, value: Any) -> int:
        key = (kind, value.__class__.__name__, value)
        got = self.ordinals.get(key)
        if got is None:
            seen = self.values.setdefault(kind, [])
            got = self.ordinals[key] = len(seen)
            seen.append(value)
        return got

    def mask(self, msg: Any, d: str | None, kind: str | None, *, named: bool = False,
             raw: str | None = None) -> tuple[Any, tuple[tuple[str, int], ...] | None]:
        """``msg`` with its clocks removed and its identifiers masked (with ``named``,
        replaced by ``kind#ordinal``), and the ``(kind, ordinal)`` of each identifier in
        a fixed order (None when it has none). Pure on ``msg``: copies what changes.
        ``raw``, the bytes ``msg`` was parsed from, allows the shortcut of
        :data:`_KNOWN` (its keys counted in the bytes, where no ``\\u`` escape could
        hide one)."""
        if not isinstance(msg, dict):
            return msg, None
        found: list[tuple[str, int]] = []
        out = dict(msg)
        rid = out.get("id")
        if rid is not None and rid.__class__ is not bool and (
                (d == "a2c" and kind == "request")
                or (d == "c2a" and kind in ("response", "error"))):
            n = self._ordinal(RPC, rid)
            found.append((RPC, n))
            out["id"] = f"{RPC}#{n + 1}" if named else _MASK
        out = drop_clocks(out)
        if raw is not None and "\\u" not in raw:
            total = 0
            for q in _QUOTED:
                total += raw.count(q)
            if total == 0:
                return out, tuple(found) if found else None
            if self._known(out, found, named, total):
                return out, tuple(found)
        for key in sorted(out):
            if key != "id":
                out[key] = self._walk(out[key], found, named)
        return out, tuple(found) if found else None

    def _known(self, out: dict, found: list, named: bool, total: int) -> bool:
        """Mask the identifiers at :data:`_KNOWN` places of ``out`` (in place on copies
        of what changes) when they are all ``total`` of them; else change nothing.
        Written out, not a loop over the paths: this runs once a frame."""
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
            n = self._ordinal(kind, v)
            found.append((kind, n))
            node = out
            for seg in path:
                node[seg] = node = dict(node[seg])
            node[key] = f"{kind}#{n + 1}" if named else _MASK
        return True

    def _walk(self, value: Any, found: list, named: bool) -> Any:
        if isinstance(value, dict):
            out = None
            for key in sorted(value):
                sub = value[key]
                kind = MINTED_KEYS.get(key)
                if kind is not None and (sub.__class__ is str or sub.__class__ is int):
                    n = self._ordinal(kind, sub)
                    found.append((kind, n))
                    new: Any = f"{kind}#{n + 1}" if named else _MASK
                else:
                    new = self._walk(sub, found, named)
                if new is not sub:
                    if out is None:
                        out = dict(value)
                    out[key] = new
            return value if out is None else out
        if isinstance(value, list):
            out_l = None
            for i, sub in enumerate(value):
                new = self._walk(sub, found, named)
                if new is not sub:
                    if out_l is None:
                        out_l = list(value)
                    out_l[i] = new
            return value if out_l is None else out_l
        return value

    def hash_frame(self, rec: dict[str, Any], normalizer: Any
                   ) -> tuple[str | None, tuple | None]:
        """The matching hash of a frame record under the preset (then ``--ignore`` and
        concealed secrets as :meth:`acp_pipes.normalize.Normalizer.view`), and its
        identifiers. A frame that is not JSON keeps its own hash."""
        own = rec.get("hash")
        if rec.get("kind") not in ("request", "response", "error", "notification"):
            return own, None
        raw = rec.get("raw")
        if raw is None:
            from acp_pipes.wire import decode_raw

            try:
                raw = decode_raw(rec)
            except ValueError:
                return own, None
        try:
            value = parse_json(raw)
        except ValueError:
            return own, None
        try:
            masked, ids = self.mask(value, rec["dir"], rec.get("kind"),
                                    raw=raw if raw.__class__ is str else None)
            if normalizer.identity and not rec.get("redacted") and not (
                    raw.__class__ is str and may_hold_secrets(raw)):
                return canonical_hash(masked), ids  # nothing to conceal or ignore
            return canonical_hash(normalizer.view(masked)), ids
        except (CanonicalError, RecursionError):  # no JCS form, nested too deep
            return own, None

"""The step table: step keys -> small ints, shared by every input of one alignment.

Its own module so that both readers of inputs, :mod:`acp_pipes.align.steps` (ASR
streams, and the entry point) and :mod:`acp_pipes.align.traces`, fill it without
importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["FLOATS", "REPLIES", "StepTable"]

#: Frame kinds that answer a request.
REPLIES = frozenset(("response", "error"))
#: The direction of the model's chain of an agent's floating notifications (a chain of
#: their own: they have no place in the order of the turns they come in)
FLOATS = "a2c floating"


@dataclass
class StepTable:
    """Step keys -> small ints, shared by every input of one alignment.

    Per step id: ``hashes`` its canonical hash (after ``--ignore``), ``meta``
    ``(dir or type, kind, method)`` (for a trace the direction, frame kind and method, of
    a reply the method of the request it answers, None when it answers none seen; for
    an ASR record its type and role/state/kind/status), and, once looked up,
    ``updates`` the ``sessionUpdate`` of a ``session/update``. :meth:`coarse` is what a
    step *is* (a prompt request, a ``usage_update``, a message of the agent) whatever it
    says: two steps that differ only in what they say are one changed step, not two."""

    ids: dict[Any, int] = field(default_factory=dict)
    hashes: list[str | bytes | None] = field(default_factory=list)
    meta: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    updates: dict[int, str | None] = field(default_factory=dict)
    #: the model's frame texts (:mod:`acp_pipes.align.traces`): per direction, own hash
    #: (its ASCII bytes) -> step, and each one's chain (an id of ``chain_ids``)
    texts: dict[str, dict[bytes, int]] = field(
        default_factory=lambda: {"c2a": {}, "a2c": {}})
    text_chain: list[int | None] = field(default_factory=list)
    chain_ids: dict[tuple[str, str | None], int] = field(default_factory=dict)
    #: the model: the steps that float (:mod:`acp_pipes.sameness.floating`), by the class
    #: they match within (their update kind, or method)
    floating: dict[int, str] = field(default_factory=dict)
    #: the model: agent notifications of a method other than ``session/update``, by step
    notified: dict[int, str] = field(default_factory=dict)
    #: the model: each step's identity as compared, and its minted identifiers, for the
    #: steps looked at (:meth:`acp_pipes.align.steps.Steps.keys`)
    masked: dict[int, tuple[str | None, tuple]] = field(default_factory=dict)
    _coarse: dict[tuple, int] = field(default_factory=dict)

    def add(self, key: Any, h: str | None, meta: tuple[str, str | None, str | None]) -> int:
        """The id of a new key (the caller looked it up first)."""
        step = self.ids[key] = len(self.hashes)
        self.hashes.append(h)
        self.meta.append(meta)
        self.text_chain.append(None)
        return step

    def add_text(self, d: str, h: str, meta: tuple[str, str | None, str | None],
                 key: bytes | None = None) -> int:
        """The id of a new frame text of the model (the caller looked it up; ``key``: its
        hash's bytes, when the caller has them: then they are kept, and made text only
        when shown, :meth:`hash_of`)."""
        key = key or h.encode()
        step = self.texts[d][key] = len(self.hashes)
        self.hashes.append(key)  # (the key itself: one object, made text when shown)
        self.meta.append(meta)
        self.text_chain.append(None)
        return step

    def hash_of(self, step: int) -> str | None:
        """A step's hash, as text."""
        h = self.hashes[step]
        return h.decode() if isinstance(h, bytes) else h

    def unanswered(self, step: int) -> bool:
        """A trace's reply that answers no request seen before it."""
        first, kind, method = self.meta[step]
        return method is None and kind in REPLIES and first in ("c2a", "a2c")

    def needs_update(self, step: int) -> bool:
        """A ``session/update`` whose update kind was not looked up yet."""
        return self.meta[step][2] == "session/update" and step not in self.updates

    def coarse(self, step: int) -> int:
        """A small int for what the step is: direction or type, request/notification
        vs response/error, method, update kind (when looked up) or ASR sub-kind."""
        first, kind, method = self.meta[step]
        role = "reply" if kind in REPLIES else "call" if kind in ("request", "notification") \
            else kind
        c = (first, role, method, self.updates.get(step))
        cid = self._coarse.get(c)
        if cid is None:
            cid = self._coarse[c] = len(self._coarse)
        return cid

"""The v1 lift's one rule for identity: which entity a v1 message is (ASR-702, 713, 717, 718).

v1 messages carry no ``messageId``; the lift (:mod:`acp_pipes.fold.v1_lift`) holds a
message's chunks until it ends, then asks :meth:`Identity.identify` which entity it is:
the one its own ID names, else the one at its place (role, content as folded,
occurrence; a fork's copied history at the parent's places), else a new one. The rule
is docs/asr.md's "One rule for identity"; the counts and names it keeps live in the
run's :class:`~acp_pipes.fold.state.States`, shared by its connections.
"""

from __future__ import annotations

from typing import Any

import blake3
import orjson

from acp_pipes.fold.state import States
from acp_pipes.fold.v1 import content_digest

__all__ = ["CALLS_KEPT", "Chunk", "Held", "Identity", "V1Session"]

#: Tool calls each session remembers as announced (a permission asks about a call of its
#: turn); older ones are found among the run's final states.
CALLS_KEPT = 256
#: A chunk of the message being held: (seq, t, update), a plain tuple (one per chunk).
Chunk = tuple[int, Any, dict[str, Any]]
#: An update that came while a message was held: ``update``'s arguments.
Held = tuple[int, Any, str, dict[str, Any]]
#: How far up a chain of forks a copied place is looked for (no loop forever on a cycle).
_FORKS = 16


class V1Session:
    """What the lift keeps of one session: the message it holds (its chunks, and what
    came meanwhile), the prompt and its echo, whether it replays history (a load, a
    fork's copy), the tool calls it announced lately."""

    __slots__ = ("sid", "kind", "mid", "chunks", "held", "declared", "echo", "echo_blocks",
                 "early", "prompting", "prompt", "loading", "history", "parent", "native",
                 "calls")

    def __init__(self, sid: str):
        self.sid = sid
        self.kind: str | None = None  # the chunk kind of the message being held
        self.mid: str | None = None  # its ID, when the agent gave one (history only)
        self.chunks: list[Chunk] = []
        self.held: list[Held] = []  # frames that came while a message was held
        self.declared: set[str] = set()
        # the agent's own ID of a user message it sent live since the last prompt's
        # answer: the prompt's echo (ASR-713); not while a session/load replays. One
        # that came before the prompt's request (``early``: the two directions of a proxy
        # are logged apart) is the echo only if its content is the prompt's
        self.echo: str | None = None
        self.echo_blocks: list[Any] = []
        self.early = False
        self.prompting = 0  # prompt requests not answered yet
        self.prompt: list[Any] | None = None  # the latest of them, as folded
        self.loading = 0
        # a fork's session until its first prompt: what the agent sends is the history
        # it copied (ASR-718), from the session ``parent``
        self.history = False
        self.parent: str | None = None
        # a message sent live under an ID of the agent's own, folded as it comes:
        # [chunk kind, ID, its blocks], its place counted when it ends
        self.native: list[Any] | None = None
        # the tool calls the agent announced lately (the newest CALLS_KEPT; older ones
        # are known from the run's final states): a permission may show one (ASR-716)
        self.calls: dict[str, None] = {}


class Identity:
    """The identity rule over the run's states: occurrences counted per session and
    stem (``states.seen``), the IDs kept for places and for the agent's own IDs
    (``states.names``)."""

    __slots__ = ("seen", "states")

    def __init__(self, states: States):
        self.states = states
        self.seen = states.seen

    def identify(self, s: V1Session, role: str, content: list[Any], native: str | None
                  ) -> tuple[str, bool]:
        """The entity a v1 message is (docs/asr.md "One rule for identity", acp-pipes
        choice; ASR-702, ASR-713, ASR-717, ASR-718), and whether its ID is derived.

        A message's *place* is its role, its content as folded and its occurrence k
        among the session's messages of that role and content: counted across the
        run's connections and from 1 again at each ``session/load`` (whose replay starts
        from the start), and in a fork's copied history from 1 too (it is the parent's
        history). An ID of the agent's own that names an entity already is that entity
        (the same messageId is the same message); otherwise the entity at the message's
        place, if the session (or, for copied history, the session it was forked from
        at the fork) has one there; otherwise a new entity, under the agent's ID or the
        derived ``v1:<role>:<digest>:<k>``. A message sent live counts on past the
        highest k the session ever gave its stem (a load whose replay ran two messages
        together, v1 having no boundaries, left the first's count behind, and a later
        message must not take its ID, ASR-722)."""
        stem = f"{role}:{content_digest(content)}"
        sid = s.sid
        states = self.states
        names, named = states.names, states.named
        history = bool(s.loading or s.history)
        parent = self._parent(s) if (states.parents or s.parent) else None
        own = None if native is None or sid not in named else _name(
            names, ("a", sid, role, native))
        k, high, copied = self._count(s, stem, history, parent)
        derived = f"v1:{stem}:{k}"
        mid = own
        if mid is None:
            # (a session none of whose messages had an ID of the agent's own names none)
            mid = _name(names, ("p", sid, stem, k)) if sid in named else None
            if mid is None and history and parent is not None and k <= copied:
                mid = self._copied_place(s, stem, k)  # the place the fork copied
            if mid is None:  # a place counted before is its derived ID's, else new
                mid = derived if native is None or k <= high else native
            if mid != derived:
                named.add(sid)
                names.put(("p", sid, stem, k), mid.encode())
        if native is not None and own is None:
            named.add(sid)
            names.put(("a", sid, role, native), mid.encode())
        return mid, mid == derived

    def _count(self, s: V1Session, stem: str, history: bool, parent: str | None
               ) -> tuple[int, int, int]:
        """The message's occurrence ``k`` of ``stem``, the highest the session gave it
        before, and the highest the fork copied (0 if it is no fork's history); the
        counts are kept (ASR-717, ASR-718, ASR-722)."""
        sid, states, seen = s.sid, self.states, self.seen
        epoch = states.epochs.get(sid, 0)
        key = blake3.blake3(orjson.dumps((sid, epoch, stem))).digest(16)
        top = _top(sid, stem)
        k = (seen.get(key) or 0) + 1
        high = seen.get(top) or 0
        copied = 0
        if parent is not None:  # a fork's history is its parent's, at the fork (ASR-718)
            copied = self._inherited(s, stem)
            high = max(high, copied)
        if not history and k <= high:
            k = high + 1
        kids = states.children.get(sid) if states.children else None
        if kids:
            self._keep_count(stem, kids, high)
        seen.put(key, k)
        if k > high:
            seen.put(top, k)
        return k, high, copied

    def _copied_place(self, s: V1Session, stem: str, k: int) -> str | None:
        """The entity ID a fork's parent (or the session it was forked from, up the
        chain) keeps for place ``(stem, k)``, when not the derived one."""
        names, parents, named = self.states.names, self.states.parents, self.states.named
        sid = s.sid
        for i in range(_FORKS):  # a chain of forks (and no loop forever on a cycle)
            parent = parents.get(sid) or (s.parent if i == 0 else None)
            if parent is None:
                return None
            mid = _name(names, ("p", parent, stem, k)) if parent in named else None
            if mid is not None:
                return mid
            sid = parent
        return None

    def _parent(self, s: V1Session) -> str | None:
        """The session a fork was made from (known to the run, or named by the fork
        request its history came before)."""
        return self.states.parents.get(s.sid) or s.parent

    def _inherited(self, s: V1Session, stem: str) -> int:
        """The highest occurrence of ``stem`` in what fork ``s`` copied: its parent's
        at the fork (kept when the parent counted it again after), else the parent's
        now. A fork's own message then never takes the ID of a copied one (whose state
        the fork patches: its chunks appended to the parent's message)."""
        seen, parents = self.seen, self.states.parents
        sid = s.sid
        for i in range(_FORKS):  # a chain of forks (and no loop forever on a cycle)
            parent = parents.get(sid) or (s.parent if i == 0 else None)
            if parent is None:
                return 0
            kept = seen.get(_top(sid, stem, fork=True))
            if kept is not None:
                return kept
            high = seen.get(_top(parent, stem))
            if high is not None:
                return high
            sid = parent
        return 0

    def _keep_count(self, stem: str, kids: list[str], high: int) -> None:
        """The session counts ``stem`` again: each fork made from it since keeps the
        count it copied (copy on write, as the run's entity states do)."""
        seen = self.seen
        for child in kids:
            ck = _top(child, stem, fork=True)
            if seen.get(ck) is None:
                seen.put(ck, high)


def _name(names: Any, key: tuple[str | int, ...]) -> str | None:
    """An entity ID kept in the run's table of names (``States.names``)."""
    data = names.get(key)
    return None if data is None else data.decode()


def _top(sid: str, stem: str, fork: bool = False) -> bytes:
    """The key of the highest occurrence counted for ``stem`` in session ``sid`` (with
    ``fork``: the one fork ``sid`` copied, kept when its parent counted on)."""
    return blake3.blake3(orjson.dumps((sid, "fork" if fork else None, stem))).digest(16)

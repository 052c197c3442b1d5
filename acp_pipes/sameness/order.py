"""Happens-before: what must come before what in one ACP session.

A log holds a session as one sequence, but a session is two byte streams (the client's
and the agent's) and an agent's stream interleaves work the protocol does not order.
Two runs of one script agree on this partial order, not on the sequence:

1. a response (or error) comes after the request it answers; a client's answer after the
   agent request it answers;
2. a turn's frames come after the client request that opened it (``session/prompt``,
   and the requests that make an agent send a session's history or its first frames:
   ``session/new``, ``load``, ``resume``, ``fork``), and before the frame that closes
   it: the answer to that request, or in ACP v2 a prompt's ``state_update`` ``idle``
   (v2 answers a prompt at once and reports the turn's end as state); a session's turns
   one after another: a prompt the client sent while a turn ran (a script piped in
   whole sends them all at once) opens its turn when the one before it has ended;
3. one entity's frames come in their order: one tool call's creation, updates,
   permission request (and the client's answer to it), one message's chunks (in v1,
   which has no ``messageId``, the turn's stream of each chunk kind), one terminal's
   requests after its creation was answered, one file's ``fs/*`` requests, one plan,
   a v2 session's state;
4. nothing else: a floating notification (:mod:`acp_pipes.sameness.floating`) has no
   place in the order at all (the matcher gives it a window instead); two tool calls,
   a message and a tool call, two sessions, are concurrent.

:class:`Order` builds it frame by frame in a run's order (:meth:`Order.add` returns a
frame's predecessors), so a re-drive can build the recording's order as it reads it and
align can build both runs'. A frame the caller knows to be done before it was added (a
re-drive matches most frames by their bytes alone) need not be added: a frame no
successor can wait on is one that is done, so the order stays right without it
(:meth:`Order.done`).
"""

from __future__ import annotations

from typing import Any

from acp_pipes.protocol.jsonrpc import id_key
from acp_pipes.sameness.events import A2C, C2A, CHUNKS, Event

__all__ = ["OPENS_TURN", "Order"]

#: Client requests whose answer closes a turn: the agent's frames for the session in
#: between are the turn's. ``session/new`` and ``fork`` name their session only in the
#: answer: a frame of a session not known yet belongs to the oldest one still open.
OPENS_TURN = frozenset({"session/prompt", "session/load", "session/resume", "session/new",
                        "session/fork"})
_CREATES = frozenset({"session/new", "session/fork"})


class _Turn:
    __slots__ = ("opener", "session", "method", "members", "chunk_keys")

    def __init__(self, opener: int, session: str | None, method: str):
        self.opener = opener
        self.session = session
        self.method = method
        self.members: set[int] = set()  # frames of the turn not done yet
        self.chunk_keys: list[tuple] = []  # v1 chunk streams of this turn


class Order:
    """The happens-before of one run, built in the run's order (see the module).

    >>> from acp_pipes.sameness.events import describe
    >>> frames = [("c2a", b'{"jsonrpc":"2.0","id":1,"method":"session/prompt",'
    ...                   b'"params":{"sessionId":"s","prompt":[]}}'),
    ...           ("a2c", b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
    ...                   b'"s","update":{"sessionUpdate":"agent_message_chunk"}}}'),
    ...           ("a2c", b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
    ...                   b'"s","update":{"sessionUpdate":"usage_update"}}}'),
    ...           ("a2c", b'{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}')]
    >>> order = Order()
    >>> [order.add(describe(i, d, raw)) for i, (d, raw) in enumerate(frames)]
    [[], [0], [], [0, 1]]
    """

    __slots__ = ("version", "asked", "turns", "queued", "creating", "by_request", "tails",
                 "member_of", "steps", "sessions")

    def __init__(self) -> None:
        self.version = 1  # the protocol version negotiated (initialize)
        # open requests: (direction, id key) -> (index, its chain key or None)
        self.asked: dict[tuple[str, Any], tuple[int, tuple | None]] = {}
        self.turns: dict[str, _Turn] = {}  # session -> its open turn
        self.queued: dict[str, list[_Turn]] = {}  # session -> the turns it opens next
        self.creating: list[_Turn] = []  # session/new, fork not answered yet
        self.by_request: dict[Any, _Turn] = {}  # a turn by its request's id key
        self.tails: dict[tuple, int] = {}  # chain key -> its last frame
        self.member_of: dict[int, _Turn] = {}
        self.steps = 0  # client requests and notifications seen (not answers)
        self.sessions: set[str] = set()

    # -- the caller's side

    def done(self, index: int) -> None:
        """Frame ``index`` happened (matched, or sent): no turn waits on it any more."""
        turn = self.member_of.pop(index, None)
        if turn is not None:
            turn.members.discard(index)

    def happened(self, value: Any) -> None:
        """An agent frame (its parsed ``value``) that happened before anything could wait
        on it (matched by its bytes in order): only what it changes for the frames after
        it is taken: the answer to a client request closes that request's turn (and
        names its session, or the protocol version), v2's ``idle`` closes the prompt's
        turn. The cheap half of :meth:`add`, for a run that goes as recorded."""
        if value.__class__ is not dict:
            return
        if "id" in value and ("result" in value or "error" in value):
            rid = value["id"]
            key = (C2A, id_key(rid))
            if key not in self.asked:
                return
            result = value.get("result")
            ev = Event(-1, A2C, "response" if "result" in value else "error", None, rid,
                       key[1], result.get("sessionId") if result.__class__ is dict else None,
                       None, None, False, value, b"")
            self._answer(ev, False)
            return
        params = value.get("params")
        if self.version >= 2 and params.__class__ is dict and _idle(value):
            sid = params.get("sessionId")
            turn = self.turns.get(sid) if sid.__class__ is str else None
            if turn is not None and turn.method == "session/prompt":
                self._close(turn, None, False)

    def add(self, ev: Event, optional: bool = False) -> list[int]:
        """Add the next frame of the run; returns the indices of its predecessors (some
        may be done already: the caller knows). ``optional``: a frame the agent sends only
        sometimes: ordered after what it follows, but nothing waits on it."""
        if ev.dir == C2A:
            return self._client(ev)
        if ev.floating:
            return []
        if ev.is_answer:
            return self._answer(ev, optional)
        return self._agent(ev, optional)

    # -- the client's frames

    def _client(self, ev: Event) -> list[int]:
        if ev.is_answer:  # to an agent request: after it, and next in its chain
            got = self.asked.pop((A2C, ev.key), None)
            if got is None:
                return []
            index, chain = got
            if chain is not None and self.tails.get(chain) == index:
                self.tails[chain] = ev.index
            self._terminal_created(ev, chain, index)
            return [index]
        self.steps += 1
        value = ev.value if ev.value.__class__ is dict else {}
        if ev.method == "initialize":
            self.version = _version(value.get("params"), self.version)
        if ev.kind != "request":
            return []
        self.asked[(C2A, ev.key)] = (ev.index, None)
        if ev.method in OPENS_TURN:
            turn = _Turn(ev.index, ev.session, ev.method)
            self.by_request[ev.key] = turn
            if ev.method in _CREATES or ev.session is None:
                self.creating.append(turn)
            else:
                if ev.session in self.turns:  # one runs: this one opens when it ends
                    self.queued.setdefault(ev.session, []).append(turn)
                else:
                    self.turns[ev.session] = turn
                self.sessions.add(ev.session)
        return []

    def _terminal_created(self, ev: Event, chain: tuple | None, request: int) -> None:
        """The answer to ``terminal/create`` names the terminal: its requests follow it."""
        result = ev.value.get("result") if ev.value.__class__ is dict else None
        if result.__class__ is dict and "terminalId" in result and chain is not None:
            session = chain[0]
            self.tails[(session, "terminal", _hashable(result["terminalId"]))] = ev.index

    # -- the agent's frames

    def _turn_of(self, ev: Event) -> _Turn | None:
        session = ev.session
        if session is not None:
            turn = self.turns.get(session)
            if turn is not None:
                return turn
            if session in self.sessions or not self.creating:
                return None
        return self.creating[0] if self.creating else None

    def _chain(self, ev: Event, turn: _Turn | None) -> tuple | None:
        ent = ev.entity
        if ev.method == "terminal/create":
            return (ev.session, "terminal-create", ev.index)  # chained by its answer
        if ent is None:
            return None
        if ent[1] is None and ev.update in CHUNKS:  # v1: the turn's stream of this kind
            key = (ev.session, ent[0], None, turn.opener if turn is not None else None)
            if turn is not None and key not in self.tails:
                turn.chunk_keys.append(key)
            return key
        return (ev.session, *ent)

    def _agent(self, ev: Event, optional: bool) -> list[int]:
        turn = self._turn_of(ev)
        if (ev.update == "state_update" and self.version >= 2 and turn is not None
                and turn.method == "session/prompt" and _idle(ev.value)):
            return self._close(turn, ev, optional)  # v2: idle ends the prompt's turn
        preds: list[int] = []
        if turn is not None:
            preds.append(turn.opener)
        chain = self._chain(ev, turn)
        if chain is not None:
            tail = self.tails.get(chain)
            if tail is not None:
                preds.append(tail)
            if not optional:
                self.tails[chain] = ev.index
        if ev.kind == "request":
            self.asked[(A2C, ev.key)] = (ev.index, None if optional else chain)
        if turn is not None and not optional:
            turn.members.add(ev.index)
            self.member_of[ev.index] = turn
        return preds

    def _answer(self, ev: Event, optional: bool) -> list[int]:
        """The agent's answer to a client request: after it; closes the turn it opened
        (in v2 a prompt's turn stays open until ``state_update`` idle)."""
        got = self.asked.pop((C2A, ev.key), None)
        if got is None:
            return []  # answers nothing seen: its class finds nothing to match either
        request = got[0]
        value = ev.value if ev.value.__class__ is dict else {}
        result = value.get("result")
        if result.__class__ is dict and "protocolVersion" in result:
            self.version = _version(result, self.version)
        turn = self.by_request.pop(ev.key, None)
        if turn is None:
            return [request]
        if turn in self.creating:
            self.creating.remove(turn)
            sid = result.get("sessionId") if result.__class__ is dict else None
            if sid.__class__ is str:
                self.sessions.add(sid)
        if self.version >= 2 and turn.method == "session/prompt":
            return [request]  # its turn ends at idle
        return self._close(turn, ev, optional)

    def _close(self, turn: _Turn, ev: Event | None, optional: bool) -> list[int]:
        preds = [turn.opener, *sorted(turn.members)]  # (the opener is never a member)
        for i in turn.members:
            self.member_of.pop(i, None)
        turn.members.clear()
        session = turn.session
        if session is not None:
            queued = self.queued.get(session)
            if self.turns.get(session) is turn:
                del self.turns[session]
                if queued:  # the next turn the client asked for opens
                    self.turns[session] = queued.pop(0)
            elif queued and turn in queued:  # ended before its turn came (refused)
                queued.remove(turn)
            if queued is not None and not queued:
                del self.queued[session]
        if ev is not None and ev.update == "state_update":  # v2: the state is a chain too
            chain = (ev.session, "state", None)
            tail = self.tails.get(chain)
            if tail is not None and tail not in preds:
                preds.append(tail)
            if not optional:
                self.tails[chain] = ev.index
        for key in turn.chunk_keys:
            self.tails.pop(key, None)
        return preds


def _version(holder: Any, default: int) -> int:
    v = holder.get("protocolVersion") if holder.__class__ is dict else None
    return v if v.__class__ is int else default


def _idle(value: Any) -> bool:
    try:
        return value["params"]["update"].get("state") == "idle"
    except (KeyError, TypeError, AttributeError):
        return False


def _hashable(x: Any) -> Any:
    return x if x is None or isinstance(x, (str, int, float, bool)) else repr(x)

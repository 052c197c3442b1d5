"""ACP v1 recordings, lifted into the ACP v2 shapes the fold already folds.

Every agent and editor in use today negotiates ``protocolVersion: 1``; the mapping
(seed 000) is written for v2 and says only that a v1 converter follows the same
principles and declares its losses. This module is the whole of what acp-pipes knows
about v1: :class:`V1Lift` sits in front of the fold of a connection that negotiated v1
and turns each v1 frame into the v2 frames the v2 rules then apply to, so the fold and
the ASR mapping stay one implementation. Every choice below is written in docs/asr.md,
"ACP v1", with a fixture named by its rule.

What differs, and what the lift does (v2 names on the right):

* ``initialize``: ``clientInfo``/``agentInfo`` -> ``info`` (ASR-703).
* message chunks carry no ``messageId``: a message runs until the chunk kind changes, a
  tool call, a plan or a request of the agent intervenes, or the turn ends (ASR-704).
  Its chunks are held until then; its ID is derived from its folded content and its
  occurrence in the session, counted across the run's connections (so a
  ``session/load`` replay of the same message gets the same ID, whichever connection
  saw it first, ASR-717) and marked ``idSource: derived``; updates that arrive
  meanwhile (``usage_update`` between chunks) follow it in order. The prompt's
  ``messageId`` is derived the same way (ASR-713), unless the agent echoed the prompt
  under an ID of its own during the turn: then that ID is the prompt's. Which entity a
  message is follows one rule (docs/asr.md "One rule for identity", ``_identify``): the
  one its own ID names, else the one at its place (role, text, occurrence; a fork's
  copied history at the parent's places), else a new one; so an echo without an ID, a
  load's replay under IDs the agent never sent live (opencode) and a fork's copy are
  the entity already stored.
* ``tool_call`` (creation) -> ``tool_call_update`` (an upsert); v1 diffs
  (``path``/``oldText``/``newText``) -> v2 diffs with a full-context ``git_patch``
  (ASR-714, ASR-715).
* ``plan`` (the whole entry list) -> ``plan_update`` of one plan per session.
* the ``session/prompt`` response ends the turn: it answers with the derived
  ``messageId`` and is followed by ``state_update`` idle with its ``stopReason`` (or the
  JSON-RPC ``error``), so finality (ASR-705) and state records follow from it.
* ``session/load`` -> ``session/resume`` with ``replayFrom: {type: start}`` (ASR-707,
  ASR-717).
* ``session/request_permission``: ``toolCall`` -> ``subject`` (ASR-716).
* the client's terminals (``terminal/create``, ``terminal/output``,
  ``terminal/wait_for_exit``) -> ``terminal_update``; ``fs/write_text_file`` is not
  recorded and declared lost.

Losses v1 adds to ASR-722's are declared per session through ``declare`` (a ``lossy``
fold record); :data:`SOURCE` is the header's ``producer.source`` for a v1 stream.
"""

from __future__ import annotations

import base64
import shlex
from collections.abc import Callable
from typing import Any, NamedTuple

import blake3
import orjson

from acp_pipes.fold.patch import append_block
from acp_pipes.fold.state import States
from acp_pipes.protocol.canonical import CanonicalError, canonical_hash

__all__ = ["LOSSES", "PLAN_ID", "SOURCE", "V1Lift", "content_digest", "folded", "git_patch",
           "lift_diff", "lift_initialize", "lift_tool_call", "texts_from_patch"]

#: ``producer.source`` of a stream recorded from ACP v1 (acp-pipes choice, ASR-700).
SOURCE = {"format": "acp", "formatVersion": "1"}
LOSS_BOUNDARIES = "_org.agent-session.acp/v1_message_boundaries"
LOSS_FS_WRITES = "_org.agent-session.acp/v1_fs_writes"
LOSS_TERMINAL_TRUNCATED = "_org.agent-session.acp/v1_terminal_truncated"
#: Every loss a v1 stream can declare, in the order a header lists them.
LOSSES = (LOSS_BOUNDARIES, LOSS_FS_WRITES, LOSS_TERMINAL_TRUNCATED)
#: Tool calls each session remembers as announced (a permission asks about a call of its
#: turn); older ones are found among the run's final states.
CALLS_KEPT = 256
#: The ID of a session's one v1 plan (v1 plans have none).
PLAN_ID = "v1:plan"

_CHUNKS = {"user_message_chunk": ("user", "user_message"),
           "agent_message_chunk": ("agent", "agent_message"),
           "agent_thought_chunk": ("thought", "agent_thought")}
_TOOL = frozenset({"tool_call", "tool_call_update"})

Frame = Callable[[int, Any, str, Any], None]
Update = Callable[..., None]  # (seq, t, sessionId, update[, the entity's ID])
#: A chunk of the message being held: (seq, t, update), a plain tuple (one per chunk).
_Chunk = tuple[int, Any, dict[str, Any]]
#: An update that came while a message was held: ``update``'s arguments.
_Held = tuple[int, Any, str, dict[str, Any]]
#: A JSON-RPC id with its type (acp_pipes.fold.windows.RpcKey).
_Key = tuple[type, Any]


class _Asked(NamedTuple):
    """A client request the lift follows until the agent answers: for a prompt, its
    content blocks (``prompt``)."""

    method: str
    sid: Any
    params: dict[str, Any]
    prompt: list[Any] | None = None


class _AgentAsked(NamedTuple):
    """A terminal request of the agent, until the client answers it."""

    method: str
    sid: str
    params: dict[str, Any]
    seq: int
    t: Any


def lift_initialize(params: dict[str, Any], result: dict[str, Any]
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
    """v1's ``clientInfo`` and ``agentInfo`` under v2's name, ``info`` (ASR-703)."""
    if "info" not in params and "clientInfo" in params:
        params = {**params, "info": params["clientInfo"]}
    if "info" not in result and "agentInfo" in result:
        result = {**result, "info": result["agentInfo"]}
    return params, result


class _Session:
    __slots__ = ("sid", "kind", "mid", "chunks", "held", "declared", "echo", "echo_blocks",
                 "early", "prompting", "prompt", "loading", "history", "parent", "native",
                 "calls")

    def __init__(self, sid: str):
        self.sid = sid
        self.kind: str | None = None  # the chunk kind of the message being held
        self.mid: str | None = None  # its ID, when the agent gave one (history only)
        self.chunks: list[_Chunk] = []
        self.held: list[_Held] = []  # frames that came while a message was held
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


class V1Lift:
    """Lifts the frames of one v1 connection; hands v2 frames to ``frame`` (the fold's
    frame path), session updates it checked to ``update``, marks derived IDs with
    ``mark(sid, kind, key)`` and declares losses with ``declare(sid, loss, seq, t)``."""

    def __init__(self, connection: int, *, frame: Frame, update: Update,
                 mark: Callable[[str, str, str], None],
                 declare: Callable[[str, str, int, Any], None],
                 states: States | None = None):
        self.conn = connection
        self.frame = frame
        self.update = update
        self.mark = mark
        self.declare = declare
        self.sessions: dict[str, _Session] = {}
        # occurrences of each derived-ID stem per session, counted across the run's
        # connections: a digest of (session, load epoch, stem) -> count, in a table whose
        # memory stays flat (acp_pipes.fold.state)
        self.own = states is None
        self.states = States() if states is None else states
        self.seen = self.states.seen
        self.asked: dict[_Key, _Asked] = {}  # client requests (c2a)
        self.forks: list[Any] = []  # the sessions of session/fork requests not answered
        self.agent_asked: dict[_Key, _AgentAsked] = {}  # the agent's terminal requests

    # -- frames ---------------------------------------------------------------------

    def feed(self, seq: int, t: Any, direction: str, msg: Any) -> None:
        if msg.__class__ is not dict or msg.get("jsonrpc") != "2.0":
            self.frame(seq, t, direction, msg)  # the fold reports it
            return
        method = msg.get("method")
        if method == "session/update" and "id" not in msg and direction == "a2c":
            params = msg.get("params")
            if params.__class__ is dict:
                sid = params.get("sessionId")
                upd = params.get("update")
                if sid.__class__ is str and upd.__class__ is dict:
                    s = self.sessions.get(sid)
                    if s is not None and s.kind is not None and upd.get(
                            "sessionUpdate") == s.kind and (
                            (m := upd.get("messageId")) is s.mid or m == s.mid):
                        s.chunks.append((seq, t, upd))  # the hot path: the message goes on
                    else:
                        self._update(seq, t, sid, upd)
                    return
            self.frame(seq, t, direction, msg)
            return
        rid = msg.get("id", _NO_ID)
        if rid is _NO_ID or not (rid.__class__ is str or rid.__class__ is int):
            self.frame(seq, t, direction, msg)  # notifications; ids the fold refuses
            return
        key = (rid.__class__, rid)
        if method is None:
            if direction == "a2c":
                self._answered(seq, t, msg, key)
            else:
                self._client_answered(seq, t, msg, key)
        elif method.__class__ is str:
            params = msg.get("params")
            if params.__class__ is not dict:
                params = {}
            if direction == "c2a":
                self._client_request(seq, t, msg, key, method, params)
            else:
                self._agent_request(seq, t, msg, key, method, params)
        else:
            self.frame(seq, t, direction, msg)

    def finish(self) -> None:
        """The recording stops: held messages end here (ASR-705)."""
        for s in list(self.sessions.values()):
            self._end(s)
        if self.own:
            self.states.close()

    # -- session/update -------------------------------------------------------------

    def _update(self, seq: int, t: Any, sid: str, upd: dict[str, Any]) -> None:
        s = self.sessions.get(sid)
        if s is None:
            s = self._session(sid)
            if self.forks:  # history replayed into a fork before its answer (ASR-718)
                s.history = True
                parents = set(self.forks)
                s.parent = self.forks[0] if len(parents) == 1 else None
        kind = upd.get("sessionUpdate")
        if kind.__class__ is not str:  # the fold reports it (an audit record)
            self._in_order(s, seq, t, upd)
        elif kind in _TOOL:
            if s.kind is not None:
                self._end(s)
            cid = upd.get("toolCallId")
            calls = s.calls
            if cid.__class__ is str and cid not in calls:
                calls[cid] = None
                if len(calls) > CALLS_KEPT:
                    del calls[next(iter(calls))]
            self.update(seq, t, sid, lift_tool_call(upd))
        elif kind in _CHUNKS:
            if s.kind is not None:
                self._end(s)
            mid = upd.get("messageId")
            if mid.__class__ is not str:
                s.kind = kind
                s.mid = None
                s.chunks.append((seq, t, upd))
            elif s.loading or s.history:
                # history under the agent's own ID: held until it ends, then it is the
                # entity its ID or its place names (docs/asr.md "One rule for identity")
                s.kind = kind
                s.mid = mid
                s.chunks.append((seq, t, upd))
            else:
                if kind == "user_message_chunk":
                    if s.echo is None:  # the prompt's echo, if a prompt is answered
                        s.echo = mid
                        s.early = not s.prompting
                    if s.echo == mid:
                        s.echo_blocks.append(upd.get("content"))
                native = s.native
                if native is None or native[0] != kind or native[1] != mid:
                    if native is not None:
                        self._end_native(s)
                    native = s.native = [kind, mid, []]
                native[2].append(upd.get("content"))
                self.update(seq, t, sid, upd)  # a native messageId: folded as v2 does
        elif kind == "plan":
            self._end(s)
            plan = {"type": "items", "planId": PLAN_ID, "idSource": "derived",
                    "entries": upd.get("entries")}
            if "_meta" in upd:
                plan["_meta"] = upd["_meta"]
            self.update(seq, t, sid, {"sessionUpdate": "plan_update", "plan": plan})
        elif kind == "plan_update":
            self._end(s)
            self.update(seq, t, sid, upd)
        elif s.kind is not None:
            s.held.append((seq, t, sid, upd))  # comes after the message it interrupted
        else:
            self.update(seq, t, sid, upd)

    def _end(self, s: _Session) -> None:
        """The held message ends: it is given its entity's ID (its own ID's, its
        place's, or one derived), its chunks are folded, then what came meanwhile."""
        if s.native is not None:
            self._end_native(s)
        kind = s.kind
        if kind is None:
            return
        chunks, held, native = s.chunks, s.held, s.mid
        s.kind = s.mid = None
        s.chunks = []
        s.held = []
        content = folded([u.get("content") for _, _, u in chunks])
        if native is not None or any(not _empty_text(b) for b in content):
            role, entity = _CHUNKS[kind]
            echo = (native is None and role == "user" and s.prompting and s.echo is None
                    and not (s.loading or s.history) and content == s.prompt)
            mid, derived = self._identify(s, role, content, native)
            update = self.update
            sid = s.sid
            for seq, t, upd in chunks:
                update(seq, t, sid, upd, mid)
            if derived:
                self.mark(sid, entity, mid)
                self._declare(s, LOSS_BOUNDARIES, chunks[0][0], chunks[0][1])
            if echo:  # the prompt's echo without an ID: the prompt (ASR-713)
                s.echo, s.echo_blocks, s.early = mid, content, False
        # else: only empty text, no message (acp-pipes choice)
        for item in held:
            self.update(*item)

    def _end_native(self, s: _Session) -> None:
        """A message sent live under the agent's own ID ends: its place is counted, as
        every message's is, and names it (docs/asr.md "One rule for identity")."""
        kind, mid, blocks = s.native  # type: ignore[misc]
        s.native = None
        content = folded(blocks)
        if any(not _empty_text(b) for b in content):
            self._identify(s, _CHUNKS[kind][0], content, mid)

    def _identify(self, s: _Session, role: str, content: list[Any], native: str | None
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
        names = states.names
        named = states.named
        history = bool(s.loading or s.history)
        parent = self._parent(s) if (states.parents or s.parent) else None
        mid = own = None if native is None or sid not in named else _name(
            names, ("a", sid, role, native))
        epoch = states.epochs.get(sid, 0)
        key = blake3.blake3(orjson.dumps((sid, epoch, stem))).digest(16)
        top = _top(sid, stem)
        k = (self.seen.get(key) or 0) + 1
        high = self.seen.get(top) or 0
        copied = 0
        if parent is not None:  # a fork's history is its parent's, at the fork (ASR-718)
            copied = self._inherited(s, stem)
            high = max(high, copied)
        if not history and k <= high:
            k = high + 1
        kids = states.children.get(sid) if states.children else None
        if kids:
            self._keep_count(stem, kids, high)
        self.seen.put(key, k)
        if k > high:
            self.seen.put(top, k)
        derived = f"v1:{stem}:{k}"
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

    def _copied_place(self, s: _Session, stem: str, k: int) -> str | None:
        """The entity ID a fork's parent (or the session it was forked from, up the
        chain) keeps for place ``(stem, k)``, when not the derived one."""
        names, parents, named = self.states.names, self.states.parents, self.states.named
        sid = s.sid
        for i in range(16):  # a chain of forks (and no loop forever on a cycle)
            parent = parents.get(sid) or (s.parent if i == 0 else None)
            if parent is None:
                return None
            mid = _name(names, ("p", parent, stem, k)) if parent in named else None
            if mid is not None:
                return mid
            sid = parent
        return None

    def _announced(self, s: _Session, cid: str) -> bool:
        """Whether the agent announced tool call ``cid`` in session ``s``: lately, or
        long ago (its state is kept since it became final)."""
        return cid in s.calls or self.states.get((s.sid, "tool_call", cid)) is not None

    def _parent(self, s: _Session) -> str | None:
        """The session a fork was made from (known to the run, or named by the fork
        request its history came before)."""
        return self.states.parents.get(s.sid) or s.parent

    def _inherited(self, s: _Session, stem: str) -> int:
        """The highest occurrence of ``stem`` in what fork ``s`` copied: its parent's
        at the fork (kept when the parent counted it again after), else the parent's
        now. A fork's own message then never takes the ID of a copied one (whose state
        the fork patches: its chunks appended to the parent's message)."""
        seen, parents = self.seen, self.states.parents
        sid = s.sid
        for i in range(16):  # a chain of forks (and no loop forever on a cycle)
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

    def _declare(self, s: _Session, loss: str, seq: int, t: Any) -> None:
        if loss not in s.declared:
            s.declared.add(loss)
            self.declare(s.sid, loss, seq, t)

    def _session(self, sid: str) -> _Session:
        s = self.sessions.get(sid)
        if s is None:
            s = self.sessions[sid] = _Session(sid)
        return s

    def _in_order(self, s: _Session, seq: int, t: Any, upd: dict[str, Any]) -> None:
        """A lifted update: after the held message, if there is one."""
        if s.kind is not None:
            s.held.append((seq, t, s.sid, upd))
        else:
            self.update(seq, t, s.sid, upd)

    # -- requests and responses -------------------------------------------------------

    def _client_request(self, seq: int, t: Any, msg: dict[str, Any], key: _Key, method: str,
                        params: dict[str, Any]) -> None:
        sid = params.get("sessionId")
        s = self._session(sid) if sid.__class__ is str else None
        if method == "session/prompt" and s is not None:
            prompt = params.get("prompt")
            prompt = prompt if prompt.__class__ is list else []
            self.asked[key] = _Asked(method, sid, params, prompt)
            s.prompting += 1
            s.prompt = folded(prompt)
            self._end(s)  # (a user message held now may be the prompt's echo, logged first)
            s.history = False  # a fork's own turns begin
        elif method == "session/load" and s is not None:
            # the agent replays the whole history before it answers: v2's resume with
            # replayFrom start (ASR-707, ASR-717); derived IDs count from the start again
            self._end(s)
            self.states.epochs[s.sid] = self.states.epochs.get(s.sid, 0) + 1
            s.loading += 1
            s.echo, s.echo_blocks = None, []
            self.asked[key] = _Asked(method, sid, params)
            msg = {**msg, "method": "session/resume",
                   "params": {**params, "replayFrom": {"type": "start"}}}
        elif method == "session/fork":
            if s is not None:
                self._end(s)  # what it has sent is what the fork copies
            self.asked[key] = _Asked(method, sid, params)
            self.forks.append(sid)
        elif method in ("session/new", "session/close") or (
                method == "session/resume" and s is not None):
            self.asked[key] = _Asked(method, sid, params)
        self.frame(seq, t, "c2a", msg)

    def _answered(self, seq: int, t: Any, msg: dict[str, Any], key: _Key) -> None:
        """The agent answers one of the client's requests."""
        asked = self.asked.pop(key, None)
        if asked is None:
            self.frame(seq, t, "a2c", msg)
            return
        method, sid = asked.method, asked.sid
        result = msg.get("result")
        if method == "session/new":
            self.frame(seq, t, "a2c", msg)
            return
        if method == "session/fork":
            if sid in self.forks:
                self.forks.remove(sid)
            self.frame(seq, t, "a2c", msg)
            new = result.get("sessionId") if result.__class__ is dict else None
            if new.__class__ is str and sid.__class__ is str and new != sid:
                fork = self._session(new)  # its history until its first prompt
                fork.history, fork.parent = True, sid
            return
        s = self._session(sid) if sid.__class__ is str else None
        if s is not None:
            self._end(s)  # a turn, a replay or a session ends
            if method == "session/load":
                s.loading = max(0, s.loading - 1)
                s.echo, s.echo_blocks = None, []
        if method != "session/prompt" or s is None:
            self.frame(seq, t, "a2c", msg)
            return
        # v1: the response is the turn's end (v2: state_update idle)
        state: dict[str, Any] = {"sessionUpdate": "state_update", "state": "idle"}
        echo, s.echo = s.echo, None
        s.prompting = max(0, s.prompting - 1)
        prompt = asked.prompt or []
        if echo is not None and s.early and folded(s.echo_blocks) != folded(prompt):
            echo = None  # a user message before the request, not this prompt's echo
        s.echo_blocks = []
        if "result" in msg:
            # the agent's echo of the prompt under its own ID is the prompt (ASR-713):
            # stored once, with the agent's ID; else the ID is derived
            derived = False
            if echo is not None:
                mid = echo
            else:
                mid, derived = self._identify(s, "user", folded(prompt), None)
            self.frame(seq, t, "a2c", {"jsonrpc": "2.0", "id": msg["id"],
                                       "result": {"messageId": mid}})
            if derived:
                self.mark(sid, "user_message", mid)
                self._declare(s, LOSS_BOUNDARIES, seq, t)
            if result.__class__ is dict:
                for f in ("stopReason", "usage", "_meta"):
                    if result.get(f) is not None:
                        state[f] = result[f]
        else:
            self.frame(seq, t, "a2c", msg)  # not inserted: no message (as v2)
            if msg.get("error").__class__ is dict:
                state["error"] = msg["error"]
        self.update(seq, t, sid, state)

    def _agent_request(self, seq: int, t: Any, msg: dict[str, Any], key: _Key, method: str,
                       params: dict[str, Any]) -> None:
        sid = params.get("sessionId")
        s = self.sessions.get(sid) if sid.__class__ is str else None
        if s is not None:
            self._end(s)  # the agent turned to the client: the message is over
        if method == "session/request_permission" and "subject" not in params:
            lifted = {k: v for k, v in params.items() if k != "toolCall"}
            call = params.get("toolCall")
            if call.__class__ is dict and call.get("toolCallId").__class__ is str:
                # v1 clients apply the request's toolCall to the call they show (its
                # title, input, proposed diff): so does the fold, before the request; a
                # call the agent never announced (fast-agent asks under "pending", an ID
                # it never uses) is no call to show: the permission names it, no more
                if s is not None and self._announced(s, call["toolCallId"]):
                    self.update(seq, t, sid, lift_tool_call(
                        {"sessionUpdate": "tool_call_update", **call}))
                if call.get("title").__class__ is str:
                    lifted.setdefault("title", call["title"])
                lifted["subject"] = {"type": "tool_call", "toolCall": call}
            msg = {**msg, "params": lifted}
        elif method.startswith("terminal/") and sid.__class__ is str:
            self.agent_asked[key] = _AgentAsked(method, sid, params, seq, t)
        elif method == "fs/write_text_file" and sid.__class__ is str:
            self._declare(self._session(sid), LOSS_FS_WRITES, seq, t)
        self.frame(seq, t, "a2c", msg)

    def _client_answered(self, seq: int, t: Any, msg: dict[str, Any], key: _Key) -> None:
        """The client answers the agent: a terminal of the client's becomes v2's
        agent-reported terminal (``terminal_update``)."""
        self.frame(seq, t, "c2a", msg)
        asked = self.agent_asked.pop(key, None)
        result = msg.get("result")
        if asked is None or result.__class__ is not dict:
            return
        method, sid, params, rseq, rt = asked
        s = self._session(sid)
        if method == "terminal/create":
            tid = result.get("terminalId")
            if tid.__class__ is not str:
                return
            upd: dict[str, Any] = {"sessionUpdate": "terminal_update", "terminalId": tid}
            command = params.get("command")
            if command.__class__ is str:
                args = params.get("args")
                args = [a for a in args if a.__class__ is str] if args.__class__ is list else []
                upd["command"] = shlex.join([command, *args]) if args else command
            if params.get("cwd").__class__ is str:
                upd["cwd"] = params["cwd"]
            # env is never recorded: it can hold credentials (as ASR-712 for MCP)
            self._in_order(s, rseq, rt, upd)  # the terminal as requested, then its answer
            self._in_order(s, seq, t, {"sessionUpdate": "terminal_update", "terminalId": tid})
            return
        tid = params.get("terminalId")
        if tid.__class__ is not str:
            return
        upd = {"sessionUpdate": "terminal_update", "terminalId": tid}
        if method == "terminal/output":
            out = result.get("output")
            if out.__class__ is str:
                upd["output"] = {"data": base64.b64encode(out.encode("utf-8", "surrogatepass"))
                                 .decode("ascii")}
            if result.get("truncated") is True:
                self._declare(s, LOSS_TERMINAL_TRUNCATED, seq, t)
            status = result.get("exitStatus")
        elif method == "terminal/wait_for_exit":
            status = {k: result[k] for k in ("exitCode", "signal") if k in result}
        else:
            return
        if status.__class__ is dict:
            upd["exitStatus"] = status
        if len(upd) > 2:
            self._in_order(s, seq, t, upd)


def _name(names: Any, key: tuple[str | int, ...]) -> str | None:
    """An entity ID kept in the run's table of names (``States.names``)."""
    data = names.get(key)
    return None if data is None else data.decode()


def _top(sid: str, stem: str, fork: bool = False) -> bytes:
    """The key of the highest occurrence counted for ``stem`` in session ``sid`` (with
    ``fork``: the one fork ``sid`` copied, kept when its parent counted on)."""
    return blake3.blake3(orjson.dumps((sid, "fork" if fork else None, stem))).digest(16)


_NO_ID = object()
_TEXT_HEAD, _TEXT_TAIL = b'[{"text":', b',"type":"text"}]'


def content_digest(content: list[Any]) -> str:
    """The first 16 hex digits of the canonical hash (blake3 of JCS) of ``content``.
    One plain text block, the common message, is written in JCS directly (keys in
    order, orjson's string escaping is JCS's: see acp_pipes.protocol.canonical) and hashed;
    tests/test_v1.py checks it equals canonical_hash."""
    if len(content) == 1:
        b = content[0]
        if b.__class__ is dict and len(b) == 2 and b.get("type") == "text":
            text = b.get("text")
            if text.__class__ is str:
                try:
                    data = _TEXT_HEAD + orjson.dumps(text) + _TEXT_TAIL
                except orjson.JSONEncodeError:  # a lone surrogate: no JCS form
                    return "0" * 16
                return blake3.blake3(data).digest()[:8].hex()
    try:
        return canonical_hash(content)[7:23]
    except CanonicalError:
        return "0" * 16


def _empty_text(block: Any) -> bool:
    return block.__class__ is dict and block.get("type") == "text" and block.get("text") == ""


def folded(blocks: list[Any]) -> list[Any]:
    """Content blocks as the fold joins them (ASR-704: text onto text by concatenation),
    the form a derived message ID is taken from, whatever the chunk boundaries were.
    Runs of plain text blocks are joined at once; other blocks go through the fold's
    own rule (:func:`~acp_pipes.fold.patch.append_block`)."""
    out: list[Any] = []
    run: list[str] | None = None
    for b in blocks:
        if b.__class__ is dict and len(b) == 2 and b.get("type") == "text" and (
                b.get("text").__class__ is str):
            if run is None:
                run = [b["text"]]
            else:
                run.append(b["text"])
            continue
        if run is not None:
            out.append({"type": "text", "text": "".join(run)})
            run = None
        if b is not None:
            append_block(out, b)
    if run is not None:
        out.append({"type": "text", "text": "".join(run)})
    return out


def lift_tool_call(upd: dict[str, Any]) -> dict[str, Any]:
    """``tool_call`` (creation) and ``tool_call_update`` -> v2's ``tool_call_update``
    upsert (omitted fields unchanged), v1 diffs lifted to v2 diffs. The update is copied
    only when something changes. v1's ``name: null`` leaves the name unchanged (v1's
    schema: "omitting it or sending null both mean that the existing name is left
    unchanged"), where v2's null clears it (ASR-704): it is dropped."""
    if "name" in upd and upd["name"] is None:
        upd = {k: v for k, v in upd.items() if k != "name"}
    content = upd.get("content")
    if content.__class__ is list:
        for item in content:
            if item.__class__ is dict and item.get("type") == "diff" and "changes" not in item:
                return {**upd, "sessionUpdate": "tool_call_update", "content": [
                    lift_diff(i) if i.__class__ is dict and i.get("type") == "diff"
                    and "changes" not in i else i for i in content]}
    if upd.get("sessionUpdate") == "tool_call_update":
        return upd
    return {**upd, "sessionUpdate": "tool_call_update"}


def lift_diff(item: dict[str, Any]) -> dict[str, Any]:
    """A v1 diff (one ``path``, ``oldText`` or none for a new file, ``newText``) -> a v2
    diff: one change (``add`` without ``oldText``, else ``modify``) and a ``git_patch``
    holding both texts whole (full context: nothing of v1's diff is lost). A diff
    missing its path or new text is kept as sent."""
    path, old, new = item.get("path"), item.get("oldText"), item.get("newText")
    if path.__class__ is not str or new.__class__ is not str:
        return item
    if old.__class__ is not str:
        old = None  # "omitted or null for new files"
    out: dict[str, Any] = {"type": "diff", "changes": [
        {"operation": "add" if old is None else "modify", "path": path}],
        "patch": {"format": "git_patch", "text": git_patch(path, old, new)}}
    if item.get("_meta") is not None:
        out["_meta"] = item["_meta"]
    return out


def _lines(text: str | None) -> list[str]:
    """Lines split after each LF only (a CR stays in its line); the last one may lack
    its LF."""
    if not text:
        return []
    lines = text.split("\n")
    last = lines.pop()
    out = [line + "\n" for line in lines]
    if last:
        out.append(last)
    return out


def git_patch(path: str, old: str | None, new: str) -> str:
    """One ``diff --git`` section with absolute paths, as v2's ``git_patch`` format
    asks, whose single hunk spans both files: the common leading and trailing lines as
    context, the rest removed and added. Deterministic, linear in the texts, and both
    texts can be read back from it whole (:func:`texts_from_patch`). A diff that
    changes nothing keeps its text too, as a hunk that removes every line and adds it
    back (patch tools refuse a hunk of context only; ASR-715: what the agent said is
    kept, acp-pipes choice); two empty texts have no hunk."""
    a, b = _lines(old), _lines(new)
    head = f"diff --git {path} {path}\n--- {path if old is not None else '/dev/null'}\n+++ {path}\n"
    if not a and not b:
        return head  # nothing on either side: no hunk
    n = 0 if a == b else min(len(a), len(b))  # the same texts: no context (see above)
    p = 0
    while p < n and a[p] == b[p]:
        p += 1
    q = 0
    while q < n - p and a[-1 - q] == b[-1 - q]:
        q += 1
    out = [head, f"@@ -{1 if a else 0},{len(a)} +{1 if b else 0},{len(b)} @@\n"]
    for mark, lines in ((" ", a[:p]), ("-", a[p:len(a) - q]), ("+", b[p:len(b) - q]),
                        (" ", a[len(a) - q:])):
        for line in lines:
            out.append(mark + line)
            if not line.endswith("\n"):
                out.append("\n\\ No newline at end of file\n")
    return "".join(out)


def texts_from_patch(text: str) -> tuple[str | None, str]:
    """The two texts back from a patch :func:`git_patch` made (``None`` for a file it
    added; two empty texts for a patch without a hunk): what a v1 diff needs, for a
    replay into v1."""
    lines = text.split("\n")
    added = len(lines) > 1 and lines[1] == "--- /dev/null"
    old: list[str] = []
    new: list[str] = []
    prev = ""  # the mark of the hunk line before
    in_hunk = False
    for line in lines:
        if not in_hunk:
            in_hunk = line.startswith("@@ ")
            continue
        mark, rest = line[:1], line[1:]
        if not mark:
            continue
        if mark == "\\":  # "\ No newline at end of file": the line before has no LF
            for side, marks in ((old, " -"), (new, " +")):
                if prev and prev in marks and side:
                    side[-1] = side[-1][:-1]
            continue
        if mark in " -":
            old.append(rest + "\n")
        if mark in " +":
            new.append(rest + "\n")
        if mark in " -+":
            prev = mark
    return (None if added else "".join(old)), "".join(new)

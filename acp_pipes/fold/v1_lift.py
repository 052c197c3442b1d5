"""The v1 lift: each frame of an ACP v1 connection turned into the v2 frames the fold reads.

What the lift does and why is :mod:`acp_pipes.fold.v1`'s docstring (and docs/asr.md,
"ACP v1"); the shapes it lifts are there too. This module is the lift's traffic: it
holds a message's chunks until the message ends and asks the identity rule
(:mod:`acp_pipes.fold.v1_identity`) which entity it is, and it follows the client's
and the agent's requests, one handler per update kind and per method, to end a turn at
the prompt's answer, lift a load into a resume and the client's terminals into v2's.
"""

from __future__ import annotations

import base64
import shlex
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

from acp_pipes.fold.state import States
from acp_pipes.fold.v1 import (
    LOSS_BOUNDARIES,
    LOSS_FS_WRITES,
    LOSS_TERMINAL_TRUNCATED,
    PLAN_ID,
    empty_text,
    folded,
    lift_tool_call,
)
from acp_pipes.fold.v1_identity import CALLS_KEPT, Identity, V1Session

__all__ = ["V1Lift"]

Frame = Callable[[int, Any, str, Any], None]
Update = Callable[..., None]  # (seq, t, sessionId, update[, the entity's ID])
#: A JSON-RPC id with its type (acp_pipes.fold.session.RpcKey).
_Key = tuple[type, Any]

_CHUNKS = {"user_message_chunk": ("user", "user_message"),
           "agent_message_chunk": ("agent", "agent_message"),
           "agent_thought_chunk": ("thought", "agent_thought")}
_NO_ID = object()


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
        self.sessions: dict[str, V1Session] = {}
        # occurrences of each derived-ID stem per session, counted across the run's
        # connections: a digest of (session, load epoch, stem) -> count, in a table whose
        # memory stays flat (acp_pipes.fold.state)
        self.own = states is None
        self.states = States() if states is None else states
        self.seen = self.states.seen
        self.identity = Identity(self.states)
        self.asked: dict[_Key, _Asked] = {}  # client requests (c2a)
        self.forks: list[Any] = []  # the sessions of session/fork requests not answered
        self.agent_asked: dict[_Key, _AgentAsked] = {}  # the agent's terminal requests

        #: each v1 update kind the lift changes -> its handler (others follow a held
        #: message, or go on as they are)
        self.by_kind: dict[str, Callable[[V1Session, int, Any, dict[str, Any]], None]] = {
            "tool_call": self._tool, "tool_call_update": self._tool,
            **dict.fromkeys(_CHUNKS, self._chunk),
            "plan": self._plan, "plan_update": self._plan_update}

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
        self._rpc(seq, t, direction, msg, method)

    def _rpc(self, seq: int, t: Any, direction: str, msg: dict[str, Any], method: Any) -> None:
        """A request or a response (any other frame goes to the fold as it is)."""
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
            return
        lift = self.by_kind.get(kind)
        if lift is not None:
            lift(s, seq, t, upd)
        elif s.kind is not None:
            s.held.append((seq, t, sid, upd))  # comes after the message it interrupted
        else:
            self.update(seq, t, sid, upd)

    def _tool(self, s: V1Session, seq: int, t: Any, upd: dict[str, Any]) -> None:
        """``tool_call``, ``tool_call_update``: v2's upsert (ASR-714, ASR-715); the call
        is remembered as announced (a permission may show it, ASR-716)."""
        if s.kind is not None:
            self._end(s)
        cid = upd.get("toolCallId")
        calls = s.calls
        if cid.__class__ is str and cid not in calls:
            calls[cid] = None
            if len(calls) > CALLS_KEPT:
                del calls[next(iter(calls))]
        self.update(seq, t, s.sid, lift_tool_call(upd))

    def _chunk(self, s: V1Session, seq: int, t: Any, upd: dict[str, Any]) -> None:
        """A chunk that starts a message (ASR-704): held until the message ends, or,
        sent live under an ID of the agent's own, folded as v2 does."""
        if s.kind is not None:
            self._end(s)
        kind = upd["sessionUpdate"]
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
            self._native_chunk(s, seq, t, upd, kind, mid)

    def _native_chunk(self, s: V1Session, seq: int, t: Any, upd: dict[str, Any], kind: str,
                      mid: str) -> None:
        """A live chunk under the agent's own messageId; a user message's may be the
        prompt's echo (ASR-713)."""
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
        self.update(seq, t, s.sid, upd)  # a native messageId: folded as v2 does

    def _plan(self, s: V1Session, seq: int, t: Any, upd: dict[str, Any]) -> None:
        """v1's ``plan`` (the whole entry list): the session's one plan, v2's
        ``plan_update``."""
        self._end(s)
        plan = {"type": "items", "planId": PLAN_ID, "idSource": "derived",
                "entries": upd.get("entries")}
        if "_meta" in upd:
            plan["_meta"] = upd["_meta"]
        self.update(seq, t, s.sid, {"sessionUpdate": "plan_update", "plan": plan})

    def _plan_update(self, s: V1Session, seq: int, t: Any, upd: dict[str, Any]) -> None:
        self._end(s)
        self.update(seq, t, s.sid, upd)

    def _end(self, s: V1Session) -> None:
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
        if native is not None or any(not empty_text(b) for b in content):
            role, entity = _CHUNKS[kind]
            echo = (native is None and role == "user" and s.prompting and s.echo is None
                    and not (s.loading or s.history) and content == s.prompt)
            mid, derived = self.identity.identify(s, role, content, native)
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

    def _end_native(self, s: V1Session) -> None:
        """A message sent live under the agent's own ID ends: its place is counted, as
        every message's is, and names it (docs/asr.md "One rule for identity")."""
        kind, mid, blocks = s.native  # type: ignore[misc]
        s.native = None
        content = folded(blocks)
        if any(not empty_text(b) for b in content):
            self.identity.identify(s, _CHUNKS[kind][0], content, mid)

    def _announced(self, s: V1Session, cid: str) -> bool:
        """Whether the agent announced tool call ``cid`` in session ``s``: lately, or
        long ago (its state is kept since it became final)."""
        return cid in s.calls or self.states.get((s.sid, "tool_call", cid)) is not None

    def _declare(self, s: V1Session, loss: str, seq: int, t: Any) -> None:
        if loss not in s.declared:
            s.declared.add(loss)
            self.declare(s.sid, loss, seq, t)

    def _session(self, sid: str) -> V1Session:
        s = self.sessions.get(sid)
        if s is None:
            s = self.sessions[sid] = V1Session(sid)
        return s

    def _in_order(self, s: V1Session, seq: int, t: Any, upd: dict[str, Any]) -> None:
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
        asked = self.CLIENT_ASKS.get(method)
        if asked is not None:
            msg = asked(self, s, key, method, sid, params, msg)
        self.frame(seq, t, "c2a", msg)

    def _follow(self, s: V1Session | None, key: _Key, method: str, sid: Any,
                params: dict[str, Any], msg: dict[str, Any]) -> dict[str, Any]:
        """A request whose answer the lift follows (session/new, session/close; a
        session/resume of a session)."""
        if s is not None or method != "session/resume":
            self.asked[key] = _Asked(method, sid, params)
        return msg

    def _prompt_asked(self, s: V1Session | None, key: _Key, method: str, sid: Any,
                      params: dict[str, Any], msg: dict[str, Any]) -> dict[str, Any]:
        """session/prompt: its turn ends at its answer; its content is the echo's."""
        if s is None:
            return msg
        prompt = params.get("prompt")
        prompt = prompt if prompt.__class__ is list else []
        self.asked[key] = _Asked(method, sid, params, prompt)
        s.prompting += 1
        s.prompt = folded(prompt)
        self._end(s)  # (a user message held now may be the prompt's echo, logged first)
        s.history = False  # a fork's own turns begin
        return msg

    def _load_asked(self, s: V1Session | None, key: _Key, method: str, sid: Any,
                    params: dict[str, Any], msg: dict[str, Any]) -> dict[str, Any]:
        """session/load: the agent replays the whole history before it answers: v2's
        resume with replayFrom start (ASR-707, ASR-717); derived IDs count from the
        start again."""
        if s is None:
            return msg
        self._end(s)
        self.states.epochs[s.sid] = self.states.epochs.get(s.sid, 0) + 1
        s.loading += 1
        s.echo, s.echo_blocks = None, []
        self.asked[key] = _Asked(method, sid, params)
        return {**msg, "method": "session/resume",
                "params": {**params, "replayFrom": {"type": "start"}}}

    def _fork_asked(self, s: V1Session | None, key: _Key, method: str, sid: Any,
                    params: dict[str, Any], msg: dict[str, Any]) -> dict[str, Any]:
        """session/fork: what the session has sent is what the fork copies (ASR-718)."""
        if s is not None:
            self._end(s)
        self.asked[key] = _Asked(method, sid, params)
        self.forks.append(sid)
        return msg

    #: The client's requests the lift follows, by method.
    CLIENT_ASKS: ClassVar[dict[str, Callable[..., dict[str, Any]]]] = {
        "session/prompt": _prompt_asked, "session/load": _load_asked,
        "session/fork": _fork_asked, "session/new": _follow, "session/close": _follow,
        "session/resume": _follow}

    def _answered(self, seq: int, t: Any, msg: dict[str, Any], key: _Key) -> None:
        """The agent answers one of the client's requests."""
        asked = self.asked.pop(key, None)
        if asked is None:
            self.frame(seq, t, "a2c", msg)
            return
        self.ANSWERS.get(asked.method, V1Lift._session_answered)(self, seq, t, msg, asked)

    def _new_answered(self, seq: int, t: Any, msg: dict[str, Any], asked: _Asked) -> None:
        self.frame(seq, t, "a2c", msg)

    def _fork_answered(self, seq: int, t: Any, msg: dict[str, Any], asked: _Asked) -> None:
        """session/fork: the new session's history until its first prompt (ASR-718)."""
        sid = asked.sid
        if sid in self.forks:
            self.forks.remove(sid)
        self.frame(seq, t, "a2c", msg)
        result = msg.get("result")
        new = result.get("sessionId") if result.__class__ is dict else None
        if new.__class__ is str and sid.__class__ is str and new != sid:
            fork = self._session(new)  # its history until its first prompt
            fork.history, fork.parent = True, sid

    def _ends(self, asked: _Asked) -> V1Session | None:
        """A turn, a replay or a session ends: the message held is over; a load's
        replay is."""
        sid = asked.sid
        s = self._session(sid) if sid.__class__ is str else None
        if s is not None:
            self._end(s)
            if asked.method == "session/load":
                s.loading = max(0, s.loading - 1)
                s.echo, s.echo_blocks = None, []
        return s

    def _session_answered(self, seq: int, t: Any, msg: dict[str, Any], asked: _Asked
                          ) -> None:
        """session/load, session/resume, session/close answered."""
        self._ends(asked)
        self.frame(seq, t, "a2c", msg)

    def _prompt_answered(self, seq: int, t: Any, msg: dict[str, Any], asked: _Asked) -> None:
        """v1: the prompt's response is the turn's end (v2: state_update idle)."""
        s = self._ends(asked)
        if s is None:
            self.frame(seq, t, "a2c", msg)
            return
        state: dict[str, Any] = {"sessionUpdate": "state_update", "state": "idle"}
        echo, s.echo = s.echo, None
        s.prompting = max(0, s.prompting - 1)
        prompt = asked.prompt or []
        if echo is not None and s.early and folded(s.echo_blocks) != folded(prompt):
            echo = None  # a user message before the request, not this prompt's echo
        s.echo_blocks = []
        if "result" in msg:
            self._prompt_ok(seq, t, msg, s, echo, prompt, state)
        else:
            self.frame(seq, t, "a2c", msg)  # not inserted: no message (as v2)
            if msg.get("error").__class__ is dict:
                state["error"] = msg["error"]
        self.update(seq, t, s.sid, state)

    def _prompt_ok(self, seq: int, t: Any, msg: dict[str, Any], s: V1Session,
                   echo: str | None, prompt: list[Any], state: dict[str, Any]) -> None:
        """A prompt answered with a result: the agent's echo of the prompt under its own
        ID is the prompt (ASR-713), stored once, with the agent's ID; else the ID is
        derived. The answer's stop reason and usage go to the turn's idle state."""
        derived = False
        if echo is not None:
            mid = echo
        else:
            mid, derived = self.identity.identify(s, "user", folded(prompt), None)
        self.frame(seq, t, "a2c", {"jsonrpc": "2.0", "id": msg["id"],
                                   "result": {"messageId": mid}})
        if derived:
            self.mark(s.sid, "user_message", mid)
            self._declare(s, LOSS_BOUNDARIES, seq, t)
        result = msg.get("result")
        if result.__class__ is dict:
            for f in ("stopReason", "usage", "_meta"):
                if result.get(f) is not None:
                    state[f] = result[f]

    #: What each answer the lift follows does, by the request's method (others:
    #: :meth:`_session_answered`).
    ANSWERS: ClassVar[dict[str, Callable[[V1Lift, int, Any, dict[str, Any], _Asked], None]]] = {
        "session/new": _new_answered, "session/fork": _fork_answered,
        "session/prompt": _prompt_answered}

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

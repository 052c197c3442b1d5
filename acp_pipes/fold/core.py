"""The fold: frame records of one ACP v2 connection in, entity records out (ASR-704..706).

:class:`Folder` reads frames: it pairs the client's requests with the agent's responses
(initialize, the session lifecycle, prompts, permissions, elicitations, replay windows)
and folds each ``session/update`` into the entity it names, per session and ACP ID; it
decides when each entity is final (ASR-705). It has a
:class:`~acp_pipes.fold.timeline.Timeline`, which makes the records and lets them leave
in order. History an agent replays folds in a namespace of its own, from empty, and is
final when the replay ends; acp-asr compares it with what it already wrote (ASR-717).
Which updates are history, and when a replay ends, is the connection's *replay
windows* (:mod:`acp_pipes.fold.windows`). What each client request's answer does is
one handler per method (:attr:`Folder._ANSWERED`). A connection that
negotiated ACP v1 has its frames lifted into v2's shapes first
(:class:`~acp_pipes.fold.v1.V1Lift`), so the same rules apply to it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from acp_pipes.errors import AcpPipesError, Note, Warn
from acp_pipes.fold.entities import FOLDS, Entity, keep_trace, settle, trace_of
from acp_pipes.fold.patch import patch_fields
from acp_pipes.fold.state import States
from acp_pipes.fold.timeline import MAX_HELD, Lane, Record, Timeline
from acp_pipes.fold.v1 import V1Lift, lift_initialize
from acp_pipes.fold.windows import Deferred, Replays, RpcKey, Window
from acp_pipes.protocol.jsonrpc import is_jsonrpc_id, why_not_jsonrpc

__all__ = ["MAX_HELD", "Folder", "ProtocolVersionError"]

#: A frame's strings held lone surrogates, stored as U+FFFD (the store is UTF-8).
LOSS_SURROGATES = "_org.agent-session.acp/lone_surrogates"

TERMINAL_TOOL = frozenset({"completed", "failed", "cancelled"})
TERMINAL_COMPACTION = TERMINAL_TOOL
OPEN_TOOL = frozenset({"pending", "in_progress"})
#: Final at the next idle or requires_action, at close, or at stop (ASR-705).
TURN_SCOPED = frozenset({"user_message", "agent_message", "agent_thought", "session_message",
                         "plan", "terminal"})
#: Entity kinds an update itself can make final (a status, or at once).
_ENDS_BY_UPDATE = frozenset({"tool_call", "compaction", "subagent"})
#: With --snapshots, an entity still streaming is also a checkpoint (ASR-705) when its
#: count of updates reaches SNAPSHOT_FROM, then each time it doubles: a watcher sees a
#: long message or tool call grow, and the snapshots of one entity add up to at most
#: twice its final size (acp-pipes choice).
SNAPSHOT_FROM = 64


def _checkpoint(updates: int) -> bool:
    return updates >= SNAPSHOT_FROM and updates & (updates - 1) == 0


#: The ACP protocol versions the fold reads: v2 as the mapping says, v1 lifted into it.
_VERSIONS = (1, 2)

#: An open entity's place in its session's tables: (entity kind, ACP ID), or
#: ("prompt", messageId) for a prompt whose echo has not come (see Folder._adopt_prompt).
EntityKey = tuple[str, str]


class ProtocolVersionError(AcpPipesError, ValueError):
    """The recording negotiated an ACP protocol version this mapping does not cover."""


def rpc_id_str(rid: Any) -> str:
    """A JSON-RPC id as a string (ASR-716: ``<n>:<id>``)."""
    if isinstance(rid, str):
        return rid
    if isinstance(rid, bool) or rid is None:
        return "null" if rid is None else str(rid).lower()
    if isinstance(rid, float) and rid.is_integer():
        return str(int(rid))
    return str(rid)


@dataclass(slots=True, eq=False)
class Session:
    """One session as the connection shows it: its open entities (live, and in a replay
    window's namespace), its lane of records, and what its requests wait for."""

    sid: str
    #: open entities by (kind, ACP ID); ("prompt", messageId) for an unechoed prompt
    open: dict[EntityKey, Entity] = field(default_factory=dict)
    replay_open: dict[EntityKey, Entity] = field(default_factory=dict)
    #: replaying into it: updates are history (acp_pipes.fold.windows)
    window: Window | None = None
    #: its entities and events, in timeline order
    lane: Lane = field(default_factory=Timeline.lane)
    #: the folded session_info_update fields
    info: dict[str, Any] = field(default_factory=dict)
    closed: bool = False
    #: this session's client requests not answered yet
    pending: set[RpcKey] = field(default_factory=set)
    #: a resume waiting for earlier work to end
    deferred: Deferred | None = None
    #: the last state_update said running
    running: bool = False


@dataclass(slots=True)
class Request:
    """A client request waiting for the agent's answer (the methods of
    :attr:`Folder._ANSWERED`): its frame, and what the answer decides about. ``resume``:
    a session/resume's record, written once the answer says it succeeded; ``prompt``:
    the user message a session/prompt makes, inserted once its messageId comes."""

    method: str
    params: dict[str, Any]
    sid: str | None  # the session it names (a sessionId of another type is skipped)
    seq: int
    t: int | None
    resume: Record | None = None
    prompt: Entity | None = None


@dataclass(slots=True)
class Answer:
    """The agent's response to a :class:`Request`: its frame, whether it is a result
    (``result``: it, when it is an object, else empty) and the frames of the pair."""

    seq: int
    msg: dict[str, Any]
    ok: bool
    result: dict[str, Any]
    key: RpcKey
    frames: list[int]


class _Asked(NamedTuple):
    """An agent's request (permission, elicitation) waiting for the client's answer:
    the entity it opened, and its place in the session's open entities."""

    key: EntityKey
    ent: Entity


class _Early(NamedTuple):
    """A client answer logged before the agent's request it answers."""

    seq: int
    t: int | None
    msg: dict[str, Any]


class Folder:
    """Folds one connection. ``feed(frame)`` and ``finish()`` return the records to
    write, in order. ``states``: the run's entity states, shared with the folds of its
    other connections (:mod:`acp_pipes.fold.state`); by default the fold's own."""

    def __init__(self, connection: int = 0, *, snapshots: bool = False,
                 warn: Warn | None = None, states: States | None = None, source: str = "-"):
        self.timeline = Timeline(states=states, connection=connection)
        self.states = self.timeline.states
        self.conn = connection
        self.snapshots = snapshots
        # the Warn for this fold's source; a Folder knows no lines (0): its reader's Warn
        # says the frame's (fold_paths)
        said = warn or (lambda s, n, m: None)
        self.warn: Note = lambda msg: said(source, 0, msg)
        self.sessions: dict[str, Session] = {}
        #: the client's requests waiting for the agent's answer
        self.c2a: dict[RpcKey, Request] = {}
        #: the agent's requests (permission, elicitation) waiting for the client's answer
        self.a2c: dict[RpcKey, _Asked] = {}
        self.elicitations: dict[str, str] = {}  # elicitationId -> its session
        # client answers logged before the agent's request they answer (the two
        # directions of a proxy are read apart; a scripted client may answer early)
        self.early: OrderedDict[RpcKey, _Early] = OrderedDict()
        self.forks_pending = 0
        self.init_version: Any = None
        self.lift: V1Lift | None = None  # set when initialize negotiated ACP v1
        self.replays = Replays(self.timeline, self.sessions)
        # the replays' open resume windows (the same dict), looked at by every update
        self.windows = self.replays.open

    # -- entry points -----------------------------------------------------------------

    def feed(self, seq: int, t: int | None, direction: str, msg: Any) -> list[Record]:
        """Fold one parsed frame; returns the records it completes."""
        if self.lift is None:
            self._frame(seq, t, direction, msg)
        else:  # ACP v1: lifted into v2's shapes first (acp_pipes.fold.v1)
            self.lift.feed(seq, t, direction, msg)
        return self.timeline.take()

    def _frame(self, seq: int, t: int | None, direction: str, msg: Any) -> None:
        """One v2 frame into the fold; its records wait in the timeline's ``take``."""
        # the classification acp-frame makes (acp_pipes.frame.core): a frame that is not
        # JSON-RPC 2.0 (an id that is an object, a method that is not a string, ...) is
        # reported and skipped, so nothing below keys a table by an unhashable value
        if msg.__class__ is not dict or msg.get("jsonrpc") != "2.0":
            self.warn(f"not JSON-RPC: {why_not_jsonrpc(msg)}, skipped")
            return
        method = msg.get("method")
        if method == "session/update" and "id" not in msg:
            # most frames are updates: checked first, with only the checks they need
            if direction == "a2c":
                params = msg.get("params")
                if params.__class__ is dict:
                    sid = params.get("sessionId")
                    if sid.__class__ is str:
                        upd = params.get("update")
                        if upd.__class__ is dict:
                            self._update(seq, t, sid, upd, meta=params.get("_meta"))
                    else:
                        self._sid_ok(method, msg)  # reports a sessionId of another type
            return
        if "id" in msg:
            rid = msg["id"]
            if rid.__class__ is not str and not is_jsonrpc_id(rid):
                self.warn(f"not JSON-RPC: {why_not_jsonrpc(msg)}, skipped")
            elif method is None:
                if ("result" in msg) is not ("error" in msg):
                    self._response(seq, t, direction, msg)
                else:
                    self.warn(f"not JSON-RPC: {why_not_jsonrpc(msg)}, skipped")
            elif method.__class__ is not str:
                self.warn(f"not JSON-RPC: {why_not_jsonrpc(msg)}, skipped")
            elif self._sid_ok(method, msg):
                self._request(seq, t, direction, msg, method)
        elif method.__class__ is not str:
            self.warn(f"not JSON-RPC: {why_not_jsonrpc(msg)}, skipped")
        elif self._sid_ok(method, msg) and direction == "a2c" and (
                method == "elicitation/complete"):  # checked first: reported either way
            self._elicitation_complete(seq, t, msg.get("params"))

    def _sid_ok(self, method: str, msg: dict[str, Any]) -> bool:
        """A request or notification naming a session by something other than a string
        is reported and skipped: session IDs key the fold's tables."""
        params = msg.get("params")
        if params.__class__ is dict and "sessionId" in params and (
                params["sessionId"].__class__ is not str):
            self.warn(f"{method}: sessionId is not a string, skipped")
            return False
        return True

    def finish(self) -> list[Record]:
        """The recorder stops: every open entity is written as it stands (ASR-705)."""
        if self.init_version is not None and self.init_version not in _VERSIONS:
            raise ProtocolVersionError(self._version_message(self.init_version))
        if self.lift is not None:
            self.lift.finish()
        for key, req in list(self.c2a.items()):
            rec = req.resume
            if rec is not None:  # a session/resume never answered
                sess = self._named(req)
                if sess is not None and sess.deferred is not None and (
                        sess.deferred.record is rec):  # never started: its place is now
                    self.replays.start_resume(sess, rec, False, key)
                self.timeline.ready(rec)
        self.c2a.clear()
        self.windows.clear()  # every session in one ends its replay below
        for sess in self.sessions.values():
            self.replays.end(sess, "stop")
            self._finalize_all(sess, "stop")
            self.timeline.flush(sess.lane, force=True)
        self.timeline.close()
        return self.timeline.take()

    # -- finality (ASR-705) ---------------------------------------------------------------

    def _turn_end(self, sess: Session, state: str) -> None:
        """idle or requires_action: messages, plans and terminals are final (ASR-705);
        at idle a tool call left with status other or a vendor value ends too."""
        finalize = self.timeline.finalize
        for k, ent in list(sess.open.items()):
            if ent.kind in TURN_SCOPED and (ent.key is not None):
                del sess.open[k]
                finalize(ent, state)
            elif state == "idle" and ent.kind == "tool_call":
                st = ent.value.get("status")
                if st is not None and (st.__class__ is not str or st not in OPEN_TOOL):
                    del sess.open[k]
                    finalize(ent, "turn_end")
        self.timeline.flush(sess.lane, turn_end=state == "idle")

    def _keep_open(self, parent: Any) -> None:
        """A fork of ``parent`` is made: its entities still open (a tool call left
        running at the end of a turn) are kept in the run's states as they are now, as
        a final one is, so the fork's copy of them is their state at the fork (ASR-718);
        the parent's later changes keep that copy for the fork (copy on write)."""
        sess = self.sessions.get(parent) if parent.__class__ is str else None
        if sess is None:
            return
        for ent in sess.open.values():
            if ent.dead or ent.key is None:
                continue
            if ent.parts is not None:
                settle(ent)
            self.states.put((ent.session, ent.kind, ent.key), ent, ent.replayed if (
                ent.first_replayed is None) else ent.first_replayed, self.conn)

    def _finalize_all(self, sess: Session, why: str) -> None:
        for ent in list(sess.open.values()):
            self.timeline.finalize(ent, why)
        sess.open.clear()

    # -- requests and responses ---------------------------------------------------------

    def _request(self, seq: int, t: int | None, direction: str, msg: dict[str, Any],
                 method: str) -> None:
        rid = msg["id"]
        params = msg.get("params")
        if params.__class__ is not dict:
            params = {}
        if direction == "c2a":
            if method not in self._ANSWERED:
                return
            sid = params.get("sessionId")
            if method == "session/resume" and isinstance(sid, str):
                sess = self._session(sid)
                key = (rid.__class__, rid)
                ev = {"ev": "session", "op": "resume", "session": sid, **_roots(params),
                      "replayFrom": params.get("replayFrom"), "frames": [seq], "t": t}
                replay = params.get("replayFrom") is not None
                self.c2a[key] = Request(method, params, sid, seq, t, resume=ev)
                if sess.pending or sess.running:
                    # a client that does not wait: the replay starts once the agent is
                    # done with the session's earlier requests (clients may pipeline)
                    sess.deferred = Deferred(ev, replay, key)
                else:
                    self.replays.start_resume(sess, ev, replay, key)
                sess.pending.add(key)
                return
            if isinstance(sid, str):
                self._session(sid).pending.add((rid.__class__, rid))
            req = Request(method, params, sid if isinstance(sid, str) else None, seq, t)
            if method == "session/prompt" and isinstance(sid, str):
                sess = self._session(sid)
                if sess.window is not None and sess.window.kind == "fork":
                    self.replays.end(sess, "prompt")
                prompt = params.get("prompt")
                ent = Entity("user_message", None, sid, seq, t)
                ent.origin = "prompt"
                ent.value["content"] = list(prompt) if isinstance(prompt, list) else []
                keep_trace(ent, params.get("_meta"))  # the prompt's trace context (ASR-708)
                ent.frames.append(seq)
                self.timeline.add(sess.lane, ent)
                req.prompt = ent
            elif method == "session/fork":
                self.forks_pending += 1
                parent = self.sessions.get(sid) if isinstance(sid, str) else None
                if parent is not None and parent.window is not None and (
                        parent.window.kind == "fork"):
                    # a fork of a fork: what the first copied is its history, final now,
                    # so the second's copy can name its records (ASR-718)
                    self.replays.end(parent, "fork")
            self.c2a[(rid.__class__, rid)] = req
        else:
            sid = params.get("sessionId")
            if method == "session/request_permission" and isinstance(sid, str):
                self.a2c[(rid.__class__, rid)] = self._open_request(
                    sid, seq, t, "permission", f"{self.conn}:{rpc_id_str(rid)}", params)
            elif method == "elicitation/create" and isinstance(sid, str):
                eid = params.get("elicitationId")
                ident = eid if isinstance(eid, str) else f"{self.conn}:{rpc_id_str(rid)}"
                asked = self.a2c[(rid.__class__, rid)] = self._open_request(
                    sid, seq, t, "elicitation", ident, params)
                asked.ent.value["idSource"] = "native" if isinstance(eid, str) else "derived"
                if isinstance(eid, str):
                    self.elicitations[eid] = sid
            # an elicitation before any session (request scope) is not recorded (ASR-734)
            early = self.early.pop((rid.__class__, rid), None)
            if early is not None and (rid.__class__, rid) in self.a2c:
                self._response(early.seq, early.t, "c2a", early.msg)
            if self.snapshots and isinstance(sid, str) and sid in self.sessions:
                self.timeline.flush(self.sessions[sid].lane, force=True)

    def _open_request(self, sid: str, seq: int, t: int | None, kind: str, key: str,
                      params: dict[str, Any]) -> _Asked:
        """The agent asks the client: an entity open until the client answers."""
        sess = self._session(sid)
        ent = Entity(kind, key, sid, seq, t, replayed=False)
        ent.value.update((k, v) for k, v in params.items() if k != "sessionId")
        ent.frames.append(seq)
        sess.open[(kind, key)] = ent
        self.timeline.add(sess.lane, ent)
        return _Asked((kind, key), ent)

    def _response(self, seq: int, t: int | None, direction: str,
                  msg: dict[str, Any]) -> None:
        rid = msg["id"]
        k = (rid.__class__, rid)
        if direction == "c2a":  # the client answers the agent
            asked = self.a2c.pop(k, None)
            if asked is None:
                self.early[k] = _Early(seq, t, msg)
                if len(self.early) > 1024:
                    self.early.popitem(last=False)
                return
            ent = asked.ent
            ent.frames.append(seq)
            if "result" in msg:
                ent.value["outcome" if ent.kind == "permission" else "response"] = (
                    msg["result"])
            else:
                ent.value["error"] = msg.get("error")
            sess = self.sessions[ent.session]
            sess.open.pop(asked.key, None)
            self.timeline.finalize(ent, "response")
            self.timeline.flush(sess.lane)
            return
        req = self.c2a.pop(k, None)
        if req is None:
            return
        psess = self._named(req)
        if psess is not None:
            psess.pending.discard(k)
        ok = "result" in msg
        result = msg.get("result") if ok else None
        try:
            self._ANSWERED[req.method](self, req, Answer(
                seq, msg, ok, result if result.__class__ is dict else {}, k, [req.seq, seq]))
        finally:
            if psess is not None and req.method != "session/resume":
                self.replays.start_deferred(psess)

    # -- the agent answers one of the client's requests -----------------------------------

    def _initialized(self, req: Request, ans: Answer) -> None:
        """initialize: the protocol version decides how every later frame is read."""
        if not ans.ok:
            return
        params, result = req.params, ans.result
        version = result.get("protocolVersion")
        self.init_version = version
        if version == 1:  # from here on every frame is lifted first
            self.lift = V1Lift(self.conn, frame=self._frame, update=self._update,
                               mark=self._derived, declare=self._lossy,
                               states=self.states)
            params, result = lift_initialize(params, result)
        elif version not in _VERSIONS:
            raise ProtocolVersionError(self._version_message(version))
        rec = {"ev": "initialize", "protocolVersion": version,
               "agent": result.get("info"), "client": params.get("info"),
               "frames": ans.frames, "t": req.t}
        self.timeline.emit(rec)

    def _session_made(self, req: Request, ans: Answer) -> None:
        """session/new or session/fork: the session's record leaves at once; a fork's
        session replays what it copied until its first prompt (ASR-718)."""
        method, params = req.method, req.params
        fork = method == "session/fork"
        if fork:
            self.forks_pending = max(0, self.forks_pending - 1)
        sid = ans.result.get("sessionId")
        if not ans.ok:  # no session: acp-asr says why when the recording holds none
            self.timeline.emit({"ev": "refused", "method": method,
                                "error": ans.msg.get("error"), "frames": ans.frames,
                                "t": req.t})
            return
        if not isinstance(sid, str):
            return
        sess = self._session(sid)
        rec = {"ev": "session", "op": "fork" if fork else "new", "session": sid,
               **_roots(params)}
        if fork:
            rec["from"] = params.get("sessionId")
            self._keep_open(rec["from"])
            self.states.forked(sid, rec["from"])  # what it copied (ASR-718)
            if sess.window is None:
                self.replays.join(sess, Window("fork"))
        rec["frames"] = ans.frames
        rec["t"] = req.t
        rec["pos"] = req.seq
        self.timeline.emit(rec)  # before anything of the session leaves its lane

    def _resumed(self, req: Request, ans: Answer) -> None:
        """session/resume: its replay window closes (ASR-717); its record, which waited
        for this answer, is written only if it succeeded."""
        self.replays.close(ans.key)
        sess = self._named(req)
        if sess is None:
            return
        rec = req.resume
        if sess.deferred is not None and sess.deferred.record is rec:
            # answered before it could start
            self.replays.start_resume(sess, sess.deferred.record, False, ans.key)
        if rec is not None:
            if ans.ok:
                self.timeline.ready(rec, ans.seq)
                sess.closed = False
            else:
                self.timeline.drop(rec)
        self.timeline.flush(sess.lane)

    def _closed(self, req: Request, ans: Answer) -> None:
        """session/close: everything open is final (ASR-705), then the close record."""
        sess = self._named(req)
        if sess is None or not ans.ok:
            return
        self.replays.end(sess, "close")
        self._finalize_all(sess, "close")
        self.timeline.event(sess.lane, {"ev": "session", "op": "close", "session": sess.sid,
                                        "frames": ans.frames, "t": req.t})
        sess.closed = True
        self.timeline.flush(sess.lane, force=True)

    def _prompted(self, req: Request, ans: Answer) -> None:
        """session/prompt: the prompt's user message gets its messageId (ASR-713); a
        refused prompt was never inserted and has no record."""
        ent = req.prompt
        if ent is None:
            return
        sess = self.sessions[ent.session]
        mid = ans.result.get("messageId")
        if not ans.ok or not isinstance(mid, str):
            ent.dead = True  # ACP: the message was not inserted; no record
            self.timeline.flush(sess.lane)
            return
        ent.frames.append(ans.seq)
        self._adopt_prompt(sess, ent, mid)
        self.timeline.flush(sess.lane)

    #: The client requests the fold follows, each with what its answer does.
    _ANSWERED: ClassVar[dict[str, Callable[[Folder, Request, Answer], None]]] = {
        "initialize": _initialized,
        "session/new": _session_made,
        "session/fork": _session_made,
        "session/resume": _resumed,
        "session/close": _closed,
        "session/prompt": _prompted,
    }

    def _adopt_prompt(self, sess: Session, ent: Entity, mid: str) -> None:
        """The prompt gets its messageId; a user_message with that ID is the same
        entity (ASR-713): it takes the prompt's timeline position. The agent's echo of
        the prompt is the prompt, whether it came before this response or comes after
        it: until it comes, the prompt waits under ``("prompt", mid)`` and the echo's
        first chunk starts the content anew (:meth:`_new_entity`), so frame order does
        not change the content (ASR-704)."""
        ent.key = mid
        ent.value = {"messageId": mid, **ent.value}
        key = ("user_message", mid)
        other = sess.open.get(key)
        if other is not None and other is not ent:
            settle(other)
            other.dead = True
            ent.frames = sorted(set(ent.frames) | set(other.frames))
            ent.value = dict(other.value)
            ent.chunked = other.chunked
            ent.final = other.final
            if other.trace:
                keep_trace(ent, other.trace)
            sess.open[key] = ent
        else:
            sess.open[("prompt", mid)] = ent

    # -- updates ------------------------------------------------------------------------

    def _update(self, seq: int, t: int | None, sid: str, upd: dict[str, Any],
                key: Any = None, meta: Any = None) -> None:
        """Fold one ``session/update``; ``key``: the entity's ID when the update does not
        carry it (a v1 chunk, under the ID the lift derived); ``meta``: the notification's
        ``params._meta``."""
        sess = self.sessions.get(sid) or self._session(sid)
        window = sess.window
        if window is None and self.windows:
            window = self.replays.joins(sess)  # history, whatever session it names (ASR-707)
        kind = upd.get("sessionUpdate")
        spec = FOLDS.get(kind) if kind.__class__ is str else None
        if spec is not None:
            ekind, id_field, how, apply = spec
            if how == "plan":
                plan = upd.get("plan")
                key = plan.get("planId") if plan.__class__ is dict else None
            elif key is None:
                key = upd.get(id_field)
            if key.__class__ is str:  # (a plan's key is None unless the plan is a dict)
                # the entity's fold, inlined: most frames are updates of an open entity
                table = sess.open if window is None else sess.replay_open
                k = (ekind, key)
                ent = table.get(k)
                if ent is None:
                    ent = self._new_entity(sess, seq, t, ekind, key, how, id_field, table)
                ent.frames.append(seq)
                problem = apply(ent, upd, id_field)
                if problem:
                    self.warn(f"{ekind} {key}: {problem}")
                if meta is not None:
                    keep_trace(ent, meta)  # ASR-708
                if self.snapshots and window is None and _checkpoint(len(ent.frames)):
                    self._snapshot(sess, ent)
                if ekind in _ENDS_BY_UPDATE:
                    self._ended_by_update(sess, ent, table, k)
                return
            self.warn(f"{kind} without a string {id_field}: kept as an audit record")
        rec = {"ev": "update", "session": sid, "kind": kind if isinstance(kind, str) else None,
               "update": upd, "frames": [seq], "t": t, "replayed": window is not None}
        if kind == "session_info_update":
            patch_fields(sess.info, upd, frozenset({"sessionUpdate"}))
            rec["folded"] = dict(sess.info)
        if meta is not None:
            trace = trace_of(meta)
            if trace is not None:
                rec["trace"] = trace  # the notification's trace context (ASR-708)
        self.timeline.event(sess.lane, rec)
        if kind == "state_update":
            state = upd.get("state")
            if window is None:
                sess.running = state == "running"
                if not sess.running:
                    self.replays.start_deferred(sess)
            if state in ("idle", "requires_action") and window is None:
                self._turn_end(sess, state)
            elif self.snapshots and window is None:
                self.timeline.flush(sess.lane, force=True)
        self.timeline.bound(sess.lane)

    def _snapshot(self, sess: Session, ent: Entity) -> None:
        """ASR-705: a long stream is a checkpoint of its own. The first releases the
        lane as partial records (as at any checkpoint); once the entity is released, a
        snapshot of it leaves at once, as its final record will."""
        timeline = self.timeline
        if ent.released:
            timeline.out.append(timeline.record(ent, False, "snapshot"))
        else:
            timeline.flush(sess.lane, force=True)

    def _new_entity(self, sess: Session, seq: int, t: int | None, kind: str, key: str,
                    how: str, id_field: str, table: dict[EntityKey, Entity]) -> Entity:
        """The first update of an entity (in this namespace): a new entity, or one
        re-opened after its final record (ASR-706)."""
        replaying = sess.window is not None
        if kind == "user_message" and not replaying:
            prompt = sess.open.pop(("prompt", key), None)
            if prompt is not None:  # the agent's echo of a prompt (ASR-713)
                if how == "chunk":
                    prompt.value.pop("content", None)  # its chunks are the prompt's content
                table[(kind, key)] = prompt
                return prompt
        ent = Entity(kind, key, sess.sid, seq, t, replayed=replaying)
        if not replaying:
            self.timeline.reopen(ent)  # a change after final (ASR-706), if it is one
        if how != "plan":
            ent.value[id_field] = key
        table[(kind, key)] = ent
        self.timeline.add(sess.lane, ent)
        return ent

    def _ended_by_update(self, sess: Session, ent: Entity, table: dict[EntityKey, Entity],
                         k: EntityKey) -> None:
        """Tool calls and compactions end with a terminal status; a subagent is final at
        each update."""
        kind = ent.kind
        live = sess.window is None
        status = ent.value.get("status")
        if status.__class__ is not str:  # a status of another JSON type ends nothing
            status = None
        if kind == "tool_call" and status in TERMINAL_TOOL:
            if live:
                del table[k]
                self.timeline.finalize(ent, "status")
                self.timeline.flush(sess.lane)
        elif kind == "compaction" and status in TERMINAL_COMPACTION:
            if live:
                del table[k]
                self.timeline.finalize(ent, "status")
                self.timeline.flush(sess.lane)
        elif kind == "subagent":
            # written at first sight, before any child traffic (ASR-721); later updates
            # supersede it. The child's parent decides whether its updates are live.
            self.replays.parents[k[1]] = sess.sid
            if live:
                del table[k]
                self.timeline.finalize(ent, "update")
                self.timeline.flush(sess.lane)

    def _elicitation_complete(self, seq: int, t: int | None, params: Any) -> None:
        if params.__class__ is not dict:
            return
        eid = params.get("elicitationId")
        # only string IDs are remembered (an object or array could not even be looked up)
        sid = self.elicitations.get(eid) if eid.__class__ is str else None
        if sid is None:
            return
        sess = self._session(sid)
        self.timeline.event(sess.lane, {"ev": "update", "session": sid,
                                        "kind": "elicitation_complete", "method":
                                        "elicitation/complete", "update": params,
                                        "frames": [seq], "t": t, "replayed": False})

    # -- helpers ------------------------------------------------------------------------

    def _session(self, sid: str) -> Session:
        sess = self.sessions.get(sid)
        if sess is None:
            sess = self.sessions[sid] = Session(sid)
            if self.forks_pending:
                # history replayed into a fork before its response
                self.replays.join(sess, Window("fork"))
        return sess

    def _named(self, req: Request) -> Session | None:
        """The session a client request names, if the fold knows it."""
        return None if req.sid is None else self.sessions.get(req.sid)

    def _derived(self, sid: str, kind: str, key: str) -> None:
        """The v1 lift derived this entity's ID: its record says so (``idSource``)."""
        sess = self.sessions.get(sid)
        if sess is None:
            return
        ent = sess.replay_open.get((kind, key)) if sess.window is not None else None
        if ent is None:
            ent = sess.open.get((kind, key)) or sess.open.get(("prompt", key))
        if ent is not None:
            ent.value["idSource"] = "derived"

    def replaced(self, seq: int, t: int | None, msg: Any) -> None:
        """Frame ``seq`` was folded with its lone surrogates replaced by U+FFFD: a loss of
        the session it names, once that session is known (acp-pipes choice)."""
        if msg.__class__ is not dict:
            return
        sid = None
        for part in (msg.get("params"), msg.get("result")):
            if part.__class__ is dict and part.get("sessionId").__class__ is str:
                sid = part["sessionId"]
                break
        if sid is None and self.sessions:
            if len(self.sessions) != 1:  # an initialize, say: no one session's loss
                return
            sid = next(iter(self.sessions))
        if sid in self.sessions:
            self._lossy(sid, LOSS_SURROGATES, seq, t)

    def _lossy(self, sid: str, loss: str, seq: int, t: int | None) -> None:
        """A loss the v1 lift incurred for this session (ASR-722): a ``lossy`` record."""
        self.timeline.event(self._session(sid).lane, {
            "ev": "lossy", "session": sid, "lossy": loss, "frames": [seq], "t": t})

    @staticmethod
    def _version_message(version: Any) -> str:
        return (f"this recording negotiated ACP protocol version {version!r}; acp-pipes "
                "reads ACP v1 and v2 (schema 2.0.0-alpha.9, protocol version 2)")


def _roots(params: dict[str, Any]) -> dict[str, Any]:
    """cwd, additionalDirectories and MCP server names/types; never their configuration
    (environment, headers, arguments can hold credentials: ASR-712)."""
    out: dict[str, Any] = {"cwd": params.get("cwd")}
    dirs = params.get("additionalDirectories")
    out["additionalDirectories"] = [d for d in dirs if isinstance(d, str)] if isinstance(
        dirs, list) else []
    servers = params.get("mcpServers")
    if isinstance(servers, list):
        out["mcpServers"] = [
            {k: s[k] for k in ("name", "type") if isinstance(s.get(k), str)}
            for s in servers if isinstance(s, dict)]
    return out

"""The fold: frame records of one ACP v2 connection in, entity records out (ASR-704..706).

:class:`Folder` reads frames: it pairs the client's requests with the agent's responses
(initialize, the session lifecycle, prompts, permissions, elicitations, replay windows)
and folds each ``session/update`` into the entity it names, per session and ACP ID; it
decides when each entity is final (ASR-705). It has a
:class:`~acp_pipes.fold.timeline.Timeline`, which makes the records and lets them leave
in order. History an agent replays folds in a namespace of its own, from empty, and is
final when the replay ends; acp-asr compares it with what it already wrote (ASR-717).
A *replay window* is a property of the connection: everything the agent sends between a
``session/resume`` with ``replayFrom`` (ACP v1's ``session/load`` is lifted into one)
and its response is history, whatever session it names (a parent replays its
subagents' messages too), except for a session with live work of its own on the
connection; a fork's new session replays until its first prompt. A connection that
negotiated ACP v1 has its frames lifted into v2's shapes first
(:class:`~acp_pipes.fold.v1.V1Lift`), so the same rules apply to it.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Any

from acp_pipes.errors import AcpPipesError, Warn
from acp_pipes.fold.entities import FOLDS, Entity, keep_trace, settle, trace_of
from acp_pipes.fold.patch import patch_fields
from acp_pipes.fold.state import States
from acp_pipes.fold.timeline import MAX_HELD, Timeline
from acp_pipes.fold.v1 import V1Lift, lift_initialize
from acp_pipes.jsonrpc import is_jsonrpc_id, why_not_jsonrpc

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
_SETUP = frozenset({"initialize", "session/new", "session/fork", "session/resume",
                    "session/close", "session/prompt"})

#: The ACP protocol versions the fold reads: v2 as the mapping says, v1 lifted into it.
_VERSIONS = (1, 2)


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


class _Window:
    """History an agent replays (ASR-707, ASR-717): ``kind`` ``resume`` (a request of the
    connection, until its response) or ``fork`` (a fork's new session, until its first
    prompt); ``sessions``: those whose updates it took."""

    __slots__ = ("kind", "sessions")

    def __init__(self, kind: str):
        self.kind = kind
        self.sessions: list[_Session] = []


class _Session:
    __slots__ = ("sid", "open", "replay_open", "window", "lane",
                 "info", "closed", "pending", "deferred", "running")

    def __init__(self, sid: str):
        self.sid = sid
        # (kind, ACP ID) -> open entity; ("prompt", messageId) for a prompt whose echo has
        # not come (see _adopt_prompt)
        self.open: dict[tuple[str, Any], Entity] = {}
        self.replay_open: dict[tuple[str, Any], Entity] = {}
        self.window: _Window | None = None  # replaying into it: updates are history
        self.lane: deque = Timeline.lane()  # its entities and events, in timeline order
        self.info: dict[str, Any] = {}
        self.closed = False
        self.pending: set = set()  # this session's client requests not answered yet
        self.deferred: tuple | None = None  # a resume waiting for earlier work to end
        self.running = False  # the last state_update said running


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
        self.warn = lambda msg: said(source, 0, msg)
        self.sessions: dict[str, _Session] = {}
        self.c2a: dict[tuple[type, Any], tuple[str, dict, int, int | None, Any]] = {}
        self.a2c: dict[tuple[type, Any], tuple[str, Any]] = {}
        self.elicitations: dict[Any, str] = {}
        # client answers logged before the agent's request they answer (the two
        # directions of a proxy are read apart; a scripted client may answer early)
        self.early: OrderedDict = OrderedDict()
        self.forks_pending = 0
        self.init_version: Any = None
        self.lift: V1Lift | None = None  # set when initialize negotiated ACP v1
        # open resume replay windows, by request (newest last)
        self.windows: dict[tuple[type, Any], _Window] = {}
        # subagent session -> the session its subagent_update came in (ASR-721): a child
        # of a session busy with live work is live too, not history
        self.parents: dict[str, str] = {}

    # -- entry points -----------------------------------------------------------------

    def feed(self, seq: int, t: int | None, direction: str, msg: Any) -> list[dict]:
        """Fold one parsed frame; returns the records it completes."""
        if self.lift is None:
            self._frame(seq, t, direction, msg)
        else:  # ACP v1: lifted into v2's shapes first (acp_pipes.fold.v1)
            self.lift.feed(seq, t, direction, msg)
        return self.timeline.take()

    def _frame(self, seq: int, t: int | None, direction: str, msg: Any) -> None:
        """One v2 frame into the fold; its records wait in the timeline's ``take``."""
        # the classification acp-frame makes (acp_pipes.frame): a frame that is not
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

    def _sid_ok(self, method: str, msg: dict) -> bool:
        """A request or notification naming a session by something other than a string
        is reported and skipped: session IDs key the fold's tables."""
        params = msg.get("params")
        if params.__class__ is dict and "sessionId" in params and (
                params["sessionId"].__class__ is not str):
            self.warn(f"{method}: sessionId is not a string, skipped")
            return False
        return True

    def finish(self) -> list[dict]:
        """The recorder stops: every open entity is written as it stands (ASR-705)."""
        if self.init_version is not None and self.init_version not in _VERSIONS:
            raise ProtocolVersionError(self._version_message(self.init_version))
        if self.lift is not None:
            self.lift.finish()
        for key, (method, params, _seq, _t, extra) in list(self.c2a.items()):
            if method == "session/resume" and extra is not None:
                sess = self.sessions.get(params.get("sessionId"))
                if sess is not None and sess.deferred is not None and (
                        sess.deferred[0] is extra):  # never started: its place is now
                    self._start_resume(sess, extra, False, key)
                self.timeline.ready(extra)
        self.c2a.clear()
        self.windows.clear()  # every session in one ends its replay below
        for sess in self.sessions.values():
            self._end_replay(sess, "stop")
            self._finalize_all(sess, "stop")
            self.timeline.flush(sess.lane, force=True)
        self.timeline.close()
        return self.timeline.take()

    # -- finality (ASR-705) ---------------------------------------------------------------

    def _turn_end(self, sess: _Session, state: str) -> None:
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

    def _finalize_all(self, sess: _Session, why: str) -> None:
        for ent in list(sess.open.values()):
            self.timeline.finalize(ent, why)
        sess.open.clear()

    def _end_replay(self, sess: _Session, why: str) -> None:
        """The session's replay ends: replayed entities are final, then a replay_end.
        A replayed entity is the latest state on the wire of an entity still open live
        (a tool call that never got a final status, revised by a ``session/load``): the
        live one is not written again over it (ASR-706, ASR-717). Not yet written, it
        takes the replayed state in its own place (its first sight's ``ts``, ASR-707);
        written already, the replayed record supersedes it, and the live one is done."""
        window = sess.window
        if window is None:
            return
        live = sess.open
        finalize = self.timeline.finalize
        for k, ent in sess.replay_open.items():
            old = live.pop(k, None) if live else None
            if old is not None and not old.dead:
                if not old.released:
                    settle(ent)
                    old.value, old.chunked, old.output = ent.value, ent.chunked, ent.output
                    old.own, old.parts = ent.own, None
                    if ent.trace:
                        keep_trace(old, ent.trace)
                    old.frames = sorted(set(old.frames) | set(ent.frames))
                    ent.dead = True
                    ent = old
                else:
                    ent.pos, ent.t = old.pos, old.t
                    ent.first_replayed = old.replayed if old.first_replayed is None else (
                        old.first_replayed)
                    old.dead = True
            finalize(ent, "replay")
        sess.replay_open.clear()
        sess.window = None
        self.timeline.event(sess.lane, {"ev": "session", "op": "replay_end",
                                        "session": sess.sid, "kind": window.kind,
                                        "frames": [], "t": None})

    # -- replay windows (ASR-707, ASR-717) ------------------------------------------------

    def _join(self, sess: _Session, window: _Window) -> None:
        """The session's updates are history of ``window`` from now on."""
        if sess.window is not None:
            self._end_replay(sess, "replay")  # a new replay starts from empty
        sess.window = window
        window.sessions.append(sess)

    def _joins(self, sess: _Session) -> _Window | None:
        """An update for a session outside any replay while a resume is open:
        history of the newest such window, unless the session (or the session that
        spawned it as a subagent) has live work on the connection (acp-pipes choice)."""
        if self._busy(sess):
            return None
        window = next(reversed(self.windows.values()))
        self._join(sess, window)
        return window

    def _busy(self, sess: _Session) -> bool:
        """The session or one of its subagent ancestors is running, or has a client
        request other than a resume waiting for its answer."""
        windows = self.windows.keys()
        for _ in range(16):  # a chain of subagents (and no loop forever on a cycle)
            if sess.running or (sess.pending and not sess.pending <= windows):
                return True
            parent = self.parents.get(sess.sid)
            sess = self.sessions.get(parent) if parent is not None else None
            if sess is None:
                return False
        return False

    def _close_window(self, key: tuple) -> None:
        """A resume was answered: its window's sessions end their replay."""
        window = self.windows.pop(key, None)
        if window is None:
            return
        for sess in window.sessions:
            if sess.window is window:
                self._end_replay(sess, "replay")
                self.timeline.flush(sess.lane)

    # -- requests and responses ---------------------------------------------------------

    def _request(self, seq, t, direction, msg, method) -> None:
        rid = msg["id"]
        params = msg.get("params")
        if params.__class__ is not dict:
            params = {}
        if direction == "c2a":
            if method not in _SETUP:
                return
            extra = None
            sid = params.get("sessionId")
            if method == "session/resume" and isinstance(sid, str):
                sess = self._session(sid)
                key = (rid.__class__, rid)
                ev = {"ev": "session", "op": "resume", "session": sid, **_roots(params),
                      "replayFrom": params.get("replayFrom"), "frames": [seq], "t": t}
                replay = params.get("replayFrom") is not None
                self.c2a[key] = (method, params, seq, t, ev)
                if sess.pending or sess.running:
                    # a client that does not wait: the replay starts once the agent is
                    # done with the session's earlier requests (clients may pipeline)
                    sess.deferred = (ev, replay, key)
                else:
                    self._start_resume(sess, ev, replay, key)
                sess.pending.add(key)
                return
            if isinstance(sid, str):
                self._session(sid).pending.add((rid.__class__, rid))
            if method == "session/prompt" and isinstance(sid, str):
                sess = self._session(sid)
                if sess.window is not None and sess.window.kind == "fork":
                    self._end_replay(sess, "prompt")
                prompt = params.get("prompt")
                ent = Entity("user_message", None, sid, seq, t)
                ent.origin = "prompt"
                ent.value["content"] = list(prompt) if isinstance(prompt, list) else []
                keep_trace(ent, params.get("_meta"))  # the prompt's trace context (ASR-708)
                ent.frames.append(seq)
                self.timeline.add(sess.lane, ent)
                extra = ent
            elif method == "session/fork":
                self.forks_pending += 1
            self.c2a[(rid.__class__, rid)] = (method, params, seq, t, extra)
        else:
            sid = params.get("sessionId")
            if method == "session/request_permission" and isinstance(sid, str):
                ent = self._open_request(sid, seq, t, "permission",
                                         f"{self.conn}:{rpc_id_str(rid)}", params)
                self.a2c[(rid.__class__, rid)] = ("permission", ent)
            elif method == "elicitation/create" and isinstance(sid, str):
                eid = params.get("elicitationId")
                key = eid if isinstance(eid, str) else f"{self.conn}:{rpc_id_str(rid)}"
                ent = self._open_request(sid, seq, t, "elicitation", key, params)
                ent.value["idSource"] = "native" if isinstance(eid, str) else "derived"
                if isinstance(eid, str):
                    self.elicitations[eid] = sid
                self.a2c[(rid.__class__, rid)] = ("elicitation", ent)
            # an elicitation before any session (request scope) is not recorded (ASR-734)
            early = self.early.pop((rid.__class__, rid), None)
            if early is not None and (rid.__class__, rid) in self.a2c:
                self._response(early[0], early[1], "c2a", early[2])
            if self.snapshots and isinstance(sid, str) and sid in self.sessions:
                self.timeline.flush(self.sessions[sid].lane, force=True)

    def _start_resume(self, sess: _Session, ev: dict, replay: bool, key: tuple) -> None:
        """The resume's record takes its place in the timeline (kept until the response
        says whether it succeeded); with a replay, a window opens on the connection and
        the session's history follows the record."""
        sess.deferred = None
        self.timeline.event(sess.lane, ev, ready=False)
        if replay:
            window = self.windows[key] = _Window("resume")
            self._join(sess, window)

    def _maybe_start_deferred(self, sess: _Session) -> None:
        if sess.deferred is not None and not sess.running and not (
                sess.pending - {sess.deferred[2]}):
            ev, replay, key = sess.deferred
            self._start_resume(sess, ev, replay, key)

    def _open_request(self, sid, seq, t, kind, key, params) -> Entity:
        sess = self._session(sid)
        ent = Entity(kind, key, sid, seq, t, replayed=False)
        ent.value.update((k, v) for k, v in params.items() if k != "sessionId")
        ent.frames.append(seq)
        sess.open[(kind, key)] = ent
        self.timeline.add(sess.lane, ent)
        return ent

    def _response(self, seq, t, direction, msg) -> None:
        rid = msg["id"]
        k = (rid.__class__, rid)
        if direction == "c2a":  # the client answers the agent
            asked = self.a2c.pop(k, None)
            if asked is None:
                self.early[k] = (seq, t, msg)
                if len(self.early) > 1024:
                    self.early.popitem(last=False)
                return
            kind, ent = asked
            ent.frames.append(seq)
            if "result" in msg:
                ent.value["outcome" if kind == "permission" else "response"] = msg["result"]
            else:
                ent.value["error"] = msg.get("error")
            sess = self.sessions[ent.session]
            sess.open.pop((kind, ent.key), None)
            self.timeline.finalize(ent, "response")
            self.timeline.flush(sess.lane)
            return
        asked = self.c2a.pop(k, None)
        if asked is None:
            return
        method, params, rseq, rt, extra = asked
        psid = params.get("sessionId")
        psess = self.sessions.get(psid) if isinstance(psid, str) else None
        if psess is not None:
            psess.pending.discard(k)
        try:
            self._answered(seq, t, msg, method, params, rseq, rt, extra, k)
        finally:
            if psess is not None and method != "session/resume":
                self._maybe_start_deferred(psess)

    def _answered(self, seq, t, msg, method, params, rseq, rt, extra, key) -> None:
        """The agent answered one of the client's requests."""
        ok = "result" in msg
        result = msg.get("result") if ok else None
        if result.__class__ is not dict:
            result = {}
        frames = [rseq, seq]
        if method == "initialize":
            if not ok:
                return
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
                   "frames": frames, "t": rt}
            self.timeline.emit(rec)
        elif method in ("session/new", "session/fork"):
            if method == "session/fork":
                self.forks_pending = max(0, self.forks_pending - 1)
            sid = result.get("sessionId")
            if not ok:  # no session: acp-asr says why when the recording holds none
                self.timeline.emit({"ev": "refused", "method": method,
                                    "error": msg.get("error"), "frames": frames, "t": rt})
                return
            if not isinstance(sid, str):
                return
            sess = self._session(sid)
            rec = {"ev": "session", "op": "new" if method == "session/new" else "fork",
                   "session": sid, **_roots(params)}
            if method == "session/fork":
                rec["from"] = params.get("sessionId")
                self._keep_open(rec["from"])
                self.states.forked(sid, rec["from"])  # what it copied (ASR-718)
                if sess.window is None:
                    self._join(sess, _Window("fork"))
            rec["frames"] = frames
            rec["t"] = rt
            rec["pos"] = rseq
            self.timeline.emit(rec)  # before anything of the session leaves its lane
        elif method == "session/resume":
            self._close_window(key)
            sess = self.sessions.get(params.get("sessionId"))
            if sess is None:
                return
            if sess.deferred is not None and sess.deferred[0] is extra:
                # answered before it could start
                self._start_resume(sess, extra, False, key)
            # the resume's record waited for this answer: written only if it succeeded
            if ok:
                self.timeline.ready(extra, seq)
                sess.closed = False
            else:
                self.timeline.drop(extra)
            self.timeline.flush(sess.lane)
        elif method == "session/close":
            sess = self.sessions.get(params.get("sessionId"))
            if sess is None or not ok:
                return
            self._end_replay(sess, "close")
            self._finalize_all(sess, "close")
            self.timeline.event(sess.lane, {"ev": "session", "op": "close",
                                            "session": sess.sid, "frames": frames, "t": rt})
            sess.closed = True
            self.timeline.flush(sess.lane, force=True)
        elif method == "session/prompt":
            ent: Entity = extra
            if ent is None:
                return
            sess = self.sessions[ent.session]
            mid = result.get("messageId")
            if not ok or not isinstance(mid, str):
                ent.dead = True  # ACP: the message was not inserted; no record
                self.timeline.flush(sess.lane)
                return
            ent.frames.append(seq)
            self._adopt_prompt(sess, ent, mid)
            self.timeline.flush(sess.lane)

    def _adopt_prompt(self, sess: _Session, ent: Entity, mid: str) -> None:
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

    def _update(self, seq: int, t: int | None, sid: str, upd: dict, key: Any = None,
                meta: Any = None) -> None:
        """Fold one ``session/update``; ``key``: the entity's ID when the update does not
        carry it (a v1 chunk, under the ID the lift derived); ``meta``: the notification's
        ``params._meta``."""
        sess = self.sessions.get(sid) or self._session(sid)
        window = sess.window
        if window is None and self.windows:
            window = self._joins(sess)  # history, whatever session it names (ASR-707)
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
                    self._maybe_start_deferred(sess)
            if state in ("idle", "requires_action") and window is None:
                self._turn_end(sess, state)
            elif self.snapshots and window is None:
                self.timeline.flush(sess.lane, force=True)
        self.timeline.bound(sess.lane)

    def _snapshot(self, sess: _Session, ent: Entity) -> None:
        """ASR-705: a long stream is a checkpoint of its own. The first releases the
        lane as partial records (as at any checkpoint); once the entity is released, a
        snapshot of it leaves at once, as its final record will."""
        timeline = self.timeline
        if ent.released:
            timeline.out.append(timeline.record(ent, False, "snapshot"))
        else:
            timeline.flush(sess.lane, force=True)

    def _new_entity(self, sess, seq, t, kind, key, how, id_field, table) -> Entity:
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

    def _ended_by_update(self, sess, ent: Entity, table: dict, k: tuple) -> None:
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
            self.parents[ent.key] = sess.sid
            if live:
                del table[k]
                self.timeline.finalize(ent, "update")
                self.timeline.flush(sess.lane)

    def _elicitation_complete(self, seq, t, params) -> None:
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

    def _session(self, sid: str) -> _Session:
        sess = self.sessions.get(sid)
        if sess is None:
            sess = self.sessions[sid] = _Session(sid)
            if self.forks_pending:
                # history replayed into a fork before its response
                self._join(sess, _Window("fork"))
        return sess

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


def _roots(params: dict) -> dict:
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

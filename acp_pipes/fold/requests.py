"""The fold's requests: the client's, paired with the agent's answers, and the agent's.

A client request the fold follows (initialize, the session lifecycle, prompts) waits as a
:class:`~acp_pipes.fold.session.Request` until the agent answers; what its answer does
is one handler per method (:attr:`Requests.ANSWERED`), what the request does before it
is answered one per method too (:attr:`Requests.ASKED`). An agent's request (a
permission, an elicitation) opens an entity that is final at the client's answer
(ASR-705, ASR-716, ASR-734).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from acp_pipes.fold.connection import Connection
from acp_pipes.fold.entities import Entity, keep_trace, settle
from acp_pipes.fold.session import Answer, Asked, Deferred, Early, Request, RpcKey, Session, Window

__all__ = ["Requests", "rpc_id_str"]

#: What a client request does when it is sent, or when it is answered, by method.
Asks = dict[str, Callable[[Any, Request, RpcKey], None]]
Answers = dict[str, Callable[[Any, Request, Answer], None]]


def rpc_id_str(rid: Any) -> str:
    """A JSON-RPC id as a string (ASR-716: ``<n>:<id>``)."""
    if isinstance(rid, str):
        return rid
    if isinstance(rid, bool) or rid is None:
        return "null" if rid is None else str(rid).lower()
    if isinstance(rid, float) and rid.is_integer():
        return str(int(rid))
    return str(rid)


class Requests(Connection):
    """The requests of one connection, and their answers."""

    def request(self, seq: int, t: int | None, direction: str, msg: dict[str, Any],
                method: str) -> None:
        """A request, either side's (its ``id`` a JSON-RPC id, its method a string)."""
        rid = msg["id"]
        params = msg.get("params")
        if params.__class__ is not dict:
            params = {}
        if direction == "c2a":
            if method in self.ANSWERED:
                sid = params.get("sessionId")
                req = Request(method, params, sid if isinstance(sid, str) else None, seq, t)
                self.ASKED.get(method, Requests._asked)(self, req, (rid.__class__, rid))
            return
        sid = params.get("sessionId")
        key = (rid.__class__, rid)
        if isinstance(sid, str):
            asks = self.AGENT_ASKS.get(method)
            if asks is not None:
                asks(self, seq, t, rid, sid, params)
        # an elicitation before any session (request scope) is not recorded (ASR-734)
        early = self.early.pop(key, None)
        if early is not None and key in self.a2c:
            self.response(early.seq, early.t, "c2a", early.msg)
        if self.snapshots and isinstance(sid, str) and sid in self.sessions:
            self.timeline.flush(self.sessions[sid].lane, force=True)

    # -- the client asks ------------------------------------------------------------------

    def _asked(self, req: Request, key: RpcKey) -> None:
        """A client request waits for its answer, and its session with it."""
        if req.sid is not None:
            self.session(req.sid).pending.add(key)
        self.c2a[key] = req

    def _resume_asked(self, req: Request, key: RpcKey) -> None:
        """session/resume: its record waits for the answer; with ``replayFrom`` what the
        agent sends until then is history (ASR-707, ASR-717)."""
        sid, params, seq, t = req.sid, req.params, req.seq, req.t
        if sid is None:
            self._asked(req, key)
            return
        sess = self.session(sid)
        ev = {"ev": "session", "op": "resume", "session": sid, **_roots(params),
              "replayFrom": params.get("replayFrom"), "frames": [seq], "t": t}
        replay = params.get("replayFrom") is not None
        req.resume = ev
        self.c2a[key] = req
        if sess.pending or sess.running:
            # a client that does not wait: the replay starts once the agent is
            # done with the session's earlier requests (clients may pipeline)
            sess.deferred = Deferred(ev, replay, key)
        else:
            self.replays.start_resume(sess, ev, replay, key)
        sess.pending.add(key)

    def _prompt_asked(self, req: Request, key: RpcKey) -> None:
        """session/prompt: the prompt is a user message from now on (ASR-713); it ends
        the replay of a fork's copied history."""
        self._asked(req, key)
        if req.sid is None:
            return
        sess = self.session(req.sid)
        if sess.window is not None and sess.window.kind == "fork":
            self.replays.end(sess, "prompt")
        prompt = req.params.get("prompt")
        ent = Entity("user_message", None, req.sid, req.seq, req.t)
        ent.origin = "prompt"
        ent.value["content"] = list(prompt) if isinstance(prompt, list) else []
        keep_trace(ent, req.params.get("_meta"))  # the prompt's trace context (ASR-708)
        ent.frames.append(req.seq)
        self.timeline.add(sess.lane, ent)
        req.prompt = ent

    def _fork_asked(self, req: Request, key: RpcKey) -> None:
        """session/fork: the sessions made until its answer replay what it copied."""
        if req.sid is not None:
            self.session(req.sid).pending.add(key)
        self.forks_pending += 1
        parent = self.sessions.get(req.sid) if req.sid is not None else None
        if parent is not None and parent.window is not None and (
                parent.window.kind == "fork"):
            # a fork of a fork: what the first copied is its history, final now,
            # so the second's copy can name its records (ASR-718)
            self.replays.end(parent, "fork")
        self.c2a[key] = req

    # -- the agent asks -------------------------------------------------------------------

    def _permission(self, seq: int, t: int | None, rid: Any, sid: str,
                    params: dict[str, Any]) -> None:
        """session/request_permission: open until the client's answer (ASR-716)."""
        self.a2c[(rid.__class__, rid)] = self._open_request(
            sid, seq, t, "permission", f"{self.conn}:{rpc_id_str(rid)}", params)

    def _elicitation(self, seq: int, t: int | None, rid: Any, sid: str,
                     params: dict[str, Any]) -> None:
        """elicitation/create in a session: open until the client's answer (ASR-734)."""
        eid = params.get("elicitationId")
        ident = eid if isinstance(eid, str) else f"{self.conn}:{rpc_id_str(rid)}"
        asked = self.a2c[(rid.__class__, rid)] = self._open_request(
            sid, seq, t, "elicitation", ident, params)
        asked.ent.value["idSource"] = "native" if isinstance(eid, str) else "derived"
        if isinstance(eid, str):
            self.elicitations[eid] = sid

    def _open_request(self, sid: str, seq: int, t: int | None, kind: str, key: str,
                      params: dict[str, Any]) -> Asked:
        """The agent asks the client: an entity open until the client answers."""
        sess = self.session(sid)
        ent = Entity(kind, key, sid, seq, t, replayed=False)
        ent.value.update((k, v) for k, v in params.items() if k != "sessionId")
        ent.frames.append(seq)
        sess.open[(kind, key)] = ent
        self.timeline.add(sess.lane, ent)
        return Asked((kind, key), ent)

    def response(self, seq: int, t: int | None, direction: str,
                  msg: dict[str, Any]) -> None:
        rid = msg["id"]
        k = (rid.__class__, rid)
        if direction == "c2a":  # the client answers the agent
            asked = self.a2c.pop(k, None)
            if asked is None:
                self.early[k] = Early(seq, t, msg)
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
        psess = self.named(req)
        if psess is not None:
            psess.pending.discard(k)
        ok = "result" in msg
        result = msg.get("result") if ok else None
        try:
            self.ANSWERED[req.method](self, req, Answer(
                seq, msg, ok, result if result.__class__ is dict else {}, k, [req.seq, seq]))
        finally:
            if psess is not None and req.method != "session/resume":
                self.replays.start_deferred(psess)

    # -- the agent answers one of the client's requests -----------------------------------

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
        sess = self.session(sid)
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
        sess = self.named(req)
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
        sess = self.named(req)
        if sess is None or not ans.ok:
            return
        self.replays.end(sess, "close")
        self.finalize_all(sess, "close")
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

    def _adopt_prompt(self, sess: Session, ent: Entity, mid: str) -> None:
        """The prompt gets its messageId; a user_message with that ID is the same
        entity (ASR-713): it takes the prompt's timeline position. The agent's echo of
        the prompt is the prompt, whether it came before this response or comes after
        it: until it comes, the prompt waits under ``("prompt", mid)`` and the echo's
        first chunk starts the content anew (``Updates.new_entity``), so frame order
        does not change the content (ASR-704)."""
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

    #: The client requests the fold follows, each with what its answer does
    #: (:class:`~acp_pipes.fold.core.Folder` adds initialize).
    ANSWERED: ClassVar[Answers] = {
        "session/new": _session_made,
        "session/fork": _session_made,
        "session/resume": _resumed,
        "session/close": _closed,
        "session/prompt": _prompted,
    }
    #: What a client request does before it is answered, where it does more than wait.
    ASKED: ClassVar[Asks] = {
        "session/resume": _resume_asked,
        "session/prompt": _prompt_asked,
        "session/fork": _fork_asked,
    }
    #: The agent's requests the fold records, when they name a session.
    AGENT_ASKS: ClassVar[dict[str, Callable[..., None]]] = {
        "session/request_permission": _permission,
        "elicitation/create": _elicitation,
    }


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

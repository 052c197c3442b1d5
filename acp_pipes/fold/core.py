"""The fold: frame records of one ACP v2 connection in, entity records out (ASR-704..706).

:class:`Folder` reads frames: it pairs the client's requests with the agent's responses
(initialize, the session lifecycle, prompts, permissions, elicitations, replay windows)
and folds each ``session/update`` into the entity it names, per session and ACP ID; it
decides when each entity is final (ASR-705). It has a
:class:`~acp_pipes.fold.timeline.Timeline`, which makes the records and lets them leave
in order. History an agent replays folds in a namespace of its own, from empty, and is
final when the replay ends; acp-asr compares it with what it already wrote (ASR-717).
Which updates are history, and when a replay ends, is the connection's *replay
windows* (:mod:`acp_pipes.fold.windows`). Requests and their answers are
:mod:`acp_pipes.fold.requests`, updates :mod:`acp_pipes.fold.updates`, each one
handler per method or kind; this module reads the frames and hands each to its
handler. A connection that
negotiated ACP v1 has its frames lifted into v2's shapes first
(:class:`~acp_pipes.fold.v1.V1Lift`), so the same rules apply to it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from acp_pipes.errors import AcpPipesError
from acp_pipes.fold.requests import Answers, Requests
from acp_pipes.fold.session import Answer, Request
from acp_pipes.fold.timeline import MAX_HELD, Record
from acp_pipes.fold.updates import Updates
from acp_pipes.fold.v1 import lift_initialize
from acp_pipes.fold.v1_lift import V1Lift
from acp_pipes.protocol.jsonrpc import is_jsonrpc_id, why_not_jsonrpc

__all__ = ["MAX_HELD", "Folder", "ProtocolVersionError"]

#: A frame's strings held lone surrogates, stored as U+FFFD (the store is UTF-8).
LOSS_SURROGATES = "_org.agent-session.acp/lone_surrogates"

#: The ACP protocol versions the fold reads: v2 as the mapping says, v1 lifted into it.
_VERSIONS = (1, 2)


class ProtocolVersionError(AcpPipesError, ValueError):
    """The recording negotiated an ACP protocol version this mapping does not cover."""


class Folder(Requests, Updates):
    """Folds one connection. ``feed(frame)`` and ``finish()`` return the records to
    write, in order. ``states``: the run's entity states, shared with the folds of its
    other connections (:mod:`acp_pipes.fold.state`); by default the fold's own."""

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
                            self.update(seq, t, sid, upd, meta=params.get("_meta"))
                    else:
                        self._sid_ok(method, msg)  # reports a sessionId of another type
            return
        if "id" in msg:
            rid = msg["id"]
            if rid.__class__ is not str and not is_jsonrpc_id(rid):
                self.warn(f"not JSON-RPC: {why_not_jsonrpc(msg)}, skipped")
            elif method is None:
                if ("result" in msg) is not ("error" in msg):
                    self.response(seq, t, direction, msg)
                else:
                    self.warn(f"not JSON-RPC: {why_not_jsonrpc(msg)}, skipped")
            elif method.__class__ is not str:
                self.warn(f"not JSON-RPC: {why_not_jsonrpc(msg)}, skipped")
            elif self._sid_ok(method, msg):
                self.request(seq, t, direction, msg, method)
        elif method.__class__ is not str:
            self.warn(f"not JSON-RPC: {why_not_jsonrpc(msg)}, skipped")
        elif self._sid_ok(method, msg) and direction == "a2c" and (
                method == "elicitation/complete"):  # checked first: reported either way
            self.elicitation_complete(seq, t, msg.get("params"))

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
                sess = self.named(req)
                if sess is not None and sess.deferred is not None and (
                        sess.deferred.record is rec):  # never started: its place is now
                    self.replays.start_resume(sess, rec, False, key)
                self.timeline.ready(rec)
        self.c2a.clear()
        self.windows.clear()  # every session in one ends its replay below
        for sess in self.sessions.values():
            self.replays.end(sess, "stop")
            self.finalize_all(sess, "stop")
            self.timeline.flush(sess.lane, force=True)
        self.timeline.close()
        return self.timeline.take()

    # -- initialize: how every later frame is read ---------------------------------------

    def _initialized(self, req: Request, ans: Answer) -> None:
        """initialize: the protocol version decides how every later frame is read."""
        if not ans.ok:
            return
        params, result = req.params, ans.result
        version = result.get("protocolVersion")
        self.init_version = version
        if version == 1:  # from here on every frame is lifted first
            self.lift = V1Lift(self.conn, frame=self._frame, update=self.update,
                               mark=self._derived, declare=self._lossy,
                               states=self.states)
            params, result = lift_initialize(params, result)
        elif version not in _VERSIONS:
            raise ProtocolVersionError(self._version_message(version))
        rec = {"ev": "initialize", "protocolVersion": version,
               "agent": result.get("info"), "client": params.get("info"),
               "frames": ans.frames, "t": req.t}
        self.timeline.emit(rec)

    #: The client requests the fold follows, each with what its answer does.
    ANSWERED: ClassVar[Answers] = {"initialize": _initialized, **Requests.ANSWERED}

    # -- helpers ------------------------------------------------------------------------

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
        self.timeline.event(self.session(sid).lane, {
            "ev": "lossy", "session": sid, "lossy": loss, "frames": [seq], "t": t})

    @staticmethod
    def _version_message(version: Any) -> str:
        return (f"this recording negotiated ACP protocol version {version!r}; acp-pipes "
                "reads ACP v1 and v2 (schema 2.0.0-alpha.9, protocol version 2)")

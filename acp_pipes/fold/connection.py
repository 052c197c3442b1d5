"""The state of one connection's fold, shared by its steps.

:class:`Connection` holds what the fold of a connection keeps between frames (its
sessions, the requests each side waits for, the replay windows, the timeline) and the
few helpers every step uses. The steps are its subclasses, one module each:
:class:`~acp_pipes.fold.requests.Requests` (the client's and the agent's requests and
their answers), :class:`~acp_pipes.fold.updates.Updates` (``session/update``), brought
together by :class:`~acp_pipes.fold.core.Folder`, which reads the frames.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from acp_pipes.errors import Note, Warn
from acp_pipes.fold.session import Asked, Early, Request, RpcKey, Session, Window
from acp_pipes.fold.state import States
from acp_pipes.fold.timeline import Timeline
from acp_pipes.fold.v1_lift import V1Lift
from acp_pipes.fold.windows import Replays

__all__ = ["Connection"]


class Connection:
    """One connection's fold state. ``states``: the run's entity states, shared with the
    folds of its other connections (:mod:`acp_pipes.fold.state`); by default the fold's
    own."""

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
        self.a2c: dict[RpcKey, Asked] = {}
        self.elicitations: dict[str, str] = {}  # elicitationId -> its session
        # client answers logged before the agent's request they answer (the two
        # directions of a proxy are read apart; a scripted client may answer early)
        self.early: OrderedDict[RpcKey, Early] = OrderedDict()
        self.forks_pending = 0
        self.init_version: Any = None
        self.lift: V1Lift | None = None  # set when initialize negotiated ACP v1
        self.replays = Replays(self.timeline, self.sessions)
        # the replays' open resume windows (the same dict), looked at by every update
        self.windows = self.replays.open

    def session(self, sid: str) -> Session:
        """The session ``sid``, made at its first mention; made while a fork waits for
        its answer, it replays what the fork copied."""
        sess = self.sessions.get(sid)
        if sess is None:
            sess = self.sessions[sid] = Session(sid)
            if self.forks_pending:
                # history replayed into a fork before its response
                self.replays.join(sess, Window("fork"))
        return sess

    def named(self, req: Request) -> Session | None:
        """The session a client request names, if the fold knows it."""
        return None if req.sid is None else self.sessions.get(req.sid)

    def finalize_all(self, sess: Session, why: str) -> None:
        """Every entity open in the session is final (ASR-705: close, stop)."""
        for ent in list(sess.open.values()):
            self.timeline.finalize(ent, why)
        sess.open.clear()

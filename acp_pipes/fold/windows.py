"""Replay windows: which of a connection's updates are history (ASR-707, ASR-717).

A *replay window* is a property of the connection, not of one session: everything the
agent sends between a ``session/resume`` with ``replayFrom`` (ACP v1's ``session/load``
is lifted into one) and its response is history, whatever session it names (a parent
replays its subagents' messages too), except for a session with live work of its own
on the connection; a fork's new session replays until its first prompt. History folds
in a namespace of its own (``Session.replay_open``), from empty, and is final when the
replay ends, where it meets what the session holds live (:meth:`Replays.end`).

A resume the client sends while the session still has work (clients may pipeline) waits
as a :class:`~acp_pipes.fold.session.Deferred` until that work is done, so its replay
does not swallow the earlier turn's updates. :class:`Replays` keeps this bookkeeping for one
:class:`~acp_pipes.fold.core.Folder`, which decides when each step happens.
"""

from __future__ import annotations

from acp_pipes.fold.entities import keep_trace, settle
from acp_pipes.fold.session import RpcKey, Session, Window
from acp_pipes.fold.timeline import Record, Timeline

__all__ = ["Replays"]

#: How many subagent ancestors :meth:`Replays.busy` looks through (and no loop forever
#: on a cycle).
_ANCESTORS = 16


class Replays:
    """The replay windows of one connection: ``open``, those of resume requests not yet
    answered, by request (newest last); ``parents``, each subagent session -> the
    session its ``subagent_update`` came in (ASR-721): a child of a session busy with
    live work is live too, not history."""

    __slots__ = ("open", "parents", "sessions", "timeline")

    def __init__(self, timeline: Timeline, sessions: dict[str, Session]):
        self.timeline = timeline
        self.sessions = sessions  # the fold's, by ID
        self.open: dict[RpcKey, Window] = {}
        self.parents: dict[str, str] = {}

    def join(self, sess: Session, window: Window) -> None:
        """The session's updates are history of ``window`` from now on."""
        if sess.window is not None:
            self.end(sess, "replay")  # a new replay starts from empty
        sess.window = window
        window.sessions.append(sess)

    def joins(self, sess: Session) -> Window | None:
        """An update for a session outside any replay while a resume is open:
        history of the newest such window, unless the session (or the session that
        spawned it as a subagent) has live work on the connection (acp-pipes choice)."""
        if self.busy(sess):
            return None
        window = next(reversed(self.open.values()))
        self.join(sess, window)
        return window

    def busy(self, sess: Session | None) -> bool:
        """The session or one of its subagent ancestors is running, or has a client
        request other than a resume waiting for its answer."""
        windows = self.open.keys()
        for _ in range(_ANCESTORS):
            if sess is None:
                return False
            if sess.running or (sess.pending and not sess.pending <= windows):
                return True
            parent = self.parents.get(sess.sid)
            sess = self.sessions.get(parent) if parent is not None else None
        return False

    def close(self, key: RpcKey) -> None:
        """A resume was answered: its window's sessions end their replay."""
        window = self.open.pop(key, None)
        if window is None:
            return
        for sess in window.sessions:
            if sess.window is window:
                self.end(sess, "replay")
                self.timeline.flush(sess.lane)

    def start_resume(self, sess: Session, rec: Record, replay: bool, key: RpcKey) -> None:
        """The resume's record takes its place in the timeline (kept until the response
        says whether it succeeded); with a replay, a window opens on the connection and
        the session's history follows the record."""
        sess.deferred = None
        self.timeline.event(sess.lane, rec, ready=False)
        if replay:
            window = self.open[key] = Window("resume")
            self.join(sess, window)

    def start_deferred(self, sess: Session) -> None:
        """A deferred resume starts once the session is not running and no request of
        it other than the resume waits for its answer."""
        deferred = sess.deferred
        if deferred is not None and not sess.running and not (
                sess.pending - {deferred.key}):
            self.start_resume(sess, deferred.record, deferred.replay, deferred.key)

    def end(self, sess: Session, why: str) -> None:
        """The session's replay ends (``why``: what ended it): replayed entities are
        final, then a replay_end. A replayed entity is the latest state on the wire of an
        entity still open live (a tool call that never got a final status, revised by a
        ``session/load``): the live one is not written again over it (ASR-706, ASR-717).
        Not yet written, it takes the replayed state in its own place (its first sight's
        ``ts``, ASR-707); written already, the replayed record supersedes it, and the
        live one is done."""
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

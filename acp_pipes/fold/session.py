"""What the fold knows of one connection's sessions and requests, as plain records.

A :class:`Session` is one session as the connection shows it (its open entities, its
lane, what its requests wait for); a :class:`Request` and its :class:`Answer` pair the
client's requests with the agent's responses; a :class:`Window` is history an agent
replays. The fold's steps (:mod:`acp_pipes.fold.requests`, :mod:`acp_pipes.fold.updates`,
:mod:`acp_pipes.fold.windows`) all read and change these, so they live below them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from acp_pipes.fold.entities import Entity
from acp_pipes.fold.timeline import Lane, Record, Timeline

__all__ = ["Answer", "Asked", "Deferred", "Early", "EntityKey", "Request", "RpcKey", "Session",
           "Window"]

#: A JSON-RPC id with its type, so that ``1``, ``1.0``, ``True`` and ``"1"`` (equal or
#: alike in Python) name different requests.
RpcKey = tuple[type, Any]

#: An open entity's place in its session's tables: (entity kind, ACP ID), or
#: ("prompt", messageId) for a prompt whose echo has not come (see Requests._adopt_prompt).
EntityKey = tuple[str, str]


@dataclass(slots=True, eq=False)
class Window:
    """History an agent replays (ASR-707, ASR-717): ``kind`` ``resume`` (a request of the
    connection, until its response) or ``fork`` (a fork's new session, until its first
    prompt); ``sessions``: those whose updates it took. Compared by identity."""

    kind: str
    sessions: list[Session] = field(default_factory=list)


@dataclass(slots=True)
class Deferred:
    """A resume waiting for the session's earlier requests to be answered: its record
    (written once the response says it succeeded), whether it replays, its request."""

    record: Record
    replay: bool
    key: RpcKey


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
    ``Folder.ANSWERED``): its frame, and what the answer decides about. ``resume``: a
    session/resume's record, written once the answer says it succeeded; ``prompt``: the
    user message a session/prompt makes, inserted once its messageId comes."""

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


class Asked(NamedTuple):
    """An agent's request (permission, elicitation) waiting for the client's answer:
    the entity it opened, and its place in the session's open entities."""

    key: EntityKey
    ent: Entity


class Early(NamedTuple):
    """A client answer logged before the agent's request it answers."""

    seq: int
    t: int | None
    msg: dict[str, Any]

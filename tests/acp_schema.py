"""Validate ACP frames against the official schemas: v2 (v2.0.0-alpha.9, unstable,
ASR-700) by default, or another revision (``"v1"``), stable features only or unstable.

The schema's unions (``AgentResponse``'s ``result`` is an anyOf of every response type,
and ``CloseSessionResponse`` is ``{}``) accept almost any result, so a frame is checked
twice: against its JSON-RPC union (``AgentRequest``/``AgentResponse``/
``AgentNotification`` or the ``Client*`` ones), and its payload against the per-method
definition the schema marks with ``x-method`` and ``x-side``. Open "other" variants
would also accept a misspelt ``sessionUpdate``, so ``FrameChecker`` refuses kinds the
schema does not name.

    from tests.acp_schema import check_conversation
    client_kinds, agent_kinds = check_conversation(client_frames, agent_frames)
    # raises AssertionError on the first bad frame, naming what is wrong and where

The validators are the library's (``acp_pipes.frame.validate.schema``: compiled once, held to the
reference ``jsonschema`` package by tests/test_validate_schema.py).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from acp_pipes.frame.validate.schema import schema
from acp_pipes.schemas import ACP_V2

REVISION = ACP_V2


def load_schema(revision: str = REVISION, unstable: bool = True) -> dict:
    """The official schema of ``revision``: stable and unstable features, or stable."""
    return schema(revision, unstable).root


class _Validator:
    """``validate(instance)`` raises AssertionError with the schema's findings."""

    def __init__(self, name: str, revision: str, unstable: bool):
        self.name, self.schema = name, schema(revision, unstable)

    def validate(self, instance: Any) -> None:
        if self.schema.is_valid(self.name, instance):
            return
        findings, _ = self.schema.findings(self.name, instance)
        why = "; ".join(f"{f.pointer or '/'}: {f.message}" for f in findings)
        raise AssertionError(f"not a valid {self.name} ({self.schema.file}): {why}")


@cache
def validator(name: str, revision: str = REVISION, unstable: bool = True) -> _Validator:
    """A validator for ``$defs[name]`` that resolves the schema's internal references."""
    if name not in load_schema(revision, unstable)["$defs"]:
        raise KeyError(f"no $defs.{name} in ACP schema {revision}")
    return _Validator(name, revision, unstable)


@cache
def method_def(method: str, side: str, kind: str, revision: str = REVISION,
               unstable: bool = True) -> str:
    """The $defs name of a method's ``Request`` or ``Response`` (``kind``) payload.

    ``side`` is the schema's ``x-side``: the side that handles the method ("agent" for
    ``session/prompt``, "client" for ``session/request_permission`` and notifications
    the agent sends).
    """
    defs = load_schema(revision, unstable)["$defs"]
    names = [
        n
        for n, d in defs.items()
        if d.get("x-method") == method and d.get("x-side") == side and n.endswith(kind)
    ]
    if len(names) != 1:
        raise KeyError(f"{method} ({side}, {kind}): expected one definition, got {names}")
    return names[0]


@cache
def session_update_kinds(revision: str = REVISION, unstable: bool = True) -> frozenset[str]:
    """The ``sessionUpdate`` values the schema names (its "other" catch-all excluded; v1's
    union is a closed ``oneOf``)."""
    kinds = set()
    union = load_schema(revision, unstable)["$defs"]["SessionUpdate"]
    for variant in union.get("anyOf", union.get("oneOf", [])):
        const = variant.get("properties", {}).get("sessionUpdate", {}).get("const")
        if const:
            kinds.add(const)
    return frozenset(kinds)


class FrameChecker:
    """Checks the frames one side sends. It remembers the methods of the requests it saw
    from the other side (``note_request``) to check each response against its method's
    response type; ``check_conversation`` wires two of them together."""

    def __init__(self, side: str, revision: str = REVISION, unstable: bool = True):
        assert side in ("agent", "client")
        self.side = side
        self.revision = revision
        self.unstable = unstable
        self.prefix = "Agent" if side == "agent" else "Client"
        self.peer_requests: dict[Any, str] = {}  # request ids the other side sent -> method

    @property
    def schema(self) -> tuple[str, bool]:
        return self.revision, self.unstable

    def note_request(self, frame: dict) -> None:
        if "method" in frame and "id" in frame:
            self.peer_requests[json.dumps(frame["id"])] = frame["method"]

    def __call__(self, frame: Any) -> str:
        """Validate one frame this side sent; returns what it was ("response initialize",
        "request session/request_permission", "notification session/update", "error")."""
        if isinstance(frame, list):
            assert frame, "empty batch"
            return "batch[" + ",".join(self(item) for item in frame) + "]"
        assert isinstance(frame, dict), f"frame is not an object: {frame!r}"
        assert frame.get("jsonrpc") == "2.0", f"jsonrpc must be '2.0': {frame!r}"
        handler = "client" if self.side == "agent" else "agent"  # who handles what we send
        if "method" in frame and "id" in frame:
            validator(self.prefix + "Request", *self.schema).validate(frame)
            name = method_def(frame["method"], handler, "Request", *self.schema)
            validator(name, *self.schema).validate(frame.get("params"))
            return "request " + frame["method"]
        if "method" in frame:
            validator(self.prefix + "Notification", *self.schema).validate(frame)
            method = frame["method"]
            name = method_def(method, handler, "Notification", *self.schema)
            validator(name, *self.schema).validate(frame.get("params"))
            if method == "session/update":
                kind = frame["params"]["update"]["sessionUpdate"]
                assert kind in session_update_kinds(*self.schema), f"unknown update {kind!r}"
            return "notification " + method
        validator(self.prefix + "Response", *self.schema).validate(frame)
        if "error" in frame:
            assert set(frame) == {"jsonrpc", "id", "error"}, frame
            return "error"
        assert set(frame) == {"jsonrpc", "id", "result"}, frame
        method = self.peer_requests.get(json.dumps(frame["id"]))
        assert method is not None, f"response to an id never requested: {frame['id']!r}"
        validator(method_def(method, self.side, "Response", *self.schema), *self.schema).validate(
            frame["result"]
        )
        return "response " + method


def check_conversation(
    client_frames: list[Any], agent_frames: list[Any], revision: str = REVISION,
    unstable: bool = True,
) -> tuple[list[str], list[str]]:
    """Validate both sides of a conversation (parsed frames, each side in its own order;
    request ids must be unique per side). Returns the kind of each frame, per side."""
    agent = FrameChecker("agent", revision, unstable)
    client = FrameChecker("client", revision, unstable)
    for frames, peer in ((client_frames, agent), (agent_frames, client)):
        for frame in frames:
            for item in frame if isinstance(frame, list) else [frame]:
                if isinstance(item, dict):
                    peer.note_request(item)
    return [client(f) for f in client_frames], [agent(f) for f in agent_frames]

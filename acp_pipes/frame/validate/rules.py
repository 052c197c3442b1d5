"""What the ACP schema cannot say, as data: which rule each violation breaks, which calls
need a capability, and which methods begin, end or merely name a session.

Capabilities are paths into the ``initialize`` request's ``params`` (the client's) or its
response's ``result`` (the agent's). A capability is advertised when the path leads to a
value that is not absent, ``null``, ``false`` or an empty list (v1 flags are ``true``;
most capabilities are objects, where ``{}`` advertises). Each row names the feature it
gates: a method, or ``prompt/<type>`` (a prompt content block), ``mcp/<type>`` (an MCP
server transport in a session lifecycle request), ``elicitation/<mode>``,
``update/<sessionUpdate>`` (an update the client must have asked for), ``param/<name>``
(a session lifecycle parameter). The schema's own description of each capability says
what it gates; tests/test_validate_rules.py checks the rows against those words.
"""

from __future__ import annotations

import functools
from typing import Any

from acp_pipes.frame.validate.schema import schema
from acp_pipes.frame.validate.words import escape, first_words, paragraph
from acp_pipes.schemas import ACP_V1, ACP_V2

__all__ = ["CANCELLED_WORDS", "GATES", "RULES", "SESSION", "TOOL_CALL_WORDS", "WARNINGS",
           "advertised", "capability_source", "schema_words"]

#: Every rule a violation record can name, and what it means.
RULES = {
    "not-json": "the frame is not one JSON text",
    "not-jsonrpc": "the frame is JSON but not a JSON-RPC 2.0 message",
    "version": "the negotiated protocol version has no schema here",
    "not-initialized": "a frame before the initialize exchange completed",
    "unknown-method": "a method the negotiated schema does not define (extensions start with _)",
    "wrong-direction": "a method sent by the side that should receive it",
    "wrong-kind": "a request method sent as a notification, or the other way round",
    "schema": "params, result or error that the method's definition refuses",
    "reserved-value": "a tag value the schema reserves for future ACP versions",
    "id-reused": "a request id already in flight from the same side",
    "request-id": "a request's id (or a result's) that the schema's RequestId refuses: "
                  "null in SDK 2.4.0's v2, a fraction in every revision",
    "unknown-response": "a response to an id no request of the other side is waiting on",
    "duplicate-response": "a second response to a request already answered",
    "unanswered": "a request that got no response by the end of the recording",
    "unknown-session": "a session used before it was created, loaded, resumed or forked, "
                       "or after it was closed",
    "capability": "a call or content the peer did not advertise",
    "cancel-stop-reason": "a turn the client cancelled (session/cancel) that ends with "
                          "another stop reason than cancelled",
    "relative-path": "a path the schema calls absolute that is not",
    "unannounced-tool-call": "(warning) a permission request naming a tool call no "
                             "tool_call update announced",
    "tool-call-id-reused": "(warning) an unannounced tool call id a permission request "
                           "named, named again by the next permission request",
}

#: Rules whose findings are warnings (``"level":"warning"``): the schema implies them
#: without a MUST, so they do not make --validate fail.
WARNINGS = frozenset({"unannounced-tool-call", "tool-call-id-reused"})

#: Where each revision's schema states the rules beyond it: (``$defs`` path, the words).
#: cancel-stop-reason. v1 ``StopReason`` ``cancelled``: "This stop reason MUST be returned
#: when the client sends a `session/cancel` notification"; v2 ``IdleStateUpdate``
#: ``cancelled``: "Agents MUST report this stop reason on an idle `state_update` when
#: cancellation ends active foreground work". tests/test_validate_rules.py checks them.
CANCELLED_WORDS = {
    ACP_V1: (("StopReason", "oneOf", 4), "MUST be returned when the client sends a "
             "`session/cancel`"),
    ACP_V2: (("IdleStateUpdate", "anyOf", 4), "MUST report this stop reason on an idle "
             "`state_update` when cancellation ends active foreground work"),
    "v2-sdk-2.4.0": (("IdleStateUpdate", "anyOf", 4), "MUST report this stop reason on "
                     "an idle `state_update` when cancellation ends active foreground work"),
}
#: unannounced-tool-call, tool-call-id-reused (v1 only). v1: the permission request's
#: ``toolCall`` is a ``ToolCallUpdate``, "An update to an existing tool call.", whose
#: ``toolCallId`` is "The ID of the tool call being updated.", and a ``ToolCallId`` is a
#: "Unique identifier for a tool call within a session." No MUST forbids an unannounced
#: id: the words imply it, hence warnings. In v2 a ``ToolCallUpdate`` "Represents an
#: upsert for a tool call", so a permission request may be the first to name a call.
TOOL_CALL_WORDS = {
    ACP_V1: (("ToolCallUpdate",), "An update to an existing tool call."),
}


def schema_words(revision: str | None, table: dict[str, tuple[tuple[Any, ...], str]]
                 ) -> tuple[str | None, str | None, str | None]:
    """(schema file, ``#/$defs/...`` location, the schema's paragraph holding the words)
    of a row of :data:`CANCELLED_WORDS` or :data:`TOOL_CALL_WORDS`."""
    row = table.get(revision) if revision is not None else None
    if row is None:
        return None, None, None
    where, words = row
    s = schema(revision, True)
    node: Any = s.defs
    for key in where:
        node = node[key]
    location = "#/$defs/" + "/".join(escape(str(k)) for k in where)
    text = node.get("description") or ""
    for para in text.split("\n\n"):
        para = " ".join(para.split())
        if words in para:
            return s.file, location, para
    return s.file, location, first_words(node)

_CLIENT, _AGENT = "client", "agent"

_V1_CLIENT = ("clientCapabilities",)
_V1_AGENT = ("agentCapabilities",)
_V1_SESSION = (*_V1_AGENT, "sessionCapabilities")
_V2_CLIENT = ("capabilities",)
_V2_SESSION = ("capabilities", "session")

#: feature -> [(whose capability, path)], per protocol version; all rows must hold.
GATES: dict[int, dict[str, list[tuple[str, tuple[str, ...]]]]] = {1: {}, 2: {}}


def _gate(version: int, holder: str, path: tuple[str, ...], *features: str) -> None:
    for feature in features:
        GATES[version].setdefault(feature, []).append((holder, path))


_TERMINAL = ("terminal/create", "terminal/output", "terminal/release",
             "terminal/wait_for_exit", "terminal/kill")
_PROVIDERS = ("providers/list", "providers/set", "providers/disable")

_gate(1, _CLIENT, (*_V1_CLIENT, "fs", "readTextFile"), "fs/read_text_file")
_gate(1, _CLIENT, (*_V1_CLIENT, "fs", "writeTextFile"), "fs/write_text_file")
_gate(1, _CLIENT, (*_V1_CLIENT, "terminal"), *_TERMINAL)
_gate(1, _CLIENT, (*_V1_CLIENT, "elicitation"), "elicitation/create")
_gate(1, _CLIENT, (*_V1_CLIENT, "elicitation", "form"), "elicitation/form")
_gate(1, _CLIENT, (*_V1_CLIENT, "elicitation", "url"), "elicitation/url")
_gate(1, _CLIENT, (*_V1_CLIENT, "plan"), "update/plan_update", "update/plan_removed")
_gate(1, _CLIENT, (*_V1_CLIENT, "session", "notices"), "update/notice")
_gate(1, _CLIENT, (*_V1_CLIENT, "session", "compaction"),
      "update/compaction_update", "update/compaction_summary_chunk")
_gate(1, _CLIENT, (*_V1_CLIENT, "subagents"), "update/subagent_update")
_gate(1, _AGENT, (*_V1_AGENT, "loadSession"), "session/load")
_gate(1, _AGENT, (*_V1_SESSION, "list"), "session/list")
_gate(1, _AGENT, (*_V1_SESSION, "delete"), "session/delete")
_gate(1, _AGENT, (*_V1_SESSION, "fork"), "session/fork")
_gate(1, _AGENT, (*_V1_SESSION, "resume"), "session/resume")
_gate(1, _AGENT, (*_V1_SESSION, "close"), "session/close")
_gate(1, _AGENT, (*_V1_SESSION, "archive"), "session/archive", "session/unarchive")
_gate(1, _AGENT, (*_V1_SESSION, "status"), "session/status")
_gate(1, _AGENT, (*_V1_SESSION, "title"), "session/set_title")
_gate(1, _AGENT, (*_V1_SESSION, "additionalDirectories"), "param/additionalDirectories")
_gate(1, _AGENT, (*_V1_SESSION, "systemPrompt"), "param/systemPrompt")
_gate(1, _AGENT, (*_V1_AGENT, "auth", "status"), "auth/status")
_gate(1, _AGENT, (*_V1_AGENT, "auth", "logout"), "logout")
_gate(1, _AGENT, (*_V1_AGENT, "providers"), *_PROVIDERS)
_gate(1, _AGENT, (*_V1_AGENT, "promptCapabilities", "image"), "prompt/image")
_gate(1, _AGENT, (*_V1_AGENT, "promptCapabilities", "audio"), "prompt/audio")
_gate(1, _AGENT, (*_V1_AGENT, "promptCapabilities", "embeddedContext"), "prompt/resource")
_gate(1, _AGENT, (*_V1_AGENT, "mcpCapabilities", "http"), "mcp/http")
_gate(1, _AGENT, (*_V1_AGENT, "mcpCapabilities", "sse"), "mcp/sse")
_gate(1, _AGENT, (*_V1_AGENT, "mcpCapabilities", "acp"), "mcp/acp")

_gate(2, _CLIENT, (*_V2_CLIENT, "elicitation"), "elicitation/create")
_gate(2, _CLIENT, (*_V2_CLIENT, "elicitation", "form"), "elicitation/form")
_gate(2, _CLIENT, (*_V2_CLIENT, "elicitation", "url"), "elicitation/url")
# "Omitted or null both mean the agent does not support the session/* method surface."
_gate(2, _AGENT, _V2_SESSION, "session/new", "session/list", "session/resume",
      "session/close", "session/prompt", "session/cancel", "session/update",
      "session/set_config_option", "session/delete", "session/fork")
_gate(2, _AGENT, (*_V2_SESSION, "delete"), "session/delete")
_gate(2, _AGENT, (*_V2_SESSION, "fork"), "session/fork")
_gate(2, _AGENT, (*_V2_SESSION, "additionalDirectories"), "param/additionalDirectories")
_gate(2, _AGENT, (*_V2_SESSION, "systemPrompt"), "param/systemPrompt")
_gate(2, _AGENT, (*_V2_SESSION, "prompt", "image"), "prompt/image")
_gate(2, _AGENT, (*_V2_SESSION, "prompt", "audio"), "prompt/audio")
_gate(2, _AGENT, (*_V2_SESSION, "prompt", "embeddedContext"), "prompt/resource")
_gate(2, _AGENT, (*_V2_SESSION, "mcp", "stdio"), "mcp/stdio")
_gate(2, _AGENT, (*_V2_SESSION, "mcp", "http"), "mcp/http")
_gate(2, _AGENT, (*_V2_SESSION, "mcp", "acp"), "mcp/acp")
# "those methods are advertised by a non-empty authMethods list in the initialize response"
_gate(2, _AGENT, ("authMethods",), "auth/login", "auth/logout")
_gate(2, _AGENT, ("capabilities", "providers"), *_PROVIDERS)


class SessionRules:
    """How the methods of one protocol version treat sessions.

    ``begin_request``: the request's ``params.sessionId`` is live from the request on
    (the agent replays history before it answers); an error answer ends it again.
    ``begin_response``: the response's ``result.sessionId`` is live from the response.
    ``end``: a successful response ends the request's session. ``stored``: methods that
    name a stored session, which need not be live on this connection. Every other
    method with a ``params.sessionId`` needs a live session.
    """

    def __init__(self, begin_request: set[str], begin_response: set[str], end: set[str],
                 stored: set[str]):
        self.begin_request = frozenset(begin_request)
        self.begin_response = frozenset(begin_response)
        self.end = frozenset(end)
        self.stored = frozenset(stored)


SESSION = {
    1: SessionRules({"session/load", "session/resume"}, {"session/new", "session/fork"},
                    {"session/close"},
                    {"session/delete", "session/archive", "session/unarchive",
                     "session/status", "session/set_title", "session/fork"}),
    # v2-sdk-2.4.0 SetSessionTitleRequest: "The session does not need to be active on
    # the connection."; session/status likewise names a stored session
    2: SessionRules({"session/resume"}, {"session/new", "session/fork"}, {"session/close"},
                    {"session/delete", "session/fork", "session/set_title",
                     "session/status"}),
}

#: Session lifecycle requests: their MCP servers and parameters are capability-gated.
LIFECYCLE = frozenset({"session/new", "session/load", "session/resume", "session/fork"})

_REVISION = {1: ACP_V1, 2: ACP_V2}


def advertised(init: dict[str, Any], path: tuple[str, ...]) -> bool:
    """Does the initialize ``params``/``result`` advertise the capability at ``path``?"""
    node: Any = init
    for key in path:
        if not isinstance(node, dict):
            return False
        node = node.get(key)
    return node is not None and node is not False and node != []


@functools.cache
def capability_source(version: int, holder: str, path: tuple[str, ...], feature: str = ""
                      ) -> tuple[str, str | None]:
    """Where the schema defines a capability, and its words: (``#/$defs/...`` pointer
    into the unstable schema of ``version``; the paragraph of its description that
    names ``feature`` (a method, or ``session/*`` for one of the ``session/`` methods),
    else the first)."""
    s = schema(_REVISION[version], True)
    name = "InitializeRequest" if holder == _CLIENT else "InitializeResponse"
    node: dict[str, Any] = s.defs[name]
    location = f"#/$defs/{name}"
    prop: dict[str, Any] = {}
    for key in path:
        found = node.get("properties", {}).get(key)
        if not isinstance(found, dict):
            return location, None
        prop = found
        location = f"#/$defs/{name}/properties/{escape(key)}"
        target = _ref(prop)
        if target is None:
            break
        name, node = target, s.defs[target]
    terms = [f"`{feature}`"] if feature else []
    if "/" in feature:
        terms.append(f"`{feature.split('/', 1)[0]}/*`")
    return location, paragraph(prop, terms) or first_words(prop)


def _ref(prop: dict[str, Any]) -> str | None:
    """The definition a property refers to (``$ref``, or the one in anyOf/allOf)."""
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[-1]
    for key in ("allOf", "anyOf"):
        for alt in prop.get(key, ()):
            if isinstance(alt, dict) and "$ref" in alt:
                return alt["$ref"].rsplit("/", 1)[-1]
    return None

"""The notifications ACP lets float: the protocol does not fix when they come.

An agent sends these when its own state changes, not as a step of the turn the client is
in: two runs of one agent on one script send them at other places (before or after a
turn's answer, even after the next prompt), and some runs not at all. The model
(:mod:`acp_pipes.sameness`) matches each within a window around where it was recorded,
in any order, and a floating notification missing or extra is a note, not a difference;
one that is there in both runs with other content is a difference.

Each entry says where the protocol says so (the ACP docs, ``docs/protocol/`` and
``docs/rfds/`` of agentclientprotocol/agent-client-protocol, and the schemas in
``acp-schema/``, v1 and v2). What is not here is ordered: a turn's messages, tool calls,
plans, terminals and v2's ``state_update`` (the turn's own state: ``idle`` ends it).
"""

from __future__ import annotations

__all__ = ["FLOATING", "FLOATING_METHODS"]

#: ``sessionUpdate`` kinds that float, and why (v1 and v2 unless said).
FLOATING: dict[str, str] = {
    "available_commands_update": (
        "slash-commands: the agent 'can update the list of available commands at any time "
        "during a session'; the first list comes after session/new, before or after its "
        "answer"),
    "current_mode_update": (
        "v1 session-modes: 'the current mode can be changed at any point during a "
        "session, whether the Agent is idle or generating a response'"),
    "config_option_update": (
        "session-config-options: a config option 'can be changed at any point during a "
        "session, whether the Agent is idle or generating a response'"),
    "session_info_update": (
        "RFD session-info-update: metadata the agent updates on its own (a title its "
        "model writes after the first prompt, updatedAt), 'no request/response needed'; "
        "agents write the title asynchronously, before or after the turn's answer"),
    "usage_update": (
        "RFD session-usage: context window and cost are 'session-level state that "
        "clients may need before, during, or after a prompt', sent 'anytime' they change "
        "and after a prompt completes"),
    "notice": (
        "RFD session-notices: 'information for the user that is not part of session "
        "history', no ID, no answer, not replayed; 'repeated notices are independent "
        "events'"),
}

#: Agent notifications other than ``session/update`` that float, and why.
FLOATING_METHODS: dict[str, str] = {
    "auth/status_update": (
        "v1 (unstable) auth status: agents 'MAY send it at any time after initialize', "
        "when the status changes"),
}

"""Minted identifiers and clocks: the volatile values ACP's schemas themselves name.

An agent mints identifiers (session, tool-call, terminal, message, elicitation ids) and
stamps clocks; two runs of one session differ there without differing in behaviour. The
model of the same session (:mod:`acp_pipes.sameness`) learns the identifiers as a
consistent renaming (:func:`learn`, :func:`rename`: one to one, recorded -> live) and
leaves the clocks out (:func:`drop_clocks`); acp-align's default preset renames and drops
the same ones. A vendor's own values are its presets' (:mod:`acp_pipes.sameness.volatile`).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

__all__ = ["CLOCKS", "MINTED_KEYS", "MINTED_KINDS", "drop_clocks", "learn", "rename"]

#: Object members whose string value the agent mints, by kind (the kind names an
#: identifier in acp-align's diffs: ``session#1``): renamed, never compared as sent.
#: Only members ACP's schemas (v1, v2) define as the agent's identifiers; an ID it puts
#: anywhere else (text, ``_meta``, a tool's input) counts as sent (``--ignore`` it).
MINTED_KINDS = {
    "sessionId": "session",  # session/new, load, fork results and every sessionId after
    "toolCallId": "toolCall",
    "terminalId": "terminal",  # terminal/create results and every terminal/* after
    "messageId": "message",  # v2
    "elicitationId": "elicitation",
}

#: Object members whose string value the agent mints.
MINTED_KEYS = frozenset(MINTED_KINDS)

#: The clocks of ACP's schemas, as pointers (``*``: any index): left out of a comparison
#: of two runs. Nothing else is a clock: a vendor's own (in ``_meta``, say) is compared.
CLOCKS = (
    "/params/update/updatedAt",  # session_info_update: when the session last changed
    "/result/sessions/*/updatedAt",  # session/list: each session's last change
)


def learn(recorded: Any, live: Any, names: MutableMapping[str, str],
          back: MutableMapping[str, str], path: str = "") -> list[str]:
    """Walk ``recorded`` and ``live`` side by side and add each minted value pair to
    ``names`` (recorded -> live; ``back`` is its inverse). Returns the JSON pointers
    where a pair contradicts one learned before (the renaming must stay one to one).

    >>> n, b = {}, {}
    >>> learn({"sessionId": "a"}, {"sessionId": "x"}, n, b), n
    ([], {'a': 'x'})
    >>> learn({"p": {"sessionId": "a"}}, {"p": {"sessionId": "y"}}, n, b)
    ['/p/sessionId']
    """
    bad: list[str] = []
    if isinstance(recorded, dict) and isinstance(live, dict):
        for key, r in recorded.items():
            if key not in live:
                continue
            x = live[key]
            here = path + "/" + key.replace("~", "~0").replace("/", "~1")
            if key in MINTED_KEYS and isinstance(r, str) and isinstance(x, str):
                if names.get(r, x) != x or back.get(x, r) != r:
                    bad.append(here)
                else:
                    names[r] = x
                    back[x] = r
            elif isinstance(r, (dict, list)):
                bad.extend(learn(r, x, names, back, here))
    elif isinstance(recorded, list) and isinstance(live, list):
        for i, (r, x) in enumerate(zip(recorded, live, strict=False)):
            if isinstance(r, (dict, list)):
                bad.extend(learn(r, x, names, back, f"{path}/{i}"))
    return bad


def rename(value: Any, names: Mapping[str, str]) -> Any:
    """``value`` with each minted string renamed by ``names`` (pure: a new value only
    where something changed).

    >>> rename({"params": {"sessionId": "a", "text": "a"}}, {"a": "x"})
    {'params': {'sessionId': 'x', 'text': 'a'}}
    """
    if isinstance(value, dict):
        out = None
        for key, v in value.items():
            if key in MINTED_KEYS and isinstance(v, str):
                new = names.get(v, v)
            elif isinstance(v, (dict, list)):
                new = rename(v, names)
            else:
                continue
            if new is not v:
                if out is None:
                    out = dict(value)
                out[key] = new
        return value if out is None else out
    if isinstance(value, list):
        items = [rename(v, names) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def drop_clocks(msg: Any) -> Any:
    """The JSON-RPC message ``msg`` without the :data:`CLOCKS` (pure: copies what
    changes).

    >>> drop_clocks({"params": {"update": {"updatedAt": "2026-12-02T01:30", "title": "t"}}})
    {'params': {'update': {'title': 't'}}}
    """
    if msg.__class__ is not dict:
        return msg
    out = msg
    params = msg.get("params")
    if params.__class__ is dict:
        upd = params.get("update")
        if upd.__class__ is dict and "updatedAt" in upd:
            upd = {k: v for k, v in upd.items() if k != "updatedAt"}
            out = {**out, "params": {**params, "update": upd}}
    result = msg.get("result")
    if result.__class__ is dict and result.get("sessions").__class__ is list:
        sessions = [{k: v for k, v in x.items() if k != "updatedAt"}
                    if x.__class__ is dict else x for x in result["sessions"]]
        out = {**out, "result": {**result, "sessions": sessions}}
    return out

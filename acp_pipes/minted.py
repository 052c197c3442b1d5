"""The values that differ between two runs of the same session, in one place.

An agent mints identifiers (session, tool-call, permission, message ids) and stamps
clocks; two runs of one session differ there and nowhere else. ``acp-replay --client``
learns the identifiers as a consistent renaming and leaves the clocks out of the
comparison; any other tool that compares runs (acp-align's clock preset) should read
these sets rather than keep its own.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CLOCK_KEYS", "MINTED_KEYS", "MINTED_KINDS", "drop_clocks", "learn", "rename"]

#: Object members whose value the agent mints, by kind (the kind names an identifier in
#: acp-align's diffs: ``session#1``). acp-align's preset takes the first five
#: (:data:`acp_pipes.align.minted.MINTED_KEYS`).
MINTED_KINDS = {
    "sessionId": "session",  # session/new, load, fork results and every sessionId after
    "toolCallId": "toolCall",
    "terminalId": "terminal",  # terminal/create results and every terminal/* after
    "messageId": "message",  # v2
    "elicitationId": "elicitation",
    "permissionId": "permission",
    "requestId": "request",
}

#: Object members whose string value the agent mints: renamed, never compared.
MINTED_KEYS = frozenset(MINTED_KINDS)

#: Object members that are clocks: left out of a comparison of two runs.
CLOCK_KEYS = frozenset({"updatedAt", "createdAt", "timestamp"})


def learn(recorded: Any, live: Any, names: dict[str, str], back: dict[str, str],
          path: str = "") -> list[str]:
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


def rename(value: Any, names: dict[str, str]) -> Any:
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


def drop_clocks(value: Any) -> Any:
    """``value`` without its clock members (pure).

    >>> drop_clocks({"update": {"updatedAt": "2026-12-02T01:30", "title": "t"}})
    {'update': {'title': 't'}}
    """
    if isinstance(value, dict):
        return {k: drop_clocks(v) for k, v in value.items() if k not in CLOCK_KEYS}
    if isinstance(value, list):
        return [drop_clocks(v) for v in value]
    return value

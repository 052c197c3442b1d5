"""Where two JSON values differ, as RFC 6901 pointers with the values on each side.

One diff for every tool that tells a person why two things are not the same: acp-replay's
miss report (a live frame against the recorded one) and acp-align's changed steps (a
step of run A against the step of run B it stands for). Both want the same answer: the
few pointers that differ and both values there, in a stable order, cut after a limit.
The values came from a peer or a recording, so
:func:`acp_pipes.protocol.jsontext.dumps` writes them as JSON whatever they hold (a lone
surrogate is valid JSON, and orjson refuses it).
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_DIFF", "escape", "pointer_diff"]

#: At most this many differences per pair of values: the first ones say enough.
MAX_DIFF = 20

def escape(segment: str) -> str:
    """One RFC 6901 pointer segment."""
    return segment.replace("~", "~0").replace("/", "~1")


def pointer_diff(
    first: Any,
    second: Any,
    limit: int = MAX_DIFF,
    names: tuple[str, str] = ("recorded", "received"),
) -> list[dict[str, Any]]:
    """The differences from ``first`` to ``second`` as ``{op, path, ...}`` entries:
    ``replace`` (both values), ``remove`` (only in ``first``), ``add`` (only in
    ``second``); the values are under ``names`` (acp-replay: recorded and received,
    acp-align: a and b). Objects in key order, arrays by index, at most ``limit``.

    >>> for d in pointer_diff({"a": [1, 2], "b": 1}, {"a": [1, 3, 4], "c": 1}):
    ...     print(d)
    {'op': 'replace', 'path': '/a/1', 'recorded': 2, 'received': 3}
    {'op': 'add', 'path': '/a/2', 'received': 4}
    {'op': 'remove', 'path': '/b', 'recorded': 1}
    {'op': 'add', 'path': '/c', 'received': 1}
    """
    out: list[dict[str, Any]] = []
    _diff(first, second, "", out, limit, names[0], names[1])
    return out


def _same(a: Any, b: Any) -> bool:
    # JSON equality: True is not 1, 1 is 1.0 (JCS reads numbers as doubles)
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b and (type(a) is type(b) or (isinstance(a, (int, float))
                                               and isinstance(b, (int, float))))


def _diff(a: Any, b: Any, path: str, out: list, limit: int, na: str, nb: str) -> None:
    # an explicit stack: values nest as deep as a recording holds, past any recursion limit
    stack = [(a, b, path)]
    while stack and len(out) < limit:
        a, b, path = stack.pop()
        if isinstance(a, dict) and isinstance(b, dict):
            later = []
            for k in a:
                p = path + "/" + escape(k)
                if k in b:
                    later.append((a[k], b[k], p))
                else:
                    later.append((_GONE, a[k], p))
            for k in b:
                if k not in a:
                    later.append((_NEW, b[k], path + "/" + escape(k)))
            stack.extend(reversed(later))
        elif isinstance(a, list) and isinstance(b, list):
            later = []
            for i in range(max(len(a), len(b))):
                p = f"{path}/{i}"
                if i >= len(b):
                    later.append((_GONE, a[i], p))
                elif i >= len(a):
                    later.append((_NEW, b[i], p))
                else:
                    later.append((a[i], b[i], p))
            stack.extend(reversed(later))
        elif a is _GONE:
            out.append({"op": "remove", "path": path, na: b})
        elif a is _NEW:
            out.append({"op": "add", "path": path, nb: b})
        elif not _same(a, b):
            if a == _SECRET or b == _SECRET:  # a secret on one side: the other's is one too
                a = b = _SECRET  # (a live answer to a password field; acp_pipes.protocol.redact)
            out.append({"op": "replace", "path": path, na: a, nb: b})


#: A secret concealed for comparison (acp_pipes.protocol.redact.PLACEHOLDER).
_SECRET = "<redacted>"


class _Side:
    """Marks a member present on one side only (a sentinel no JSON value can be)."""

    __slots__ = ()


_GONE, _NEW = _Side(), _Side()

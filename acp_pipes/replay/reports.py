"""acp-replay's report events (a miss, a difference, the loss report of an ASR replay)
as readable lines for a person: the headline, then one line per detail. Pure text; the
terminal (painting, where it goes) is the front end's (:mod:`acp_pipes.cli.reports`),
and the pytest plugin's failure messages use the same words.
"""

from __future__ import annotations

from typing import Any

from acp_pipes.io.terminal import printable
from acp_pipes.protocol.jsontext import dumps

__all__ = ["readable"]

#: What a readable line leaves out: said by the headline already.
_SAID = frozenset({"event", "tool", "message"})
_SHOWN_DIFFS = 8


def readable(event: dict[str, Any]) -> list[str]:
    """A report as lines for a person: a headline, then one line per detail.

    >>> readable({"event": "compare", "equivalent": False, "differences": 2,
    ...           "a": "a.asr.jsonl", "b": "b.asr.jsonl"})
    ['compare: a.asr.jsonl and b.asr.jsonl differ: 2 differences (on stdout)']
    """
    kind = event.get("event")
    if kind == "replay_losses":
        return _losses(event)
    if kind in ("difference", "note"):
        return _difference(event)
    if kind == "learned":
        return _learned(event)
    if kind == "compare":
        a, b = _text(event.get("a")), _text(event.get("b"))
        if event.get("equivalent"):
            return [f"compare: {a} and {b} are equivalent"]
        n = event.get("differences")
        return [f"compare: {a} and {b} differ: {n} difference{'s' if n != 1 else ''} "
                "(on stdout)"]
    head = f"{kind}: {_text(event['message'])}" if "message" in event else str(kind)
    if kind == "miss":
        head = (f"miss: client frame {_text(event.get('consumed', 0) + 1)} of "
                f"{_text(event.get('total'))} matches nothing recorded")
    lines = [head]
    for key, value in event.items():
        if key in _SAID or key == "diff" or (kind == "miss" and key in ("consumed", "total")):
            continue
        lines.append(f"{key}: {_describe(value)}")
    diff = event.get("diff")
    if isinstance(diff, list):
        lines.append("diff (recorded -> received):" if diff else "diff: none")
        lines += ["  " + _change(d) for d in diff[:_SHOWN_DIFFS]]
        if len(diff) > _SHOWN_DIFFS:
            lines.append(f"  ... {len(diff) - _SHOWN_DIFFS} more")
    return lines


#: What a difference's readable lines leave out: said by the headline or the frames.
_SHOWN = frozenset({"event", "tool", "kind", "message", "recorded", "live", "diff",
                    "pointers", "seq", "live_seq", "method", "update"})


def _difference(e: dict[str, Any]) -> list[str]:
    """A difference (or a note) of the model of the same session: what kind, the frames as
    compared (recorded and live), and where they differ.

    >>> for line in _difference({"event": "difference", "kind": "content", "seq": 7,
    ...     "live_seq": 9, "recorded": {"text": "goodbye"}, "live": {"text": "farewell"},
    ...     "diff": [{"op": "replace", "path": "/text", "recorded": "goodbye",
    ...               "received": "farewell"}], "message": "agent frame seq 7 differs"}):
    ...     print(line)
    difference (content): agent frame seq 7 differs
    recorded (seq 7): {"text":"goodbye"}
    live (seq 9): {"text":"farewell"}
    differs at (recorded -> live):
      /text: "goodbye" -> "farewell"
    """
    lines = [f"{_text(e.get('event'))} ({_text(e.get('kind'))}): {_text(e.get('message'))}"]
    if "recorded" in e and e["recorded"] is not None:
        lines.append(f"recorded (seq {_text(e.get('seq'))}): {_json(e['recorded'], 200)}")
    if "live" in e and e["live"] is not None:
        lines.append(f"live (seq {_text(e.get('live_seq'))}): {_json(e['live'], 200)}")
    diff = e.get("diff")
    if isinstance(diff, list) and diff:
        lines.append("differs at (recorded -> live):")
        lines += ["  " + _change(d) for d in diff[:_SHOWN_DIFFS]]
        if len(diff) > _SHOWN_DIFFS:
            lines.append(f"  ... {len(diff) - _SHOWN_DIFFS} more")
    for key, value in e.items():
        if key not in _SHOWN:
            lines.append(f"{_text(key).replace('_', ' ')}: {_describe(value)}")
    return lines


def _learned(e: dict[str, Any]) -> list[str]:
    """What a re-drive learned from other recordings of its script, as a person reads it."""
    lines = [f"learned: {_text(e.get('message'))}"]
    for v in e.get("values") or []:
        if isinstance(v, dict):
            shown = f" as {_json(v.get('template'))}" if v.get("as") == "text" else " ignored"
            lines.append(f"seq {_text(v.get('seq'))} ({_text(v.get('label'))}) "
                         f"{_text(v.get('path'))}{shown} (from {_text(v.get('from'))})")
    for v in e.get("frames") or []:
        if isinstance(v, dict):
            lines.append(f"seq {_text(v.get('seq'))} ({_text(v.get('label'))}) "
                         f"{_text(v.get('as'))} (from {_text(v.get('from'))})")
    return lines


def _losses(e: dict[str, Any]) -> list[str]:
    source, sid = _text(e.get("source")), _text(e.get("sessionId"))
    as_ = f" as {_text(e['replayedAs'])}" if "replayedAs" in e else ""
    head = (f"{source}: session {sid}{as_}: {_text(e.get('records'))} records replayed as "
            f"{_text(e.get('updates'))} updates")
    lines = [head]
    losses = e.get("losses")
    if isinstance(losses, dict) and losses:
        lines.append("not replayed: " + ", ".join(f"{_text(k)} {_describe(v)}"
                                                  for k, v in losses.items()))
    recording = e.get("recordingLosses")
    if isinstance(recording, list) and recording:
        lines.append("lost when recorded: " + ", ".join(_text(x) for x in recording))
    return lines


def _change(d: Any) -> str:
    if not isinstance(d, dict):
        return _describe(d)
    op, path = d.get("op"), _text(d.get("path"))
    if op == "replace":
        return f"{path}: {_json(d.get('recorded'))} -> {_json(d.get('received'))}"
    if op == "remove":
        return f"{path}: {_json(d.get('recorded'))} -> (absent)"
    if op == "add":
        return f"{path}: (absent) -> {_json(d.get('received'))}"
    return _describe(d)


def _json(value: Any, width: int = 60) -> str:
    """A value as compact JSON (a string quoted, so "1" and 1 differ), cut to ``width``."""
    try:
        text = printable(dumps(value).decode())
    except TypeError:  # no JSON value
        text = printable(repr(value))
    return text if len(text) <= width else text[: width - 1] + "…"


def _describe(value: Any, width: int = 100, top: bool = True) -> str:
    """A value on one line: a dict as ``key value`` pairs (one level: a peer's value may
    nest past any recursion limit), the rest as compact JSON."""
    if top and isinstance(value, dict):
        text = ", ".join(f"{k} {_describe(v, width, False)}" for k, v in value.items())
    elif isinstance(value, str):
        text = value
    else:
        try:
            text = dumps(value).decode()
        except TypeError:  # no JSON value
            text = repr(value)
    text = printable(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def _text(value: Any) -> str:
    return printable(value if isinstance(value, str) else str(value))

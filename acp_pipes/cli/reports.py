"""acp-replay's reports on stderr (a miss, a difference, the loss report of an ASR
replay): one JSON line each for a program, readable lines for a person at a terminal.

Which one is decided once, by the run's :class:`~acp_pipes.terminal.Terminal`
(``ctx.term.err_tty``), like everything else that adapts to a terminal. Every string
that came from a recording or a live peer goes through
:func:`~acp_pipes.terminal.printable`.
"""

from __future__ import annotations

import sys
from typing import Any

from acp_pipes.errors import say
from acp_pipes.jsondiff import dumps
from acp_pipes.terminal import Terminal, printable

__all__ = ["Reporter", "readable"]

#: Events that end a run badly, painted as errors; the others as warnings.
_STOPS = frozenset({"miss", "trace_ended", "trace_cut", "client_ended"})
#: What a readable line leaves out: said by the headline already.
_SAID = frozenset({"event", "tool", "message"})
_SHOWN_DIFFS = 8


class Reporter:
    """The callable a replay reports through. ``quiet``: hold back the loss report
    (``replay_losses``) of a run that succeeds; :meth:`release` says what was held,
    for a run that did not."""

    def __init__(self, prog: str, term: Terminal, quiet: bool = False):
        self.prog = prog
        self.term = term
        self.quiet = quiet
        self.held: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any]) -> None:
        if self.quiet and event.get("event") == "replay_losses":
            self.held.append(event)
            return
        self._say(event)

    def release(self) -> None:
        for event in self.held:
            self._say(event)
        self.held.clear()

    def _say(self, event: dict[str, Any]) -> None:
        if not self.term.err_tty:
            err = sys.stderr
            if err is None:
                return
            try:
                err.buffer.write(dumps(event) + b"\n")  # lone surrogates escaped
                err.buffer.flush()
            except (OSError, ValueError, AttributeError):
                pass
            return
        lines = readable(event)
        role = "error" if event.get("event") in _STOPS else "warning"
        say(self.term.paint_err(f"{self.prog}: {lines[0]}", role))
        for line in lines[1:]:
            say("  " + line)


def readable(event: dict[str, Any]) -> list[str]:
    """A report as lines for a person: a headline, then one line per detail.

    >>> readable({"event": "compare", "equivalent": False, "differences": 2,
    ...           "a": "a.asr.jsonl", "b": "b.asr.jsonl"})
    ['compare: a.asr.jsonl and b.asr.jsonl differ: 2 differences (on stdout)']
    """
    kind = event.get("event")
    if kind == "replay_losses":
        return _losses(event)
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

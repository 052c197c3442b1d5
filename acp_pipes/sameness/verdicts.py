"""What a comparison of two runs finds: differences (the runs are not the same session)
and notes (they are, and here is what was tolerated), each one JSON event.

A **difference** is real: the agent said something else (``content``), asked something
else (``request``), answered something else (``result``), did things in an order the
protocol fixes otherwise (``order``), left out a frame (``missing``: the turn ended, or
the run did, without it), sent one more (``extra``), named one entity by two identifiers
(``renaming``); a re-drive adds ``unanswerable`` (the agent asks what the recording has
no answer to), ``timeout`` and ``agent_exited``. A **note** is a difference the model
tolerates: a floating notification missing or extra (``floating_missing``,
``floating_extra``), a frame the agent sends only sometimes (``optional_missing``,
``optional_extra``), an order learned as noise (``learned_order``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from acp_pipes.sameness.events import Event

__all__ = ["DIFFERENCES", "NOTES", "Difference", "Note"]

#: The kinds of difference, and what each means.
DIFFERENCES = {
    "content": "the agent said something else",
    "request": "the agent asked the client something else",
    "result": "the agent answered a client request otherwise",
    "order": "a frame came before what the protocol says must come first",
    "missing": "a recorded frame never came (the turn or the run ended without it)",
    "extra": "the agent sent a frame the recording does not have",
    "renaming": "an identifier the agent minted stands for two recorded ones",
    "client": "the client sent something else (comparing two recordings)",
    "unanswerable": "the agent asked what the recording has no answer to",
    "timeout": "the agent went silent",
    "agent_exited": "the agent ended before the recorded session did",
}

#: The kinds of note.
NOTES = {
    "floating_missing": "a floating notification of the recording did not come",
    "floating_extra": "the agent sent a floating notification the recording does not have",
    "optional_missing": "a frame the agent sends only sometimes did not come",
    "optional_extra": "the agent sent a frame it sends only sometimes",
    "learned_order": "an order two recordings disagree on",
    "write_refused": "a recorded file write outside the workspace was not performed",
}


def _where(recorded: Event | None, live: Event | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if recorded is not None:
        out["seq"] = recorded.seq
    if live is not None:
        out["live_seq"] = live.seq
    ev = recorded or live
    if ev is not None:
        out["method"] = ev.method
        if ev.update is not None:
            out["update"] = ev.update
    return out


@dataclass
class Difference:
    """A real difference. ``recorded`` and ``live``: the frames as compared (views);
    ``diff``: the JSON pointers that differ (:func:`acp_pipes.sameness.jsondiff.pointer_diff`)."""

    kind: str
    message: str
    recorded_event: Event | None = None
    live_event: Event | None = None
    recorded: Any = None
    live: Any = None
    diff: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # more fields of the event
    #: the recorded frame (a matcher's slot) the live frame stands for, when there is one
    slot: Any = None
    #: more recorded frames it concerns (a turn ended without several)
    related: list[Event] = field(default_factory=list)

    @property
    def pointers(self) -> list[str]:
        return [d["path"] or "/" for d in self.diff]

    def to_event(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": "difference", "kind": self.kind,
                               **_where(self.recorded_event, self.live_event)}
        if self.recorded is not None or self.recorded_event is not None:
            out["recorded"] = self.recorded
        if self.live is not None or self.live_event is not None:
            out["live"] = self.live
        if self.diff:
            out["pointers"] = self.pointers
            out["diff"] = self.diff
        out.update(self.extra)
        out["message"] = self.message
        return out


@dataclass
class Note:
    """A tolerated difference: what it was, and why it is not one."""

    kind: str
    message: str
    recorded_event: Event | None = None
    live_event: Event | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_event(self) -> dict[str, Any]:
        return {"event": "note", "kind": self.kind,
                **_where(self.recorded_event, self.live_event), **self.extra,
                "message": self.message}

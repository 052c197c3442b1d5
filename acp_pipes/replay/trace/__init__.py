"""Trace replay: a recorded session (a wire log or frames) played back byte for byte to a
live peer.

- :mod:`acp_pipes.replay.trace.tracefile`: a trace read frame by frame as a replay goes
  (:func:`open_trace`) or whole (:func:`load_trace`), and offline emit of one direction
  (:func:`emit`).
- :mod:`acp_pipes.replay.trace.agent`: a trace replayed as the agent to a live client
  (:func:`replay_agent`).
- :mod:`acp_pipes.replay.trace.client`: a trace replayed as the client to a live agent
  (:func:`drive_agent`), writing a new wire log of the run.
- :mod:`acp_pipes.replay.trace.options`: how either replays (:class:`ReplayOptions`).
- :mod:`acp_pipes.replay.trace.ids`: JSON-RPC id splicing on raw bytes (``--remap-ids``).
- :mod:`acp_pipes.replay.trace.report`: JSON-pointer diffs for miss reports.

The replay of an ASR stream is another thing: :mod:`acp_pipes.replay.asr`. The names below are
imported on first use (PEP 562), so importing one engine does not load the other.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> the module that defines it
_HOME = {
    "DriveResult": "client",
    "drive_agent": "client",
    "ReplayOptions": "options",
    "ReplayResult": "agent",
    "Trace": "tracefile",
    "TraceReader": "tracefile",
    "emit": "tracefile",
    "load_trace": "tracefile",
    "open_trace": "tracefile",
    "replay_agent": "agent",
}

__all__ = [*_HOME]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))

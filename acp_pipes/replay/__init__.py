"""Replay: a recorded session played back to a live peer, byte for byte.

- :mod:`acp_pipes.replay.trace`: a trace (wire log or frames) replayed as the agent to a
  live client (:func:`replay_agent`), and offline emit of one direction (:func:`emit`).
- :mod:`acp_pipes.replay.client`: a trace replayed as the client to a live agent
  (:func:`drive_agent`), writing a new wire log of the run.
- :mod:`acp_pipes.replay.ids`: JSON-RPC id splicing on raw bytes (``--remap-ids``).
- :mod:`acp_pipes.replay.report`: JSON-pointer diffs for miss reports.
"""

from acp_pipes.replay.client import DriveResult, drive_agent
from acp_pipes.replay.trace import (
    ReplayOptions,
    ReplayResult,
    Trace,
    emit,
    load_trace,
    raw_lines,
    replay_agent,
)

__all__ = [
    "DriveResult",
    "drive_agent",
    "ReplayOptions",
    "ReplayResult",
    "Trace",
    "emit",
    "load_trace",
    "replay_agent",
    "raw_lines",
]

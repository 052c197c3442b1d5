"""Trace replay: a recorded session (a wire log or frames) played back byte for byte to a
live peer.

- :mod:`acp_pipes.replay.trace.tracefile`: a trace read frame by frame as a replay goes
  (:func:`open_trace`) or whole (:func:`load_trace`), and offline emit of one direction
  (:func:`emit`).
- :mod:`acp_pipes.replay.trace.agent`: a trace replayed as the agent to a live client
  (:func:`replay_agent`).
- :mod:`acp_pipes.replay.trace.client`: a trace replayed as the client to a live agent
  (:func:`drive_agent`), writing a new wire log of the run; its parts: the recording
  read ahead (:mod:`~acp_pipes.replay.trace.recording`), the agent's pipes and the run's
  log (:mod:`~acp_pipes.replay.trace.pipes`), how long a silence may last
  (:mod:`~acp_pipes.replay.trace.patience`), what goes in the client's place
  (:mod:`~acp_pipes.replay.trace.answers`, :mod:`~acp_pipes.replay.trace.workspace`),
  the agent's process (:mod:`~acp_pipes.replay.trace.spawn`).
- :mod:`acp_pipes.replay.trace.options`: how either replays (:class:`ReplayOptions`).
- :mod:`acp_pipes.replay.trace.ids`: JSON-RPC id splicing on raw bytes (``--remap-ids``).
- :mod:`acp_pipes.replay.trace.report`: JSON-pointer diffs for miss reports.

The replay of an ASR stream is another thing: :mod:`acp_pipes.replay.asr`. The names below are
imported on first use (:mod:`acp_pipes.lazy`), so importing one engine does not load the
other.
"""

from __future__ import annotations

from acp_pipes.lazy import lazy_names

#: public name -> the module that defines it
_HOME = {
    "DriveResult": "report",
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

__getattr__, __dir__ = lazy_names(__name__, _HOME)

"""Replay: a recorded session played back to a live peer, byte for byte.

- :mod:`acp_pipes.replay.tracefile`: a trace (wire log or frames) loaded and indexed
  (:func:`load_trace`), and offline emit of one direction (:func:`emit`).
- :mod:`acp_pipes.replay.trace`: a trace replayed as the agent to a live client
  (:func:`replay_agent`); its names above are importable from it too.
- :mod:`acp_pipes.replay.client`: a trace replayed as the client to a live agent
  (:func:`drive_agent`), writing a new wire log of the run.
- :mod:`acp_pipes.replay.asr`: an ASR stream replayed as ``session/update``
  notifications.
- :mod:`acp_pipes.replay.ids`: JSON-RPC id splicing on raw bytes (``--remap-ids``).
- :mod:`acp_pipes.replay.report`: JSON-pointer diffs for miss reports.

The names below are imported on first use (PEP 562): an ASR replay does not pay for
loading the trace engines.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

from acp_pipes.jsonl import READ_ERRORS, STDIN, InputError, display_name, open_source

#: public name -> the module that defines it
_HOME = {
    "DriveResult": "client",
    "drive_agent": "client",
    "ReplayOptions": "trace",
    "ReplayResult": "trace",
    "Trace": "tracefile",
    "emit": "tracefile",
    "load_trace": "tracefile",
    "replay_agent": "trace",
}

__all__ = [*_HOME, "raw_lines"]


def raw_lines(path: str) -> Iterator[bytes]:
    """The lines of a trace file as bytes (with their LF), ``-`` and ``.gz`` handled
    (:func:`acp_pipes.jsonl.open_source`); the file is closed when the iterator ends."""
    stream = open_source(path)
    try:
        yield from stream
    except READ_ERRORS as e:
        raise InputError(display_name(path), 0, f"cannot read: {e}") from None
    finally:
        if path != STDIN:
            stream.close()


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))

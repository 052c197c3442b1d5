"""The model of "the same session": when two runs of an ACP session are the same, written
once and used by every tool that compares sessions (``acp-replay --client``, the pytest
plugin, ``acp-align``). The reasoning is in docs/sameness.md.

- :mod:`~acp_pipes.sameness.events`: what a frame is to the model (:class:`Event`: kind,
  method, session, update kind, the entity it belongs to, whether it floats).
- :mod:`~acp_pipes.sameness.floating`: the notifications the protocol lets float, each
  with where ACP says so.
- :mod:`~acp_pipes.sameness.order`: happens-before, built frame by frame
  (:class:`Order`).
- :mod:`~acp_pipes.sameness.volatile`: volatile values: minted identifiers and clocks
  (:mod:`~acp_pipes.sameness.minted`), the vendor presets (``presets.json``,
  ``--preset FILE``) with their scrubbers, and the :class:`View` a frame is compared as.
- :mod:`~acp_pipes.sameness.noise`: noise learned from other recordings of one script
  (:func:`learn_noise`, in :mod:`~acp_pipes.sameness.runs`).
- :mod:`~acp_pipes.sameness.match`: a run matched online against a recording as a
  partial order (:class:`Matcher`), its recorded frames held as
  :mod:`~acp_pipes.sameness.slots`, what a frame that is not the same is named in
  :mod:`~acp_pipes.sameness.mismatch`, ``--strict-order``'s sequence in
  :mod:`~acp_pipes.sameness.strict`; :mod:`~acp_pipes.sameness.runs`: two finished
  recordings compared (:func:`compare_runs`).
- :mod:`~acp_pipes.sameness.verdicts`: what a comparison finds: a :class:`Difference`
  (real) or a :class:`Note` (tolerated), each one JSON event.

Pure: no I/O but preset files (the package's own, and ``--preset`` files:
:func:`~acp_pipes.sameness.volatile.presets_of`); nothing here imports a tool. The names
below are imported on first use (:mod:`acp_pipes.lazy`), so a re-drive that matches
every frame by its bytes loads none of the matching.
"""

from __future__ import annotations

from acp_pipes.lazy import lazy_names

#: public name -> the module that defines it
_HOME = {
    "Event": "events",
    "describe": "events",
    "FLOATING": "floating",
    "FLOATING_METHODS": "floating",
    "Order": "order",
    "OPENS_TURN": "order",
    "Preset": "volatile",
    "Rules": "volatile",
    "Scrubber": "volatile",
    "View": "volatile",
    "agent_name": "volatile",
    "default_presets": "volatile",
    "load_presets": "volatile",
    "rules_for": "volatile",
    "Noise": "noise",
    "Template": "noise",
    "learn_noise": "runs",
    "Matched": "slots",
    "Matcher": "match",
    "Comparison": "runs",
    "compare_runs": "runs",
    "session_cwd": "runs",
    "DIFFERENCES": "verdicts",
    "NOTES": "verdicts",
    "Difference": "verdicts",
    "Note": "verdicts",
}

__all__ = [*_HOME]

__getattr__, __dir__ = lazy_names(__name__, _HOME)

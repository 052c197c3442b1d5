"""What the default comparison of two traces leaves out of a frame (:class:`Volatile`):
the model of the same session's view (minted identifiers masked, the protocol's clocks,
the presets that apply to either run's agent, ``--ignore``) and which steps float. The
reading of a trace (:mod:`acp_pipes.align.steps`) asks it for each step's key; the
comparison (:mod:`acp_pipes.align.session`) for the rules it runs under.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from acp_pipes.align.minted import Found, mask
from acp_pipes.align.table import StepTable
from acp_pipes.protocol.canonical import CanonicalError, canonical_hash, parse_json
from acp_pipes.sameness.floating import FLOATING, FLOATING_METHODS
from acp_pipes.sameness.volatile import Preset, Rules, View

__all__ = ["Volatile", "frame_kind"]


class Volatile:
    """What the default comparison leaves out of a frame, for two runs: every preset of
    ``presets`` whose ``agent`` matches either run's agent (:meth:`decide`, once both
    runs are read), and the user's ``--ignore`` pointers. One object for both runs, so a
    value volatile for either agent is left out of both."""

    def __init__(self, presets: Sequence[Preset] = (), ignore: Sequence[str] = ()):
        self.presets = list(presets)
        self.ignore = tuple(ignore)
        self.agents: list[str | None] = []
        self.decide([])

    def decide(self, agents: Iterable[str | None]) -> None:
        """The rules for runs of these agents (None: a run that names none)."""
        self.agents = list(agents)
        named = [a for a in self.agents if a is not None]
        self.rules = Rules([p for p in self.presets
                            if p.agent == "*" or any(p.applies(a) for a in named)],
                           self.ignore)
        self.view = View(self.rules)
        self.floating_kinds = frozenset(FLOATING) | self.rules.floating

    def classify(self, table: StepTable) -> None:
        """Mark the steps that float (:attr:`StepTable.floating`): an agent's
        ``session/update`` of a kind that floats (the reading kept each one's kind:
        :attr:`StepTable.updates`), an agent notification of a method that does
        (:attr:`StepTable.notified`)."""
        kinds = self.floating_kinds
        table.floating = {step: kind for step, kind in table.updates.items() if kind in kinds}
        for step, method in table.notified.items():
            if method in FLOATING_METHODS:
                table.floating[step] = method

    def optional(self, table: StepTable, step: int) -> str | None:
        """Why a step is one its agent sends only sometimes (a preset says so), or None."""
        if not self.rules.has_optional:
            return None
        _, _, method = table.meta[step]
        return self.rules.optional(method, table.updates.get(step))

    def key(self, raw: bytes | str, d: str | None, kind: str | None
            ) -> tuple[str | None, Found]:
        """A frame's identity as compared (the canonical hash of what the view leaves of
        it, its identifiers masked) and its identifiers; None for a frame that is not
        JSON or has no JCS form (it keeps its own hash)."""
        try:
            value = parse_json(raw)
        except ValueError:
            return None, ()
        try:
            masked, found = mask(value, d, kind, raw=raw if raw.__class__ is str else None)
            return canonical_hash(self.view.live(masked, False)), found
        except (CanonicalError, RecursionError):
            return None, ()

    def shown(self, value: Any, d: str | None, kind: str | None, name: Any) -> Any:
        """What a frame is shown as in a changed step's differences: as compared, with
        each identifier named by ``name(kind, value)``."""
        named, _ = mask(value, d, kind, name)
        return self.view.live(named, False)

    def summary(self) -> dict[str, Any]:
        """The rules a comparison ran under, for the JSON summary."""
        return {"agents": self.agents,
                "presets": [{"agent": p.agent, "from": p.source} for p in self.rules.presets],
                "ignore": list(self.rules.pointers),
                "scrub": [s.to_json() for s in self.rules.scrubbers],
                "floating": sorted(self.floating_kinds | set(FLOATING_METHODS))}


def frame_kind(msg: Any) -> str | None:
    """A parsed JSON-RPC message's frame kind (as :mod:`acp_pipes.frame` names them)."""
    if not isinstance(msg, dict):
        return None
    if "method" in msg:
        return "request" if "id" in msg else "notification"
    return "error" if "error" in msg else "response"

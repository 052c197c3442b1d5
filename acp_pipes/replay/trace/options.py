"""How a trace is replayed (:class:`ReplayOptions`), shared by both trace replays, in a
module of its own: ``acp-replay --client`` builds its options without loading the
replay-as-agent engine (:mod:`acp_pipes.replay.trace.agent`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from acp_pipes.normalize import Normalizer

__all__ = ["Report", "ReplayOptions"]

Report = Callable[[dict[str, Any]], None]


@dataclass
class ReplayOptions:
    """How to replay; the defaults replay byte-exact, in order, as fast as possible."""

    match: str = "order"  # "order" | "any"
    pace: str = "fast"  # "fast" | "recorded"
    ignore: Sequence[str] = ()  # --ignore JSON pointers (acp_pipes.normalize)
    remap_ids: bool = False
    remap_log: BinaryIO | None = None  # JSONL: recorded id, live id, dir, seq
    report: Report | None = None  # one dict per diagnostic (the CLI prints JSON lines)
    timeout: float = 10.0  # --client: how long to wait for the agent's frames
    strict: bool = False  # --client: stop at the first difference (exit 1)
    sleep: Callable[[float], None] = time.sleep

    def normalizer(self) -> Normalizer:
        from acp_pipes.normalize import Normalizer

        return Normalizer.from_pointers(list(self.ignore))

"""How a trace is replayed (:class:`ReplayOptions`), shared by both trace replays, in a
module of its own: ``acp-replay --client`` builds its options without loading the
replay-as-agent engine (:mod:`acp_pipes.replay.trace.agent`). The CLI builds them once,
from its arguments, and hands this one value down: nothing below it reads an argument."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from acp_pipes.errors import Warn
    from acp_pipes.sameness.noise import Noise
    from acp_pipes.sameness.normalize import Normalizer
    from acp_pipes.sameness.volatile import Preset, Rules

__all__ = ["GRACE", "Report", "ReplayOptions"]

Report = Callable[[dict[str, Any]], None]

#: --client: how long the agent has, once the recording is done, to send the floating
#: notifications still due and, its input closed, to exit before its process group is
#: ended (a re-drive costs the agent's own time, not a timeout's).
GRACE = 0.5


@dataclass
class ReplayOptions:
    """How to replay; the defaults replay byte-exact, in order, as fast as possible
    (as the agent), or by the model of the same session (``--client``)."""

    match: str = "order"  # "order" | "any"
    pace: str = "fast"  # "fast" | "recorded"
    ignore: Sequence[str] = ()  # --ignore JSON pointers (acp_pipes.sameness.normalize)
    remap_ids: bool = False
    remap_log: BinaryIO | None = None  # JSONL: recorded id, live id, dir, seq
    report: Report | None = None  # one dict per diagnostic (the CLI prints JSON lines)
    timeout: float = 10.0  # --client: how long to wait for the agent's frames
    strict: bool = False  # --client: stop at the first difference (the default)
    sleep: Callable[[float], None] = time.sleep
    # --client, the model of the same session (acp_pipes.sameness)
    strict_order: bool = False  # every agent frame in recorded order (no floating)
    keep_going: bool = False  # list every difference to the end
    workspace: str | None = None  # perform the recorded client's writes under it
    presets: list[Preset] | None = None  # None: the package's (volatile values)
    noise: Noise | None = None  # learned from other recordings of the script
    grace: float = GRACE
    # --client, the run's wire log
    clock: str = "system"  # receipt times (acp_pipes.io.wire.make_clock): system|epoch|nanos:N
    host: bool = True  # host os/arch/cwd/pid in the log's header
    _tick: Callable[[], int] | None = field(default=None, init=False, repr=False,
                                             compare=False)

    def tick(self) -> Callable[[], int]:
        """The run's clock, made from :attr:`clock` once (an OptionError for a value it
        does not take: asked before the agent starts, it refuses the run there)."""
        if self._tick is None:
            from acp_pipes.io.wire import make_clock

            self._tick = make_clock(self.clock)
        return self._tick

    def learn_noise(self, path: str, others: Sequence[str], session: str | None,
                    warn: Warn) -> dict[str, Any]:
        """``--noise TRACE``: what differs between the recording at ``path`` and each of
        ``others`` (:func:`acp_pipes.sameness.runs.learn_noise`), learned into
        :attr:`noise` (``session``: of that session alone); returns what was learned,
        as a report event."""
        from acp_pipes.io.lines import display_name
        from acp_pipes.replay.trace.tracefile import Pair, open_trace
        from acp_pipes.sameness.runs import learn_noise

        def frames(p: str) -> list[Pair]:
            trace = open_trace(p, warn=warn)
            trace.session = session
            return list(trace)

        primary = frames(path)
        self.noise = learn_noise(primary, [(display_name(p), frames(p)) for p in others],
                                 rules_for=self.rules_for)
        return self.noise.summary()

    def normalizer(self) -> Normalizer:
        from acp_pipes.sameness.normalize import Normalizer

        return Normalizer.from_pointers(list(self.ignore))

    def rules_for(self, name: str | None) -> Rules:
        """The volatile rules for the agent ``name`` (its ``agentInfo.name``)."""
        from acp_pipes.sameness.volatile import default_presets, rules_for

        if self.presets is None:
            self.presets = default_presets()
        return rules_for(name, self.presets, self.ignore)

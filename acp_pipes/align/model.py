"""acp-align's default comparison of two traces, by the model of the same session.

The model (:mod:`acp_pipes.sameness`, docs/sameness.md) says when two runs of a session
are the same; acp-align shows where they part. What it takes from the model, and where:

- **volatile values** (:class:`Volatile`): minted identifiers compared as a renaming
  (:mod:`acp_pipes.align.minted`), the protocol's clocks, and the vendor presets that
  apply to either run's agent (its ``initialize`` answer names it) with their pointers
  and scrubbers, ``--preset FILE``, ``--ignore``: the model's :class:`View`, through
  which every frame the runs do not share is compared;
- **floating notifications** (:data:`acp_pipes.sameness.floating.FLOATING`, and what a
  preset adds): matched within a window of client steps, not in the order of the turn
  (:func:`acp_pipes.align.compare.compare`); one missing or extra is a note;
- **frames an agent sends only sometimes** (a preset's ``optional``, learned noise): a
  note when one run lacks them;
- **learned noise** (:class:`Learned`): what differs between run A and other
  recordings of its script is tolerated at the frame of A where it was found;
- **happens-before** (:func:`happens_before`): the order every format prints the steps
  in respects both runs' (an answer after the request it answers);
- **the verdicts' words**: each difference has the model's kind (:func:`kind_of`),
  each note its kind (:data:`acp_pipes.sameness.verdicts.NOTES`).

Nothing here reads a file but the inputs' lines a caller asks for, and the model's own
preset file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from acp_pipes.align.minted import Found, mask
from acp_pipes.align.table import REPLIES, StepTable
from acp_pipes.errors import Warn
from acp_pipes.protocol.canonical import CanonicalError, canonical_hash, parse_json
from acp_pipes.sameness.floating import FLOATING, FLOATING_METHODS
from acp_pipes.sameness.volatile import Preset, Rules, View, agent_name

if TYPE_CHECKING:
    from acp_pipes.align.steps import Steps
    from acp_pipes.sameness.noise import Noise

__all__ = ["Learned", "Volatile", "agent_name", "happens_before", "kind_of", "learn",
           "viewed_seqs"]

#: The window of a floating notification, in client steps on each side of where it was
#: recorded: the model's (:data:`acp_pipes.sameness.slots.WINDOW`), not imported so a
#: comparison does not load the online matcher.
WINDOW = 1


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


def viewed_seqs(runs: Sequence[Steps], table: StepTable) -> list[list[int]]:
    """Each run's steps as the model sees them (identifiers masked, clocks, presets): a
    small int per view, the same in every run (for the divergence tree of three or more
    runs, which compares positions, not chains)."""
    vol = _model_of(runs[0])
    vol.decide([r.agent for r in runs])
    ids: dict[Any, int] = {}
    out = []
    for r in runs:
        masked = r.keys(range(len(r.seq)), table)
        seq = []
        for step in r.seq:
            h = masked[step][0]
            key = h if h is not None else ("own", step)
            got = ids.get(key)
            if got is None:
                got = ids[key] = len(ids)
            seq.append(got)
        out.append(seq)
    return out


def _model_of(steps: Steps) -> Volatile:
    """The model a trace was read by (a caller's error to ask of one read without)."""
    if steps.model is None:
        raise ValueError(f"{steps.source}: not read by the model (--strict, or an ASR stream)")
    return steps.model


def frame_kind(msg: Any) -> str | None:
    """A parsed JSON-RPC message's frame kind (as :mod:`acp_pipes.frame` names them)."""
    if not isinstance(msg, dict):
        return None
    if "method" in msg:
        return "request" if "id" in msg else "notification"
    return "error" if "error" in msg else "response"


def kind_of(table: StepTable, step: int, one_side: str) -> str:
    """The model's kind of a difference at a step (:data:`acp_pipes.sameness.DIFFERENCES`):
    a client frame is ``client``; an agent's frame only one run has is ``missing`` (in
    A) or ``extra`` (in B) as ``one_side`` says (``"a"``, ``"b"``, or empty: both runs
    have one, and it says something else: ``request``, ``result`` or ``content``)."""
    d, kind, _ = table.meta[step]
    if d == "c2a":
        return "client"
    if one_side:
        return "missing" if one_side == "a" else "extra"
    if kind == "request":
        return "request"
    if kind in REPLIES:
        return "result"
    return "content"


class Learned:
    """Noise learned from other recordings of run A's script (:func:`learn_noise`),
    applied at the steps of A where it was found: a changed step of A whose values
    differ only as learned is equal; a step of A another recording lacks is sent only
    sometimes; a step only B has that another recording has is an allowed extra."""

    def __init__(self, noise: Noise, frames: list[tuple[dict[str, Any], bytes]]):
        self.noise = noise
        #: A's frame index (the noise's) by the frame's line in A
        self.index_of_seq = {rec.get("seq"): i for i, (rec, _) in enumerate(frames)}

    def summary(self) -> dict[str, Any]:
        return self.noise.summary()


def learn(path: str, others: Sequence[tuple[str, str]], volatile: Volatile,
          warn: Warn | None = None) -> Learned:
    """What differs between the trace ``path`` (run A) and each of ``others`` (``(name,
    path)``), by the model, under ``volatile``'s rules."""
    from acp_pipes.replay.trace import open_trace
    from acp_pipes.sameness.runs import learn_noise

    def frames(p: str) -> list[tuple[dict[str, Any], bytes]]:
        return list(open_trace(p, warn=warn))

    primary = frames(path)
    rules = volatile.rules
    noise = learn_noise(primary, [(name, frames(p)) for name, p in others],
                        rules_for=lambda _name: rules)
    return Learned(noise, primary)


def happens_before(steps: Steps) -> list[list[int]]:
    """Each step's predecessors in its run's happens-before
    (:class:`acp_pipes.sameness.order.Order`), by step index: the steps read back and
    described in their (causal) order. Costs a parse of every frame of the run: asked
    only when the order the steps are printed in might break it."""
    from acp_pipes.sameness.events import describe
    from acp_pipes.sameness.order import Order

    raws: dict[int, bytes] = {}
    for got, raw in steps.read(range(len(steps.seq))):
        for i in got:
            raws[i] = raw
    order = Order()
    out: list[list[int]] = []
    for i in range(len(steps.seq)):
        d, raw = _frame_of(raws.get(i, b""), steps)
        if d is None:
            out.append([])
            continue
        out.append(order.add(describe(i, d, raw)))
    return out


def _frame_of(line: bytes, steps: Steps) -> tuple[str | None, bytes]:
    """The direction and bytes of a step's frame from its input line."""
    import orjson

    from acp_pipes.io.wire import decode_raw

    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None, b""
    if isinstance(rec, dict) and rec.get("dir") in ("c2a", "a2c"):
        try:
            raw = decode_raw(rec)
        except (ValueError, TypeError):
            return None, b""
        return rec["dir"], raw if isinstance(raw, bytes) else raw.encode()
    if steps.direction is not None:  # a bare stream
        return steps.direction, line
    return None, b""

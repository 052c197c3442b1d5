"""acp-align's default comparison of two traces, by the model of the same session.

The model (:mod:`acp_pipes.sameness`, docs/sameness.md) says when two runs of a session
are the same; acp-align shows where they part. What it takes from the model, and where:

- **volatile values** (:class:`~acp_pipes.align.volatile.Volatile`): minted identifiers
  compared as a renaming (:mod:`acp_pipes.align.minted`), the protocol's clocks, and the
  vendor presets that apply to either run's agent (its ``initialize`` answer names it)
  with their pointers and scrubbers, ``--preset FILE``, ``--ignore``: the model's
  :class:`View`, through which every frame the runs do not share is compared;
- **floating notifications** (:data:`acp_pipes.sameness.floating.FLOATING`, and what a
  preset adds): matched within a window of client steps, not in the order of the turn
  (:mod:`acp_pipes.align.floats`); one missing or extra is a note;
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

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from acp_pipes.align.steps import Steps
from acp_pipes.align.table import REPLIES, StepTable
from acp_pipes.align.volatile import Volatile

if TYPE_CHECKING:
    from acp_pipes.sameness.noise import Noise

__all__ = ["Learned", "frame_of", "happens_before", "kind_of", "learn", "model_of",
           "viewed_seqs"]

#: The window of a floating notification, in client steps on each side of where it was
#: recorded: the model's (:data:`acp_pipes.sameness.slots.WINDOW`), not imported so a
#: comparison does not load the online matcher.
WINDOW = 1


def viewed_seqs(runs: Sequence[Steps], table: StepTable) -> list[list[int]]:
    """Each run's steps as the model sees them (identifiers masked, clocks, presets): a
    small int per view, the same in every run (for the divergence tree of three or more
    runs, which compares positions, not chains)."""
    vol = model_of(runs[0])
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


def model_of(steps: Steps) -> Volatile:
    """The model a trace was read by (a caller's error to ask of one read without)."""
    if steps.model is None:
        raise ValueError(f"{steps.source}: not read by the model (--strict, or an ASR stream)")
    return steps.model


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


Frames = list[tuple[dict[str, Any], bytes]]


def learn(primary: Frames, others: Sequence[tuple[str, Frames]], volatile: Volatile
          ) -> Learned:
    """What differs between the frames of run A and each of ``others`` (``(name,
    frames)``), by the model, under ``volatile``'s rules. The frames are read by the
    caller (a trace's reader is the replay's, a floor above this one)."""
    from acp_pipes.sameness.runs import learn_noise

    rules = volatile.rules
    noise = learn_noise(primary, list(others), rules_for=lambda _name: rules)
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
        d, raw = frame_of(raws.get(i, b""), steps)
        if d is None:
            out.append([])
            continue
        out.append(order.add(describe(i, d, raw)))
    return out


def frame_of(line: bytes, steps: Steps) -> tuple[str | None, bytes]:
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

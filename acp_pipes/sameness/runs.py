"""Two finished recordings compared by the model (:func:`compare_runs`): what acp-align
asks, and what the noise between recordings of one script is learned from
(:func:`learn_noise`, into :class:`acp_pipes.sameness.noise.Noise`).

Run B is matched against run A as a re-drive matches a live agent against its
recording (:class:`acp_pipes.sameness.match.Matcher`, going on after each difference),
with B's frames taken in B's order: B's agent frames as the live frames, B's client
steps against A's in order (the client's own order, which both runs share when they
ran one script), B's answers to the agent's requests against A's answers to the
requests they were matched with. Each session's working directory in A stands for the
one in B (two recordings made in two directories differ in every path).
"""

from __future__ import annotations

from collections import ChainMap, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from acp_pipes.sameness.events import A2C, C2A, describe
from acp_pipes.sameness.jsondiff import MAX_DIFF, pointer_diff
from acp_pipes.sameness.match import Matcher
from acp_pipes.sameness.minted import learn
from acp_pipes.sameness.noise import Noise
from acp_pipes.sameness.slots import Matched, Slot
from acp_pipes.sameness.verdicts import Difference, Note
from acp_pipes.sameness.volatile import Rules, View

__all__ = ["Comparison", "compare_runs", "learn_noise", "session_cwd"]

Pair = tuple[dict[str, Any], bytes]


@dataclass
class Comparison:
    """Run B against run A. ``pairs``: ``(index in A, index in B, diff)`` for every
    frame of one matched with a frame of the other (``diff`` empty: the same under the
    view; else the pointers that differ); ``only_a`` and ``only_b``: the indices (each
    run's frames counted in its order, both directions) of frames the other run does
    not have; ``differences`` and ``notes`` as a re-drive reports them;
    ``renamed``: the minted identifiers, A's -> B's."""

    pairs: list[tuple[int, int, list[dict[str, Any]]]] = field(default_factory=list)
    only_a: list[int] = field(default_factory=list)
    only_b: list[int] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)

    @property
    def same(self) -> bool:
        return not self.differences


def session_cwd(pairs: Iterable[Pair]) -> str | None:
    """The working directory the client gave the run's first session (``session/new``,
    ``load``, ``resume``, ``fork``), None when it names none."""
    import orjson

    for rec, raw in pairs:
        if rec.get("dir") == C2A and b'"cwd"' in raw:
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            params = value.get("params") if isinstance(value, dict) else None
            if isinstance(params, dict) and str(value.get("method", "")).startswith(
                    "session/") and isinstance(params.get("cwd"), str):
                return params["cwd"]
    return None


def compare_runs(a: Iterable[Pair], b: Iterable[Pair], *, rules: Rules | None = None,
                 rules_for: Callable[[str | None], Rules] | None = None,
                 noise: Any = None) -> Comparison:
    """Run B compared with run A by the model (see the module). ``rules``: the volatile
    rules (``rules_for``: chosen by the agent's name instead, as a re-drive does);
    ``noise``: what to tolerate beyond them."""
    a, b = list(a), list(b)
    paths = {}
    ca, cb = session_cwd(a), session_cwd(b)
    if ca is not None and cb is not None and ca != cb:
        paths[ca] = cb
    m = Matcher(View(rules, paths), rules_for=rules_for, noise=noise, keep_going=True)
    return _Walk(m, a, b).run()


class _Walk:
    """B's frames taken in B's order against the matcher loaded with A."""

    def __init__(self, m: Matcher, a: list[Pair], b: list[Pair]):
        self.m, self.a, self.b = m, a, b
        self.out = Comparison()
        self.steps: deque[Slot] = deque()  # A's client steps, in order
        self.answers: dict[Any, deque[Slot]] = {}  # A's answers by A's request id
        for rec, raw in a:
            slot = m.admit(rec, raw)
            if slot.dir == C2A:
                ev = slot.event()
                if ev.is_answer:
                    self.answers.setdefault(ev.key, deque()).append(slot)
                else:
                    self.steps.append(slot)
        self.paired_a: set[int] = set()
        self.paired_b: set[int] = set()
        self.live_at: dict[int, int] = {}  # the matcher's live index -> B's index
        self.asked: dict[Any, Slot] = {}  # B's request id -> A's request slot

    def pair(self, i: int, j: int, diff: list[dict[str, Any]]) -> None:
        self.out.pairs.append((i, j, diff))
        self.paired_a.add(i)
        self.paired_b.add(j)

    def verdicts(self, found: Iterable[Difference | Note | Matched]) -> None:
        out = self.out
        for v in found:
            if isinstance(v, Note):
                out.notes.append(v)
                continue
            slot = v.slot
            live = v.live if isinstance(v, Matched) else v.live_event
            if slot is not None and live is not None and live.index in self.live_at:
                j = self.live_at[live.index]
                self.pair(slot.index, j, [] if isinstance(v, Matched) else v.diff)
                if slot.event().kind == "request":
                    self.asked[live.key] = slot
            if isinstance(v, Matched):
                out.notes.extend(v.notes)
            else:
                out.differences.append(v)

    def client(self, j: int, rec: dict[str, Any], raw: bytes) -> None:
        m, out = self.m, self.out
        ev = describe(j, C2A, raw, seq=rec.get("seq"))
        if ev.is_answer:
            req = self.asked.get(ev.key)
            queue = self.answers.get(req.event().key) if req is not None else None
            mine = queue.popleft() if queue else None
        else:
            mine = self.steps.popleft() if self.steps else None
        if mine is None:
            out.differences.append(Difference(
                "client", f"client frame seq {ev.seq} ({ev.label}) is not in run A",
                None, ev, None, ev.value))
            return
        diff = _client_diff(m, mine, ev)
        self.pair(mine.index, j, diff)
        if diff:
            mev = mine.event()
            out.differences.append(Difference(
                "client", f"client frame seq {ev.seq} ({ev.label}) differs from run A's "
                f"seq {mev.seq} at {', '.join(d['path'] or '/' for d in diff)}",
                mev, ev, None, None, diff))
        self.verdicts(m.sent(mine))

    def run(self) -> Comparison:
        m, out = self.m, self.out
        for j, (rec, raw) in enumerate(self.b):
            if rec.get("dir") == C2A:
                self.client(j, rec, raw)
                continue
            slot = m.fast(raw)
            if slot is not None:
                self.pair(slot.index, j, [])
                ev = slot.event()
                if ev.kind == "request":
                    self.asked[ev.key] = slot
                continue
            self.live_at[m.live_n] = j
            got = m.live(raw, rec.get("seq"))
            if got is not None:
                self.verdicts([got])
        for slot in self.steps:
            ev = slot.event()
            out.differences.append(Difference(
                "client", f"run A's client frame seq {ev.seq} ({ev.label}) is not in run B",
                ev, None, None, None))
            self.verdicts(m.sent(slot))
        self.verdicts(m.finish())
        out.only_a = [i for i, (rec, _) in enumerate(self.a)
                      if i not in self.paired_a and rec.get("dir") == A2C]
        out.only_b = [j for j, (rec, _) in enumerate(self.b)
                      if j not in self.paired_b and rec.get("dir") == A2C]
        out.renamed = dict(m.names)
        return out


def _client_diff(m: Matcher, slot: Slot, ev: Any) -> list[dict[str, Any]]:
    """A client frame of B against A's, under the renaming (learned from it too: a
    client names the session it was given)."""
    rec = slot.event()
    names, back = ChainMap({}, m.names), ChainMap({}, m.back)
    if not learn(rec.value, ev.value, names, back):
        m.commit((names.maps[0], back.maps[0]))
    answer = ev.is_answer  # (its id is the agent request's: the agent's to mint)
    r = m.view.recorded(rec.value, m.names, answer)
    x = m.view.live(ev.value, answer)
    return pointer_diff(r, x, limit=MAX_DIFF)


def learn_noise(primary: list, others: list[tuple[str, list]], **compare_kw: Any) -> Noise:
    """The noise between ``primary`` (a recording's ``(record, bytes)`` frames) and each
    of ``others`` (``(name, frames)``: other recordings of the same script)."""
    noise = Noise()
    for name, frames in others:
        noise.recordings += 1
        cmp = compare_runs(primary, frames, noise=noise, **compare_kw)
        for d in cmp.differences:
            rec, live = d.recorded_event, d.live_event
            if d.kind in ("content", "request", "result") and rec is not None and live is not None:
                noise.learn_diff(rec.index, rec, d.diff, name)
            elif d.kind == "missing" and rec is not None:
                for ev in [rec, *d.related]:
                    if ev.index not in noise.optional:
                        noise.optional[ev.index] = f"{name} does not have it"
                        noise.learned.append({"seq": ev.seq, "label": ev.label,
                                              "as": "sent only sometimes", "from": name})
            elif d.kind == "extra" and live is not None:
                noise.extras.append((live.cls(), d.live, name))
            elif d.kind == "order" and rec is not None and rec.index not in noise.unordered:
                noise.unordered.add(rec.index)
                noise.learned.append({"seq": rec.seq, "label": rec.label,
                                      "as": "in another order", "from": name})
    return noise

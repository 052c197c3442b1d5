"""A comparison as records and text: ops JSONL, a unified diff, a JSON summary.

All three are pure functions of a :class:`~acp_pipes.align.compare.Comparison`; none
prints. A changed step is one op (``changed``) carrying the JSON pointers that differ and
both values, in every format.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from acp_pipes.align.comparison import Change, Comparison
from acp_pipes.align.steps import Steps, StepTable
from acp_pipes.io.terminal import Terminal, printable
from acp_pipes.protocol.jsontext import dumps  # a lone surrogate stays its escape

__all__ = ["ABSENT", "ARROWS", "diff_lines", "ops", "show_values", "step_info", "summary"]

#: How a direction reads in a diff: client to agent, agent to client.
ARROWS = {"c2a": "→", "a2c": "←"}
#: Said after the summary of a reply that answers no request seen before it.
UNANSWERED_NOTE = " (before its request)"


def _tail(table: StepTable, step: int, kind: str) -> dict[str, Any]:
    first, sub, method = table.meta[step]
    if kind == "asr":
        tail: dict[str, Any] = {"type": first}
        if sub is not None:
            tail["kind"] = sub
    else:
        tail = {"dir": first}
        if sub is not None:
            tail["kind"] = sub
        if method is not None:
            tail["method"] = method
    tail["hash"] = table.hash_of(step)
    return tail


def ops(cmp: Comparison, changes: dict[int, Change] | None = None
        ) -> Iterator[dict[str, Any]]:
    """One record per op, in merged order: ``{"op", "a", "b", dir|type, kind, method,
    hash}``; a changed op also has ``hash_b`` and ``diff`` (and ``cut``), and every op
    ``"approximate": true`` when ``--max-cost`` cut the search. ``changes``: from
    :meth:`Comparison.changes` (computed here when not given)."""
    if changes is None:
        changes = cmp.changes()
    table, kind = cmp.table, cmp.a.kind
    sa, sb, oa, ob = cmp.a.seq, cmp.b.seq, cmp.oa, cmp.ob
    approx = cmp.approximate
    tails: dict[int, dict[str, Any]] = {}

    def tail(step: int) -> dict[str, Any]:
        t = tails.get(step)
        if t is None:
            t = tails[step] = _tail(table, step, kind)
            if approx:
                t["approximate"] = True
        return t

    kinds = cmp.kinds
    for tag, lo, hi in cmp.runs():
        if tag == "note":
            for k in range(lo, hi):
                i, j = oa[k], ob[k]
                rec = {"op": "note", "a": i if i >= 0 else None, "b": j if j >= 0 else None,
                       "note": cmp.notes[k]}
                rec.update(tail(sa[i] if i >= 0 else sb[j]))
                yield rec
            continue
        if tag == "equal":
            for k in range(lo, hi):
                i = oa[k]
                rec = {"op": "equal", "a": i, "b": ob[k]}
                rec.update(tail(sa[i]))
                yield rec
        elif tag in ("only-a", "only-b"):
            in_a = tag == "only-a"
            for k in range(lo, hi):
                x = oa[k] if in_a else ob[k]
                rec = {"op": tag, "a": x if in_a else None, "b": None if in_a else x}
                rec.update(tail(sa[x] if in_a else sb[x]))
                if kinds:
                    rec["difference"] = kinds[k]
                    if k in cmp.marks:
                        rec["sometimes"] = cmp.marks[k]
                yield rec
        else:
            for k in range(lo, hi):
                i, j = oa[k], ob[k]
                rec = {"op": "changed", "a": i, "b": j}
                rec.update(tail(sa[i]))
                rec["hash_b"] = table.hash_of(sb[j])
                if kinds:
                    rec["difference"] = kinds[k]
                _add_diff(rec, changes.get(k))
                yield rec


def _add_diff(rec: dict[str, Any], change: Change | None) -> None:
    if change is not None:
        rec["diff"] = change.diff
        if change.cut:
            rec["cut"] = True


def step_info(steps: Steps, table: StepTable, i: int, text: str | None) -> dict[str, Any] | None:
    """A described step (for the JSON summary), or None when there is none."""
    if not 0 <= i < len(steps.seq):
        return None
    info = {"index": i, **_tail(table, steps.seq[i], steps.kind)}
    if text is not None:
        info["summary"] = text
    return info


def summary(cmp: Comparison, changes: dict[int, Change] | None = None) -> dict[str, Any]:
    """The JSON summary: counts, LCS length, edit distance, the first divergence, and
    every changed step with its differences; for two traces, ``latency_ms``: per method,
    each run's request latency and the change (:func:`acp_pipes.frame.latency.deltas`)."""
    if changes is None:
        changes = cmp.changes()
    a, b, table = cmp.a, cmp.b, cmp.table
    first = None
    k = cmp.first_divergence()
    if k is not None:
        i, j = cmp.at(k)
        ta = a.describe([i]).get(i) if i >= 0 else None
        tb = b.describe([j]).get(j) if j >= 0 else None
        first = {
            "op": cmp.tag(k),
            "a": i if i >= 0 else None,
            "b": j if j >= 0 else None,
            "step_a": step_info(a, table, i, ta),
            "step_b": step_info(b, table, j, tb),
        }
        if cmp.kinds:
            first["difference"] = cmp.kinds[k]
            if k in cmp.marks:
                first["sometimes"] = cmp.marks[k]
        _add_diff(first, changes.get(k))
    changed = []
    for pos in sorted(changes):
        c = changes[pos]
        rec = {"a": c.a, "b": c.b, **_tail(table, a.seq[c.a], a.kind),
               "hash_b": table.hash_of(b.seq[c.b])}
        if cmp.kinds:
            rec["difference"] = cmp.kinds[pos]
        _add_diff(rec, c)
        changed.append(rec)
    out = {
        "equal": cmp.equal,
        "counts": cmp.counts(),
        "lcs": cmp.lcs,
        "distance": cmp.distance,
        "approximate": cmp.approximate,
        "a": _side(a),
        "b": _side(b),
        "first_divergence": first,
        "changed": changed,
    }
    if a.model is not None and b.model is not None:
        out["renamed"] = renaming(cmp)
        out["notes"] = notes(cmp)
        out["rules"] = cmp.rules
        if cmp.learned is not None:
            out["learned"] = cmp.learned
    if a.latency is not None and b.latency is not None:
        from acp_pipes.frame.latency import deltas

        out["latency_ms"] = deltas(a.latency, b.latency)
    return out


def renaming(cmp: Comparison) -> list[dict[str, Any]]:
    """The renaming of minted identifiers (:mod:`acp_pipes.align.minted`) that is not the
    identity: ``{"kind", "a", "b"}`` per identifier, in A's order of first appearance."""
    out = []
    for kind, pairs in cmp.renamed.items():
        for x, y in pairs.items():
            if x != y:
                out.append({"kind": kind, "a": x, "b": y})
    return out


def notes(cmp: Comparison) -> list[dict[str, Any]]:
    """What the model tolerated, in the merged order: ``{"note", "a", "b", dir, kind,
    method, hash, "summary", "why"}`` per step (one of ``a``, ``b`` null)."""
    if not cmp.notes:
        return []
    a, b, table = cmp.a, cmp.b, cmp.table
    at = {k: cmp.at(k) for k in sorted(cmp.notes)}
    ta = a.describe([i for i, _ in at.values() if i >= 0])
    tb = b.describe([j for i, j in at.values() if i < 0])
    out = []
    for k, (i, j) in at.items():
        steps, x, texts = (a, i, ta) if i >= 0 else (b, j, tb)
        rec = {"note": cmp.notes[k], "a": i if i >= 0 else None, "b": j if i < 0 else None,
               **_tail(table, steps.seq[x], steps.kind)}
        if x in texts:
            rec["summary"] = texts[x]
        if cmp.whys.get(k):
            rec["why"] = cmp.whys[k]
        out.append(rec)
    return out


def _side(s: Steps) -> dict[str, Any]:
    out: dict[str, Any] = {"source": s.source, "kind": s.kind, "steps": len(s.seq)}
    if s.session is not None:
        out["session"] = s.session
    return out


# -- the unified diff --------------------------------------------------------------------


def hunks(cmp: Comparison, context: int) -> list[tuple[int, int]]:
    """``(start, stop)`` positions of the hunks: the ops that differ with ``context`` equal
    ops around them, hunks closer than that merged."""
    out: list[tuple[int, int]] = []
    total = len(cmp)
    for k in cmp.differing:
        lo, hi = max(0, k - context), min(total, k + 1 + context)
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def diff_lines(cmp: Comparison, context: int = 3, changes: dict[int, Change] | None = None,
               term: Terminal | None = None) -> Iterator[str]:
    """A unified diff of the two runs, one line per step: ``-`` only in A, ``+`` only in
    B, ``!`` changed (then one line per differing JSON pointer with both values), the
    direction arrow (or nothing for ASR records) and a short summary of the step. Steps
    are in merged order (A's, B's own steps beside theirs); a hunk header counts the
    steps of each run in it and starts at the first of them. Coloured as ``term`` says
    (plain without one)."""
    paint = term.paint if term is not None else _plain
    a, b = cmp.a, cmp.b
    groups = hunks(cmp, context)
    # the inputs read back before a line is written
    writer = _DiffWriter(cmp, groups, cmp.changes() if changes is None else changes, paint)
    yield paint(f"--- {a.source}" + (f" (session {a.session})" if a.session else ""), "heading")
    yield paint(f"+++ {b.source}" + (f" (session {b.session})" if b.session else ""), "heading")
    if cmp.approximate:
        yield "# approximate: --max-cost cut the search; the script may not be minimal"
    for lo, hi in groups:
        yield writer.header(lo, hi)
        for k in range(lo, hi):
            yield from writer.ops[cmp.tag(k)](k)


class _DiffWriter:
    """The lines of :func:`diff_lines`' hunks: a hunk's header, and each op's lines by
    its tag (:attr:`ops`); the words of the steps shown are read once, up front."""

    def __init__(self, cmp: Comparison, groups: list[tuple[int, int]],
                 changes: dict[int, Change], paint: Callable[[str, str], str]):
        self.cmp, self.changes, self.paint = cmp, changes, paint
        oa, ob = cmp.oa, cmp.ob
        want_a: list[int] = []
        want_b: list[int] = []
        for lo, hi in groups:
            for k in range(lo, hi):
                if oa[k] >= 0:
                    want_a.append(oa[k])
                else:
                    want_b.append(ob[k])
        self.text_a = cmp.a.describe(want_a)
        self.text_b = cmp.b.describe(want_b)
        self.ops: dict[str, Callable[[int], Iterator[str]]] = {
            "equal": self.equal, "note": self.note, "only-a": self.only_a,
            "only-b": self.only_b, "changed": self.changed}

    def header(self, lo: int, hi: int) -> str:
        """A hunk's ``@@`` line: where it starts in each run and how many steps."""
        cmp = self.cmp
        a, b, table, oa, ob = cmp.a, cmp.b, cmp.table, cmp.oa, cmp.ob
        ia = [oa[k] for k in range(lo, hi) if oa[k] >= 0]
        jb = [ob[k] for k in range(lo, hi) if ob[k] >= 0]
        a_start = ia[0] if ia else _next_index(oa, hi, cmp.n)
        if cmp.a.model is not None:
            # by the model the steps of either run may be out of its order (a floating
            # notification matched elsewhere in its window): a hunk starts, in each
            # run, at its earliest step there that does not float
            a_start = _start(ia, a.seq, table.floating, oa, hi, cmp.n)
            b_start = _start(jb, b.seq, table.floating, ob, hi, cmp.m)
        else:
            b_start = min(jb) if jb else _next_index(ob, hi, cmp.m)
        return self.paint(f"@@ -{_range(a_start, len(ia))} +{_range(b_start, len(jb))} @@",
                          "heading")

    def line(self, sign: str, steps: Steps, i: int, texts: dict[int, str]) -> str:
        table = self.cmp.table
        step = steps.seq[i]
        lead = ARROWS.get(table.meta[step][0], "") if steps.kind == "trace" else ""
        note = UNANSWERED_NOTE if steps.kind == "trace" and table.unanswered(step) else ""
        return f"{sign}{lead}{' ' if lead else ''}{texts.get(i, '?')}{note}"

    def equal(self, k: int) -> Iterator[str]:
        yield self.line(" ", self.cmp.a, self.cmp.oa[k], self.text_a)

    def note(self, k: int) -> Iterator[str]:
        cmp = self.cmp
        i = cmp.oa[k]
        side = self.line("~", cmp.a, i, self.text_a) if i >= 0 else \
            self.line("~", cmp.b, cmp.ob[k], self.text_b)
        yield self.paint(f"{side} (note: {cmp.notes[k]})", "context")

    def only_a(self, k: int) -> Iterator[str]:
        cmp = self.cmp
        yield self.paint(self.line("-", cmp.a, cmp.oa[k], self.text_a) + _marked(cmp, k),
                         "removed")

    def only_b(self, k: int) -> Iterator[str]:
        cmp = self.cmp
        yield self.paint(self.line("+", cmp.b, cmp.ob[k], self.text_b) + _marked(cmp, k),
                         "added")

    def changed(self, k: int) -> Iterator[str]:
        """The step as in A, then each pointer that differs with both values."""
        paint = self.paint
        yield paint(self.line("!", self.cmp.a, self.cmp.oa[k], self.text_a), "warning")
        change = self.changes.get(k)
        if change is None:
            return
        for d in change.diff:
            va, vb = show_values(d.get("a", ABSENT), d.get("b", ABSENT))
            path = printable(d["path"]) or "(the whole value)"
            yield (paint("!", "warning") + f"     {path}: " + paint(va, "removed")
                   + " → " + paint(vb, "added"))
        if change.cut:
            yield paint("!", "warning") + "     … and more differences"


def _marked(cmp: Comparison, k: int) -> str:
    """What a diff line says after a difference some agents make now and then."""
    return " (sometimes sent: the other run made this call unannounced)" \
        if k in cmp.marks else ""


def _plain(text: str, role: str) -> str:
    return text


def _start(idx: list[int], seq: list[int], floating: dict[int, str], order, hi: int,
           end: int) -> int:
    """Where a hunk starts in one run under the model (see :func:`diff_lines`)."""
    if not idx:
        return _next_index(order, hi, end)
    fixed = [i for i in idx if seq[i] not in floating]
    return min(fixed or idx)


def _next_index(idx, start: int, end: int) -> int:
    """The first step index at or after merged position ``start`` (``end`` if none)."""
    for k in range(start, len(idx)):
        if idx[k] >= 0:
            return idx[k]
    return end


def _range(start: int, length: int) -> str:
    """Unified diff range: 1-based start, and the length unless it is 1."""
    if length == 1:
        return f"{start + 1}"
    if length == 0:
        return f"{start},0"
    return f"{start + 1},{length}"


class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:
        return "(absent)"


ABSENT = _Absent()


def show_values(a: Any, b: Any, width: int = 60) -> tuple[str, str]:
    """Both values of a difference as short, printable JSON; two long strings that share
    a beginning are shown from a little before where they part, so the difference is
    in view however late it comes.

    >>> show_values("x" * 80 + "end", "x" * 80 + "END", width=20)
    ('"…xxxxxxxxxxend"', '"…xxxxxxxxxxEND"')
    """
    if isinstance(a, str) and isinstance(b, str):
        common = 0
        for ca, cb in zip(a, b, strict=False):
            if ca != cb:
                break
            common += 1
        skip = max(0, common - width // 2)
        if skip > 3:
            return _show_text(a, skip, width), _show_text(b, skip, width)
    return _show(a, width), _show(b, width)


def _show(value: Any, width: int) -> str:
    if value is ABSENT:
        return "(absent)"
    text = printable(dumps(value).decode())
    return text if len(text) <= width else text[: width - 1] + "…"


def _show_text(s: str, skip: int, width: int) -> str:
    text = printable(dumps(s[skip:]).decode())
    text = '"…' + text[1:]
    return text if len(text) <= width else text[: width - 1] + "…"

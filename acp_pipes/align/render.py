"""An alignment as records and text: ops JSONL, a unified diff, a JSON summary.

All three are pure functions of an :class:`~acp_pipes.align.myers.Alignment` and the two
inputs' :class:`~acp_pipes.align.steps.Steps`; none prints.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from acp_pipes.align.myers import Alignment, opcodes
from acp_pipes.align.steps import Steps, StepTable

__all__ = ["ARROWS", "diff_lines", "first_divergence", "ops", "step_info", "summary"]

#: How a direction reads in a diff: client to agent, agent to client.
ARROWS = {"c2a": "→", "a2c": "←"}


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
    tail["hash"] = table.keys[step][1]
    return tail


def ops(al: Alignment, a: Steps, b: Steps, table: StepTable) -> Iterator[dict[str, Any]]:
    """One record per aligned step: ``{"op", "a", "b", dir|type, kind, method, hash}``,
    with ``"approximate": true`` on every op when ``--max-cost`` cut the search."""
    tails: dict[int, dict[str, Any]] = {}
    kind = a.kind
    sa, sb = a.seq, b.seq
    approx = al.approximate

    def tail(step: int) -> dict[str, Any]:
        t = tails.get(step)
        if t is None:
            t = tails[step] = _tail(table, step, kind)
            if approx:
                t["approximate"] = True
        return t

    for tag, a0, a1, b0, b1 in opcodes(al):
        if tag == "equal":
            for i in range(a0, a1):
                rec = {"op": "equal", "a": i, "b": b0 + i - a0}
                rec.update(tail(sa[i]))
                yield rec
        elif tag == "only-a":
            for i in range(a0, a1):
                rec = {"op": "only-a", "a": i, "b": None}
                rec.update(tail(sa[i]))
                yield rec
        else:
            for j in range(b0, b1):
                rec = {"op": "only-b", "a": None, "b": j}
                rec.update(tail(sb[j]))
                yield rec


def step_info(steps: Steps, table: StepTable, i: int, text: str | None) -> dict[str, Any] | None:
    """A described step (for the JSON summary), or None past the end of the input."""
    if not 0 <= i < len(steps.seq):
        return None
    info = {"index": i, **_tail(table, steps.seq[i], steps.kind)}
    if text is not None:
        info["summary"] = text
    return info


def first_divergence(al: Alignment) -> tuple[int, int] | None:
    """Indices in A and B where the runs first part ways (None when they never do)."""
    for tag, a0, _a1, b0, _b1 in opcodes(al):
        if tag != "equal":
            return a0, b0
    return None


def summary(al: Alignment, a: Steps, b: Steps, table: StepTable) -> dict[str, Any]:
    """The JSON summary: counts, LCS length, edit distance, the first divergence."""
    lcs = al.lcs
    fd = first_divergence(al)
    first = None
    if fd is not None:
        i, j = fd
        ta = a.describe([i]).get(i)
        tb = b.describe([j]).get(j)
        first = {
            "a": i,
            "b": j,
            "step_a": step_info(a, table, i, ta),
            "step_b": step_info(b, table, j, tb),
        }
    return {
        "equal": al.n == al.m == lcs,
        "counts": {"equal": lcs, "only-a": al.n - lcs, "only-b": al.m - lcs},
        "lcs": lcs,
        "distance": al.distance,
        "approximate": al.approximate,
        "a": _side(a),
        "b": _side(b),
        "first_divergence": first,
    }


def _side(s: Steps) -> dict[str, Any]:
    out: dict[str, Any] = {"source": s.source, "kind": s.kind, "steps": len(s.seq)}
    if s.session is not None:
        out["session"] = s.session
    return out


def _groups(al: Alignment, context: int):
    """Hunks: lists of opcodes with at most ``context`` equal steps around the changes."""
    codes = list(opcodes(al))
    if not codes or all(c[0] == "equal" for c in codes):
        return
    n = context
    if codes[0][0] == "equal":
        tag, a0, a1, b0, b1 = codes[0]
        codes[0] = (tag, max(a0, a1 - n), a1, max(b0, b1 - n), b1)
    if codes[-1][0] == "equal":
        tag, a0, a1, b0, b1 = codes[-1]
        codes[-1] = (tag, a0, min(a1, a0 + n), b0, min(b1, b0 + n))
    group: list = []
    for tag, a0, a1, b0, b1 in codes:
        if tag == "equal" and a1 - a0 > 2 * n and group:
            group.append((tag, a0, a0 + n, b0, b0 + n))
            yield group
            group = []
            a0, b0 = max(a0, a1 - n), max(b0, b1 - n)
        if a1 > a0 or b1 > b0:
            group.append((tag, a0, a1, b0, b1))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        yield group


def diff_lines(
    al: Alignment, a: Steps, b: Steps, table: StepTable, context: int = 3
) -> Iterator[str]:
    """A unified diff of the two step sequences, one line per step: the direction arrow
    (or the ASR record type) and a short summary of the frame."""
    groups = list(_groups(al, context))
    want_a: list[int] = []
    want_b: list[int] = []
    for g in groups:
        for tag, a0, a1, b0, b1 in g:
            if tag == "only-b":
                want_b.extend(range(b0, b1))
            else:
                want_a.extend(range(a0, a1))
    text_a = a.describe(want_a)
    text_b = b.describe(want_b)
    yield f"--- {a.source}" + (f" (session {a.session})" if a.session else "")
    yield f"+++ {b.source}" + (f" (session {b.session})" if b.session else "")
    if al.approximate:
        yield "# approximate: --max-cost cut the search; the script may not be minimal"

    def line(sign: str, steps: Steps, i: int, texts: dict[int, str]) -> str:
        step = steps.seq[i]
        first = table.meta[step][0]
        lead = ARROWS.get(first, "") if steps.kind == "trace" else ""
        return f"{sign}{lead}{' ' if lead else ''}{texts.get(i, '?')}"

    for g in groups:
        a_start, a_end = g[0][1], g[-1][2]
        b_start, b_end = g[0][3], g[-1][4]
        yield f"@@ -{_range(a_start, a_end)} +{_range(b_start, b_end)} @@"
        for tag, a0, a1, b0, b1 in g:
            if tag == "equal":
                for i in range(a0, a1):
                    yield line(" ", a, i, text_a)
            elif tag == "only-a":
                for i in range(a0, a1):
                    yield line("-", a, i, text_a)
            else:
                for j in range(b0, b1):
                    yield line("+", b, j, text_b)


def _range(start: int, stop: int) -> str:
    """Unified diff range: 1-based start, and the length unless it is 1."""
    length = stop - start
    if length == 1:
        return f"{start + 1}"
    if length == 0:
        return f"{start},0"
    return f"{start + 1},{length}"

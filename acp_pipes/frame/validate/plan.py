"""Which definition checks a frame: per (method, direction, kind), the schemas that define
it, narrowest first; or, when none does, the violation to report instead (a method sent
the wrong way, as the wrong kind, unstable, or unknown).

Worked out once per (method, direction, kind) and revision, and kept by the checker
(:class:`acp_pipes.frame.validate.checker.Checker`): a frame's check is then one call of
the first schema's closed validator (:attr:`Plan.fast`).
"""

from __future__ import annotations

from acp_pipes.frame.validate.schema import Schema, schema
from acp_pipes.io.wire import A2C, C2A

__all__ = ["HANDLER", "Plan", "plan"]

_KIND_DEF = {"request": "Request", "notification": "Notification"}
HANDLER = {C2A: "agent", A2C: "client"}  # who handles what travels this way


class Plan:
    """How frames of one (method, direction, kind) are checked: the schemas that define
    it, narrowest first, with the definition's name in each; or the violation to report
    instead."""

    __slots__ = ("chain", "fast", "problem", "unstable")

    def __init__(self, chain: list[tuple[Schema, str]],
                 problem: tuple[str, str, Schema | None, str | None] | None = None):
        self.chain = chain
        self.problem = problem  # (rule, message, schema, $defs name) when none defines it
        # the common case in one call: valid under the first schema's closed copy
        self.fast = chain[0][0].validator(chain[0][1], closed=True).is_valid if chain else None
        # defined by the unstable schema alone: every frame of it uses an unstable feature
        self.unstable = bool(chain) and chain[0][0].unstable


def plan(schemas: list[Schema], method: str, d: str, kind: str) -> Plan:
    """The :class:`Plan` of ``method`` travelling ``d`` as ``kind`` ("request",
    "notification", "response"), against ``schemas`` (stable first)."""
    handler = HANDLER[d]
    want = "Response" if kind == "response" else _KIND_DEF[kind]
    chain = []
    for s in schemas:
        for side in (handler, "protocol", "proxy"):
            name = s.definition(method, side, want)
            if name is not None:
                chain.append((s, name))
                break
    if chain:
        return Plan(chain)
    widest = schemas[-1]
    full = schema(widest.revision, True)
    other = "client" if handler == "agent" else "agent"
    for s in (widest, full):
        name = s.definition(method, other, want)
        if name is not None:
            return Plan([], ("wrong-direction", f"{method} is sent by the {handler}, not to it",
                             s, name))
        other_kind = "Notification" if want == "Request" else "Request"
        name = s.definition(method, handler, other_kind)
        if name is not None and kind != "response":
            return Plan([], ("wrong-kind",
                             f"{method} is a {other_kind.lower()}, sent as a {kind}", s, name))
    if widest is not full and full.sides(method):
        return Plan([], ("unknown-method", f"{method} is unstable: not in {widest.file}",
                         full, None))
    return Plan([], ("unknown-method",
                     f"{method} is not a method of ACP {widest.revision} "
                     "(extension methods begin with _)", widest, None))

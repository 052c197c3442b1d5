"""Check a recording against the ACP spec: the official JSON Schema of the protocol
version it negotiated, and the rules a schema cannot state.

Each frame is checked against the definition of its method in the schema (the stable
file first, then the one with unstable features; ``--stable`` for the stable one alone):
a request's ``params``, a notification's ``params``, a response's ``result`` as the
result of the request it answers, an error's ``error``. Beyond the schema: each request
answered exactly once, no response to an id nobody waits on, no id reused while in
flight, each method in its direction, a session used only while live (after it was
created, loaded, resumed or forked, before it was closed), capability-gated calls and
content only when advertised. The rules are listed in :data:`RULES`.

A violation record (one per problem; ``id`` only when the frame has one, ``related``
only when another frame is involved)::

    {"seq":12,"dir":"a2c","kind":"notification","method":"session/update",
     "rule":"schema","pointer":"/params/update/content",
     "message":"\\"text\\" is a required property",
     "schema":"v2.0.0-alpha.9/schema.unstable.json",
     "location":"#/$defs/TextContent/required",
     "words":"Text payload carried by this content block."}

``pointer`` is a JSON pointer into the frame; ``schema`` the official file the rule comes
from, ``location`` a pointer into it, ``words`` the schema's own description there.

    from acp_pipes.frame.core import read_frames
    from acp_pipes.frame.validate import violations

    for v in violations(read_frames("wire.jsonl", headers=True)):
        print(v["seq"], v["rule"], v["pointer"], v["message"])

The rooms: :mod:`~acp_pipes.frame.validate.checker` (a stream, frame by frame) with the
definition that checks each frame planned in :mod:`~acp_pipes.frame.validate.plan`, the
turn rules in :mod:`~acp_pipes.frame.validate.turns`, capability gates in
:mod:`~acp_pipes.frame.validate.gates`, records made in
:mod:`~acp_pipes.frame.validate.record`; the schemas as validators in
:mod:`~acp_pipes.frame.validate.schema` (their closed copy in
:mod:`~acp_pipes.frame.validate.closed`, which errors are reported in
:mod:`~acp_pipes.frame.validate.explain`, how in :mod:`~acp_pipes.frame.validate.words`);
the rules beyond the schema, as data, in :mod:`~acp_pipes.frame.validate.rules`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from acp_pipes.frame.validate.checker import Checker
from acp_pipes.frame.validate.rules import RULES

__all__ = ["RULES", "Checker", "reports", "violations"]


def reports(
    records: Iterable[dict[str, Any]],
    *,
    protocol: int | None = None,
    stable: bool = False,
    paired: bool | None = None,
    revision: str | None = None,
) -> Iterator[dict[str, Any]]:
    """Violation records, and after each stream its summary (``{"type": "summary", ...}``;
    violation records carry ``"type": "violation"``).

    ``records``: frame records, with their stream headers (``read_frames(...,
    headers=True)``) so each stream is checked on its own and a bare stream (a frames
    header whose ``source`` is null: one direction only) is known; without headers, one
    stream. ``paired`` overrides what the header says; ``revision`` forces a schema revision
    (``acp-frame --schema``).
    """
    checker: Checker | None = None

    def start(header: dict[str, Any] | None) -> Checker:
        both = paired if paired is not None else (header is None or header.get("source")
                                                  is not None)
        return Checker(paired=both, protocol=protocol, stable=stable, revision=revision)

    def end(c: Checker) -> Iterator[dict[str, Any]]:
        for v in c.finish():
            yield {"type": "violation", **v}
        yield {"type": "summary", **c.summary()}

    for rec in records:
        if "format" in rec:
            if checker is not None:
                yield from end(checker)
            checker = start(rec)
            continue
        if checker is None:
            checker = start(None)
        for v in checker.check(rec):
            yield {"type": "violation", **v}
    if checker is not None:
        yield from end(checker)


def violations(
    records: Iterable[dict[str, Any]],
    *,
    protocol: int | None = None,
    stable: bool = False,
    paired: bool | None = None,
    revision: str | None = None,
) -> Iterator[dict[str, Any]]:
    """The violation records of ``records`` (see :func:`reports`), in the order found:
    a frame's own as soon as it is read, unanswered requests at the end of their stream."""
    for r in reports(records, protocol=protocol, stable=stable, paired=paired,
                     revision=revision):
        if r["type"] == "violation":
            del r["type"]
            yield r

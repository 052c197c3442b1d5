"""acp-export: ACP sessions as OpenTelemetry GenAI traces, and as Agent Trail files.

``spans``    ASR records -> span descriptions (pure; the mapping of docs/acp-export.md)
``otlp``     span descriptions -> the OpenTelemetry SDK's spans, OTLP/JSON, OTLP/HTTP
             (the only module that imports the SDK: the optional extra ``export``)
``sources``  any stage in (wire log, frames, folded entities, ASR) -> ASR streams

:func:`export_otlp` ties them together for acp-export and acp-batch's ``export`` mode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from acp_pipes.errors import Note, Warn
from acp_pipes.export.fields import DEFAULT_CAP, Ids
from acp_pipes.export.spans import Span, session_spans

__all__ = ["BATCH_SPANS", "DEFAULT_CAP", "Exported", "export_otlp", "resource_of"]

#: Spans per OTLP request (or OTLP/JSON line): turns are gathered up to this many, so a
#: session of many short turns is not a request per turn, and memory stays bounded.
BATCH_SPANS = 512


class Exported:
    """What an export did: sessions, spans, and the read error that cut an input short
    (what came before it was exported) or None; ``note``: a recording with no session."""

    def __init__(self) -> None:
        self.sessions = 0
        self.spans = 0
        self.cut: Any = None
        self.note: str | None = None


def resource_of(header: dict) -> dict[str, Any]:
    """The OpenTelemetry resource of a session: the agent (service.* from ASR-703)."""
    agent = header.get("agent")
    if type(agent) is not dict:
        agent = {}
    out: dict[str, Any] = {"service.name": agent.get("name") if isinstance(
        agent.get("name"), str) else "agent"}
    if isinstance(agent.get("version"), str):
        out["service.version"] = agent["version"]
    return out


def export_otlp(paths: list[str], deliver: Callable[[list[Any]], object], *, warn: Warn,
                cap: int = DEFAULT_CAP, note: Note | None = None,
                encoder: Any = None, resource: dict[str, Any] | None = None,
                namespace: str = "") -> Exported:
    """Read ``paths`` (any stage), map every session and hand ``deliver`` the SDK's
    ReadableSpans, at most :data:`BATCH_SPANS` at a time (a turn is never split);
    ``resource`` adds attributes to every session's resource; ``namespace`` goes into
    every derived ID (:class:`~acp_pipes.export.fields.Ids`)."""
    from acp_pipes.export.otlp import Encoder
    from acp_pipes.export.sources import asr_sources

    enc = encoder or Encoder()
    done = Exported()
    pending: list[Any] = []
    with asr_sources(paths, warn=warn, note=note) as sources:
        ids = Ids(sources.trace_contexts(), namespace)
        for header, records in sources.streams(warn):
            done.sessions += 1
            resource = {**resource_of(header), **(resource or {})}
            for batch in session_spans(header, records, ids, cap):
                pending.extend(enc.readable(batch, resource))
                if len(pending) >= BATCH_SPANS:
                    done.spans += len(pending)
                    deliver(pending)
                    pending = []
        if pending:
            done.spans += len(pending)
            deliver(pending)
        done.cut, done.note = sources.cut, sources.note
    return done


def spans_of(header: dict, records: list[dict], cap: int = DEFAULT_CAP) -> list[Span]:
    """Every span of one stream in memory (tests, small inputs)."""
    return [s for batch in session_spans(header, records, Ids(), cap) for s in batch]

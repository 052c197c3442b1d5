"""The JSON Schemas of ASR streams as acp-pipes writes them (acp_pipes/schemas/asr/).

One schema per record type plus the header and the audit-only records; shared pieces
(the record envelope, PathRef, capture states) are in defs.schema.json. Loaded once,
resolved locally (no network).
"""

from __future__ import annotations

import functools
from typing import Any

from acp_pipes.asr.model import AUDIT_PREFIX
from acp_pipes.schemas import asr_schemas

__all__ = ["RECORD_TYPES", "validator_for"]

RECORD_TYPES = ("message", "tool_call", "tool_result", "file_change", "permission",
                "input_request", "plan", "terminal", "compaction", "subagent", "state",
                "usage_summary", "session_info", "config_change")


@functools.cache
def _validators() -> dict[str, Any]:
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    docs = asr_schemas()
    registry = Registry().with_resources(
        (doc["$id"], Resource.from_contents(doc)) for doc in docs.values())
    return {name: Draft202012Validator(doc, registry=registry) for name, doc in docs.items()}


def validator_for(record: dict[str, Any], first: bool) -> Any | None:
    """The validator for a record (the header's for a stream's first line); None when
    the type is not one this version knows."""
    vs = _validators()
    if first:
        return vs["header"]
    t = record.get("type")
    if isinstance(t, str) and t.startswith(AUDIT_PREFIX):
        return vs["audit"]
    return vs.get(t) if t in RECORD_TYPES else None

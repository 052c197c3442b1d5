"""The JSON Schemas of ASR streams as acp-pipes writes them (schemas/asr/*.json).

One schema per record type plus the header and the audit-only records; shared pieces
(the record envelope, PathRef, capture states) are in defs.schema.json. Loaded once,
resolved locally (no network).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from acp_pipes.asr.model import AUDIT_PREFIX

__all__ = ["SCHEMA_DIR", "RECORD_TYPES", "validator_for"]

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas" / "asr"
RECORD_TYPES = ("message", "tool_call", "tool_result", "file_change", "permission",
                "input_request", "plan", "terminal", "compaction", "subagent", "state",
                "usage_summary", "session_info", "config_change")


@functools.cache
def _validators() -> dict[str, Any]:
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    docs = {p.name: json.loads(p.read_text()) for p in SCHEMA_DIR.glob("*.schema.json")}
    registry = Registry().with_resources(
        (doc["$id"], Resource.from_contents(doc)) for doc in docs.values())
    return {name.removesuffix(".schema.json"): Draft202012Validator(doc, registry=registry)
            for name, doc in docs.items()}


def validator_for(record: dict, first: bool) -> Any | None:
    """The validator for a record (the header's for a stream's first line); None when
    the type is not one this version knows."""
    vs = _validators()
    if first:
        return vs["header"]
    t = record.get("type")
    if isinstance(t, str) and t.startswith(AUDIT_PREFIX):
        return vs["audit"]
    return vs.get(t) if t in RECORD_TYPES else None

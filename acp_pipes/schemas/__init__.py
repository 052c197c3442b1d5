"""The JSON Schemas acp-pipes reads, shipped inside the package (no checkout needed).

``acp/<revision>/schema[.unstable].json`` are the official ACP schemas, unmodified (see
``acp/README.md``); ``asr/*.schema.json`` describe the ASR streams acp-asr writes. They
are read with :mod:`importlib.resources`, so an installed acp-pipes (a wheel, a zip)
finds them where a checkout does.
"""

from __future__ import annotations

import functools
import json
from importlib.resources import files
from typing import Any

__all__ = ["ACP_REVISIONS", "ACP_V1", "ACP_V2", "acp_schema", "asr_schemas"]

#: The ACP v2 revision the ASR mapping is pinned to (ASR-700).
ACP_V2 = "v2.0.0-alpha.9"
#: ACP v1, the protocol version today's agents and editors negotiate.
ACP_V1 = "v1"
ACP_REVISIONS = (ACP_V2, "v2-sdk-2.4.0", ACP_V1)


@functools.cache
def acp_schema(revision: str = ACP_V2, *, unstable: bool = True) -> dict[str, Any]:
    """The official ACP schema of ``revision`` (one of :data:`ACP_REVISIONS`): stable
    and unstable features (``unstable=True``), or the stable ones only."""
    if revision not in ACP_REVISIONS:
        raise ValueError(f"no ACP schema {revision!r}; have {', '.join(ACP_REVISIONS)}")
    name = "schema.unstable.json" if unstable else "schema.json"
    return json.loads(files(__name__).joinpath("acp", revision, name).read_bytes())


@functools.cache
def asr_schemas() -> dict[str, dict[str, Any]]:
    """The ASR schemas by name (``header``, ``message``, ..., ``defs``, ``audit``)."""
    out = {}
    for entry in files(__name__).joinpath("asr").iterdir():
        if entry.name.endswith(".schema.json"):
            out[entry.name.removesuffix(".schema.json")] = json.loads(entry.read_bytes())
    return dict(sorted(out.items()))

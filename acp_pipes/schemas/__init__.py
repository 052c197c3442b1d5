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

__all__ = ["ACP_REVISIONS", "ACP_V1", "ACP_V2", "BUNDLED", "acp_schema", "asr_schemas",
           "bundled_text"]

#: The ACP v2 revision the ASR mapping is pinned to (ASR-700).
ACP_V2 = "v2.0.0-alpha.9"
#: ACP v1, the protocol version today's agents and editors negotiate.
ACP_V1 = "v1"
ACP_REVISIONS = (ACP_V2, "v2-sdk-2.4.0", ACP_V1)
#: Where each bundled revision was published (acp/README.md says more): the newest the
#: package registries held when it was bundled are ``v1`` and ``v2-sdk-2.4.0``.
BUNDLED = {
    ACP_V2: "v2 draft alpha.9 (SDK 2.0.0, 2026-10-19), the mapping's (ASR-700)",
    "v2-sdk-2.4.0": "the v2 draft of @agentclientprotocol/sdk 2.4.0 (2026-11-02)",
    ACP_V1: "v1, as @agentclientprotocol/sdk 2.4.0 ships it (2026-11-02)",
}


def bundled_text() -> str:
    """The bundled schema revisions, one line each, for ``--help``."""
    return "\n".join(f"  {rev:<16}{what}" for rev, what in BUNDLED.items())


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

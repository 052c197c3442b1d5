"""The ASR stream as acp-pipes writes it: header, record envelope, losses, names.

Every field choice the mapping leaves open is documented in docs/asr.md, marked
"(acp-pipes choice)"; this module holds the constants those choices name.
"""

from __future__ import annotations

import re
from typing import Any

from acp_pipes import __version__
from acp_pipes.io.streams import ASR_VERSION  # the one place stream versions are kept
from acp_pipes.io.wire import iso_time

__all__ = [
    "ALWAYS_LOST",
    "ASR_VERSION",
    "AUDIT_PREFIX",
    "FALLBACK_PREFIX",
    "SOURCE",
    "agent_name",
    "header",
    "record_id",
    "ts_fields",
]

SOURCE = {"format": "acp", "formatVersion": "2.0.0-alpha.9"}  # ASR-700
AUDIT_PREFIX = "org.agent-session.acp/"  # ASR-710
FALLBACK_PREFIX = "org.agent-session.acp."  # ASR-703
#: Losses that apply to every stream a recorder writes (ASR-722).
ALWAYS_LOST = ("message.author", "inference", "usage", "timestamps")
LOSS_ORDER = ("tool_result.content", "message.author", "inference", "usage", "timestamps",
              "reasoning", "_org.agent-session.acp/tool_status_transitions",
              "revision_history")
#: Record fields that are not the record's content: two records whose other fields are
#: equal say the same thing (ASR-717's duplicate test).
ENVELOPE = frozenset({"seq", "id", "ts", "tsSource", "observedAt", "native", "supersedes",
                      "copiedFrom", "assembly", "origin"})

_LABEL = re.compile(r"[^a-z0-9]+")


def agent_name(info_name: Any, configured: str | None = None) -> str:
    """ASR-703: a configured (registry or reverse-DNS name), else the reserved fallback
    ``org.agent-session.acp.<label>``. A name with no a-z0-9 in it (``"🤖"``, ``"!!"``)
    has no label by ASR-703's rule: its label is ``x--`` and the name's UTF-8 bytes in
    hex, and no name at all (no ``initialize`` seen, a name that is no string or empty)
    gives ``x--unnamed`` (acp-pipes choice): a rule-derived label never holds ``--``, so
    neither collides with an agent's own name (``Unknown``, ``X Unnamed``)."""
    if configured:
        return configured
    if info_name.__class__ is not str or not info_name:
        return FALLBACK_PREFIX + "x--unnamed"
    label = _LABEL.sub("-", info_name.lower()).strip("-") or (
        "x--" + info_name.encode("utf-8", "surrogatepass").hex())
    return FALLBACK_PREFIX + label


def record_id(seq: int) -> str:
    """``r<seq>``, as in the mapping's own example record (acp-pipes choice)."""
    return f"r{seq}"


_last_second: tuple[int | None, str] = (None, "")
_last_t: tuple[int | None, str] = (None, "")


def iso(t: int) -> str:
    """:func:`acp_pipes.io.wire.iso_time`, cached: the last time given (an entity's records
    share its receipt time) and the seconds part, ``.`` included (the hot path)."""
    global _last_second, _last_t
    if t == _last_t[0]:
        return _last_t[1]
    sec = t // 1_000_000_000
    if sec != _last_second[0]:
        _last_second = (sec, iso_time(sec * 1_000_000_000)[:-7])
    s = _last_second[1] + "%06dZ" % (t % 1_000_000_000 // 1000)  # noqa: UP031 (faster)
    _last_t = (t, s)
    return s


def ts_fields(t: int | None, replayed: bool) -> dict[str, str]:
    """ASR-707: live records carry ``ts`` (receipt of the entity's first update) with
    ``tsSource: recorder``; replayed history carries ``observedAt`` only."""
    if t is None:
        return {}
    if replayed:
        return {"observedAt": iso(t)}
    return {"ts": iso(t), "tsSource": "recorder"}


def header(sid: str, *, agent: dict[str, Any], roots: list[dict[str, Any]], losses: set[str],
           lineage: dict[str, Any] | None, connections: list[int],
           source: dict[str, Any] | None = None) -> dict[str, Any]:
    """The stream's header; ``source`` is ASR-700's ``producer.source`` (default: the
    v2 revision the mapping is pinned to). Losses ASR-722 does not list (those of ACP v1)
    follow its own, sorted."""
    h: dict[str, Any] = {
        "type": "header",
        "asr": ASR_VERSION,
        "sessionId": sid,
        "agent": agent,
        "workspace": {"roots": roots},
        "producer": {
            "name": "acp-pipes",
            "version": __version__,
            "method": "recorder",
            "source": dict(source or SOURCE),
            "lossy": [x for x in LOSS_ORDER if x in losses] + sorted(
                losses.difference(LOSS_ORDER)),
        },
    }
    if lineage:
        h["lineage"] = lineage
    h["native"] = {"connections": connections}
    return h

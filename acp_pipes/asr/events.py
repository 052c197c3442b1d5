"""Fold event records -> ASR record bodies, one builder per update kind (:data:`EVENTS`).

An update that is no entity's (a state, usage, the session's title, its configuration,
a notice) is a record of its own type, built on the checks of
:mod:`acp_pipes.asr.records`: nothing is written that ``acp-asr --validate`` rejects
(:class:`~acp_pipes.asr.records.Unmappable`), and an update of any other kind is kept
as an audit-only record (ASR-710).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from acp_pipes.asr.records import (
    Bodies,
    Ctx,
    Unmappable,
    audit,
    copy_str,
    is_int,
    must_str,
    with_meta,
)

__all__ = ["EVENTS", "event_bodies"]


def event_bodies(rec: dict[str, Any], ctx: Ctx) -> Bodies:
    """An update that is no entity's, by its kind (:data:`EVENTS`); any other is kept as
    an audit-only record (ASR-710)."""
    kind = rec.get("kind")
    u = rec.get("update")
    if not isinstance(u, dict):
        u = {}
    build = EVENTS.get(kind) if kind.__class__ is str else None
    if build is not None:
        return build(rec, u, ctx)
    return [(None, audit(kind if isinstance(kind, str) and kind else "unknown", u))]


def _state(rec: dict[str, Any], u: dict[str, Any], ctx: Ctx) -> Bodies:
    body: dict[str, Any] = {"type": "state", "state": must_str(u.get("state"), "state")}
    copy_str(body, u, ("stopReason",), "the update's")
    for f in ("error", "usage"):
        if u.get(f) is not None:
            if u[f].__class__ is not dict:
                raise Unmappable(f"{f} is not an object")
            body[f] = u[f]
    return [(None, with_meta(body, u))]


def _usage(rec: dict[str, Any], u: dict[str, Any], ctx: Ctx) -> Bodies:
    used, size = u.get("used"), u.get("size")
    if not (is_int(used) and is_int(size)):
        raise Unmappable("used or size is not an integer")
    body = {"type": "usage_summary", "scope": "session", "cumulative": True,
            "includesChildren": None, "contextWindow": {"used": used, "size": size}}
    cost = u.get("cost")
    if cost is not None:
        amount = cost.get("amount") if cost.__class__ is dict else None
        if amount.__class__ not in (int, float) or cost.get("currency").__class__ is not str:
            raise Unmappable("cost is not an amount and a currency")
        body["cost"] = {"amount": amount, "currency": cost["currency"]}
    return [(None, with_meta(body, u))]  # ASR-720


def _session_info(rec: dict[str, Any], u: dict[str, Any], ctx: Ctx) -> Bodies:
    folded = rec.get("folded") or {}
    title = folded.get("title")
    if title is not None:
        must_str(title, "title")
    return [(None, with_meta({"type": "session_info", "title": title}, u))]


def _config(rec: dict[str, Any], u: dict[str, Any], ctx: Ctx) -> Bodies:
    options = u.get("configOptions")
    if not isinstance(options, list):
        return [(None, audit("config_option_update", u))]
    body: dict[str, Any] = {"type": "config_change", "options": options}
    for opt in options:
        if not isinstance(opt, dict):
            continue
        if opt.get("category") == "model" and "currentValue" in opt:
            body["model"] = {"id": opt["currentValue"]}
        elif opt.get("category") == "mode" and "currentValue" in opt:
            body["mode"] = opt["currentValue"]
    return [(None, with_meta(body, u))]


def _notice(rec: dict[str, Any], u: dict[str, Any], ctx: Ctx) -> Bodies:
    must_str(u.get("title"), "the notice's title")
    # message with a derived ID (acp-pipes choice: notice:<n>:<seq>), ASR-730
    frames = rec.get("frames") or [0]
    mid = f"notice:{ctx.conn}:{frames[0]}"
    content = [{"type": "text", "text": u["title"]}]
    if u.get("description") is not None:
        content.append({"type": "text", "text": must_str(u["description"], "description")})
    body = {"type": "message", "messageId": mid, "idSource": "derived", "role": "system",
            "author": "harness", "origin": "notice", "audience": "user",
            "content": content}
    copy_str(body, u, ("severity",), "the notice's")
    return [(("notice", mid), with_meta(body, u))]


#: The updates that are no entity's and have a record type of their own, by kind.
EVENTS: dict[str, Callable[[dict[str, Any], dict[str, Any], Ctx], Bodies]] = {
    "state_update": _state, "usage_update": _usage, "session_info_update": _session_info,
    "config_option_update": _config, "notice": _notice}

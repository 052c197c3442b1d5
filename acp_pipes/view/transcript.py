"""ASR records -> the transcript a page shows: one item per thing a person reads.

A session's ASR stream (docs/asr.md) already says what happened in order; a reader wants
some of its records together: a tool call with its result, the file changes it made
(ASR-715) and the terminal it ran (``tool_result.exec.terminalId``) are one card. A
record that supersedes an earlier one (ASR-706, ASR-717) takes that record's place, so
the card shows the final state once, marked as revised. Everything else is an item of
its own, in stream order. Records are kept whole: the page shows their fields.

Item kinds (``k``): ``message``, ``tool`` (``call``, ``result``, ``changes``,
``terminals``), ``plan``, ``permission``, ``input`` (an input_request), ``terminal`` (one
no tool result names), ``subagent``, ``compaction``, ``state``, ``note`` (usage,
session info, config changes) and ``audit`` (records the mapping kept as received,
ASR-710).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["SessionView", "items", "lineage_links"]

_SIMPLE = {
    "message": "message",
    "plan": "plan",
    "permission": "permission",
    "input_request": "input",
    "subagent": "subagent",
    "compaction": "compaction",
    "state": "state",
    "usage_summary": "note",
    "session_info": "note",
    "config_change": "note",
}


def items(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The transcript items of one session's records (header excluded), in order."""
    records = [r for r in records if isinstance(r, dict)]
    named = {_hashable(_terminal_of(r)) for r in records
             if r.get("type") == "tool_result" and _terminal_of(r) is not None}
    t = _Transcript()
    for rec in records:
        rtype = rec.get("type")
        if not isinstance(rtype, str):
            continue
        if rtype == "terminal" and _hashable(rec.get("terminalId")) in named:
            t.shown.setdefault(_hashable(rec.get("terminalId")), []).append(rec)
            continue
        if rec.get("supersedes") is not None and t.superseded(rec):
            continue
        t.handlers.get(rtype, t.simple)(rec, rtype)
    for card in t.tools.values():  # a terminal's last record is its final state
        tid = _terminal_of(card["result"]) if card["result"] is not None else None
        recs = t.shown.get(_hashable(tid)) if tid is not None else None
        if recs:
            card["terminals"].append(recs[-1])
    return t.out


class _Transcript:
    """The items being made (``out``), and where each record went (so a revision takes
    its place): one handler per record type that is not an item of its own."""

    def __init__(self) -> None:
        self.out: list[dict[str, Any]] = []
        self.tools: dict[Any, dict[str, Any]] = {}  # callId -> its card
        #: terminalId a result names -> its records
        self.shown: dict[Any, list[dict[str, Any]]] = {}
        #: record id -> its slot: (item, key, position in the key's list or None)
        self.where: dict[str, tuple[dict[str, Any], str, int | None]] = {}
        self.handlers = {"tool_call": self.call_or_result, "tool_result": self.call_or_result,
                         "file_change": self.file_change}

    def place(self, rec: dict[str, Any], item: dict[str, Any], key: str, pos: int | None
              ) -> None:
        rid = rec.get("id")
        if isinstance(rid, str):
            self.where[rid] = (item, key, pos)

    def superseded(self, rec: dict[str, Any]) -> bool:
        """Put ``rec`` where the record it supersedes is; False when there is none."""
        old = rec.get("supersedes")
        slot = self.where.get(old) if isinstance(old, str) else None
        if slot is None:
            return False
        item, key, pos = slot
        if pos is None:
            item[key] = rec
        else:
            item[key][pos] = rec
        item["revised"] = item.get("revised", 0) + 1
        self.place(rec, item, key, pos)
        return True

    def tool(self, call_id: Any) -> dict[str, Any]:
        """The card of a tool call (made at its first record)."""
        key = _hashable(call_id)
        card = self.tools.get(key)
        if card is None:
            card = self.tools[key] = {"k": "tool", "call": None, "result": None,
                                      "changes": [], "terminals": []}
            self.out.append(card)
        return card

    def call_or_result(self, rec: dict[str, Any], rtype: str) -> None:
        card = self.tool(rec.get("callId"))
        key = "call" if rtype == "tool_call" else "result"
        card[key] = rec
        self.place(rec, card, key, None)

    def file_change(self, rec: dict[str, Any], rtype: str) -> None:
        """On its call's card (ASR-715), or an item of its own when no call caused it."""
        cause = rec.get("cause")
        call_id = cause.get("callId") if isinstance(cause, dict) else None
        if call_id is None:
            item: dict[str, Any] = {"k": "changes", "changes": [rec]}
            self.out.append(item)
            self.place(rec, item, "changes", 0)
            return
        card = self.tool(call_id)
        card["changes"].append(rec)
        self.place(rec, card, "changes", len(card["changes"]) - 1)

    def simple(self, rec: dict[str, Any], rtype: str) -> None:
        """An item of its own, of the kind its type says (an unknown type: audit)."""
        item = {"k": _SIMPLE.get(rtype, "audit" if rtype != "terminal" else "terminal"),
                "r": rec}
        self.out.append(item)
        self.place(rec, item, "r", None)


def _terminal_of(result: dict[str, Any]) -> Any:
    exec_ = result.get("exec")
    return exec_.get("terminalId") if isinstance(exec_, dict) else None


def _hashable(value: Any) -> Any:
    """A dict key for an ID as recorded (IDs are strings, but a record is untrusted)."""
    try:
        hash(value)
    except TypeError:
        return ("unhashable", repr(value))
    return (value.__class__.__name__, value)


def lineage_links(headers: dict[str, dict[str, Any]],
                  records: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, list]]:
    """Per session, the sessions it came from and those that came from it: forks
    (``lineage.forkedFrom``, ASR-718) and subagents (``lineage.spawnedBy`` and the
    parent's ``subagent`` records, ASR-721). Only sessions in the page are linked."""
    links: dict[str, dict[str, list]] = {sid: {"parents": [], "children": []}
                                         for sid in headers}

    def link(parent: Any, child: str, kind: str) -> None:
        if not isinstance(parent, str) or parent not in links or parent == child:
            return
        if {"session": parent, "kind": kind} not in links[child]["parents"]:
            links[child]["parents"].append({"session": parent, "kind": kind})
        if {"session": child, "kind": kind} not in links[parent]["children"]:
            links[parent]["children"].append({"session": child, "kind": kind})

    for sid, head in headers.items():
        lineage = head.get("lineage") if isinstance(head, dict) else None
        if not isinstance(lineage, dict):
            continue
        for field, kind in (("forkedFrom", "fork"), ("spawnedBy", "subagent")):
            ref = lineage.get(field)
            if isinstance(ref, dict):
                link(ref.get("session"), sid, kind)
    for sid, recs in records.items():
        for rec in recs:
            if isinstance(rec, dict) and rec.get("type") == "subagent":
                child = rec.get("childSession")
                if isinstance(child, str) and child in links:
                    link(sid, child, "subagent")
    return links


class SessionView:
    """One session as the page holds it: header, transcript items, lineage links and
    the connections its records came from."""

    __slots__ = ("header", "items", "links", "records", "sid")

    def __init__(self, sid: str, header: dict[str, Any], records: list[dict[str, Any]]):
        self.sid = sid
        self.header = header
        self.records = records
        self.items = items(records)
        self.links: dict[str, list] = {"parents": [], "children": []}

    def first_prompt(self, width: int = 80) -> str:
        """The start of the session's first user message (how the session list names it)."""
        for it in self.items:
            r: Any = it.get("r")  # the record (every item but a changes item has one)
            if it["k"] == "message" and r.get("role") == "user" and isinstance(
                    r.get("content"), list):
                text = "".join(b.get("text", "") for b in r["content"]
                               if isinstance(b, dict) and isinstance(b.get("text"), str))
                text = " ".join(text.split())
                if text:
                    return text if len(text) <= width else text[: width - 1] + "…"
        return ""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.sid, "header": self.header, "items": self.items,
                "links": self.links, "records": len(self.records),
                "first": self.first_prompt()}

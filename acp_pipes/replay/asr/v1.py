"""ASR streams replayed as ACP v1: what an agent sends when a client loads the session.

Every agent and editor in use today speaks ACP v1, which has ``session/load`` (the
history replayed as ``session/update`` notifications before the response) where v2 has
``session/resume`` with ``replayFrom``. The v2 replay (:class:`~acp_pipes.replay.asr.updates.
Replay`) stays the one reading of a stream; :class:`V1Replay` has one and carries each
of its updates down to v1, counting what v1 cannot carry (ASR-731) beside the v2 losses:

===========================  =============================================  ==============
v2 update                    v1                                             else counted
===========================  =============================================  ==============
``user_message``,            one ``*_chunk`` per content block, each with   ``empty_message``,
``agent_message``,           the message's ``messageId`` (v1 has no whole   ``text_blocks``,
``agent_thought``            message; the ID keeps two messages apart)      ``content_types``
``tool_call_update``         one ``tool_call``: ``title`` (else the name,   ``tool_status``,
                             else ""), status completed / failed;           ``tool_kind``,
                             cancelled -> failed; other and vendor values   ``diff_text``,
                             omitted; v1's ten kinds; diffs as ``path``,    ``terminal``,
                             ``oldText``, ``newText``                       ``content_types``
``plan_update`` (items)      ``plan`` with the entries v1 has values for    ``plan_type``,
                             (v1 has one plan: a second one replaces it)    ``plan_entries``,
                                                                            ``plans``
``session_info_update``,     as they are
``usage_update``
``compaction_update``        only to a client that declared                 ``compaction``
                             ``session.compaction``
``terminal_update``          not sent: v1's terminals are the client's      ``terminal``
``state_update``             not sent: a v1 turn ends with its prompt's     ``state``
                             response
===========================  =============================================  ==============

A v1 diff holds both texts whole. A stream acp-pipes recorded from ACP v1 keeps them in a
full-context patch (docs/asr.md, "ACP v1"), read back with
:func:`acp_pipes.fold.v1.texts_from_patch`; any other patch holds hunks only, and its
diff is counted (``diff_text``), never guessed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import orjson

from acp_pipes.asr.reader import AsrStream
from acp_pipes.replay.asr.updates import Replay, envelope

__all__ = ["LOSS_ORDER", "V1Replay", "config_options"]

#: What v1 cannot carry, in the order the loss report lists it (after the v2 losses).
LOSS_ORDER = ("state", "terminal", "tool_status", "tool_kind", "diff_text", "plans",
              "plan_type", "plan_entries", "compaction", "empty_message", "text_blocks",
              "content_types", "config_options")

#: ACP v1's closed enums (schema v1: ToolKind, PlanEntryStatus, PlanEntryPriority).
TOOL_KINDS = frozenset({"read", "edit", "delete", "move", "search", "execute", "think",
                        "fetch", "switch_mode", "other"})
PLAN_STATUSES = frozenset({"pending", "in_progress", "completed"})
PLAN_PRIORITIES = frozenset({"high", "medium", "low"})
BLOCK_TYPES = frozenset({"text", "image", "audio", "resource_link", "resource"})
#: ASR-728's statuses as v1 can say them; None: no status at all.
STATUS = {"completed": "completed", "failed": "failed", "cancelled": "failed"}
_CHUNK = {"user_message": "user_message_chunk", "agent_message": "agent_message_chunk",
          "agent_thought": "agent_thought_chunk"}


def config_options(options: list[Any], protocol: int,
                   losses: Counter[str] | None = None) -> list[Any]:
    """Recorded session config options in the shape of ``protocol``: v1 names an option
    ``id`` where v2 says ``configId``, and knows the ``select`` and ``boolean`` types
    only (others are counted in ``losses``). A stream holds them as its recording's
    protocol sent them."""
    out = []
    for opt in options:
        if not isinstance(opt, dict):
            continue
        opt = dict(opt)
        if protocol == 1:
            if "configId" in opt and "id" not in opt:
                opt["id"] = opt.pop("configId")
            if opt.get("type") not in ("select", "boolean"):
                if losses is not None:
                    losses["config_options"] += 1
                continue
        elif "id" in opt and "configId" not in opt:
            opt["configId"] = opt.pop("id")
        out.append(opt)
    return out


def _whole_texts(header: dict[str, Any]) -> bool:
    """Whether the stream's patches hold both texts whole: acp-pipes recorded it from
    ACP v1 (whose diffs it keeps as full-context patches)."""
    prod = header.get("producer")
    if not isinstance(prod, dict) or prod.get("name") != "acp-pipes":
        return False
    src = prod.get("source")
    return isinstance(src, dict) and src.get("formatVersion") == "1"


class V1Replay:
    """The replay of one stream for an ACP v1 client: :meth:`updates`,
    :meth:`notifications`, :meth:`report`. ``compaction``: the client declared
    ``session.compaction`` (else compactions are counted, not sent)."""

    def __init__(self, stream: AsrStream, session_id: str | None = None, *,
                 compaction: bool = False):
        self.v2 = Replay(stream, session_id)
        self.session_id = self.v2.session_id
        self.compaction = compaction
        self.whole_texts = _whole_texts(stream.header)
        self.losses: Counter[str] = Counter()
        self.count = 0
        self.plans: set[Any] = set()  # the plan IDs sent (v1 has one plan a session)

    @property
    def config_options(self) -> list[Any] | None:
        """The current config options in v1's shape (known once the updates are out)."""
        opts = self.v2.config_options
        return None if opts is None else config_options(opts, 1, self.losses)

    def updates(self) -> Iterator[dict[str, Any]]:
        for u in self.v2.updates():
            yield from self._down(u)

    def notifications(self) -> Iterator[bytes]:
        """:meth:`updates` as JSON-RPC lines (without LF)."""
        head, dumps = envelope(self.session_id), orjson.dumps
        for u in self.updates():
            self.count += 1
            yield head + dumps(u) + b"}}"

    def report(self) -> dict[str, Any]:
        """The v2 report (ASR-731) with v1's own losses after the v2 ones, and
        ``protocol: 1``."""
        out = self.v2.report()
        losses = dict(out["losses"])
        for k in LOSS_ORDER:
            if self.losses.get(k):
                losses[k] = losses.get(k, 0) + self.losses[k]
        out["updates"] = self.count
        out["losses"] = losses
        return {**out, "protocol": 1}

    # -- one v2 update down to v1 -------------------------------------------------------

    def _down(self, u: dict[str, Any]) -> list[dict[str, Any]]:
        kind = u["sessionUpdate"]
        if kind in _CHUNK:
            return self._chunks(_CHUNK[kind], u)
        if kind == "tool_call_update":
            return [self._tool_call(u)]
        if kind == "plan_update":
            return self._plan(u)
        if kind == "session_info_update":
            return [_pick(u, "session_info_update", ("title", "updatedAt", "_meta"))]
        if kind == "usage_update":
            return [_pick(u, "usage_update", ("used", "size", "cost", "_meta"))]
        if kind == "compaction_update":
            if self.compaction:
                return [_pick(u, "compaction_update",
                              ("compactionId", "status", "summary", "error", "_meta"))]
            self.losses["compaction"] += 1
            return []
        if kind == "terminal_update":
            self.losses["terminal"] += 1
        elif kind == "state_update":
            if u.get("state") != "unknown":  # "unknown": the stream recorded none
                self.losses["state"] += 1
        else:
            self.losses["content_types"] += 1
        return []

    def _chunks(self, kind: str, u: dict[str, Any]) -> list[dict[str, Any]]:
        """A whole message as v1 streams one: a chunk per block, in order (a client
        joins them by ``messageId``)."""
        out: list[dict[str, Any]] = []
        prev_text = False
        for block in u.get("content") or ():
            if not isinstance(block, dict) or block.get("type") not in BLOCK_TYPES:
                self.losses["content_types"] += 1
                continue
            text = block.get("type") == "text"
            if text and prev_text:
                self.losses["text_blocks"] += 1  # a v1 client joins the two texts
            prev_text = text
            out.append({"sessionUpdate": kind, "content": block,
                        "messageId": u.get("messageId")})
        if not out:
            self.losses["empty_message"] += 1
        elif "_meta" in u:
            out[0]["_meta"] = u["_meta"]
        return out

    def _tool_call(self, u: dict[str, Any]) -> dict[str, Any]:
        """v2's upsert of a whole call as v1's ``tool_call`` (creation: every field)."""
        title = u.get("title")
        if not isinstance(title, str):
            title = u.get("name") if isinstance(u.get("name"), str) else ""
        out: dict[str, Any] = {"sessionUpdate": "tool_call", "toolCallId": u["toolCallId"],
                               "title": title}
        if isinstance(u.get("name"), str):
            out["name"] = u["name"]
        kind = u.get("kind")
        if kind in TOOL_KINDS:
            out["kind"] = kind
        elif kind is not None:
            self.losses["tool_kind"] += 1
        if "status" in u:
            status = STATUS.get(u["status"]) if isinstance(u["status"], str) else None
            if status is not None:
                out["status"] = status
            if status is None or u["status"] != status:
                self.losses["tool_status"] += 1
        if "content" in u:
            out["content"] = [c for item in u["content"] if (c := self._content(item))]
        for f in ("locations", "rawInput", "rawOutput", "_meta"):
            if f in u:
                out[f] = u[f]
        return out

    def _content(self, item: Any) -> dict[str, Any] | None:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "content":
            block = item.get("content")
            if isinstance(block, dict) and block.get("type") in BLOCK_TYPES:
                content: dict[str, Any] = item  # an object: its type is "content"
                return content
        elif kind == "diff":
            return self._diff(item)
        elif kind == "terminal":
            self.losses["terminal"] += 1  # a terminal of the recorded client, not this one
            return None
        self.losses["content_types"] += 1
        return None

    def _diff(self, item: dict[str, Any]) -> dict[str, Any] | None:
        """v2's diff (changes and a patch) as v1's (one path, both texts whole), when the
        patch holds the texts whole (see the module's text); else counted."""
        from acp_pipes.fold.v1 import texts_from_patch

        changes = item.get("changes") or []
        patch = item.get("patch")
        text = patch.get("text") if isinstance(patch, dict) else None
        if (not self.whole_texts or len(changes) != 1 or not isinstance(text, str)
                or changes[0].get("operation") not in ("add", "modify")
                or not isinstance(changes[0].get("path"), str)):
            self.losses["diff_text"] += 1
            return None
        if changes[0].get("operation") == "modify" and "\n@@ " not in text:
            # no hunk: the texts are not in the patch (an older acp-pipes kept only the
            # path of a diff that changed nothing), so none is sent, never guessed
            self.losses["diff_text"] += 1
            return None
        old, new = texts_from_patch(text)
        out: dict[str, Any] = {"type": "diff", "path": changes[0]["path"]}
        if old is not None:
            out["oldText"] = old
        out["newText"] = new
        if "_meta" in item:
            out["_meta"] = item["_meta"]
        return out

    def _plan(self, u: dict[str, Any]) -> list[dict[str, Any]]:
        """v1 has one plan, its entries sent whole each time: a plan of items is sent
        with the entries v1 has values for."""
        plan = u.get("plan") or {}
        entries = plan.get("entries")
        if plan.get("type") != "items" or not isinstance(entries, list):
            self.losses["plan_type"] += 1
            return []
        kept = []
        for e in entries:
            if (isinstance(e, dict) and isinstance(e.get("content"), str)
                    and e.get("status") in PLAN_STATUSES
                    and e.get("priority") in PLAN_PRIORITIES):
                kept.append({k: e[k] for k in ("content", "priority", "status", "_meta")
                             if k in e})
            else:
                self.losses["plan_entries"] += 1
        if plan.get("planId") not in self.plans:
            self.plans.add(plan.get("planId"))
            if len(self.plans) > 1:
                self.losses["plans"] += 1  # it replaces the one before, as v1 has it
        out: dict[str, Any] = {"sessionUpdate": "plan", "entries": kept}
        if "_meta" in plan:  # v1's plan is the update: its _meta is the plan's
            out["_meta"] = plan["_meta"]
        return [out]


def _pick(u: dict[str, Any], kind: str, fields: tuple[str, ...]) -> dict[str, Any]:
    out = {"sessionUpdate": kind}
    for f in fields:
        if f in u:
            out[f] = u[f]
    return out

"""Fold records -> ASR record bodies, one builder per ACP entity kind.

A builder returns ``[(key, body), ...]``: ``key`` identifies the ASR entity (for
duplicates, ASR-717, and superseding, ASR-706; None for events, which are never
duplicates) and ``body`` is the record without its envelope (seq, id, times, native),
which :mod:`acp_pipes.asr.mapping` adds. Each builder quotes the rule it implements.
The updates that are no entity's are :mod:`acp_pipes.asr.events`, on the same checks.

A builder never writes what ``acp-asr --validate`` rejects: a field the record copies
that has a JSON type ACP does not allow there (a title that is a number, a content block
that is no object) raises :class:`Unmappable`, and the converter keeps the entity or
update as an audit-only record instead (ASR-710: an update the recorder cannot map),
nothing invented and nothing dropped.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from acp_pipes.asr.model import AUDIT_PREFIX
from acp_pipes.asr.paths import LOSS_RELATIVE, path_ref
from acp_pipes.protocol.redact import secret_fields

__all__ = ["BUILDERS", "Bodies", "Ctx", "Key", "Unmappable", "audit", "copy_str", "entity_bodies",
           "is_int", "must_str", "with_meta"]

TOOL_FINAL = frozenset({"completed", "failed", "cancelled"})
TOOL_OPEN = frozenset({"pending", "in_progress"})
#: Fold ``why`` values that are the end of a turn for a tool call's status (seed 000).
_TURN_END = frozenset({"turn_end", "replay"})
REDACTED = "<redacted>"

#: An ASR entity's identity, (kind, native ID[, ordinal]): None for an event.
Key = tuple[Any, ...] | None
#: What a builder returns: each record body with its key.
Bodies = list[tuple[Key, dict[str, Any]]]


class Unmappable(Exception):
    """A value the ASR record cannot hold; ``str()`` says which (ASR-710)."""


def must_str(v: Any, what: str) -> Any:
    """``v``, a string: or the record cannot be written."""
    if v.__class__ is not str:
        raise Unmappable(f"{what} is not a string")
    return v


def _blocks(v: Any, what: str) -> list[dict[str, Any]]:
    """A list of content blocks (objects with a string ``type``); None is none."""
    if v is None:
        return []
    if v.__class__ is not list:
        raise Unmappable(f"{what} is not a list")
    for b in v:
        if b.__class__ is not dict or b.get("type").__class__ is not str:
            raise Unmappable(f"{what} holds a block that is not an object with a type")
    return v


def copy_str(body: dict[str, Any], v: dict[str, Any], fields: tuple[str, ...], what: str,
              null: bool = False) -> None:
    """Copy ``fields`` of ``v`` that are present (and not null, unless ``null``: then
    null is copied as null); each must be a string."""
    for f in fields:
        x = v.get(f)
        if x is None:
            if null and f in v:
                body[f] = None
            continue
        if x.__class__ is not str:
            raise Unmappable(f"{what} {f} is not a string")
        body[f] = x


def _path(path: Any, ctx: Ctx) -> Any:
    """ASR-711's PathRef; a path the agent sent that is not absolute is kept as sent and
    marked, and the stream declares the loss of the directory it was against (ASR-722,
    acp-pipes choice)."""
    ref = path_ref(path, ctx.roots)
    if ref.__class__ is dict and ref.get("relative") is True:
        ctx.losses.add(LOSS_RELATIVE)
    return ref


def is_int(v: Any) -> bool:
    return v.__class__ is int  # JSON Schema's integer: not a bool


@dataclass
class Ctx:
    """What a builder needs from its stream and the options."""

    sid: str
    roots: list[dict[str, Any]]
    losses: set[str]
    conn: int = 0
    secret_fields: frozenset[str] = frozenset()
    keep_fields: frozenset[str] = frozenset()
    compaction_through: dict[str, str | None] = field(default_factory=dict)
    last_context: str | None = None
    #: the latest context-participating records: (id, connection, the frame that made
    #: it: a message's or call's first, a result's final status), for ASR-719's extent
    recent: deque[tuple[str, int, object]] = field(default_factory=lambda: deque(maxlen=RECENT))

    def through(self, pos: Any) -> str | None:
        """ASR-719: the last context-participating record when a compaction first seen
        at frame ``pos`` of this connection was first seen: a tool result that arrived
        after it is not in its extent, though it was written first (acp-pipes choice)."""
        conn = self.conn
        if pos.__class__ is int:
            for rid, c, seen in reversed(self.recent):
                if c != conn or seen.__class__ is not int or seen < pos:
                    return rid
        return self.last_context if not self.recent else None


#: Context records remembered for ASR-719 (a compaction's first sight is at most the
#: lane's length behind the records written since).
RECENT = 64


def with_meta(body: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    m = value.get("_meta")
    if isinstance(m, dict) and m:
        body["_meta"] = m  # ASR-708: folded key by key by the fold
    return body


def _partial(body: dict[str, Any], final: bool, has_status: bool) -> dict[str, Any]:
    """ASR-705 snapshots: ``status: partial`` where the type has a status, else a
    capture state saying the record is partial (acp-pipes choice)."""
    if not final:
        if has_status:
            body["status"] = "partial"
        else:
            body.setdefault("capture", {})["record"] = {"state": "partial"}
    return body


# -- messages -------------------------------------------------------------------------


def _message(rec: dict[str, Any], ctx: Ctx) -> Bodies:
    kind = rec["entity"]
    v = rec["value"]
    mid = rec["id"]
    final = rec["final"]
    content = _blocks(v.get("content"), "content")
    if kind == "agent_thought":
        # a reasoning-only message: one reasoning part with the thought's text; non-text
        # blocks are a declared loss (ASR-722 "reasoning")
        texts = []
        for b in content:
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str):
                texts.append(b["text"])
            else:
                ctx.losses.add("reasoning")
        body = {"type": "message", "messageId": mid, "role": "assistant"}
        if v.get("idSource") == "derived":  # an ID the v1 lift derived
            body["idSource"] = "derived"
        body["content"] = [{"type": "reasoning", "text": "".join(texts)}]
        key = ("thought", mid)
    elif kind == "session_message":
        sender = v.get("senderSessionId")
        recipient = v.get("recipientSessionId")
        if recipient != ctx.sid:
            # the sending side (or a side ACP does not name): ASR-735 -> ASR-710
            return [(("session_message", mid), audit("session_message", v))]
        if sender.__class__ is not str:
            # received, but from no one ACP names: a sender is never invented (ASR-735)
            raise Unmappable("names no sender (ASR-735 invents none)")
        body = {"type": "message", "messageId": mid, "role": "user", "author": "agent",
                "origin": "inter_session", "from": {"session": sender},
                "recipients": [{"actor": {"session": recipient}}]}
        body["content"] = content
        key = ("inter_session", mid)
    else:
        role = "user" if kind == "user_message" else "assistant"
        body = {"type": "message", "messageId": mid, "role": role}  # ASR-702: verbatim
        if v.get("idSource") == "derived":  # an ID the v1 lift derived
            body["idSource"] = "derived"
        if rec.get("origin") == "prompt":
            body["origin"] = "prompt"  # ASR-713; never author: human
        body["content"] = content
        key = (role, mid)
    if "assembly" in rec:
        body["assembly"] = rec["assembly"]  # ASR-704
    return [(key, _partial(with_meta(body, v), final, False))]


# -- tool calls ------------------------------------------------------------------------


def _tool(rec: dict[str, Any], ctx: Ctx) -> Bodies:
    v = rec["value"]
    cid = rec["id"]
    final = rec["final"]
    call = _call(cid, v, ctx)
    content = _tool_content(v.get("content"))
    ctx.losses.add("_org.agent-session.acp/tool_status_transitions")  # ASR-722
    why = rec.get("why")
    # a --snapshots checkpoint of an open call is partial (ASR-705): tool_call has no
    # status, so the capture state says so; a call released open at the end of a turn
    # is no snapshot but the call as it stands (dangling until its result comes)
    out: Bodies = [(("tool_call", cid), _partial(with_meta(call, v), why != "snapshot", False))]
    if final:
        _tool_ends(out, cid, v, content, why, ctx)
    return out


def _call(cid: Any, v: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    """The tool_call record: ASR-702, toolCallId -> callId verbatim, callIdSource
    native; its locations' paths as PathRefs (ASR-711)."""
    call: dict[str, Any] = {"type": "tool_call", "callId": cid, "callIdSource": "native"}
    name = v.get("name")
    if name is None:
        call["capture"] = {"name": {"state": "absent"}}
    else:
        call["name"] = must_str(name, "name")
    copy_str(call, v, ("title", "kind"), "the call's")
    if "rawInput" in v:
        call["input"] = v["rawInput"]
    locations = v.get("locations")
    if locations is not None:
        if locations.__class__ is not list:
            raise Unmappable("locations is not a list")
        locs = []
        for loc in locations:
            line = loc.get("line") if loc.__class__ is dict else None
            if loc.__class__ is not dict or (line is not None and not is_int(line)):
                raise Unmappable("a location is not an object with a path and a line")
            loc = dict(loc)
            loc["path"] = _path(must_str(loc.get("path"), "a location's path"), ctx)
            locs.append(loc)  # ASR-711
        call["locations"] = locs
    return call


#: A tool call's final status -> the status of the file changes its diffs become.
_FC_STATUS: dict[Any, str] = {"completed": "applied", "failed": "failed", "cancelled": "unknown"}


def _tool_ends(out: Bodies, cid: Any, v: dict[str, Any], content: list[Any], why: Any,
               ctx: Ctx) -> None:
    """A final tool call: its tool_result (ASR-714) and its diffs as file changes
    (ASR-715), when its status or its turn says it ended."""
    status = v.get("status")
    if status is not None and (status.__class__ is not str or not status):
        status = "other"  # a status of another JSON type, or "": one ACP does not define
    # "at the end of the turn" (seed 000, tool_call_update row): a live turn ends at
    # idle (why turn_end); replayed history ends with its replay window (why replay), so
    # a replayed other/vendor status is written like a live one (ASR-717 -> ASR-707)
    ended = status in TOOL_FINAL or (
        why in _TURN_END and status is not None and status not in TOOL_OPEN)
    if ended and (status in TOOL_FINAL or content or "rawOutput" in v):
        out.append((("tool_result", cid), _result(cid, status, v, content)))
        ctx.losses.add("tool_result.content")
    # ASR-715: diffs in the final content become file changes
    if not (ended or why in ("close", "stop", "replay")):
        return
    fc_status = _FC_STATUS.get(status, "proposed")
    n = 0
    for item in content:
        if isinstance(item, dict) and item.get("type") == "diff":
            out.append((("file_change", cid, n), _file_change(cid, item, fc_status, ctx)))
            n += 1


def _tool_content(content: Any) -> list[Any]:
    """A call's content items, checked for what the records copy from them."""
    if content is None:
        return []
    if content.__class__ is not list:
        raise Unmappable("content is not a list")
    for item in content:
        if item.__class__ is not dict:
            continue  # kept as it is in otherContent
        t = item.get("type")
        if t == "content":
            _blocks([item.get("content")], "a content item")
        elif t == "terminal":
            must_str(item.get("terminalId"), "a terminal item's terminalId")
        elif t == "diff":
            changes = item.get("changes")
            if changes is not None and changes.__class__ is not list:
                raise Unmappable("a diff's changes is not a list")
            for ch in changes or ():
                if ch.__class__ is not dict:
                    continue  # a change that is no object is not mapped
                must_str(ch.get("operation"), "a change's operation")
                must_str(ch.get("path"), "a change's path")
                for f in ("oldPath", "fileType", "mimeType"):
                    if ch.get(f) is not None:
                        must_str(ch[f], f"a change's {f}")
            patch = item.get("patch")
            if patch.__class__ is dict and patch.get("text").__class__ is str:
                must_str(patch.get("format", "git_patch"), "a patch's format")
    return content


def _result(cid: str, status: Any, v: dict[str, Any], content: list[Any]) -> dict[str, Any]:
    """ASR-714: display content from {type: content}, raw from rawOutput, no content."""
    st = "unknown" if status == "other" else status  # table: other -> unknown, vendor kept
    body: dict[str, Any] = {"type": "tool_result", "callId": cid, "status": st,
                            "linkage": "exact"}
    display = [i.get("content") for i in content
               if isinstance(i, dict) and i.get("type") == "content"]
    if display:
        body["displayContent"] = display
    if "rawOutput" in v:
        body["raw"] = v["rawOutput"]
    terms = [i.get("terminalId") for i in content
             if isinstance(i, dict) and i.get("type") == "terminal"]
    if terms:
        body["exec"] = {"terminalId": terms[-1]}
    other = [i for i in content if not (isinstance(i, dict) and i.get("type") in (
        "content", "diff", "terminal"))]
    if other:  # ACP: preserve content types we do not understand
        body["otherContent"] = other
    body["capture"] = {"content": {"state": "absent"}}
    return body


def _file_change(cid: str, diff: dict[str, Any], status: str, ctx: Ctx) -> dict[str, Any]:
    changes = []
    chs = diff.get("changes")
    for ch in chs if isinstance(chs, list) else ():
        if not isinstance(ch, dict):
            continue
        c: dict[str, Any] = {"op": ch.get("operation")}
        c["path"] = _path(ch.get("path"), ctx)
        if ch.get("oldPath") is not None:
            c["oldPath"] = _path(ch["oldPath"], ctx)
        for f in ("fileType", "mimeType"):
            if ch.get(f) is not None:
                c[f] = ch[f]
        changes.append(c)
    body: dict[str, Any] = {"type": "file_change", "cause": {"callId": cid}, "changes": changes}
    patch = diff.get("patch")
    if isinstance(patch, dict) and isinstance(patch.get("text"), str):
        body["patch"] = {"format": patch.get("format", "git_patch"), "text": patch["text"]}
        body["precision"] = "hunks"
    else:
        body["precision"] = "unknown"
    body["status"] = status
    return with_meta(body, diff)


# -- requests ---------------------------------------------------------------------------


def _permission(rec: dict[str, Any], ctx: Ctx) -> Bodies:
    """ASR-716."""
    v = rec["value"]
    body: dict[str, Any] = {"type": "permission", "requestId": rec["id"], "idSource": "derived"}
    copy_str(body, v, ("title", "description"), "the request's")
    if v.get("options") is not None:
        if v["options"].__class__ is not list:
            raise Unmappable("options is not a list")
        body["options"] = v["options"]
    subj = v.get("subject")
    if isinstance(subj, dict):
        if subj.get("type") == "tool_call" and isinstance(subj.get("toolCall"), dict):
            body["subject"] = {"callId": subj["toolCall"].get("toolCallId")}
        elif subj.get("type") == "command":
            body["subject"] = {"command": subj.get("command")}
        else:
            body["subject"] = {"native": subj}
    outcome = v.get("outcome")
    if isinstance(outcome, dict) and isinstance(outcome.get("outcome"), dict):
        outcome = outcome["outcome"]  # the response result wraps the outcome
    if isinstance(outcome, dict):
        body["status"] = "resolved"
        oc = outcome.get("outcome")
        if oc == "selected":
            oid = must_str(outcome.get("optionId"), "the selected optionId")
            body["selectedOptionId"] = oid
            opts = v.get("options")
            for opt in opts if isinstance(opts, list) else ():
                if isinstance(opt, dict) and opt.get("optionId") == oid:
                    # ASR-709: unchanged
                    body["decision"] = must_str(opt.get("kind"), "the selected option's kind")
                    break
        elif oc == "cancelled":
            body["decision"] = "cancelled"
        elif isinstance(oc, str):
            body["decision"] = oc
    elif "error" in v:
        body["status"] = "failed"
    else:
        body["status"] = "pending"
    return [(("permission", rec["id"]), _partial(with_meta(body, v), rec["final"], True))]


_ACTION = {"accept": "answered", "decline": "declined", "cancel": "cancelled"}


def _elicitation(rec: dict[str, Any], ctx: Ctx) -> Bodies:
    """ASR-734 (secret form answers are not recorded); the elicitationId is the
    requestId verbatim (ASR-702)."""
    v = rec["value"]
    body: dict[str, Any] = {"type": "input_request", "requestId": rec["id"],
                            "idSource": v.get("idSource", "derived")}
    if isinstance(v.get("toolCallId"), str):
        body["callId"] = v["toolCallId"]
    body["mode"] = must_str(v.get("mode"), "mode")
    copy_str(body, v, ("message",), "the request's")
    if v.get("requestedSchema") is not None:
        if v["requestedSchema"].__class__ is not dict:
            raise Unmappable("requestedSchema is not an object")
        body["requestedSchema"] = v["requestedSchema"]
    copy_str(body, v, ("url",), "the request's")
    resp = v.get("response")
    if isinstance(resp, dict):
        action = resp.get("action")
        if action.__class__ is not str or not action:
            raise Unmappable("the answer's action is not a string")
        body["status"] = _ACTION.get(action, action)
        if action == "accept" and v.get("mode") == "form" and isinstance(
                resp.get("content"), dict):
            answer, hidden = redact_answer(resp["content"], v.get("requestedSchema"), ctx)
            body["response"] = answer
            if hidden:
                body["capture"] = {"response": {"state": "redacted", "fields": hidden}}
    elif "error" in v:
        body["status"] = "failed"
    else:
        body["status"] = "pending"
    return [(("input_request", rec["id"]), _partial(with_meta(body, v), rec["final"], True))]


def redact_answer(content: dict[str, Any], schema: Any,
                  ctx: Ctx) -> tuple[dict[str, Any], list[str]]:
    """ASR-734: the answer with its secret fields (:func:`acp_pipes.protocol.redact.secret_fields`,
    the rule acp-tee redacts the same answers by) replaced by REDACTED."""
    hide = (set(secret_fields(schema)) | set(ctx.secret_fields)) - set(ctx.keep_fields)
    hidden = sorted(k for k in content if k in hide)
    if not hidden:
        return content, []
    return {k: (REDACTED if k in hide else v) for k, v in content.items()}, hidden


# -- plans, terminals, compactions, subagents --------------------------------------------


def _plan(rec: dict[str, Any], ctx: Ctx) -> Bodies:
    v = rec["value"]
    body: dict[str, Any] = {"type": "plan", "planId": rec["id"],  # ASR-702: verbatim
                            "planType": must_str(v.get("type"), "the plan's type")}
    for k, x in v.items():
        if k not in ("type", "planId", "_meta") and x is not None:  # null: not there
            body[k] = x
    if body.get("entries") is not None and body["entries"].__class__ is not list:
        raise Unmappable("the plan's entries is not a list")
    for f in ("uri", "content"):
        if body.get(f) is not None:
            must_str(body[f], f"the plan's {f}")
    return [(("plan", rec["id"]), _partial(with_meta(body, v), rec["final"], False))]


def _terminal(rec: dict[str, Any], ctx: Ctx) -> Bodies:
    v = rec["value"]
    body: dict[str, Any] = {"type": "terminal", "terminalId": rec["id"]}  # ASR-702
    copy_str(body, v, ("command",), "the terminal's")
    if v.get("cwd") is not None:
        body["cwd"] = _path(must_str(v["cwd"], "cwd"), ctx)
    ex = v.get("exitStatus")
    if ex.__class__ is dict:
        code = ex.get("exitCode")
        if code is not None:
            if not is_int(code):
                raise Unmappable("exitCode is not an integer")
            body["exitCode"] = code
        copy_str(body, ex, ("signal",), "the exit status's")
        body["status"] = "exited"
    elif ex is not None:
        raise Unmappable("exitStatus is not an object")
    else:
        body["status"] = "running"
    out = v.get("output")
    if isinstance(out, dict) and isinstance(out.get("data"), str):
        body["output"] = {"blob": out["data"], "encoding": "base64",
                          "assembly": rec.get("assembly", "folded")}
    return [(("terminal", rec["id"]), _partial(with_meta(body, v), rec["final"], True))]


def _compaction(rec: dict[str, Any], ctx: Ctx) -> Bodies:
    """ASR-719; replaces.throughId by this mapping's convention: the last
    context-participating record written before the compaction was first seen."""
    v = rec["value"]
    cid = rec["id"]
    status = v.get("status")
    if rec["final"] and (status.__class__ is not str or not status):
        raise Unmappable("status is not a string" if status is not None else "no status")
    if v.get("error") is not None:
        must_str(v["error"], "the compaction's error")
    # ASR-702: the compactionId verbatim
    body: dict[str, Any] = {"type": "compaction", "compactionId": cid, "kind": "summary",
                            "status": status}
    summary = _blocks(v.get("summary"), "summary")
    if summary:
        body["summary"] = summary
        body["assembly"] = rec.get("assembly", "folded")
    else:
        body["capture"] = {"summary": {"state": "absent"}}
    if cid not in ctx.compaction_through:
        ctx.compaction_through[cid] = ctx.through(rec.get("pos"))
    if ctx.compaction_through[cid] is not None:
        body["replaces"] = {"throughId": ctx.compaction_through[cid]}
    if v.get("error") is not None:
        body["error"] = v["error"]
    return [(("compaction", cid), _partial(with_meta(body, v), rec["final"], True))]


def _subagent(rec: dict[str, Any], ctx: Ctx) -> Bodies:
    """ASR-721: the association, in the parent's stream."""
    v = rec["value"]
    body: dict[str, Any] = {"type": "subagent", "childSession": rec["id"]}
    copy_str(body, v, ("title", "description"), "the subagent's", null=True)
    for f in ("state", "capabilities"):
        if f in v:
            body[f] = v[f]
    return [(("subagent", rec["id"]), with_meta(body, v))]


#: The builder of each fold entity kind (keyed by whatever JSON the record's entity is).
BUILDERS: dict[object, Callable[[dict[str, Any], Ctx], Bodies]] = {
    "user_message": _message, "agent_message": _message, "agent_thought": _message,
    "session_message": _message, "tool_call": _tool, "permission": _permission,
    "elicitation": _elicitation, "plan": _plan, "terminal": _terminal,
    "compaction": _compaction, "subagent": _subagent,
}


def entity_bodies(rec: dict[str, Any], ctx: Ctx) -> Bodies:
    build = BUILDERS.get(rec.get("entity"))
    if build is None:
        return [(None, audit(str(rec.get("entity")), rec.get("value")))]
    return build(rec, ctx)


# -- events -----------------------------------------------------------------------------


def audit(kind: str, payload: Any) -> dict[str, Any]:
    """ASR-710: an audit-only record with the update in native.record; its type names
    the ``sessionUpdate`` kind, or ``unknown`` for one that is empty or spans lines (no
    record type can: acp-pipes choice)."""
    if not kind or "\n" in kind:
        kind = "unknown"
    return {"type": AUDIT_PREFIX + kind, "native": {"record": payload}}

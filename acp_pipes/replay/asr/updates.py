"""ASR streams replayed as ACP v2 ``session/update`` notifications (ASR-724..733).

What an agent sends when a client resumes the session with ``replayFrom: {"type":
"start"}``: the history as whole-entity upserts in path order (the latest revision of each
entity; ASR-725: upserts, never chunks), then ``session_info_update``, the latest session
``usage_update`` and the current ``state_update``. Nothing is executed and no question
is asked again (ASR-726); what the stream held that ACP replay cannot carry is counted
per category of the seed's "Declared losses (replay)" and reported, never hidden
(ASR-731).

acp-pipes streams are linear (no branch records): every record is on the active path of
the one head, in stream order. Entities are placed at their first record; a superseding
record (``supersedes``) or a later record with the same native ID replaces the content
(ASR-724: latest revision); messages have one ID space per ACP message type
(:func:`~acp_pipes.asr.entities.message_space`), so a prompt, a thought and an agent
message sharing an ID are three messages.

    from acp_pipes.asr.reader import read_streams
    from acp_pipes.replay.asr.updates import Replay
    for stream in read_streams(lines, "s.asr.jsonl"):
        rep = Replay(stream)
        for update in rep.updates(): ...       # session/update payloads, in order
        rep.report()                           # {"event": "replay_losses", ...}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

from acp_pipes.asr.paths import resolve
from acp_pipes.asr.reader import AsrStream
from acp_pipes.io.lines import display_name
from acp_pipes.replay.asr.index import IndexedStream, ReplayIndex, index_stream

__all__ = ["Replay", "STATUS", "notification", "replay_status", "thought_text"]

#: ASR-728: tool_result.status -> ACP tool call status (a vendor value unchanged).
STATUS = {"completed": "completed", "failed": "failed", "denied": "failed",
          "cancelled": "cancelled", "interrupted": "cancelled", "unknown": "other"}
#: Declared losses (replay), in the seed's order, then the ones this mapping adds.
LOSS_ORDER = (
    "inference", "vcs", "workspace_state", "checkpoint", "gap", "tombstone",
    "declarations", "instructions", "config_change", "state_history", "turn_triggers",
    "permission", "input_request", "hook", "memory_change", "delivery", "senders",
    "conversations", "off_path", "lineage", "capture", "redaction", "timestamps",
    # beyond the seed's list: not replayed by this mapping, so still reported
    "diff", "location", "terminal_cwd", "notice", "inter_session", "subagent", "audit",
    "usage_history", "revisions", "reasoning_opaque", "opaque_thought", "content_parts",
    "orphan",
)


def thought_text(part: dict[str, Any]) -> str | None:
    """A reasoning part's text as a thought (the replay table): ``text``, else the
    ``summary`` segments joined by a blank line; None when it has neither (opaque
    reasoning only, never sent)."""
    text = part.get("text")
    if isinstance(text, str):
        return text
    segs = part.get("summary")
    if not isinstance(segs, list) or not segs:
        return None
    return "\n\n".join(s if isinstance(s, str) else str((s or {}).get("text", ""))
                       for s in segs)


def replay_status(status: Any) -> Any:
    """ASR-728."""
    return STATUS.get(status, status) if isinstance(status, str) else status


def envelope(session_id: str) -> bytes:
    """The bytes of a ``session/update`` notification up to its update: what
    ``orjson.dumps`` writes for the whole object, so each notification only serialises
    its update (half the time of wrapping it in two more dicts)."""
    return (b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
            + orjson.dumps(session_id) + b',"update":')


def notification(session_id: str, update: dict[str, Any]) -> bytes:
    """One ``session/update`` notification, JSON-RPC, without LF."""
    return envelope(session_id) + orjson.dumps(update) + b"}}"


def _meta(update: dict[str, Any], *records: dict[str, Any] | None) -> dict[str, Any]:
    """``_meta`` on replayed entities (ASR-708's fold, played back)."""
    meta: dict[str, Any] = {}
    for r in records:
        if r is not None and "_meta" in r and isinstance(r["_meta"], dict):
            meta.update(r["_meta"])
    if meta:
        update["_meta"] = meta
    return update


class _Calls:
    """The tool calls of one replay: those sent, and (made once a call is due before
    its own slot) each callId's tool_call record."""

    __slots__ = ("by_id", "done", "ix")

    def __init__(self, ix: ReplayIndex):
        self.ix = ix
        self.done: set[Any] = set()
        self.by_id: dict[Any, dict[str, Any]] | None = None

    def call(self, cid: str) -> dict[str, Any] | None:
        if self.by_id is None:
            self.by_id = {r.get("callId"): r for k, r in self.ix.slots if k == "tool_call"}
        return self.by_id.get(cid)


class Replay:
    """The replay of one stream: :meth:`updates` in order, :attr:`losses` as they are
    found (complete once :meth:`updates` is exhausted), :meth:`report` (ASR-731)."""

    def __init__(self, stream: AsrStream, session_id: str | None = None):
        self.stream = stream
        self.session_id = session_id or stream.session_id
        self.losses: Counter[str] = Counter()
        self.roots: list[dict[str, Any]] = (
            stream.header.get("workspace") or {}).get("roots") or []
        self.count = 0
        self.config_options: list[Any] | None = None  # the current config (for --serve)
        self.title: Any = None
        self.records: int | None = None  # how many the stream held (known once indexed)
        self._calls: _Calls  # the tool calls of the replay under way (set by updates)
        #: each slot's kind -> the updates its entity replays as (:meth:`updates`)
        self._by_kind: dict[str, Callable[[dict[str, Any]], list[dict[str, Any]]]] = {
            "message": self._message, "tool_call": self._call_slot,
            "tool_result": self._result_slot, "file_change": self._change_slot,
            "plan": self._plan, "terminal": self._terminal, "compaction": self._compaction}

    # -- updates ----------------------------------------------------------------------

    def updates(self) -> Iterator[dict[str, Any]]:
        """The ``session/update`` payloads, in order: history, title, usage, state. Each
        entity is one whole upsert built from its latest revision (ASR-725: never its
        chunks), made by the handler of its kind (``_by_kind``)."""
        ix = self._index()
        self.losses.update(ix.losses)
        if ix.config_options is not None:
            self.config_options = ix.config_options
        self.records = ix.read
        self._calls = _Calls(ix)
        by_kind = self._by_kind.get
        for kind, rec in ix.slots:
            entity = by_kind(kind)
            if entity is not None:
                yield from entity(rec)  # a list: cheaper than a generator
        info, usage = ix.info, ix.usage
        if info is not None:
            self.title = info.get("title")
            yield _meta({"sessionUpdate": "session_info_update", "title": info.get("title")},
                        info)
        if usage is not None:
            yield self._usage(usage)
        yield self._state(ix.state)

    def _index(self) -> ReplayIndex:
        stream = self.stream
        if isinstance(stream, IndexedStream) and stream.index is not None:
            return stream.index
        return index_stream(stream.header, stream.records)

    def _call_slot(self, rec: dict[str, Any]) -> list[dict[str, Any]]:
        """A tool_call's slot: the call, its result and file changes as one upsert,
        unless already sent where its result or change came first (ASR-724)."""
        cid = rec.get("callId")
        calls = self._calls
        if cid in calls.done:
            return []
        calls.done.add(cid)
        ix = calls.ix
        return [self._tool(cid, rec, ix.results.get(cid), ix.changes.get(cid, ()), ix.slots)]

    def _result_slot(self, rec: dict[str, Any]) -> list[dict[str, Any]]:
        return self._early_call(rec.get("callId"))

    def _change_slot(self, rec: dict[str, Any]) -> list[dict[str, Any]]:
        return self._early_call((rec.get("cause") or {}).get("callId"))

    def _early_call(self, cid: Any) -> list[dict[str, Any]]:
        """A result or change before its call (or with no call in the stream): the call
        is sent here, whole, once (ASR-724: at the entity's first record)."""
        calls = self._calls
        if cid in calls.done:
            return []
        if not isinstance(cid, str):
            self.losses["orphan"] += 1  # a change no call caused: nowhere to put it
            return []
        calls.done.add(cid)
        ix = calls.ix
        return [self._tool(cid, calls.call(cid), ix.results.get(cid), ix.changes.get(cid, ()),
                           ix.slots)]

    def _usage(self, usage: dict[str, Any]) -> dict[str, Any]:
        cw = usage["contextWindow"]
        u: dict[str, Any] = {"sessionUpdate": "usage_update", "used": cw.get("used"),
                             "size": cw.get("size")}
        cost = usage.get("cost")
        if isinstance(cost, dict) and cost.get("amount") is not None:
            u["cost"] = {"amount": cost["amount"], "currency": cost.get("currency")}
        return _meta(u, usage)

    def notifications(self) -> Iterator[bytes]:
        """:meth:`updates` as JSON-RPC lines (without LF)."""
        head, dumps = envelope(self.session_id), orjson.dumps
        for u in self.updates():
            self.count += 1
            yield head + dumps(u) + b"}}"

    def _message(self, rec: dict[str, Any]) -> list[dict[str, Any]]:
        """Messages (table), reasoning as thoughts (ASR-727), refusals as text."""
        mid = rec.get("messageId")
        parts = rec.get("content")
        reasoning = []
        blocks = []
        for p in parts if isinstance(parts, list) else ():
            if not isinstance(p, dict):
                self.losses["content_parts"] += 1
                continue
            kind = p.get("type")
            if kind == "reasoning":
                reasoning.append(p)
            elif kind == "refusal":
                text = p.get("text", p.get("refusal"))
                blocks.append({"type": "text", "text": text if isinstance(text, str) else ""})
            else:
                blocks.append(p)
        if rec.get("role") == "user":
            if reasoning:
                self.losses["content_parts"] += len(reasoning)
            return [_meta({"sessionUpdate": "user_message", "messageId": mid,
                           "content": blocks}, rec)]
        if reasoning and not blocks:  # a reasoning-only message: one agent_thought
            content = [c for p in reasoning if (c := self._thought(p)) is not None]
            if not content:  # opaque reasoning only: nothing a client can show
                self.losses["opaque_thought"] += 1
                return []
            return [_meta({"sessionUpdate": "agent_thought", "messageId": mid,
                           "content": content}, rec)]
        # ASR-727: thoughts before the agent_message, <n> counting every reasoning part
        out = []
        for n, p in enumerate(reasoning):
            c = self._thought(p)
            if c is None:
                self.losses["opaque_thought"] += 1
                continue
            out.append({"sessionUpdate": "agent_thought", "messageId": f"{mid}#thought-{n}",
                        "content": [c]})
        out.append(_meta({"sessionUpdate": "agent_message", "messageId": mid,
                          "content": blocks}, rec))
        return out

    def _thought(self, part: dict[str, Any]) -> dict[str, Any] | None:
        """Text from ``reasoning.text``, else the summary segments joined by a blank line;
        opaque reasoning and signatures are never sent. None: the part has neither text
        nor summary (opaque content only), so it has no thought to send."""
        if set(part) - {"type", "text", "summary"}:
            self.losses["reasoning_opaque"] += 1
        text = thought_text(part)
        return None if text is None else {"type": "text", "text": text}

    def _abs(self, ref: Any) -> str | None:
        """ASR-729/711: a PathRef back to an absolute path (None: its root is redacted)."""
        if isinstance(ref, dict):
            return resolve(ref, self.roots)
        return ref if isinstance(ref, str) else None

    def _tool(self, cid: Any, call: dict[str, Any] | None, result: dict[str, Any] | None,
              change_slots: Iterable[int], slots: list[list[Any]]) -> dict[str, Any]:
        """``tool_call`` + paired ``tool_result`` (+ its file changes) as one upsert."""
        u: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": cid}
        if call is not None:
            self._call_fields(u, call)
        content: list[Any] = []
        if result is not None:
            u["status"] = replay_status(result.get("status"))  # ASR-728
            shown = result.get("displayContent")
            if shown is None:
                shown = result.get("content")
            for block in shown or ():
                content.append({"type": "content", "content": block})
        for slot in change_slots:
            diff = self._diff(slots[slot][1])
            if diff is not None:
                content.append(diff)
        if result is not None:
            self._result_tail(u, content, result)
        if content or result is not None:
            u["content"] = content
        # a dangling call (no result): no status at all, never a terminal one
        return _meta(u, call, result)

    def _call_fields(self, u: dict[str, Any], call: dict[str, Any]) -> None:
        """What the tool_call record gives the upsert: name, title, kind, locations
        (absolute again, ASR-729), input."""
        for f in ("name", "title", "kind"):
            if f in call:
                u[f] = call[f]
        if isinstance(call.get("locations"), list):
            locs = []
            for loc in call["locations"]:
                if not isinstance(loc, dict):
                    continue
                path = self._abs(loc.get("path"))
                if path is None:
                    self.losses["location"] += 1
                    continue
                locs.append({**loc, "path": path})
            u["locations"] = locs
        if "input" in call:
            u["rawInput"] = call["input"]

    @staticmethod
    def _result_tail(u: dict[str, Any], content: list[Any], result: dict[str, Any]) -> None:
        """What follows the diffs from the tool_result: its terminal, its other content,
        its raw output."""
        term = (result.get("exec") or {}).get("terminalId") if isinstance(
            result.get("exec"), dict) else None
        if isinstance(term, str):
            content.append({"type": "terminal", "terminalId": term})
        content.extend(x for x in result.get("otherContent") or () if isinstance(x, dict))
        if "raw" in result:
            u["rawOutput"] = result["raw"]

    def _diff(self, fc: dict[str, Any]) -> dict[str, Any] | None:
        """ASR-729: a file change as diff content with absolute paths, or None (and the
        loss counted) when a path's root is redacted."""
        out = []
        for ch in fc.get("changes") or ():
            if not isinstance(ch, dict):
                continue
            c: dict[str, Any] = {"operation": ch.get("op")}
            for f in ("path", "oldPath"):
                if f in ch:
                    p = self._abs(ch[f])
                    if p is None:
                        self.losses["diff"] += 1
                        return None
                    c[f] = p
            for f in ("fileType", "mimeType"):
                if ch.get(f) is not None:
                    c[f] = ch[f]
            out.append(c)
        d: dict[str, Any] = {"type": "diff", "changes": out}
        patch = fc.get("patch")
        if isinstance(patch, dict) and isinstance(patch.get("text"), str):
            d["patch"] = {"format": patch.get("format", "git_patch"), "text": patch["text"]}
        return _meta(d, fc)

    def _plan(self, rec: dict[str, Any]) -> list[dict[str, Any]]:
        plan = {"type": rec.get("planType"), "planId": rec.get("planId")}
        for k, v in rec.items():
            if k not in _PLAN_SKIP:
                plan[k] = v
        # the plan's _meta is the plan's own (PlanItems._meta in the v2 schema), as the
        # fold keeps it; the update's (PlanUpdate._meta) was patched into it
        return [{"sessionUpdate": "plan_update", "plan": _meta(plan, rec)}]

    def _terminal(self, rec: dict[str, Any]) -> list[dict[str, Any]]:
        """ASR-726: a display-only snapshot; nothing is started."""
        u: dict[str, Any] = {"sessionUpdate": "terminal_update",
                             "terminalId": rec.get("terminalId")}
        if "command" in rec:
            u["command"] = rec["command"]
        if "cwd" in rec:
            cwd = self._abs(rec["cwd"])
            if cwd is None:
                self.losses["terminal_cwd"] += 1
            else:
                u["cwd"] = cwd
        out = rec.get("output")
        if isinstance(out, dict) and isinstance(out.get("blob"), str):
            u["output"] = {"data": out["blob"]}
        if rec.get("status") == "exited":
            ex = {}
            if rec.get("exitCode") is not None:
                ex["exitCode"] = rec["exitCode"]
            if rec.get("signal") is not None:
                ex["signal"] = rec["signal"]
            u["exitStatus"] = ex
        return [_meta(u, rec)]

    def _compaction(self, rec: dict[str, Any]) -> list[dict[str, Any]]:
        u: dict[str, Any] = {"sessionUpdate": "compaction_update",
                             "compactionId": rec.get("compactionId"),
                             "status": rec.get("status") or "completed"}
        if isinstance(rec.get("summary"), list):
            u["summary"] = [b for b in rec["summary"] if isinstance(b, dict)]
        if rec.get("error") is not None:
            u["error"] = rec["error"]
        return [_meta(u, rec)]

    def _state(self, rec: dict[str, Any] | None) -> dict[str, Any]:
        """The current state only (table); ``unknown`` when the stream recorded none."""
        if rec is None:
            return {"sessionUpdate": "state_update", "state": "unknown"}
        u: dict[str, Any] = {"sessionUpdate": "state_update", "state": rec["state"]}
        for f in ("stopReason", "error", "usage"):
            if rec.get(f) is not None:
                u[f] = rec[f]
        return _meta(u, rec)

    def _read(self) -> int:
        """How many records the stream held, before :meth:`updates` counted them."""
        stream = self.stream
        if isinstance(stream, IndexedStream) and stream.index is not None:
            return stream.index.read
        return len(stream.records)

    # -- the report ---------------------------------------------------------------------

    def report(self) -> dict[str, Any]:
        """ASR-731: what the stream held that the replay does not carry. Never complete:
        even a stream with no listed loss went through a lossy recording (ASR-617)."""
        order = {k: i for i, k in enumerate(LOSS_ORDER)}
        losses = dict(sorted(self.losses.items(), key=lambda kv: (order.get(kv[0], 99), kv[0])))
        out = {"event": "replay_losses", "complete": False,
               "source": display_name(self.stream.source),
               "sessionId": self.stream.session_id}
        if self.session_id != self.stream.session_id:
            out["replayedAs"] = self.session_id
        out["records"] = self.records if self.records is not None else self._read()
        out["updates"] = self.count
        out["losses"] = losses
        prod = self.stream.header.get("producer")
        out["recordingLosses"] = list(prod.get("lossy") or []) if isinstance(prod, dict) else []
        return out


_PLAN_SKIP = frozenset({"type", "planId", "planType", "seq", "id", "ts", "tsSource",
                        "observedAt", "native", "supersedes", "copiedFrom", "capture",
                        "_meta", "assembly", "origin"})

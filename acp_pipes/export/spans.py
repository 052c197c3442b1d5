"""ASR records -> span descriptions: the OpenTelemetry GenAI mapping, as pure iterators.

One trace per ACP session; the session is a span of its own, each prompt turn an
``invoke_agent`` span under it, each tool call an ``execute_tool`` span under its turn.
Nothing here knows the OpenTelemetry SDK: :mod:`acp_pipes.export.otlp` turns these
descriptions into the SDK's spans at the edge. docs/acp-export.md lists every attribute
and which are acp-pipes' own (the GenAI conventions say nothing of them).

IDs are derived from the session ID and the record IDs (blake3), so exporting the same
stream twice gives the same trace and span IDs, and a collector that deduplicates keeps
one copy. Times are the recorder's receipt times (``ts``, ASR-707); records of replayed
history (``observedAt`` without ``ts``) are no turn and no call: they happened before,
and another recording (or none) holds their times.

Memory: a turn's spans are held until the turn ends (its tools, their events), then
given out; nothing else grows with the stream but the map of calls still open.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from acp_pipes.export.fields import DEFAULT_CAP, Ids, capped, ts_ns
from acp_pipes.protocol.messages import is_reasoning, texts_of

__all__ = ["Event", "Link", "Span", "session_spans"]

@dataclass
class Event:
    name: str
    time: int  # ns since the epoch
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass
class Link:
    trace_id: int
    span_id: int
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass
class Span:
    """One span as it will be exported: what the SDK's ReadableSpan is made from."""

    name: str
    trace_id: int
    span_id: int
    parent_id: int | None
    start: int
    end: int
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    kind: str = "internal"  # "internal" | "client"
    status: str = "unset"  # "unset" | "ok" | "error"
    status_message: str | None = None
    parent_remote: bool = False  # the parent is another process's span (a traceparent)
    # where the span's end is still to be found: (connection, last frame)
    _until: tuple[int, int] | None = None
    _result: bool = False  # a tool call's result was seen (else it ends with its turn)




def _frames(rec: dict) -> tuple[int, int, int] | None:
    """(connection, first frame, last frame) of a record's ``native.ref`` (ASR-723)."""
    native = rec.get("native")
    ref = native.get("ref") if type(native) is dict else None
    if type(ref) is not dict:
        return None
    frames, conn = ref.get("frames"), ref.get("connection")
    if type(frames) is not list or not frames or type(conn) is not int:
        return None
    nums = [f for f in frames if type(f) is int]
    if not nums:
        return None
    return conn, min(nums), max(nums)


def _text_size(blocks: Any) -> int:
    """The UTF-8 size of the texts of ACP content (lone surrogates as they were sent)."""
    return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts_of(blocks)[0])


# ACP's token usage (state.usage, the unstable per-turn usage) -> GenAI's names; the
# last two have no GenAI name: acp-pipes' own under gen_ai.usage.*
_TOKENS = {
    "inputTokens": "gen_ai.usage.input_tokens",
    "outputTokens": "gen_ai.usage.output_tokens",
    "cachedReadTokens": "gen_ai.usage.cache_read.input_tokens",
    "cachedWriteTokens": "gen_ai.usage.cache_creation.input_tokens",
    "thoughtTokens": "gen_ai.usage.reasoning.output_tokens",
    "totalTokens": "gen_ai.usage.total_tokens",
}


def _usage_summary(rec: dict) -> dict[str, Any]:
    """usage_summary (ASR-720: ACP's usage_update) as gen_ai.usage.* attributes."""
    out: dict[str, Any] = {}
    window = rec.get("contextWindow")
    if type(window) is dict:
        for k, name in (("used", "gen_ai.usage.context_window.used"),
                        ("size", "gen_ai.usage.context_window.size")):
            if type(window.get(k)) in (int, float):
                out[name] = window[k]
    cost = rec.get("cost")
    if type(cost) is dict:
        if type(cost.get("amount")) in (int, float):
            out["gen_ai.usage.cost.amount"] = float(cost["amount"])
        if isinstance(cost.get("currency"), str):
            out["gen_ai.usage.cost.currency"] = cost["currency"]
    return out


def _tokens(usage: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if type(usage) is dict:
        for k, name in _TOKENS.items():
            v = usage.get(k)
            if type(v) is int:
                out[name] = v
    return out


#: What an agent does in a turn: the first of these with no turn open may start one.
_ACTIVITY = frozenset({"message", "tool_call", "permission", "input_request", "plan",
                       "terminal", "subagent"})


class _Session:
    """The state of one session's mapping while its records go by."""

    def __init__(self, header: dict, ids: Ids, cap: int):
        self.sid = sid = header["sessionId"]  # a string: iter_streams refuses another
        self.ids = ids
        self.cap = cap
        self.trace = ids.trace(sid)
        agent = header.get("agent")
        if type(agent) is not dict:
            agent = {}
        self.agent = agent.get("name") if isinstance(agent.get("name"), str) else "agent"
        self.common = {"gen_ai.conversation.id": sid, "gen_ai.agent.name": self.agent}
        if isinstance(agent.get("version"), str):
            self.common["gen_ai.agent.version"] = agent["version"]
        self.root = Span(
            name=f"session {self.agent}", trace_id=self.trace,
            span_id=ids.span(sid, "session"), parent_id=ids.remote_parent(sid),
            start=0, end=0, attributes={**self.common, "acp.session.id": sid},
        )
        self.root.parent_remote = self.root.parent_id is not None
        self._lineage(header)
        self.first: int | None = None
        self.last: int | None = None
        self.turn: Span | None = None
        self.turn_tools: list[Span] = []
        self.loose: list[Span] = []  # calls outside any turn: given with the session span
        self.calls: dict[str, Span] = {}  # callId -> its span, while it can still change
        self.waiting: list[Span] = []  # spans whose end is the next frame after theirs
        self.model: str | None = None
        # the first live record since the last turn ended, and the calls made since:
        # a turn with no prompt (a subagent's, driven by its parent) starts there
        self.idle_since: int | None = None
        self.orphans: list[Span] = []
        self.turns = 0
        self.replayed = 0
        #: what each type of record does to the spans
        self.handlers: dict[str, Callable[[dict, int], list[Span] | None]] = {
            "message": self.message, "tool_call": self.tool_call,
            "tool_result": self.tool_result, "state": self.state,
            "permission": self.permission, "input_request": self.input_request,
            "usage_summary": self.usage_summary, "config_change": self.config_change,
            "subagent": self.subagent, "session_info": self.session_info,
        }

    def _lineage(self, header: dict) -> None:
        """A fork and a subagent link to the session they came from (ASR-718, ASR-721)."""
        lineage = header.get("lineage")
        if type(lineage) is not dict:
            return
        for key, kind in (("forkedFrom", "forked_from"), ("spawnedBy", "spawned_by")):
            got = lineage.get(key)
            if type(got) is dict and isinstance(got.get("session"), str):
                parent = got["session"]
                self.root.links.append(Link(
                    self.ids.trace(parent), self.ids.span(parent, "session"),
                    {"acp.link.type": kind, "gen_ai.conversation.id": parent}))
                self.root.attributes[f"acp.session.{kind}"] = parent

    # -- times -----------------------------------------------------------------------

    def seen(self, t: int, rec: dict) -> None:
        """A record at ``t``: the spans waiting for a frame after theirs end here."""
        if self.first is None or t < self.first:  # connections interleave: the earliest
            self.first = t
        self.last = t if self.last is None else max(self.last, t)
        if self.waiting:
            where = _frames(rec)
            if where is not None:
                conn, first, _ = where
                keep = []
                for s in self.waiting:
                    c, until = s._until  # type: ignore[misc]  # a waiting span has one
                    if c == conn and first >= until:
                        s.end = max(s.start, t)
                        s._until = None
                    else:
                        keep.append(s)
                self.waiting = keep

    def _ends_after(self, span: Span, rec: dict, t: int) -> None:
        """A span that ends with the frames of ``rec``: ASR keeps one time per record
        (its first frame's), so its end is the receipt time of the next record that
        starts at or after its last frame, the turn's end at the latest (acp-pipes'
        convention: a span may end a little late, never early)."""
        where = _frames(rec)
        span.end = max(span.start, t)
        if where is None or where[1] == where[2]:
            return  # no frames, or one: its time is the record's own
        span._until = (where[0], where[2])
        if span not in self.waiting:
            self.waiting.append(span)

    # -- turns -----------------------------------------------------------------------

    def open_turn(self, t: int, rec: dict, prompt: dict | None) -> Span:
        self.turns += 1
        attrs = {**self.common, "gen_ai.operation.name": "invoke_agent",
                 "acp.turn.number": self.turns}
        if self.model:
            attrs["gen_ai.request.model"] = self.model
        if prompt is not None:
            if isinstance(prompt.get("messageId"), str):
                attrs["acp.prompt.message_id"] = prompt["messageId"]
            attrs["acp.prompt.size"] = _text_size(prompt.get("content"))
        self.turn = turn = Span(
            name=f"invoke_agent {self.agent}", trace_id=self.trace,
            span_id=self.ids.span(self.sid, "turn:" + str(rec.get("id"))),
            parent_id=self.root.span_id, start=t, end=t, attributes=attrs, kind="client")
        self.turn_tools = []
        return turn

    def close_turn(self, turn: Span, t: int | None) -> list[Span]:
        """End ``turn``, the open one (``self.turn``), at ``t`` (None: cut off)."""
        if t is not None:
            turn.end = max(turn.start, t)
        else:  # cut off: the turn ends at the last time the stream holds
            turn.end = max(turn.start, self.last or turn.start)
            turn.attributes["acp.turn.complete"] = False
        for s in self.turn_tools:
            if s._until is not None or not s._result:  # still running when the turn ended
                s.end = max(s.start, turn.end)
                s._until = None
            turn.end = max(turn.end, s.end)
        self.waiting = [s for s in self.waiting if s._until is not None
                        and s not in self.turn_tools]
        for s in self.turn_tools:  # given out: a later record of the call starts anew
            call_id = s.attributes.get("gen_ai.tool.call.id")
            if call_id is not None and self.calls.get(call_id) is s:  # (no key is None)
                del self.calls[call_id]
        out = [turn, *self.turn_tools]
        self.turn = None
        self.turn_tools = []
        self.idle_since = None
        self.orphans = []
        return out

    def parent(self) -> Span:
        return self.turn if self.turn is not None else self.root

    def event_target(self, call_id: Any) -> Span:
        """A permission or elicitation about a call goes on the call's span while it is
        still held, else on the turn (or the session)."""
        if isinstance(call_id, str):
            span = self.calls.get(call_id)
            if span is not None and (span in self.turn_tools or span in self.loose):
                return span
        return self.parent()

    # -- records ---------------------------------------------------------------------

    def tool_call(self, rec: dict, t: int) -> None:
        call_id = rec.get("callId")
        span = self.calls.get(call_id) if isinstance(call_id, str) else None
        held = span is not None and (span in self.turn_tools or span in self.loose)
        if span is None or not held:
            parent = self.parent()
            span = Span(name="execute_tool", trace_id=self.trace,
                        span_id=self.ids.span(self.sid, "tool:" + str(rec.get("id"))),
                        parent_id=parent.span_id, start=t, end=t,
                        attributes={**self.common, "gen_ai.operation.name": "execute_tool"})
            if self.turn is not None:
                self.turn_tools.append(span)
            else:
                self.loose.append(span)
                self.orphans.append(span)
            if isinstance(call_id, str):
                self.calls[call_id] = span
                span.attributes["gen_ai.tool.call.id"] = call_id
            self._ends_after(span, rec, t)
        a = span.attributes
        name = rec.get("name") if isinstance(rec.get("name"), str) else None
        title = rec.get("title") if isinstance(rec.get("title"), str) else None
        tool = name or title or "tool"
        span.name = f"execute_tool {tool}"
        a["gen_ai.tool.name"] = tool
        if title is not None:
            a["acp.tool.title"] = title
        if isinstance(rec.get("kind"), str):
            a["acp.tool.kind"] = rec["kind"]
        got = capped(rec.get("input"), self.cap)
        if got is not None:
            a["gen_ai.tool.call.arguments"], a["acp.tool.call.arguments.size"] = got

    def tool_result(self, rec: dict, t: int) -> None:
        call_id = rec.get("callId")
        span = self.calls.get(call_id) if isinstance(call_id, str) else None
        if span is None:
            return
        status = rec.get("status")
        a = span.attributes
        span._result = True
        if isinstance(status, str):
            a["acp.tool.status"] = status
            if status == "failed":
                span.status, span.status_message = "error", "tool call failed"
                a["error.type"] = "tool_call_failed"
            elif status == "completed":
                span.status = "ok"
        out: Any = rec.get("raw")
        if out is None and rec.get("displayContent") is not None:
            texts = [b["text"] for b in rec["displayContent"]
                     if type(b) is dict and isinstance(b.get("text"), str)]
            out = "\n".join(texts) if texts else rec["displayContent"]
        got = capped(out, self.cap)
        if got is not None:
            a["gen_ai.tool.call.result"], a["acp.tool.call.result.size"] = got
        exec_ = rec.get("exec")
        if type(exec_) is dict and isinstance(exec_.get("terminalId"), str):
            a["acp.tool.terminal_id"] = exec_["terminalId"]
        self._ends_after(span, rec, t)

    def state(self, rec: dict, t: int) -> list[Span] | None:
        state = rec.get("state")
        if state == "running":
            if self.turn is None:
                self.open_turn(t, rec, None)
            elif "acp.turn.running" not in self.turn.attributes:
                # v2: the turn runs from `running` to `idle`
                self.turn.start = t
                self.turn.attributes["acp.turn.running"] = True
            return None
        if state == "idle":
            return self.idle(rec, t)
        if state in ("resumed", "ended"):
            self.root.events.append(Event(f"acp.session.{state}", t))
        else:  # requires_action, a vendor state: on the turn
            self.parent().events.append(Event("acp.state", t, {"acp.state": str(state)}))
        return None

    def idle(self, rec: dict, t: int) -> list[Span]:
        """The turn ends (one opened here when no prompt record began it)."""
        turn = self.turn
        if turn is None:  # no prompt record: a subagent's turn, or a prompt
            # answered with an error; it started with the first record since the
            # last turn (or, with none, is known only by its end)
            turn = self.open_turn(self.idle_since if self.idle_since is not None
                                  else t, rec, None)
            turn.attributes["acp.turn.prompted"] = False
            for o in self.orphans:
                o.parent_id = turn.span_id
                self.loose.remove(o)
                self.turn_tools.append(o)
        a = turn.attributes
        stop = rec.get("stopReason")
        if isinstance(stop, str):
            a["gen_ai.response.finish_reasons"] = [stop]
            a["acp.stop_reason"] = stop
            if stop == "refusal":
                turn.status = "error"
                turn.status_message = "refusal"
                a["error.type"] = "refusal"
        err = rec.get("error")
        if type(err) is dict:
            turn.status = "error"
            msg = err.get("message")
            turn.status_message = msg if isinstance(msg, str) else "error"
            a["error.type"] = str(err.get("code", "error"))
        elif turn.status == "unset":
            turn.status = "ok"
        a.update(_tokens(rec.get("usage")))
        return self.close_turn(turn, t)

    def feed(self, rec: dict) -> Iterator[list[Span]]:
        t = ts_ns(rec.get("ts"))
        typ = rec.get("type")
        if t is None:
            if rec.get("observedAt") is not None:
                self.replayed += 1  # replayed history: no turn, no call (ASR-707)
                return
            t = self.last if self.last is not None else 0  # a capture without times
        self.seen(t, rec)
        if self.turn is None and self.idle_since is None and typ in _ACTIVITY:
            self.idle_since = t
        handle = self.handlers.get(typ) if typ.__class__ is str else None
        if handle is not None:
            done = handle(rec, t)
            if done is not None:
                yield done

    # -- one handler per record type (:attr:`handlers`); each returns the spans it ended

    def message(self, rec: dict, t: int) -> list[Span] | None:
        if rec.get("role") == "user" and rec.get("origin") == "prompt":
            ended = None
            if self.turn is not None:  # the last prompt was never answered
                ended = self.close_turn(self.turn, None)
            self.open_turn(t, rec, rec)
            return ended
        if self.turn is not None and rec.get("role") == "assistant":
            a = self.turn.attributes
            content = rec.get("content")
            reasoning = type(content) is list and content and is_reasoning(content[0])
            key = "acp.turn.reasoning_messages" if reasoning else "acp.turn.messages"
            a[key] = a.get(key, 0) + 1
            if not reasoning:
                size = _text_size(content)
                a["acp.turn.output.size"] = a.get("acp.turn.output.size", 0) + size
        return None

    def permission(self, rec: dict, t: int) -> None:
        attrs = {"acp.permission.request_id": str(rec.get("requestId"))}
        for k, name in (("title", "acp.permission.title"),
                        ("status", "acp.permission.status"),
                        ("decision", "acp.permission.decision"),
                        ("selectedOptionId", "acp.permission.selected_option_id")):
            if isinstance(rec.get(k), str):
                attrs[name] = rec[k]
        subject = rec.get("subject")
        if type(subject) is not dict:
            subject = {}
        if isinstance(subject.get("callId"), str):
            attrs["gen_ai.tool.call.id"] = subject["callId"]
        if isinstance(subject.get("command"), str):
            attrs["acp.permission.command"] = subject["command"]
        self.event_target(subject.get("callId")).events.append(
            Event("acp.permission", t, attrs))

    def input_request(self, rec: dict, t: int) -> None:
        attrs = {"acp.elicitation.request_id": str(rec.get("requestId"))}
        for k, name in (("mode", "acp.elicitation.mode"),
                        ("message", "acp.elicitation.message"),
                        ("status", "acp.elicitation.status")):
            if isinstance(rec.get(k), str):
                attrs[name] = rec[k]
        if isinstance(rec.get("callId"), str):
            attrs["gen_ai.tool.call.id"] = rec["callId"]
        self.event_target(rec.get("callId")).events.append(
            Event("acp.elicitation", t, attrs))

    def usage_summary(self, rec: dict, t: int) -> None:
        got = _usage_summary(rec)
        self.root.attributes.update(got)
        if self.turn is not None:
            self.turn.attributes.update(got)

    def config_change(self, rec: dict, t: int) -> None:
        model = rec.get("model")
        if type(model) is dict and isinstance(model.get("id"), str):
            self.model = model["id"]
            self.root.attributes["gen_ai.request.model"] = self.model
            if self.turn is not None:
                self.turn.attributes["gen_ai.request.model"] = self.model
        if isinstance(rec.get("mode"), str):
            self.parent().attributes["acp.mode"] = rec["mode"]

    def subagent(self, rec: dict, t: int) -> None:
        child = rec.get("childSession")
        if isinstance(child, str) and rec.get("supersedes") is None:
            attrs = {"acp.link.type": "subagent", "gen_ai.conversation.id": child}
            if isinstance(rec.get("title"), str):
                attrs["acp.subagent.title"] = rec["title"]
            self.parent().links.append(Link(self.ids.trace(child),
                                            self.ids.span(child, "session"), attrs))

    def session_info(self, rec: dict, t: int) -> None:
        if isinstance(rec.get("title"), str):
            self.root.attributes["acp.session.title"] = rec["title"]

    def finish(self) -> list[Span]:
        out: list[Span] = []
        if self.turn is not None:
            out.extend(self.close_turn(self.turn, None))
        for s in self.loose:
            if s._until is not None or not s._result:
                s.end = max(s.start, self.last or s.start)
                s._until = None
        root = self.root
        root.start = self.first if self.first is not None else 0
        root.end = max(root.start, self.last or 0, *(s.end for s in out), 0)
        for s in self.loose:
            root.end = max(root.end, s.end)
        root.attributes["acp.session.turns"] = self.turns
        if self.replayed:
            root.attributes["acp.session.replayed_records"] = self.replayed
        return [*out, *self.loose, root]


def session_spans(header: dict, records: Iterable[dict], ids: Ids | None = None,
                  cap: int = DEFAULT_CAP) -> Iterator[list[Span]]:
    """The spans of one ASR stream, a batch at a time: each turn's (the turn and its
    tool calls) when it ends, then the session's span with the calls outside any turn.
    Children come before their parent (the session span is last): every ID is known
    from the start, so a receiver joins them whatever the order."""
    s = _Session(header, ids or Ids(), cap)
    for rec in records:
        yield from s.feed(rec)
    yield s.finish()

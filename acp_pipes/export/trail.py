"""ASR streams -> Agent Trail files (schema 0.1.0): one ``.trail.jsonl`` per session.

Agent Trail (https://agent-trail.dev, Apache-2.0) stores agent sessions as JSONL: a
``session`` header, then events (``user_message``, ``agent_message``, ``tool_call``,
``tool_result``, ``system_event``, ...). :func:`trail_lines` is the mapping, a pure
iterator from one ASR stream's header and records to the file's lines;
:func:`export_trail` reads any stage and writes the files. docs/acp-export.md lists the
mapping and what Agent Trail cannot hold, which every file also declares in its
header's ``meta["x-acp-pipes/losses"]``.

Agent Trail wants UUID or ULID identifiers: every ID is derived (blake3) from the ACP
session ID and the ASR record's ID, so exporting again gives the same file; the ACP IDs
themselves are kept beside them (``semantic.call_id``, the header's meta).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC
from typing import Any

import orjson
from blake3 import blake3

from acp_pipes.errors import Note, Warn
from acp_pipes.export.fields import DEFAULT_CAP, capped, ts_ns
from acp_pipes.protocol.messages import block_text, is_reasoning

__all__ = ["LOSSES", "SCHEMA_VERSION", "Written", "export_trail", "trail_files", "trail_lines"]

SCHEMA_VERSION = "0.1.0"
SUFFIX = ".trail.jsonl"
VENDOR = "x-acp-pipes"

#: Agent Trail's registry of agent names (spec section 14): an ACP agent whose label is
#: one of these gets its name, any other ``x-acp/<label>``.
REGISTRY = frozenset({"claude-code", "pi", "openclaw", "codex-cli", "cursor", "opencode",
                      "aider", "amp", "cline", "crush", "kimi-code", "qwen-code", "factory",
                      "vibe", "copilot-cli", "copilot-chat", "chatgpt", "clawdbot"})

#: What an Agent Trail file cannot hold of an ASR stream, always declared (the stream's
#: own ASR-722 losses are declared beside them, under ``asr``).
LOSSES = [
    "content: blocks that are not text (images, audio, resources) in messages",
    "tool_call.input, tool_result output: cut at --max-attribute-bytes (sizes kept)",
    "tool_call: title, locations; file_change records (diffs)",
    "terminal records (their output is in the call's result text when the agent put it)",
    "plan records; compaction records (a system_event names each)",
    "usage_summary (context window, cost); per-turn token usage",
    "permission: its options (the decision and the option chosen are kept)",
    "input_request: the requested schema; a form's answer is one text",
    "time: Agent Trail has milliseconds; ASR microseconds",
    "native.ref: the wire frames each record came from",
]

_X = VENDOR + "/"


def _uid(*parts: str) -> str:
    """A derived identifier in Agent Trail's unhyphenated-UUID shape (32 lowercase hex)."""
    h = blake3(b"acp-export/trail\0" + "\0".join(parts).encode("utf-8", "surrogatepass"))
    return h.hexdigest(16)


def _ms(t: int) -> str:
    """ns since the epoch -> ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (Agent Trail's writer time)."""
    from datetime import datetime

    ms = t // 1_000_000
    d = datetime.fromtimestamp(ms // 1000, tz=UTC)
    return d.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def _agent_name(header: dict) -> str:
    agent = header.get("agent")
    if type(agent) is not dict:
        agent = {}
    name = agent.get("name")
    if not isinstance(name, str):
        name = ""
    label = name.removeprefix("org.agent-session.acp.")
    if label in REGISTRY:
        return label
    import re

    clean = re.sub(r"[^a-z0-9_-]+", "-", label.lower()).strip("-_") or "unnamed"
    if not clean[0].isalnum():
        clean = "a" + clean
    return f"x-acp/{clean}"


def _tool(rec: dict, cap: int) -> tuple[str, dict, dict]:
    """(Agent Trail tool kind, args, payload extras) of an ASR tool call: a shell command
    and a file read map to Agent Trail's kinds, anything else is ``other`` with the
    ACP name (spec section 11.7)."""
    name = rec.get("name") or rec.get("title") or "tool"
    data = rec.get("input")
    kind = rec.get("kind")
    if (kind == "execute" and type(data) is dict and isinstance(data.get("command"), str)
            and set(data) <= {"command", "cwd"} and all(isinstance(v, str)
                                                       for v in data.values())):
        return "shell_command", dict(data), {}
    if (kind == "read" and type(data) is dict and isinstance(data.get("path"), str)
            and set(data) == {"path"}):
        return "file_read", {"path": data["path"]}, {}
    args: dict[str, Any] = {"name": str(name)}
    extras: dict[str, Any] = {}
    got = capped(data, cap)  # None for no input
    if got is not None:
        text, size = got
        if size > cap:
            args["args"] = {_X + "excerpt": text}
            extras = {"truncated": True, "args_size": size}
        else:
            args["args"] = data if type(data) is dict else {"value": data}
    return "other", args, extras


class _Trail:
    def __init__(self, header: dict, cap: int):
        self.sid = sid = header["sessionId"]
        self.cap = cap
        self.header = header
        self.last = 0
        self.calls: dict[str, str] = {}  # ACP callId -> the tool_call event's id
        self.open: dict[str, str] = {}  # calls without a result yet: callId -> event id
        self.queries: dict[str, str] = {}
        self.first: int | None = None
        self.title: str | None = None
        self.model: str | None = None
        self.dropped_blocks = False
        self.ended = False
        self.idle = False
        self.uid = _uid("session", sid)
        #: the events each type of record makes (any other type: :meth:`other`)
        self.handlers: dict[str, Callable[[dict, int], Iterable[dict]]] = {
            "message": self.message, "tool_call": self.tool_call,
            "tool_result": self.tool_result, "permission": self.permission,
            "input_request": self.input_request, "state": self.state,
            "config_change": self.config_change, "session_info": self.session_info,
            "subagent": self.subagent,
            **dict.fromkeys(("plan", "compaction", "terminal", "file_change",
                             "usage_summary"), self.lost),
        }

    def event(self, typ: str, rec: dict, t: int, payload: dict, key: str = "",
              **more: Any) -> dict:
        t = max(t, self.last)  # Agent Trail's times never go back (connections interleave)
        self.last = t
        ev: dict[str, Any] = {"type": typ, "id": _uid("event", self.sid, str(rec.get("id")),
                                                      key), "ts": _ms(t), "payload": payload}
        ev.update(more)
        source = {"original_type": str(rec.get("type"))}
        ev["source"] = source
        if "ts" not in rec and rec.get("observedAt") is not None:
            ev["meta"] = {_X + "replayed": True}  # history the agent replayed (ASR-707)
        return ev

    def feed(self, rec: dict) -> Iterable[dict]:
        """The events of one record (its handler's, made as they are taken)."""
        t = ts_ns(rec.get("ts"))
        if t is None:
            t = ts_ns(rec.get("observedAt"))
        if t is None:
            t = self.last
        if self.first is None:
            self.first = t
        typ = rec.get("type")
        if isinstance(typ, str):
            return self.handlers.get(typ, self.other)(rec, t)
        return ()

    # -- one handler per record type (:attr:`handlers`), each the events it makes

    def message(self, rec: dict, t: int) -> Iterator[dict]:
        text, other = block_text(rec.get("content"))
        self.dropped_blocks |= other
        role, origin = rec.get("role"), rec.get("origin")
        content = rec.get("content")
        if (role == "assistant" and type(content) is list and content
                and is_reasoning(content[0])):
            yield self.event("agent_thinking", rec, t,
                             {"text": str(content[0].get("text", ""))})
        elif role == "assistant":
            payload: dict[str, Any] = {"text": text}
            if self.model:
                payload["model"] = self.model
            yield self.event("agent_message", rec, t, payload)
        elif role == "user":
            payload = {"text": text}
            if origin not in (None, "prompt"):
                payload["origin"] = "injected"  # another session's message (ASR-735)
            yield self.event("user_message", rec, t, payload)
        else:  # a notice: the harness speaking
            yield self.event("system_event", rec, t,
                             {"kind": _X + "notice", "text": text})

    def tool_call(self, rec: dict, t: int) -> Iterator[dict]:
        call_id = rec.get("callId")
        if isinstance(call_id, str) and call_id in self.calls and rec.get("supersedes"):
            return  # a revision of a call already written: Agent Trail has no patch
        kind, args, extras = _tool(rec, self.cap)
        ev = self.event("tool_call", rec, t, {"tool": kind, "args": args, **extras})
        if isinstance(call_id, str):
            ev["semantic"] = {"call_id": call_id, "tool_kind": kind}
            self.calls[call_id] = self.open[call_id] = ev["id"]
        yield ev

    def tool_result(self, rec: dict, t: int) -> Iterator[dict]:
        call_id = rec.get("callId")
        for_id = self.open.pop(call_id, None) if isinstance(call_id, str) else None
        if for_id is None:
            return  # a revised result of a call already answered
        status = rec.get("status")
        if status == "cancelled":
            yield self.event("tool_call_aborted", rec, t, {
                "scope": "tool_call", "for_id": for_id, "reason": "user_interrupt"})
            return
        payload = {"for_id": for_id, "ok": status == "completed"}
        out: Any = rec.get("raw")
        display = rec.get("displayContent")
        if display is not None:
            text, _ = block_text(display)
            out = text or out
        got = capped(out, self.cap)
        if got is not None:
            payload["output"], size = got
            if size > self.cap:
                payload.update(truncated=True, output_size=size)
        if status != "completed":
            payload["error"] = f"status {status}"
        yield self.event("tool_result", rec, t, payload,
                         semantic={"call_id": call_id})

    def permission(self, rec: dict, t: int) -> Iterator[dict]:
        data = {k: rec[k] for k in ("requestId", "title", "description", "subject")
                if k in rec}
        yield self.event("system_event", rec, t, {"kind": "permission_request",
                                                  "data": data})
        if rec.get("status") in ("resolved", "failed"):
            decision = {k: rec[k] for k in ("requestId", "status", "decision",
                                            "selectedOptionId") if k in rec}
            yield self.event("system_event", rec, t, {"kind": "permission_decision",
                                                      "data": decision}, "decision")

    def input_request(self, rec: dict, t: int) -> Iterator[dict]:
        qid = str(rec.get("requestId"))
        q = self.event("user_query", rec, t, {"questions": [
            {"id": qid, "question": str(rec.get("message", ""))}]})
        yield q
        if rec.get("status") == "answered":
            answer: dict[str, Any] = {"selected": []}
            if rec.get("response") is not None:
                answer["other"] = orjson.dumps(rec["response"]).decode()
            yield self.event("user_query_response", rec, t, {
                "for_id": q["id"], "answers": {qid: answer}}, "answer")

    def state(self, rec: dict, t: int) -> Iterator[dict]:
        state = rec.get("state")
        if state == "idle":
            data = {k: rec[k] for k in ("stopReason", "error") if k in rec}
            self.idle = True
            yield self.event("system_event", rec, t, {"kind": "turn_end", "data": data})
            yield from self._turn_over(rec, t)
        elif state == "running":
            self.idle = False
            yield self.event("system_event", rec, t, {"kind": "turn_start"})
        elif state == "ended":
            self.ended = True
        else:
            yield self.event("system_event", rec, t, {"kind": _X + "state",
                                                      "data": {"state": str(state)}})

    def config_change(self, rec: dict, t: int) -> Iterator[dict]:
        model = rec.get("model")
        if type(model) is dict and isinstance(model.get("id"), str):
            payload = {"to_model": model["id"], "trigger": "external"}
            if self.model:
                payload["from_model"] = self.model
            self.model = model["id"]
            yield self.event("model_change", rec, t, payload)

    def session_info(self, rec: dict, t: int) -> Iterable[dict]:
        if isinstance(rec.get("title"), str):
            self.title = rec["title"]
        return ()

    def subagent(self, rec: dict, t: int) -> Iterator[dict]:
        if rec.get("supersedes"):  # a revision: a record of its own kind, as any other
            yield from self.other(rec, t)
            return
        child = rec.get("childSession")
        yield self.event("system_event", rec, t, {"kind": "subagent_start", "data": {
            "session_uid": _uid("session", str(child)), "acp_session_id": str(child)}})

    def lost(self, rec: dict, t: int) -> Iterable[dict]:
        """A record Agent Trail cannot hold: declared lost (:data:`LOSSES`)."""
        return ()

    def other(self, rec: dict, t: int) -> Iterator[dict]:
        """A record of a type Agent Trail has no event for: a system event named by it."""
        name = rec["type"].rsplit("/", 1)[-1].lower()
        clean = "".join(c if c.isalnum() or c in "_-" else "_" for c in name) or "record"
        if not clean[0].isalnum():
            clean = "r" + clean
        yield self.event("system_event", rec, t, {"kind": _X + clean})

    def _turn_over(self, rec: dict, t: int) -> Iterator[dict]:
        """Calls still open when their turn ends never got a result (ASR-705): aborted."""
        for call_id, for_id in list(self.open.items()):
            yield self.event("tool_call_aborted", rec, t, {
                "scope": "tool_call", "for_id": for_id, "reason": _X + "turn_ended"},
                "abort:" + call_id)
        self.open.clear()

    def end(self) -> Iterator[dict]:
        rec = {"id": "end", "type": "end"}
        if self.open:  # the recording stops with calls open: cut off
            yield self.event("session_terminated", rec, self.last, {
                "reason": "eof_with_open_tool_calls", "open_call_ids": list(self.open.values())})
        elif self.ended:
            yield self.event("session_end", rec, self.last, {"reason": "complete"})

    def head(self) -> dict:
        h = self.header
        agent: dict[str, Any] = {"name": _agent_name(h)}
        src_agent = h.get("agent")
        if type(src_agent) is not dict:
            src_agent = {}
        if isinstance(src_agent.get("version"), str):
            agent["version"] = src_agent["version"]
        out: dict[str, Any] = {"type": "session", "schema_version": SCHEMA_VERSION,
                               "id": self.uid, "session_uid": self.uid,
                               "ts": _ms(self.first or 0), "agent": agent}
        if self.title:
            out["name"] = self.title
        roots = (h.get("workspace") or {}).get("roots") if type(h.get("workspace")) is dict \
            else None
        if type(roots) is list and roots and type(roots[0]) is dict \
                and isinstance(roots[0].get("path"), str):
            out["cwd"] = roots[0]["path"]
        lineage = h.get("lineage")
        if type(lineage) is not dict:
            lineage = {}
        fork = lineage.get("forkedFrom")
        if type(fork) is dict and isinstance(fork.get("session"), str):
            out["fork_from"] = {"session_id": _uid("session", fork["session"])}
        producer = h.get("producer")
        if type(producer) is not dict:
            producer = {}
        losses = list(LOSSES)
        meta: dict[str, Any] = {
            _X + "acp_session_id": self.sid,
            _X + "losses": losses,
            _X + "asr_losses": list(producer.get("lossy") or []),
        }
        spawned = lineage.get("spawnedBy")
        if type(spawned) is dict and isinstance(spawned.get("session"), str):
            meta[_X + "spawned_by"] = _uid("session", spawned["session"])
        out["source"] = {"agent": agent["name"], "format_version": "ASR " + str(h.get("asr"))}
        out["meta"] = meta
        return out


def trail_lines(header: dict, records: Iterable[dict], cap: int = DEFAULT_CAP
                ) -> Iterator[dict]:
    """One Agent Trail file's lines for one ASR stream: the header, then the events. The
    header comes first but depends on the whole stream (its title, start): the events
    are held until the stream is read (a session's events, not the recording's)."""
    trail = _Trail(header, cap)
    events: list[dict] = []
    for rec in records:
        events.extend(trail.feed(rec))
    events.extend(trail.end())
    yield trail.head()
    yield from events


class Written:
    """What :func:`export_trail` wrote: the files, and the read error that cut an input
    short (what came before it was written) or None; ``note``: a recording with no
    session."""

    def __init__(self) -> None:
        self.files: list[str] = []
        self.cut: Any = None
        self.note: str | None = None

    @property
    def sessions(self) -> int:
        return len(self.files)


def trail_files(paths: list[str], *, warn: Warn, cap: int = DEFAULT_CAP,
                note: Note | None = None,
                done: Written | None = None) -> Iterator[tuple[str, Iterator[dict]]]:
    """Read ``paths`` (any stage): each session's file name (``<sessionId>.trail.jsonl``,
    the session ID percent-encoded as acp-asr names its streams) and its lines. ``done``
    gets the read error that cut an input short and the note of a recording with no
    session."""
    from acp_pipes.asr.output import SUFFIX as ASR_SUFFIX
    from acp_pipes.asr.output import file_name
    from acp_pipes.export.sources import asr_sources

    with asr_sources(paths, warn=warn, note=note) as sources:
        for header, records in sources.streams(warn):
            name = file_name(header["sessionId"]).removesuffix(ASR_SUFFIX) + SUFFIX
            yield name, trail_lines(header, records, cap)
        if done is not None:
            done.cut, done.note = sources.cut, sources.note


def export_trail(paths: list[str], directory: str, *, warn: Warn,
                 cap: int = DEFAULT_CAP, note: Note | None = None) -> Written:
    """Read ``paths`` (any stage) and write ``directory/<session>.trail.jsonl`` for every
    session, each written aside and renamed into place."""
    from acp_pipes.errors import UsageError
    from acp_pipes.io.output import Output

    if os.path.exists(directory) and not os.path.isdir(directory):
        raise UsageError(f"{directory} is not a directory; -o wants one: "
                         f"DIR/<sessionId>{SUFFIX} is written for each session")
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot write {directory}: {e.strerror or e}") from None
    done = Written()
    dumps, nl = orjson.dumps, orjson.OPT_APPEND_NEWLINE
    for name, lines in trail_files(paths, warn=warn, cap=cap, note=note, done=done):
        path = os.path.join(directory, name)
        sink = Output(path)
        try:
            for line in lines:
                sink.stream.write(dumps(line, option=nl))
            sink.commit()
        finally:
            sink.discard()
        done.files.append(path)
    return done

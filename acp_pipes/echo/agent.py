"""A deterministic ACP v2 agent that echoes prompts, for demos, tests and benchmarks.

Every other tool needs a live agent whose output is a pure function of its input bytes:
no clock, no randomness, every ID from a counter. This one speaks ACP v2 (schema
v2.0.0-alpha.9, protocol version 2, ASR-700) over newline-delimited JSON-RPC.

Turn order for ``session/prompt`` (why: the v2 ``PromptResponse`` only acknowledges that
the user message was inserted, carries its ``messageId``, and "does not indicate that the
agent has finished"; the v2 prompt lifecycle sends it as soon as the prompt is accepted
and reports everything else through ``session/update``; so the response comes first and
the turn ends with the idle ``state_update``)::

    response {messageId: "msg-user-<t>"}
    user_message          the prompt, with that messageId (ASR-713)
    state_update          running
    plan_update           plan-<t>: echo in_progress, tool pending
    agent_message_chunk   x1..3, messageId "msg-agent-<t>", concatenating to "Echo: <text>"
    tool_call_update      call-<t>, name "echo", status pending
    tool_call_update      in_progress
    tool_call_content_chunk x1..2  (the tool output, the prompt text)
    tool_call_update      completed, rawOutput
    plan_update           plan-<t>: both entries completed
    usage_update          used = characters exchanged so far in the session
    state_update          idle, stopReason end_turn

``<t>`` is the turn number within the session, so two sessions fed the same prompts
produce the same updates. Special prompts (the leading ``/words`` of the text; they
combine, e.g. ``/elicit /permission hi``):

- ``/permission``: before running the tool, send ``session/request_permission`` (subject:
  the tool call), report ``requires_action``, and wait for the client's response; then
  ``running`` and the tool runs (selected ``allow``) or fails without running (any
  other outcome).
- ``/elicit``: before the agent message, send ``elicitation/create`` (form mode, one
  string field ``answer``), report ``requires_action`` and wait; an accepted answer is
  appended to the echo as `` [answer: <answer>]``.
- ``/fail``: the tool call fails (``failed``, with content and rawOutput); the turn still
  ends with ``end_turn``.
- ``/error``: the turn ends right after ``running`` with ``idle``, ``stopReason: error``.

Agent-to-client requests take integer ids 1, 2, 3, ... per connection, so a scripted
client can answer them without reading the agent's output (see ``client_session``).

While a turn waits for the client, later prompts for the same session are queued and run
when it ends. ``session/cancel`` ends a waiting turn at once (tool ``cancelled``, idle
``cancelled``); the late response to its request is then ignored, as the v2 state rules
ask. Since the agent is otherwise synchronous, ``session/cancel`` on an idle session is a
no-op. ``session/close`` cancels a waiting turn the same way, answers queued prompts with
-32800, and responds; the session's history is kept, so ``session/resume`` (with
``replayFrom: {type: "start"}``) can replay it as whole-entity upserts, followed by the
current-state ``state_update`` and then the response. ``session/list`` lists every
session of the connection.

JSON-RPC: a line that is not JSON gets -32700 (id null); a value that is not a request,
notification or response gets -32600; so does a request this agent cannot read whole
(a lone surrogate, a number such as ``1e400``, nesting deeper than orjson's 1024 levels),
answered with its own id so the client is not left waiting; an unknown method -32601
(unknown notifications are ignored); bad params -32602; an unknown session -32002.
Batches (JSON arrays) are answered with one array of responses, after the updates they
caused. Blank lines are skipped. Responses to requests the agent did not send (or no
longer waits for) are ignored and reported to the optional ``warn`` callback (a
:data:`~acp_pipes.errors.Warn`: ``source``, by default ``stdin``, and the line).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO

import orjson

from acp_pipes import __version__
from acp_pipes.echo.session import (
    Session,
    Turn,
    is_block,
    prompt_text,
    split_text,
    tool_patch,
    upsert,
)
from acp_pipes.errors import Warn
from acp_pipes.protocol.jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    RESOURCE_NOT_FOUND,
    element_spans,
    top_level_members,
)
from acp_pipes.protocol.jsonrpc import error as _error
from acp_pipes.protocol.jsonrpc import request as _request
from acp_pipes.protocol.jsonrpc import response as _response

__all__ = [
    "AGENT_NAME",
    "PROTOCOL_VERSION",
    "EchoAgent",
    "echo_agent",
    "serve",
]

AGENT_NAME = "acp-echo-agent"
PROTOCOL_VERSION = 2

PERMISSION_OPTIONS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]
ELICIT_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "title": "Answer"}},
    "required": ["answer"],
}

_dumps = orjson.dumps
_INIT_RESULT = {
    "protocolVersion": PROTOCOL_VERSION,
    "info": {"name": AGENT_NAME, "title": "ACP echo agent", "version": __version__},
    # {} = the baseline session methods: new, list, resume, close, prompt, cancel, update.
    "capabilities": {"session": {}},
}
_RUNNING = {"sessionUpdate": "state_update", "state": "running"}
_REQUIRES_ACTION = {"sessionUpdate": "state_update", "state": "requires_action"}
_IDLE = {"sessionUpdate": "state_update", "state": "idle"}
_CONTEXT_SIZE = 200_000


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _usable_id(rid: Any) -> bool:
    """A JSON-RPC id a frame record can name (see :func:`acp_pipes.protocol.jsonrpc.is_jsonrpc_id`):
    a string of Unicode text or an integer within 64 bits (null is no id to answer)."""
    if type(rid) is int:
        return -(2**63) <= rid < 2**64
    if type(rid) is str:
        try:
            rid.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    return False


def _top_level(line: bytes) -> Any:
    """What a line too deep to parse says at its top level: ``jsonrpc``, ``method`` and
    ``id`` parsed from their own bytes (:func:`acp_pipes.protocol.jsonrpc.member_spans`), the
    other members present as None; a batch, a list of those; None when it is neither an
    object nor an array."""
    batch = element_spans(line)
    if batch is not None:
        return [_top_level(line[start:end]) for start, end in batch]
    return top_level_members(
        line, lambda raw: json.loads(raw, parse_constant=_reject_constant),
        (ValueError, RecursionError))


class EchoAgent:
    """The agent's state for one connection. ``feed`` takes one input line and returns
    the frames to send (bytes, no LF), in order."""

    def __init__(self, warn: Warn | None = None, source: str = "stdin"):
        self.sessions: dict[str, Session] = {}
        self.session_count = 0
        self.request_count = 0
        self.waiting: dict[Any, Session] = {}  # agent request id -> session whose turn waits
        self.warn = warn
        self.source = source
        self.line = 0

    # -- input ------------------------------------------------------------------------

    def feed(self, line: bytes) -> list[bytes]:
        self.line += 1
        if not line.strip():
            return []
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            return self._unreadable(line)
        out: list[bytes] = []
        if isinstance(msg, list):
            if not msg:
                return [_error(None, INVALID_REQUEST, "Invalid Request: empty batch")]
            replies: list[bytes] = []
            for item in msg:
                self._message(item, out, replies)
            if replies:
                out.append(b"[" + b",".join(replies) + b"]")
            return out
        self._message(msg, out, out)
        return out

    def _unreadable(self, line: bytes) -> list[bytes]:
        """A line orjson refuses. Valid JSON it cannot hold (a lone surrogate, a number
        beyond a double such as ``1e400``, nesting deeper than it reads) is a request this
        agent cannot serve: each request in it is answered -32600 with its own id, so the
        client is not left waiting. Anything else is a parse error (id null)."""
        why = "a lone surrogate or a number out of range"
        try:
            msg = json.loads(line, parse_constant=_reject_constant)
        except RecursionError:
            why = "nested deeper than this agent reads"
            msg = _top_level(line)
        except ValueError:  # UnicodeDecodeError included
            return [_error(None, PARSE_ERROR, "Parse error")]
        if isinstance(msg, list):
            replies = [r for r in (self._refused(item, why) for item in msg) if r]
            return [b"[" + b",".join(replies) + b"]"] if replies else []
        reply = self._refused(msg, why)
        return [reply] if reply else []

    def _refused(self, msg: Any, why: str) -> bytes | None:
        """The error answering one message of an unreadable line (None: not a request)."""
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            return _error(None, INVALID_REQUEST, "Invalid Request")
        if "method" not in msg or "id" not in msg:
            if self.warn:
                what = "notification" if "method" in msg else "response"
                self.warn(self.source, self.line, f"{what} with {why}, ignored")
            return None
        rid = msg["id"]
        if not _usable_id(rid):
            return _error(None, INVALID_REQUEST, "Invalid Request: bad id")
        return _error(rid, INVALID_REQUEST, f"Invalid Request: {why}")

    def _message(self, msg: Any, out: list[bytes], replies: list[bytes]) -> None:
        """Handle one JSON-RPC message: updates and requests go to ``out``, the direct
        response to ``replies`` (the same list unless inside a batch)."""
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            replies.append(_error(self._id_of(msg), INVALID_REQUEST, "Invalid Request"))
            return
        method = msg.get("method")
        has_id = "id" in msg
        rid = msg.get("id")
        if has_id and rid is not None and type(rid) not in (str, int):
            replies.append(_error(None, INVALID_REQUEST, "Invalid Request: bad id"))
            return
        if method is None:
            if has_id and ("result" in msg or "error" in msg):
                self._client_response(rid, msg, out)
                return
            replies.append(_error(rid if has_id else None, INVALID_REQUEST, "Invalid Request"))
            return
        if not isinstance(method, str):
            replies.append(_error(rid if has_id else None, INVALID_REQUEST, "Invalid Request"))
            return
        params = msg.get("params")
        if params is None:
            params = {}
        if not has_id:
            if method == "session/cancel" and isinstance(params, dict):
                self._cancel(params.get("sessionId"), out)
            return  # other notifications (e.g. $/cancel_request) need nothing from us
        handler = self._methods.get(method)
        if handler is None:
            replies.append(_error(rid, METHOD_NOT_FOUND, f"Method not found: {method}"))
            return
        if not isinstance(params, dict):
            replies.append(_error(rid, INVALID_PARAMS, "Invalid params: expected an object"))
            return
        handler(self, rid, params, out, replies)

    @staticmethod
    def _id_of(msg: Any) -> Any:
        if isinstance(msg, dict):
            rid = msg.get("id")
            if type(rid) in (str, int):
                return rid
        return None

    def _session(self, rid: Any, params: dict, replies: list[bytes]) -> Session | None:
        sid = params.get("sessionId")
        s = self.sessions.get(sid) if isinstance(sid, str) else None
        if s is None:
            replies.append(_error(rid, RESOURCE_NOT_FOUND, f"Session not found: {sid}"))
        return s

    # -- methods ----------------------------------------------------------------------

    def _initialize(self, rid, params, out, replies) -> None:
        replies.append(_response(rid, _INIT_RESULT))

    def _new(self, rid, params, out, replies) -> None:
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not cwd.startswith("/"):
            replies.append(_error(rid, INVALID_PARAMS, "Invalid params: cwd must be absolute"))
            return
        self.session_count += 1
        sid = f"sess-{self.session_count}"
        self.sessions[sid] = Session(sid, cwd)
        replies.append(_response(rid, {"sessionId": sid}))

    def _list(self, rid, params, out, replies) -> None:
        cwd = params.get("cwd")
        sessions = [
            {"sessionId": s.sid, "cwd": s.cwd}
            for s in self.sessions.values()
            if cwd is None or s.cwd == cwd
        ]
        replies.append(_response(rid, {"sessions": sessions}))

    def _resume(self, rid, params, out, replies) -> None:
        s = self._session(rid, params, replies)
        if s is None:
            return
        replay = params.get("replayFrom")
        if replay is not None and (not isinstance(replay, dict) or replay.get("type") != "start"):
            replies.append(_error(rid, INVALID_PARAMS, "Invalid params: unsupported replayFrom"))
            return
        s.closed = False
        if replay is not None:
            out.extend(s.update(u) for u in s.history)
        # The current-state snapshot comes after any replay and before the response.
        out.append(s.update(_REQUIRES_ACTION if s.turn is not None else _IDLE))
        replies.append(_response(rid, {}))

    def _close(self, rid, params, out, replies) -> None:
        s = self._session(rid, params, replies)
        if s is None:
            return
        # Prompts queued behind a waiting turn were never inserted: refuse them first, so
        # ending the turn does not start them.
        while s.queue:
            qid, _ = s.queue.popleft()
            out.append(_error(qid, REQUEST_CANCELLED, "Request cancelled: session closed"))
        if s.turn is not None:
            self._end_waiting(s, s.turn, out)
        s.closed = True
        replies.append(_response(rid, {}))

    def _prompt(self, rid, params, out, replies) -> None:
        s = self._session(rid, params, replies)
        if s is None:
            return
        prompt = params.get("prompt")
        if not isinstance(prompt, list) or not all(map(is_block, prompt)):
            message = "Invalid params: prompt must be an array of content blocks"
            replies.append(_error(rid, INVALID_PARAMS, message))
            return
        if s.closed:
            replies.append(_error(rid, RESOURCE_NOT_FOUND, f"Session closed: {s.sid}"))
            return
        if s.turn is not None:
            s.queue.append((rid, prompt))
            return
        self._start_turn(s, rid, prompt, out, replies)

    _methods: dict[str, Callable] = {
        "initialize": _initialize,
        "session/new": _new,
        "session/list": _list,
        "session/resume": _resume,
        "session/close": _close,
        "session/prompt": _prompt,
    }

    # -- the turn ---------------------------------------------------------------------

    def _start_turn(self, s: Session, rid: Any, prompt: list, out, replies) -> None:
        s.turns += 1
        n = s.turns
        text = prompt_text(prompt)
        user_id = f"msg-user-{n}"
        replies.append(_response(rid, {"messageId": user_id}))
        user = upsert("user_message", "messageId", user_id, prompt)
        s.history.append(user)
        out.append(s.update(user))
        out.append(s.update(_RUNNING))
        s.used += len(text)
        turn = Turn(n, text)
        if "/error" in turn.flags:
            self._finish(s, turn, out, "error")
            return
        plan = self._plan(n, "in_progress", "pending")
        turn.plan_at = len(s.history)
        s.history.append(plan)
        out.append(s.update(plan))
        if "/elicit" in turn.flags:
            self._wait(s, turn, "elicit", out)
            return
        self._echo(s, turn, out)

    def _echo(self, s: Session, turn: Turn, out: list[bytes]) -> None:
        """Stream the agent message, then announce the tool call (and maybe ask first)."""
        n = turn.n
        agent_id = f"msg-agent-{n}"
        update = s.update
        for piece in split_text(turn.echo, 3):
            chunk = {"type": "text", "text": piece}
            out.append(update(upsert("agent_message_chunk", "messageId", agent_id, chunk)))
        whole = [{"type": "text", "text": turn.echo}]
        s.history.append(upsert("agent_message", "messageId", agent_id, whole))
        s.used += len(turn.echo)
        tool = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": f"call-{n}",
            "name": "echo",
            "title": "Echo the prompt",
            "kind": "other",
            "status": "pending",
            "rawInput": {"text": turn.text},
        }
        turn.tool = tool
        turn.tool_at = len(s.history)
        s.history.append(tool)
        out.append(update(tool))
        if "/permission" in turn.flags:
            self._wait(s, turn, "permission", out)
            return
        self._run_tool(s, turn, out)

    def _run_tool(self, s: Session, turn: Turn, out: list[bytes]) -> None:
        call_id = f"call-{turn.n}"
        update = s.update
        if not turn.rejected:
            out.append(update(tool_patch(call_id, "in_progress")))
        if turn.fail:
            content = [{"type": "content", "content": {"type": "text", "text": turn.fail}}]
            final = tool_patch(call_id, "failed", content=content, rawOutput={"error": turn.fail})
            out.append(update(final))
            self._settle_tool(s, turn, final)
            self._finish(s, turn, out, "end_turn", "cancelled")
            return
        content = []
        for piece in split_text(turn.text, 2):
            item = {"type": "content", "content": {"type": "text", "text": piece}}
            content.append(item)
            out.append(update(upsert("tool_call_content_chunk", "toolCallId", call_id, item)))
        final = tool_patch(call_id, "completed", rawOutput={"text": turn.text})
        out.append(update(final))
        final["content"] = content
        self._settle_tool(s, turn, final)
        self._finish(s, turn, out, "end_turn", "completed")

    @staticmethod
    def _settle_tool(s: Session, turn: Turn, final: dict) -> None:
        """Fold the tool call's final patch into its history entry (a whole upsert)."""
        tool = dict(turn.tool)  # type: ignore[arg-type]  # settled: a turn with a tool call
        tool.update(final)
        s.history[turn.tool_at] = tool

    @staticmethod
    def _plan(n: int, echo: str, tool: str) -> dict:
        return {
            "sessionUpdate": "plan_update",
            "plan": {
                "type": "items",
                "planId": f"plan-{n}",
                "entries": [
                    {"content": "Echo the prompt", "priority": "high", "status": echo},
                    {"content": "Run the echo tool", "priority": "medium", "status": tool},
                ],
            },
        }

    def _finish(
        self, s: Session, turn: Turn, out: list[bytes], stop: str, tool_status: str = ""
    ) -> None:
        """End the turn: final plan, usage, idle; then run the next queued prompt."""
        if stop == "error":
            idle = {
                "sessionUpdate": "state_update",
                "state": "idle",
                "stopReason": "error",
                "error": {"code": -32603, "message": "Internal error: /error requested"},
            }
        else:
            echo_status = "completed" if turn.tool is not None else "cancelled"
            plan = self._plan(turn.n, echo_status, tool_status)
            s.history[turn.plan_at] = plan
            out.append(s.update(plan))
            out.append(
                s.update({"sessionUpdate": "usage_update", "used": s.used, "size": _CONTEXT_SIZE})
            )
            idle = {"sessionUpdate": "state_update", "state": "idle", "stopReason": stop}
        out.append(s.update(idle))
        s.turn = None
        while s.queue and s.turn is None:
            qid, prompt = s.queue.popleft()
            # A queued prompt's response goes out with the updates: its request is done.
            self._start_turn(s, qid, prompt, out, out)

    # -- waiting for the client ---------------------------------------------------------

    def _wait(self, s: Session, turn: Turn, stage: str, out: list[bytes]) -> None:
        self.request_count += 1
        rid = self.request_count
        turn.stage = stage
        turn.request_id = rid
        s.turn = turn
        self.waiting[rid] = s
        if stage == "permission":
            # (a permission is asked about the turn's tool call)
            call = {k: v for k, v in turn.tool.items()  # type: ignore[union-attr]
                    if k != "sessionUpdate"}
            params = {
                "sessionId": s.sid,
                "title": "Run the echo tool?",
                "subject": {"type": "tool_call", "toolCall": call},
                "options": PERMISSION_OPTIONS,
            }
            out.append(_request(rid, "session/request_permission", params))
        else:
            params = {
                "sessionId": s.sid,
                "mode": "form",
                "message": "What should the echo add?",
                "requestedSchema": ELICIT_SCHEMA,
            }
            out.append(_request(rid, "elicitation/create", params))
        out.append(s.update(_REQUIRES_ACTION))

    def _client_response(self, rid: Any, msg: dict, out: list[bytes]) -> None:
        s = self.waiting.pop(rid, None) if type(rid) in (str, int) else None
        if s is None or s.turn is None or s.turn.request_id != rid:
            if self.warn:
                self.warn(self.source, self.line,
                          f"response to unknown request id {_dumps(rid).decode()}, ignored")
            return
        turn = s.turn
        result = msg.get("result")
        result = result if isinstance(result, dict) else {}
        out.append(s.update(_RUNNING))
        s.turn = None
        if turn.stage == "elicit":
            content = result.get("content")
            if result.get("action") == "accept" and isinstance(content, dict):
                answer = content.get("answer")
                if isinstance(answer, str):
                    turn.echo += f" [answer: {answer}]"
            self._echo(s, turn, out)
            return
        outcome = result.get("outcome")
        allowed = (
            isinstance(outcome, dict)
            and outcome.get("outcome") == "selected"
            and outcome.get("optionId") == "allow"
        )
        if not allowed:
            turn.fail = "permission rejected"
            turn.rejected = True
        self._run_tool(s, turn, out)

    def _cancel(self, sid: Any, out: list[bytes]) -> None:
        s = self.sessions.get(sid) if isinstance(sid, str) else None
        if s is not None and s.turn is not None:
            self._end_waiting(s, s.turn, out)

    def _end_waiting(self, s: Session, turn: Turn, out: list[bytes]) -> None:
        """End ``turn``, the session's waiting one, as cancelled: close its tool call,
        then report idle."""
        self.waiting.pop(turn.request_id, None)
        if turn.tool is not None:
            final = tool_patch(f"call-{turn.n}", "cancelled")
            out.append(s.update(final))
            self._settle_tool(s, turn, final)
        self._finish(s, turn, out, "cancelled", "cancelled")


def echo_agent(
    lines: Iterable[bytes], warn: Warn | None = None, source: str = "stdin"
) -> Iterator[bytes]:
    """The agent as a pure iterator: client lines (bytes, LF optional) in, agent frames
    (bytes without LF) out. Lazy: a line is read only after the frames of the previous
    one were taken, so a live client can answer the agent's requests."""
    agent = EchoAgent(warn, source)
    feed = agent.feed
    for line in lines:
        yield from feed(line)


def serve(inp: BinaryIO, out: BinaryIO, warn: Warn | None = None) -> None:
    """Serve one connection: read client lines from ``inp``, write each agent frame to
    ``out`` with one write and a flush, so a proxy in between sees whole frames."""
    write = out.write
    flush = out.flush
    for frame in echo_agent(inp, warn):
        write(frame + b"\n")
        flush()


# -- a scripted client ------------------------------------------------------------------

"""The oracle for what acp-fold and acp-asr store: a stateful property test.

The state machine *is* an ACP agent, v2 or v1 (drawn per run): it holds the true state
of every entity of its sessions (messages of each type, tool calls, plans, compactions,
terminals, permissions) and emits what a real agent may legally send for it, over
several connections: prompts, live chunks and whole upserts, message types sharing IDs,
tool calls through every status with partial updates, plan snapshots,
``session/resume`` with and without a history replay (the replay saying what was
recorded, or differing from it), live updates after a replay, ``session/fork`` with
the parent's history replayed into the fork or not (then the fork patches what it
copied at the fork, whatever the parent did after), closes.

As ACP v1 it sends what v1 has: chunks without ``messageId`` (the store derives the
IDs from each message's role, content and occurrence, ending a message at the
boundaries docs/asr.md "ACP v1" lists), the prompt's echo, ``tool_call`` first then ``tool_call_update`` (``name: null`` leaving the name),
permissions asked about a tool call, the plan sent whole, the client's terminals
(``terminal/create``, ``terminal/output``, ``terminal/wait_for_exit``), a resume
without replay, ``session/load`` replaying the whole history (identical or differing)
and ``session/fork`` replaying it into the fork or not. The machine derives the IDs the docs promise and, for a load, the message
boundaries the replay gives: two messages of one kind the live turn separated only by
a request of the agent (or a turn with nothing but its prompt) run together in the
replay, a new message the store keeps beside the two (the declared loss
``v1_message_boundaries``).

ACP-unstable in v2, as docs/asr.md maps it: subagents (``subagent_update`` in the
parent, the child's messages on the same connection, its later state superseding,
ASR-721), messages between sessions (``session_message`` and its chunks in the
recipient, the sender's copy an audit record, ASR-735), elicitations (a form or a URL,
answered later, ASR-734).

Frames of both directions interleave as the protocol allows: a permission or
elicitation answered after further updates; the prompt's answer (its ``messageId``)
logged after the turn's first updates, a v1 agent's echo of the prompt before it; ``session/cancel`` during the turn (the agent
still sending, then ``stopReason: cancelled``) or racing the turn's end (logged after
it).

At the end of each run the wire log is folded and converted as acp-asr does (in
process) and checked against the machine:

- for every entity, the latest stored revision is the machine's state, under the
  declared losses (ASR-704, ASR-706, ASR-717, ASR-722: no pending/in_progress
  transitions, no result for a call that never ended);
- nothing is stored twice: a second record of an entity supersedes the one before and
  says something else (ASR-706, ASR-717);
- nothing the machine said is missing;
- every stream passes ``acp-asr --validate``;
- replaying a stream and recording the replay gives the same context view (ASR-732);
  a v1 stream also loaded by a v1 client, under the losses that replay reports.

The identity rule of docs/asr.md ("One rule for identity"), where v1 gives no ID: the
prompt's echo comes under an ID of the agent's own, or without one, whole or re-chunked,
during the turn or logged before the prompt, or never; an agent may replay its history
(a load, a fork) under IDs of its own it never sent live (``native``, as opencode
does): each message is the entity its ID or its place names, and the oracle checks that
nothing is stored twice, that two identical prompts stay two, and that what a fork
copied carries ``copiedFrom`` (ASR-718).

Not generated yet: a replay of a parent's subagents' messages; a session message or
subagent copied into a fork.

``make test`` runs a short profile; ``make fuzz`` runs the long one
(``ACP_PIPES_ORACLE=fuzz``: thousands of runs; it stops by itself).
"""

from __future__ import annotations

import base64
import copy
import os
import shlex
import tempfile

import blake3
import orjson
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from acp_pipes.asr import convert
from acp_pipes.asr.reader import AsrStream
from acp_pipes.asr.validate import validate_streams
from acp_pipes.fold import fold_paths
from acp_pipes.replay.asr.equivalence import compare_streams, compare_views, context_view
from tests.test_roundtrip import _joined_texts, load_v1_and_record, replay_and_record

settings.register_profile("oracle-short", max_examples=100, stateful_step_count=30,
                          deadline=None, suppress_health_check=list(HealthCheck))
settings.register_profile("oracle-fuzz", max_examples=4000, stateful_step_count=60,
                          deadline=None, suppress_health_check=list(HealthCheck))
PROFILE = "oracle-fuzz" if os.environ.get("ACP_PIPES_ORACLE") == "fuzz" else "oracle-short"

T0 = 1_764_000_000_000_000_000
HEADER = {"format": "acp-pipes/wire", "version": 1, "recorder": "oracle", "argv": ["agent"],
          "started": "2025-11-24T16:00:00.000000Z", "clock": "nanos", "env": {}}
SESSIONS = ("s1", "s2")
#: message IDs drawn from one small pool, so a user message, a thought and an agent
#: message often share one (each message type has its own ID space, ASR-724)
MIDS = ("m1", "m2", "m3", "m4")
FINAL = ("completed", "failed", "cancelled")
CLEAR = "<null>"  # a field sent as null: cleared (ASR-704)

word = st.sampled_from(["Hello ", "world", "ü/\\\"", "\n", "x"])
block = st.one_of(st.builds(lambda t: {"type": "text", "text": t}, word),
                  st.builds(lambda n: {"type": "resource_link", "uri": f"file:///ws/{n}",
                                       "name": n}, st.sampled_from(["a.py", "b"])))
blocks = st.lists(block, min_size=1, max_size=2)
tool_items = st.lists(block, max_size=2)
entries = st.lists(st.fixed_dictionaries({
    "content": word, "priority": st.sampled_from(["high", "low"]),
    "status": st.sampled_from(["pending", "in_progress", "completed"])}),
    min_size=1, max_size=3)


def _append_text(content: list, text: str) -> list:
    """A text chunk joins the content by concatenation (ASR-211, ASR-704)."""
    if content and content[-1].get("type") == "text" and set(content[-1]) == {"type", "text"}:
        return [*content[:-1], {"type": "text", "text": content[-1]["text"] + text}]
    return [*content, {"type": "text", "text": text}]


def derived_id(role: str, content: list, k: int) -> str:
    """The ID docs/asr.md ("ACP v1") promises a v1 message: ``v1:<role>:<digest>:<k>``,
    the digest the first 16 hex digits of blake3 of the content's JCS form (written here
    with sorted keys: the oracle's content has ASCII keys and no floats), k its
    occurrence among the session's messages of that role and content."""
    jcs = orjson.dumps(content, option=orjson.OPT_SORT_KEYS)
    return f"v1:{role}:{blake3.blake3(jcs).hexdigest()[:16]}:{k}"


def v1_folded(blocks: list) -> list:
    """Content blocks as a v1 message's chunks join: text onto text (ASR-704)."""
    out: list = []
    for b in blocks:
        out = _append_text(out, b["text"]) if set(b) == {"type", "text"} else [*out, b]
    return out


#: How a v1 agent echoes a prompt: under an ID of its own (mistral-vibe), or without
#: one, whole (a chunk a block) or re-chunked (each text block in two)
ECHOES = ("own", "whole", "split")

V1_CHUNK = {"user": "user_message_chunk", "agent": "agent_message_chunk",
            "thought": "agent_thought_chunk"}

OPTIONS = [{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
           {"optionId": "deny", "name": "Deny", "kind": "reject_once"}]


class _First:
    """A stand-in for ``st.data()`` that draws the first choice (the turn's end answers
    what is still asked, in order)."""

    def draw(self, strategy):
        return 0


class Session:
    """The true state of one session's entities, in the order first seen."""

    def __init__(self, parent: str | None = None) -> None:
        self.entities: dict[tuple, dict] = {}
        # a fork the agent replayed nothing into: the parent's entities at the fork, each
        # on the fork's wire (in ``entities``) only once the fork changes it (ASR-718)
        self.copied: dict[tuple, dict] = {}
        self.closed = False
        self.parent = parent  # the session it was forked from
        # ACP v1: the agent's own history, in order: ("msg", kind, content, native ID or
        # None) for a message (v1 gives it no ID: the store derives one), ("ent", key)
        # for every other entity; the message being sent (its chunks held by the store
        # until a boundary, docs/asr.md "ACP v1"); the occurrences of each (role,
        # content) counted since the last session/load
        self.order: list[tuple] = []
        self.pending: list | None = None  # [kind, content]
        self.counts: dict[tuple, int] = {}
        self.high: dict[tuple, int] = {}  # the highest occurrence ever counted
        # the identity rule (docs/asr.md "One rule for identity"): the entity at a place
        # (role, content, k) when its ID is not the derived one, and the entity each ID
        # of the agent's own names
        self.places: dict[tuple, str] = {}
        self.alias: dict[tuple, str] = {}
        #: what the agent replayed into a fork, each entity as it stood at the fork
        self.history: dict[tuple, dict] = {}
        self.prompted = parent is None  # a fork's updates are history until its first prompt
        self.spawned = False  # a subagent's session (ASR-721)

    def put(self, key: tuple, value: dict) -> None:
        if key not in self.entities and key[0] not in V1_CHUNK:
            self.order.append(("ent", key))
        self.entities[key] = value

    def get(self, key: tuple, default: dict | None = None) -> dict | None:
        """The entity as this session sees it: its own, or the copy the fork made."""
        got = self.entities.get(key)
        return self.copied.get(key, default) if got is None else got

    def view(self) -> dict[tuple, dict]:
        """Every entity this session has, its own or copied."""
        return {**self.copied, **self.entities}


class Agent(RuleBasedStateMachine):
    """An ACP v2 agent and its client, writing the wire log of every connection."""

    def __init__(self) -> None:
        super().__init__()
        self.connections: list[list[tuple[str, dict]]] = []
        self.sessions: dict[str, Session] = {}
        self.attached: set[str] = set()  # sessions open on the current connection
        self.turn: dict | None = None  # the open prompt turn: session, message IDs
        self.rid = 0
        self.n = 0  # a counter for fresh IDs
        self.v = 2
        self.native = False
        self.last: str | None = None  # the session of the turn that ended last

    @initialize(version=st.sampled_from([2, 1]), native=st.booleans())
    def start(self, version: int, native: bool) -> None:
        """The protocol version every connection of the run negotiates; every run has a
        session to work on from its first step. A v1 agent may give its messages IDs of
        its own in a ``session/load`` replay that it never sent live (opencode's
        ``msg_...``): ``native``."""
        self.v = version
        self.native = native and version == 1
        self._connect()
        self.new_session()

    def _v1(self) -> bool:
        return self.v == 1

    def _v2(self) -> bool:
        return self.v == 2

    # -- the wire -------------------------------------------------------------------

    def _send(self, d: str, msg: dict) -> None:
        self.connections[-1].append((d, {"jsonrpc": "2.0", **msg}))

    def _req(self, method: str, params: dict) -> int:
        self.rid += 1
        self._send("c2a", {"id": self.rid, "method": method, "params": params})
        return self.rid

    def _upd(self, sid: str, update: dict) -> None:
        t = self.turn
        if t is not None and "answer" in t:  # the prompt's answer, logged after updates
            t["answer"][0] -= 1
            if t["answer"][0] < 0:
                self._send("a2c", t.pop("answer")[1])
        self._send("a2c", {"method": "session/update",
                           "params": {"sessionId": sid, "update": update}})

    def _connect(self) -> None:
        self.connections.append([])
        self.attached = set()
        self.turn = None
        self.rid = 0
        if self.v == 1:
            rid = self._req("initialize", {"protocolVersion": 1, "clientCapabilities": {
                "terminal": True}, "clientInfo": {"name": "client", "version": "1"}})
            self._send("a2c", {"id": rid, "result": {
                "protocolVersion": 1, "agentInfo": {"name": "Oracle Agent", "version": "1"},
                "agentCapabilities": {"loadSession": True}}})
            return
        rid = self._req("initialize", {"protocolVersion": 2, "capabilities": {},
                                       "info": {"name": "client", "version": "1"}})
        self._send("a2c", {"id": rid, "result": {
            "protocolVersion": 2, "info": {"name": "Oracle Agent", "version": "1"},
            "capabilities": {"session": {}}}})

    # -- ACP v1: messages without IDs -----------------------------------------------

    def _v1_derive(self, s: Session, kind: str, content: list, *, live: bool = True,
                   value: list | None = None, native: str | None = None) -> str:
        """The entity a v1 message is, when it ends (docs/asr.md "One rule for
        identity"): an ID of the agent's own that names one already; else the entity at
        its place (role, content, occurrence k since the last session/load, or in a
        fork's copied history since the fork), if any; else a new one, under the
        agent's ID or the derived one. A message sent live counts on past every earlier
        one of its role and content (a load's replay that ran two messages together
        left their counts behind: a new message never takes an earlier one's ID)."""
        n = (kind, orjson.dumps(content, option=orjson.OPT_SORT_KEYS))
        own = None if native is None else s.alias.get((kind, native))
        k = s.counts.get(n, 0) + 1
        high = s.high.get(n, 0)
        if live:
            k = max(k, high + 1)
        s.counts[n] = k
        s.high[n] = max(k, high)
        derived = derived_id(kind, content, k)
        mid = own
        if mid is None:
            mid = s.places.get((n, k))
            if mid is None:
                mid = derived if native is None or k <= high else native
            if mid != derived:
                s.places[(n, k)] = mid
        if native is not None and own is None:
            s.alias[(kind, native)] = mid
        # the latest state on the wire
        s.entities[(kind, mid)] = {"content": content if value is None else value}
        return mid

    def _v1_close(self, s: Session, *, live: bool = True) -> None:
        """The message being sent ends: a chunk of another kind, a tool call, a plan, a
        request of the agent, the turn's end (ASR-704 for v1, docs/asr.md)."""
        if s.pending is None:
            return
        kind, content = s.pending
        s.pending = None
        self._v1_derive(s, kind, content, live=live)
        if live:
            s.order.append(("msg", kind, content, None, self._nid()))

    def _nid(self) -> str | None:
        """The ID of the agent's own a message will have in a replay, for an agent that
        gives one there only (opencode); None for one that never does."""
        if not self.native:
            return None
        self.n += 1
        return f"msg_{self.n}"

    def _v1_chunks(self, sid: str, kind: str, content: list, mid: str | None,
                   split: bool = False) -> None:
        """A v1 message as chunks, one a block; ``split``: each text block re-chunked in
        two (the store joins text chunks, ASR-704)."""
        for b in content:
            parts = [b]
            if split and set(b) == {"type", "text"} and len(b["text"]) > 1:
                h = len(b["text"]) // 2
                parts = [{"type": "text", "text": b["text"][:h]},
                         {"type": "text", "text": b["text"][h:]}]
            for part in parts:
                u = {"sessionUpdate": V1_CHUNK[kind], "content": part}
                if mid is not None:
                    u["messageId"] = mid
                self._upd(sid, u)

    def _v1_tool(self, cid: str, value: dict) -> dict:
        """A v1 tool call sent whole (``tool_call``)."""
        u = {"sessionUpdate": "tool_call", "toolCallId": cid}
        u.update({k: v for k, v in value.items() if k not in ("content", "_meta")})
        u["content"] = [{"type": "content", "content": b} for b in value["content"]]
        return u

    def _loadable(self) -> list[str]:
        """Sessions a v1 client may load: any not closed, on another connection or on
        this one (an editor reopening a session it has open), but for a fork there
        before its first prompt (its copied history may still be coming)."""
        return [s for s, v in self.sessions.items()
                if not v.closed and (v.prompted or s not in self.attached)]

    @precondition(lambda self: self.v == 1 and self.turn is None and self._loadable())
    @rule(data=st.data(), replay=st.sampled_from(["identical", "differing"]))
    def load(self, data, replay: str) -> None:
        """v1's ``session/load``: the agent replays its whole history as v1 sends it
        (chunks without IDs, ``tool_call`` whole, the plan), then answers. The store
        derives the replayed messages' IDs again, counting from the start: a message
        replayed as it was is the entity already stored, a message that differs (or that
        the replay runs together with the one before: v1 has no boundaries, the declared
        loss ``v1_message_boundaries``) is a new one, the earlier ones staying stored.
        Permissions and the client's terminals are not the agent's to replay. A load on
        the connection that has the session open replays it all the same."""
        sid = data.draw(st.sampled_from(self._loadable()))
        s = self.sessions[sid]
        rid = self._req("session/load", {"sessionId": sid, "cwd": "/ws", "mcpServers": []})
        items = [i for i, it in enumerate(s.order)
                 if it[0] == "msg" or it[1][0] not in ("permission", "terminal")]
        if replay == "differing" and items:
            i = data.draw(st.sampled_from(items))
            it = s.order[i]
            if it[0] == "msg":
                s.order[i] = ("msg", it[1], _append_text(it[2], "!"), *it[3:])
            else:
                s.entities[it[1]] = self._differ(it[1], s.get(it[1]))
        s.counts = {}
        self._v1_history(sid, s, items)
        self._send("a2c", {"id": rid, "result": {}})
        self.attached.add(sid)

    def _v1_history(self, sid: str, s: Session, items: list[int]) -> None:
        """The agent replays the history ``items`` of ``s.order`` into session ``sid``
        (a load, or a fork's copy): messages as chunks, under the ID the agent gave
        live or the one of its own it gives in a replay (their place decides which
        entity they are), other entities whole."""
        for i in items:
            it = s.order[i]
            if it[0] == "msg":
                _, kind, content, mid, nid = it
                mid = mid or nid
                if mid is not None:  # the agent's own ID: an entity its ID or place names
                    self._v1_close(s, live=False)
                    self._v1_derive(s, kind, v1_folded(content), live=False, native=mid)
                elif s.pending is not None and s.pending[0] == kind:
                    # runs on: one message to the store
                    s.pending[1] = v1_folded([*s.pending[1], *content])
                else:
                    self._v1_close(s, live=False)
                    s.pending = [kind, v1_folded(content)]
                self._v1_chunks(sid, kind, content, mid)
                continue
            key = it[1]
            value = s.entities[key] = s.get(key)  # a fork's copy: now on its wire
            if key[0] == "tool":
                self._v1_close(s, live=False)
                self._upd(sid, self._v1_tool(key[1], value))
            elif key[0] == "plan":
                self._v1_close(s, live=False)
                self._upd(sid, {"sessionUpdate": "plan", "entries": value["entries"]})
            else:  # a compaction: v2's shape; it follows a message being sent
                self._upd(sid, self._whole(key, value))
        self._v1_close(s, live=False)

    # -- sessions and connections ---------------------------------------------------

    @precondition(lambda self: self.turn is None
                  and len([s for s in self.sessions if s in SESSIONS]) < len(SESSIONS))
    @rule()
    def new_session(self) -> None:
        sid = [s for s in SESSIONS if s not in self.sessions][0]
        rid = self._req("session/new", {"cwd": "/ws", "mcpServers": []})
        self._send("a2c", {"id": rid, "result": {"sessionId": sid}})
        self.sessions[sid] = Session()
        self.attached.add(sid)

    @precondition(lambda self: self.turn is None and len(self.connections) < 3)
    @rule()
    def new_connection(self) -> None:
        self._connect()

    def _resumable(self) -> list[str]:
        return [s for s, v in self.sessions.items() if s not in self.attached and not v.closed]

    @precondition(lambda self: self.turn is None and self._resumable())
    @rule(data=st.data(), replay=st.sampled_from(["none", "identical", "differing"]))
    def resume(self, data, replay: str) -> None:
        """``session/resume``: with ``replayFrom`` the agent replays its history as whole
        upserts (ASR-725) before it answers; a differing replay says another content
        for one entity, which is then the entity's state (ASR-717). v1's resume has no
        replay (its replay is ``session/load``): derived IDs count on."""
        if self.v == 1:
            replay = "none"
        sid = data.draw(st.sampled_from(self._resumable()))
        s = self.sessions[sid]
        params = {"sessionId": sid, "cwd": "/ws"}
        if replay != "none":
            params["replayFrom"] = {"type": "start"}
        rid = self._req("session/resume", params)
        if replay != "none":
            for key, value in s.copied.items():  # the whole history: the copy too
                s.entities.setdefault(key, value)
            s.copied.clear()
            # requests (permissions, elicitations) are not replayed (ASR-726)
            keys = [k for k in s.entities if k[0] not in ("permission", "input")]
            if replay == "differing" and keys:
                key = data.draw(st.sampled_from(keys))
                s.put(key, self._differ(key, s.entities[key]))
            for key in keys:
                self._upd(sid, self._whole(key, s.entities[key], sid))
        self._send("a2c", {"id": rid, "result": {}})
        self.attached.add(sid)

    @staticmethod
    def _differ(key: tuple, value: dict) -> dict:
        if key[0] in ("user", "agent", "thought", "smsg"):
            return {**value, "content": _append_text(value["content"], "!")}
        if key[0] == "subagent":
            return {**value, "title": value["title"] + "!"}
        if key[0] == "tool":
            return {**value, "title": value.get("title", "") + "!"}  # or sets a cleared one
        if key[0] == "compaction":
            return {**value, "summary": _append_text(value["summary"], "!")}
        if key[0] == "terminal":
            return {**value, "output": value["output"] + b"!"}
        return {"entries": [*value["entries"], {"content": "more", "priority": "low",
                                                "status": "pending"}]}

    @staticmethod
    def _whole(key: tuple, value: dict, sid: str = "") -> dict:
        """The entity as one whole upsert, as a replay sends it (into session ``sid``)."""
        kind, eid = key
        if kind == "subagent":
            u = {"sessionUpdate": "subagent_update", "sessionId": eid, "title": value["title"]}
            if value["state"] is not None:
                u["state"] = value["state"]
            return u
        if kind == "smsg":
            return {"sessionUpdate": "session_message", "messageId": eid,
                    "senderSessionId": value["from"], "recipientSessionId": sid,
                    "content": value["content"]}
        if kind in ("user", "agent", "thought"):
            name = {"user": "user_message", "agent": "agent_message",
                    "thought": "agent_thought"}[kind]
            u = {"sessionUpdate": name, "messageId": eid, "content": value["content"]}
            if value.get("_meta"):
                u["_meta"] = value["_meta"]
            return u
        if kind == "tool":
            u = {"sessionUpdate": "tool_call_update", "toolCallId": eid}
            u.update({k: v for k, v in value.items() if k not in ("content", "_meta")})
            if value["_meta"]:
                u["_meta"] = value["_meta"]
            u["content"] = [{"type": "content", "content": b} for b in value["content"]]
            return u
        if kind == "terminal":
            return {"sessionUpdate": "terminal_update", "terminalId": eid,
                    "command": value["command"], "cwd": "/ws",
                    "output": {"data": base64.b64encode(value["output"]).decode()},
                    "exitStatus": {"exitCode": value["exitCode"]}}
        if kind == "compaction":
            u = {"sessionUpdate": "compaction_update", "compactionId": eid,
                 "status": value["status"]}
            if value["summary"]:
                u["summary"] = value["summary"]
            return u
        return {"sessionUpdate": "plan_update",
                "plan": {"type": "items", "planId": eid, "entries": value["entries"]}}

    @precondition(lambda self: self.turn is None and self.attached and len(self.sessions) < 4)
    @rule(data=st.data(), replay=st.booleans())
    def fork(self, data, replay: bool) -> None:
        """``session/fork``: the agent may replay the parent's history into the new session
        before it answers; either way the fork starts from the parent's entities as they
        are now (ASR-718), and what it replays is the parent's (``copiedFrom``). v1's
        (unstable) fork replays as a load does: messages as chunks, without IDs or with
        the agent's own, each the parent's entity at its place; the fork's own messages
        count on past those it copied."""
        parent = data.draw(st.sampled_from(sorted(self.attached)))
        self.n += 1
        sid = f"f{self.n}"
        params = {"sessionId": parent, "cwd": "/ws"}
        child = Session(parent)
        if self.v == 1:
            params["mcpServers"] = []
            child.order = list(self.sessions[parent].order)
            child.high = dict(self.sessions[parent].high)
            child.places = dict(self.sessions[parent].places)
        rid = self._req("session/fork", params)
        for key, value in self.sessions[parent].view().items():
            # requests are not replayed (ASR-726): the fork has none; nor the parent's
            # subagents and the messages other sessions sent it (the generator leaves
            # them out: a fork ACP does not name as recipient has them as audit records)
            if key[0] in ("permission", "input", "subagent", "smsg"):
                continue
            if replay and self.v == 2:
                child.put(key, value)
                child.history[key] = copy.deepcopy(value)
                self._upd(sid, self._whole(key, value))
            else:
                child.copied[key] = copy.deepcopy(value)
        if replay and self.v == 1:
            self._v1_history(sid, child, [i for i, it in enumerate(child.order) if (
                it[0] == "msg" or it[1][0] not in ("permission", "terminal"))])
            child.history.update(copy.deepcopy(child.entities))
        self._send("a2c", {"id": rid, "result": {"sessionId": sid}})
        self.sessions[sid] = child
        self.attached.add(sid)

    @precondition(lambda self: self.turn is None and self.attached)
    @rule(data=st.data())
    def close(self, data) -> None:
        sid = data.draw(st.sampled_from(sorted(self.attached)))
        rid = self._req("session/close", {"sessionId": sid})
        self._send("a2c", {"id": rid, "result": {}})
        self.attached.discard(sid)
        self.sessions[sid].closed = True

    # -- a prompt turn --------------------------------------------------------------

    @precondition(lambda self: self.turn is None and self.attached)
    @rule(data=st.data(), prompt=blocks, late=st.integers(0, 3))
    def prompt(self, data, prompt: list, late: int = 0) -> None:
        """A prompt (ASR-713): its message ID, and the IDs of the turn's thought and agent
        message, come from one small pool: the three types share IDs (ASR-724)."""
        sid = data.draw(st.sampled_from(sorted(self.attached)))
        s = self.sessions[sid]
        if self.v == 1:  # answered at the turn's end, without a messageId
            # the agent's echo logged before the request (ASR-713), under an ID of its
            # own or none; not into a fork before its first prompt, where an update is
            # history (docs/acp-fold.md)
            shape = data.draw(st.sampled_from(ECHOES)) if late == 3 and s.prompted else None
            if shape is not None:
                self._v1_close(s)
                native = shape == "own"
                if native:
                    self.n += 1
                self._v1_chunks(sid, "user", prompt, f"e{self.n}" if native else None,
                                split=shape == "split")
            s.prompted = True
            rid = self._req("session/prompt", {"sessionId": sid, "prompt": prompt})
            self.turn = {"sid": sid, "rid": rid, "prompt": prompt, "echo": None,
                         "at": len(s.order), "tools": []}
            if shape is not None:  # the store knows it for the echo at the request
                self._v1_echoed(shape, f"e{self.n}" if shape == "own" else None)
            return
        # IDs new in this session: the three types share the pool (ASR-724), and an ID a
        # parent first used after the fork is new in the fork (ASR-718: the copy is the
        # parent's state at the fork). The turn's agent message or thought may be one a
        # fork copied and was not replayed: it is patched from that copy.
        taken = set(s.entities)
        free = {k: [m for m in MIDS if (k, m) not in taken and (k != "user" or (
                    k, m) not in s.copied)] for k in ("user", "agent", "thought")}
        if not all(free.values()):
            return
        uid = data.draw(st.sampled_from(free["user"]))
        s.prompted = True
        rid = self._req("session/prompt", {"sessionId": sid, "prompt": prompt})
        answer = {"jsonrpc": "2.0", "id": rid, "result": {"messageId": uid}}
        if not late:
            self._send("a2c", answer)
        s.put(("user", uid), {"content": prompt})
        # the answer may be logged after the turn's first updates (the two directions of
        # a proxy are logged apart): after ``late`` of them
        self.turn = {"answer": [late, answer]} if late else None
        self._upd(sid, {"sessionUpdate": "state_update", "state": "running"})
        self.turn = {**(self.turn or {}), "sid": sid, "user": uid,
                     "agent": data.draw(st.sampled_from(free["agent"])),
                     "thought": data.draw(st.sampled_from(free["thought"])), "tools": []}

    def _in_turn(self) -> bool:
        return self.turn is not None

    @precondition(_in_turn)
    @rule(kind=st.sampled_from(["agent", "thought"]), text=word)
    def chunk(self, kind: str, text: str) -> None:
        t = self.turn
        s = self.sessions[t["sid"]]
        if self.v == 1:  # no messageId: the message runs on while the kind does
            if s.pending is not None and s.pending[0] == kind:
                s.pending[1] = _append_text(s.pending[1], text)
            else:
                self._v1_close(s)
                s.pending = [kind, [{"type": "text", "text": text}]]
            self._upd(t["sid"], {"sessionUpdate": V1_CHUNK[kind],
                                 "content": {"type": "text", "text": text}})
            return
        key = (kind, t[kind])
        cur = s.get(key, {"content": []})
        s.put(key, {**cur, "content": _append_text(cur["content"], text)})
        self._upd(t["sid"], {"sessionUpdate": f"{'agent_message' if kind == 'agent' else 'agent_thought'}_chunk",
                             "messageId": t[kind], "content": {"type": "text", "text": text}})

    def _earlier(self) -> list[tuple]:
        if self.turn is None or self.v == 1:  # v1 chunks name no message
            return []
        t = self.turn
        return [k for k in self.sessions[t["sid"]].entities
                if k[0] == "agent" and k[1] != t["agent"]]

    @precondition(lambda self: self._earlier())
    @rule(data=st.data(), text=word)
    def chunk_earlier(self, data, text: str) -> None:
        """A live chunk to an agent message already final (an earlier turn, maybe replayed
        on this connection): a change after final, a superseding record (ASR-706)."""
        t = self.turn
        s = self.sessions[t["sid"]]
        key = data.draw(st.sampled_from(self._earlier()))
        s.put(key, {**s.entities[key], "content": _append_text(s.entities[key]["content"], text)})
        self._upd(t["sid"], {"sessionUpdate": "agent_message_chunk", "messageId": key[1],
                             "content": {"type": "text", "text": text}})

    @precondition(lambda self: self.v == 2 and self._in_turn())
    @rule(content=blocks, meta=st.one_of(st.none(), st.just(CLEAR), st.dictionaries(
        st.sampled_from("ab"), st.one_of(st.none(), st.integers(0, 2)), min_size=1)))
    def agent_upsert(self, content: list, meta) -> None:
        """A whole agent_message upsert replaces the content chunks made (ASR-704); its
        ``_meta`` is patched key by key, null clearing it all (ASR-708)."""
        t = self.turn
        key = ("agent", t["agent"])
        s = self.sessions[t["sid"]]
        cur = dict(s.get(key, {"content": []}))
        cur["content"] = content
        u = {"sessionUpdate": "agent_message", "messageId": t["agent"], "content": content}
        if meta is CLEAR:
            u["_meta"] = None
            cur.pop("_meta", None)
        elif meta is not None:
            u["_meta"] = meta
            m = {**cur.get("_meta", {}), **meta}
            cur["_meta"] = {k: v for k, v in m.items() if v is not None}
        s.put(key, cur)
        self._upd(t["sid"], u)

    @precondition(lambda self: self.v == 2 and self._in_turn())
    @rule(text=word)
    def thought_upsert(self, text: str) -> None:
        """A whole agent_thought upsert (text: a thought's other blocks are a declared
        loss, ``reasoning``, ASR-722)."""
        t = self.turn
        content = [{"type": "text", "text": text}]
        self.sessions[t["sid"]].put(("thought", t["thought"]), {"content": content})
        self._upd(t["sid"], {"sessionUpdate": "agent_thought", "messageId": t["thought"],
                             "content": content})

    @precondition(lambda self: self._in_turn() and self.turn.get("echo", "") is None)
    @rule(shape=st.sampled_from(ECHOES))
    def echo_prompt_v1(self, shape: str) -> None:
        """A v1 agent echoes the prompt as user_message_chunks: under an ID of its own
        (mistral-vibe), or with none, whole or re-chunked. The echo is the prompt: its
        ID the agent's, or the one derived for the prompt, stored once (ASR-713;
        docs/asr.md "One rule for identity")."""
        t = self.turn
        s = self.sessions[t["sid"]]
        self._v1_close(s)
        native = None
        if shape == "own":
            self.n += 1
            native = f"e{self.n}"
        self._v1_chunks(t["sid"], "user", t["prompt"], native, split=shape == "split")
        self._v1_echoed(shape, native)

    def _v1_echoed(self, shape: str, native: str | None) -> None:
        """The prompt's echo has been sent: the prompt's entity is the one its place (and
        the agent's ID, if it gave one) names, counted now, as the store does when the
        echo ends."""
        t = self.turn
        s = self.sessions[t["sid"]]
        t["echo"] = self._v1_derive(s, "user", v1_folded(t["prompt"]), native=native)
        t["native_echo"] = native

    @precondition(lambda self: self.v == 2 and self._in_turn())
    @rule()
    def echo_prompt(self) -> None:
        """The agent echoes the prompt as a user_message with the prompt's ID: the same
        entity, stored once (ASR-713)."""
        t = self.turn
        self._upd(t["sid"], {"sessionUpdate": "user_message", "messageId": t["user"],
                             "content": self.sessions[t["sid"]].entities[("user", t["user"])][
                                 "content"]})

    @precondition(_in_turn)
    @rule(title=word, inp=st.dictionaries(st.sampled_from("ab"), st.integers(-3, 3),
                                          max_size=2), named=st.booleans())
    def tool_start(self, title: str, inp: dict, named: bool) -> None:
        t = self.turn
        self.n += 1
        cid = f"c{self.n}"
        t["tools"].append(cid)
        if self.v == 1:  # first sight: tool_call, with no name (v1's is optional)
            s = self.sessions[t["sid"]]
            self._v1_close(s)
            u = {"sessionUpdate": "tool_call", "toolCallId": cid, "title": title,
                 "kind": "edit", "status": "pending", "rawInput": inp}
            if named:
                u["name"] = "tool"
            s.put(("tool", cid), {**{k: v for k, v in u.items() if k not in (
                "sessionUpdate", "toolCallId")}, "content": [], "_meta": {}})
            self._upd(t["sid"], u)
            return
        self.sessions[t["sid"]].put(("tool", cid), {
            "name": "tool", "title": title, "kind": "edit", "status": "pending",
            "rawInput": inp, "content": [], "_meta": {}})
        self._upd(t["sid"], {"sessionUpdate": "tool_call_update", "toolCallId": cid,
                             "name": "tool", "title": title, "kind": "edit",
                             "status": "pending", "rawInput": inp})

    def _open_tools(self) -> list[str]:
        if self.turn is None:
            return []
        s = self.sessions[self.turn["sid"]]
        return [c for c in self.turn["tools"] if s.entities[("tool", c)]["status"] not in FINAL]

    @precondition(lambda self: self._open_tools())
    @rule(data=st.data(), status=st.sampled_from(["in_progress", *FINAL, None]),
          content=st.one_of(st.none(), tool_items),
          title=st.one_of(st.none(), word, st.just(CLEAR)),
          output=st.one_of(st.none(), st.just({"ok": True}), st.just("done")),
          meta=st.one_of(st.none(), st.dictionaries(st.sampled_from("ab"), st.one_of(
              st.none(), st.integers(0, 2)), min_size=1, max_size=2)))
    def tool_update(self, data, status, content, title, output, meta) -> None:
        """A partial tool_call_update: an omitted field is unchanged, null clears it, and
        ``_meta`` is patched key by key (ASR-704, ASR-708)."""
        if self.v == 1:  # v1: no cancelled; null means unchanged (name), _meta not patched
            status = "failed" if status == "cancelled" else status
            title = None if title is CLEAR else title
            meta = None
        self._tool_update(self.turn["sid"], data.draw(st.sampled_from(self._open_tools())),
                          status, content, title, output, meta)

    def _late_tools(self) -> list[tuple[str, str]]:
        if self.turn is not None:
            return []
        # not into a fork before its first prompt: its updates are history until then,
        # folded from empty as a replay holds the whole (docs/acp-fold.md "Replay")
        return [(sid, k[1]) for sid in sorted(self.attached) if self.sessions[sid].prompted
                for k, v in self.sessions[sid].view().items()
                if k[0] == "tool" and v["status"] not in FINAL]

    @precondition(lambda self: self._late_tools())
    @rule(data=st.data(), status=st.sampled_from(FINAL),
          output=st.one_of(st.none(), st.just({"late": 1})))
    def tool_late(self, data, status, output) -> None:
        """A call left open ends later, maybe on another connection after a resume, with
        only its status (and rawOutput): it keeps everything else (ASR-704, docs/asr.md
        "One entity, every connection")."""
        sid, cid = data.draw(st.sampled_from(self._late_tools()))
        if self.v == 1:
            status = "failed" if status == "cancelled" else status
        self._tool_update(sid, cid, status, None, None, output, None)

    def _tool_update(self, sid, cid, status, content, title, output, meta) -> None:
        s = self.sessions[sid]
        cur = dict(s.get(("tool", cid)))
        u: dict = {"sessionUpdate": "tool_call_update", "toolCallId": cid}
        if self.v == 1:
            self._v1_close(s)
            if title is None and content is None:
                u["name"] = None  # v1: "omitting it or sending null ... left unchanged"
        if status is not None:
            u["status"] = cur["status"] = status
        if content is not None:
            u["content"] = [{"type": "content", "content": b} for b in content]
            cur["content"] = content
        if title is CLEAR:
            u["title"] = None
            cur.pop("title", None)
        elif title is not None:
            u["title"] = cur["title"] = title
        if output is not None:
            u["rawOutput"] = cur["rawOutput"] = output
        if meta is not None:
            u["_meta"] = meta
            m = {**cur["_meta"], **meta}
            cur["_meta"] = {k: v for k, v in m.items() if v is not None}
        s.put(("tool", cid), cur)
        self._upd(sid, u)

    @precondition(_in_turn)
    @rule(data=st.data(), plan=entries)
    def plan(self, data, plan: list) -> None:
        """Each plan_update is a full snapshot: later ones supersede (ASR-705)."""
        t = self.turn
        s = self.sessions[t["sid"]]
        if self.v == 1:  # the whole list, no ID: one plan per session
            self._v1_close(s)
            s.put(("plan", "v1:plan"), {"entries": plan})
            self._upd(t["sid"], {"sessionUpdate": "plan", "entries": plan})
            return
        pid = data.draw(st.sampled_from(["p1", "p2"]))
        s.put(("plan", pid), {"entries": plan})
        self._upd(t["sid"], {"sessionUpdate": "plan_update",
                             "plan": {"type": "items", "planId": pid, "entries": plan}})

    @precondition(_in_turn)
    @rule(parts=st.lists(word, max_size=2), status=st.sampled_from(["completed", "failed"]))
    def compaction(self, parts: list, status: str) -> None:
        """A compaction: in progress, its summary in chunks, then final (ASR-719)."""
        t = self.turn
        self.n += 1
        kid = f"k{self.n}"
        self._upd(t["sid"], {"sessionUpdate": "compaction_update", "compactionId": kid,
                             "status": "in_progress"})
        summary: list = []
        for text in parts:
            summary = _append_text(summary, text)
            self._upd(t["sid"], {"sessionUpdate": "compaction_summary_chunk",
                                 "compactionId": kid,
                                 "content": {"type": "text", "text": text}})
        self._upd(t["sid"], {"sessionUpdate": "compaction_update", "compactionId": kid,
                             "status": status})
        self.sessions[t["sid"]].put(("compaction", kid), {"status": status,
                                                          "summary": summary})

    @precondition(_in_turn)
    @rule(command=st.sampled_from(["make", "ls -l"]),
          chunks=st.lists(st.binary(max_size=5), max_size=3), code=st.integers(0, 2))
    def terminal(self, command: str, chunks: list, code: int) -> None:
        """A terminal: its command, its output in byte chunks, its exit status. In v1
        the client runs it for the agent: ``terminal/create``, ``terminal/output``
        (each a snapshot of the whole output so far), ``terminal/wait_for_exit``."""
        t = self.turn
        self.n += 1
        tid = f"t{self.n}"
        if self.v == 1:
            s = self.sessions[t["sid"]]
            self._v1_close(s)
            cmd, *args = command.split(" ")
            self._ask_client("terminal/create", {"sessionId": t["sid"], "command": cmd,
                                                 "args": args, "cwd": "/ws"},
                             {"terminalId": tid})
            out = b""
            for c in chunks:
                out += c
                self._ask_client("terminal/output", {"sessionId": t["sid"], "terminalId": tid},
                                 {"output": out.decode("latin-1"), "truncated": False})
            self._ask_client("terminal/wait_for_exit", {"sessionId": t["sid"],
                                                        "terminalId": tid}, {"exitCode": code})
            s.put(("terminal", tid), {"command": shlex.join([cmd, *args]), "exitCode": code,
                                      "output": out.decode("latin-1").encode()})
            return
        self._upd(t["sid"], {"sessionUpdate": "terminal_update", "terminalId": tid,
                             "command": command, "cwd": "/ws"})
        for c in chunks:
            self._upd(t["sid"], {"sessionUpdate": "terminal_output_chunk", "terminalId": tid,
                                 "data": base64.b64encode(c).decode()})
        self._upd(t["sid"], {"sessionUpdate": "terminal_update", "terminalId": tid,
                             "exitStatus": {"exitCode": code}})
        self.sessions[t["sid"]].put(("terminal", tid), {"command": command, "exitCode": code,
                                                        "output": b"".join(chunks)})

    def _ask_client(self, method: str, params: dict, result: dict) -> None:
        """A request of the agent, answered at once (a v1 client's terminal)."""
        self.n += 1
        rid = 100 + self.n  # the agent's own JSON-RPC ID space
        self._send("a2c", {"id": rid, "method": method, "params": params})
        self._send("c2a", {"id": rid, "result": result})

    @precondition(lambda self: self._in_turn() and (self.v == 2 or self.turn["tools"]))
    @rule(data=st.data(), title=word)
    def ask_permission(self, data, title: str) -> None:
        """The agent asks the client (ASR-716); the answer comes later, other frames of
        both directions between. v1 asks about a tool call (``toolCall``, a v1 tool call
        update the client applies to the call: its title here), with no title of its
        own: the permission's title is the call's."""
        t = self.turn
        s = self.sessions[t["sid"]]
        self.n += 1
        rid = 100 + self.n  # the agent's own JSON-RPC ID space
        req = f"{len(self.connections) - 1}:{rid}"
        params = {"sessionId": t["sid"], "title": title, "options": OPTIONS}
        if self.v == 1:
            self._v1_close(s)
            cid = data.draw(st.sampled_from(t["tools"]))
            s.put(("tool", cid), {**s.entities[("tool", cid)], "title": title})
            params = {"sessionId": t["sid"], "toolCall": {"toolCallId": cid, "title": title},
                      "options": OPTIONS}
        s.put(("permission", req), {"title": title, "status": "pending"})
        t.setdefault("asked", []).append((req, rid))
        self._send("a2c", {"id": rid, "method": "session/request_permission",
                           "params": params})

    # -- ACP-unstable in v2: subagents, session messages; elicitations -------------

    @precondition(lambda self: self.v == 2 and self._in_turn()
                  and sum(s.spawned for s in self.sessions.values()) < 2)
    @rule(title=word, chunks=st.lists(word, min_size=1, max_size=2), ends=st.booleans())
    def subagent(self, title: str, chunks: list, ends: bool) -> None:
        """The agent spawns a subagent (``subagent_update`` in the parent, ASR-721): a
        session of its own, never created by the client, whose messages come on the
        same connection; the subagent's later updates (its state) supersede."""
        t = self.turn
        self.n += 1
        kid = f"sub{self.n}"
        child = Session()
        child.closed = True  # not the client's to resume or prompt
        child.spawned = True
        self.sessions[kid] = child
        self._upd(t["sid"], {"sessionUpdate": "subagent_update", "sessionId": kid,
                             "title": title})
        sub = {"title": title, "state": None}
        self.sessions[t["sid"]].put(("subagent", kid), sub)
        content: list = []
        for text in chunks:
            content = _append_text(content, text)
            self._upd(kid, {"sessionUpdate": "agent_message_chunk", "messageId": "m1",
                            "content": {"type": "text", "text": text}})
        child.put(("agent", "m1"), {"content": content})
        if ends:
            self._upd(kid, {"sessionUpdate": "state_update", "state": "idle",
                            "stopReason": "end_turn"})
            state = {"state": "idle", "stopReason": "end_turn"}
            self._upd(t["sid"], {"sessionUpdate": "subagent_update", "sessionId": kid,
                                 "state": state})
            self.sessions[t["sid"]].put(("subagent", kid), {**sub, "state": state})

    @precondition(lambda self: self.v == 2 and self._in_turn() and len(self.attached) > 1)
    @rule(data=st.data(), chunks=st.lists(word, min_size=1, max_size=2))
    def session_message(self, data, chunks: list) -> None:
        """The turn's session sends a message to another session (ASR-735): the
        recipient receives it (``session_message`` then chunks, the receiving side's
        ID), the sender's own copy is an audit record of its stream."""
        t = self.turn
        to = data.draw(st.sampled_from(sorted(self.attached - {t["sid"]})))
        self.n += 1
        mid = f"sm{self.n}"
        ends = {"senderSessionId": t["sid"], "recipientSessionId": to}
        content = [{"type": "text", "text": chunks[0]}]
        self._upd(to, {"sessionUpdate": "session_message", "messageId": mid, **ends,
                       "content": content})
        for text in chunks[1:]:
            content = _append_text(content, text)
            self._upd(to, {"sessionUpdate": "session_message_chunk", "messageId": mid,
                           **ends, "content": {"type": "text", "text": text}})
        self._upd(t["sid"], {"sessionUpdate": "session_message", "messageId": f"out-{mid}",
                             **ends, "content": content})
        self.sessions[to].put(("smsg", mid), {"content": content, "from": t["sid"]})

    @precondition(lambda self: self.v == 2 and self._in_turn())
    @rule(message=word, url=st.booleans())
    def elicit(self, message: str, url: bool) -> None:
        """The agent asks the user for input (``elicitation/create``, ASR-734): a form,
        or a URL with its own ``elicitationId``; the answer comes later."""
        t = self.turn
        self.n += 1
        rid = 100 + self.n
        params = {"sessionId": t["sid"], "mode": "form", "message": message,
                  "requestedSchema": {"type": "object",
                                      "properties": {"x": {"type": "string"}}}}
        req = f"{len(self.connections) - 1}:{rid}"
        if url:
            req = f"el{self.n}"
            params = {"sessionId": t["sid"], "mode": "url", "elicitationId": req,
                      "message": message, "url": "https://auth.example/x"}
        self.sessions[t["sid"]].put(("input", req), {"message": message, "status": "pending",
                                                     "response": None})
        t.setdefault("elicited", []).append((req, rid, url))
        self._send("a2c", {"id": rid, "method": "elicitation/create", "params": params})

    @precondition(lambda self: self.turn is not None and self.turn.get("elicited"))
    @rule(data=st.data(), action=st.sampled_from(["accept", "decline", "cancel"]))
    def answer_elicitation(self, data, action: str) -> None:
        t = self.turn
        req, rid, url = t["elicited"].pop(data.draw(st.integers(0, len(t["elicited"]) - 1)))
        result: dict = {"action": action}
        response = None
        if action == "accept" and not url:
            result["content"] = response = {"x": "yes"}
        s = self.sessions[t["sid"]]
        s.put(("input", req), {**s.entities[("input", req)], "response": response,
                               "status": {"accept": "answered", "decline": "declined",
                                          "cancel": "cancelled"}[action]})
        self._send("c2a", {"id": rid, "result": result})

    @precondition(lambda self: self.turn is not None and self.turn.get("asked"))
    @rule(data=st.data(), choice=st.sampled_from(["allow", "deny", None]))
    def answer_permission(self, data, choice) -> None:
        t = self.turn
        req, rid = t["asked"].pop(data.draw(st.integers(0, len(t["asked"]) - 1)))
        outcome = ({"outcome": "cancelled"} if choice is None else
                   {"outcome": "selected", "optionId": choice})
        self.sessions[t["sid"]].put(("permission", req), {
            **self.sessions[t["sid"]].entities[("permission", req)], "status": "resolved",
            "selectedOptionId": choice,
            "decision": {"allow": "allow_once", "deny": "reject_once", None: "cancelled"}[choice]})
        self._send("c2a", {"id": rid, "result": {"outcome": outcome}})

    @precondition(_in_turn)
    @rule()
    def end_turn(self) -> None:
        t = self.turn
        while t.get("asked"):  # a client answers before the turn can end
            self.answer_permission(_First(), None)
        while t.get("elicited"):
            self.answer_elicitation(_First(), "cancel")
        if "answer" in t:  # answered, at the latest, before the turn ends
            self._send("a2c", t.pop("answer")[1])
        stop = "cancelled" if t.get("cancelled") else "end_turn"
        self.last = t["sid"]
        if self.v == 1:  # the response ends the turn; the prompt's ID is derived then,
            s = self.sessions[t["sid"]]  # or is the echo's (ASR-713)
            self._v1_close(s)
            self._send("a2c", {"id": t["rid"], "result": {"stopReason": stop}})
            if t["echo"] is None:  # the prompt as sent; its ID from it as folded
                self._v1_derive(s, "user", v1_folded(t["prompt"]), value=t["prompt"])
            else:  # the echo's chunks are the content
                s.entities[("user", t["echo"])] = {"content": v1_folded(t["prompt"])}
            s.order.insert(t["at"], ("msg", "user", t["prompt"], t.get("native_echo"),
                                     self._nid()))
            self.turn = None
            return
        self._upd(t["sid"], {"sessionUpdate": "state_update", "state": "idle",
                             "stopReason": stop})
        self.turn = None

    @precondition(lambda self: self._in_turn() and not self.turn.get("cancelled"))
    @rule()
    def cancel(self) -> None:
        """The client cancels the turn (``session/cancel``, a notification): the agent
        may still send what it has, answers are still due, and the turn ends with
        ``stopReason: cancelled``; nothing of it is a record."""
        self.turn["cancelled"] = True
        self._send("c2a", {"method": "session/cancel",
                           "params": {"sessionId": self.turn["sid"]}})

    @precondition(lambda self: self.turn is None and self.last in self.attached)
    @rule()
    def cancel_late(self) -> None:
        """A cancel that raced the turn's end: logged after the agent ended the turn."""
        self._send("c2a", {"method": "session/cancel", "params": {"sessionId": self.last}})
        self.last = None

    # -- the oracle -----------------------------------------------------------------

    @rule()
    def wait(self) -> None:
        """Nothing on the wire (every other rule may be closed off: all sessions closed)."""

    def teardown(self) -> None:
        """The oracle runs once per run, on the whole recording: converting after every
        step would cost the run for no more power (the records are final at the end)."""
        if self.turn is not None:
            self.end_turn()
        kinds = {k[0] for v in self.sessions.values() for k in v.entities}
        event(f"v{self.v} connections={len(self.connections)} sessions={len(self.sessions)} "
              f"forks={sum(s.startswith('f') for s in self.sessions)} {sorted(kinds)}")
        self.oracle()

    def oracle(self) -> None:
        """What acp-fold and acp-asr store of the recording, checked against the truth."""
        check(self.connections, {k: v.entities for k, v in self.sessions.items()},
              {k: (v.parent, v.history) for k, v in self.sessions.items() if v.history})


def wire_log(connections: list[list[tuple[str, dict]]]) -> bytes:
    """The wire log of every connection, one header each, back to back."""
    lines = []
    seq = 0
    for conn in connections:
        lines.append(orjson.dumps(HEADER))
        for d, msg in conn:
            lines.append(orjson.dumps({"seq": seq, "t": T0 + seq * 1_000_000, "dir": d,
                                       "raw": orjson.dumps(msg).decode()}))
            seq += 1
    return b"".join(x + b"\n" for x in lines)


def _key(rec: dict) -> tuple | None:
    t = rec["type"]
    if t == "message":
        content = rec.get("content") or []
        if rec.get("origin") == "inter_session":
            return ("smsg", rec["messageId"])
        if rec["role"] == "user":
            return ("user", rec["messageId"])
        if content and all(p.get("type") == "reasoning" for p in content):
            return ("thought", rec["messageId"])
        return ("agent", rec["messageId"])
    if t in ("tool_call", "tool_result"):
        return (t, rec["callId"])
    if t == "plan":
        return ("plan", rec["planId"])
    if t == "permission":
        return ("permission", rec["requestId"])
    if t == "compaction":
        return ("compaction", rec["compactionId"])
    if t == "terminal":
        return ("terminal", rec["terminalId"])
    if t == "subagent":
        return ("subagent", rec["childSession"])
    if t == "input_request":
        return ("input", rec["requestId"])
    return None


def _said(rec: dict) -> dict:
    """What a record says of its entity, without its envelope (seq, id, times, refs)."""
    drop = {"seq", "id", "ts", "tsSource", "observedAt", "native", "supersedes", "assembly",
            "origin"}
    return {k: v for k, v in rec.items() if k not in drop}


def _expected(key: tuple, value: dict) -> dict[tuple, dict]:
    """The records the machine's state of an entity must be stored as (the fields the
    oracle checks), under the declared losses (ASR-722)."""
    kind, eid = key
    if kind in ("user", "agent"):
        return {key: {"content": value["content"], "_meta": value.get("_meta") or None}}
    if kind == "thought":
        text = "".join(b["text"] for b in value["content"])
        return {key: {"content": [{"type": "reasoning", "text": text}]}}
    if kind == "plan":
        return {key: {"entries": value["entries"]}}
    if kind in ("permission", "input", "subagent"):
        return {key: value}
    if kind == "smsg":
        return {key: {"content": value["content"], "from": {"session": value["from"]}}}
    if kind == "terminal":
        return {key: {"command": value["command"], "exitCode": value["exitCode"],
                      "output": value["output"]}}
    if kind == "compaction":
        return {key: {"status": value["status"], "summary": value["summary"] or None}}
    out = {("tool_call", eid): {"name": value.get("name"), "title": value.get("title"),
                                "kind": value["kind"], "input": value["rawInput"],
                                "_meta": value["_meta"] or None}}
    if value["status"] in FINAL:  # pending/in_progress are not recorded (ASR-722)
        res = {"status": value["status"], "displayContent": value["content"] or None}
        if "rawOutput" in value:
            res["raw"] = value["rawOutput"]
        out[("tool_result", eid)] = res
    return out


def check(connections: list, truth: dict[str, dict[tuple, dict]],
          copies: dict[str, tuple[str, dict[tuple, dict]]] | None = None) -> None:
    data = wire_log(connections)
    with tempfile.NamedTemporaryFile(suffix=".wire.jsonl") as f:
        f.write(data)
        f.flush()
        warnings: list[str] = []
        streams = convert(fold_paths([f.name], warn=lambda s, n, m: warnings.append(m)))
    where = "\n" + data.decode()
    assert warnings == [], where
    lines = [(sid, i, orjson.dumps(rec)) for sid, recs in streams.items()
             for i, rec in enumerate(recs, 1)]
    assert list(validate_streams(lines)) == [], where
    assert set(streams) == set(truth), where
    for sid, (parent, keys) in (copies or {}).items():
        # ASR-718: what the agent replayed into a fork is copied from its parent: the
        # fork's first record of each entity the parent's stream holds says so
        held = {_key(r): r["id"] for r in streams[parent][1:] if _key(r) is not None}
        named = {r["id"]: _key(r) for r in streams[parent][1:]}
        firsts: dict[tuple, dict] = {}
        for rec in streams[sid][1:]:
            firsts.setdefault(_key(rec), rec)
        for key, at_fork in keys.items():
            # (the records it stood as at the fork: what either session did later is
            # its own, as a call's result that came after the fork)
            for rkey in _expected(key, at_fork):
                if rkey not in held:
                    continue  # (a replay that ran two messages together: a new one)
                cf = firsts[rkey].get("copiedFrom")
                assert cf is not None and cf["session"] == parent, (sid, rkey, where)
                assert named[cf["id"]] == rkey, (sid, rkey, cf, where)
    for sid, recs in streams.items():
        latest: dict[tuple, dict] = {}
        for rec in recs[1:]:
            key = _key(rec)
            if key is None:
                continue
            if key in latest:  # nothing stored twice (ASR-706, ASR-717)
                assert rec.get("supersedes") == latest[key]["id"], (sid, rec, where)
                assert _said(rec) != _said(latest[key]), (sid, rec, where)
            latest[key] = rec
        want: dict[tuple, dict] = {}
        for key, value in truth[sid].items():
            want.update(_expected(key, value))
        assert set(latest) == set(want), (sid, set(latest) ^ set(want), where)
        for key, fields in want.items():
            got = {k: latest[key].get(k) for k in fields}
            if key[0] == "terminal":  # the bytes, however the chunks were encoded
                blob = (got["output"] or {}).get("blob", "")
                got["output"] = base64.b64decode(blob)
            assert got == fields, (sid, key, got, fields, where)
        # ASR-732: recording a replay of the stream gives the same context view
        s = AsrStream(recs[0], recs[1:])
        assert compare_streams(s, replay_and_record(s)) == [], where
        if s.header["producer"]["source"]["formatVersion"] == "1":
            # and for v1: loaded by a v1 client from acp-replay --serve, under the losses
            # the replay reports (texts in a row, which a v1 client joins; the kinds of
            # entity it did not send, by name: compactions)
            s1, report = load_v1_and_record(s)
            lost = set(report["losses"])
            a = [e for e in context_view(s) if e["entity"] not in lost]
            b = context_view(s1)
            if report["losses"].get("text_blocks"):
                a, b = _joined_texts(a), _joined_texts(b)
            assert compare_views(a, b) == [], (report, where)


Agent.TestCase.settings = settings.get_profile(PROFILE)
TestOracle = Agent.TestCase


class _Drawn:
    """A stand-in for ``st.data()`` that gives the values a run drew, in order."""

    def __init__(self, *values) -> None:
        self.values = list(values)

    def draw(self, strategy):
        return self.values.pop(0)


def test_a_fork_is_copied_what_its_parent_held_at_the_fork():
    """ASR-718, a run the oracle found: a v1 fork is replayed a call that had no result
    yet; the fork's call and its parent's then complete, each on its own. The fork's
    result is its own (no ``copiedFrom``), though the parent's stream holds a result of
    that call by the end: a fork is copied what its parent held at the fork."""
    hello = [{"type": "text", "text": "Hello "}]
    m = Agent()
    m.start(version=1, native=False)
    m.new_connection()
    m.load(data=_Drawn("s1"), replay="identical")
    m.prompt(data=_Drawn("s1"), late=0, prompt=hello)
    m.tool_start(inp={}, named=False, title="Hello ")
    m.end_turn()
    m.fork(data=_Drawn("s1"), replay=True)
    m.cancel_late()
    m.new_connection()
    m.load(data=_Drawn("f2"), replay="identical")
    m.prompt(data=_Drawn("f2"), late=0, prompt=hello)
    m.end_turn()
    m.tool_late(data=_Drawn(("f2", "c1")), output=None, status="completed")
    m.cancel_late()
    m.resume(data=_Drawn("s1"), replay="none")
    m.tool_late(data=_Drawn(("s1", "c1")), output=None, status="completed")
    assert m.turn is None
    assert ("tool", "c1") in m.sessions["f2"].history
    m.oracle()

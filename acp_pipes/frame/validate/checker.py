"""The per-stream checker: one frame at a time, against the schema and the protocol."""

from __future__ import annotations

from typing import Any

import orjson

from acp_pipes.frame.validate.rules import (
    CANCELLED_WORDS,
    GATES,
    LIFECYCLE,
    SESSION,
    TOOL_CALL_WORDS,
    WARNINGS,
    advertised,
    capability_source,
    schema_words,
)
from acp_pipes.frame.validate.schema import NEWEST_V2, REVISIONS, Schema, newer_capabilities, schema
from acp_pipes.io.wire import A2C, C2A
from acp_pipes.protocol.canonical import parse_json
from acp_pipes.protocol.jsonrpc import why_not_jsonrpc
from acp_pipes.schemas import ACP_V1

__all__ = ["MAX_PENDING", "Checker"]

#: Requests remembered while in flight, and answered ids remembered (to tell a second
#: answer from an answer to nothing), per direction; beyond this the oldest go first.
MAX_PENDING = 1 << 16

_KIND_DEF = {"request": "Request", "notification": "Notification"}
_HANDLER = {C2A: "agent", A2C: "client"}  # who handles what travels this way
_OTHER = {C2A: A2C, A2C: C2A}
_loads = orjson.loads
_MISS = object()


class _Plan:
    """How frames of one (method, direction, kind) are checked: the schemas that define
    it, narrowest first, with the definition's name in each; or the violation to report
    instead."""

    __slots__ = ("chain", "fast", "problem", "unstable")

    def __init__(self, chain: list[tuple[Schema, str]],
                 problem: tuple[str, str, Schema | None, str | None] | None = None):
        self.chain = chain
        self.problem = problem  # (rule, message, schema, $defs name) when none defines it
        # the common case in one call: valid under the first schema's closed copy
        self.fast = chain[0][0].validator(chain[0][1], closed=True).is_valid if chain else None
        # defined by the unstable schema alone: every frame of it uses an unstable feature
        self.unstable = bool(chain) and chain[0][0].unstable


class Checker:
    """Checks one stream (one connection) frame by frame.

    ``check(frame)`` returns the violations of one frame record (as
    :func:`acp_pipes.frame.core.read_frames` yields them), ``finish()`` those only the end can
    tell (requests never answered), ``summary()`` the counts. ``paired``: the stream
    holds both directions (a wire log does; a bare stream read with ``--dir`` does not,
    and then requests and responses cannot be matched, so pairing, session and
    capability checks are off and results go unchecked). ``protocol`` forces the
    protocol version instead of the one ``initialize`` negotiates; ``stable`` checks
    against the stable schema alone.
    """

    def __init__(self, *, paired: bool = True, protocol: int | None = None,
                 stable: bool = False, revision: str | None = None):
        self.paired = paired
        # --schema: this revision for its protocol version; else, for v2, the newest
        # known v2 when initialize advertises a capability only it defines (see
        # acp_pipes.frame.validate.schema.newer_capabilities), else the pinned one
        self.forced_revision = revision
        self.schema_from = "forced" if revision is not None else "default"
        if revision is not None and protocol is None:
            protocol = 1 if revision == ACP_V1 else 2
        self.stable = stable
        self.frames = 0
        self.unstable = 0
        self.counts: dict[str, int] = {}
        self.version: int | None = None
        self.version_from: str | None = None
        self.requested: Any = None
        self.agreed: Any = None
        self._unknown_version_told = False
        self._plans: dict[tuple[str, str, str], _Plan] = {}
        self._chain: list[Schema] = []
        # per direction: id -> (seq, method, sessionId, began a session, hidden request)
        self.pending: dict[str, dict[tuple[type, Any], tuple]] = {C2A: {}, A2C: {}}
        self.answered: dict[str, dict[tuple[type, Any], int]] = {C2A: {}, A2C: {}}
        self.sessions: dict[str, int] = {}
        self.ended: dict[str, int] = {}
        self.client_init: dict[str, Any] | None = None
        self.agent_init: dict[str, Any] | None = None
        self.initialized = False
        self._early_told = False
        self._late: list[dict[str, Any]] = []  # violations found while checking later frames
        self._gated: dict[str, Any] = {}  # feature -> its capability problem, or None
        self._rules: Any = None
        self._gates_table: dict[str, Any] = {}
        self.forced = protocol
        # stop reasons owed after session/cancel: v1, c2a prompt key -> the cancel's seq;
        # v2, session -> the cancel's seq (while its foreground work is active)
        self._cancelled: dict[Any, int] = {}
        self._busy: set[str] = set()  # v2 sessions whose last state_update is not idle
        # per session: tool call ids announced (tool_call); unannounced ids a permission
        # request named -> (its seq, answered)
        self._announced: dict[str, set[str]] = {}
        self._unannounced: dict[tuple[str, str], list[Any]] = {}
        self._perm_keys: dict[tuple[type, Any], tuple[str, str]] = {}
        if protocol is not None:
            self._use(protocol, "forced")

    # -- version -----------------------------------------------------------------------

    def _use(self, version: Any, source: str) -> None:
        """Check against ``version`` from now on (against no schema, when it has none
        here)."""
        revision = REVISIONS.get(version) if version.__class__ is int else None
        forced = self.forced_revision
        if forced is not None and revision is not None and (forced == ACP_V1) == (
                version == 1):
            revision = forced
        elif revision is not None and version == 2 and self.schema_from == "detected":
            revision = NEWEST_V2
        if version == self.version and self._chain and self.revision == revision:
            self.version_from = source
            return
        self.version = version
        self.version_from = source
        self._plans.clear()
        self._gated.clear()
        self._rules = SESSION.get(version) if self.paired else None
        self._gates_table = GATES.get(version, {})
        if revision is None:
            self._chain = []
            return
        self._chain = [schema(revision, False)] if self.stable else [
            schema(revision, False), schema(revision, True)]

    @property
    def revision(self) -> str | None:
        return self._chain[0].revision if self._chain else None

    def _ensure_version(self) -> None:
        if self.version is None:  # nothing negotiated (a stream cut before initialize)
            self._use(2, "assumed")

    # -- one frame ---------------------------------------------------------------------

    def check(self, f: dict[str, Any]) -> list[dict[str, Any]]:
        """The violations of one frame (in the order found)."""
        self.frames += 1
        out: list[dict[str, Any]] = []
        if self._late:
            out, self._late = self._late, out
        kind = f["kind"]
        if kind == "invalid_json":
            out.append(self._v(f, "not-json", "", "not one JSON text"))
            return self._count(out)
        raw = f.get("raw")
        try:
            msg = _loads(raw) if raw is not None else None
        except orjson.JSONDecodeError:  # JSON orjson refuses: lone surrogates, 1e400
            msg = parse_json(raw)  # type: ignore[arg-type]  # (raw: it was parsed)
        if kind == "not_jsonrpc":
            self._ensure_version()
            sender = "client" if f["dir"] == C2A else "agent"
            batch = self._chain[-1].batch(sender) if self._chain and msg.__class__ is list \
                and msg else None
            if batch is None:
                why = _why_not(msg)
                if msg.__class__ is list and msg and self.version == 2 and self._chain:
                    why += f": ACP {self.revision} has no batches"
                out.append(self._v(f, "not-jsonrpc", "", why))
            else:  # v2 has batches: checked as a whole, their calls not paired
                # (every schema of a revision with batches names its own)
                self._check(f, [(s, s.batch(sender))  # type: ignore[misc]
                                for s in self._chain], msg, "", out)
            return self._count(out)
        d = f["dir"]
        # (a frame of these kinds is a JSON-RPC object: msg is a dict)
        if kind == "request" or kind == "notification":
            self._call(f, msg, d, kind, out)  # type: ignore[arg-type]
        else:
            self._answer(f, msg, d, kind, out)  # type: ignore[arg-type]
        return self._count(out) if out else out

    def _count(self, out: list[dict[str, Any]]) -> list[dict[str, Any]]:
        counts = self.counts
        for v in out:
            counts[v["rule"]] = counts.get(v["rule"], 0) + 1
        return out

    def _call(self, f: dict[str, Any], msg: dict[str, Any], d: str, kind: str,
              out: list[dict[str, Any]]) -> None:
        method = msg["method"]
        params = msg.get("params")
        if not self.initialized or method == "initialize":
            self._before_initialized(f, method, kind, params, out)
        if self._chain and method[:1] != "_":
            self._schema(f, method, d, kind, params, "/params", out)
        if kind == "request":
            self._request_id(f, msg["id"], out)
            self._request(f, msg, d, method, params, out)
        rules = self._rules
        if rules is None or params.__class__ is not dict:
            return
        sid = params.get("sessionId")
        if sid.__class__ is str and sid not in self.sessions \
                and method not in rules.begin_request and method not in rules.stored:
            ended = self.ended.get(sid)
            asked = None if ended is not None else self._creating()
            if ended is not None:
                why = f"session {sid} was closed (seq {ended})"
            elif asked is not None:
                why = (f"session {sid} used before {asked[1]} (seq {asked[0]}) was "
                       "answered")
            else:
                why = (f"session {sid} was never created, loaded, resumed or forked "
                       "on this connection")
            out.append(self._v(f, "unknown-session", "/params/sessionId", f"{method}: {why}",
                               related=ended if ended is not None else
                               asked[0] if asked is not None else None))
        gated = self._gated
        if method == "session/update":
            update = params.get("update")
            if update.__class__ is dict:
                tag = update.get("sessionUpdate")
                if tag == "tool_call" or tag == "state_update":
                    self._update(f, sid, tag, update, out)
                if tag == "subagent_update":  # announces a child session
                    child = update.get("sessionId")
                    if child.__class__ is str:
                        self.sessions.setdefault(child, f["seq"])
                if tag.__class__ is str and gated.get(tag, _MISS) is not None:
                    self._gate(f, "update/" + tag, "/params/update/sessionUpdate", out)
            if gated.get(method, _MISS) is None:
                return
        if method == "session/cancel" or method == "session/request_permission":
            self._turn(f, msg, method, sid, params, out)
        self._gates(f, method, params, out)

    # -- turns: cancel, tool calls, permissions (rules in acp_pipes.frame.validate.rules) ----------

    def _creating(self) -> tuple[int, str] | None:
        """The first session/new or session/fork still waiting for its answer."""
        begins = self._rules.begin_response
        for entry in self.pending[C2A].values():
            if entry[1] in begins:
                return entry[0], entry[1]
        return None

    def _update(self, f: dict[str, Any], sid: Any, tag: str, update: dict[str, Any],
                out: list[dict[str, Any]]) -> None:
        if sid.__class__ is not str:
            return
        if tag == "tool_call":
            tid = update.get("toolCallId")
            if tid.__class__ is str:
                self._announced.setdefault(sid, set()).add(tid)
            return
        state = update.get("state")
        if state != "idle":
            if state.__class__ is str:
                self._busy.add(sid)
            return
        self._busy.discard(sid)
        cancel = self._cancelled.pop(sid, None)
        stop = update.get("stopReason")
        if cancel is not None and stop != "cancelled":
            out.append(self._v(f, "cancel-stop-reason", "/params/update/stopReason",
                               f"the work session/cancel (seq {cancel}) ended stopped with "
                               f"{_show_id(stop)}, not \"cancelled\"", *_stop_source(self.revision),
                               related=cancel))

    def _turn(self, f: dict[str, Any], msg: dict[str, Any], method: str, sid: Any,
              params: dict[str, Any], out: list[dict[str, Any]]) -> None:
        if sid.__class__ is not str:
            return
        if method == "session/cancel":
            if self.version == 1:  # each prompt of the session in flight owes "cancelled"
                for key, entry in self.pending[C2A].items():
                    if entry[1] == "session/prompt" and entry[2] == sid:
                        self._cancelled.setdefault(key, f["seq"])
            elif sid in self._busy:
                self._cancelled.setdefault(sid, f["seq"])
            return
        if self.version != 1:  # v2: a permission request's tool call is an upsert
            return
        call = params.get("toolCall")
        pointer = "/params/toolCall/toolCallId"
        tid = call.get("toolCallId") if call.__class__ is dict else None
        if tid.__class__ is not str or tid in self._announced.get(sid, ()):
            return
        rid = msg.get("id")
        call_key = (sid, tid)
        was = self._unannounced.get(call_key)
        if was is not None and was[1]:
            out.append(self._v(f, "tool-call-id-reused", pointer,
                               f"tool call {_show_id(tid)} was never announced and already "
                               f"named by the permission request at seq {was[0]}, answered: "
                               "one id for another call", *_tool_call_id_source(self.revision),
                               related=was[0], level="warning"))
        else:
            out.append(self._v(f, "unannounced-tool-call", pointer,
                               f"session/request_permission names tool call {_show_id(tid)}, "
                               "which no tool_call update of the session announced",
                               *_tool_call_id_source(self.revision), level="warning"))
        self._unannounced[call_key] = [f["seq"], False]
        self._perm_keys[(rid.__class__, rid)] = call_key
        if len(self._unannounced) > MAX_PENDING:
            del self._unannounced[next(iter(self._unannounced))]

    def _before_initialized(self, f: dict[str, Any], method: str, kind: str, params: Any,
                            out: list[dict[str, Any]]) -> None:
        if method == "initialize" and kind == "request":
            self.client_init = params if params.__class__ is dict else None
            self._gated.clear()
            self.requested = params.get("protocolVersion") if self.client_init else None
            if self.forced is None and self.version_from != "agreed" \
                    and self.requested in REVISIONS:
                self._use(self.requested, "requested")
        elif self.paired and not self.initialized and not self._early_told \
                and method != "$/cancel_request":
            self._early_told = True
            out.append(self._v(f, "not-initialized", "",
                               f"{method} sent before the initialize exchange completed "
                               "(later frames before it are not reported)"))
        if self.version is None:  # nothing negotiated yet (a stream cut before initialize)
            self._use(2, "assumed")

    def _tell_version(self, f: dict[str, Any], pointer: str, version: Any,
                      out: list[dict[str, Any]]) -> None:
        if self._chain or self._unknown_version_told:
            return
        self._unknown_version_told = True
        have = ", ".join(str(v) for v in REVISIONS)
        out.append(self._v(f, "version", pointer,
                           f"protocol version {orjson.dumps(version).decode()} has no schema "
                           f"here (have {have}); frames are not checked against a schema"))

    def _request(self, f: dict[str, Any], msg: dict[str, Any], d: str, method: str,
                 params: Any, out: list[dict[str, Any]]) -> None:
        rid = msg["id"]
        key = (rid.__class__, rid)
        pend = self.pending[d]
        if not self.paired:
            return
        was = pend.get(key)
        if was is not None:
            out.append(self._v(f, "id-reused", "/id",
                               f"id {_show_id(rid)} is still in flight ({was[1]}, seq {was[0]})",
                               related=was[0]))
        begins = False
        rules = self._rules
        if rules is not None and method in rules.begin_request and params.__class__ is dict:
            sid = params.get("sessionId")
            if sid.__class__ is str and sid not in self.sessions:
                self.sessions[sid] = f["seq"]
                self.ended.pop(sid, None)
                begins = True
        sid = params.get("sessionId") if params.__class__ is dict else None
        # a reused id keeps the request it hides: each of the two answers answers one
        pend[key] = (f["seq"], method, sid, begins, was)
        self.answered[d].pop(key, None)
        if len(pend) > MAX_PENDING:  # forgotten: say so now rather than never
            old_key = next(iter(pend))
            entry = pend.pop(old_key)
            while entry is not None:
                self._late.append(self._unanswered(entry[0], d, entry[1], old_key[1],
                                                   "more requests in flight than remembered"))
                entry = entry[4]

    def _request_id(self, f: dict[str, Any], rid: Any, out: list[dict[str, Any]]) -> None:
        """request-id: a request's id, or a result's, against the revision's ``RequestId``
        (SDK 2.4.0's v2: a string or an integer, "it MUST NOT be `null`"; v1 and alpha.9
        take null too; none takes a fraction). An error's id may be null in every
        revision: not checked here."""
        if rid.__class__ is str or rid.__class__ is int or not self._chain:
            return  # what every revision takes, at the cost of two class tests
        s = self._chain[0]
        if "RequestId" not in s.defs or s.is_valid("RequestId", rid):
            return
        what = "a request" if f["kind"] == "request" else "a result"
        out.append(self._v(f, "request-id", "/id", f"{what} with id {_show_id(rid)}: not a "
                           f"request id of ACP {s.revision}", s, "#/$defs/RequestId",
                           s.words_of("RequestId")))

    def _answer(self, f: dict[str, Any], msg: dict[str, Any], d: str, kind: str,
                out: list[dict[str, Any]]) -> None:
        rid = msg["id"]
        if kind == "response":
            self._request_id(f, rid, out)
        key = (rid.__class__, rid)
        asked = _OTHER[d]
        method = None
        req = None
        if self.paired:
            req = self.pending[asked].pop(key, None)
            if req is not None and req[4] is not None:  # the id was reused in flight
                self.pending[asked][key] = req[4]
            if req is None:
                first = self.answered[asked].get(key)
                if rid is None and kind == "error":
                    # it answers what its receiver could not read the id of (JSON-RPC
                    # 2.0: "If there was an error in detecting the id in the Request
                    # object (e.g. Parse error/Invalid Request), it MUST be Null"); the
                    # wire need not show which frame: the receiver's parser may refuse
                    # what this one reads
                    pass
                elif first is not None:
                    out.append(self._v(f, "duplicate-response", "/id",
                                       f"id {_show_id(rid)} was already answered (seq {first})",
                                       related=first))
                else:
                    out.append(self._v(f, "unknown-response", "/id",
                                       f"no request with id {_show_id(rid)} is waiting for "
                                       f"an answer from the {_HANDLER[asked]}"))
            else:
                method = req[1]
                done = self.answered[asked]
                done[key] = f["seq"]
                if len(done) > MAX_PENDING:
                    del done[next(iter(done))]
        elif kind == "response":
            result = msg.get("result")
            if result.__class__ is dict and result.get("protocolVersion").__class__ is int \
                    and self.agreed is None:
                method = "initialize"  # one direction: the only response that says so
        if method == "initialize":
            result = msg.get("result") if kind == "response" else None
            if result.__class__ is dict:
                self.agent_init = result
                self._gated.clear()
                self.agreed = result.get("protocolVersion")
                self.initialized = True
                if self.forced_revision is None and self.agreed == 2 and (
                        newer_capabilities(self.client_init, "client")
                        or newer_capabilities(result, "agent")):
                    self.schema_from = "detected"
                    self._use(2, self.version_from or "agreed")
                if self.forced is None:
                    self._use(self.agreed, "agreed")
                    self._tell_version(f, "/result/protocolVersion", self.agreed, out)
        self._ensure_version()
        if kind == "error":
            if self._chain:
                self._check(f, [(s, "Error") for s in self._chain], msg.get("error"),
                            "/error", out)
            if req is not None and req[3]:  # a load/resume that failed: never live
                self.sessions.pop(req[2], None)
            return
        if method is None:
            return
        result = msg.get("result")
        if self._chain and method[:1] != "_":
            self._schema(f, method, asked, "response", result, "/result", out)
        if method == "session/prompt":
            cancel = self._cancelled.pop(key, None)
            stop = result.get("stopReason", _MISS) if result.__class__ is dict else _MISS
            if cancel is not None and stop is not _MISS and stop != "cancelled":
                out.append(self._v(f, "cancel-stop-reason", "/result/stopReason",
                                   f"the prompt session/cancel (seq {cancel}) cancelled "
                                   f"ended with {_show_id(stop)}, not \"cancelled\"",
                                   *_stop_source(self.revision), related=cancel))
        elif method == "session/request_permission":
            named = self._perm_keys.pop(key, None)
            if named is not None and named in self._unannounced:
                self._unannounced[named][1] = True
        rules = self._rules
        if rules is None:
            return
        if method in rules.begin_response and result.__class__ is dict:
            sid = result.get("sessionId")
            if sid.__class__ is str:
                self.sessions[sid] = f["seq"]
                self.ended.pop(sid, None)
        elif method in rules.end and req is not None and req[2].__class__ is str:
            if self.sessions.pop(req[2], None) is not None:
                self.ended[req[2]] = f["seq"]
                if len(self.ended) > MAX_PENDING:
                    del self.ended[next(iter(self.ended))]

    # -- schema ------------------------------------------------------------------------

    def _schema(self, f: dict[str, Any], method: str, d: str, kind: str, value: Any,
                pointer: str, out: list[dict[str, Any]]) -> None:
        """Check a call's params (``d``: the way the call travels) or a response's result
        (``d``: the way its request travelled) against the method's definition."""
        plan = self._plans.get((method, d, kind))
        if plan is None:
            plan = self._plans[(method, d, kind)] = self._plan(method, d, kind)
        fast = plan.fast
        try:
            if fast is not None and fast(value):
                if plan.unstable:
                    self.unstable += 1
                return
        except UnicodeEncodeError:  # a lone surrogate in a key: checked below, escaped
            pass
        if plan.problem is not None:
            if kind == "response":  # told at the request already
                return
            rule, message, s, name = plan.problem
            words = location = None
            if s is not None and name is not None:
                location = f"#/$defs/{name}"
                words = s.words_of(name)
            out.append(self._v(f, rule, "/method", message, s, location, words))
            return
        self._check(f, plan.chain, value, pointer, out, 1)

    def _plan(self, method: str, d: str, kind: str) -> _Plan:
        handler = _HANDLER[d]
        want = "Response" if kind == "response" else _KIND_DEF[kind]
        chain = []
        for s in self._chain:
            for side in (handler, "protocol", "proxy"):
                name = s.definition(method, side, want)
                if name is not None:
                    chain.append((s, name))
                    break
        if chain:
            return _Plan(chain)
        widest = self._chain[-1]
        full = schema(widest.revision, True)
        other = "client" if handler == "agent" else "agent"
        for s in (widest, full):
            name = s.definition(method, other, want)
            if name is not None:
                return _Plan([], ("wrong-direction",
                                  f"{method} is sent by the {handler}, not to it",
                                  s, name))
            other_kind = "Notification" if want == "Request" else "Request"
            name = s.definition(method, handler, other_kind)
            if name is not None and kind != "response":
                return _Plan([], ("wrong-kind",
                                  f"{method} is a {other_kind.lower()}, sent as a {kind}",
                                  s, name))
        if widest is not full and full.sides(method):
            return _Plan([], ("unknown-method",
                              f"{method} is unstable: not in {widest.file}", full, None))
        return _Plan([], ("unknown-method",
                          f"{method} is not a method of ACP {widest.revision} "
                          "(extension methods begin with _)", widest, None))

    def _check(self, f: dict[str, Any], chain: list[tuple[Schema, str]], value: Any,
               pointer: str, out: list[dict[str, Any]], start: int = 0) -> None:
        """The stable schema first, the unstable one when the stable one refuses; each
        through its closed copy (see :mod:`acp_pipes.frame.validate.schema`). ``start``: the
        schemas before it have refused already."""
        try:
            self._check_chain(f, chain, value, pointer, out, start)
        except UnicodeEncodeError:  # a lone surrogate ("\udc00"): checked written as one
            self._check_chain(f, chain, _escaped(value), pointer, out, 0)

    def _check_chain(self, f: dict[str, Any], chain: list[tuple[Schema, str]], value: Any,
                     pointer: str, out: list[dict[str, Any]], start: int) -> None:
        for i in range(start, len(chain)):
            s, name = chain[i]
            if s.is_valid(name, value, closed=True):
                if s.unstable:
                    self.unstable += 1
                return
        s, name = chain[-1]
        closed = s.is_valid(name, value)  # the official file accepts it: a reserved value
        findings, total = s.findings(name, value, pointer, closed=closed)
        for finding in findings:
            out.append(self._v(f, finding.rule, finding.pointer, finding.message, s,
                               finding.location, finding.words))
        if total is None:
            out[-1]["message"] += " (and more in this frame, not counted)"
        elif total > len(findings):
            out[-1]["message"] += f" (and {total - len(findings)} more in this frame)"

    # -- capabilities --------------------------------------------------------------------

    def _gates(self, f: dict[str, Any], method: str, params: Any,
               out: list[dict[str, Any]]) -> None:
        if self._gate(f, method, "/method", out) or params.__class__ is not dict:
            return
        if method == "session/prompt":
            prompt = params.get("prompt")
            if prompt.__class__ is list:
                for i, block in enumerate(prompt):
                    if block.__class__ is dict and block.get("type") in (
                            "image", "audio", "resource"):
                        self._gate(f, "prompt/" + block["type"], f"/params/prompt/{i}/type",
                                   out)
        elif method in LIFECYCLE:
            servers = params.get("mcpServers")
            if servers.__class__ is list:
                for i, server in enumerate(servers):
                    if server.__class__ is dict:
                        transport = server.get("type", "stdio")
                        if transport.__class__ is str:
                            self._gate(f, "mcp/" + transport, f"/params/mcpServers/{i}", out)
            if params.get("additionalDirectories"):
                self._gate(f, "param/additionalDirectories", "/params/additionalDirectories",
                           out)
            if params.get("systemPrompt") is not None:
                self._gate(f, "param/systemPrompt", "/params/systemPrompt", out)
        elif method == "elicitation/create":
            mode = params.get("mode")
            if mode.__class__ is str:
                self._gate(f, "elicitation/" + mode, "/params/mode", out)

    def _gate(self, f: dict[str, Any], feature: str, pointer: str,
              out: list[dict[str, Any]]) -> bool:
        """Report ``feature`` if its capability was not advertised; True if reported.
        The verdict is kept per feature until an initialize message changes it (an
        update's verdict under its bare tag, so the hot path needs no string built)."""
        key = feature[7:] if feature[:7] == "update/" else feature
        problem = self._gated.get(key, _MISS)
        if problem is _MISS:
            problem = self._gated[key] = self._gate_problem(feature)
        if problem is None:
            return False
        message, schema_file, location, words = problem
        out.append(self._v(f, "capability", pointer, message, schema_file, location, words))
        return True

    def _gate_problem(self, feature: str) -> tuple[str, str, str, str | None] | None:
        rows = self._gates_table.get(feature)
        if not rows:
            return None
        for holder, path in rows:
            init = self.client_init if holder == "client" else self.agent_init
            if init is None or advertised(init, path):
                continue
            location, words = capability_source(self.version, holder, path, feature)
            return (f"{feature} needs the {holder} capability {'.'.join(path)}, which it "
                    "did not advertise", _cap_schema(self.version), location, words)  # type: ignore[arg-type]  # (negotiated)
        return None

    # -- the end -------------------------------------------------------------------------

    def finish(self) -> list[dict[str, Any]]:
        """Violations only the end of the stream tells: requests never answered."""
        out = self._late
        self._late = []
        if self.paired:
            left = []
            for d in (C2A, A2C):
                for key, entry in self.pending[d].items():
                    while entry is not None:
                        left.append((entry[0], d, entry[1], key[1]))
                        entry = entry[4]
            for seq, d, method, rid in sorted(left, key=lambda x: x[0]):
                out.append(self._unanswered(seq, d, method, rid, "the recording ended"))
            for d in (C2A, A2C):
                self.pending[d].clear()
        return self._count(out)

    def _unanswered(self, seq: int, d: str, method: str, rid: Any, why: str
                    ) -> dict[str, Any]:
        f = {"seq": seq, "dir": d, "kind": "request", "method": method, "id": rid}
        return self._v(f, "unanswered", "",
                       f"{method} (id {_show_id(rid)}) got no response: {why}")

    def summary(self) -> dict[str, Any]:
        """What was checked and what was found, for the stream so far."""
        return {
            "protocolVersion": self.version,
            "versionFrom": self.version_from,
            "schema": self.revision,
            "schemaFrom": self.schema_from,
            "stable": self.stable,
            "paired": self.paired,
            "frames": self.frames,
            "unstable": self.unstable,
            "violations": sum(n for r, n in self.counts.items() if r not in WARNINGS),
            "warnings": sum(n for r, n in self.counts.items() if r in WARNINGS),
            "rules": dict(sorted(self.counts.items())),
        }

    # -- records -----------------------------------------------------------------------

    @staticmethod
    def _v(f: dict[str, Any], rule: str, pointer: str, message: str,
           s: Schema | str | None = None, location: str | None = None,
           words: str | None = None, related: int | None = None,
           level: str | None = None) -> dict[str, Any]:
        v: dict[str, Any] = {"seq": f["seq"], "dir": f["dir"], "kind": f["kind"],
                             "method": f.get("method")}
        if "id" in f:
            v["id"] = f["id"]
        v["rule"] = rule
        v["pointer"] = _utf8(pointer)
        v["message"] = _utf8(message)
        v["schema"] = s.file if isinstance(s, Schema) else s
        v["location"] = location
        v["words"] = words
        if related is not None:
            v["related"] = related
        if level is not None:
            v["level"] = level
        return v


def _stop_source(revision: str | None) -> tuple[str | None, str | None, str | None]:
    """Where the schema says a cancelled turn MUST stop with ``cancelled``."""
    return schema_words(revision, CANCELLED_WORDS)


def _tool_call_id_source(revision: str | None) -> tuple[str | None, str | None, str | None]:
    """Where the schema says what a permission request's tool call id names."""
    return schema_words(revision, TOOL_CALL_WORDS)


def _cap_schema(version: int) -> str:
    from acp_pipes.frame.validate.schema import schema_file

    return schema_file(REVISIONS[version], True)


def _why_not(msg: Any) -> str:
    """Why acp-frame did not take a JSON value for a JSON-RPC message."""
    if msg.__class__ is dict and msg.get("jsonrpc") == "2.0" and (
            msg.get("method").__class__ is str or ("id" in msg and "method" not in msg
                                                   and ("result" in msg) != ("error" in msg))):
        return "a lone surrogate in its method, id or sessionId"  # all else is JSON-RPC
    return why_not_jsonrpc(msg)


def _escaped(value: Any) -> Any:
    """``value`` with every string holding a lone surrogate (which has no UTF-8 form, so
    no validator takes it) written with the surrogate as an escape: still a string."""
    if value.__class__ is str:
        return _utf8(value)
    if value.__class__ is dict:
        return {_utf8(k): _escaped(v) for k, v in value.items()}
    if value.__class__ is list:
        return [_escaped(v) for v in value]
    return value


def _utf8(text: str) -> str:
    """``text``, its lone surrogates (a frame's ``"\\udc00"``, quoted in a message)
    written as escapes: a record must be UTF-8."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _show_id(rid: Any) -> str:
    return orjson.dumps(rid).decode()

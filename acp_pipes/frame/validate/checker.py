"""The per-stream checker: one frame at a time, against the schema and the protocol.

One small method per kind of frame and per method with rules of its own, found by table
(``{method: handler}``); which definition checks a frame is planned once
(:mod:`acp_pipes.frame.validate.plan`), the rules of a turn are kept apart
(:mod:`acp_pipes.frame.validate.turns`), and every violation is made by
:func:`acp_pipes.frame.validate.record.violation`.
"""

from __future__ import annotations

from typing import Any

import orjson

from acp_pipes.frame.validate.gates import Gates
from acp_pipes.frame.validate.plan import HANDLER, Plan, plan
from acp_pipes.frame.validate.record import escaped, show_id, violation, why_not
from acp_pipes.frame.validate.rules import (
    SESSION,
    WARNINGS,
)
from acp_pipes.frame.validate.schema import (
    NEWEST_V2,
    REVISIONS,
    Schema,
    newer_capabilities,
    schema,
)
from acp_pipes.frame.validate.turns import Turns
from acp_pipes.io.wire import A2C, C2A
from acp_pipes.protocol.canonical import parse_json
from acp_pipes.schemas import ACP_V1

__all__ = ["MAX_PENDING", "Checker"]

#: Requests remembered while in flight, and answered ids remembered (to tell a second
#: answer from an answer to nothing), per direction; beyond this the oldest go first.
MAX_PENDING = 1 << 16

_OTHER = {C2A: A2C, A2C: C2A}
_loads = orjson.loads
_MISS = object()


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
        self._plans: dict[tuple[str, str, str], Plan] = {}
        self._chain: list[Schema] = []
        # per direction: id -> (seq, method, sessionId, began a session, hidden request)
        self.pending: dict[str, dict[tuple[type, Any], tuple]] = {C2A: {}, A2C: {}}
        self.answered: dict[str, dict[tuple[type, Any], int]] = {C2A: {}, A2C: {}}
        self.sessions: dict[str, int] = {}
        self.ended: dict[str, int] = {}
        self.initialized = False
        self._early_told = False
        self._late: list[dict[str, Any]] = []  # violations found while checking later frames
        self._gates = Gates()
        self._gated = self._gates.verdicts  # (the hot path's: updates)
        self._rules: Any = None
        self.forced = protocol
        self._turns = Turns(MAX_PENDING)
        # what a call, an update or an answer of these methods (tags) does beyond the
        # schema: one small method each
        self._calls = {"session/update": self._session_update,
                       "session/cancel": self._cancel,
                       "session/request_permission": self._permission}
        self._updates = {"tool_call": self._tool_call, "state_update": self._state,
                         "subagent_update": self._subagent}
        self._answers = {"session/prompt": self._prompt_answered,
                         "session/request_permission": self._permission_answered}
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
        self._rules = SESSION.get(version) if self.paired else None
        self._gates.use(version)
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
            out.append(violation(f, "not-json", "", "not one JSON text"))
            return self._count(out)
        raw = f.get("raw")
        try:
            msg = _loads(raw) if raw is not None else None
        except orjson.JSONDecodeError:  # JSON orjson refuses: lone surrogates, 1e400
            msg = parse_json(raw)  # type: ignore[arg-type]  # (raw: it was parsed)
        if kind == "not_jsonrpc":
            self._not_jsonrpc(f, msg, out)
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

    def _not_jsonrpc(self, f: dict[str, Any], msg: Any, out: list[dict[str, Any]]) -> None:
        """JSON that is no JSON-RPC message; or, in a revision that has them, a batch:
        checked as a whole, its calls not paired."""
        self._ensure_version()
        sender = "client" if f["dir"] == C2A else "agent"
        batch = self._chain[-1].batch(sender) if self._chain and msg.__class__ is list \
            and msg else None
        if batch is None:
            why = why_not(msg)
            if msg.__class__ is list and msg and self.version == 2 and self._chain:
                why += f": ACP {self.revision} has no batches"
            out.append(violation(f, "not-jsonrpc", "", why))
        else:  # (every schema of a revision with batches names its own)
            self._check(f, [(s, s.batch(sender))  # type: ignore[misc]
                            for s in self._chain], msg, "", out)

    # -- calls: requests and notifications -------------------------------------------

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
            self._unknown_session(f, method, sid, out)
        on = self._calls.get(method)
        if on is None or on(f, msg, sid, params, out):
            self._gates.method(f, method, params, out)

    def _unknown_session(self, f: dict[str, Any], method: str, sid: str,
                         out: list[dict[str, Any]]) -> None:
        ended = self.ended.get(sid)
        asked = None if ended is not None else self._creating()
        if ended is not None:
            why = f"session {sid} was closed (seq {ended})"
        elif asked is not None:
            why = f"session {sid} used before {asked[1]} (seq {asked[0]}) was answered"
        else:
            why = f"session {sid} was never created, loaded, resumed or forked on this connection"
        out.append(violation(f, "unknown-session", "/params/sessionId", f"{method}: {why}",
                             related=ended if ended is not None else
                             asked[0] if asked is not None else None))

    def _creating(self) -> tuple[int, str] | None:
        """The first session/new or session/fork still waiting for its answer."""
        begins = self._rules.begin_response
        for entry in self.pending[C2A].values():
            if entry[1] in begins:
                return entry[0], entry[1]
        return None

    # Each of :attr:`_calls`: True when the method's capability gates are to be checked.

    def _session_update(self, f: dict[str, Any], msg: dict[str, Any], sid: Any,
                        params: dict[str, Any], out: list[dict[str, Any]]) -> bool:
        """An update: what its tag does (:attr:`_updates`), and the capability its tag
        needs. The most frames of a session by far: gates looked up only when known to
        apply."""
        update = params.get("update")
        if update.__class__ is dict:
            tag = update.get("sessionUpdate")
            if tag.__class__ is str:
                on = self._updates.get(tag)
                if on is not None:
                    on(f, sid, update, out)
                if self._gated.get(tag, _MISS) is not None:
                    self._gates.gate(f, "update/" + tag, "/params/update/sessionUpdate", out)
        return self._gated.get("session/update", _MISS) is not None

    def _cancel(self, f: dict[str, Any], msg: dict[str, Any], sid: Any,
                params: dict[str, Any], out: list[dict[str, Any]]) -> bool:
        if sid.__class__ is str:
            self._turns.cancel(f, sid, self.version, self.pending[C2A])
        return True

    def _permission(self, f: dict[str, Any], msg: dict[str, Any], sid: Any,
                    params: dict[str, Any], out: list[dict[str, Any]]) -> bool:
        if sid.__class__ is str and self.version == 1:  # v2: its tool call is an upsert
            self._turns.permission(f, msg.get("id"), sid, params, self.revision, out)
        return True

    # Each of :attr:`_updates`, by the update's tag.

    def _tool_call(self, f: dict[str, Any], sid: Any, update: dict[str, Any],
                   out: list[dict[str, Any]]) -> None:
        if sid.__class__ is str:
            self._turns.tool_call(sid, update)

    def _state(self, f: dict[str, Any], sid: Any, update: dict[str, Any],
               out: list[dict[str, Any]]) -> None:
        if sid.__class__ is str:
            self._turns.state(f, sid, update, self.revision, out)

    def _subagent(self, f: dict[str, Any], sid: Any, update: dict[str, Any],
                  out: list[dict[str, Any]]) -> None:
        """A subagent update announces a child session."""
        child = update.get("sessionId")
        if child.__class__ is str:
            self.sessions.setdefault(child, f["seq"])

    def _before_initialized(self, f: dict[str, Any], method: str, kind: str, params: Any,
                            out: list[dict[str, Any]]) -> None:
        if method == "initialize" and kind == "request":
            init = self._gates.client_init = params if params.__class__ is dict else None
            self._gated.clear()
            self.requested = params.get("protocolVersion") if init else None
            if self.forced is None and self.version_from != "agreed" \
                    and self.requested in REVISIONS:
                self._use(self.requested, "requested")
        elif self.paired and not self.initialized and not self._early_told \
                and method != "$/cancel_request":
            self._early_told = True
            out.append(violation(f, "not-initialized", "",
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
        out.append(violation(f, "version", pointer,
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
            out.append(violation(f, "id-reused", "/id",
                               f"id {show_id(rid)} is still in flight ({was[1]}, seq {was[0]})",
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
        out.append(violation(f, "request-id", "/id", f"{what} with id {show_id(rid)}: not a "
                           f"request id of ACP {s.revision}", s, "#/$defs/RequestId",
                           s.words_of("RequestId")))

    # -- answers: responses and errors ------------------------------------------------

    def _answer(self, f: dict[str, Any], msg: dict[str, Any], d: str, kind: str,
                out: list[dict[str, Any]]) -> None:
        rid = msg["id"]
        if kind == "response":
            self._request_id(f, rid, out)
        key = (rid.__class__, rid)
        asked = _OTHER[d]
        req = None
        if self.paired:
            req = self._answered(f, rid, key, asked, kind, out)
            method = None if req is None else req[1]
        else:
            method = self._unpaired(msg, kind)
        if method == "initialize":
            self._initialized(f, msg, kind, out)
        self._ensure_version()
        if kind == "error":
            self._error(f, msg, req, out)
            return
        if method is None:
            return
        result = msg.get("result")
        if self._chain and method[:1] != "_":
            self._schema(f, method, asked, "response", result, "/result", out)
        on = self._answers.get(method)
        if on is not None:
            on(f, key, result, out)
        if self._rules is not None:
            self._session_answered(f, method, req, result)

    def _answered(self, f: dict[str, Any], rid: Any, key: tuple[type, Any], asked: str,
                  kind: str, out: list[dict[str, Any]]) -> tuple | None:
        """The request an answer answers (``asked``: the way it travelled), no longer
        pending; None, and said, when no request waits for it."""
        pending = self.pending[asked]
        req = pending.pop(key, None)
        if req is None:
            first = self.answered[asked].get(key)
            if rid is None and kind == "error":
                # it answers what its receiver could not read the id of (JSON-RPC 2.0:
                # "If there was an error in detecting the id in the Request object (e.g.
                # Parse error/Invalid Request), it MUST be Null"); the wire need not show
                # which frame: the receiver's parser may refuse what this one reads
                pass
            elif first is not None:
                out.append(violation(f, "duplicate-response", "/id",
                                     f"id {show_id(rid)} was already answered (seq {first})",
                                     related=first))
            else:
                out.append(violation(f, "unknown-response", "/id",
                                     f"no request with id {show_id(rid)} is waiting for an "
                                     f"answer from the {HANDLER[asked]}"))
            return None
        if req[4] is not None:  # the id was reused in flight
            pending[key] = req[4]
        done = self.answered[asked]
        done[key] = f["seq"]
        if len(done) > MAX_PENDING:
            del done[next(iter(done))]
        return req

    def _unpaired(self, msg: dict[str, Any], kind: str) -> str | None:
        """What an answer answers in one direction alone: initialize, the only response
        that says so."""
        if kind == "response":
            result = msg.get("result")
            if result.__class__ is dict and result.get("protocolVersion").__class__ is int \
                    and self.agreed is None:
                return "initialize"
        return None

    def _initialized(self, f: dict[str, Any], msg: dict[str, Any], kind: str,
                     out: list[dict[str, Any]]) -> None:
        """The agent's initialize result: the version agreed, the schema it is checked
        against from now on."""
        result = msg.get("result") if kind == "response" else None
        if result.__class__ is not dict:
            return
        self._gates.agent_init = result
        self._gated.clear()
        self.agreed = result.get("protocolVersion")
        self.initialized = True
        if self.forced_revision is None and self.agreed == 2 and (
                newer_capabilities(self._gates.client_init, "client")
                or newer_capabilities(result, "agent")):
            self.schema_from = "detected"
            self._use(2, self.version_from or "agreed")
        if self.forced is None:
            self._use(self.agreed, "agreed")
            self._tell_version(f, "/result/protocolVersion", self.agreed, out)

    def _error(self, f: dict[str, Any], msg: dict[str, Any], req: tuple | None,
               out: list[dict[str, Any]]) -> None:
        if self._chain:
            self._check(f, [(s, "Error") for s in self._chain], msg.get("error"), "/error",
                        out)
        if req is not None and req[3]:  # a load/resume that failed: never live
            self.sessions.pop(req[2], None)

    def _session_answered(self, f: dict[str, Any], method: str, req: tuple | None,
                          result: Any) -> None:
        """A session begins with the answer to its request, and ends with the answer to
        its close."""
        rules = self._rules
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

    # Each of :attr:`_answers`, by the method answered.

    def _prompt_answered(self, f: dict[str, Any], key: tuple[type, Any], result: Any,
                         out: list[dict[str, Any]]) -> None:
        self._turns.prompt_answered(f, key, result, self.revision, out)

    def _permission_answered(self, f: dict[str, Any], key: tuple[type, Any], result: Any,
                             out: list[dict[str, Any]]) -> None:
        self._turns.permission_answered(key)

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
            out.append(violation(f, rule, "/method", message, s, location, words))
            return
        self._check(f, plan.chain, value, pointer, out, 1)

    def _plan(self, method: str, d: str, kind: str) -> Plan:
        return plan(self._chain, method, d, kind)

    def _check(self, f: dict[str, Any], chain: list[tuple[Schema, str]], value: Any,
               pointer: str, out: list[dict[str, Any]], start: int = 0) -> None:
        """The stable schema first, the unstable one when the stable one refuses; each
        through its closed copy (see :mod:`acp_pipes.frame.validate.schema`). ``start``: the
        schemas before it have refused already."""
        try:
            self._check_chain(f, chain, value, pointer, out, start)
        except UnicodeEncodeError:  # a lone surrogate ("\udc00"): checked written as one
            self._check_chain(f, chain, escaped(value), pointer, out, 0)

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
            out.append(violation(f, finding.rule, finding.pointer, finding.message, s,
                               finding.location, finding.words))
        if total is None:
            out[-1]["message"] += " (and more in this frame, not counted)"
        elif total > len(findings):
            out[-1]["message"] += f" (and {total - len(findings)} more in this frame)"

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
        return violation(f, "unanswered", "",
                       f"{method} (id {show_id(rid)}) got no response: {why}")

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

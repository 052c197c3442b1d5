"""What a replay of an ASR stream sends, found in one pass over its records (ASR-724, 731).

The replay (:mod:`acp_pipes.replay.asr.updates`) sends each entity once, whole, at its
first record, from its latest revision; then the latest title, session usage and state.
This module finds those in one pass, one small handler per record type
(:data:`_Indexer.by_type`), and counts what the records hold that a replay cannot carry
(ASR-731). :func:`read_indexed` keeps only that index of a stream, not its records: the
reader (:mod:`acp_pipes.asr.reader`) knows nothing of replays.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from acp_pipes.asr.entities import message_space
from acp_pipes.asr.model import AUDIT_PREFIX
from acp_pipes.asr.reader import AsrStream, iter_streams
from acp_pipes.errors import Warn

__all__ = ["ACP_STATES", "IndexedStream", "ReplayIndex", "current_state", "index_stream",
           "read_indexed"]

#: ACP v2 states a state_update can carry; ASR's own lifecycle states (resumed, ended)
#: are history, not a current state.
ACP_STATES = frozenset({"running", "idle", "requires_action", "unknown"})

#: Record types that are not replayed, by the category they are reported under (looked
#: up by whatever JSON a record's type is).
TYPE_LOSS: dict[object, str] = {
    "inference": "inference", "vcs": "vcs", "commit": "vcs",
    "workspace_state": "workspace_state", "checkpoint": "checkpoint", "gap": "gap",
    "tombstone": "tombstone", "declaration": "declarations", "instruction": "instructions",
    "config_change": "config_change", "turn": "turn_triggers", "trigger": "turn_triggers",
    "permission": "permission", "input_request": "input_request", "hook": "hook",
    "memory_change": "memory_change", "delivery": "delivery", "redaction": "redaction",
    "subagent": "subagent", "branch": "off_path", "head": "off_path",
}


def current_state(state: Any) -> bool:
    """Whether a recorded state can be the current ``state_update``: ACP's states, and
    ``_``-prefixed vendor states, which ACP's state update is open to and ASR-709 records
    unchanged (the replay table: the latest state, as it is)."""
    return state in ACP_STATES or (isinstance(state, str) and state.startswith("_"))


class ReplayIndex(NamedTuple):
    """What :class:`~acp_pipes.replay.asr.updates.Replay` sends, found in one pass over a
    stream's records."""

    slots: list[list[Any]]  # [kind, latest record] per entity, in path order
    results: dict[Any, dict[str, Any]]  # callId -> latest tool_result
    changes: dict[Any, list[int]]  # callId -> slots of its file changes
    state: dict[str, Any] | None
    usage: dict[str, Any] | None
    info: dict[str, Any] | None
    losses: Counter[str]
    config_options: list[Any] | None
    read: int  # records read


@dataclass
class IndexedStream(AsrStream):
    """A stream from :func:`read_indexed`: its replay index instead of its records."""

    index: ReplayIndex | None = None


def read_indexed(lines: Iterable[bytes], source: str, warn: Warn | None = None
                 ) -> Iterator[IndexedStream]:
    """ASR streams from raw lines with only what a replay sends: each record is indexed
    as it is parsed and dropped unless it is the latest revision of an entity, the latest
    state, usage or title (a third of a typical stream is superseded states, usage and
    plans: freed at once instead of kept, the allocation a replay need not pay)."""
    for header, n, recs in iter_streams(lines, source, warn):
        yield IndexedStream(header, [], source, n, index_stream(header, recs, slim=True))


#: Native ID -> slot, one table per kind (no key tuple to build and hash per record);
#: the reader drops a record whose native ID is no string, one without is None's.
Keys = dict[Any, int]


class _Indexer:
    """One pass's tables. Each record type's handler either keeps what it needs (state,
    usage, title, losses) or places the record in its entity's slot (:meth:`place`)."""

    __slots__ = ("by_call", "by_comp", "by_msg", "by_plan", "by_result", "by_rid", "by_term",
                 "by_type", "changes", "config_options", "info", "losses", "results",
                 "slots", "state", "usage")

    def __init__(self, losses: Counter[str]):
        self.losses = losses
        self.config_options: list[Any] | None = None
        self.slots: list[list[Any]] = []  # [kind, latest record]
        self.by_rid: dict[str, int] = {}
        self.by_msg: dict[str, Keys] = {"user": {}, "agent": {}, "thought": {}}
        self.by_call: Keys = {}
        self.by_result: Keys = {}
        self.by_plan: Keys = {}
        self.by_term: Keys = {}
        self.by_comp: Keys = {}
        self.results: dict[Any, dict[str, Any]] = {}
        self.changes: dict[Any, list[int]] = {}
        self.state: dict[str, Any] | None = None
        self.usage: dict[str, Any] | None = None
        self.info: dict[str, Any] | None = None
        self.by_type: dict[object, Callable[[dict[str, Any]], None]] = {
            "message": self.message, "state": self.state_record,
            "tool_call": self.tool_call, "tool_result": self.tool_result,
            "file_change": self.file_change, "plan": self.plan,
            "usage_summary": self.usage_summary, "terminal": self.terminal,
            "compaction": self.compaction, "session_info": self.session_info,
            "config_change": self.config_change}

    def place(self, t: str, rec: dict[str, Any], keys: Keys | None, key: Any) -> int:
        """The record's slot: the one it supersedes, else its native ID's, else a new
        one at the end of the path (ASR-724: the entity's first record)."""
        slots = self.slots
        sup = rec.get("supersedes")
        slot = self.by_rid.get(sup) if sup is not None else None
        if slot is None and keys is not None:
            slot = keys.get(key)
        if slot is None:
            slot = len(slots)
            slots.append([t, rec])
            if keys is not None:
                keys[key] = slot
        else:
            self.losses["revisions"] += 1
            slots[slot][1] = rec
        rid = rec.get("id")
        if rid is not None:
            self.by_rid[rid] = slot
        return slot

    def message(self, rec: dict[str, Any]) -> None:
        origin = rec.get("origin")
        if origin == "notice":
            self.losses["notice"] += 1  # ASR-730
        elif origin == "inter_session":
            self.losses["inter_session"] += 1
        elif rec.get("role") == "system":
            self.losses["instructions"] += 1
        else:
            if "author" in rec or "from" in rec or "sender" in rec:
                self.losses["senders"] += 1
            # ASR-724: each message type has its own ID space (ACP's MessageId), so a
            # prompt, a thought and an agent message may share an ID and stay three
            self.place("message", rec, self.by_msg[message_space(rec)], rec.get("messageId"))

    def state_record(self, rec: dict[str, Any]) -> None:
        if current_state(rec.get("state")):
            if self.state is not None:
                self.losses["state_history"] += 1
            self.state = rec
        else:
            self.losses["state_history"] += 1

    def tool_call(self, rec: dict[str, Any]) -> None:
        self.place("tool_call", rec, self.by_call, rec.get("callId"))

    def tool_result(self, rec: dict[str, Any]) -> None:
        cid = rec.get("callId")
        if cid in self.results:
            self.losses["revisions"] += 1
        self.results[cid] = rec
        if cid not in self.by_result:
            self.place("tool_result", rec, self.by_result, cid)

    def file_change(self, rec: dict[str, Any]) -> None:
        slots = len(self.slots)
        slot = self.place("file_change", rec, None, None)
        if slot == slots:  # a new entity: filed under the call that caused it
            cause = rec.get("cause")
            if not isinstance(cause, dict):
                cause = {}
            self.changes.setdefault(cause.get("callId"), []).append(slot)

    def plan(self, rec: dict[str, Any]) -> None:
        self.place("plan", rec, self.by_plan, rec.get("planId"))

    def usage_summary(self, rec: dict[str, Any]) -> None:
        if (rec.get("scope", "session") == "session" and rec.get("cumulative", True)
                and isinstance(rec.get("contextWindow"), dict)):
            if self.usage is not None:
                self.losses["usage_history"] += 1
            self.usage = rec
        else:
            self.losses["usage_history"] += 1

    def terminal(self, rec: dict[str, Any]) -> None:
        self.place("terminal", rec, self.by_term, rec.get("terminalId"))

    def compaction(self, rec: dict[str, Any]) -> None:
        self.place("compaction", rec, self.by_comp, rec.get("compactionId"))

    def session_info(self, rec: dict[str, Any]) -> None:
        if self.info is not None:
            self.losses["revisions"] += 1
        self.info = rec

    def config_change(self, rec: dict[str, Any]) -> None:
        self.losses["config_change"] += 1
        if isinstance(rec.get("options"), list):
            self.config_options = rec["options"]


def index_stream(header: dict[str, Any], records: Iterable[dict[str, Any]],
                 slim: bool = False) -> ReplayIndex:
    """Entities at their first record with their latest revision (ASR-724), the latest
    state, usage and title, and the losses the records show (ASR-731). ``slim``: the
    records are the index's own, fields no update reads are dropped from them."""
    losses: Counter[str] = Counter()
    ix = _Indexer(losses)
    by_type = ix.by_type.get
    count = 0
    if header.get("lineage"):
        losses["lineage"] += 1
    stamped = captured = 0
    for count, rec in enumerate(records, 1):  # noqa: B007 (the count, after the loop)
        t = rec.get("type")
        if "ts" in rec or "observedAt" in rec:
            stamped += 1
        if "capture" in rec:
            captured += 1
        if "copiedFrom" in rec:
            losses["lineage"] += 1
        if "conversationId" in rec or "conversation" in rec:
            losses["conversations"] += 1
        if slim:  # fields no update carries: freed now, their memory reused by the parse
            rec.pop("native", None)
            rec.pop("ts", None)
        handle = by_type(t)
        if handle is not None:
            handle(rec)
        elif isinstance(t, str) and t.startswith(AUDIT_PREFIX):
            losses["audit"] += 1
        else:
            losses[TYPE_LOSS.get(t, str(t))] += 1
    if stamped:
        losses["timestamps"] += stamped
    if captured:
        losses["capture"] += captured
    return ReplayIndex(ix.slots, ix.results, ix.changes, ix.state, ix.usage, ix.info, losses,
                       ix.config_options, count)

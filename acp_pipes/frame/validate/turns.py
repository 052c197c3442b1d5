"""The rules of a turn that a schema cannot state: a cancelled turn ends ``cancelled``
(cancel-stop-reason), and in v1 a permission request names a tool call an update
announced (unannounced-tool-call, tool-call-id-reused; warnings). Where each schema says
so: :data:`acp_pipes.frame.validate.rules.CANCELLED_WORDS`, ``TOOL_CALL_WORDS``.

One :class:`Turns` per checked stream, fed by the checker
(:class:`acp_pipes.frame.validate.checker.Checker`) with the frames that bear on a turn:
a session/cancel, a permission request, a tool_call or state_update, the answer to a
prompt or a permission request.
"""

from __future__ import annotations

from typing import Any

from acp_pipes.frame.validate.record import show_id, violation
from acp_pipes.frame.validate.rules import CANCELLED_WORDS, TOOL_CALL_WORDS, schema_words

__all__ = ["Turns"]

_MISS = object()


class Turns:
    """What a stream's turns owe: stop reasons owed after session/cancel (v1, a prompt's
    key -> the cancel's seq; v2, a session -> the cancel's seq while its foreground work
    is active), and per session the tool call ids announced and those a permission
    request named unannounced. ``limit``: how many of the last are remembered."""

    __slots__ = ("announced", "busy", "cancelled", "limit", "perm_keys", "unannounced")

    def __init__(self, limit: int):
        self.limit = limit
        self.cancelled: dict[Any, int] = {}
        self.busy: set[str] = set()  # v2 sessions whose last state_update is not idle
        # per session: tool call ids announced (tool_call); unannounced ids a permission
        # request named -> [its seq, answered]
        self.announced: dict[str, set[str]] = {}
        self.unannounced: dict[tuple[str, str], list[Any]] = {}
        self.perm_keys: dict[tuple[type, Any], tuple[str, str]] = {}

    def tool_call(self, sid: str, update: dict[str, Any]) -> None:
        """A tool_call update announces its id."""
        tid = update.get("toolCallId")
        if tid.__class__ is str:
            self.announced.setdefault(sid, set()).add(tid)

    def state(self, f: dict[str, Any], sid: str, update: dict[str, Any],
              revision: str | None, out: list[dict[str, Any]]) -> None:
        """A v2 state_update: busy, or idle with the stop reason a cancel may owe."""
        state = update.get("state")
        if state != "idle":
            if state.__class__ is str:
                self.busy.add(sid)
            return
        self.busy.discard(sid)
        cancel = self.cancelled.pop(sid, None)
        stop = update.get("stopReason")
        if cancel is not None and stop != "cancelled":
            out.append(violation(f, "cancel-stop-reason", "/params/update/stopReason",
                                 f"the work session/cancel (seq {cancel}) ended stopped with "
                                 f"{show_id(stop)}, not \"cancelled\"",
                                 *schema_words(revision, CANCELLED_WORDS), related=cancel))

    def cancel(self, f: dict[str, Any], sid: str, version: Any,
               pending: dict[tuple[type, Any], tuple]) -> None:
        """session/cancel: in v1 each prompt of the session in flight (``pending``: the
        client's requests) owes "cancelled"; in v2 the session's active work does."""
        if version == 1:
            for key, entry in pending.items():
                if entry[1] == "session/prompt" and entry[2] == sid:
                    self.cancelled.setdefault(key, f["seq"])
        elif sid in self.busy:
            self.cancelled.setdefault(sid, f["seq"])

    def permission(self, f: dict[str, Any], rid: Any, sid: str, params: dict[str, Any],
                   revision: str | None, out: list[dict[str, Any]]) -> None:
        """A v1 permission request (in v2 its tool call is an upsert): its tool call
        should have been announced."""
        call = params.get("toolCall")
        pointer = "/params/toolCall/toolCallId"
        tid = call.get("toolCallId") if call.__class__ is dict else None
        if tid.__class__ is not str or tid in self.announced.get(sid, ()):
            return
        call_key = (sid, tid)
        was = self.unannounced.get(call_key)
        if was is not None and was[1]:
            out.append(violation(f, "tool-call-id-reused", pointer,
                                 f"tool call {show_id(tid)} was never announced and already "
                                 f"named by the permission request at seq {was[0]}, answered: "
                                 "one id for another call",
                                 *schema_words(revision, TOOL_CALL_WORDS),
                                 related=was[0], level="warning"))
        else:
            out.append(violation(f, "unannounced-tool-call", pointer,
                                 f"session/request_permission names tool call {show_id(tid)}, "
                                 "which no tool_call update of the session announced",
                                 *schema_words(revision, TOOL_CALL_WORDS), level="warning"))
        self.unannounced[call_key] = [f["seq"], False]
        self.perm_keys[(rid.__class__, rid)] = call_key
        if len(self.unannounced) > self.limit:
            del self.unannounced[next(iter(self.unannounced))]

    def prompt_answered(self, f: dict[str, Any], key: tuple[type, Any], result: Any,
                        revision: str | None, out: list[dict[str, Any]]) -> None:
        """A v1 prompt's answer: its stop reason, when a cancel owes "cancelled"."""
        cancel = self.cancelled.pop(key, None)
        stop = result.get("stopReason", _MISS) if result.__class__ is dict else _MISS
        if cancel is not None and stop is not _MISS and stop != "cancelled":
            out.append(violation(f, "cancel-stop-reason", "/result/stopReason",
                                 f"the prompt session/cancel (seq {cancel}) cancelled "
                                 f"ended with {show_id(stop)}, not \"cancelled\"",
                                 *schema_words(revision, CANCELLED_WORDS), related=cancel))

    def permission_answered(self, key: tuple[type, Any]) -> None:
        """A permission request answered: the unannounced id it named is now used."""
        named = self.perm_keys.pop(key, None)
        if named is not None and named in self.unannounced:
            self.unannounced[named][1] = True

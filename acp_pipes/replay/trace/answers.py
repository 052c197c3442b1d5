"""What a re-drive (:mod:`acp_pipes.replay.trace.client`) sends in the recorded client's
place, besides its steps: the recorded answers to the agent's requests, kept by the
recorded request's id until the live agent asks (each paired with its recorded request,
which a client that piped its whole script wrote after it, and holding back the client
steps recorded after it); each recorded client frame as it goes now (the minted names
learned, the recorded working directory mapped onto ``--workspace``); and the file
writes the recorded client performed, performed under ``--workspace``
(:mod:`acp_pipes.replay.trace.workspace`) or listed as not performed."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import orjson

from acp_pipes.protocol.jsonrpc import IdKey, id_key
from acp_pipes.replay.trace.ids import frame_value
from acp_pipes.sameness.minted import rename

if TYPE_CHECKING:
    from acp_pipes.replay.trace.workspace import Workspace
    from acp_pipes.sameness.match import Matcher
    from acp_pipes.sameness.slots import Slot

__all__ = ["ClientSide"]


class ClientSide:
    """The recorded client's answers and writes, for one run against the matcher ``m``
    (whose view learns the names and the working directory)."""

    def __init__(self, m: Matcher, workspace: str | None):
        self.m = m
        # recorded request id -> its recorded answers, in order (an id can come again once
        # answered, and the trace is read ahead)
        self.answers: dict[IdKey, deque[Slot]] = {}
        # the recorded agent requests read whose answer is not read yet, by id; the
        # answers read before their request (a client that answered ahead: its script
        # piped in whole), by id; a kept answer's index -> its request
        self.unanswered: dict[IdKey, deque[Slot]] = {}
        self.early: dict[IdKey, deque[Slot]] = {}
        self.request_of: dict[int, Slot] = {}
        self.workspace: Workspace | None = None
        self.cwd: str | None = None  # the recorded session's working directory
        self.unwritten: list[dict[str, Any]] = []  # writes not performed (no workspace)
        if workspace is not None:
            from acp_pipes.replay.trace.workspace import Workspace

            self.workspace = Workspace(workspace)

    def keep(self, slot: Slot) -> None:
        """A recorded answer (to an agent request), kept by the request's id, and paired
        with that request when it was read (else it is an early one: :meth:`asked`
        pairs it)."""
        key = id_key(slot.event().rid)
        _push(self.answers, key, slot)
        request = _pop(self.unanswered, key)
        if request is None:
            _push(self.early, key, slot)
        else:
            self.request_of[slot.index] = request

    def asked(self, slot: Slot) -> None:
        """A recorded agent request read: paired with its answer when that was read
        first, else waiting for it."""
        key = id_key(slot.event().rid)
        answer = _pop(self.early, key)
        if answer is None:
            _push(self.unanswered, key, slot)
        else:
            self.request_of[answer.index] = slot

    def holds(self, step: Slot, more: bool) -> bool:
        """Whether a recorded answer before the client step ``step`` is still to go (the
        client wrote the step after it, and the recorded agent read them in that order;
        ``more``: the recording has frames not read yet). An answer no longer holds a
        step once its request came, or when it never can: given up, sent only sometimes
        (optional), or not in the rest of the recording."""
        m = self.m
        for answer in m.unsent_before(step):
            request = self.request_of.get(answer.index)
            if request is None:
                if more:
                    return True  # its request is still to be read
            elif m.gates(request):
                return True
        return False

    def has_answer(self, key: IdKey) -> bool:
        return key in self.answers

    def answer_to(self, key: IdKey) -> Slot | None:
        """The recorded answer to the request of id ``key`` (:func:`id_key`), taken."""
        got = _pop(self.answers, key)
        if got is None:
            return None
        if self.request_of.pop(got.index, None) is None:
            early = self.early.get(key)
            if early is not None and got in early:
                early.remove(got)
                if not early:
                    del self.early[key]
        return got

    def mapped(self, slot: Slot) -> None:
        """The recorded session's working directory: with ``--workspace``, mapped onto
        it from here on (in what is sent, and in what is compared)."""
        ev = slot.event()
        params = ev.value.get("params") if ev.value.__class__ is dict else None
        cwd = params.get("cwd") if params.__class__ is dict else None
        if cwd.__class__ is not str or not cwd.startswith("/"):
            return
        self.cwd = cwd
        if self.workspace is not None:
            self.m.view = self.m.view.with_paths({cwd: self.workspace.root})

    def outgoing(self, raw: bytes) -> bytes:
        """A recorded client frame as it goes now: with the learned names, and under
        ``--workspace`` the recorded working directory mapped onto it (its bytes kept
        when neither applies)."""
        m = self.m
        if not m.renamed and not m.view.maps_paths:
            return raw
        value = frame_value(raw)
        new = rename(value, m.names) if m.renamed else value
        new = m.view.map_paths(new)
        return raw if new is value else orjson.dumps(new)

    def perform(self, answer: Slot, live: Any, rec: Any) -> dict[str, Any] | None:
        """A file write the recorded client performed (it answered with a result):
        performed under ``--workspace``, else noted as not performed; the note to say
        when it was refused."""
        value = answer.event().value
        if value.__class__ is not dict or "result" not in value:
            return None  # the recorded client refused it: nothing to perform
        params = live.get("params") if live.__class__ is dict else None
        if params.__class__ is not dict:
            return None
        path, content = params.get("path"), params.get("content")
        if self.workspace is None:
            self.unwritten.append({"path": path, "seq": rec.seq})
            return None
        why = self.workspace.write(path, content) if isinstance(path, str) \
            and isinstance(content, str) else "no path and text content"
        if why is None:
            return None
        return {"event": "note", "kind": "write_refused", "seq": rec.seq,
                "method": rec.method, "path": path,
                "message": f"the recorded write of {path} was not performed: {why}"}

    def unperformed(self, event: dict[str, Any]) -> None:
        """Without ``--workspace``: the recorded writes not performed, added to a
        difference's ``event``."""
        if not self.unwritten:
            return
        event["unperformed_writes"] = list(self.unwritten)
        paths = ", ".join(w["path"] for w in self.unwritten[:3])
        event["message"] += (f" (after {len(self.unwritten)} recorded file write"
                             f"{'s' if len(self.unwritten) != 1 else ''} the re-drive "
                             f"did not perform: {paths}; give --workspace DIR to "
                             "perform them)")

    def close(self) -> None:
        if self.workspace is not None:
            self.workspace.close()


def _push(table: dict[IdKey, deque[Slot]], key: IdKey, slot: Slot) -> None:
    queued = table.get(key)
    if queued is None:
        table[key] = deque((slot,))
    else:
        queued.append(slot)


def _pop(table: dict[IdKey, deque[Slot]], key: IdKey) -> Slot | None:
    queued = table.get(key)
    if queued is None:
        return None
    got = queued.popleft()
    if not queued:
        del table[key]
    return got

"""A scripted client that waits as an editor does: acp-tee's ``--script``.

The client's frames come from a script (one JSON-RPC message a line, as
``acp-echo-agent --client-session N`` writes or a recording's c2a side holds) instead of
a live client, and each is sent only once the agent is done with the previous one:

- a request, once its response came;
- a ``session/prompt``, once the turn is over too: in ACP v2 when the agent reports the
  session ``idle`` (``state_update``; the response only acknowledges the prompt), in
  ACP v1 at the response itself (v1's ``PromptResponse`` ends the turn, with its
  ``stopReason``);
- what the agent asks meanwhile (a request of its own: a permission, an elicitation,
  fs/*) is answered by the script's next frame: in ACP v1 at once; in ACP v2 once the
  agent has reported the session ``requires_action`` (as it SHOULD when it waits for
  the user), or when the asking session has no turn running; an agent that does not
  report it is answered after QUIET seconds without a frame from it;
- a notification or an answer to the agent, at once (after an answer the turn goes on,
  and the next frame waits for it as above).

So a recording made this way interleaves the two directions turn by turn, the same in
every run of a deterministic agent. The protocol version is the one the ``initialize``
response names; without one, a prompt response carrying ``stopReason`` ends the turn.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import BinaryIO

import orjson

from acp_pipes.errors import UsageError
from acp_pipes.protocol.jsonrpc import IdKey, id_key

__all__ = ["QUIET", "Lockstep", "open_script", "script_frames"]

#: Seconds without a frame from an ACP v2 agent after which its request is answered
#: although it did not report ``requires_action``.
QUIET = 0.5


def open_script(path: str) -> BinaryIO:
    """``--script FILE`` opened to be read to its end by the session; ``cannot read the
    script FILE: reason`` (a UsageError, exit 2) when it cannot be, and an empty script
    or one that is no UTF-8 JSONL said as every tool says it (an InputError, exit 2),
    before the session starts."""
    from acp_pipes.io.lines import SNIFF_BYTES, judge_start

    try:
        script = open(path, "rb")  # noqa: SIM115 - read to its end by the session
        head = script.peek(SNIFF_BYTES)
    except OSError as e:
        raise UsageError(f"cannot read the script {path}: {e.strerror or e}") from None
    try:
        judge_start(head, path)
    except BaseException:
        script.close()
        raise
    return script


def script_frames(lines: Iterable[bytes]) -> Iterator[bytes]:
    """The frames of a script: each line without its LF; blank lines are skipped."""
    for line in lines:
        frame = line[:-1] if line.endswith(b"\n") else line
        if frame.strip():
            yield frame


def _parse(frame: bytes) -> dict | None:
    try:
        msg = orjson.loads(frame)
    except orjson.JSONDecodeError:
        return None
    return msg if isinstance(msg, dict) else None


class Lockstep:
    """When the scripted client may send its next frame. The sending thread calls
    :meth:`sending` before each frame reaches the agent and :meth:`wait` before the next;
    the thread reading the agent calls :meth:`received` with its frames and :meth:`close`
    at its end."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: dict[IdKey, tuple[str, object]] = {}  # ours, unanswered
        self._asked: dict[IdKey, object] = {}  # the agent's, unanswered
        self._turns: set[object] = set()  # sessions whose prompt turn is still running
        self._blocked: set[object] = set()  # sessions that reported requires_action
        self._heard = 0  # frames from the agent so far
        self._version: object = None  # as the initialize response gave it
        self._closed = False

    def sending(self, frame: bytes) -> None:
        """Note a client frame about to be sent (before it is, so no answer is missed)."""
        msg = _parse(frame)
        if msg is None:
            return
        with self._cond:
            method = msg.get("method")
            if isinstance(method, str):
                if "id" in msg:
                    params = msg.get("params")
                    session = params.get("sessionId") if isinstance(params, dict) else None
                    self._pending[id_key(msg["id"])] = (method, session)
                    if method == "session/prompt":
                        self._turns.add(session)
            elif "id" in msg:
                self._asked.pop(id_key(msg["id"]), None)

    def received(self, frames: Iterable[bytes]) -> None:
        """Note frames from the agent; wakes the sender when it may go on."""
        with self._cond:
            for frame in frames:
                self._heard += 1
                msg = _parse(frame)
                if msg is not None:
                    self._note(msg)
            self._cond.notify_all()

    def _note(self, msg: dict) -> None:
        method = msg.get("method")
        params = msg.get("params")
        session = params.get("sessionId") if isinstance(params, dict) else None
        if isinstance(method, str):
            if "id" in msg:
                self._asked[id_key(msg["id"])] = session
            elif method == "session/update" and isinstance(params, dict):
                update = params.get("update")
                if isinstance(update, dict) and update.get("sessionUpdate") == "state_update":
                    state = update.get("state")
                    if state == "requires_action":
                        self._blocked.add(session)
                    else:
                        self._blocked.discard(session)
                    if state == "idle":
                        self._turns.discard(session)
            return
        if "id" not in msg:
            return
        request = self._pending.pop(id_key(msg["id"]), None)
        if request is None:
            return
        result = msg.get("result")
        if request[0] == "initialize" and isinstance(result, dict):
            self._version = result.get("protocolVersion")
        elif request[0] == "session/prompt" and (
                "result" not in msg or self._version == 1
                or (isinstance(result, dict) and "stopReason" in result)):
            self._turns.discard(request[1])  # refused, or a v1 turn: over at the response

    def close(self) -> None:
        """The agent's output ended: nothing more will answer."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def wait(self) -> bool:
        """Block until the next frame may be sent; False once the agent's output ended."""
        with self._cond:
            while not self._closed:
                if self._asked:
                    if self._answerable():
                        return True
                    heard = self._heard
                    self._cond.wait(QUIET)
                    if self._heard == heard and not self._closed:
                        return True  # quiet: it will not say requires_action
                elif not (self._pending or self._turns):
                    return True
                else:
                    self._cond.wait()
            return False

    @property
    def heard(self) -> int:
        """How many frames the agent has sent so far."""
        return self._heard

    def settled(self, timeout: float | None = None) -> bool:
        """Block until every request sent is answered and every prompt turn is over
        (what a client whose input has ended waits for before it hangs up); False once
        the agent's output ended or ``timeout`` seconds passed first."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._closed or not (self._pending or self._turns), timeout
            ) and not self._closed

    def _answerable(self) -> bool:
        if self._version == 1:
            return True
        return any(session is None or session not in self._turns or session in self._blocked
                   for session in self._asked.values())

"""One session of the echo agent (:mod:`acp_pipes.echo.agent`) and the turn it may be
waiting in: their state, and the small pieces a turn's updates are made of (an
upsert, a tool call's patch, the prompt's text and its leading ``/words``).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import orjson

__all__ = ["Session", "Turn", "flags_of", "is_block", "prompt_text", "split_text",
           "tool_patch", "upsert"]

_dumps = orjson.dumps


def upsert(kind: str, key: str, ident: str, content: Any) -> dict:
    return {"sessionUpdate": kind, key: ident, "content": content}


def tool_patch(call_id: str, status: str, **fields: Any) -> dict:
    return {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": status, **fields}


def split_text(text: str, parts: int) -> list[str]:
    """Split text into at most ``parts`` non-empty pieces that concatenate to it."""
    if not text:
        return []
    size = -(-len(text) // parts)
    return [text[i : i + size] for i in range(0, len(text), size)]


def is_block(block: Any) -> bool:
    """Enough of a ContentBlock to echo it back schema-valid: a type, and text if text."""
    if not isinstance(block, dict) or not isinstance(kind := block.get("type"), str):
        return False
    return kind != "text" or isinstance(block.get("text"), str)


def prompt_text(prompt: list) -> str:
    """The text of a prompt: its text blocks joined by newlines (other blocks ignored)."""
    return "\n".join(b["text"] for b in prompt if b["type"] == "text")


def flags_of(text: str) -> frozenset[str]:
    """The leading ``/words`` of a prompt: ``"/elicit /permission hi"`` has two."""
    flags = []
    for word in text.split():
        if not word.startswith("/"):
            break
        flags.append(word)
    return frozenset(flags)


class Session:
    __slots__ = ("sid", "cwd", "prefix", "turns", "history", "used", "closed", "turn", "queue")

    def __init__(self, sid: str, cwd: str):
        self.sid = sid
        self.cwd = cwd
        # The session/update envelope up to the update object, built once per session.
        self.prefix = (
            b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
            + _dumps(sid)
            + b',"update":'
        )
        self.turns = 0
        self.history: list[dict] = []  # final whole-entity upserts, for replay on resume
        self.used = 0
        self.closed = False
        self.turn: Turn | None = None  # a turn waiting for the client
        self.queue: deque = deque()  # prompts received while a turn waits

    def update(self, upd: dict) -> bytes:
        return self.prefix + _dumps(upd) + b"}}"


class Turn:
    """A turn in progress; kept while it waits for the client, to resume where it paused."""

    __slots__ = tuple(
        "n text echo flags fail rejected tool tool_at plan_at stage request_id".split()
    )

    def __init__(self, n: int, text: str):
        self.n = n
        self.text = text
        self.echo = "Echo: " + text
        self.flags = flags_of(text)
        self.fail = "echo failed" if "/fail" in self.flags else ""
        self.rejected = False  # permission refused: the tool fails without running
        self.tool: dict | None = None  # the tool call as first announced
        self.tool_at = 0  # where the tool call and the plan sit in the session history
        self.plan_at = 0
        self.stage = ""  # "elicit" or "permission" while waiting
        self.request_id = 0

"""An ACP v1 agent on the official Python SDK (``agent-client-protocol``), a real peer for
the v1 conversion tests.

usage: python v1_agent.py --store DIR

Each prompt plays one deterministic turn as today's agents do: an empty first message
chunk, thought chunks, message chunks with a ``usage_update`` between them, a plan sent
whole three times, a read tool call with its updates, an edit tool call that asks
permission (its ``toolCall`` carries the diff) and ends with a v1 diff, and a closing
message. The turn ends with ``end_turn``; a prompt of ``refuse`` ends with ``refusal``.
Sessions are kept in ``DIR/<sessionId>.json`` (their history as the agent would replay
it), so a later process can ``session/load`` one: the history comes back as
``session/update``s, each message in one chunk, before the response.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from acp import (
    Agent,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    plan_entry,
    run_agent,
    start_edit_tool_call,
    start_read_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
    update_user_message,
)
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    Implementation,
    PermissionOption,
    SessionMode,
    SessionModeState,
    ToolCallUpdate,
    UsageUpdate,
)

NAME = "acp-pipes-v1-test-agent"
OLD = "one\ntwo\nthree\n"


class V1Agent(Agent):
    def __init__(self, store: Path):
        self.store = store
        self.conn: Client | None = None
        self.turns: dict[str, int] = {}

    def on_connect(self, conn: Client) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities=None,
                         client_info=None, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=1, agent_capabilities=AgentCapabilities(load_session=True),
            agent_info=Implementation(name=NAME, title="v1 test agent", version="1.0.0"))

    def _modes(self) -> SessionModeState:
        return SessionModeState(current_mode_id="default", available_modes=[
            SessionMode(id="default", name="Default"), SessionMode(id="plan", name="Plan")])

    async def new_session(self, cwd: str, additional_directories=None, mcp_servers=None,
                          **kwargs: Any) -> NewSessionResponse:
        n = len(list(self.store.glob("*.json"))) + 1
        sid = f"v1-session-{n}"
        self._save(sid, {"cwd": cwd, "history": []})
        return NewSessionResponse(session_id=sid, modes=self._modes())

    async def load_session(self, cwd: str, session_id: str, mcp_servers=None,
                           additional_directories=None, **kwargs: Any) -> LoadSessionResponse:
        for update in self._load(session_id)["history"]:
            await self.conn.session_update(session_id, _model(update))
        return LoadSessionResponse(modes=self._modes())

    async def prompt(self, session_id: str, prompt: list, **kwargs: Any) -> PromptResponse:
        state = self._load(session_id)
        history = state["history"]
        turn = self.turns[session_id] = self.turns.get(session_id, len(history)) + 1
        text = "".join(getattr(b, "text", "") for b in prompt)
        send = self.conn.session_update
        for block in prompt:
            history.append(update_user_message(block))
        if text == "refuse":
            await send(session_id, update_agent_message_text("I can't do that."))
            history.append(update_agent_message_text("I can't do that."))
            self._save(session_id, state)
            return PromptResponse(stop_reason="refusal")
        await send(session_id, update_agent_message_text(""))  # an empty first chunk
        for part in ("Let me ", "think."):
            await send(session_id, update_agent_thought_text(part))
        history.append(update_agent_thought_text("Let me think."))
        await send(session_id, update_agent_message_text("I'll "))
        await send(session_id, UsageUpdate(session_update="usage_update", used=100 * turn,
                                           size=200_000))
        for part in ("read and edit ", "notes.txt."):
            await send(session_id, update_agent_message_text(part))
        history.append(update_agent_message_text("I'll read and edit notes.txt."))
        steps = [plan_entry("Read notes.txt", priority="high"), plan_entry("Edit notes.txt")]
        await send(session_id, update_plan(steps))
        path = str(Path(state["cwd"]) / "notes.txt")
        read, edit = f"read-{turn}", f"edit-{turn}"
        await send(session_id, start_read_tool_call(read, "Read notes.txt", path))
        await send(session_id, update_tool_call(read, status="in_progress"))
        done_read = update_tool_call(read, status="completed",
                                     content=[tool_content(text_block(OLD))])
        await send(session_id, done_read)
        steps[0] = plan_entry("Read notes.txt", priority="high", status="completed")
        steps[1] = plan_entry("Edit notes.txt", status="in_progress")
        await send(session_id, update_plan(steps))
        new = OLD.replace("two", f"two ({text})")
        await send(session_id, start_edit_tool_call(edit, "Edit notes.txt", path, new))
        diff = tool_diff_content(path, new, OLD)
        answer = await self.conn.request_permission(
            session_id=session_id, options=[
                PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
                PermissionOption(option_id="reject", name="Reject", kind="reject_once")],
            tool_call=ToolCallUpdate(tool_call_id=edit, title="Edit notes.txt?",
                                     content=[diff]))
        allowed = getattr(answer.outcome, "option_id", None) == "allow"
        done_edit = update_tool_call(edit, status="completed" if allowed else "failed",
                                     content=[diff])
        await send(session_id, done_edit)
        steps[1] = plan_entry("Edit notes.txt", status="completed")
        await send(session_id, update_plan(steps))
        closing = f"Done: {text}"
        for part in ("Done", f": {text}"):
            await send(session_id, update_agent_message_text(part))
        # the history as it will be replayed: each tool call whole, the plan as it ended
        for first, last in ((start_read_tool_call(read, "Read notes.txt", path), done_read),
                            (start_edit_tool_call(edit, "Edit notes.txt", path, new),
                             done_edit)):
            history.append(first.model_copy(update={
                "status": last.status, "content": last.content}))
        history.append(update_plan(steps))
        history.append(update_agent_message_text(closing))
        self._save(session_id, state)
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None

    def _save(self, sid: str, state: dict) -> None:
        out = {"cwd": state["cwd"], "history": [
            u if isinstance(u, dict) else u.model_dump(by_alias=True, exclude_none=True)
            for u in state["history"]]}
        (self.store / f"{sid}.json").write_text(json.dumps(out))

    def _load(self, sid: str) -> dict:
        return json.loads((self.store / f"{sid}.json").read_text())


def _model(update: dict) -> Any:
    """A stored update back as the SDK's model of its kind."""
    from acp import schema

    kinds = {"user_message_chunk": schema.UserMessageChunk,
             "agent_message_chunk": schema.AgentMessageChunk,
             "agent_thought_chunk": schema.AgentThoughtChunk,
             "tool_call": schema.ToolCallStart, "plan": schema.AgentPlanUpdate}
    return kinds[update["sessionUpdate"]].model_validate(update)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--store", required=True)
    args = p.parse_args()
    store = Path(args.store)
    store.mkdir(parents=True, exist_ok=True)
    asyncio.run(run_agent(V1Agent(store)))


if __name__ == "__main__":
    main()

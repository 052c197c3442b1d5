"""The official Python SDK's client side as an editor would be, for tests that drive real
agents: it answers what an agent asks (permissions, files, terminals) and keeps every
update it is sent, so a test can say what the client saw."""

from __future__ import annotations

from typing import Any

#: Marks the copy of a permission request's toolCall among the updates (not sent as one).
PERMISSION = "_fromPermissionRequest"


class Editor:
    """The SDK's client side, as an editor with a file system and terminals: allows every
    tool once, serves files from memory, runs no command (its terminal says what it
    would print), and keeps every update it is sent, in order."""

    def __init__(self) -> None:
        self.updates: list[dict] = []
        self.asked: list[dict] = []
        self.files: dict[str, str] = {}
        self.terminals: list[str] = []

    async def request_permission(self, options, session_id, tool_call, **kw: Any):
        from acp.schema import AllowedOutcome, RequestPermissionResponse

        call = tool_call.model_dump(by_alias=True, exclude_none=True)
        self.asked.append(call)
        # a v1 client shows the request's tool call as the call's new state (fast-agent
        # asks for its terminal calls under a toolCallId "pending" it never announced)
        self.updates.append({"sessionUpdate": "tool_call_update", **call, PERMISSION: True})
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="allow_once"))

    async def session_update(self, session_id, update, **kw: Any) -> None:
        self.updates.append(update.model_dump(by_alias=True, exclude_none=True))

    async def read_text_file(self, path, session_id, **kw: Any):
        from acp.schema import ReadTextFileResponse

        return ReadTextFileResponse(content=self.files.get(path, ""))

    async def write_text_file(self, content, path, session_id, **kw: Any):
        from acp.schema import WriteTextFileResponse

        self.files[path] = content
        return WriteTextFileResponse()

    async def create_terminal(self, command, session_id, **kw: Any):
        from acp.schema import CreateTerminalResponse

        self.terminals.append(" ".join([command, *(kw.get("args") or [])]))
        return CreateTerminalResponse(terminal_id=f"term-{len(self.terminals)}")

    async def terminal_output(self, session_id, terminal_id, **kw: Any):
        from acp.schema import TerminalExitStatus, TerminalOutputResponse

        return TerminalOutputResponse(output="hi\n", truncated=False,
                                      exit_status=TerminalExitStatus(exit_code=0))

    async def wait_for_terminal_exit(self, session_id, terminal_id, **kw: Any):
        from acp.schema import WaitForTerminalExitResponse

        return WaitForTerminalExitResponse(exit_code=0)

    async def release_terminal(self, session_id, terminal_id, **kw: Any):
        from acp.schema import ReleaseTerminalResponse

        return ReleaseTerminalResponse()

    def on_connect(self, conn) -> None:
        pass


def seen_by_client(updates: list[dict]) -> dict:
    """What the client was sent, folded by the v1 rules: a run of chunks of one kind is
    one message; a tool call is its announcement patched by its updates (a permission
    request's toolCall among them, as a v1 client shows it). ``announced``: the calls
    the agent's own updates named (ASR stores a call a permission alone names as the
    permission's subject only: docs/asr.md, the v1 mapping)."""
    messages: list[tuple[str, str]] = []
    calls: dict[str, dict] = {}
    announced: set[str] = set()
    last = None
    for u in updates:
        kind = u["sessionUpdate"]
        if kind in ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk"):
            text = u["content"].get("text", "")
            if last == kind:
                messages[-1] = (kind, messages[-1][1] + text)
            else:
                messages.append((kind, text))
            last = kind
            continue
        if kind in ("tool_call", "tool_call_update"):
            calls.setdefault(u["toolCallId"], {}).update(
                {k: v for k, v in u.items() if k not in ("sessionUpdate", PERMISSION)})
            if not u.get(PERMISSION):
                announced.add(u["toolCallId"])
        if kind in ("tool_call", "tool_call_update", "turn_end"):
            last = None
    return {"messages": messages, "calls": calls, "announced": announced}

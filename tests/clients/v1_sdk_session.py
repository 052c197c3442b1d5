"""An ACP v1 session between two peers on the official Python SDK (agent-client-protocol).

    python v1_sdk_session.py client PROMPTS -- AGENT [ARGS...]   # the client; runs AGENT
    python v1_sdk_session.py agent                               # the agent, on stdio

The agent answers each prompt with streamed message chunks and a tool call; on every
second prompt it reads a file through the client (fs/read_text_file) after asking
permission (session/request_permission). The client advertises fs.readTextFile, allows
every permission, and prints one JSON line per prompt and a last {"done": ...} line.
Put acp-tee in front of the agent to record a real v1 session.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import acp
from acp import helpers
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    ClientCapabilities,
    FileSystemCapabilities,
    Implementation,
    PermissionOption,
    ToolCallUpdate,
)


class EchoV1Agent:
    """Echoes each prompt back, as a v1 agent does its work: chunks, a tool call."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.turns = 0

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **_: Any) -> acp.InitializeResponse:
        self.reads = bool(client_capabilities and client_capabilities.fs
                          and client_capabilities.fs.read_text_file)
        return acp.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name="v1-sdk-echo", version="1"),
            auth_methods=[])

    async def new_session(self, cwd: str, mcp_servers: Any = None, **_: Any
                          ) -> acp.NewSessionResponse:
        return acp.NewSessionResponse(session_id="v1-sess-1")

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> acp.PromptResponse:
        self.turns += 1
        text = " ".join(getattr(b, "text", "") for b in prompt)
        for part in ("Echo:", " " + text):
            await self.conn.session_update(session_id, helpers.update_agent_message_text(part))
        call = f"call-{self.turns}"
        await self.conn.session_update(session_id, helpers.start_tool_call(
            call, "Read the notes", kind="read", status="pending"))
        if self.reads and self.turns % 2 == 0:
            options = [PermissionOption(option_id="allow", name="Allow", kind="allow_once")]
            answer = await self.conn.request_permission(
                session_id, ToolCallUpdate(tool_call_id=call, title="Read the notes"), options)
            if isinstance(answer.outcome, AllowedOutcome):
                got = await self.conn.read_text_file(session_id, "/tmp/notes.txt")
                await self.conn.session_update(session_id, helpers.update_agent_message_text(
                    f" ({len(got.content)} bytes of notes)"))
        await self.conn.session_update(session_id, helpers.update_tool_call(
            call, status="completed"))
        return acp.PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **_: Any) -> None:
        pass


class RecordingClient:
    """Allows every permission and serves one file."""

    def __init__(self) -> None:
        self.chunks: list[str] = []

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **_: Any) -> acp.RequestPermissionResponse:
        return acp.RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=options[0].option_id))

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        text = getattr(getattr(update, "content", None), "text", None)
        if getattr(update, "session_update", None) == "agent_message_chunk" and text:
            self.chunks.append(text)

    async def read_text_file(self, session_id: str, path: str, **_: Any
                             ) -> acp.ReadTextFileResponse:
        return acp.ReadTextFileResponse(content="remember the milk\n")


async def client(prompts: int, argv: list[str]) -> int:
    me = RecordingClient()
    async with acp.spawn_agent_process(me, argv[0], *argv[1:]) as (conn, process):
        init = await conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(fs=FileSystemCapabilities(
                read_text_file=True, write_text_file=False), terminal=False),
            client_info=Implementation(name="v1-sdk-client", version="1"))
        print(json.dumps({"initialized": init.protocol_version}), flush=True)
        session = await conn.new_session(cwd="/tmp", mcp_servers=[])
        for i in range(1, prompts + 1):
            me.chunks.clear()
            answer = await conn.prompt(session.session_id, [helpers.text_block(f"hello {i}")])
            print(json.dumps({"prompt": i, "stopReason": answer.stop_reason,
                              "text": "".join(me.chunks)}), flush=True)
    print(json.dumps({"done": True}), flush=True)
    return 0


async def agent() -> None:
    await acp.run_agent(EchoV1Agent())


def main(argv: list[str]) -> int:
    if argv[:1] == ["agent"]:
        asyncio.run(agent())
        return 0
    if argv[:1] == ["client"] and "--" in argv:
        cut = argv.index("--")
        return asyncio.run(client(int(argv[1]), argv[cut + 1:]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

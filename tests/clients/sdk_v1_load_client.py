"""A real ACP v1 client (the official Python SDK, ``agent-client-protocol``, ``import acp``)
that opens every session an agent lists: initialize with protocol version 1,
``session/list``, then ``session/load`` of each session (collecting the
``session/update`` notifications the SDK parsed and validated), a prompt (which a
read-only agent refuses) and ``session/close``. Prints one JSON line per step so a test
can assert what it received.

usage: python sdk_v1_load_client.py -- AGENT [ARGS...]

Exit status 1 when the SDK reported an error (a notification it could not validate is
logged, not raised: every log record at ERROR is printed as ``{"error": ...}``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Any

import acp
from acp.schema import ClientCapabilities, Implementation


def out(obj: Any) -> None:
    print(json.dumps(obj), flush=True)


class Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += f": {type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
        self.messages.append(text)


class Client:
    """Collects what the agent sends; answers nothing else (a replay asks nothing)."""

    def __init__(self) -> None:
        self.updates: list[dict] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append({"sessionId": session_id,
                             "update": update.model_dump(mode="json", by_alias=True,
                                                         exclude_none=True)})


async def main(agent: list[str]) -> int:
    errors = Errors()
    logging.getLogger().addHandler(errors)
    client = Client()
    async with acp.stdio.spawn_agent_process(client, agent[0], *agent[1:]) as (conn, _proc):
        init = await conn.initialize(protocol_version=1,
                                     client_capabilities=ClientCapabilities(),
                                     client_info=Implementation(name="sdk-v1-load-client",
                                                                version="1"))
        caps = init.agent_capabilities
        out({"step": "initialize", "protocolVersion": init.protocol_version,
             "loadSession": bool(caps and caps.load_session),
             "agent": init.agent_info.name if init.agent_info else None})
        listed = await conn.list_sessions()
        sessions = [s.model_dump(mode="json", by_alias=True, exclude_none=True)
                    for s in listed.sessions]
        out({"step": "list", "sessions": sessions})
        for info in sessions:
            client.updates = []
            loaded = await conn.load_session(cwd=info["cwd"], session_id=info["sessionId"])
            await asyncio.sleep(0)  # the notifications before the response are handled
            out({"step": "load", "sessionId": info["sessionId"],
                 "response": loaded.model_dump(mode="json", by_alias=True,
                                               exclude_none=True) if loaded else None,
                 "updates": client.updates})
        if sessions:
            sid = sessions[0]["sessionId"]
            try:
                await conn.prompt(session_id=sid, prompt=[acp.text_block("more?")])
                out({"step": "prompt", "refused": False})
            except acp.RequestError as e:
                out({"step": "prompt", "refused": True, "code": e.code, "message": str(e)})
            await conn.close_session(session_id=sid)
            out({"step": "close"})
    for message in errors.messages:
        out({"error": message})
    out({"done": True})
    return 1 if errors.messages else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(asyncio.run(main(args[args.index("--") + 1:])))

"""Scripted clients for the echo agent: the client side of deterministic sessions.

The demo, the tests and the benchmarks drive :mod:`acp_pipes.echo.agent` with these
frames. The script can be written in advance, answers to the agent's own requests
included, because the echo agent numbers its requests 1, 2, 3, ... per connection.
``acp-echo-agent --client-session N`` prints one.
"""

from __future__ import annotations

from collections.abc import Iterator

from acp_pipes import __version__
from acp_pipes.echo.agent import PROTOCOL_VERSION
from acp_pipes.protocol.jsonrpc import request as _request
from acp_pipes.protocol.jsonrpc import response as _response

__all__ = ["client_session"]


def client_session(
    prompts: int,
    *,
    text: str = "hello",
    permission_every: int | None = None,
    elicit_every: int | None = None,
    cwd: str = "/tmp/acp-echo",
    reject: bool = False,
) -> Iterator[bytes]:
    """Yield the client frames (bytes without LF) of one session with ``prompts`` prompts:
    initialize, session/new, the prompts, session/close.

    Prompt ``i`` (1-based) says ``"<text> <i>"``; every ``permission_every``-th prompt
    starts with ``/permission`` and is followed by the client's answer (``allow``, or
    ``reject`` when ``reject``), and every ``elicit_every``-th with ``/elicit`` and an
    accepted answer (a prompt that is both elicits first); with ``elicit_every`` the
    client advertises form elicitation in ``initialize``. The answers can be written in
    advance because the agent numbers its requests 1, 2, 3, ...

    >>> [f[:40] for f in client_session(1)][1]
    b'{"jsonrpc":"2.0","id":1,"method":"sessio'
    """
    info = {"name": "acp-pipes-client", "version": __version__}
    # what the agent will use: form elicitation, when a prompt asks for it (a client that
    # never advertised it must not be asked: acp-frame --validate says so)
    capabilities: dict[str, object] = {"elicitation": {"form": {}}} if elicit_every else {}
    init = {"protocolVersion": PROTOCOL_VERSION, "info": info, "capabilities": capabilities}
    yield _request(0, "initialize", init)
    yield _request(1, "session/new", {"cwd": cwd, "mcpServers": []})
    sid = "sess-1"
    agent_requests = 0
    for i in range(1, prompts + 1):
        # (bool() is true of neither None nor 0)
        elicit = bool(elicit_every) and i % elicit_every == 0  # type: ignore[operator]
        permission = bool(permission_every) and i % permission_every == 0  # type: ignore[operator]  # (as above)
        body = f"{text} {i}"
        if permission:
            body = f"/permission {body}"
        if elicit:
            body = f"/elicit {body}"
        prompt = [{"type": "text", "text": body}]
        yield _request(i + 1, "session/prompt", {"sessionId": sid, "prompt": prompt})
        if elicit:
            agent_requests += 1
            yield _response(agent_requests, {"action": "accept", "content": {"answer": f"yes {i}"}})
        if permission:
            agent_requests += 1
            outcome = {"outcome": "selected", "optionId": "reject" if reject else "allow"}
            yield _response(agent_requests, {"outcome": outcome})
    yield _request(prompts + 2, "session/close", {"sessionId": sid})

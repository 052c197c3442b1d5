"""A session of the remote sides: two sides relayed frame by frame, each frame logged
before it is passed on, until one side ends; and how a remote run stops (SIGINT,
SIGTERM or SIGHUP cancel its work; its status is then 128+N).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

from acp_pipes.io.wire import A2C, C2A, event_record
from acp_pipes.tee.options import GRACE
from acp_pipes.tee.sides import Binary, Closed, ProcessAgent

TYPE_CHECKING = False
if TYPE_CHECKING:
    from acp_pipes.tee.logfile import WireLog

__all__ = ["answered", "relay", "stopped_by", "with_signals"]


async def relay(client, agent, log: WireLog, *, input_ends_session: bool) -> Closed:
    """Relay frames both ways until one side ends; returns how the agent side ended.

    ``input_ends_session`` (a stdio client): the client's EOF closes the agent's side
    once every request is answered (or after GRACE seconds of silence); otherwise a
    client's close is passed on at once, with its code and reason.
    """
    from acp_pipes.tee.script import Lockstep

    track = getattr(client, "track", None) or Lockstep()  # a script's waits on this one
    ended: list[Closed] = []
    from_client = _logger(log, C2A, "client", track.sending)
    from_agent = _logger(log, A2C, "agent", lambda frame: track.received([frame]))

    async def client_to_agent() -> None:
        item = await _pass_on(client, agent, from_client)
        if client.kind == "ws":
            log.event(event_record(0, "ws-close", "client", code=item.code,
                                   reason=item.reason))
        if input_ends_session:
            await answered(track)
        # a side that broke the protocol was closed with its code (1002, 1007, 1009);
        # the other side is told of no error of its own: closed as after a lost peer
        await agent.close(None if item.how == "error" else item.code, item.reason)
        if isinstance(agent, ProcessAgent):
            await agent.end()  # bounded: its output ends with it, and the relay with that

    async def agent_to_client() -> Closed:
        item = await _pass_on(agent, client, from_agent)
        track.close()
        if agent.kind == "ws":
            log.event(event_record(0, "ws-close", "agent", code=item.code,
                                   reason=item.reason))
        ended.append(item)
        await client.close(None if item.how == "error" else item.code, item.reason)
        return item

    if client.kind == "ws":
        client.on_late = _logger(log, C2A, "client")
    if agent.kind == "ws":
        agent.on_late = _logger(log, A2C, "agent")
    up = asyncio.ensure_future(client_to_agent())
    down = asyncio.ensure_future(agent_to_client())
    try:
        await down
    finally:
        if not up.done():
            up.cancel()
        try:
            await up
        except (asyncio.CancelledError, Exception):
            pass
    return ended[0]


async def _pass_on(src, dst, logged: Callable[[object], None]) -> Closed:
    """Each item ``src`` receives, logged then sent to ``dst``, up to ``src``'s end."""
    while True:
        item = await src.recv()
        if isinstance(item, Closed):
            return item
        logged(item)
        await dst.send(item)


def _logger(log: WireLog, direction: str, side: str,
            noted: Callable[[bytes], None] | None = None) -> Callable[[object], None]:
    """How an item from ``side`` is logged: a frame in ``direction`` (then ``noted``:
    the Lockstep sees it before it is passed on), a binary frame as a ``ws-binary``
    event. Without ``noted``: a frame that came while acp-tee closed a side nobody read
    any more (:attr:`acp_pipes.tee.websocket.WsSide.on_late`)."""
    def logged(item) -> None:
        if isinstance(item, Binary):
            log.event(event_record(0, "ws-binary", side, **_bytes_field(item.data)))
            return
        log.frames(direction, [item[0]], nolf=item[1])
        if noted is not None:
            noted(item[0])
    return logged


async def answered(track) -> None:
    """Until every request sent is answered and every turn is over (then the agent's
    side may close), or GRACE seconds pass without a frame from the agent."""
    while True:
        heard = track.heard
        if await asyncio.to_thread(track.settled, GRACE) or track.heard == heard:
            return


def _bytes_field(data: bytes) -> dict:
    """A binary frame's bytes as the log keeps them: base64, whatever they hold."""
    import base64

    return {"raw_b64": base64.b64encode(data).decode("ascii")}


#: The signal that stopped this process's remote session, if one did.
_SIGNALLED: list[int] = []


def stopped_by() -> int | None:
    return _SIGNALLED[0] if _SIGNALLED else None


async def with_signals(work):
    """Run ``work`` until it ends or SIGINT/SIGTERM/SIGHUP arrives (then it is
    cancelled, and ends its log); the status is 128+N for signal N."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    got = _SIGNALLED

    def stop(sig: int) -> None:
        if not got:
            got.append(sig)
        task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(sig, stop, sig)
        except (ValueError, RuntimeError):  # not the main thread
            pass
    try:
        return await task
    except asyncio.CancelledError:
        if got:
            return 128 + got[0]
        raise

"""`acp-echo-agent`: a deterministic ACP v2 agent on stdio that echoes every prompt."""

from __future__ import annotations

import argparse

from acp_pipes.cli.runner import Context, Tool, UsageError, run
from acp_pipes.echo.agent import serve
from acp_pipes.echo.client import client_session

DESCRIPTION = """\
Reads the client's JSON-RPC frames on stdin, one a line, and writes its own on stdout,
each with one write and a flush. No clock, no randomness: the output bytes are a pure
function of the input bytes (sessions sess-1, sess-2, ...; per session, turn t uses
msg-user-t, msg-agent-t, plan-t, call-t; its own requests are numbered 1, 2, ...).

A prompt gets: the response {messageId}, user_message, state_update running,
plan_update, agent_message_chunk x1-3 ("Echo: <text>"), tool_call_update pending,
in_progress, tool_call_content_chunk x1-2, completed, plan_update, usage_update and
state_update idle (end_turn). Methods: initialize, session/new, session/prompt,
session/list, session/resume (replayFrom {type: start} replays the history),
session/close; notification session/cancel.

special prompts (leading words of the first text):
  /permission   ask session/request_permission before the tool runs, wait for the
                answer: option "allow" runs it, anything else fails it
  /elicit       ask elicitation/create (form, field "answer") before the echo, wait;
                an accepted answer is appended to the echo
  /fail         the tool call fails
  /error        the turn ends at once with stopReason error
  session/cancel while the agent waits ends the turn with stopReason cancelled.

--client-session N prints a scripted client instead (initialize, session/new, N
prompts with the answers to the agent's requests, session/close), to pipe into it; with
--elicit-every its initialize advertises form elicitation, which the agent then uses.

A request this agent cannot read whole (a lone surrogate, a number such as 1e400,
nesting deeper than 1024 levels) is answered -32600 with its own id."""

EXAMPLE = """\
acp-echo-agent < examples/hello/client.jsonl
acp-echo-agent --client-session 1000 --permission-every 10 | acp-echo-agent | wc -l"""


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--client-session",
        type=int,
        metavar="N",
        help="print a scripted client session with N prompts and exit",
    )
    p.add_argument("--text", default="hello", help="prompt text for --client-session")
    p.add_argument(
        "--permission-every", type=int, metavar="K", help="every K-th prompt asks permission"
    )
    p.add_argument("--elicit-every", type=int, metavar="K", help="every K-th prompt elicits")


def run_echo_agent(args: argparse.Namespace, ctx: Context) -> int:
    if args.client_session is not None:
        for name in ("client_session", "permission_every", "elicit_every"):
            value = getattr(args, name)
            if value is not None and value < (0 if name == "client_session" else 1):
                raise UsageError(f"--{name.replace('_', '-')} must be positive, got {value}")
        script = client_session(
            args.client_session,
            text=args.text,
            permission_every=args.permission_every,
            elicit_every=args.elicit_every,
        )
        ctx.out.write(b"".join(frame + b"\n" for frame in script))
        return 0

    serve(ctx.stdin(), ctx.out, ctx.warn)  # the agent says its source: stdin
    return 0


TOOL = Tool(
    prog="acp-echo-agent",
    summary="A deterministic ACP v2 agent on stdio that echoes every prompt.",
    description=DESCRIPTION,
    example=EXAMPLE,
    run=run_echo_agent,
    configure=configure,
    takes_files=False,
    takes_output=False,
    takes_color=False,  # stdout is the ACP stream
    exits="0 ok, 2 usage error or no stdin, 130 interrupted",
)


def main() -> None:
    run(TOOL)


if __name__ == "__main__":
    main()

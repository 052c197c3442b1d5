"""`acp-tee`: record an ACP session: a stdio proxy that forwards every byte untouched and
logs every frame (a thin layer over :func:`acp_pipes.tee.record`).

Start-up: acp-tee's alone. In front of a fast agent the proxy's start-up is most of what
it adds to a session, so acp-tee (and acp-replay --client, for the same reason:
:mod:`acp_pipes.cli.replay`) bends the usual order; this is every trick it plays and
what each one saves (figures and commands: BENCHMARKS.md, ``python -m bench tee`` and
``python -m bench startup``):

- The agent starts before anything else loads: when the command line is plain (see
  :func:`plain_command`) :func:`main` starts it, and only then imports the runner,
  argparse and orjson (this module imports the runner only in :func:`main`). The agent
  started 31-33 ms after acp-tee when everything was imported first; ~8 ms now, which
  is the interpreter's own start (a bare ``python -c pass``).
- What it imports before that start imports nothing beyond the interpreter's core:
  :mod:`acp_pipes.tee` (``_signal``, not the ``signal`` module with its enums, ~3 ms),
  :mod:`acp_pipes.io.wire` (annotations under TYPE_CHECKING) and :mod:`acp_pipes.errors`
  (``Callable`` from ``_collections_abc``, which the interpreter has loaded, not
  ``collections.abc``, which loads ``collections``); :mod:`acp_pipes.cli.plain` imports
  nothing.
- It ends with ``os._exit`` once its log is closed and the agent reaped
  (:func:`acp_pipes.cli.runner.exit_now`), skipping ~5 ms of interpreter teardown.

Every other tool imports plainly, at the top of its modules.
"""

from __future__ import annotations

import os
import sys

from acp_pipes.cli.plain import plain_words
from acp_pipes.io.wire import make_clock
from acp_pipes.tee import Agent, record, start_agent

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

    from acp_pipes.cli.runner import Context, Tool

DESCRIPTION = """\
Put acp-tee where the agent command goes: it starts AGENT, passes the client's stdin to
it and its stdout back, byte for byte, and writes every frame of both directions to a
wire log (read it with acp-frame; its format is in the manual). The agent's stderr
passes through, unrecorded. The exit status is the agent's (128+N if signal N killed it;
127 if AGENT cannot be found, 126 if it cannot be run). SIGINT, SIGTERM and SIGHUP are
passed on to the agent's process group (the agent and what it started). An agent that
outlives the client's input, silent for 5 s, or a child of it that holds its stdout
after it exited, is ended (SIGTERM, then SIGKILL 5 s later).

-o FILE writes the log to FILE, overwriting it. -o DIR/ writes a new file in DIR for
each session, named {agent}-{start}-{pid}.jsonl; a template such as
~/acp-logs/{agent}-{start}-{pid}.jsonl names it ({agent}: the agent command's name,
{start}: the UTC start time, {pid}: acp-tee's pid); neither overwrites a log (a taken
name gets -1, -2, ...), and the directory is created when missing. A leading ~ is the
home directory. A name ending in .gz is written gzip-compressed. Without -o the log is
a new acp-tee-{start}-{pid}.jsonl in the current directory (the path is said on
stderr). In editor settings give -o an absolute path or ~: editors start agents in a
directory of their choosing. Logs are created mode 0600. A FIFO is never waited for:
with no reader, or a reader that takes nothing for 1 s, the session goes on unrecorded.
Whenever the log cannot be written, acp-tee says so on stderr, once, and the session
goes on.

Secrets: every credential the ACP schemas define is logged as "<redacted
hmac-blake3:HEX>", keyed by a random key drawn for each recording and never written: the
env and headers of MCP servers, the headers of providers/set, the params of authenticate
and auth/login (but methodId), the env of terminal/create and of auth methods, and an
answer to an elicitation form field marked secret (format "password", writeOnly). Within
a recording one secret gives one token; a redacted frame's hash is of the frame as logged.
The header's credentials go the same way: in the agent's command line the value of an
--api-key-like option or of a credential-named NAME=VALUE, in a URL its password and
credential-named query parameters, and captured variables with credential names.
--keep-secrets logs them as sent. The peers always get the frames as sent.

Remote sides (WebSocket, Streamable HTTP): --connect URL reaches an agent at a ws:// or
http:// URL instead of starting one (the client stays on stdio; its input's end closes
the connection once every request is answered); --listen URL serves clients there (one
agent process per connection, or with --connect a recording reverse proxy); port 0
picks a free port, said on stderr as "listening on URL"; an http:// listener speaks
Streamable HTTP (POST, SSE streams, DELETE; HTTP/1.1, and HTTP/2 as h2c with prior
knowledge) and WebSocket; --http2 speaks HTTP/2 to an http(s):// agent. Each connection
gets its own log (-o FILE: FILE, then FILE-1, FILE-2, ...). WebSocket text frames are relayed and
logged byte for byte, one message each; binary frames are logged as events and passed
on between WebSockets only; handshakes and close codes are logged. Headers pass through
(Authorization, cookies, API keys, Acp-*); their credentials are redacted in the log
unless --keep-secrets. A listener runs until SIGINT, SIGTERM or SIGHUP; --connect exits
0 when the agent closed cleanly, 1 otherwise, 126 when it could not be reached.

A listener starts an agent, with your rights, for whoever connects. By default it takes
no request from a web page of another origin (403) or under a foreign Host name (421),
binds beyond loopback only with a token (--token-file FILE, or $ACP_LISTEN_TOKEN; then
every request needs Authorization: Bearer TOKEN, else 401), runs at most 32 agents (503
beyond), refuses messages over 32 MiB (WebSocket 1009, HTTP 413), drops a connection
that sends no whole request within 10 s and ends one idle for 300 s with its agent; each
refusal is one line on stderr."""


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", metavar="LOG",
                   help="the wire log: a FILE (overwritten), or DIR/ or a name template "
                        "with {agent}, {start}, {pid} (a new file for each session); .gz "
                        "compresses it; default: acp-tee-{start}-{pid}.jsonl here")
    p.add_argument("--clock", default="system", metavar="system|epoch|nanos:N",
                   help="receipt times: the wall clock (default), or pinned to 0 / N so "
                        "two recordings of a deterministic session are identical files")
    p.add_argument("--capture-env", action="append", default=[], metavar="NAME",
                   help="record this environment variable in the header (repeatable; "
                        "an unset one is recorded as null); none by default")
    p.add_argument("--no-host", action="store_true",
                   help="leave host os/arch/cwd/pid out of the header")
    p.add_argument("--keep-secrets", action="store_true",
                   help="log credentials (MCP env/headers, provider headers, login params, "
                        "secret form answers, the header's) as sent (default: redacted)")
    p.add_argument("--connect", metavar="URL",
                   help="the agent is at this ws:// or http:// URL (WebSocket or Streamable "
                        "HTTP) instead of a command")
    p.add_argument("--listen", metavar="URL",
                   help="serve clients at this ws:// or http:// URL (127.0.0.1:0 picks a "
                        "port) instead of stdio; the agent is -- AGENT or --connect URL")
    p.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'",
                   help="send this header to the agent (--connect; repeatable); a last "
                        "word @FILE or $VAR is read from FILE or the environment, so a "
                        "secret stays off the command line")
    p.add_argument("--protocol", action="append", default=[], metavar="NAME",
                   help="a WebSocket subprotocol: offered to the agent (--connect from "
                        "stdio), or accepted from clients (--listen -- AGENT); repeatable")
    p.add_argument("--http2", action="store_true",
                   help="speak HTTP/2 to the --connect http(s):// agent (h2c with prior "
                        "knowledge for http://, ALPN h2 for https://); default HTTP/1.1, "
                        "or HTTP/2 to a server that speaks nothing else. An "
                        "http:// listener takes both, HTTP/2 as h2c with prior knowledge")
    p.add_argument("--grace", type=float, metavar="SECONDS",
                   help="how long a local agent that outlives the client's input (or a "
                        "child of it that holds its output) is waited for before SIGTERM to "
                        "its process group, and again before SIGKILL (default 5)")
    p.add_argument("--script", metavar="CLIENT.jsonl",
                   help="be the client: send the frames of this file (one a line) instead "
                        "of stdin, each once the agent has answered the previous one, as an "
                        "editor waits; for recordings that are the same in every run (with a "
                        "stdio agent, or one at --connect URL)")
    from acp_pipes.cli import listen

    listen.configure(p)  # --allow-origin, --allow-host, --token-file, --max-*, timeouts


#: The options acp-tee's parser takes, spelled out: what :func:`plain_command` knows.
_FLAGS = frozenset({"--no-host", "--keep-secrets"})
_VALUED = frozenset({"-o", "--output", "--clock", "--capture-env"})


def plain_command(argv: Sequence[str]) -> tuple[list[str], str] | None:
    """The agent command and clock when ``argv`` is plain enough to start the agent before
    parsing: only acp-tee's own options, spelled out in full, each value a separate word
    not starting with ``-``, a valid ``--clock``, then ``--`` and a command. Anything else
    (abbreviations, ``--opt=value``, ``--help``, a usage error) gives None and the usual
    order: parse, then start. Whatever this accepts, the parser accepts with the same
    command and clock, and :func:`_run` with the same ``-o`` (tests/test_tee.py holds
    that), so a usage error never starts an agent."""
    plain = plain_words(argv, _FLAGS, _VALUED)
    if plain is None or plain[1]:  # (acp-tee takes no operands)
        return None
    options, _, command = plain
    clock = "system"
    for option, value in options:
        if option == "--clock":
            clock = value
        elif option in ("-o", "--output") and ("{" in value or "}" in value):
            from acp_pipes.tee.logfile import check  # only for a template (~0.4 ms)

            try:
                check(value)
            except ValueError:
                return None
    try:
        make_clock(clock)
    except ValueError:
        return None
    return command, clock


def _run(args: argparse.Namespace, ctx: Context, early: Agent | None = None) -> int:
    from acp_pipes.cli.runner import UsageError
    from acp_pipes.tee.logfile import check
    from acp_pipes.tee.script import open_script

    agent = list(args.command)  # everything after the first '--' (the runner splits it)
    if args.listen is not None or args.connect is not None:
        return _run_remote(args, ctx, agent)
    from acp_pipes.cli import listen

    listen.options(args)  # a listener's option without --listen: a usage error
    if args.header or args.protocol or args.http2:
        raise UsageError("--header, --protocol and --http2 go with --connect or --listen")
    if not agent:
        raise UsageError("no agent command: acp-tee [OPTIONS] -- AGENT [ARGS ...]")
    make_clock(args.clock)  # an OptionError, before the agent starts
    _check_grace(args.grace)
    script = None if args.script is None else open_script(args.script)
    check(args.output)
    log_path, on_log = _log_target(args, ctx)
    return record(
        agent,
        log_path,
        clock=args.clock,
        host=not args.no_host,
        capture_env=args.capture_env,
        keep_secrets=args.keep_secrets,
        note=ctx.note,
        agent=early,
        script=script,
        on_log=on_log,
        grace=args.grace,
    )


def _check_grace(grace: float | None) -> None:
    from acp_pipes.errors import OptionError

    if grace is not None and not 0 <= grace < float("inf"):  # NaN too
        raise OptionError("--grace must be a number of seconds, 0 or more")


def _log_target(args: argparse.Namespace,
                ctx: Context) -> tuple[str, Callable[[str], None] | None]:
    """Where the log goes (``-o``, or the default name, said once it is chosen)."""
    from acp_pipes.tee.logfile import DEFAULT

    if args.output:
        return args.output, None

    def on_log(path: str) -> None:
        ctx.note(f"no -o given: recording to {path}")

    return DEFAULT, on_log


def _run_remote(args: argparse.Namespace, ctx: Context, agent: list[str]) -> int:
    """--listen and --connect: the remote sides (:mod:`acp_pipes.tee.remote`)."""
    from acp_pipes.cli.runner import UsageError
    from acp_pipes.tee.logfile import check

    if args.connect is not None and agent:
        raise UsageError("--connect URL is the agent: give it or -- AGENT, not both")
    if args.connect is None and not agent:
        raise UsageError("--listen needs an agent: --connect URL or -- AGENT [ARGS ...]")
    if args.script is not None and args.listen is not None:
        raise UsageError("--script is the client: it does not go with --listen (whose "
                         "clients connect to it)")
    from acp_pipes.tee import remote
    from acp_pipes.tee.headers import conflicting_credentials
    from acp_pipes.tee.options import Options, headers_from, parse_url

    make_clock(args.clock)  # each an OptionError for a value it does not take
    check(args.output)
    headers = headers_from(args.header)
    for url, listening in ((args.listen, True), (args.connect, False)):
        if url is not None:
            parse_url(url, listening=listening)
    if args.connect is not None and conflicting_credentials(args.connect, headers):
        raise UsageError("--connect URL carries user:password and --header an "
                         "Authorization: give the agent's credentials one way")
    from acp_pipes.cli import listen

    policy = listen.options(args)  # the listener's policy; a usage error without it
    if args.http2 and not (args.connect or "").startswith("http"):
        raise UsageError("--http2 is how acp-tee speaks to an agent at --connect "
                         "http(s)://URL (a listener takes HTTP/2 without it)")
    _check_grace(args.grace)
    if args.grace is not None and not agent:
        raise UsageError("--grace is how long a local agent (-- AGENT) is given to end; "
                         "an agent at --connect URL ends its own way")
    log_path, on_log = _log_target(args, ctx)
    script = None
    if args.script is not None:
        from acp_pipes.tee.script import open_script

        script = open_script(args.script)
    opts = Options(
        log_path=log_path, clock=args.clock, host=not args.no_host,
        env={name: os.environ.get(name) for name in args.capture_env},
        keep_secrets=args.keep_secrets, note=ctx.note, on_log=on_log, headers=headers,
        protocols=args.protocol, http2=args.http2, script=script, **policy,
        **({} if args.grace is None else {"grace": args.grace}))
    if args.listen is not None:
        return remote.listen(args.listen, opts, connect=args.connect, argv=agent)
    return remote.connect_stdio(args.connect, opts)


def make_tool(early: Agent | None = None) -> Tool:
    """acp-tee's declaration for the runner; ``early`` is an agent already started."""
    from acp_pipes.cli.manual import page
    from acp_pipes.cli.runner import Tool

    return Tool(
        prog="acp-tee",
        summary="Record an ACP session: a stdio proxy that forwards every byte untouched and "
                "logs every frame.",
        example="acp-tee -o session.jsonl -- acp-echo-agent < client.jsonl > agent.jsonl\n"
                "acp-frame session.jsonl | head\n"
                "acp-tee --script client.jsonl -o s.jsonl -- acp-echo-agent > /dev/null",
        run=lambda args, ctx: _run(args, ctx, early),
        configure=configure,
        description=DESCRIPTION + f"\n\nManual: {page('acp-tee.md')}\n"
                                  f"Listeners, and running one on a network: "
                                  f"{page('security.md')}",
        takes_files=False,
        takes_output=False,
        reads_lines=False,  # forwards the session's bytes whatever their size
        takes_color=False,  # stdout is the client's ACP stream
        takes_command=True,
        exits="the agent's (128+N if signal N killed it; 127 if AGENT was not found, 126 if it "
              "could not be run); --connect: 0 a clean close, 1 another, 126 unreachable; "
              "--listen: 0 once stopped by a signal; 2 usage error",
    )


def main() -> None:
    early = None
    plain = plain_command(sys.argv[1:])
    if plain is not None:
        try:
            early = start_agent(plain[0], clock=plain[1], forward_signals=True)
        except (OSError, ValueError):  # cannot be run: the usual path says so
            early = None
    from acp_pipes.cli.runner import exit_now, run

    def end(status: int) -> None:
        if early is not None:
            early.abandon()  # nothing once served; else the run ended before serving it
        exit_now(status)  # the log is closed and the agent reaped: no teardown to wait for

    run(make_tool(early), exit=end)


if __name__ == "__main__":
    main()

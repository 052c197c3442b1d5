"""The options of a listener, shared by acp-tee and acp-replay (``--listen``): who may
use it and how much of it (:mod:`acp_pipes.tee.policy`), declared once here as
acp-replay declares its options (dest -> flag, its value in usage lines, add_argument
keywords), and turned into the keywords of :class:`acp_pipes.tee.options.Options`."""

from __future__ import annotations

import argparse
import math
import os

from acp_pipes.cli.runner import UsageError, byte_count
from acp_pipes.tee.policy import TOKEN_ENV, Limits, read_token

_LIMITS = Limits()


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"a number of seconds above 0, not {text!r}")
    return value


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number, 1 or more, not {text!r}")
    return int(text)


#: dest -> (flag, its value in usage lines, add_argument keywords); unset is None.
OPTIONS: dict[str, tuple[str, str, dict]] = {
    "allow_origin": ("--allow-origin", "ORIGIN", dict(
        action="append",
        help="with --listen: also take requests from web pages of ORIGIN "
             "(SCHEME://HOST[:PORT], a port of * for any; *, with a token, every origin); "
             "by default only clients that send no Origin, or loopback pages on the "
             "listener's own port (repeatable)")),
    "allow_host": ("--allow-host", "NAME", dict(
        action="append",
        help="with --listen: also answer requests whose Host is NAME (any port; * for "
             "any Host); by default loopback names, the --listen host and the address "
             "a connection came in on (repeatable)")),
    "token_file": ("--token-file", "FILE", dict(
        help="with --listen: clients must send 'Authorization: Bearer TOKEN', TOKEN "
             f"being FILE's first line (else ${TOKEN_ENV}); required to listen beyond "
             "loopback")),
    "max_agents": ("--max-agents", "N", dict(
        type=_count,
        help=f"with --listen: at most N agents at once (default {_LIMITS.max_agents}); "
             "beyond, 503 with Retry-After and nothing started")),
    "max_message": ("--max-message", "BYTES", dict(
        type=byte_count,
        help="with --listen: refuse a client message (WebSocket message, HTTP body) over "
             f"BYTES (K, M, G; default {_LIMITS.max_message >> 20}M): WebSocket 1009, HTTP "
             "413, never read whole")),
    "header_timeout": ("--header-timeout", "SECONDS", dict(
        type=_seconds,
        help="with --listen: drop a connection that has not sent a whole request head "
             f"this long after it opened or its last answer (default "
             f"{_LIMITS.header_timeout:g})")),
    "idle_timeout": ("--idle-timeout", "SECONDS", dict(
        type=_seconds,
        help="with --listen: close a WebSocket that answers no ping, and end a Streamable "
             "HTTP connection with nothing in flight, after this long, with its agent "
             f"(default {_LIMITS.idle_timeout:g})")),
}


def configure(p: argparse.ArgumentParser) -> None:
    """Add the listener's options to a tool's parser."""
    for flag, value, kw in OPTIONS.values():
        p.add_argument(flag, metavar=value, **kw)


def given(args: argparse.Namespace) -> list[str]:
    """The listener options given, by flag."""
    return [flag for dest, (flag, _v, _kw) in OPTIONS.items()
            if getattr(args, dest, None) is not None]


def options(args: argparse.Namespace) -> dict:
    """The keywords of :class:`acp_pipes.tee.options.Options` for a listener: its
    policy's origins, hosts, token (``--token-file``, else the environment) and
    limits. UsageError for a listener option given without ``--listen``."""
    if getattr(args, "listen", None) is None:
        extra = given(args)
        if extra:
            raise UsageError(f"{extra[0]} goes with --listen")
        return {}
    limits = Limits(**{k: getattr(args, k) for k in ("max_agents", "max_message",
                                                      "header_timeout", "idle_timeout")
                       if getattr(args, k, None) is not None})
    token = read_token(args.token_file)
    # the agents behind the listener inherit its environment: an agent that runs
    # commands for a model could hand the listener's token on; read once, it goes
    os.environ.pop(TOKEN_ENV, None)
    return {"allow_origins": args.allow_origin or [], "allow_hosts": args.allow_host or [],
            "token": token, "limits": limits}


def strip(argv: list[str], long_options: list[str]) -> list[str]:
    """``argv`` without ``--listen`` and the listener's options (their values too,
    spaced or after ``=``, and the abbreviations argparse took for them:
    ``long_options`` are every long option of the tool): what each connection's
    process is given (acp-replay runs itself behind its listener).

    >>> strip(["--serve", "--lis", "ws://h:1/acp", "--max-a=3", "a.asr.jsonl"],
    ...       ["--serve", "--listen", "--max-agents", "--max-message"])
    ['--serve', 'a.asr.jsonl']
    """
    ours = {"--listen", *(flag for flag, _v, _kw in OPTIONS.values())}
    out, skip = [], False
    for i, word in enumerate(argv):
        if skip:
            skip = False
            continue
        if word == "--":
            out += argv[i:]
            break
        name, eq, _value = word.partition("=")
        if name.startswith("--"):
            meant = ([name] if name in long_options else
                     [o for o in long_options if o.startswith(name)])
            if len(meant) == 1 and meant[0] in ours:
                skip = not eq
                continue
        out.append(word)
    return out

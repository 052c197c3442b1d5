"""What a remote acp-tee run was asked for (:class:`Options`, made of the CLI's options),
the URLs it takes, the ``--header`` values it sends, and the log each of its connections
gets. Every remote side reads these (:mod:`acp_pipes.tee.remote`); they stand apart so
that none imports another to learn them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import BinaryIO
from urllib.parse import urlsplit

from acp_pipes.errors import Note, OptionError
from acp_pipes.io.wire import make_clock
from acp_pipes.tee.logfile import WireLog, open_sink
from acp_pipes.tee.policy import Limits
from acp_pipes.tee.pump import header_record

__all__ = ["GRACE", "Options", "UrlError", "headers_from", "open_log", "parse_url"]

#: Seconds of silence after which a session whose client input ended is closed anyway,
#: and a closing agent process is signalled (then killed as long again later).
GRACE = 5.0


class UrlError(OptionError):
    """A --listen or --connect URL acp-tee cannot use."""


def parse_url(url: str, *, listening: bool) -> tuple[str, str, int, str]:
    """``(scheme, host, port, path)`` of a ``ws://`` or ``http://`` URL (``wss``/``https``
    to connect only). A listener binds loopback or the host named; port 0 picks one."""
    parts = urlsplit(url)
    schemes = ("ws", "http") if listening else ("ws", "wss", "http", "https")
    if parts.scheme not in schemes:
        raise UrlError(f"{url!r}: expected a {' or '.join(s + '://' for s in schemes)} URL")
    if not parts.hostname:
        raise UrlError(f"{url!r}: no host")
    try:
        port = parts.port
    except ValueError as e:
        raise UrlError(f"{url!r}: {e}") from None
    if port is None:
        port = 443 if parts.scheme in ("wss", "https") else 80
    return parts.scheme, parts.hostname, port, parts.path or "/"


class Options:
    """What a remote acp-tee run was asked for (the CLI's options)."""

    def __init__(self, *, log_path: str | None, clock: str = "system", host: bool = True,
                 env: dict | None = None, keep_secrets: bool = False,
                 note: Note | None = None, on_log: Note | None = None,
                 headers: Sequence[tuple[str, str]] = (), protocols: Sequence[str] = (),
                 stderr_fd: int | None = None, on_listen: Note | None = None,
                 http2: bool = False, grace: float = GRACE,
                 script: BinaryIO | None = None,
                 allow_origins: Sequence[str] = (), allow_hosts: Sequence[str] = (),
                 token: bytes | None = None, limits: Limits | None = None):
        self.log_path = log_path
        self.clock = clock
        self.tick = make_clock(clock)
        self.host = host
        self.env = env or {}
        self.keep_secrets = keep_secrets
        self.note = note or (lambda m: print(f"acp-tee: {m}", file=sys.stderr))
        self.on_log = on_log
        self.headers = list(headers)
        self.protocols = list(protocols)
        self.stderr_fd = stderr_fd
        self.on_listen = on_listen
        self.http2 = http2  # --http2: HTTP/2 to an http(s):// agent
        self.grace = grace  # --grace: for a local agent behind a listener to end
        self.script = script  # --script: the client's frames, with --connect from stdio
        # a listener's policy (acp_pipes.tee.policy): who may use it, and how much
        self.allow_origins = list(allow_origins)  # --allow-origin
        self.allow_hosts = list(allow_hosts)  # --allow-host
        self.token = token  # --token-file, or ACP_LISTEN_TOKEN
        self.limits = limits or Limits()  # --max-agents, --max-message, the timeouts

    def log(self, argv: Sequence[str], nth: int, transport: dict) -> WireLog:
        log = open_log(self.log_path, argv or ["remote"], nth, self.note, self.tick,
                       not self.keep_secrets, self.on_log)
        log.write_header(header_record(log, argv, started_ns=self.tick(), clock=self.clock,
                                       host=self.host, env=self.env,
                                       keep_secrets=self.keep_secrets, transport=transport))
        return log


def open_log(spec: str | None, name: Sequence[str], nth: int, note: Note, tick,
             redact: bool, on_open: Note | None):
    """The log of a listener's ``nth`` connection (see the module's docstring)."""
    sink = None
    if spec is not None:
        try:
            sink = open_sink(spec, name, nth=nth)
        except OSError as e:
            note(f"cannot write the log {e.filename or spec}: {e.strerror or e}; "
                 "the session goes on unrecorded")
        else:
            if on_open is not None:
                on_open(sink.path)
    return WireLog(sink, tick, redact, note)


def headers_from(values: Sequence[str]) -> list[tuple[str, str]]:
    """``--header 'Name: value'`` options as pairs; OptionError for one without a colon.

    So that a secret never sits on the command line (where ``ps`` shows it to every
    user), the value's last word may name where it is: ``@FILE`` (the file's first
    line) or ``$VAR`` (an environment variable): ``--header 'Authorization: Bearer
    $AGENT_TOKEN'``, ``--header X-Api-Key:@key.txt``. OptionError for a file that
    cannot be read or a variable that is not set."""
    out = []
    for v in values:
        name, colon, value = v.partition(":")
        if not colon or not name.strip():
            raise OptionError(f"--header needs 'Name: value', got {v!r}")
        out.append((name.strip(), _header_value(name.strip(), value.strip())))
    return out


def _header_value(name: str, value: str) -> str:
    head, space, last = value.rpartition(" ")
    if last.startswith("@") and len(last) > 1:
        path = os.path.expanduser(last[1:])
        try:
            with open(path, "rb") as f:
                found = f.read(65536).decode("utf-8", "replace").split("\n", 1)[0].strip()
        except OSError as e:
            raise OptionError(f"--header {name}: cannot read {path}: {e.strerror or e}"
                              ) from None
    elif last.startswith("$") and len(last) > 1:
        found = os.environ.get(last[1:], "")
        if not found:
            raise OptionError(f"--header {name}: ${last[1:]} is not set")
    else:
        return value
    if "\r" in found or "\n" in found:
        raise OptionError(f"--header {name}: a header value is one line")
    return head + space + found

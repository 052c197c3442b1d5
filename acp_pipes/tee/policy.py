"""Who may use a listener, and how much of it: the checks every listener makes (acp-tee
``--listen``, and acp-replay ``--listen`` through it), over WebSocket, HTTP/1.1 and
HTTP/2 alike, before it reads a body, upgrades a WebSocket or starts an agent.

A listener hands out an agent that edits files and runs commands with the user's
rights (or, for acp-replay ``--serve``, every stored session), so the defaults are
those of a server that only the user's own editor should reach:

- **Host** (DNS rebinding: a foreign name that resolves to 127.0.0.1). A request's
  ``Host`` (HTTP/2: ``:authority``) must name a loopback address or ``localhost``, the
  host the listener was given, or the address the connection came in on; else 421. The
  MCP Python SDK (1.23 on) checks the same for servers on loopback, and answers 421.
- **Origin** (a web page the user visits: WebSocket has no CORS, and a form POST none
  either). A request without ``Origin`` passes (editors and SDK clients send none); one
  with ``Origin`` passes when it is a loopback origin on the listener's own port (a
  page the listener served, and it serves none) or one ``--allow-origin`` names; else
  403, as MCP's Streamable HTTP transport requires of servers. ``null`` is an origin
  like any other (a sandboxed or ``file://`` page), so it is refused.
- **Token.** With a token (``--token-file``, or :data:`TOKEN_ENV`), every request and
  every WebSocket upgrade must carry ``Authorization: Bearer TOKEN``, compared in
  constant time; else 401. The token is the listener's: it is not passed on to an agent
  behind a proxy, and it is never logged (not even with ``--keep-secrets``). A listener
  bound beyond loopback without a token does not start: :func:`check_bind`.
- **Agents.** At most ``max_agents`` agents at once (a process each, or an upstream
  connection for a proxy): beyond, 503 with ``Retry-After`` and nothing started.
- **Size.** A message (a WebSocket message, an HTTP body) over ``max_message`` bytes is
  refused as soon as its size is known (WebSocket 1009, HTTP 413), never read whole.
- **Time.** A connection must send a complete request head within ``header_timeout``
  seconds of its start, or of its last answer while nothing else is in flight (so also
  an idle keep-alive connection); a WebSocket that answers no ping for
  ``idle_timeout`` seconds (pings go after that long without a frame), and a
  Streamable HTTP connection with no request and no stream open that long, are closed
  and their agents ended.

Each refusal is one line on stderr (:meth:`Policy.say`, which holds back a flood: at
most :data:`LINES_PER_SECOND` a second, the rest counted), never a traceback, and never
a log file: a session's log is made for a request that passed.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from acp_pipes.errors import Note, OptionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ipaddress

# asyncio, hmac, ipaddress, socket and urllib are imported where they are used: acp-tee's
# parser takes the defaults above on its stdio path too, which need none of them

__all__ = ["TOKEN_ENV", "Limits", "Policy", "Refusal", "check_bind", "is_loopback",
           "read_token"]

#: The environment variable a listener's token may come from (``--token-file`` wins).
TOKEN_ENV = "ACP_LISTEN_TOKEN"
#: The shortest token a listener takes: a guessable one would be no lock at all.
MIN_TOKEN = 16
#: RFC 6750's b64token: what a bearer token may hold, so that it crosses a header as is.
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                         "0123456789-._~+/=")
#: How a client's ``Authorization`` carrying the listener's token is logged.
TOKEN_LOGGED = "Bearer <the listener's token>"
#: At most this many refusal lines a second; the rest are counted, said once a second.
LINES_PER_SECOND = 10
#: What a 503 tells a client to wait before trying again, in seconds.
RETRY_AFTER = 5


@dataclass
class Limits:
    """How much one listener takes (the CLI's options; defaults in the manual)."""

    max_agents: int = 32
    max_message: int = 32 << 20  # a prompt with a few inlined base64 screenshots fits
    header_timeout: float = 10.0
    idle_timeout: float = 300.0


@dataclass
class Refusal:
    """A request turned away: the status and body it gets, and why, for the line."""

    status: int
    text: str
    why: str
    headers: list[tuple[str, str]] = field(default_factory=list)


class TooLarge(Exception):
    """A request's body is over the listener's ``max_message``: ``size`` when its
    Content-Length said so, None when it was found out while reading (by either HTTP
    version's reader: the answer, 413, is :meth:`Policy.too_large`'s)."""

    def __init__(self, size: int | None):
        super().__init__(size)
        self.size = size


def read_token(path: str | None) -> bytes | None:
    """The listener's token: the first line of ``path``, else :data:`TOKEN_ENV`, else
    None. OptionError for a file that cannot be read, or a token too short to be a lock
    or with characters a bearer token cannot carry."""
    if path is not None:
        try:
            with open(path, "rb") as f:
                text = f.read(4096).decode("utf-8", "replace")
        except OSError as e:
            raise OptionError(f"--token-file {path}: cannot read: {e.strerror or e}") from None
        where = f"--token-file {path}"
    else:
        text = os.environ.get(TOKEN_ENV, "")
        if not text:
            return None
        where = TOKEN_ENV
    token = text.strip().split("\n", 1)[0].strip()
    if len(token) < MIN_TOKEN or not _TOKEN_CHARS.issuperset(token):
        raise OptionError(f"{where}: a token needs {MIN_TOKEN} or more characters of "
                          "A-Z a-z 0-9 - . _ ~ + / = (make one with: openssl rand -hex 32)")
    return token.encode("ascii")


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    import ipaddress

    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    """Whether a host (a name or an address) means this machine's loopback only:
    ``localhost``, 127.0.0.0/8, ``::1``; a name that resolves to loopback addresses
    only (an unresolvable one is not)."""
    name = host.lower().rstrip(".")
    if name == "localhost":
        return True
    ip = _literal(name)
    if ip is not None:
        return ip.is_loopback
    import socket

    try:
        found = socket.getaddrinfo(name, None)
    except OSError:
        return False
    return bool(found) and all(_literal(str(a[4][0])) is not None
                               and _literal(str(a[4][0])).is_loopback  # type: ignore[union-attr]
                               for a in found)


def check_bind(url: str, host: str, token: bytes | None) -> None:
    """A listener on ``host`` beyond loopback (``0.0.0.0``, a LAN address) lets anyone
    on the network start agents: without a token it does not start (OptionError)."""
    if token is None and not is_loopback(host):
        raise OptionError(
            f"--listen {url} binds beyond loopback, where anyone on the network could "
            f"start an agent: give a token (--token-file FILE, or {TOKEN_ENV}), or "
            "listen on 127.0.0.1")


def _hostname(hostport: str) -> str:
    """The name or address of a ``Host`` value (no port, brackets or trailing dot),
    lower case; "" when it has none."""
    hostport = hostport.strip()
    if hostport.startswith("["):
        name = hostport[1:hostport.find("]")] if "]" in hostport else ""
    else:
        name = hostport.rsplit(":", 1)[0] if hostport.count(":") == 1 else hostport
    return name.lower().rstrip(".")


def _origin(value: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an Origin, lower case, the default port filled in;
    None for one that is no URL (``null``)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    default = {"http": 80, "ws": 80, "https": 443, "wss": 443}.get(scheme, -1)
    return scheme, parts.hostname.lower().rstrip("."), port if port is not None else default


class Policy:
    """One listener's rules (see the module's docstring): ``host`` is the one it was
    given (``--listen``), ``port`` the one it got (:meth:`bound`)."""

    def __init__(self, host: str, *, allow_origins: list[str] | tuple[str, ...] = (),
                 allow_hosts: list[str] | tuple[str, ...] = (), token: bytes | None = None,
                 limits: Limits | None = None, note: Note | None = None):
        self.host = _hostname(host) or host.lower()
        self.port = 0
        self.token = token
        self.limits = limits or Limits()
        self.note = note or (lambda m: None)
        self.any_origin = "*" in allow_origins
        self.origins: list[tuple[str, str, int | None]] = []
        for o in allow_origins:
            if o == "*":
                continue
            wild = o.endswith(":*")
            parsed = _origin(o[:-2] if wild else o)
            if parsed is None or o[:-2 if wild else None].rstrip("/").count("/") > 2:
                raise OptionError(f"--allow-origin {o!r}: an origin is SCHEME://HOST[:PORT] "
                                  "(a port of * for any), or *")
            self.origins.append((parsed[0], parsed[1], None if wild else parsed[2]))
        if self.any_origin and token is None:
            raise OptionError("--allow-origin * lets every web page the user visits drive "
                              "the agent: it goes with a token only (--token-file FILE, "
                              f"or {TOKEN_ENV})")
        self.any_host = "*" in allow_hosts
        self.hosts = {_hostname(h) for h in allow_hosts if h != "*"}
        self.agents = 0  # agents running (a process, or a proxy's upstream connection)
        self._hosts_seen: dict[tuple[str, str | None], bool] = {}  # judged, every request
        self._said = 0.0  # the second the last refusal lines were counted in
        self._lines = 0
        self._held = 0  # lines not said this second

    def bound(self, port: int) -> None:
        self.port = port

    # -- the checks

    def check(self, host: str | None, origin: str | None, authorizations: list[str],
              local: str | None = None, preflight: bool = False) -> Refusal | None:
        """None when a request may go on; else how it is refused. ``host`` is its
        ``Host`` (``:authority``), ``origin`` its ``Origin``, ``authorizations`` its
        ``Authorization`` values, ``local`` the address it came in on; ``preflight``:
        a browser's CORS preflight, which carries no credentials (it asks, and starts
        nothing), so it needs no token."""
        if not self._host_ok(host, local):
            return Refusal(421, "this listener does not answer to that Host\n",
                           f"Host {host!r} is not this listener's (--allow-host NAME)"
                           if host else "no Host header")
        if origin is not None and not self.origin_ok(origin):
            return Refusal(403, "requests from this web origin are refused\n",
                           f"Origin {origin!r} is not allowed (--allow-origin ORIGIN)")
        if self.token is not None and not preflight and not self.token_ok(authorizations):
            why = "a wrong bearer token" if authorizations else "no bearer token"
            return Refusal(401, "this listener needs Authorization: Bearer TOKEN\n", why,
                           [("WWW-Authenticate", 'Bearer realm="acp"')])
        return None

    def _host_ok(self, host: str | None, local: str | None) -> bool:
        if not host:
            return False
        if self.any_host:
            return True
        key = (host, local)
        known = self._hosts_seen.get(key)
        if known is None:
            known = self._hosts_seen[key] = self._judge_host(host, local)
            if len(self._hosts_seen) > 256:  # (any Host may come: keep a few)
                self._hosts_seen.clear()
        return known

    def _judge_host(self, host: str, local: str | None) -> bool:
        name = _hostname(host)
        if name == "localhost" or name in self.hosts or name == self.host:
            return True
        ip = _literal(name)
        return ip is not None and (ip.is_loopback or (
            local is not None and ip == _literal(local)))

    def origin_ok(self, origin: str) -> bool:
        if self.any_origin:
            return True
        parsed = _origin(origin)
        if parsed is None:
            return False
        scheme, name, port = parsed
        if scheme == "http" and port == self.port and (
                name == "localhost" or ((ip := _literal(name)) is not None and ip.is_loopback)):
            return True
        return any(scheme == s and name == h and (p is None or p == port)
                   for s, h, p in self.origins)

    def token_ok(self, authorizations: list[str]) -> bool:
        """Exactly one ``Authorization: Bearer TOKEN`` with the listener's token,
        compared in constant time."""
        if self.token is None:
            return True
        if len(authorizations) != 1:
            return False
        scheme, _sp, given = authorizations[0].strip().partition(" ")
        if scheme.lower() != "bearer":
            return False
        import hmac

        return hmac.compare_digest(given.strip().encode("utf-8", "replace"), self.token)

    # -- what a browser page on an allowed origin is told (CORS)

    def cors(self, origin: str | None) -> list[tuple[str, str]]:
        """The headers of an answer to a page of ``origin`` (allowed, or it would have
        been refused): it may read the answer and the connection's ids."""
        if origin is None:
            return []
        return [("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
                ("Access-Control-Expose-Headers", "Acp-Connection-Id, Acp-Session-Id")]

    def preflight(self, origin: str, asked: str | None) -> list[tuple[str, str]]:
        """The headers of the answer (204) to a CORS preflight from an allowed origin:
        the methods of Streamable HTTP and the headers the page asked to send."""
        return [*self.cors(origin)[:2],
                ("Access-Control-Allow-Methods", "GET, POST, DELETE"),
                ("Access-Control-Allow-Headers", (asked or "")[:1000]),
                ("Access-Control-Max-Age", "600")]

    # -- agents

    def take_agent(self) -> Refusal | None:
        """A place for one more agent (give it back with :meth:`agent_ended`), or the
        503 that says there is none."""
        if self.agents >= self.limits.max_agents:
            return Refusal(503, "too many agents running; try again later\n",
                           f"{self.agents} agents run already (--max-agents "
                           f"{self.limits.max_agents})",
                           [("Retry-After", str(RETRY_AFTER))])
        self.agents += 1
        return None

    def agent_ended(self) -> None:
        self.agents = max(0, self.agents - 1)

    def too_large(self) -> Refusal:
        """The 413 for a body over the cap (:class:`TooLarge`: its Content-Length said
        so, or reading it found it out)."""
        return Refusal(413, "the message is larger than this listener takes\n",
                       f"a body of more than {self.limits.max_message} bytes "
                       "(--max-message)")

    # -- what is said

    def say(self, line: str) -> None:
        """One line on stderr, unless this second has had :data:`LINES_PER_SECOND`
        already: then it is counted, and the count said with the next second's first
        line (or a second later, when no other comes)."""
        now = int(time.monotonic())
        if now != self._said:
            self._flush()
            self._said = now
        if self._lines < LINES_PER_SECOND:
            self._lines += 1
            self.note(line)
            return
        if not self._held:
            import asyncio

            try:
                asyncio.get_running_loop().call_later(1.0, self._flush)
            except RuntimeError:
                pass
        self._held += 1

    def flush(self) -> None:
        """Say how many lines were held back, if any (at the listener's end too)."""
        self._flush()

    def _flush(self) -> None:
        if self._held:
            held, self._held = self._held, 0
            self.note(f"... and {held} more refused or dropped connections in a second "
                      "(not said one by one)")
        self._lines = 0
        self._said = int(time.monotonic())

    def refused(self, peer: str, what: str, refusal: Refusal) -> None:
        self.say(f"refused {what} from {peer}: {refusal.why}: {refusal.status}")

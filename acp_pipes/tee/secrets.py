"""Credentials in what acp-tee itself writes to a log, beside the frames: the header's
agent command line, the URLs of the remote sides, captured environment variables, and
the HTTP and WebSocket headers of the event records.

Names decide, never values: a value is logged as a redaction token (the recording's
HMAC, :meth:`acp_pipes.tee.logfile.WireLog.token`) when the name it is given under says it is
a credential, so nothing that only looks like a key (a hash, a UUID) is hidden and a
key given under an innocent name is not found. Imports nothing heavy: the stdio path
writes its header with it.

- Header names (:func:`is_secret`): any name holding ``key``, ``token``, ``auth``,
  ``secret``, ``session``, ``passw``, ``cookie``, ``signature``, ``credential`` or
  ``bearer``, in any case (``Authorization``, ``Ocp-Apim-Subscription-Key``,
  ``X-Auth``, ``X-Session``, ``X-Custom-Bearer``), but for the transport's own
  identifiers, ``Acp-Connection-Id`` and ``Acp-Session-Id`` (the session id is in
  every frame anyway, and the log's stream names are made of them).
- Option, variable and query parameter names (:func:`secret_name`): the same, and a
  name with the word ``pass``, ``pwd``, ``sig`` or ``code`` (OAuth's authorization
  code); ``tokens`` (``--max-tokens``: a count) and ``tokenizer`` are not ``token``.
- ``Sec-WebSocket-Protocol`` (:func:`logged_protocols`): browsers cannot set
  ``Authorization`` on a WebSocket, so a bearer token rides in a subprotocol
  (Kubernetes: ``base64url.bearer.authorization.k8s.io.TOKEN``; others offer
  ``bearer, TOKEN``): what follows a credential word in an offered protocol, or the
  protocol after one that is only that word, is a token.
- A URL's user information: the password, or the user alone when there is none
  (``https://TOKEN@host``, as Git hosts take a token).
"""

from __future__ import annotations

from functools import lru_cache

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    Token = Callable[[str], str]

__all__ = ["is_secret", "logged_argv", "logged_env", "logged_header", "logged_protocols",
           "logged_url", "secret_name"]

#: What, held anywhere in a header's name (lower case), makes its value a credential.
_SECRET_PARTS = ("key", "token", "auth", "secret", "session", "passw", "cookie",
                 "signature", "credential", "bearer")
#: The transport's own identifiers: their names hold a part above, their values are none.
_NOT_SECRET = frozenset({"acp-connection-id", "acp-session-id"})
#: Words that make an option, variable or query parameter name a credential's.
_SECRET_WORDS = frozenset({"pass", "pwd", "sig", "code"})
#: What makes a WebSocket subprotocol carry (or announce) a bearer token.
_PROTOCOL_PARTS = ("bearer", "token", "auth", "key", "secret", "passw", "credential")


def _words(low: str) -> list[str]:
    return "".join(c if c.isalnum() else " " for c in low).split()


def _env_name(name: str) -> bool:
    """A shell variable's name: letters, digits, underscores, not a digit first."""
    return (name.isascii() and name.replace("_", "a").isalnum()
            and not name[0].isdigit())


def _header_name(name: str) -> bool:
    return name.isascii() and name.replace("-", "a").isalnum()


@lru_cache(maxsize=1024)
def is_secret(name: str) -> bool:
    """A header name whose value is a credential (a listener asks it of every header of
    every request: the few names a session uses are remembered)."""
    low = name.lower()
    if low in _NOT_SECRET:
        return False
    low = low.replace("tokens", "").replace("tokeniz", "")
    return any(p in low for p in _SECRET_PARTS)


def secret_name(name: str) -> bool:
    """An option, environment variable or query parameter name whose value is a
    credential (see the module's docstring)."""
    return is_secret(name) or any(w in _SECRET_WORDS for w in _words(name.lower()))


def logged_protocols(offered: Sequence[str], token: Token) -> list[str]:
    """WebSocket subprotocols as a log keeps them: a bearer token among them (see the
    module's docstring) as a token, every other protocol as given."""
    out: list[str] = []
    hide_next = False
    for item in offered:
        if hide_next:
            out.append(token(item))
            hide_next = False
            continue
        segments = item.split(".")
        marked = [i for i, seg in enumerate(segments)
                  if any(p in seg.lower() for p in _PROTOCOL_PARTS)]
        if not marked:
            out.append(item)
        elif marked[-1] == len(segments) - 1:
            out.append(item)  # it ends with the word: the token is the next protocol
            hide_next = True
        else:
            keep = marked[-1] + 1
            out.append(".".join(segments[:keep]) + "." + token(".".join(segments[keep:])))
    return out


def logged_header(name: str, value: str, token: Token) -> str:
    """A header's value as a log keeps it: a credential's as a token, the subprotocols
    offered with any bearer token among them as a token."""
    if is_secret(name):
        return token(value)
    if name.lower() == "sec-websocket-protocol":
        return ", ".join(logged_protocols([p.strip() for p in value.split(",")], token))
    return value


def logged_url(url: str, token: Token) -> str:
    """``url`` with its user information's secret and the values of credential-named
    query parameters as tokens; every other byte as given."""
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme or "/" in scheme:
        return url
    cut = len(rest)
    for stop in "/?#":
        at = rest.find(stop)
        if 0 <= at < cut:
            cut = at
    netloc, tail = rest[:cut], rest[cut:]
    userinfo, has_user, hostport = netloc.rpartition("@")
    path, q, query = tail.partition("?")
    if not has_user and not q:
        return url
    from urllib.parse import unquote, unquote_plus

    if has_user:
        user, colon, password = userinfo.partition(":")
        userinfo = user + ":" + token(unquote(password)) if colon else token(unquote(user))
        netloc = userinfo + "@" + hostport
    if q:
        query, hash_, fragment = query.partition("#")
        parts = []
        for part in query.split("&"):
            name, eq, value = part.partition("=")
            if eq and secret_name(unquote_plus(name)):
                part = name + "=" + token(unquote_plus(value))
            parts.append(part)
        tail = path + "?" + "&".join(parts) + hash_ + fragment
    return scheme + "://" + netloc + tail


def _value(name: str, value: str, token: Token) -> str:
    return token(value) if secret_name(name) else logged_url(value, token)


def logged_argv(argv: Sequence[str], token: Token) -> list[str]:
    """The agent's command line as the log's header keeps it: the value of an option
    whose name is a credential's (``--api-key VALUE``, ``--api-key=VALUE``), of a
    variable assignment (``OPENAI_API_KEY=VALUE``, as ``env`` takes it), of a header
    (``Authorization: Bearer VALUE``), and the secrets of every URL, as tokens."""
    out: list[str] = []
    hide_next = False
    for i, arg in enumerate(argv):
        if hide_next:
            hide_next = False
            out.append(token(arg))
            continue
        if i == 0:  # the program
            out.append(arg)
            continue
        if arg.startswith("-") and len(arg) > 1 and arg != "--":
            name, eq, value = arg.partition("=")
            if eq:
                out.append(name + "=" + _value(name.lstrip("-"), value, token))
                continue
            hide_next = (secret_name(arg.lstrip("-")) and i + 1 < len(argv)
                         and not argv[i + 1].startswith("-"))
            out.append(arg)
            continue
        name, eq, value = arg.partition("=")
        if eq and name and _env_name(name):
            out.append(name + "=" + _value(name, value, token))
            continue
        name, colon, value = arg.partition(":")
        value = value.lstrip(" \t")
        if colon and value and name and _header_name(name) and is_secret(name):
            out.append(name + ": " + token(value))
            continue
        out.append(logged_url(arg, token))
    return out


def logged_env(env: dict[str, str | None], token: Token) -> dict[str, str | None]:
    """``--capture-env`` variables as the header keeps them: a credential-named one's
    value as a token (an unset one stays null: "asked for, not set")."""
    return {k: token(v) if v is not None and secret_name(k) else v for k, v in env.items()}

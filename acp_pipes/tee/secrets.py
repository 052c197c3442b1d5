"""Credentials in what acp-tee itself writes to a log, beside the frames: the header's
agent command line, the URLs of the remote sides, captured environment variables, and
the HTTP and WebSocket headers of the event records.

Names decide, never values: a value is logged as a redaction token (the recording's
HMAC, :meth:`acp_pipes.tee.pump._Log.token`) when the name it is given under says it is
a credential, so nothing that only looks like a key (a hash, a UUID) is hidden and a
key given under an innocent name is not found. Imports nothing heavy: the stdio path
writes its header with it.

- Header names (:func:`is_secret`): ``Authorization``, ``Proxy-Authorization``,
  cookies, ``X-Api-Key``, and any name holding ``token``, ``secret``, ``api-key``,
  ``apikey`` or ``password``.
- Option, variable and query parameter names (:func:`secret_name`): the same, and a
  name with the word ``key``, ``passwd``, ``pwd``, ``sig``, ``signature`` or
  ``credential(s)``; ``tokens`` (``--max-tokens``: a count) and ``tokenizer`` are not
  ``token``.
- A URL's user information: the password, or the user alone when there is none
  (``https://TOKEN@host``, as Git hosts take a token).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    Token = Callable[[str], str]

__all__ = ["is_secret", "logged_argv", "logged_env", "logged_url", "secret_name"]

#: Header (and query parameter) names whose values are credentials, logged as tokens.
_SECRET_NAMES = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie",
                           "x-api-key", "api-key", "apikey", "x-auth-token"})
_SECRET_PARTS = ("token", "secret", "api-key", "api_key", "apikey", "password")
#: Words that make an option, variable or query parameter name a credential's.
_SECRET_WORDS = frozenset({"key", "passwd", "pwd", "sig", "signature", "credential",
                           "credentials"})


def _words(low: str) -> list[str]:
    return "".join(c if c.isalnum() else " " for c in low).split()


def _env_name(name: str) -> bool:
    """A shell variable's name: letters, digits, underscores, not a digit first."""
    return (name.isascii() and name.replace("_", "a").isalnum()
            and not name[0].isdigit())


def _header_name(name: str) -> bool:
    return name.isascii() and name.replace("-", "a").isalnum()


def is_secret(name: str) -> bool:
    """A header name whose value is a credential."""
    low = name.lower()
    return low in _SECRET_NAMES or any(p in low for p in _SECRET_PARTS)


def secret_name(name: str) -> bool:
    """An option, environment variable or query parameter name whose value is a
    credential (see the module's docstring)."""
    low = name.lower().replace("tokens", "").replace("tokeniz", "")
    return is_secret(low) or any(w in _SECRET_WORDS for w in _words(low))


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

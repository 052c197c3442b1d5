"""What passes between the sides beside frames, as the log keeps it and as a proxy passes
it on: headers (credentials as tokens; hop-by-hop ones and the handshake's own never
passed on), URLs, WebSocket subprotocols; and why a request to the agent failed. The
WebSocket and the Streamable HTTP sides say these the same way.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from acp_pipes.tee.secrets import logged_header
from acp_pipes.tee.secrets import logged_protocols as _logged_protocols
from acp_pipes.tee.secrets import logged_url as _logged_url

TYPE_CHECKING = False
if TYPE_CHECKING:
    from multidict import CIMultiDict

    from acp_pipes.tee.logfile import WireLog

#: Request and response headers never passed on: hop-by-hop, or the handshake's own.
_HOP = frozenset({
    "host", "connection", "keep-alive", "proxy-connection", "te", "trailer",
    "transfer-encoding", "upgrade", "content-length", "content-encoding",
    "sec-websocket-key", "sec-websocket-version", "sec-websocket-accept",
    "sec-websocket-extensions", "sec-websocket-protocol", "accept-encoding", "date",
    "server",
})


def logged_headers(headers, log: WireLog) -> list[list[str]]:
    """Headers as the log keeps them: ``[name, value]`` pairs in order, credentials as
    tokens (unless secrets are kept: :func:`acp_pipes.tee.secrets.logged_header`)."""
    if not log.redact:
        return [[k, v] for k, v in headers.items()]
    return [[k, logged_header(k, v, log.token)] for k, v in headers.items()]


def logged_url(url: str, log: WireLog) -> str:
    """``url`` with its user's password (or a user alone) and the values of
    credential-named query parameters as tokens (unless secrets are kept)."""
    return _logged_url(url, log.token) if log.redact else url


def passed_headers(headers) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers.items() if k.lower() not in _HOP]


def logged_protocols(offered: list[str], log: WireLog) -> list[str]:
    """The subprotocols a client offered as the log keeps them: a bearer token carried
    there (as browsers must, and Kubernetes does) as a redaction token."""
    if not log.redact:
        return offered
    return _logged_protocols(offered, log.token)


#: Why a request to an agent whose URL carries ``user:password`` was not sent: the
#: client's ``Authorization`` would be a second set of credentials (aiohttp refuses to
#: send both, and the agent could not tell which is meant).
CREDENTIALS_CLASH = ("the --connect URL's user:password and the client's Authorization "
                     "header cannot both be sent")


def conflicting_credentials(url: str, headers) -> bool:
    """Whether ``url`` carries user information and ``headers`` an Authorization."""
    return urlsplit(url).username is not None and any(
        k.lower() == "authorization" for k, _v in headers)



def header_dict(pairs) -> CIMultiDict[str]:
    """``(name, value)`` pairs as aiohttp's headers are (names in any case), to log."""
    from multidict import CIMultiDict

    return CIMultiDict(pairs)


def failure_reason(e: BaseException) -> str:
    """Why a request to the agent failed, in the words of the error under aiohttp's."""
    inner = getattr(e, "os_error", None) or e.__cause__ or e
    return getattr(inner, "strerror", None) or str(inner) or type(inner).__name__

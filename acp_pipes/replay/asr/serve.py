"""``acp-replay --serve``: an ACP agent on stdio that serves stored sessions read-only, to
a client of either protocol version.

An editor starts ``acp-replay --serve a.asr.jsonl b.asr.jsonl`` where it would start an
agent. ``initialize`` answers the version the client asks for: 1 (every editor in use
today) or 2; any stored stream, whichever version it was recorded from, is served to
either.

- ACP v2: ``session/list`` (ID, cwd, title) and ``session/resume``; with ``replayFrom:
  {"type": "start"}`` the history arrives as whole-entity upserts
  (:class:`acp_pipes.replay.asr.updates.Replay`), then the current ``state_update``, then the
  response, which the v2 schema asks for ("the agent MUST send a current state_update
  after any requested history replay and before this response"). Without
  ``replayFrom`` only the state_update comes before the response.
- ACP v1: ``loadSession: true`` and ``session/list``; ``session/load`` sends the history
  as v1 updates (:class:`acp_pipes.replay.asr.v1.V1Replay`) before its response;
  ``session/resume`` answers without history, as v1 defines it.

Nothing is ever executed (ASR-726): ``session/prompt`` (and ``session/new``,
``session/fork``, ``session/set_mode``, ...) get a JSON-RPC error saying the session is a
read-only recording. Unknown methods get -32601, unknown notifications are ignored, as
ACP asks. A request id is answered exactly as sent, byte for byte: its token is copied
from the request line (an integer of any size, ``1e-400``, ``1.50``, a string with a lone
surrogate all come back as written); an id that JSON-RPC does not allow (an object, an
array, a boolean) gets -32600 with a null id.

Hostile lines are answered, never fatal: ``NaN``/``Infinity`` (not JSON) and bytes that
are not JSON get -32700; a request nested deeper than the parser reads gets -32600 with
its own id (a notification or response that deep is ignored); a line that is only a
deep array, -32600 with a null id.

The server is a pure function over lines: :func:`serve_lines` maps client lines to agent
frames, so tests and the CLI share it; ``report`` gets the loss report of each replay.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterable, Iterator
from decimal import Decimal
from typing import Any, BinaryIO, ClassVar

import orjson

from acp_pipes import __version__
from acp_pipes.asr.reader import AsrStream
from acp_pipes.errors import Warn
from acp_pipes.protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RESOURCE_NOT_FOUND,
    element_spans,
    id_span,
    top_level_members,
)
from acp_pipes.protocol.jsonrpc import error as _error
from acp_pipes.protocol.jsonrpc import response as _response
from acp_pipes.replay.asr.updates import Replay
from acp_pipes.replay.asr.v1 import V1Replay, config_options

__all__ = ["READ_ONLY", "Server", "serve", "serve_lines"]

PROTOCOL_VERSION = 2  # when the client does not ask for 1, or does not initialize
READ_ONLY = INTERNAL_ERROR  # JSON-RPC's implementation-defined error, with data.readOnly
NOT_FOUND = RESOURCE_NOT_FOUND
#: Unknown cwd (a stream whose roots are empty or redacted): session/list needs one.
UNKNOWN_CWD = "/"
#: The methods a client of each version may call (others: -32601).
_KNOWN = {
    2: frozenset({"initialize", "session/list", "session/resume", "session/close",
                  "session/prompt", "session/new", "session/fork", "session/cancel",
                  "session/set_config_option", "session/delete"}),
    1: frozenset({"initialize", "session/list", "session/load", "session/resume",
                  "session/close", "session/prompt", "session/new", "session/cancel",
                  "session/set_mode", "session/set_config_option", "session/delete"}),
}
#: Refused without looking at a session: they would make one.
_MAKERS = frozenset({"session/new", "session/fork", "session/delete"})
_INFO = {"name": "acp-replay", "title": "acp-replay (read-only recorded sessions)",
         "version": __version__}


class _TooDeep(Exception):
    """Valid-looking JSON nested deeper than the parser reads."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _big_int(text: str) -> Any:
    """An integer literal as a number: past the interpreter's digit limit (4300) an exact
    Decimal instead of the ValueError ``int()`` raises. Only its kind matters here: the
    id is echoed from its own bytes."""
    try:
        return int(text)
    except ValueError:
        return Decimal(text)


def _parse(line: bytes) -> Any:
    """A client line as JSON: orjson, unless it refuses JSON it cannot hold (a lone
    surrogate, ``1e400``, nesting beyond 1024), then the standard library's parser, kept
    to JSON (no ``NaN``/``Infinity``). ValueError if not JSON, _TooDeep if too deep."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        pass
    text = line.decode("utf-8")  # a UnicodeDecodeError is a ValueError
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_int=_big_int)
    except RecursionError:
        raise _TooDeep from None


def _top_level(line: bytes) -> dict[str, Any] | None:
    """:func:`acp_pipes.protocol.jsonrpc.top_level_members` of a line too deep to parse."""
    return top_level_members(line, _parse, (ValueError, _TooDeep))


def _id_token(line: bytes, rid: Any) -> Any:
    """The request's id as sent: its token from the line (an ``orjson.Fragment``, so
    ``1e-400`` is not re-read as ``0.0``), or _INVALID when JSON-RPC does not allow it
    (an object, an array, a boolean)."""
    span = id_span(line)
    if span is None:  # not found by the scanner: the parsed value, written back
        return rid if _valid_id(rid) else _INVALID
    token = line[span[0] : span[1]]
    return orjson.Fragment(token) if token[:1] in _ID_STARTS else _INVALID


_ID_STARTS = (b'"', b"-", b"0", b"1", b"2", b"3", b"4", b"5", b"6", b"7", b"8", b"9", b"n")
_INVALID = object()


def _valid_id(rid: Any) -> bool:
    """JSON-RPC 2.0: a string, a number or null."""
    t = type(rid)
    return t is str or t is int or t is float or t is Decimal or rid is None


class Server:
    """Stored sessions by ID; :meth:`feed` answers one client line."""

    def __init__(self, streams: Iterable[AsrStream], *,
                 report: Callable[[dict[str, Any]], None] | None = None, warn: Warn | None = None):
        self.sessions: dict[str, AsrStream] = {}
        for s in streams:
            seen = self.sessions.get(s.session_id)
            if seen is not None and warn is not None:
                warn(s.source, s.line, f"session {s.session_id!r} is also the stream at "
                     f"{seen.source}:{seen.line}; this later one is served under that id")
            self.sessions[s.session_id] = s  # a later stream of the same session wins
        self.report = report
        self.protocol = PROTOCOL_VERSION
        self.compaction = False  # a v1 client that declared session.compaction

    def _cwd(self, s: AsrStream) -> tuple[str, list[str]]:
        roots = (s.header.get("workspace") or {}).get("roots") or []
        paths = [r.get("path") for r in roots if isinstance(r, dict)]
        cwd = paths[0] if paths and isinstance(paths[0], str) else UNKNOWN_CWD
        return cwd, [p for p in paths[1:] if isinstance(p, str)]

    def _title(self, s: AsrStream) -> Any:
        title = None
        for rec in s.records:
            if rec.get("type") == "session_info":
                title = rec.get("title")
        return title

    def feed(self, line: bytes) -> Iterator[bytes]:
        if not line.strip():
            return
        req = yield from self._request(line)
        if req is None:
            return
        rid, method, params = req
        if method not in _KNOWN[self.protocol]:
            yield _error(rid, METHOD_NOT_FOUND, f"Method not found: {method}")
            return
        answer = self._ANSWERS.get(method)
        if answer is not None:
            yield from answer(self, rid, params)
        elif method in _MAKERS:
            yield _error(rid, READ_ONLY, "acp-replay serves recorded sessions read-only: "
                         f"{method} is not available", {"readOnly": True})
        else:
            yield from self._session_request(rid, method, params)

    def _request(self, line: bytes
                 ) -> Generator[bytes, None, tuple[Any, str, dict[str, Any]] | None]:
        """A line as a request to answer: (its id's token, its method, its params); or
        None, the error said (or nothing, for a response or a notification)."""
        deep = False
        try:
            msg = _parse(line)
        except ValueError:  # json.JSONDecodeError, NaN/Infinity, a UnicodeDecodeError
            yield _error(None, PARSE_ERROR, "Parse error: not JSON")
            return None
        except _TooDeep:
            deep = True
            msg = _top_level(line)
            if msg is None:
                if element_spans(line) is None:
                    yield _error(None, PARSE_ERROR, "Parse error: not JSON")
                else:
                    yield _error(None, INVALID_REQUEST, "Invalid request: not a JSON-RPC "
                                 "2.0 object")
                return None
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            yield _error(None, INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 object")
            return None
        method = msg.get("method")
        if not isinstance(method, str):
            return None  # a response to a request this agent never sends: ignored
        if "id" not in msg:
            return None  # notifications (session/cancel, unknown ones) need no answer
        rid = _id_token(line, msg["id"])
        if rid is _INVALID:
            yield _error(None, INVALID_REQUEST, "Invalid request: the id must be a string, "
                         "a number or null")
            return None
        if deep:
            yield _error(rid, INVALID_REQUEST, "Invalid request: nested deeper than "
                         "acp-replay reads")
            return None
        params = msg.get("params")
        return rid, method, params if isinstance(params, dict) else {}

    def _initialized(self, rid: Any, params: dict[str, Any]) -> Iterator[bytes]:
        yield _response(rid, self._initialize(params))

    def _list(self, rid: Any, params: dict[str, Any]) -> Iterator[bytes]:
        """session/list: the stored sessions (those in ``cwd``, when it is given)."""
        want = params.get("cwd")
        sessions = []
        for listed, s in self.sessions.items():
            cwd, more = self._cwd(s)
            if isinstance(want, str) and want != cwd:
                continue
            info: dict[str, Any] = {"sessionId": listed, "cwd": cwd}
            if more:
                info["additionalDirectories"] = more
            title = self._title(s)
            if title is not None:
                info["title"] = title
            sessions.append(info)
        yield _response(rid, {"sessions": sessions})

    #: The requests answered whatever session they name.
    _ANSWERS: ClassVar[dict[str, Callable[[Server, Any, dict[str, Any]], Iterator[bytes]]]] = {
        "initialize": _initialized, "session/list": _list}

    def _session_request(self, rid: Any, method: str, params: dict[str, Any]
                         ) -> Iterator[bytes]:
        """A request about a stored session: load, resume and close are answered; what
        would run something is not (ASR-726)."""
        sid = params.get("sessionId")
        if not isinstance(sid, str):
            yield _error(rid, INVALID_PARAMS, "Invalid params: sessionId is required")
            return
        stream = self.sessions.get(sid)
        if stream is None:
            yield _error(rid, NOT_FOUND, f"Resource not found: no stored session {sid!r}")
            return
        if method == "session/load":
            yield from self._load(rid, stream)
        elif method == "session/resume":
            yield from self._resume(rid, sid, stream, params)
        elif method == "session/close":
            yield _response(rid, {})
        else:  # prompt, set_mode, set_config_option: nothing runs in a recording (ASR-726)
            yield _error(rid, READ_ONLY, f"session {sid!r} is a read-only recording "
                         f"replayed by acp-replay: {method} is not accepted",
                         {"readOnly": True})

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        """The version the client asks for: 1, or else 2 (ACP: an agent answers the
        client's version when it speaks it, else the latest it speaks)."""
        asked = params.get("protocolVersion")
        self.protocol = 1 if type(asked) is int and asked == 1 else 2
        if self.protocol == 2:
            return {"protocolVersion": 2, "info": _INFO, "capabilities": {"session": {}}}
        caps = params.get("clientCapabilities")
        session = caps.get("session") if isinstance(caps, dict) else None
        self.compaction = isinstance(session, dict) and session.get("compaction") is not None
        return {"protocolVersion": 1,
                "agentCapabilities": {"loadSession": True, "sessionCapabilities": {
                    "list": {}, "resume": {}, "close": {}}},
                "authMethods": [], "agentInfo": _INFO}

    def _load(self, rid: Any, stream: AsrStream) -> Iterator[bytes]:
        """v1: the history as v1 updates, then the response."""
        rep = V1Replay(stream, compaction=self.compaction)
        yield from rep.notifications()
        result: dict[str, Any] = {}
        if rep.config_options is not None:
            result["configOptions"] = rep.config_options
        yield _response(rid, result)
        if self.report is not None:
            self.report(rep.report())

    def _resume(self, rid: Any, sid: str, stream: AsrStream,
                params: dict[str, Any]) -> Iterator[bytes]:
        if self.protocol == 1:  # v1's resume restores without history
            rep = Replay(stream)
            for _ in rep.updates():
                pass
            opts = rep.config_options
            yield _response(rid, {} if opts is None else
                            {"configOptions": config_options(opts, 1)})
            return
        cursor = params.get("replayFrom")
        if cursor is not None and not (isinstance(cursor, dict)
                                       and cursor.get("type") == "start"):
            yield _error(rid, INVALID_PARAMS, "Invalid params: replayFrom supports "
                         "{\"type\": \"start\"} only")
            return
        rep = Replay(stream)
        frames = list(rep.notifications())
        # without replayFrom: no history, only the current state before the response
        yield from frames if cursor is not None else frames[-1:]
        result: dict[str, Any] = {}
        if rep.config_options is not None:
            result["configOptions"] = config_options(rep.config_options, 2)
        yield _response(rid, result)
        if self.report is not None and cursor is not None:
            self.report(rep.report())


def serve_lines(streams: Iterable[AsrStream], lines: Iterable[bytes], *,
                report: Callable[[dict[str, Any]], None] | None = None,
                warn: Warn | None = None) -> Iterator[bytes]:
    """Client lines in, agent frames (bytes without LF) out, lazily."""
    server = Server(streams, report=report, warn=warn)
    for line in lines:
        yield from server.feed(line)


def serve(streams: Iterable[AsrStream], inp: BinaryIO, out: BinaryIO, *,
          report: Callable[[dict[str, Any]], None] | None = None, warn: Warn | None = None) -> None:
    """One connection on ``inp``/``out``: each answer written whole, then flushed."""
    server = Server(streams, report=report, warn=warn)
    for line in inp:
        chunk = b"".join(f + b"\n" for f in server.feed(line))
        if chunk:
            out.write(chunk)
            out.flush()

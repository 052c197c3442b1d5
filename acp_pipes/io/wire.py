"""The wire log: what acp-tee writes, every frame of both directions, byte-exact.

A wire log is a header line, one record per frame in receipt order, and an end record
once the session is over::

    {"format":"acp-pipes/wire","version":3,"recorder":"acp-tee (acp-pipes) 0.1.0",
     "argv":["my-agent","--acp"],"started":"2026-11-30T17:15:28.123456Z","clock":"system",
     "host":{"os":"linux","arch":"x86_64","cwd":"/home/me","pid":4242},"env":{},
     "transport":{"client":"stdio","agent":"stdio"}}
    {"seq":0,"t":1764522928123456789,"dir":"c2a","raw":"{\"jsonrpc\":\"2.0\",...}"}
    ...
    {"end":true,"t":1764522931000000000,"ended":"2026-11-30T17:15:31.000000Z","status":0,
     "frames":42}

``raw`` holds the frame's bytes without the final LF (a CR before it is kept) as a JSON
string when they are UTF-8, else ``raw_b64`` holds them base64-encoded. Optional marks:
``nolf: true`` for a last frame that ended without LF; ``redacted: true`` with ``hash``
when secrets were replaced in ``raw`` (see :mod:`acp_pipes.protocol.redact`). ``hash`` is the
identity of the redacted frame as logged, what acp-frame computes from ``raw``; logs
written before held the hash of the frame as sent there, which readers now ignore (it
let a guessed secret be checked). The record's fields are the same, so the version is.

The end record (:func:`end_record`) says the recorder finished: its time by the log's
clock, the exit status (the agent's; 128+N and ``signal: N`` when signal N ended it) and
how many frame records precede it. A log without one was cut off (the recorder was
killed, the disk filled) or written before version 2: readers take it as it is, and a
reader that follows a growing log (``--follow``) stops at the end record.

Remote transports (version 3). The header's ``transport`` says how each side was
reached: ``client`` and ``agent`` are ``stdio``, ``ws`` (WebSocket) or ``http``
(Streamable HTTP), with ``listen`` (the URL acp-tee served the client on) and
``connect`` (the agent's URL) where they apply. A frame is a frame whatever carried it:
a WebSocket text frame's bytes, a POST body, an SSE event's joined ``data``. Over HTTP a
frame also names its ``stream`` (``post:N`` for the Nth POST, ``get`` for the
connection-scoped SSE stream, ``get:SESSION`` for a session-scoped one) and ``sseq``,
its place in that stream (order holds only within a stream; ``seq`` is the order of
arrival at acp-tee); an SSE frame keeps the event's own bytes in ``sse`` (or
``sse_b64``). What is not a frame is an *event record*: ``t``, ``event`` and its
fields, no ``seq`` and no ``dir``, so every reader passes over it
(:func:`is_event`)::

    {"t":...,"event":"ws-open","side":"agent","url":"ws://127.0.0.1:8080/acp",
     "status":101,"protocol":null,"request":[["Authorization","<redacted ...>"]],
     "response":[["Acp-Connection-Id","..."]]}
    {"t":...,"event":"ws-accept","side":"client","status":101,"protocol":null,
     "response":[["Acp-Connection-Id","..."]]}
    {"t":...,"event":"ws-close","side":"client","code":1000,"reason":""}
    {"t":...,"event":"ws-binary","side":"client","raw_b64":"..."}
    {"t":...,"event":"http-request","side":"client","stream":"post:3","method":"POST",
     "headers":[...]}
    {"t":...,"event":"http-response","side":"agent","stream":"post:3","status":202,
     "headers":[...]}

``side`` is who sent it (``client`` or ``agent``); headers are ``[name, value]`` pairs
in order (lower-case names over HTTP/2, as it carries them); ``http-end`` says an SSE
stream ended. ``http`` (``"1.1"`` or ``"2"``, added later: older logs lack it) is the
HTTP version of the hop an ``http-request``/``http-response`` crossed. Binary
WebSocket frames are no ACP messages (the transport ignores them) and are logged as
events, flagged, their bytes as received. Header values that carry credentials
(``Authorization``, ``Cookie``, ``Set-Cookie``, API keys) are logged as redaction
tokens unless ``--keep-secrets``.
"""

from __future__ import annotations

import binascii
import os
import time

from acp_pipes import __version__
from acp_pipes.errors import OptionError
from acp_pipes.io.streams import VERSIONS, WIRE

TYPE_CHECKING = False
if TYPE_CHECKING:  # acp-tee imports this module before it starts the agent: keep it light
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any

    from acp_pipes.protocol.redact import Redactor

C2A = "c2a"  # client -> agent
A2C = "a2c"  # agent -> client
DIRECTIONS = (C2A, A2C)


def make_clock(spec: str) -> Callable[[], int]:
    """A receipt clock in ns since the epoch from a ``--clock`` value.

    ``system`` reads the wall clock; ``epoch`` pins every time to 0 and ``nanos:N`` to N,
    so two recordings of the same deterministic session are byte-identical files.
    """
    if spec == "system":
        return time.time_ns
    if spec == "epoch":
        return lambda: 0
    if spec.startswith("nanos:"):
        try:
            fixed = int(spec[6:])
        except ValueError:
            raise OptionError(f"--clock nanos:N needs an integer, got {spec!r}") from None
        if not 0 <= fixed < 1 << 63:  # a JSON integer every reader holds exactly
            raise OptionError("--clock nanos:N needs 0 <= N < 2^63")
        return lambda: fixed
    raise OptionError(f"--clock must be system, epoch or nanos:N, got {spec!r}")


def iso_time(ns: int) -> str:
    """RFC 3339 UTC with microseconds, from ns since the epoch."""
    seconds, ns_part = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{ns_part // 1000:06d}Z"


def header(
    argv: Sequence[str],
    *,
    started_ns: int,
    clock: str = "system",
    host: bool = True,
    env: dict[str, str] | None = None,
    keep_secrets: bool = False,
    recorder: str = "acp-tee",
    transport: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The wire log header. Environment variables appear only when named by the user;
    ``recorder`` names the program that wrote the log (acp-tee, or acp-replay --client)."""
    h: dict[str, Any] = {
        "format": WIRE,
        "version": VERSIONS[WIRE],
        "recorder": f"{recorder} (acp-pipes) {__version__}",
        "argv": list(argv),
        "started": iso_time(started_ns),
        "clock": clock,
    }
    if host:
        h["host"] = {
            "os": os.uname().sysname.lower(),
            "arch": os.uname().machine,
            "cwd": os.getcwd(),
            "pid": os.getpid(),
        }
    h["env"] = dict(env or {})
    if keep_secrets:
        h["secrets"] = "kept"
    h["transport"] = dict(transport or {"client": "stdio", "agent": "stdio"})
    return h


def event_record(t: int, event: str, side: str, **fields: Any) -> dict[str, Any]:
    """An event record (see the module's docstring): what a remote transport did that
    is no frame."""
    return {"t": t, "event": event, "side": side, **fields}


def is_event(record: object) -> bool:
    """Is ``record`` a wire log's event record (no frame, no end: readers pass over it)?"""
    return (record.__class__ is dict and "event" in record
            and "dir" not in record and "seq" not in record)


def end_record(t: int, status: int, frames: int, signal: int | None = None
               ) -> dict[str, Any]:
    """The record that ends a wire log: ``t`` by the log's clock, ``status`` the exit
    status, ``frames`` the number of frame records before it, ``signal`` the signal that
    ended the agent (if one did)."""
    rec: dict[str, Any] = {"end": True, "t": t, "ended": iso_time(t), "status": status,
                           "frames": frames}
    if signal is not None:
        rec["signal"] = signal
    return rec


def is_end(record: object) -> bool:
    """Is ``record`` a wire log's (or frames stream's) end record?"""
    return record.__class__ is dict and record.get("end") is True


def frame_record(
    seq: int,
    t: int,
    direction: str,
    raw: bytes,
    *,
    nolf: bool = False,
    redacted: bytes | None = None,
    logged_hash: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One wire record. ``redacted`` is the logged stand-in for ``raw`` when secrets were
    removed; ``logged_hash`` is then the identity of the logged stand-in (never of ``raw``
    as sent: that would let a guess of the secret be checked)."""
    rec: dict[str, Any] = {"seq": seq, "t": t, "dir": direction}
    logged = raw if redacted is None else redacted
    key, value = encode_raw(logged)
    rec[key] = value
    if nolf:
        rec["nolf"] = True
    if redacted is not None:
        rec["redacted"] = True
        rec["hash"] = logged_hash
    if extra:
        rec.update(extra)
    return rec


#: orjson.dumps, loaded by the first :func:`frame_lines` (acp-tee imports this module
#: before it starts its agent, and orjson takes ~40 ms to import; an import statement
#: in the function would cost each read ~0.5 us)
_dumps: Callable[..., bytes] | None = None


def _load_dumps() -> Callable[..., bytes]:
    global _dumps
    import orjson

    _dumps = orjson.dumps
    return _dumps


def frame_lines(out: bytearray, seq: int, t: int, direction: str, raws: Iterable[bytes],
                nolf: bool = False, redactor: Redactor | None = None,
                extra: dict[str, Any] | None = None) -> int:
    """Append to ``out`` the wire records (each with its LF) of frames received together
    at ``t``, numbered from ``seq``; the next seq. The one writer of both wire logs
    (acp-tee's, acp-replay --client's). ``redactor`` (None: as sent) gives the logged
    stand-in of a frame whose bytes may hold a secret; one it fails on is logged as
    :data:`acp_pipes.protocol.redact.UNCHECKED`, never as sent. The common record, a UTF-8 frame
    with nothing redacted and no ``extra``, is formatted inline into ``out``: the bytes
    orjson writes for :func:`frame_record`'s dict (tests/test_tee.py holds them equal),
    at a fraction of the cost of a dict and a result a record."""
    dumps = _dumps or _load_dumps()
    wants = None if redactor is None else (
        redactor.wants_c2a if direction == C2A else redactor.wants_a2c)
    head = b'{"seq":%d,"t":%d,"dir":"' + direction.encode() + b'","raw":'
    tail = b',"nolf":true}\n' if nolf else b"}\n"
    for raw in raws:
        if wants is not None and wants(raw):
            from acp_pipes.protocol.redact import UNCHECKED, logged_hash

            try:
                logged = redactor.frame(direction, raw)  # type: ignore[union-attr]  # wants
            except Exception:  # a bug: never log what could not be checked
                logged = UNCHECKED
            if logged is not None:
                out += dumps(frame_record(seq, t, direction, raw, nolf=nolf, redacted=logged,
                                          logged_hash=logged_hash(logged), extra=extra))
                out += b"\n"
                seq += 1
                continue
        text = None
        if extra is None:
            try:
                text = raw.decode()
            except UnicodeDecodeError:
                pass
        if text is None:
            out += dumps(frame_record(seq, t, direction, raw, nolf=nolf, extra=extra))
            out += b"\n"
        else:
            out += head % (seq, t)
            out += dumps(text)
            out += tail
        seq += 1
    return seq


def encode_raw(raw: bytes) -> tuple[str, str]:
    """``("raw", text)`` for UTF-8 bytes, ``("raw_b64", base64)`` for anything else."""
    try:
        return "raw", raw.decode("utf-8")
    except UnicodeDecodeError:
        return "raw_b64", binascii.b2a_base64(raw, newline=False).decode("ascii")


def decode_raw(record: dict[str, Any]) -> bytes:
    """The frame's logged bytes from a wire or frame record.

    Raises ValueError when the record has neither ``raw`` nor valid ``raw_b64``.
    """
    raw = record.get("raw")
    if isinstance(raw, str):
        # surrogatepass: a JSON string may carry lone surrogates that were never UTF-8
        return raw.encode("utf-8", "surrogatepass")
    b64 = record.get("raw_b64")
    if isinstance(b64, str):
        import base64  # not at the top: it imports re, which acp-tee's start need not pay

        try:
            return base64.b64decode(b64, validate=True)
        except ValueError as e:
            raise ValueError(f"raw_b64 is not base64: {e}") from None
    raise ValueError("record has no 'raw' or 'raw_b64'")

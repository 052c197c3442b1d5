"""Framing: classify and hash every frame of a wire log, a frames stream or bare ACP JSONL.

This is the contract between ``acp-frame`` and everything downstream (fold, asr,
replay, align). A frames stream is a header then one record per frame::

    {"format":"acp-pipes/frames","version":1,"source":<wire log header | null>}
    {"seq":0,"t":1764522928123456789,"dir":"c2a","raw":"{...}","kind":"request",
     "method":"initialize","id":0,"size":123,"hash":"blake3:..."}

Record fields, in this order (optional ones only when they apply):

``seq``, ``t``, ``dir``
    From the wire record. A bare stream counts ``seq`` from 0 and has ``t: null``.
``raw`` | ``raw_b64``, ``nolf``, ``redacted``
    As in the wire record (see :mod:`acp_pipes.io.wire`): the bytes as logged.
``kind``
    ``request`` (``method`` and ``id``), ``notification`` (``method``, no ``id``),
    ``response`` (``result`` and ``id``), ``error`` (``error`` and ``id``),
    ``invalid_json`` (the bytes are not one JSON text), ``not_jsonrpc`` (valid JSON that
    is not a JSON-RPC 2.0 message: no ``"jsonrpc":"2.0"``, a batch array, an id that is
    not a string/number/null or is an integer beyond 64 bits, both or neither of
    ``result``/``error``, a lone surrogate in method/id/sessionId, ...).
``method``
    Of requests and notifications; of responses and errors, the method of the request
    they answer, when that request was seen (a response travelling a2c answers a request
    that travelled c2a and vice versa; ids match by JSON type and value, so ``1`` and
    ``"1"`` differ).
``id``
    The JSON-RPC id as sent (string, number or null), for requests, responses, errors.
``sessionId``
    ``params.sessionId`` when it is a string; for a response, ``result.sessionId``
    (session/new, session/fork) and otherwise, like for errors, the sessionId of the
    request it answers. Absent when the frame names no session.
``size``
    Bytes as logged (as sent, unless redacted), without the LF (a CR before it counts).
``hash``
    ``blake3:<hex>``, the canonical hash (blake3 of RFC 8785) of the parsed JSON, also for
    ``not_jsonrpc``. A redacted frame's is computed from its bytes as logged, like any
    frame's (a wire record's own ``hash`` is not used: older logs held the hash of the
    frame as sent there, against which a guessed secret could be checked). Bytes with no
    canonical form (not JSON, or JSON with no JCS form such as a lone surrogate or an
    integer beyond the double range) get ``blake3-raw:<hex>``, the blake3 of the bytes
    themselves: the distinct prefix keeps the two identities from mixing.

Several streams back to back (in one file or over several files) each start with their
header, and each gives a frames header of its own; request/response matching restarts
with each stream.

Bad input, defined outcomes: a frame that is not JSON or not JSON-RPC is reported to
``warn(source, line, message)`` and kept as an ``invalid_json``/``not_jsonrpc`` frame. A
wire record that is itself broken (its log line is not JSON, e.g. a torn last line after a
crash, or lacks ``seq``/``dir``/``raw``) is reported and skipped; what came before it is
kept. A stream of the wrong kind (an ASR stream, folded entities, a newer version), or a
bare stream without a direction, raises ``InputError``.
"""

from __future__ import annotations

import base64
from collections.abc import Generator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import blake3
import orjson

from acp_pipes.errors import InputError, Warn
from acp_pipes.io.lines import (
    READ_ERRORS,
    STDIN,
    Line,
    display_name,
    json_error,
    open_source,
    unparsable,
)
from acp_pipes.io.live import Live
from acp_pipes.io.streams import FRAMES, VERSIONS, WIRE, header_format, judge
from acp_pipes.io.wire import A2C, C2A, DIRECTIONS, encode_raw, is_event
from acp_pipes.protocol.canonical import hash_raw, raw_hash
from acp_pipes.protocol.jsonrpc import why_not_jsonrpc

if TYPE_CHECKING:  # pathlib costs ~3 ms of start-up for an annotation
    from pathlib import Path

__all__ = [
    "KINDS",
    "Framer",
    "frame_chunks",
    "frame_field",
    "frame_lines",
    "frames",
    "frames_header",
    "read_frames",
]

KINDS = ("request", "response", "error", "notification", "invalid_json", "not_jsonrpc")

#: Requests still waiting for an answer, per direction; the oldest are forgotten beyond
#: this, so a log full of unanswered requests still frames in flat memory.
MAX_PENDING = 1 << 16

_OTHER = {C2A: A2C, A2C: C2A}
_FRAMED = (WIRE, FRAMES)  # the streams framed (a frames stream is framed again)
_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError
_hash_raw = hash_raw  # (value, "blake3:..." | None), raises ParseError (a ValueError)
_blake3 = blake3.blake3


def frames_header(source: dict[str, Any] | None) -> dict[str, Any]:
    """The frames stream header; ``source`` is the wire log header (None: bare stream)."""
    return {"format": FRAMES, "version": VERSIONS[FRAMES], "source": source}


def frame_field(f: dict[str, Any], outer: str, key: str) -> Any:
    """``message[outer][key]`` of a frame record (its ``raw`` parsed again: for the few
    frames whose payload a summary reads); None when absent or not JSON."""
    raw = f.get("raw")
    if raw is None:
        return None
    try:
        msg = _loads(raw)
    except _JSONDecodeError:
        return None
    inner = msg.get(outer) if isinstance(msg, dict) else None
    return inner.get(key) if isinstance(inner, dict) else None


def _no_warn(source: str, line: int, message: str) -> None:
    pass


_INT64, _UINT64 = -(2**63), 2**64  # acp_pipes.protocol.jsonrpc.is_jsonrpc_id, inlined below
#: The wire record layouts acp-tee writes, keys in this order: framed in place.
_PLAIN_RAW = ("seq", "t", "dir", "raw")
_PLAIN_B64 = ("seq", "t", "dir", "raw_b64")


def _unwritable(*values: Any) -> bool:
    """Does a string taken from the frame hold a lone surrogate (no UTF-8 form, so no
    record can name it)? Only JSON with no canonical form can, so only that is checked."""
    for v in values:
        if v.__class__ is str:
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


class Framer:
    """Frames one stream: turns wire records into frame records, matching responses to
    the requests they answer. One per stream; ``frame`` is the per-frame hot path."""

    __slots__ = ("hasher", "pending", "source", "warn")

    def __init__(self, source: str = "-", warn: Warn | None = None):
        self.source = source
        self.warn = warn or _no_warn
        self.pending: dict[str, dict[tuple[type, Any], tuple[str, Any]]] = {C2A: {}, A2C: {}}
        self.hasher = _blake3()  # reused by hash_raw for every frame of this stream

    def frame(self, rec: dict[str, Any], line: int = 0) -> dict[str, Any] | None:
        """The frame record for one wire (or frame) record; None, reported, if the record
        itself is broken (no valid seq/dir/raw). A wire record in the plain layout
        (seq, t, dir, raw|raw_b64) is extended in place and returned, saving a copy per
        frame: pass a copy if you keep ``rec``."""
        # acp-tee's layout of a text frame (seq, t, dir, raw), nearly every frame of a
        # wire log, read here; any other layout, and whatever is wrong, by _fields
        if tuple(rec) == _PLAIN_RAW:
            seq, t, d, r = rec.values()
            if r.__class__ is str and seq.__class__ is int and (
                    t is None or t.__class__ is int) and d.__class__ is str and d in _OTHER:
                if r.isascii():  # the frame's text stands for its bytes
                    return self._record(rec, r, len(r), d, line, False)
                b = r.encode("utf-8", "surrogatepass")
                return self._record(rec, b, len(b), d, line, False)
        return self._fields(rec, line)

    def _fields(self, rec: dict[str, Any], line: int) -> dict[str, Any] | None:
        """:meth:`frame` of a record in any layout: seq, t, dir, then the bytes as raw
        (text) or raw_b64; a record made anew unless the layout is plain."""
        seq = rec.get("seq")
        t = rec.get("t")
        d = rec.get("dir")
        r = rec.get("raw")
        if (seq.__class__ is not int or not (t is None or t.__class__ is int)
                or d.__class__ is not str or d not in _OTHER):  # a list or object: no dir
            self.warn(self.source, line, "not a wire record (needs seq, t, dir), skipped")
            return None
        b: str | bytes  # the frame's text (when it is ASCII) or its bytes
        if r.__class__ is str:
            b = r if r.isascii() else r.encode("utf-8", "surrogatepass")
            out = rec if tuple(rec) == _PLAIN_RAW else {"seq": seq, "t": t, "dir": d, "raw": r}
        else:
            r = rec.get("raw_b64")
            try:
                b = base64.b64decode(r, validate=True)  # type: ignore[arg-type]  # None: TypeError
            except (TypeError, ValueError):
                self.warn(self.source, line, "wire record has no raw or valid raw_b64, skipped")
                return None
            out = rec if tuple(rec) == _PLAIN_B64 else {"seq": seq, "t": t, "dir": d, "raw_b64": r}
        if out is not rec:
            _flags(rec, out)
        return self._record(out, b, len(b), d, line, b.__class__ is bytes and r is rec.get(
            "raw_b64"))

    def _record(self, out: dict[str, Any], b: str | bytes, size: int, d: str, line: int,
                b64: bool) -> dict[str, Any]:
        """The frame record of the frame ``b`` (``size`` bytes, travelling ``d``; ``b64``:
        its bytes were base64), its fields added to ``out``."""
        # One parse serves both the canonical hash and the classification below.
        try:
            value, h = _hash_raw(b, self.hasher)
        except ValueError as e:  # canonical.ParseError
            why = "not UTF-8" if b64 else str(e)
            return self._invalid(out, b, size, f"{unparsable(True, e)}: {why}", line)
        # kind, method, id, sessionId: acp_pipes.protocol.jsonrpc.classify, spelt out in
        # _call and _answer with the pairing of responses to requests (a call to classify
        # as well costs more than the test; BENCHMARKS.md, acp-frame).
        kind = None
        if value.__class__ is dict and value.get("jsonrpc") == "2.0":
            method = value.get("method")
            if method is not None:
                kind = self._call(value, method, d, out)
            elif "id" in value and (("result" in value) is not ("error" in value)):
                kind = self._answer(value, d, out)
        if kind is None:
            self.warn(self.source, line, f"not JSON-RPC: {why_not_jsonrpc(value)}")
            out["kind"] = "not_jsonrpc"
        elif h is None and _unwritable(out.get("method"), out.get("id"), out.get("sessionId")):
            for key in ("kind", "method", "id", "sessionId"):
                out.pop(key, None)
            self.warn(self.source, line,
                      "not JSON-RPC: a lone surrogate in its method, id or sessionId")
            out["kind"] = "not_jsonrpc"
        out["size"] = size
        out["hash"] = h if h is not None else _bytes_hash(b)
        return out

    def _call(self, value: dict[str, Any], method: Any, d: str, out: dict[str, Any]
              ) -> str | None:
        """A request or a notification (``kind``, ``method``, ``id``, ``sessionId`` into
        ``out``), a request remembered until its answer; None when it is neither."""
        if method.__class__ is not str:
            return None
        params = value.get("params")
        sid = params.get("sessionId") if params.__class__ is dict else None
        if "id" not in value:
            out["kind"] = "notification"
            out["method"] = method
        else:
            rid = value["id"]
            c = rid.__class__
            if not ((c is int and _INT64 <= rid < _UINT64) or c is str or rid is None
                    or c is float):
                return None
            out["kind"] = "request"
            out["method"] = method
            out["id"] = rid
            pend = self.pending[d]
            pend[(c, rid)] = (method, sid if sid.__class__ is str else None)
            if len(pend) > MAX_PENDING:
                del pend[next(iter(pend))]
        if sid.__class__ is str:
            out["sessionId"] = sid
        return out["kind"]

    def _answer(self, value: dict[str, Any], d: str, out: dict[str, Any]) -> str | None:
        """A response or an error (``kind``, ``method`` and ``sessionId`` of the request
        it answers, ``id``, into ``out``); None when its id is no JSON-RPC id."""
        rid = value["id"]
        c = rid.__class__
        if not ((c is int and _INT64 <= rid < _UINT64) or c is str or rid is None
                or c is float):
            return None
        asked = self.pending[_OTHER[d]].pop((c, rid), None)
        if "result" in value:
            kind = out["kind"] = "response"
            result = value["result"]
        else:
            kind = out["kind"] = "error"
            result = None
        sid = None
        if asked is not None:
            out["method"] = asked[0]
            sid = asked[1]
        out["id"] = rid
        if result.__class__ is dict:
            s = result.get("sessionId")
            if s.__class__ is str:
                sid = s
        if sid is not None:
            out["sessionId"] = sid
        return kind

    def _invalid(self, out: dict[str, Any], b: str | bytes, size: int, why: str, line: int
                 ) -> dict[str, Any]:
        """A frame whose bytes are not one JSON text: kept, its hash that of its bytes."""
        self.warn(self.source, line, why)
        out["kind"] = "invalid_json"
        out["size"] = size
        out["hash"] = _bytes_hash(b)
        return out


def _flags(rec: dict[str, Any], out: dict[str, Any]) -> None:
    """The wire record's flags, onto a frame record made anew."""
    if rec.get("nolf") is True:
        out["nolf"] = True
    if rec.get("redacted") is True:
        out["redacted"] = True


def _bytes_hash(b: str | bytes) -> str:
    """:func:`acp_pipes.protocol.canonical.raw_hash` of a frame's text or bytes."""
    return raw_hash(b.encode("utf-8", "surrogatepass") if isinstance(b, str) else b)


def frames(
    records: Iterable[dict[str, Any]], *, source: str = "-", warn: Warn | None = None
) -> Iterator[dict[str, Any]]:
    """Wire records (or frame records, re-framed) -> frame records, one stream. The
    records given are left as they are (:meth:`Framer.frame` may extend its own)."""
    framer = Framer(source, warn)
    frame = framer.frame
    for rec in records:
        out = frame(dict(rec))
        if out is not None:
            yield out


def read_frames(
    path: str | Path,
    *,
    direction: str | None = None,
    warn: Warn | None = None,
    headers: bool = False,
    ends: bool = False,
    live: Live | None = None,
) -> Iterator[dict[str, Any]]:
    """Frame records from a wire log, a frames stream or a bare ACP JSONL stream.

    ``direction`` ("c2a"/"a2c") is needed for a bare stream and ignored for streams with a
    header. With ``headers=True`` each stream's frames header is yielded before its
    frames (what ``acp-frame`` writes); with ``ends=True`` a wire log's end record
    (:func:`acp_pipes.io.wire.end_record`) too, as it is. ``.gz`` and ``-`` (stdin) work.
    ``live`` reads an input still being written (:class:`acp_pipes.io.live.Live`).
    Lazy: the file is opened at the first ``next`` and closed when the iterator ends.
    """
    path = str(path)
    # the framing loop itself, no generator in between: that costs ~0.1 us a frame
    return _framed(None, path, display_name(path), direction, warn, headers, 1, ends, live)


def frame_lines(
    lines: Iterable[Line],
    source: str,
    *,
    direction: str | None = None,
    warn: Warn | None = None,
    headers: bool = False,
) -> Iterator[dict[str, Any]]:
    """:func:`read_frames` over already-read, consecutively numbered lines of one source.

    Lazy: each frame is yielded right after its line was read."""
    it = iter(lines)
    first = next(it, None)
    if first is None:
        return
    yield from frame_chunks(_with_lf(first, it), source, direction=direction, warn=warn,
                            headers=headers, first_line=first.number)


def _with_lf(first: Line, rest: Iterator[Line]) -> Iterator[bytes]:
    yield first.raw + b"\n" if first.terminated else first.raw
    for line in rest:
        yield line.raw + b"\n" if line.terminated else line.raw


def frame_chunks(
    chunks: Iterable[bytes],
    source: str,
    *,
    direction: str | None = None,
    warn: Warn | None = None,
    headers: bool = False,
    first_line: int = 1,
) -> Iterator[dict[str, Any]]:
    """:func:`read_frames` over the lines of one source as bytes *with* their LF (a last
    line without LF is a frame without LF, or a torn wire record)."""
    return _framed(chunks, None, source, direction, warn, headers, first_line)


def _framed(
    chunks: Iterable[bytes] | None,
    path: str | None,
    source: str,
    direction: str | None,
    warn: Warn | None,
    headers: bool,
    first_line: int,
    ends: bool = False,
    live: Live | None = None,
) -> Iterator[dict[str, Any]]:
    """The framing loop of :func:`frame_chunks`, and of :func:`read_frames` (``path``
    given, ``chunks`` None: the file is opened here and closed at the end).

    Its own loop rather than :func:`acp_pipes.io.lines.records`, the record reader of the
    other tools: a measured fast path (BENCHMARKS.md, acp-frame: "within 3× of a bare
    orjson + blake3 loop"), where a generator between the file and this loop, or a
    ``Line`` object per frame, costs more per frame than everything done here besides
    parsing and hashing. A wire record that is not JSON is judged as ``records`` judges
    it (:func:`acp_pipes.io.lines.unparsable`: torn when it has no LF)."""
    if direction is not None and direction not in DIRECTIONS:
        raise ValueError(f"direction must be c2a or a2c, got {direction!r}")
    warn = warn or _no_warn
    loads = _loads
    JSONDecodeError = _JSONDecodeError
    stream = None
    if chunks is None:
        stream = chunks = open_source(path, live)  # type: ignore[arg-type]  # chunks or a path
    try:
        chunks = iter(chunks)
        # up to the first header: blank lines, or a bare stream (the rest of the input
        # then, unless a header comes)
        rec, fmt, number = yield from _bare_lines(chunks, first_line - 1, source, direction,
                                                  warn, headers)
        while rec is not None:
            # a header: the next stream starts here; frame records are wire records plus
            # fields, both frame the same way
            head = judge(rec, source, 0 if number == 1 else number, _FRAMED,
                         "a wire log or ACP JSONL")
            frame = Framer(source, warn).frame
            if headers:
                yield frames_header(_wire_header(head, fmt))  # type: ignore[arg-type]
            while True:  # the stream's records, to the next header
                try:
                    chunk = next(chunks)
                except StopIteration:
                    return
                except READ_ERRORS as e:
                    raise InputError(source, number + 1, f"cannot read: {e}") from None
                number += 1
                try:
                    rec = loads(chunk)  # JSON allows the trailing LF (and a CR before it)
                except JSONDecodeError as e:
                    what = unparsable(chunk[-1:] == b"\n", e)
                    warn(source, number, f"{what}, wire record skipped: {json_error(chunk, e)}")
                    continue
                if rec.__class__ is dict and "dir" in rec:
                    out = frame(rec, number)
                    if out is not None:
                        yield out
                    continue
                fmt = header_format(rec)
                if fmt is not None:
                    break
                if _passed_on(rec, ends, source, number, warn):
                    yield rec
    finally:
        if stream is not None and path != STDIN:
            stream.close()


def _bare_lines(chunks: Iterator[bytes], number: int, source: str, direction: str | None,
                warn: Warn, headers: bool
                ) -> Generator[dict[str, Any], None, tuple[Any, str | None, int]]:
    """The frames of the lines before the first header (``number``: of the line before
    them), the frames header of a bare stream first; returns that header, its format and
    line number, or ``(None, None, n)`` at the input's end. Blank lines before a stream
    are passed over; the first other line that is no header begins a bare ACP JSONL
    stream, which needs ``direction``."""
    loads = _loads
    frame = Framer(source, warn).frame
    bare = False
    seq = 0
    while True:
        try:
            chunk = next(chunks)
        except StopIteration:
            return None, None, number
        except READ_ERRORS as e:
            raise InputError(source, number + 1, f"cannot read: {e}") from None
        number += 1
        terminated = chunk[-1:] == b"\n"
        raw = chunk[:-1] if terminated else chunk
        if not bare and not raw.strip():
            continue
        try:
            rec = loads(raw)
        except _JSONDecodeError:
            rec = None
        fmt = header_format(rec) if rec.__class__ is dict else None
        if fmt is not None:
            return rec, fmt, number
        if not bare:
            bare = _bare(rec, direction, source, number)
            if headers:
                yield frames_header(None)
        if not raw.strip():  # blank lines do not frame in ndjson
            continue
        key, text = encode_raw(raw)  # the line's wire record (no time: none was recorded)
        wire = {"seq": seq, "t": None, "dir": direction, key: text}
        if not terminated:
            wire["nolf"] = True
        seq += 1
        out = frame(wire, number)
        if out is not None:
            yield out


def _passed_on(rec: Any, ends: bool, source: str, number: int, warn: Warn) -> bool:
    """A record of a wire log that is no frame and no header: the recorder's end record
    (passed on as it is, with ``ends``), a remote transport's event (no frame), or
    anything else (said, and skipped)."""
    if rec.__class__ is dict and rec.get("end") is True:
        return ends
    if not is_event(rec):
        warn(source, number, "not a wire record (needs seq, t, dir), skipped")
    return False


def _bare(rec: Any, direction: str | None, source: str, number: int) -> bool:
    """The mode of an input whose first line is no header: a bare ACP JSONL stream, which
    needs a direction; an input that is not JSONL at all is no recording."""
    if direction is None and rec is None:  # no JSONL at all
        raise InputError(
            source, number, "not JSON, so no recording: expected a wire "
            "log, frames or an ASR stream (or bare ACP JSONL with --dir)")
    if direction is None:
        raise InputError(source, 0,
                         "no stream header: a bare ACP JSONL stream needs --dir c2a|a2c")
    return True


def _wire_header(head: dict[str, Any], fmt: str) -> dict[str, Any] | None:
    """What a frames header names as its source: the wire log's header (of a frames
    stream framed again, its own source)."""
    src = head if fmt == WIRE else head.get("source")
    return src if isinstance(src, dict) else None

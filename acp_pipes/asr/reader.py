"""Reading ASR streams: a file (or several streams back to back) as header + records.

What every consumer of ASR streams shares (acp-replay's ASR modes, ``--compare``, the
round trip): streams split at their headers, bad lines reported with file and line and
skipped without losing what came before or after, and an input cut short kept up to the
cut (:class:`UntilCut`). What a consumer keeps of each record is its own business.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import orjson

from acp_pipes.errors import InputError, Warn
from acp_pipes.io.lines import READ_ERRORS
from acp_pipes.io.lines import records as jsonl_records
from acp_pipes.io.streams import ASR, describe, header_format, judge
from acp_pipes.protocol.canonical import ParseError, parse_json, writable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["AsrStream", "UntilCut", "iter_streams", "read_streams"]

#: The native ID each record type is filed under by every reader of streams (replay,
#: --compare): ASR identifiers are strings (ASR-702), and one that is not (an array, an
#: object) cannot key anything, so its record is reported and skipped.
_NATIVE_ID: dict[object, str] = {  # (looked up by whatever JSON a record's type is)
    "message": "messageId", "tool_call": "callId", "tool_result": "callId",
    "plan": "planId", "terminal": "terminalId", "compaction": "compactionId"}


_STR_OR_NONE = frozenset({str, type(None)})
_ASR = (ASR,)


LONE_SURROGATE = "a string holds a lone surrogate (no UTF-8 form)"


def record_without_surrogates(raw: bytes) -> dict[str, Any] | None:
    """A record line orjson refuses that is still JSON for its lone surrogates alone:
    the record with each replaced by U+FFFD, as acp-asr stores such a frame; else None."""
    try:
        value, replaced = writable(parse_json(raw))
    except (ParseError, orjson.JSONEncodeError):
        return None
    return value if replaced else None  # else a number orjson refuses: no such record


def _not_a_string_id(rec: dict[str, Any]) -> str | None:
    """The identifier of ``rec`` that is present but not a string, if any (its name)."""
    v = rec.get("id")
    if v is not None and type(v) is not str:
        return "id"
    v = rec.get("supersedes")
    if v is not None and type(v) is not str:
        return "supersedes"
    t = rec.get("type")
    name = _NATIVE_ID.get(t)
    if name is not None:
        v = rec.get(name)
        if v is not None and type(v) is not str:
            return name
    elif t == "file_change":
        cause = rec.get("cause")
        if type(cause) is dict:
            v = cause.get("callId")
            if v is not None and type(v) is not str:
                return "cause.callId"
    return None


@dataclass
class AsrStream:
    """One ASR stream: its header and records (parsed), and where it came from."""

    header: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    source: str = "-"
    line: int = 1  # the header's line number

    @property
    def session_id(self) -> str:
        sid: str = self.header["sessionId"]  # iter_streams refuses a header without one
        return sid


def iter_streams(lines: Iterable[bytes], source: str, warn: Warn | None = None
                 ) -> Iterator[tuple[dict[str, Any], int, Iterator[dict[str, Any]]]]:
    """Each ASR stream in raw lines (bytes, LF optional) as (header, its line number, its
    records parsed as they are asked for), a header starting each; a stream's records are
    skipped if left unread when the next stream is asked for.

    A line that is not JSON (a torn last line after a crash: no LF) or not a JSON object
    is given to ``warn(source, line, message)`` and skipped, so what was read before and
    after it is kept; without ``warn`` it is an InputError naming the source and line.
    So is a record whose identifier (``id``, ``supersedes``, its native ID) is present
    but not a string. A line before the first header that is JSON but no ASR header
    (another stream kind) is always an InputError: the input is not an ASR stream."""
    native_id = _NATIVE_ID.get
    ok = _STR_OR_NONE
    #: the header that ended the last run of records, and its line
    nxt: list[tuple[dict[str, Any], int]] = []

    def bad(n: int, what: str, reason: object = None) -> None:
        if warn is None:
            raise InputError(source, n, f"{what}: {reason}" if reason else what)
        warn(source, n, f"{what}, skipped: {reason}" if reason else f"{what}, skipped")

    def surrogates(n: int, raw: bytes) -> dict[str, Any]:
        """JSON orjson refuses: read with each lone surrogate as U+FFFD, and said."""
        rec = record_without_surrogates(raw)
        if rec is None:
            raise ValueError(raw)
        if warn is None:
            raise InputError(source, n, LONE_SURROGATE)
        warn(source, n, f"{LONE_SURROGATE}: read as U+FFFD")
        return rec

    numbered = jsonl_records(lines, source, bad, fallback=surrogates)

    def records(headed: bool) -> Iterator[dict[str, Any]]:
        for n, _raw, rec in numbered:
            if type(rec) is not dict:
                bad(n, "not a JSON object")
                continue
            get = rec.get
            t = get("type")
            if t == "header":
                if header_format(rec) != ASR:
                    raise InputError(source, n, "not an ASR stream header")
                judge(rec, source, n, _ASR)  # its version
                if not isinstance(rec.get("sessionId"), str):
                    raise InputError(source, n, "ASR header without a sessionId")
                nxt.append((rec, n))
                return
            if not headed:
                raise InputError(source, n, f"expected an ASR stream, got {_kind_of(rec)}")
            key = native_id(t)
            if (get("id").__class__ not in ok or get("supersedes").__class__ not in ok
                    or (get(key).__class__ not in ok if key is not None
                        else t == "file_change")):
                field = _not_a_string_id(rec)  # which one (the common case never gets here)
                if field is not None:
                    bad(n, f"{_kind_of_value(t)} record whose {field} is not a string")
                    continue
            yield rec

    for _ in records(False):  # up to the first header (a record before it raises)
        pass
    while nxt:
        header, n = nxt.pop()
        recs = records(True)
        yield header, n, recs
        for _ in recs:
            pass


class UntilCut:
    """The lines of an input up to where it stops being readable (a .gz cut short, a bad
    disk): a recording that stopped there, as acp-fold and acp-asr read it. The read
    error is kept in :attr:`error` (``SOURCE:LINE: cannot read: ...``, LINE the first
    line not read) for the caller to report once what was read has been used. An error
    before any line was read (the file cannot be opened) is raised at once."""

    def __init__(self, lines: Iterable[bytes], source: str):
        self.lines = lines
        self.source = source
        self.error: InputError | None = None

    def __iter__(self) -> Iterator[bytes]:
        it = iter(self.lines)
        n = 0
        while True:
            try:
                raw = next(it)
            except StopIteration:
                return
            except InputError as e:
                if not n:
                    raise
                self.error = InputError(self.source, e.line or n + 1, e.message)
                return
            except READ_ERRORS as e:
                if not n:
                    raise InputError(self.source, 1, f"cannot read: {e}") from None
                self.error = InputError(self.source, n + 1, f"cannot read: {e}")
                return
            n += 1
            yield raw


def _kind_of_value(t: object) -> str:
    return t if isinstance(t, str) else "a"


def _kind_of(rec: dict[str, Any]) -> str:
    """What a first line that is no ASR header says the input is (for the refusal)."""
    fmt = header_format(rec)
    if fmt is not None or "jsonrpc" in rec:
        return describe(fmt)
    return "a record before any header (an ASR stream starts with its header line)"


def read_streams(lines: Iterable[bytes], source: str, warn: Warn | None = None
                 ) -> Iterator[AsrStream]:
    """ASR streams from raw lines (:func:`iter_streams`), every record kept."""
    for header, n, recs in iter_streams(lines, source, warn):
        yield AsrStream(header, list(recs), source, n)

"""Reading what acp-fold and acp-asr accept: wire logs, frames streams, fold streams.

Each wire log or frames stream is one connection (the ``<n>`` of ASR-716): it gets a
:class:`~acp_pipes.fold.core.Folder` of its own and becomes one fold stream. The fold
needs only each frame's direction, time and parsed message, so wire and frames records
are read directly (no canonical hashing on this path). A line that is not JSON is
reported with its file and line and skipped; what came before it is kept. So is a frame
whose JSON no record could hold (a lone surrogate, an integer beyond 64 bits, nesting
deeper than :data:`MAX_DEPTH`): the fold's output must stay writable JSONL.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any

import orjson

from acp_pipes.errors import InputError, Warn
from acp_pipes.fold.core import Folder
from acp_pipes.fold.state import States
from acp_pipes.fold.timeline import Record
from acp_pipes.io.lines import (
    READ_ERRORS,
    display_name,
    json_error,
    open_source,
    records,
    unparsable,
)
from acp_pipes.io.live import Live
from acp_pipes.io.streams import FOLD, FRAMES, VERSIONS, WIRE, describe, header_format, judge
from acp_pipes.io.wire import is_end, is_event
from acp_pipes.protocol.canonical import ParseError, parse_json, writable

__all__ = ["FOLD_VERSION", "fold", "fold_header", "fold_paths", "read_source"]

FOLD_VERSION = VERSIONS[FOLD]

def fold_header(connection: int, source: Any, snapshots: bool = False) -> Record:
    return {"format": FOLD, "version": FOLD_VERSION, "connection": connection,
            "snapshots": snapshots, "source": source}


#: A frame nested deeper than this is not folded: its values could not be written
#: (orjson writes at most 254 levels; records wrap a message's values a few levels deep).
MAX_DEPTH = 200


#: parse_frame's problem for a frame it gives with lone surrogates replaced: folded, not
#: skipped, and the loss declared in its session (LOSS_SURROGATES).
SURROGATES = "a string holds a lone surrogate (no UTF-8 form): stored as U+FFFD"


def parse_raw(rec: dict[str, Any]) -> Any:
    """The parsed JSON-RPC message of a wire or frame record (None if it is not JSON)."""
    return parse_frame(rec)[0]


def parse_frame(rec: dict[str, Any]) -> tuple[Any, str | None]:
    """``(message, problem)`` for a wire or frame record: problem is None for a message
    the fold can take, otherwise what to report (the frame is skipped)."""
    raw = rec.get("raw")
    if raw.__class__ is not str:
        b64: Any = rec.get("raw_b64")  # a string, or b64decode's TypeError
        try:
            raw = base64.b64decode(b64, validate=True)
        except (TypeError, ValueError):
            return None, "frame is not JSON"
    try:
        msg = orjson.loads(raw)
    except orjson.JSONDecodeError:
        # JSON orjson refuses: a lone-surrogate escape, a number beyond a double
        try:
            msg = parse_json(raw)
        except ParseError as e:
            return None, f"frame is {unparsable(True, e)}"
        try:
            msg, replaced = writable(msg)
        except orjson.JSONEncodeError as e:  # an integer beyond 64 bits
            return msg, f"frame cannot be folded ({e})"
        return msg, SURROGATES if replaced else None
    return msg, too_deep(msg, raw)


def too_deep(msg: Any, raw: str | bytes) -> str | None:
    """The problem of a message nested deeper than MAX_DEPTH, or None. Only a frame with
    that many brackets can be: the parsed value is walked only then."""
    if len(raw) < 2 * MAX_DEPTH or (raw.count("[") + raw.count("{") if isinstance(raw, str)
                                    else raw.count(b"[") + raw.count(b"{")) < MAX_DEPTH:
        return None
    level = [msg]
    for _ in range(MAX_DEPTH):
        nxt: list[Any] = []
        for v in level:
            if v.__class__ is dict:
                nxt.extend(x for x in v.values() if x.__class__ is dict or x.__class__ is list)
            elif v.__class__ is list:
                nxt.extend(x for x in v if x.__class__ is dict or x.__class__ is list)
        if not nxt:
            return None
        level = nxt
    return f"frame cannot be folded (nested deeper than {MAX_DEPTH} levels)"


_DEEP = 2 * MAX_DEPTH


def fold(frames: Iterable[dict[str, Any]], *, connection: int = 0, snapshots: bool = False,
         warn: Warn | None = None, states: States | None = None, source: str = "-"
         ) -> Iterator[Record]:
    """The pure core: frame (or wire) records of one connection -> fold records.
    A record may carry the parsed message as ``msg`` to skip parsing ``raw``.
    ``states``: the entity states shared with the run's other connections (the caller
    closes them); by default the connection's own. ``warn`` is told of a frame skipped
    as from ``source``, line 0 (frames here have no lines)."""
    folder = Folder(connection, snapshots=snapshots, warn=warn, states=states, source=source)
    feed = folder.feed
    for fr in frames:
        problem = None
        if "msg" in fr:
            msg = fr["msg"]
        else:
            msg, problem = parse_frame(fr)
            if problem is not None:
                if warn is not None:
                    warn(source, 0, problem if problem is SURROGATES else f"{problem}, skipped")
                if problem is not SURROGATES:
                    continue
        yield from feed(fr["seq"], fr.get("t"), fr["dir"], msg)
        if problem is SURROGATES:
            folder.replaced(fr["seq"], fr.get("t"), msg)
    yield from folder.finish()


def read_source(path: str, warn: Warn) -> Iterator[tuple[str, Any, int]]:
    """``("header", (format, header), line)`` (the header migrated to the current
    version), then ``("frame", rec, line)`` for wire and frames records or ``("fold",
    rec, line)`` for fold records, and ``("end", rec, line)`` for a wire log's end
    record."""
    source = display_name(path)
    mode: str | None = None

    def bad(number: int, what: str, e: Exception) -> None:
        _not_json(source, number, what, e, mode, warn)

    stream = open_source(path)
    try:
        for number, _raw, rec in records(stream, source, bad):
            if rec.__class__ is dict:
                if "dir" in rec and (mode == WIRE or mode == FRAMES):
                    yield "frame", rec, number
                    continue
                if "ev" in rec and mode == FOLD:
                    yield "fold", rec, number
                    continue
            mode = yield from _other(rec, mode, source, number, warn)
    finally:
        if path != "-":
            stream.close()


_FOLDED = (WIRE, FRAMES, FOLD)  # the streams acp-fold and acp-asr read


def _not_json(source: str, number: int, what: str, e: Exception, mode: str | None,
              warn: Warn) -> None:
    """A line that is not JSON (``what``: :func:`acp_pipes.io.lines.unparsable`'s word):
    before any header the input is no stream this reads; after one, it is skipped."""
    if mode is None:
        raise InputError(source, number, f"{what}: {e}")
    warn(source, number, f"{what}, skipped: {e}")


def _other(rec: Any, mode: str | None, source: str, number: int,
           warn: Warn) -> Generator[tuple[str, Any, int], None, str | None]:
    """A line that is not a record of the current stream: a header (judged, migrated),
    the end record, or a problem."""
    head = judge(rec, source, number, _FOLDED, "a wire log, frames or folded entities")
    if head is not None:
        fmt: str = head["format"]
        if fmt == FRAMES and head.get("source") is None:
            raise InputError(source, number,
                             "frames of a bare ACP stream (acp-frame --dir): one direction "
                             "only, and the fold needs both: record the session with acp-tee")
        conn = head.get("connection", 0) if fmt == FOLD else 0
        if conn.__class__ is not int or conn < 0:
            raise InputError(source, number, "a fold header's connection is a number "
                             f"(0, 1, ...), not {orjson.dumps(conn).decode()}")
        yield "header", (fmt, head), number
        return fmt
    if mode in (WIRE, FRAMES) and is_end(rec):
        yield "end", rec, number
        return mode
    if mode == WIRE and is_event(rec):  # a remote transport's event: no frame
        return mode
    if mode is None:
        raise InputError(source, number,
                         "expected a wire log, frames or folded entities (a bare ACP "
                         "stream has one direction only: record it with acp-tee)")
    warn(source, number, f"not a {describe(mode)} record, skipped")
    return mode


def fold_paths(paths: Iterable[str], *, snapshots: bool = False, warn: Warn,
               connection: int = 0, live: Live | None = None,
               states: States | None = None) -> Iterator[Record]:
    """Fold streams (header, then records) for every connection in ``paths``, in order;
    fold input passes through as it is. ``connection`` numbers the first one. ``live``
    reads inputs still being written (:class:`acp_pipes.io.live.Live`). Every connection
    folds onto one entity state per session (``states``: the caller's, shared with its
    other calls; by default this call's own): an update patches the entity whatever
    connection it arrives on (ASR-704, ASR-706).

    The reading of :func:`read_source` (:func:`acp_pipes.io.lines.records`) is inlined
    here, a measured fast path (BENCHMARKS.md, acp-asr: "fold + asr within 5× of parsing
    alone"): a wire log has one line per frame, and a generator layer per line costs as
    much as the fold of a chunk. What it says of a line that is not JSON is
    :func:`_not_json`, as read_source says it."""
    if states is None:
        own = States()
        try:
            yield from fold_paths(paths, snapshots=snapshots, warn=warn,
                                  connection=connection, live=live, states=own)
        finally:
            own.close()
        return
    conn = connection
    for path in paths:
        conn = yield from _fold_path(path, conn, snapshots, warn, live, states)


def _fold_path(path: str, conn: int, snapshots: bool, warn: Warn, live: Live | None,
               states: States) -> Generator[Record, None, int]:
    """One input of :func:`fold_paths`, its first new connection numbered ``conn``;
    returns the number of the next."""
    loads = orjson.loads
    JSONDecodeError = orjson.JSONDecodeError
    source = display_name(path)
    number = last = 0
    cut: InputError | KeyboardInterrupt | None

    def fwarn(s: str, _line: int, msg: str) -> None:
        warn(s, last, msg)  # noqa: B023 - late binding: the line of the frame being folded

    inp = _Input(source, conn, snapshots, warn, fwarn, states)
    feed = mode = None
    stream = open_source(path, live)
    try:
        for raw in stream:
            number += 1
            try:
                rec = loads(raw)
            except JSONDecodeError as e:  # as jsonl.records judges it
                if raw.strip():
                    _not_json(source, number, unparsable(raw.endswith(b"\n"), e),
                              ValueError(json_error(raw, e)), mode, warn)
                continue
            if rec.__class__ is dict:
                if feed is not None and "dir" in rec:
                    # the hot path: one wire or frames record
                    last = number
                    out = _wire_frame(rec, feed, inp.folder, source, number, warn)
                    if out:
                        yield from out
                    continue
                if mode == FOLD and "ev" in rec:
                    yield rec
                    continue
            yield from inp.other(rec, number)
            feed, mode = inp.feed, inp.mode
    except READ_ERRORS as e:  # a .gz cut short, a bad disk: the recorder stopped here
        cut = InputError(source, number + 1, f"cannot read: {e}")
    except KeyboardInterrupt as e:  # Ctrl-C, the end of --follow: as at the input's end
        cut = e
    else:
        cut = None
    finally:
        if path != "-":
            stream.close()
    yield from inp.close()  # what was read is kept, as at "recorder stops"
    if cut is not None:
        raise cut
    return inp.conn


class _Input:
    """What :func:`_fold_path` keeps between the headers of one input: the stream's
    format, the connection being folded (its Folder), the next connection's number."""

    __slots__ = ("conn", "feed", "folder", "fwarn", "mode", "snapshots", "source", "states",
                 "warn")

    def __init__(self, source: str, conn: int, snapshots: bool, warn: Warn, fwarn: Warn,
                 states: States):
        self.source = source
        self.conn = conn
        self.snapshots = snapshots
        self.warn = warn
        self.fwarn = fwarn  # says the line of the frame being folded
        self.states = states
        self.mode: str | None = None
        self.folder: Folder | None = None
        self.feed: Callable[[int, Any, str, Any], list[Record]] | None = None

    def other(self, rec: Any, number: int) -> Iterator[Record]:
        """A line that is no record of the connection being folded: the recorder's end
        record, a header (a new connection; a fold stream passes through), or one that
        is said and skipped (:func:`_other`)."""
        if rec.__class__ is dict and rec.get("end") is True and self.folder is not None:
            yield from self.close()  # the recorder's end record: it stopped
            return
        if header_format(rec) is None:
            for _ in _other(rec, self.mode, self.source, number, self.warn):
                pass
            return
        _, (mode, rec), _ = next(_other(rec, self.mode, self.source, number, self.warn))
        self.mode = mode
        yield from self.close()
        if mode == FOLD:
            yield rec
            self.conn = max(self.conn, rec.get("connection", 0) + 1)
            return
        yield fold_header(self.conn, rec.get("source") if mode == FRAMES else rec,
                          self.snapshots)
        self.folder = Folder(self.conn, snapshots=self.snapshots, warn=self.fwarn,
                             states=self.states, source=self.source)
        self.feed = self.folder.feed
        self.conn += 1

    def close(self) -> Iterator[Record]:
        """The connection being folded ends here: what it holds is written."""
        if self.folder is not None:
            yield from self.folder.finish()
            self.folder = self.feed = None


def _wire_frame(rec: dict[str, Any], feed: Callable[[int, Any, str, Any], list[Record]],
                folder: Any, source: str, number: int, warn: Warn) -> list[Record] | None:
    """One wire or frames record folded (its records, if it completes any); a record
    that is no frame, or whose message no record could hold, is said and skipped."""
    seq = rec.get("seq")
    d = rec.get("dir")
    t = rec.get("t")
    if seq.__class__ is not int or (d != "a2c" and d != "c2a") or (
            t is not None and t.__class__ is not int):
        warn(source, number, "not a wire record (needs seq, t, dir), skipped")
        return None
    text = rec.get("raw")
    if text.__class__ is str:
        try:
            msg = _loads(text)
        except _JSONDecodeError:
            msg, problem = parse_frame(rec)
        else:
            problem = too_deep(msg, text) if len(text) >= _DEEP else None
    else:
        msg, problem = parse_frame(rec)
    if problem is None:
        return feed(seq, t, d, msg)
    if problem is not SURROGATES:
        warn(source, number, f"{problem}, skipped")
        return None
    warn(source, number, problem)
    out = feed(seq, t, d, msg)
    folder.replaced(seq, t, msg)
    return out


_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError

"""Traces -> steps: frame records made step ids.

A trace is a wire log, a frames stream or bare ACP JSONL. A frames stream (acp-frame's
output, told by its header) is trusted: its records' ``hash``, ``kind``, ``method`` and
``sessionId`` are used as written, so each line is parsed once and nothing is hashed
again; anything else is framed here (:func:`acp_pipes.frame.core.frame_chunks`).

At a million steps the cost is what is done per line besides parsing, so that is kept
to a few dict lookups on the record while it is fresh in the cache (batches of records
split into columns with ``map`` measured slower: the records have left the cache by the
time their columns are taken).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import orjson

from acp_pipes.align.builder import UNANSWERED, Builder
from acp_pipes.align.table import REPLIES, StepTable
from acp_pipes.errors import InputError, Warn
from acp_pipes.io.lines import READ_ERRORS, json_error, unparsable
from acp_pipes.io.streams import FRAMES, WIRE, header_format, judge
from acp_pipes.io.wire import is_end, is_event

if TYPE_CHECKING:
    from acp_pipes.sameness.normalize import Normalizer

__all__ = ["trace_steps", "until_cut"]

_HASH_TYPES = frozenset((str, type(None)))
_KINDS = frozenset(("request", "response", "error", "notification", "invalid_json",
                    "not_jsonrpc"))
_DIRS = frozenset(("c2a", "a2c"))


def trace_steps(
    first: bytes,
    first_number: int,
    stream: Iterable[bytes],
    cuts: list[InputError],
    head: Any,
    table: StepTable,
    normalizer: Normalizer,
    *,
    source: str,
    session: str | None,
    warn: Warn | None,
    direction: str | None,
    model: bool = False,
    start: int = 0,
) -> Builder:
    """The steps of a trace whose first non-blank line ``first`` (number
    ``first_number``, parsed: ``head``) has been read from ``stream``, which holds the
    other lines: ``(step ids, line numbers, chains, positions of each chain, request
    latency per method)`` (:meth:`acp_pipes.frame.latency.Latency.methods`, measured as the
    frames go by: no second pass), as the builder's fields. With ``model`` (the default
    comparison, :mod:`acp_pipes.align.model`) the steps are the frames' own texts, in
    causal order, each reply linked to its request (``start``: the byte offset of
    ``first``, for reading lines back). Where
    the stream stops being readable (a .gz cut short) the read error is appended to
    ``cuts`` and the steps are those before it."""
    b = Builder(table, normalizer, session, model)
    fmt = header_format(head)
    try:
        if fmt == FRAMES and (normalizer.identity or model) and judge(
                head, source, first_number, _FRAMED, "a wire log or ACP JSONL"):
            if model:
                _trusted_model(b, first_number, stream, cuts, source, warn, direction,
                               start + len(first))
            else:
                _trusted(b, first_number, stream, cuts, source, warn, direction)
        else:
            lines = until_cut(stream, first_number, source, cuts)
            _framed(b, _numbered(first, first_number, lines), source, warn, direction)
    except ValueError as e:  # a bare stream without a direction
        raise InputError(source, 0, str(e)) from None
    if session is not None and not b.seq:
        raise InputError(source, 0, f"no frames of session {session!r}")
    if model:
        b.finish()
    return b


_FRAMED = (WIRE, FRAMES)


def until_cut(stream: Iterable[bytes], number: int, source: str, cuts: list[InputError]
               ) -> Generator[bytes, None, None]:
    """The lines of ``stream`` (line ``number`` was the last read) up to where it stops
    being readable (a .gz cut short, a bad disk): the read error, naming ``source`` and
    the first line not read, is appended to ``cuts`` and the lines end there, as if the
    recording stopped (as acp-fold and acp-asr read it)."""
    try:
        for chunk in stream:
            number += 1
            yield chunk
    except READ_ERRORS as e:
        cuts.append(InputError(source, number + 1, f"cannot read: {e}"))


def _numbered(first: bytes, first_number: int, lines: Iterator[bytes]
              ) -> Iterator[tuple[int, bytes]]:
    yield first_number, first
    yield from enumerate(lines, first_number + 1)


def _framed(b: Builder, numbered: Iterator[tuple[int, bytes]], source: str,
            warn: Warn | None, direction: str | None, at: int | None = None) -> None:
    """Frame the lines here (a wire log, a bare stream, a frames stream with --ignore),
    as acp-frame would, and add the frames in batches. ``at``: the byte offset of the
    first line, when the steps are marked by offset (:attr:`Builder.offsets`)."""
    from acp_pipes.frame.core import frame_chunks

    where = [0]

    def chunks() -> Iterator[bytes]:
        # frame_chunks yields a frame right after reading its line: this is that line
        for number, chunk in numbered:
            where[0] = number
            yield chunk

    if at is not None:
        offset = [at]

        def by_offset() -> Iterator[bytes]:
            for number, chunk in numbered:
                where[0] = offset[0]
                offset[0] += len(chunk)
                del number
                yield chunk

        chunks = by_offset  # noqa: F811 - the same lines, marked by offset

    add = b.adder()
    for fr in frame_chunks(chunks(), source, warn=warn, direction=direction):
        add(fr, where[0])


def _trusted(b: Builder, number: int, stream: Iterable[bytes], cuts: list[InputError],
             source: str, warn: Warn | None, direction: str | None) -> None:
    """Add a frames stream's records as they are (the header, line ``number``, is read):
    one parse a line, nothing hashed. A record that lacks what acp-frame writes is
    framed again, a line that is not JSON is reported and skipped, and from a header of
    another kind on (a wire log appended to the file) the rest is framed. The stream is
    read directly, not through a generator (:func:`acp_pipes.io.lines.records`, whose
    judgement of a line that is not JSON it shares: :func:`acp_pipes.io.lines.unparsable`):
    a measured fast path (BENCHMARKS.md, acp-align: "two frames streams (200k steps)
    within 2× of a bare orjson loop over both"), where that costs ~10% at a million
    lines; and a record is made a step here, as :meth:`Builder.adder` makes one, with
    each field read once and no call a line: that was ~8% of the whole at 200,000 lines."""
    loads, JSONDecodeError = orjson.loads, orjson.JSONDecodeError
    dirs, kinds, hash_types = _DIRS, _KINDS, _HASH_TYPES
    add = b.adder()
    reframe = _Reframer(source, warn, add)
    ids, new = b.table.ids, b.table.add
    session = b.session
    seq = b.seq
    push, mark = seq.append, b.lines.append
    replies, unanswered = REPLIES, UNANSWERED
    timed = b.latency.add
    last_d = last_sid = at = None
    n = number
    try:
        for n, chunk in enumerate(stream, number + 1):  # noqa: B007 - n after the loop
            try:
                rec = loads(chunk)
            except JSONDecodeError as e:
                _skipped(warn, source, n, chunk, e)
                continue
            if rec.__class__ is dict and (d := rec.get("dir")) in dirs:
                kind = rec.get("kind")
                h = rec.get("hash")
                if kind in kinds and h.__class__ in hash_types:
                    sid = rec.get("sessionId")
                    if session is not None and sid != session:
                        continue
                    key = d + h if h is not None else d
                    if kind != "notification":
                        timed(rec)
                        if kind in replies and rec.get("method") is None:
                            key = unanswered + key
                    step = ids.get(key)
                    if step is None:
                        step = new(key, h, (d, kind, rec.get("method")))
                    if sid != last_sid or d != last_d:
                        last_d, last_sid = d, sid
                        at = b.chain_pos[b.chain_index((d, sid))].append
                    at(len(seq))  # type: ignore[misc]  # set at the first frame (d is a str)
                    push(step)
                    mark(n)
                    continue
                reframe(rec, n, n)
                continue
            if not _not_a_frame(b, rec, chunk, n, stream, cuts, source, warn, direction):
                return
    except READ_ERRORS as e:
        cuts.append(InputError(source, n + 1, f"cannot read: {e}"))


def _skipped(warn: Warn | None, source: str, n: int, chunk: bytes, e: ValueError,
             exact: bool = True) -> None:
    """Report a line that is not JSON (``exact``: with where it broke), skipped."""
    if warn is not None and chunk.strip():
        if exact:
            what = unparsable(chunk.endswith(b"\n"), e)
            warn(source, n, f"{what}, frame record skipped: {json_error(chunk, e)}")
        else:
            what = unparsable(chunk.endswith(b"\n"))
            warn(source, n, f"{what}, frame record skipped: {e}")


class _Reframer:
    """A frame record not as acp-frame writes it, framed again (a framer made at the
    first one) and added."""

    __slots__ = ("source", "warn", "add", "framer")

    def __init__(self, source: str, warn: Warn | None,
                 add: Callable[[dict[str, Any], int], None]):
        self.source, self.warn, self.add = source, warn, add
        self.framer: Any = None

    def __call__(self, rec: dict[str, Any], n: int, at: int) -> None:
        if self.framer is None:
            from acp_pipes.frame.core import Framer

            self.framer = Framer(self.source, self.warn)
        rec = self.framer.frame(rec, n)
        if rec is not None:
            self.add(rec, at)


#: :meth:`_ModelRecords.add`'s answer for a line it took (a step, or skipped)
_DONE = object()


class _ModelRecords:
    """Lines of a frames stream the model reads parsed (those not read by their layout,
    :func:`_trusted_model`): a notification is a lookup of its text, the rest go through
    :meth:`Builder.adder`."""

    def __init__(self, b: Builder, source: str, warn: Warn | None):
        table = b.table
        self.texts, self.new_text, self.chain_of = table.texts, b.new_text, table.text_chain
        self.session = b.session
        self.keep = _KeepChains(table.chain_ids, b.session)
        self.push, self.mark = b.seq.append, b.lines.append
        self.source, self.warn = source, warn
        self.add_rec = b.adder()
        self.reframe = _Reframer(source, warn, self.add_rec)

    def add(self, chunk: bytes, n: int, here: int) -> Any:
        """Take line ``n`` (at byte ``here``): :data:`_DONE`, or the parsed value of a
        line that is no frame record."""
        try:
            rec = orjson.loads(chunk)
        except orjson.JSONDecodeError as e:
            _skipped(self.warn, self.source, n, chunk, e, exact=False)
            return _DONE
        if rec.__class__ is not dict or (tab := self.texts.get(rec.get("dir", ""))) is None:
            return rec
        kind = rec.get("kind")
        own = rec.get("hash")
        if kind == "notification" and own.__class__ is str:
            step = tab.get(own.encode())
            if step is None:
                step = self.new_text(rec, rec["dir"], own)
            if self.session is None or self.chain_of[step] in self.keep:
                self.push(step)
                self.mark(here)
        elif kind in _KINDS and own.__class__ in _HASH_TYPES:
            self.add_rec(rec, here)
        else:
            self.reframe(rec, n, here)
        return _DONE


class _KeepChains:
    """The chains (ids) of one session, as the chain table grows: ``c in keep``."""

    __slots__ = ("ids", "session", "known", "seen")

    def __init__(self, ids: dict[tuple[str, str | None], int], session: str | None):
        self.ids, self.session = ids, session
        self.known: set[int] = set()
        self.seen = 0

    def __contains__(self, c: object) -> bool:
        if len(self.ids) != self.seen:
            self.known = {v for (_, sid), v in self.ids.items() if sid == self.session}
            self.seen = len(self.ids)
        return c in self.known


def _trusted_model(b: Builder, number: int, stream: Iterable[bytes],
                   cuts: list[InputError], source: str, warn: Warn | None,
                   direction: str | None, start: int = 0) -> None:
    """:func:`_trusted` for the model (see :class:`Builder`): a notification, nine
    frames in ten, costs one parse, one lookup of its hash among the texts seen, and two
    appends (its chain is its text's, taken in bulk at the end); the rest go through
    :meth:`Builder.adder`. Nothing is hashed: the model hashes only what the runs do
    not share (:mod:`acp_pipes.align.model`)."""
    b.lines = array("Q")  # each step's byte offset (before the adder takes its append)
    b.offsets = True
    table = b.table
    new_laid_out, meta = b.new_laid_out, table.meta
    seen = {d.encode(): tab for d, tab in table.texts.items()}
    push, mark = b.seq.append, b.lines.append
    record = _ModelRecords(b, source, warn).add
    n = number
    at = start  # where the next line begins
    # a notification as acp-frame writes it is read by its layout, not parsed (below)
    laid_out = b.session is None
    try:
        for n, chunk in enumerate(stream, number + 1):  # noqa: B007 - n after the loop
            here = at
            size = len(chunk)
            at += size
            if laid_out and chunk.endswith(_END) and chunk.startswith(_HASH_AT_END, size - 83):
                i = chunk.find(_DIR, 7, 64) + 7
                d = _A2C if chunk.startswith(_A2C_, i) else \
                    _C2A if chunk.startswith(_C2A_, i) else None
                if d is not None:
                    h = chunk[-74:-3]
                    step = seen[d].get(h)
                    if step is None:
                        step = new_laid_out(chunk, d, h)
                    elif meta[step][1] != "notification":  # a request, a reply
                        step = None
                    if step is not None:
                        push(step)
                        mark(here)
                        continue
            rec = record(chunk, n, here)
            if rec is _DONE:
                continue
            if not _not_a_frame(b, rec, chunk, n, stream, cuts, source, warn, direction,
                                here):
                return
    except READ_ERRORS as e:
        cuts.append(InputError(source, n + 1, f"cannot read: {e}"))


#: The layout acp-frame writes a frame's record in: ``{"seq":..., "dir":"a2c", "raw":...,
#: ..., "hash":"blake3:<64 hex>"}`` and a newline. A line whose direction (within its
#: first 64 bytes) and hash (its end) are those of a notification text seen before is
#: that notification: its hash says what the message is, its kind included, and a
#: notification needs nothing else of its record. In the raw text every quote is
#: escaped, so these, with their unescaped quotes, are the record's own keys.
_DIR = b'"dir":"'
_A2C, _C2A = b"a2c", b"c2a"
_A2C_, _C2A_ = b'a2c"', b'c2a"'
_HASH_AT_END = b',"hash":"blake3:'
_END = b'"}\n'


def _not_a_frame(b: Builder, rec: Any, chunk: bytes, n: int, stream: Iterable[bytes],
                 cuts: list[InputError], source: str, warn: Warn | None,
                 direction: str | None, at: int | None = None) -> bool:
    """A line of a frames stream that is no frame record: the header of the next frames
    stream (trusted as the first), of a wire log (the rest framed here: returns False),
    or a line reported and skipped; anything else is no trace (InputError)."""
    fmt = header_format(rec)
    if fmt == FRAMES and judge(rec, source, n, _FRAMED, "a wire log or ACP JSONL"):
        b.latency.new_stream()
        return True
    if fmt == WIRE:  # the framer judges it and frames the rest
        rest = until_cut(stream, n, source, cuts)
        _framed(b, _numbered(chunk, n, rest), source, warn, direction, at)
        return False
    if fmt is None:
        if warn is not None and not is_end(rec) and not is_event(rec):
            warn(source, n, "not a frame record (needs seq, t, dir), skipped")
        return True
    judge(rec, source, n, _FRAMED, "a wire log or ACP JSONL")  # raises: no trace
    return True

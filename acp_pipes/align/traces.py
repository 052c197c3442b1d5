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

from acp_pipes.align.table import REPLIES, StepTable
from acp_pipes.errors import InputError, Warn
from acp_pipes.lines import READ_ERRORS, json_error, unparsable
from acp_pipes.redact import may_hold_secrets
from acp_pipes.streams import FRAMES, WIRE, header_format, judge
from acp_pipes.wire import is_end, is_event

if TYPE_CHECKING:
    from acp_pipes.align.minted import Minted
    from acp_pipes.normalize import Normalizer

__all__ = ["UNANSWERED", "trace_steps", "until_cut"]

#: Before the key of a reply that answers no request seen before it.
UNANSWERED = "unanswered:"
_HASH_TYPES = frozenset((str, type(None)))
_KINDS = frozenset(("request", "response", "error", "notification", "invalid_json",
                    "not_jsonrpc"))
_DIRS = frozenset(("c2a", "a2c"))


class _Builder:
    """A trace's steps, frame by frame: step ids (``seq``), line numbers, and the
    positions of each chain (one direction of one session)."""

    def __init__(self, table: StepTable, normalizer: Normalizer, session: str | None,
                 preset: Minted | None = None):
        self.table = table
        self.hash_frame = None if normalizer.identity else normalizer.hash_frame
        self.normalizer = normalizer
        self.preset = preset
        #: per step, its minted identifiers (:mod:`acp_pipes.align.minted`), with a preset
        self.minted: list[tuple | None] | None = [] if preset is not None else None
        #: with a preset, a reply that answers no request seen yet waits for it:
        #: ``(dir of the request, id) -> index of the reply``; ``moves``: reply index ->
        #: index of the request it follows (causal order, see :func:`causal_order`)
        self.waiting: dict[tuple[str, Any], int] = {}
        self.moves: dict[int, tuple[int, str | None]] = {}
        self.conceal_frame = normalizer.hash_frame  # a frame that may hold a secret
        self.session = session
        self.seq: list[int] = []
        self.lines = array("L")
        self.chains: list[tuple[str, str | None]] = []
        self.chain_ids: dict[tuple[str, str | None], int] = {}
        self.chain_pos: list[array] = []
        from acp_pipes.frame.latency import Latency

        self.latency = Latency(turns=False)  # how long each method took (for the JSON)

    def adder(self) -> Callable[[dict[str, Any], int], None]:
        """``add(frame, line)``: one frame record (``dir`` c2a/a2c, ``kind`` a frame
        kind, ``hash`` a string or null) made a step. A closure over locals, not a
        method: this runs once a frame, and at a million frames every lookup counts."""
        table = self.table
        ids, new = table.ids, table.add
        hash_frame = self.hash_frame
        conceal_frame = self.conceal_frame
        session = self.session
        push, mark = self.seq.append, self.lines.append
        seq = self.seq
        chain = self._chain
        replies, unanswered = REPLIES, UNANSWERED
        last: list[Any] = [None, None, None]  # dir, session, positions.append of the chain
        timed = self.latency.add
        preset = self.preset
        normalizer = self.normalizer
        minted = self.minted
        waiting, moves = self.waiting, self.moves

        def add(rec: dict[str, Any], number: int) -> None:
            sid = rec.get("sessionId")
            if session is not None and sid != session:
                return
            d = rec["dir"]
            kind = rec.get("kind")
            if preset is not None:
                h, found = preset.hash_frame(rec, normalizer)
                minted.append(found)  # type: ignore[union-attr]  # a list with a preset
                if kind == "request" and waiting:
                    early = waiting.pop((d, _id_key(rec.get("id"))), None)
                    if early is not None:
                        moves[early] = (len(seq), sid)
                elif kind in replies and rec.get("method") is None:
                    waiting[("c2a" if d == "a2c" else "a2c", _id_key(rec.get("id")))] = \
                        len(seq)
            elif hash_frame is not None:
                h = hash_frame(rec)
            else:  # secrets never count: a frame that may hold one is hashed concealed
                raw = rec.get("raw")
                h = conceal_frame(rec) if rec.get("redacted") or (
                    raw.__class__ is str and may_hold_secrets(raw)) else rec.get("hash")
            # the key: direction and hash in one string (a string is the cheapest dict
            # key there is); a reply that answers no request seen has a key of its own
            key = d + h if h is not None else d
            if kind != "notification":  # most frames are: nothing more to look at
                timed(rec)  # no turns: a notification has no latency
                if kind in replies and rec.get("method") is None:
                    key = unanswered + key
            step = ids.get(key)
            if step is None:
                step = new(key, h, (d, kind, rec.get("method")))
            if sid != last[1] or d != last[0]:
                last[0], last[1], last[2] = d, sid, self.chain_pos[chain((d, sid))].append
            last[2](len(seq))
            push(step)
            mark(number)

        return add

    def _chain(self, key: tuple[str, str | None]) -> int:
        c = self.chain_ids.get(key)
        if c is None:
            c = self.chain_ids[key] = len(self.chains)
            self.chains.append(key)
            self.chain_pos.append(array("L"))
        return c


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
    preset: Minted | None = None,
) -> _Builder:
    """The steps of a trace whose first non-blank line ``first`` (number
    ``first_number``, parsed: ``head``) has been read from ``stream``, which holds the
    other lines: ``(step ids, line numbers, chains, positions of each chain, request
    latency per method)`` (:meth:`acp_pipes.frame.latency.Latency.methods`, measured as the
    frames go by: no second pass), as the builder's fields. With ``preset`` (the default
    comparison, :mod:`acp_pipes.align.minted`) each frame is hashed under it and the
    steps are put in causal order (:func:`causal_order`). Where
    the stream stops being readable (a .gz cut short) the read error is appended to
    ``cuts`` and the steps are those before it."""
    b = _Builder(table, normalizer, session, preset)
    fmt = header_format(head)
    try:
        if fmt == FRAMES and normalizer.identity and judge(
                head, source, first_number, _FRAMED, "a wire log or ACP JSONL"):
            _trusted(b, first_number, stream, cuts, source, warn, direction)
        else:
            lines = until_cut(stream, first_number, source, cuts)
            _framed(b, _numbered(first, first_number, lines), source, warn, direction)
    except ValueError as e:  # a bare stream without a direction
        raise InputError(source, 0, str(e)) from None
    if session is not None and not b.seq:
        raise InputError(source, 0, f"no frames of session {session!r}")
    if b.moves:
        causal_order(b)
    return b


_FRAMED = (WIRE, FRAMES)


def _id_key(rid: Any) -> tuple[str, Any]:
    """A JSON-RPC id as a dict key (``1`` and ``"1"`` are two ids)."""
    return (rid.__class__.__name__, rid)


def causal_order(b: _Builder) -> None:
    """Put each reply that came before the request it answers (a client's answer written
    before the agent's request reached the log: two pipes, two threads) right after that
    request, and give it the key of a reply that answers (its request's method): a
    response follows its request, whatever order the pipes interleaved them in."""
    n = len(b.seq)
    after: dict[int, list[int]] = {}
    for reply, (request, _) in b.moves.items():
        after.setdefault(request, []).append(reply)
    order: list[int] = []
    for i in range(n):
        if i in b.moves:
            continue
        order.append(i)
        if i in after:
            order.extend(sorted(after[i]))
    chain_of = array("L", [0]) * n
    for c, pos in enumerate(b.chain_pos):
        for i in pos:
            chain_of[i] = c
    table = b.table
    seq, lines = b.seq, b.lines
    for reply, (request, sid) in b.moves.items():
        step = seq[reply]
        d, kind, _ = table.meta[step]
        h = table.hashes[step]
        key = d + h if h is not None else d
        method = table.meta[seq[request]][2]
        new = table.ids.get(key)
        if new is None:
            new = table.add(key, h, (d, kind, method))
        seq[reply] = new
        chain_of[reply] = b._chain((d, sid))  # the session of the request it answers
    b.seq = [seq[i] for i in order]
    b.lines = array("L", [lines[i] for i in order])
    if b.minted is not None:
        b.minted = [b.minted[i] for i in order]
    chains, b.chains, b.chain_ids, b.chain_pos = b.chains, [], {}, []
    for new_i, old_i in enumerate(order):  # chains rebuilt in order (none left empty)
        b.chain_pos[b._chain(chains[chain_of[old_i]])].append(new_i)


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


def _framed(b: _Builder, numbered: Iterator[tuple[int, bytes]], source: str,
            warn: Warn | None, direction: str | None) -> None:
    """Frame the lines here (a wire log, a bare stream, a frames stream with --ignore),
    as acp-frame would, and add the frames in batches."""
    from acp_pipes.frame.core import frame_chunks

    where = [0]

    def chunks() -> Iterator[bytes]:
        # frame_chunks yields a frame right after reading its line: this is that line
        for number, chunk in numbered:
            where[0] = number
            yield chunk

    add = b.adder()
    for fr in frame_chunks(chunks(), source, warn=warn, direction=direction):
        add(fr, where[0])


def _trusted(b: _Builder, number: int, stream: Iterable[bytes], cuts: list[InputError],
             source: str, warn: Warn | None, direction: str | None) -> None:
    """Add a frames stream's records as they are (the header, line ``number``, is read):
    one parse a line, nothing hashed. A record that lacks what acp-frame writes is
    framed again, a line that is not JSON is reported and skipped, and from a header of
    another kind on (a wire log appended to the file) the rest is framed. The stream is
    read directly, not through a generator (:func:`acp_pipes.lines.records`, whose
    judgement of a line that is not JSON it shares: :func:`acp_pipes.lines.unparsable`):
    a measured fast path (BENCHMARKS.md, acp-align: "two frames streams (200k steps)
    within 2× of a bare orjson loop over both"), where that costs ~10% at a million
    lines; and a record is made a step here, as :meth:`_Builder.adder` makes one, with
    each field read once and no call a line: that was ~8% of the whole at 200,000 lines."""
    from acp_pipes.frame.core import Framer

    loads, JSONDecodeError = orjson.loads, orjson.JSONDecodeError
    dirs, kinds, hash_types = _DIRS, _KINDS, _HASH_TYPES
    add = b.adder()
    ids, new = b.table.ids, b.table.add
    session = b.session
    seq = b.seq
    push, mark = seq.append, b.lines.append
    replies, unanswered = REPLIES, UNANSWERED
    timed = b.latency.add
    last_d = last_sid = at = None
    if b.preset is not None:  # each frame hashed under the preset: through the adder
        kinds = frozenset()
    framer = None
    n = number
    try:
        for n, chunk in enumerate(stream, number + 1):  # noqa: B007 - n after the loop
            try:
                rec = loads(chunk)
            except JSONDecodeError as e:
                if warn is not None and chunk.strip():
                    what = unparsable(chunk.endswith(b"\n"), e)
                    warn(source, n, f"{what}, frame record skipped: {json_error(chunk, e)}")
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
                        at = b.chain_pos[b._chain((d, sid))].append
                    at(len(seq))  # type: ignore[misc]  # set at the first frame (d is a str)
                    push(step)
                    mark(n)
                    continue
                if kind in _KINDS and h.__class__ in hash_types:
                    add(rec, n)  # with a preset
                    continue
                framer = framer or Framer(source, warn)  # not as acp-frame writes it
                rec = framer.frame(rec, n)
                if rec is not None:
                    add(rec, n)
                continue
            fmt = header_format(rec)
            if fmt == FRAMES and judge(rec, source, n, _FRAMED, "a wire log or ACP JSONL"):
                b.latency.new_stream()
                continue  # the next frames stream: trusted as the first
            if fmt == WIRE:  # the framer judges it and frames the rest
                rest = until_cut(stream, n, source, cuts)
                _framed(b, _numbered(chunk, n, rest), source, warn, direction)
                return
            if fmt is None:
                if warn is not None and not is_end(rec) and not is_event(rec):
                    warn(source, n, "not a frame record (needs seq, t, dir), skipped")
                continue
            judge(rec, source, n, _FRAMED, "a wire log or ACP JSONL")  # raises: no trace
    except READ_ERRORS as e:
        cuts.append(InputError(source, n + 1, f"cannot read: {e}"))



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
from itertools import compress
from typing import TYPE_CHECKING, Any

import orjson

from acp_pipes.align.table import FLOATS, REPLIES, StepTable
from acp_pipes.errors import InputError, Warn
from acp_pipes.io.lines import READ_ERRORS, json_error, unparsable
from acp_pipes.io.streams import FRAMES, WIRE, header_format, judge
from acp_pipes.io.wire import is_end, is_event
from acp_pipes.protocol.redact import may_hold_secrets
from acp_pipes.sameness.floating import FLOATING, FLOATING_METHODS

if TYPE_CHECKING:
    from acp_pipes.sameness.normalize import Normalizer

__all__ = ["UNANSWERED", "trace_steps", "until_cut"]

#: Before the key of a reply that answers no request seen before it.
UNANSWERED = "unanswered:"
_HASH_TYPES = frozenset((str, type(None)))
_KINDS = frozenset(("request", "response", "error", "notification", "invalid_json",
                    "not_jsonrpc"))
_DIRS = frozenset(("c2a", "a2c"))


class _Builder:
    """A trace's steps, frame by frame: step ids (``seq``), line numbers, and the
    positions of each chain (one direction of one session).

    Two ways (``model``): under ``--strict`` a step's key is its direction and its hash
    (concealed when it may hold a secret, normalised with ``--ignore``), and a reply that
    answers no request seen before it is a step of its own; by default (the model of the
    same session, :mod:`acp_pipes.align.model`) a step's key is its direction and its own
    hash, and what the model leaves out (minted identifiers, clocks, a vendor's values,
    ``--ignore``) is taken out later, only where the runs part; each reply is linked to
    the request it answers and put after it (:func:`causal_order`), and each
    ``session/update``'s kind is kept (what floats is decided once the agents are
    known)."""

    def __init__(self, table: StepTable, normalizer: Normalizer, session: str | None,
                 model: bool = False):
        self.table = table
        self.hash_frame = None if normalizer.identity else normalizer.hash_frame
        self.normalizer = normalizer
        self.model = model
        #: a reply that answers no request seen yet waits for it (the model):
        #: ``(dir of the request, id) -> index of the reply``; ``moves``: reply index ->
        #: index of the request it follows (causal order, see :func:`causal_order`)
        self.waiting: dict[tuple[str, Any], int] = {}
        self.moves: dict[int, tuple[int, str | None]] = {}
        #: the model: requests not answered yet, per direction ``id -> index``, and each
        #: reply's request, ``reply index -> request index``
        self.asked: dict[str, dict[Any, int]] = {"c2a": {}, "a2c": {}}
        self.replies: dict[int, int] = {}
        #: the model: the chain ``(dir, session)`` of each step that is not a notification
        #: (a notification's is its text's: :attr:`StepTable.text_chain`)
        self.frame_chain: dict[int, tuple[str, str | None]] = {}
        self.agent: str | None = None  # agentInfo.name of the initialize answer
        self._said: dict[tuple[bytes, bytes, bytes, bytes], tuple] = {}
        self._shared: dict[Any, Any] = {}  # values many texts share, made once
        #: the model, a frames stream: ``lines`` holds each step's byte offset, so a
        #: few lines are read back by seeking, not by reading the file again
        self.offsets = False
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
        if self.model:
            return self._model_adder()
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

        def add(rec: dict[str, Any], number: int) -> None:
            sid = rec.get("sessionId")
            if session is not None and sid != session:
                return
            d = rec["dir"]
            kind = rec.get("kind")
            if hash_frame is not None:
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

    def _model_adder(self) -> Callable[[dict[str, Any], int], None]:
        """The adder of the model (see the class): a frame's step is its text's (one dict
        lookup by its hash); a request is remembered, a reply linked to it."""
        table = self.table
        ids, new = table.ids, table.add
        texts, new_text = table.texts, self.new_text
        session = self.session
        seq = self.seq
        push, mark = seq.append, self.lines.append
        replies, unanswered = REPLIES, UNANSWERED
        timed = self.latency.add
        waiting, moves = self.waiting, self.moves
        asked = self.asked
        linked, chain_of = self.replies, self.frame_chain

        def add(rec: dict[str, Any], number: int) -> None:
            sid = rec.get("sessionId")
            if session is not None and sid != session:
                return
            d = rec["dir"]
            kind = rec.get("kind")
            h = rec.get("hash")
            at = len(seq)
            if kind == "notification":
                if h.__class__ is str:
                    step = texts[d].get(h.encode())
                    if step is None:
                        step = new_text(rec, d, h)
                    push(step)
                    mark(number)
                    return
            else:
                timed(rec)
            key: Any = None
            if kind == "request":
                rid = rec.get("id")
                rid = rid if rid.__class__ is int or rid.__class__ is str else _id_key(rid)
                asked[d][rid] = at
                if waiting:
                    early = waiting.pop((d, rid), None)
                    if early is not None:
                        moves[early] = (at, sid)
            elif kind in replies:
                other = "c2a" if d == "a2c" else "a2c"
                rid = rec.get("id")
                rid = rid if rid.__class__ is int or rid.__class__ is str else _id_key(rid)
                method = rec.get("method")
                if method is None:  # answers no request seen: a step of its own (for now)
                    waiting[(other, rid)] = at
                    key = unanswered + (d + h if h is not None else d)
                else:
                    request = asked[other].pop(rid, None)
                    if request is not None:
                        linked[at] = request
                    if self.agent is None and d == "a2c" and method == "initialize":
                        self.agent = _agent_of(rec)
                chain_of[at] = (d, sid)
            if key is None and h.__class__ is str:
                step = texts[d].get(h.encode())
                if step is None:
                    step = new_text(rec, d, h)
            else:
                key = key or d
                step = ids.get(key)
                if step is None:
                    step = new(key, h, (d, kind, rec.get("method")))
                chain_of[at] = (d, sid)
            push(step)
            mark(number)

        return add

    def new_text(self, rec: dict[str, Any], d: str, h: str) -> int:
        """The step of a frame text not seen before: for a request or a notification its
        chain (direction and session: a reply's is its request's, per frame), and for an
        agent's ``session/update`` its update kind, read from its text (what floats, and
        what pairs with what, is decided by kind)."""
        table = self.table
        method = rec.get("method")
        kind = rec.get("kind")
        shared = self._shared
        meta = (d, kind, method)
        meta = shared.setdefault(meta, meta)  # (one tuple for the texts that share it)
        step = table.add_text(d, h, meta)
        if kind not in REPLIES:
            chain = d
            if d == "a2c" and kind == "notification":
                if method == "session/update":
                    update = update_kind(rec.get("raw"))
                    if update is not None:
                        update = table.updates[step] = shared.setdefault(update, update)
                        if update in FLOATING:
                            chain = FLOATS
                elif method.__class__ is str:
                    table.notified[step] = method
                    if method in FLOATING_METHODS:
                        chain = FLOATS
            key = (chain, rec.get("sessionId"))
            c = table.chain_ids.get(key)
            if c is None:
                c = table.chain_ids[key] = len(table.chain_ids)
            table.text_chain[step] = c
        return step

    def new_laid_out(self, chunk: bytes, d: bytes, h: bytes) -> int | None:
        """:meth:`new_text` for a notification's record read by its layout (see
        :func:`_trusted_model`): its method, session and update kind cut out of the
        line, not parsed; None when the line holds anything that would need parsing
        (an escape where a value is cut), or is no notification. What the texts share
        (their method, session, update kind, and so their step's kind and chain) is
        made once: ``_said``."""
        i = chunk.rfind(_METHOD_OF_NOTIFICATION)
        if i < 0:
            return None
        j = i + len(_METHOD_OF_NOTIFICATION)
        k = chunk.find(b'"', j)
        method = chunk[j:k]
        s0 = chunk.rfind(_SESSION)
        sid = b""
        if s0 > k:
            sid = chunk[s0 + len(_SESSION):chunk.find(b'"', s0 + len(_SESSION))]
        update = b""
        if d == _A2C and method == b"session/update":
            u0 = chunk.find(_UPDATE_IN_RAW)
            if u0 < 0:
                return None
            u1 = chunk.find(b'\\"', u0 + len(_UPDATE_IN_RAW))
            if chunk.count(b"sessionUpdate") != 1:
                return None
            update = chunk[u0 + len(_UPDATE_IN_RAW):u1]
        said = self._said.get((d, method, sid, update))
        if said is None:
            if b"\\" in method or b"\\" in sid or b"\\" in update:
                return None
            said = self._say(d, method, s0 > k, sid, update)
        table = self.table
        meta, c, kind, notified = said
        step = table.add_text(meta[0], "", meta, h)
        if kind is not None:
            table.updates[step] = kind
        elif notified is not None:
            table.notified[step] = notified
        table.text_chain[step] = c
        return step

    def _say(self, d: bytes, method_b: bytes, named: bool, sid_b: bytes, update_b: bytes
             ) -> tuple[tuple[str, str, str], int, str | None, str | None]:
        """What notification texts of one direction, method, session and update kind
        share: their step's meta, their chain, their update kind or (another method)
        the method an agent notified."""
        ds = "a2c" if d == _A2C else "c2a"
        method = method_b.decode()
        sid = sid_b.decode() if named else None
        kind = update_b.decode() if update_b else None
        notified = method if ds == "a2c" and method != "session/update" else None
        chain = FLOATS if kind in FLOATING or notified in FLOATING_METHODS else ds
        table = self.table
        key = (chain, sid)
        c = table.chain_ids.get(key)
        if c is None:
            c = table.chain_ids[key] = len(table.chain_ids)
        said = ((ds, "notification", method), c, kind, notified)
        self._said[(d, method_b, sid_b, update_b)] = said
        return said

    def _chain(self, key: tuple[str, str | None]) -> int:
        c = self.chain_ids.get(key)
        if c is None:
            c = self.chain_ids[key] = len(self.chains)
            self.chains.append(key)
            self.chain_pos.append(array("L"))
        return c

    def finish(self) -> None:
        """The model: replies put after their requests, and the chains taken from each
        step's text or frame, in bulk."""
        if self.moves:
            self._reorder()
        seq, n = self.seq, len(self.seq)
        table = self.table
        ids = table.chain_ids
        keys: list[Any] = list(map(table.text_chain.__getitem__, seq))  # chain ids
        for i, key in self.frame_chain.items():
            c = ids.get(key)
            if c is None:
                c = ids[key] = len(ids)
            keys[i] = c
        order = list(dict.fromkeys(keys))
        names = {c: key for key, c in ids.items()}
        self.chains = [names[c] for c in order]
        self.chain_ids = {key: k for k, key in enumerate(self.chains)}
        if len(order) == 1:
            self.chain_pos = [array("L", range(n))]
        elif max(order) < 256:  # a pass in C per large chain, a find per step of a small one
            kb = bytes(keys)
            pos: list[array] = []
            for c in order:
                one = bytes((c,))
                if kb.count(one) > n // 4:
                    pos.append(array("L", compress(range(n), map(c.__eq__, keys))))
                    continue
                got, i = array("L"), kb.find(one)
                while i >= 0:
                    got.append(i)
                    i = kb.find(one, i + 1)
                pos.append(got)
            self.chain_pos = pos
        else:
            where = {c: k for k, c in enumerate(order)}
            pos = [array("L") for _ in order]
            for i, c in enumerate(keys):
                pos[where[c]].append(i)
            self.chain_pos = pos

    def _reorder(self) -> None:
        """Each reply logged before the request it answers, put right after it, keyed as
        a reply to it (see :func:`causal_order`), its chain the request's session."""
        n = len(self.seq)
        after: dict[int, list[int]] = {}
        for reply, (request, _) in self.moves.items():
            after.setdefault(request, []).append(reply)
        order: list[int] = []
        for i in range(n):
            if i in self.moves:
                continue
            order.append(i)
            if i in after:
                order.extend(sorted(after[i]))
        table, seq = self.table, self.seq
        for reply, (request, sid) in self.moves.items():
            step = seq[reply]
            d, kind, _ = table.meta[step]
            h = table.hash_of(step)
            method = table.meta[seq[request]][2]
            if h is not None:
                new = table.texts[d].get(h.encode())
                if new is None:
                    new = table.add_text(d, h, (d, kind, method))
            else:
                new = table.ids.get(d)
                if new is None:
                    new = table.add(d, h, (d, kind, method))
            seq[reply] = new
            self.frame_chain[reply] = (d, sid)  # the session of the request it answers
            self.replies[reply] = request
        where = {old: k for k, old in enumerate(order)}
        self.seq = [seq[i] for i in order]
        self.lines = array(self.lines.typecode, [self.lines[i] for i in order])
        self.frame_chain = {where[i]: c for i, c in self.frame_chain.items()}
        self.replies = {where[r]: where[q] for r, q in self.replies.items()}
        self.moves = {}


def update_kind(raw: Any) -> str | None:
    """The ``sessionUpdate`` of a ``session/update`` notification's text: read from the
    text when it names one kind once, compactly written (the usual frame), else from its
    parsed JSON; None when it has none."""
    if raw.__class__ is not str:
        return None
    i = raw.find('"sessionUpdate":"')
    if i >= 0:
        k = raw.find('"', i + 17)
        if k > 0 and raw.count('"sessionUpdate"') == 1:
            kind = raw[i + 17:k]
            if "\\" not in kind:
                return kind
    elif '"sessionUpdate"' not in raw:
        return None
    try:
        msg = orjson.loads(raw)
        kind = msg["params"]["update"]["sessionUpdate"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return kind if kind.__class__ is str else None


def _agent_of(rec: dict[str, Any]) -> str | None:
    """``agentInfo.name`` (v1; ``info.name`` in v2) of an ``initialize`` answer's frame."""
    from acp_pipes.io.wire import decode_raw

    try:
        msg = orjson.loads(decode_raw(rec))
    except (ValueError, TypeError):
        return None
    from acp_pipes.sameness.volatile import agent_name

    return agent_name(msg)


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
) -> _Builder:
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
    b = _Builder(table, normalizer, session, model)
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


def _id_key(rid: Any) -> tuple[str, Any]:
    """A JSON-RPC id as a dict key (``1`` and ``"1"`` are two ids)."""
    return (rid.__class__.__name__, rid if rid.__class__ is not list and
            rid.__class__ is not dict else repr(rid))


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
            warn: Warn | None, direction: str | None, at: int | None = None) -> None:
    """Frame the lines here (a wire log, a bare stream, a frames stream with --ignore),
    as acp-frame would, and add the frames in batches. ``at``: the byte offset of the
    first line, when the steps are marked by offset (:attr:`_Builder.offsets`)."""
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


def _trusted(b: _Builder, number: int, stream: Iterable[bytes], cuts: list[InputError],
             source: str, warn: Warn | None, direction: str | None) -> None:
    """Add a frames stream's records as they are (the header, line ``number``, is read):
    one parse a line, nothing hashed. A record that lacks what acp-frame writes is
    framed again, a line that is not JSON is reported and skipped, and from a header of
    another kind on (a wire log appended to the file) the rest is framed. The stream is
    read directly, not through a generator (:func:`acp_pipes.io.lines.records`, whose
    judgement of a line that is not JSON it shares: :func:`acp_pipes.io.lines.unparsable`):
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
                framer = framer or Framer(source, warn)  # not as acp-frame writes it
                rec = framer.frame(rec, n)
                if rec is not None:
                    add(rec, n)
                continue
            if not _not_a_frame(b, rec, chunk, n, stream, cuts, source, warn, direction):
                return
    except READ_ERRORS as e:
        cuts.append(InputError(source, n + 1, f"cannot read: {e}"))




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


def _trusted_model(b: _Builder, number: int, stream: Iterable[bytes],
                   cuts: list[InputError], source: str, warn: Warn | None,
                   direction: str | None, start: int = 0) -> None:
    """:func:`_trusted` for the model (see :class:`_Builder`): a notification, nine
    frames in ten, costs one parse, one lookup of its hash among the texts seen, and two
    appends (its chain is its text's, taken in bulk at the end); the rest go through
    :meth:`_Builder.adder`. Nothing is hashed: the model hashes only what the runs do
    not share (:mod:`acp_pipes.align.model`)."""
    from acp_pipes.frame.core import Framer

    loads, JSONDecodeError = orjson.loads, orjson.JSONDecodeError
    kinds, hash_types = _KINDS, _HASH_TYPES
    b.lines = array("Q")  # each step's byte offset (before the adder takes its append)
    b.offsets = True
    add = b.adder()
    table = b.table
    texts, new_text, chain_of = table.texts, b.new_text, table.text_chain
    new_laid_out, meta = b.new_laid_out, table.meta
    seen = {d.encode(): tab for d, tab in texts.items()}
    session = b.session
    keep = _KeepChains(table.chain_ids, session)
    push, mark = b.seq.append, b.lines.append
    framer = None
    n = number
    at = start  # where the next line begins
    # a notification as acp-frame writes it is read by its layout, not parsed (below)
    laid_out = session is None
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
            try:
                rec = loads(chunk)
            except JSONDecodeError as e:
                if warn is not None and chunk.strip():
                    what = unparsable(chunk.endswith(b"\n"))
                    warn(source, n, f"{what}, frame record skipped: {e}")
                continue
            if rec.__class__ is dict and (tab := texts.get(rec.get("dir", ""))) is not None:
                kind = rec.get("kind")
                own = rec.get("hash")
                if kind == "notification" and own.__class__ is str:
                    step = tab.get(own.encode())
                    if step is None:
                        step = new_text(rec, rec["dir"], own)
                    if session is None or chain_of[step] in keep:
                        push(step)
                        mark(here)
                    continue
                if kind in kinds and own.__class__ in hash_types:
                    add(rec, here)
                    continue
                framer = framer or Framer(source, warn)  # not as acp-frame writes it
                rec = framer.frame(rec, n)
                if rec is not None:
                    add(rec, here)
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
_METHOD_OF_NOTIFICATION = b',"kind":"notification","method":"'
_SESSION = b',"sessionId":"'
_UPDATE_IN_RAW = b'\\"sessionUpdate\\":\\"'


def _not_a_frame(b: _Builder, rec: Any, chunk: bytes, n: int, stream: Iterable[bytes],
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

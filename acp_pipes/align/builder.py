"""A trace's steps, built frame by frame (:class:`Builder`): step ids, line numbers or
offsets, the chains, and under the model each reply's request and the causal order.
How the lines are read and judged is :mod:`acp_pipes.align.traces`; what a frame
record becomes is here, once for every way of reading it.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from itertools import compress
from typing import TYPE_CHECKING, Any

import orjson

from acp_pipes.align.table import FLOATS, REPLIES, StepTable
from acp_pipes.protocol.jsonrpc import id_key
from acp_pipes.protocol.redact import may_hold_secrets
from acp_pipes.sameness.floating import FLOATING, FLOATING_METHODS

if TYPE_CHECKING:
    from acp_pipes.sameness.normalize import Normalizer

__all__ = ["Builder", "UNANSWERED", "update_kind"]

#: In a notification's record as acp-frame lays it out (see
#: :mod:`acp_pipes.align.traces`): where its method, its session and, in its raw text,
#: its update kind are.
_METHOD_OF_NOTIFICATION = b',"kind":"notification","method":"'
_SESSION = b',"sessionId":"'
_UPDATE_IN_RAW = b'\\"sessionUpdate\\":\\"'


#: Before the key of a reply that answers no request seen before it.
UNANSWERED = "unanswered:"


class Builder:
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
        self.anchored: set[int] = set()  # steps put elsewhere by _reorder
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
        chain = self.chain_index
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
                rid = rid if rid.__class__ is int or rid.__class__ is str else id_key(rid)
                asked[d][rid] = at
                if waiting:
                    early = waiting.pop((d, rid), None)
                    if early is not None:
                        moves[early] = (at, sid)
            elif kind in replies:
                other = "c2a" if d == "a2c" else "a2c"
                rid = rec.get("id")
                rid = rid if rid.__class__ is int or rid.__class__ is str else id_key(rid)
                method = rec.get("method")
                if method is None:  # answers no request seen: a step of its own (for now)
                    waiting[(other, rid)] = at
                    key = unanswered + (d + h if h is not None else d)
                else:
                    request = asked[other].pop(rid, None)
                    if request is not None:
                        linked[at] = request
                    if self.agent is None and d == "a2c" and method == "initialize":
                        self.agent = agent_of(rec)
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
        if d == b"a2c" and method == b"session/update":
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
        ds = "a2c" if d == b"a2c" else "c2a"
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

    def chain_index(self, key: tuple[str, str | None]) -> int:
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
        a reply to it (see :func:`causal_order`), its chain the request's session; and
        what its side wrote after it and before that request, behind it: one side's
        frames are one stream, read in the order written (a client that wrote its answer
        and then session/close ahead of the agent's request closed after answering)."""
        after = self._anchors()
        order: list[int] = []
        for i in range(len(self.seq)):
            if i in self.anchored:
                continue
            todo = [i]  # a step, then what goes after it (which may have its own)
            while todo:
                k = todo.pop()
                order.append(k)
                todo.extend(reversed(after.get(k, ())))
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
        self.anchored = set()

    def _anchors(self) -> dict[int, list[int]]:
        """Where each step that moves goes: ``request index -> steps put after it``, in
        the order written. A moved reply goes after its request, and after wherever the
        frames of its direction written before it went; a step of that direction written
        after a moved reply goes there too, while that request is still ahead of it."""
        meta, seq = self.table.meta, self.seq
        floor: dict[str, int] = {}  # per direction: the latest request a step waits for
        after: dict[int, list[int]] = {}
        self.anchored = set()
        first = min(self.moves)
        for i in range(first, len(seq)):
            d = meta[seq[i]][0]
            move = self.moves.get(i)
            at = floor.get(d, -1)
            if move is not None:
                at = max(at, move[0])
            elif at <= i:
                continue
            floor[d] = at
            after.setdefault(at, []).append(i)
            self.anchored.add(i)
        return after


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


def agent_of(rec: dict[str, Any]) -> str | None:
    """``agentInfo.name`` (v1; ``info.name`` in v2) of an ``initialize`` answer's frame."""
    from acp_pipes.io.wire import decode_raw

    try:
        msg = orjson.loads(decode_raw(rec))
    except (ValueError, TypeError):
        return None
    from acp_pipes.sameness.volatile import agent_name

    return agent_name(msg)

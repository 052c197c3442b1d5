"""Inputs -> step sequences: what counts as "the same step" in two runs.

A step is a small int standing for a key, through one :class:`StepTable` shared by all the
inputs of an alignment, so the LCS compares ints:

- traces (wire logs, frames streams, bare ACP JSONL; :mod:`acp_pipes.align.traces`): the
  key is ``(dir, hash)``, the frame's canonical hash after the ``--ignore`` normaliser
  (:class:`acp_pipes.sameness.normalize.Normalizer`, shared with acp-replay). A response or error
  that answers no request seen before it (a scripted client's answer written before the
  agent asked) gets a key of its own: "a response after its request" is an order the
  protocol fixes, so a run where it does not hold differs;
- ASR streams: the key is ``(type, hash)``, the canonical hash of the record with its
  bookkeeping fields removed (:data:`ASR_BOOKKEEPING`), so two runs that wrote the same
  records under other sequence numbers, ids and times still match.

Each step also belongs to a *chain*: the steps whose order the protocol fixes. In a trace
a chain is one direction of one session (``(dir, sessionId)``; frames naming no session
form a chain per direction): the client's frames of a session in the client's order, the
agent's in the agent's. How two chains interleave in the log is scheduling (two pipes
read by two threads), so :mod:`acp_pipes.align.compare` aligns chain with chain. In an
ASR file a chain is one stream (one session).

Only ints and a line number per step are kept, so a million-step trace costs a few MB.
Words for people (method, prompt text, update kind) and the values of changed steps are
read back from the input for the few steps a diff or a graph shows (:meth:`Steps.describe`,
:meth:`Steps.values`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from acp_pipes.align.minted import Found
from acp_pipes.align.table import StepTable
from acp_pipes.align.traces import trace_steps, until_cut
from acp_pipes.align.volatile import Volatile, frame_kind
from acp_pipes.align.words import (
    asr_kind,
    clip,
    message_of_record,
    summarize_message,
    summarize_record,
    summary_of_line,
    text_of,
)
from acp_pipes.errors import InputError, Warn
from acp_pipes.io.lines import (
    READ_ERRORS,
    display_name,
    first_bytes,
    judge_start,
    open_source,
    raw_lines,
    records,
    stdin,
)
from acp_pipes.io.streams import ASR, describe, header_format, judge
from acp_pipes.protocol.canonical import CanonicalError, canonical_hash, parse_json, raw_hash
from acp_pipes.sameness.normalize import Normalizer

_ASR = (ASR,)

__all__ = ["ASR_BOOKKEEPING", "StepTable", "Steps", "load_steps", "read_lineage",
           "spool_stdin", "summarize_message", "summarize_record"]

#: ASR record fields that are bookkeeping, not content: excluded before hashing a step.
#: seq/id (position and identity in one stream), ts/tsSource/observedAt (times), native
#: (pointers to the wire frames), supersedes/parent/copiedFrom (references to other
#: records' ids, which differ between runs).
ASR_BOOKKEEPING = frozenset(
    ("seq", "id", "ts", "tsSource", "observedAt", "native", "supersedes", "parent",
     "copiedFrom")
)


#: At most this many bytes of lines read back are kept per input (see :meth:`Steps.read`).
KEEP_BYTES = 32 << 20


@dataclass
class Steps:
    """One input's steps: ``seq`` (step ids), the input line of each step, and the chains
    (see the module docstring): ``chains[c]`` names chain ``c`` as ``(dir, session)``
    (``(None, session)`` for an ASR stream) and ``chain_pos[c]`` holds the indices of its
    steps, in order."""

    source: str  # display name
    path: str  # where to read descriptions back from
    kind: str  # "trace" or "asr"
    seq: list[int]
    lines: array
    session: str | None = None
    header: dict | None = None  # the ASR header (lineage) of the selected stream
    what: str = ""  # the input kind in words ("a wire log", "an ASR stream"), for refusals
    #: where the input stopped being readable (a .gz cut short): the steps are those read
    #: before it, as if the recording stopped there; the caller reports it after its
    #: output (``FILE:LINE: cannot read: ...``, exit 2)
    cut: InputError | None = None
    chains: Sequence[tuple[str | None, str | None]] = field(default_factory=list)
    chain_pos: list[array] = field(default_factory=list)
    normalizer: Normalizer | None = None
    #: a trace's request latency per method (:meth:`acp_pipes.frame.latency.Latency.methods`)
    latency: dict[str, dict[str, Any]] | None = None
    #: the default comparison of a trace (:mod:`acp_pipes.align.model`), shared by both
    #: runs; None: --strict, or an ASR stream
    model: Volatile | None = None
    #: the model: each reply's request, ``reply index -> request index``
    replies: dict[int, int] = field(default_factory=dict)
    agent: str | None = None  # the model: agentInfo.name of the initialize answer
    direction: str | None = None  # --dir, for a bare stream
    #: ``lines`` holds each step's byte offset in the input, not its line number (the
    #: model's frames streams: :attr:`acp_pipes.align.builder.Builder.offsets`), so a
    #: step's line is read back by seeking to it
    offsets: bool = False
    _kept: dict[int, bytes] = field(default_factory=dict, repr=False)
    _kept_bytes: int = 0

    def read(self, indices: Iterable[int]) -> Iterator[tuple[list[int], bytes]]:
        """The input line of each wanted step, in file order: ``(step indices, raw)``.
        Lines read are kept (up to :data:`KEEP_BYTES`), so the next few questions about
        the same steps (their kind, their values, their words) cost no pass over the
        file."""
        want: dict[int, list[int]] = {}
        for i in indices:
            if 0 <= i < len(self.seq):
                want.setdefault(self.lines[i], []).append(i)
        if not want:
            return
        kept = self._kept
        if all(n in kept for n in want):
            for n in sorted(want):
                yield want[n], kept[n]
            return
        if self.offsets:
            stream, lines = _at_offsets(self.path, sorted(want))
        else:
            stream = open_source(self.path)
            lines = _lines_at(stream, sorted(want))
        try:
            for number, raw in lines:
                if self._kept_bytes + len(raw) <= KEEP_BYTES:
                    kept[number] = raw
                    self._kept_bytes += len(raw)
                yield want[number], raw
        except READ_ERRORS as e:  # read before: the file changed since
            raise InputError(self.source, 0, f"cannot read again: {e}") from None
        finally:
            if self.path != "-":
                stream.close()

    def describe(self, indices: Iterable[int]) -> dict[int, str]:
        """A short human summary of each wanted step (method, prompt text, update kind)."""
        out: dict[int, str] = {}
        for got, raw in self.read(indices):
            text = summary_of_line(raw, self.kind)
            for i in got:
                out[i] = text
        return out

    def update_kinds(self, indices: Iterable[int]) -> Iterator[tuple[int, str | None]]:
        """The ``sessionUpdate`` of each wanted step of a trace (None when it has none)."""
        for got, raw in self.read(indices):
            msg = _value_of_line(raw, "trace", _IDENTITY)
            upd = msg.get("params") if isinstance(msg, dict) else None
            upd = upd.get("update") if isinstance(upd, dict) else None
            kind = upd.get("sessionUpdate") if isinstance(upd, dict) else None
            for i in got:
                yield i, kind if isinstance(kind, str) else None

    def values(self, indices: Iterable[int], name: Any = None
               ) -> Iterator[tuple[int, Any]]:
        """The JSON value each wanted step stands for, in file order, as compared: for a
        trace the JSON-RPC message (the text itself when it is not JSON) with MCP secrets
        redacted; for an ASR record, the record without its bookkeeping fields; both
        after ``--ignore``. Under the model (:mod:`acp_pipes.align.model`), what its view
        leaves of the message, each minted identifier as ``name(kind, value)`` says
        (by default as it is)."""
        norm = self.normalizer or Normalizer.from_pointers([])
        model = self.model
        for got, raw in self.read(indices):
            if model is not None:
                value = self._shown(model, raw, norm, name or _as_is)
                for i in got:
                    yield i, value
                continue
            value = _value_of_line(raw, self.kind, norm)
            for i in got:
                yield i, value

    def _shown(self, model: Volatile, raw: bytes, norm: Normalizer, name: Any) -> Any:
        """A trace step's value under the model (see :meth:`values`)."""
        try:
            rec = parse_json(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")
        msg = message_of_record(rec)
        d = rec.get("dir") if isinstance(rec, dict) else None
        try:
            return model.shown(msg, d or self.direction, frame_kind(msg), name)
        except RecursionError:  # nested too deep: shown as sent
            return _value_of_line(raw, self.kind, norm)

    def keys(self, indices: Iterable[int], table: StepTable
             ) -> dict[int, tuple[str | None, Found]]:
        """Under the model, the identity of each wanted step's frame as compared
        (:meth:`acp_pipes.align.volatile.Volatile.key`), by step id: read back once per
        step id (its first wanted index), kept in ``table.masked``."""
        model = self.model
        known = table.masked
        first: dict[int, int] = {}
        seq = self.seq
        for i in indices:
            step = seq[i]
            if step not in known and step not in first:
                first[step] = i
        if first and model is not None:
            by_index = {i: step for step, i in first.items()}
            for got, raw in self.read(by_index):
                d, kind, _ = table.meta[seq[got[0]]]
                frame = _frame_text(raw, self.direction)
                key = model.key(frame, d, kind) if frame is not None else (None, ())
                for i in got:
                    known[by_index[i]] = key
        return known


def _at_offsets(path: str, offsets: list[int]) -> tuple[Any, Iterator]:
    """The lines that begin at ``offsets`` (ascending) of an input: sought in a plain
    file, read through in a compressed one."""
    from acp_pipes.io.lines import GZIP_MAGIC

    try:
        f = open(path, "rb")  # noqa: SIM115 - the caller closes it
    except OSError as e:
        raise InputError(display_name(path), 0, f"cannot read again: {e.strerror or e}"
                         ) from None
    if f.peek(2)[:2] == GZIP_MAGIC:
        f.close()
        stream = open_source(path)

        def through() -> Iterator[tuple[int, bytes]]:
            wanted = set(offsets)
            last = offsets[-1]
            at = 0
            for line in stream:
                if at in wanted:
                    yield at, line.rstrip(b"\r\n")
                at += len(line)
                if at > last:
                    return

        return stream, through()

    def sought() -> Iterator[tuple[int, bytes]]:
        for at in offsets:
            f.seek(at)
            yield at, f.readline().rstrip(b"\r\n")

    return f, sought()


#: How much of an input :func:`_lines_at` reads at a time.
_BLOCK = 1 << 16


def _lines_at(stream: Any, numbers: list[int]) -> Iterator[tuple[int, bytes]]:
    """Lines ``numbers`` (from 1, ascending) of ``stream``, without their LF. Newlines
    are counted a block at a time (``bytes.count``, in C) and only the wanted lines are
    cut out: reading back a few steps of a large input costs about what reading its
    bytes does, not a Python loop over every line."""
    wanted = iter(numbers)
    target = next(wanted, None)
    number = 1  # the line that begins at ``start`` (after ``carry``)
    carry: list[bytes] = []  # the beginning of line ``number``, read with earlier blocks
    while target is not None:
        block = stream.read(_BLOCK)
        if not block:
            if carry and number == target:  # the last line, without LF
                yield target, b"".join(carry)
            return
        start = 0
        while target is not None:
            need = target - number  # newlines before the wanted line begins
            if need:
                ends = block.count(b"\n", start)
                if ends < need:
                    number += ends
                    carry = []
                    break
                for _ in range(need):
                    start = block.index(b"\n", start) + 1
                number, carry = target, []
            end = block.find(b"\n", start)
            if end < 0:
                if start < len(block):
                    carry.append(block[start:])
                break
            carry.append(block[start:end])
            yield target, b"".join(carry)
            carry, start, number = [], end + 1, target + 1
            target = next(wanted, None)


_IDENTITY = Normalizer.from_pointers([])


def _value_of_line(raw: bytes, kind: str, norm: Normalizer) -> Any:
    """What a step is compared as (see :meth:`Steps.values`)."""
    try:
        rec = parse_json(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")
    if kind == "asr":
        if isinstance(rec, dict):
            rec = {k: v for k, v in rec.items() if k not in ASR_BOOKKEEPING}
        return norm.apply(rec)
    return norm.view(message_of_record(rec))


def _as_is(_kind: str, value: Any) -> Any:
    return value


def _frame_text(line: bytes, direction: str | None) -> str | bytes | None:
    """The JSON-RPC text of a trace's input line: a wire or frames record's ``raw``, or
    the line itself in a bare stream (``direction`` given); None when it has none."""
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError:
        return line if direction is not None else None
    if isinstance(rec, dict) and rec.get("dir") in ("c2a", "a2c"):
        from acp_pipes.io.wire import decode_raw

        try:
            return decode_raw(rec)
        except (ValueError, TypeError):
            return None
    return line if direction is not None else None


def spool_stdin() -> str:
    """Copy stdin to a temporary file, so it can be read twice like a named file; stdin
    that is empty or no JSONL is said as such, by its own name (:func:`judge_start`)."""
    source = stdin()
    judge_start(first_bytes(source), "stdin")
    fd, path = tempfile.mkstemp(prefix="acp-align-", suffix=".jsonl")
    with os.fdopen(fd, "wb") as f:
        shutil.copyfileobj(source, f)
    return path


def load_steps(
    path: str,
    table: StepTable,
    *,
    normalizer: Normalizer | None = None,
    session: str | None = None,
    warn: Warn | None = None,
    source: str | None = None,
    direction: str | None = None,
    keep_cut: bool = False,
    strict: bool = False,
    model: Volatile | None = None,
) -> Steps:
    """Read one input (trace or ASR stream, told apart by its first line) into steps.
    An input unreadable past a point (a .gz cut short) raises its read error; with
    ``keep_cut``, the steps read before it are kept and the error is in
    :attr:`Steps.cut`, for a caller that reports it after its output. An input unreadable
    before its first line always raises. Without ``strict``, a trace is compared by the
    model of the same session (:mod:`acp_pipes.align.model`; ``model``: its rules, shared
    by the inputs of one comparison, whose agents it learns as they are read), each
    reply in causal order."""
    source = source or display_name(path)
    cuts: list[InputError] = []
    try:
        stream = open_source(path)
    except InputError as e:
        raise InputError(source, 0, e.message) from None
    try:
        lines = until_cut(stream, 0, source, cuts)
        number = 0
        start = 0  # the byte offset of the first line that is not blank
        first = None
        for chunk in lines:
            number += 1
            if chunk.strip():
                first = chunk
                break
            start += len(chunk)
        lines.close()  # what follows is read from the stream itself (or anew through it)
        if first is None:
            if cuts:
                raise cuts[0]
            raise InputError(source, 0, "empty input: no frames or records")
        try:
            head = orjson.loads(first)
        except orjson.JSONDecodeError:
            head = None
        normalizer = normalizer or Normalizer.from_pointers([])
        fmt = header_format(head)
        try:
            if fmt == ASR:
                rest = until_cut(stream, number, source, cuts)
                steps = _asr_steps(_json_lines(_chained(first, rest), source,
                                               _bad_line(warn, source), number),
                                   path, source, table, normalizer, session, warn)
            else:
                if not strict and model is None:
                    from acp_pipes.sameness.volatile import default_presets

                    model = Volatile(default_presets(), normalizer.pointers)
                b = trace_steps(
                    first, number, stream, cuts, head, table, normalizer, source=source,
                    session=session, warn=warn, direction=direction, model=not strict,
                    start=start)
                steps = Steps(source, path, "trace", b.seq, b.lines, session,
                              chains=b.chains, chain_pos=b.chain_pos,
                              latency=b.latency.methods(),
                              model=None if strict else model, replies=b.replies,
                              agent=b.agent, direction=direction, offsets=b.offsets)
        except InputError:
            if cuts:  # nothing of what was asked for came before the cut: the cut says why
                raise cuts[0] from None
            raise
    finally:
        if path != "-":
            stream.close()
    steps.what = describe(fmt)
    steps.normalizer = normalizer
    if cuts and not keep_cut:
        raise cuts[0]
    steps.cut = cuts[0] if cuts else None
    return steps


def _chained(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def _bad_line(warn: Warn | None, source: str) -> Callable[[int, str], None]:
    """How an ASR reader treats a line it cannot use (not JSON, e.g. a torn last line
    after a crash; not an object; no type): reported through ``warn`` and skipped, so
    what was read before and after it still counts; without ``warn``, an InputError."""

    def bad(number: int, message: str) -> None:
        if warn is None:
            raise InputError(source, number, message)
        what, sep, reason = message.partition(": ")
        warn(source, number, f"{what}, skipped{sep}{reason}")

    return bad


def _json_lines(lines: Iterable[bytes], source: str, bad: Callable[[int, str], None],
                first: int = 1) -> Iterator[tuple[int, Any]]:
    """The parsed JSON of each line of an ASR file, numbered from ``first``
    (:func:`acp_pipes.io.lines.records`: blank lines passed over; JSON orjson refuses, a
    lone-surrogate escape or ``1e400``, is still JSON); a line that is not JSON goes to
    ``bad`` (skipped or fatal, as ``bad`` decides)."""

    def not_json(number: int, what: str, e: Exception) -> None:
        bad(number, f"{what}: {e}")

    for number, _raw, rec in records(lines, source, not_json, first=first, strip=True,
                                     fallback=_parse_json):
        yield number, rec


def _parse_json(_number: int, raw: bytes) -> Any:
    return parse_json(raw)


def _json_hash(content: Any) -> str | None:
    """The identity of a record with no JCS form (a lone surrogate, ``1e400``):
    ``blake3-raw:`` of its JSON as the json module writes it, keys sorted, so equal
    records still align; None when not even that can be written (nesting too deep)."""
    import json

    try:
        text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    except (ValueError, TypeError, RecursionError):
        return None
    return raw_hash(text.encode())


def _asr_steps(lines, path, source, table, normalizer, session,
               warn: Warn | None = None) -> Steps:
    ids, add = table.ids, table.add
    seq: list[int] = []
    at = array("L")
    header: dict | None = None
    selected = session is None
    found = False
    bad = _bad_line(warn, source)
    chains: list[tuple[str | None, str | None]] = []
    chain_pos: list[array] = []
    pos: array | None = None
    stream_session: str | None = None
    for number, rec in lines:
        if not isinstance(rec, dict):
            bad(number, "an ASR record must be a JSON object")
            continue
        if header_format(rec) == ASR:
            judge(rec, source, number, _ASR)  # its version
            selected = session is None or rec.get("sessionId") == session
            if selected and (header is None or session is not None):
                header = rec
                found = True
            sid = rec.get("sessionId")
            stream_session = sid if isinstance(sid, str) else None
            pos = None  # a new stream: a chain of its own once it has a record
            continue
        if not selected:
            continue
        rtype = rec.get("type")
        if not isinstance(rtype, str):
            bad(number, "ASR record without a string 'type'")
            continue
        content = {k: v for k, v in rec.items() if k not in ASR_BOOKKEEPING}
        content = normalizer.apply(content)
        h: str | None
        try:
            h = canonical_hash(content)
        except CanonicalError as e:
            h = _json_hash(content)
            if h is None:
                bad(number, f"record has no canonical form: {e}")
                continue
        key = (rtype, h)
        step = ids.get(key)
        if step is None:
            step = add(key, h, (rtype, asr_kind(rec), None))
        if pos is None:
            chains.append((None, stream_session))
            pos = array("L")
            chain_pos.append(pos)
        pos.append(len(seq))
        seq.append(step)
        at.append(number)
    if session is not None and not found:
        raise InputError(source, 0, f"no ASR stream of session {session!r}")
    return Steps(source, path, "asr", seq, at, session, header, chains=chains,
                 chain_pos=chain_pos)



def read_lineage(path: str, source: str | None = None, warn: Warn | None = None
                 ) -> list[dict[str, Any]]:
    """What a lineage graph needs from each ASR stream of a file: its header, record
    count, ``subagent`` records (childSession, callId; ASR-721), ``state: resumed``
    records, and the first user prompt (for the label)."""
    source = source or display_name(path)
    streams: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    name = display_name(path)  # what a line's problem names (not ``source``)
    bad = _bad_line(warn, name)
    for number, rec in _json_lines(raw_lines(path), name, bad):
        if header_format(rec) == ASR:
            judge(rec, name, number, _ASR)  # its version
            cur = {"header": rec, "source": source, "records": 0, "subagents": [],
                   "resumes": 0, "prompt": None}
            streams.append(cur)
            continue
        if cur is None:
            got = describe(header_format(rec))
            raise InputError(name, number,
                             f"expected an ASR stream (a header line), got {got}")
        if not isinstance(rec, dict):
            bad(number, "an ASR record must be a JSON object")
            continue
        cur["records"] += 1
        rtype = rec.get("type")
        if rtype == "subagent" and isinstance(rec.get("childSession"), str):
            call = rec.get("callId")
            cur["subagents"].append((rec["childSession"], call if isinstance(call, str) else None))
        elif rtype == "state" and rec.get("state") == "resumed":
            cur["resumes"] += 1
        elif rtype == "message" and rec.get("role") == "user" and cur["prompt"] is None:
            text = text_of(rec)
            if text is not None:
                cur["prompt"] = clip(text, 40)
    if not streams:
        raise InputError(source, 0, "no ASR stream (no header line)")
    return streams

"""Inputs -> step sequences: what counts as "the same step" in two runs.

A step is a small int standing for a key, through one :class:`StepTable` shared by all the
inputs of an alignment, so the LCS compares ints:

- traces (wire logs, frames streams; read with :func:`acp_pipes.frame.read_frames`): the
  key is ``(dir, hash)``, the frame's canonical hash after the ``--ignore`` normaliser
  (:class:`acp_pipes.normalize.Normalizer`, shared with acp-replay);
- ASR streams: the key is ``(type, hash)``, the canonical hash of the record with its
  bookkeeping fields removed (:data:`ASR_BOOKKEEPING`), so two runs that wrote the same
  records under other sequence numbers, ids and times still match.

Only ints and a line number per step are kept, so a million-step trace costs a few MB.
Words for people (method, prompt text, update kind) are read back from the input for the
few steps a diff or a graph shows (:meth:`Steps.describe`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from acp_pipes.canonical import CanonicalError, canonical_hash
from acp_pipes.errors import Warn
from acp_pipes.jsonl import InputError, Line, display_name, read_lines, unparsable
from acp_pipes.normalize import Normalizer
from acp_pipes.streams import ASR, describe, header_format
from acp_pipes.wire import decode_raw

__all__ = ["ASR_BOOKKEEPING", "StepTable", "Steps", "load_steps", "summarize_message",
           "summarize_record", "spool_stdin", "read_lineage"]

#: ASR record fields that are bookkeeping, not content: excluded before hashing a step.
#: seq/id (position and identity in one stream), ts/tsSource/observedAt (times), native
#: (pointers to the wire frames), supersedes/parent/copiedFrom (references to other
#: records' ids, which differ between runs).
ASR_BOOKKEEPING = frozenset(
    ("seq", "id", "ts", "tsSource", "observedAt", "native", "supersedes", "parent",
     "copiedFrom")
)


@dataclass
class StepTable:
    """Keys -> small ints, shared by every input of one alignment."""

    ids: dict[tuple, int] = field(default_factory=dict)
    keys: list[tuple] = field(default_factory=list)
    #: per id: (dir or type, method or kind or None) for the ops output
    meta: list[tuple[str, str | None, str | None]] = field(default_factory=list)

    def hash_of(self, step: int) -> str:
        return self.keys[step][1]


@dataclass
class Steps:
    """One input's steps: ``seq`` (step ids), and the input line of each step."""

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

    def describe(self, indices: Iterable[int]) -> dict[int, str]:
        """A short human summary of each wanted step (method, prompt text, update kind)."""
        want: dict[int, list[int]] = {}
        for i in indices:
            if 0 <= i < len(self.seq):
                want.setdefault(self.lines[i], []).append(i)
        out: dict[int, str] = {}
        if not want:
            return out
        last = max(want)
        for line in read_lines(self.path):
            if line.number in want:
                text = _summary_of_line(line.raw, self.kind)
                for i in want[line.number]:
                    out[i] = text
            if line.number >= last:
                break
        return out


def spool_stdin() -> str:
    """Copy stdin to a temporary file, so it can be read twice like a named file."""
    fd, path = tempfile.mkstemp(prefix="acp-align-", suffix=".jsonl")
    with os.fdopen(fd, "wb") as f:
        import sys

        shutil.copyfileobj(sys.stdin.buffer, f)
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
) -> Steps:
    """Read one input (trace or ASR stream, told apart by its first line) into steps.
    An input unreadable past a point (a .gz cut short) raises its read error; with
    ``keep_cut``, the steps read before it are kept and the error is in
    :attr:`Steps.cut`, for a caller that reports it after its output. An input unreadable
    before its first line always raises."""
    source = source or display_name(path)
    cuts: list[InputError] = []
    lines = _until_cut(read_lines(path), source, cuts)
    first: Line | None = None
    for line in lines:
        if line.raw.strip():
            first = line
            break
    if first is None:
        if cuts:
            raise cuts[0]
        raise InputError(source, 0, "empty input: no frames or records")
    try:
        head = orjson.loads(first.raw)
    except orjson.JSONDecodeError:
        head = None
    normalizer = normalizer or Normalizer.from_pointers([])
    rest = _chain(first, lines)
    fmt = header_format(head)
    try:
        if fmt == ASR:
            steps = _asr_steps(rest, path, source, table, normalizer, session, warn)
        else:
            steps = _trace_steps(rest, path, source, table, normalizer, session, warn,
                                 direction)
    except InputError:
        if cuts:  # nothing of what was asked for came before the cut: the cut says why
            raise cuts[0] from None
        raise
    steps.what = describe(fmt)
    if cuts and not keep_cut:
        raise cuts[0]
    steps.cut = cuts[0] if cuts else None
    return steps


def _chain(first: Line, rest: Iterator[Line]) -> Iterator[Line]:
    yield first
    yield from rest


def _until_cut(lines: Iterator[Line], source: str, cuts: list[InputError]
               ) -> Iterator[Line]:
    """``lines`` up to where they stop being readable (a .gz cut short, a bad disk), the
    read error (renamed to ``source``) appended to ``cuts``: a recording that stopped
    there, as acp-fold and acp-asr read it. A line the reader could not use is raised
    from the loop body, not here, so it is never taken for a cut."""
    while True:
        try:
            line = next(lines)
        except StopIteration:
            return
        except InputError as e:
            if e.line == 0:  # cannot open: nothing was read
                raise InputError(source, 0, e.message) from None
            cuts.append(InputError(source, e.line, e.message))
            return
        yield line


def _trace_steps(lines, path, source, table, normalizer, session, warn, direction) -> Steps:
    from acp_pipes.frame import frame_lines

    where = [0]

    def numbered() -> Iterator[Line]:
        # frame_lines yields a frame right after reading its line: this is that line
        for line in lines:
            where[0] = line.number
            yield line

    ids, keys, meta = table.ids, table.keys, table.meta
    seq: list[int] = []
    at = array("L")
    push, mark = seq.append, at.append
    hash_frame = normalizer.hash_frame
    identity = normalizer.identity
    try:
        for fr in frame_lines(numbered(), source, warn=warn, direction=direction):
            if session is not None and fr.get("sessionId") != session:
                continue
            h = fr.get("hash") if identity else hash_frame(fr)
            key = (fr["dir"], h)
            step = ids.get(key)
            if step is None:
                step = ids[key] = len(keys)
                keys.append(key)
                meta.append((fr["dir"], fr.get("kind"), fr.get("method")))
            push(step)
            mark(where[0])
    except ValueError as e:  # a bare stream without a direction
        raise InputError(source, 0, str(e)) from None
    if session is not None and not seq:
        raise InputError(source, 0, f"no frames of session {session!r}")
    return Steps(source, path, "trace", seq, at, session)


def _bad_line(warn: Warn | None) -> Callable[[Line, str], None]:
    """How an ASR reader treats a line it cannot use (not JSON, e.g. a torn last line
    after a crash; not an object; no type): reported through ``warn`` and skipped, so
    what was read before and after it still counts; without ``warn``, an InputError."""

    def bad(line: Line, message: str) -> None:
        if warn is None:
            raise InputError(line.source, line.number, message)
        what, sep, reason = message.partition(": ")
        warn(line.source, line.number, f"{what}, skipped{sep}{reason}")

    return bad


def _json_lines(lines: Iterable[Line], bad: Callable[[Line, str], None]
                ) -> Iterator[tuple[Line, Any]]:
    """The parsed JSON of each line of an ASR file; blank lines are passed over and a
    line that is not JSON goes to ``bad`` (skipped or fatal, as ``bad`` decides)."""
    for line in lines:
        if not line.raw.strip():
            continue
        try:
            rec = orjson.loads(line.raw)
        except orjson.JSONDecodeError as e:
            bad(line, f"{unparsable(line.terminated)}: {e}")
            continue
        yield line, rec


def _asr_steps(lines, path, source, table, normalizer, session, warn=None) -> Steps:
    ids, keys, meta = table.ids, table.keys, table.meta
    seq: list[int] = []
    at = array("L")
    header: dict | None = None
    selected = session is None
    found = False
    bad = _bad_line(warn)
    for line, rec in _json_lines(lines, bad):
        if not isinstance(rec, dict):
            bad(line, "an ASR record must be a JSON object")
            continue
        if header_format(rec) == ASR:
            selected = session is None or rec.get("sessionId") == session
            if selected and (header is None or session is not None):
                header = rec
                found = True
            continue
        if not selected:
            continue
        rtype = rec.get("type")
        if not isinstance(rtype, str):
            bad(line, "ASR record without a string 'type'")
            continue
        content = {k: v for k, v in rec.items() if k not in ASR_BOOKKEEPING}
        try:
            h = canonical_hash(normalizer.apply(content))
        except CanonicalError as e:
            bad(line, f"record has no canonical form: {e}")
            continue
        key = (rtype, h)
        step = ids.get(key)
        if step is None:
            step = ids[key] = len(keys)
            keys.append(key)
            meta.append((rtype, _asr_kind(rec), None))
        seq.append(step)
        at.append(line.number)
    if session is not None and not found:
        raise InputError(source, 0, f"no ASR stream of session {session!r}")
    return Steps(source, path, "asr", seq, at, session, header)


def _asr_kind(rec: dict) -> str | None:
    """The sub-kind worth showing next to an ASR record's type (role, state, status)."""
    for name in ("role", "state", "kind", "status"):
        v = rec.get(name)
        if isinstance(v, str):
            return v
    return None


# -- words for people ------------------------------------------------------------------


def _summary_of_line(raw: bytes, kind: str) -> str:
    try:
        rec = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _clip(raw.decode("utf-8", "replace"))
    if kind == "asr":
        return summarize_record(rec) if isinstance(rec, dict) else _clip(str(rec))
    if isinstance(rec, dict) and "dir" in rec and ("raw" in rec or "raw_b64" in rec):
        try:
            msg_raw = decode_raw(rec)
        except ValueError:
            return "(unreadable frame)"
        try:
            msg = orjson.loads(msg_raw)
        except orjson.JSONDecodeError:
            return "(not JSON) " + _clip(msg_raw.decode("utf-8", "replace"))
        return summarize_message(msg)
    return summarize_message(rec)


def _clip(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _text_of(value: Any) -> str | None:
    """The first text found in a content block, a list of blocks, or a chunk."""
    if isinstance(value, dict):
        t = value.get("text")
        if isinstance(t, str):
            return t
        for k in ("content", "prompt"):
            if k in value:
                found = _text_of(value[k])
                if found is not None:
                    return found
    elif isinstance(value, list):
        for v in value:
            found = _text_of(v)
            if found is not None:
                return found
    return None


def summarize_message(msg: Any) -> str:
    """One short line for an ACP JSON-RPC message: method, update kind, a snippet of text.

    >>> summarize_message({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
    ...   "params": {"prompt": [{"type": "text", "text": "hello 1"}]}})
    'session/prompt "hello 1"'
    """
    if not isinstance(msg, dict):
        return _clip(orjson.dumps(msg).decode())
    method = msg.get("method")
    params = msg.get("params")
    if isinstance(method, str):
        parts = [method]
        if isinstance(params, dict):
            upd = params.get("update")
            if isinstance(upd, dict):
                su = upd.get("sessionUpdate")
                if isinstance(su, str):
                    parts.append(su)
                for k in ("state", "status", "stopReason"):
                    if isinstance(upd.get(k), str):
                        parts.append(upd[k])
                text = _text_of(upd)
            else:
                text = _text_of(params)
            if text is not None:
                parts.append(orjson.dumps(_clip(text, 40)).decode())
        return " ".join(parts)
    if "error" in msg:
        err = msg["error"]
        if isinstance(err, dict):
            return f"error {err.get('code')} {_clip(str(err.get('message', '')), 40)}"
        return "error"
    if "result" in msg:
        res = msg["result"]
        if isinstance(res, dict):
            if not res:
                return "result {}"
            keys = ",".join(list(res)[:4])
            for k in ("stopReason", "sessionId", "messageId"):
                if isinstance(res.get(k), str):
                    return f"result {k}={_clip(res[k], 30)}"
            return f"result {{{keys}}}"
        return "result " + _clip(orjson.dumps(res).decode(), 40)
    return _clip(orjson.dumps(msg).decode())


def summarize_record(rec: dict) -> str:
    """One short line for an ASR record: its type, sub-kind and a snippet of text."""
    parts = [str(rec.get("type"))]
    kind = _asr_kind(rec)
    if kind:
        parts.append(kind)
    for k in ("name", "childSession", "title"):
        if isinstance(rec.get(k), str):
            parts.append(_clip(rec[k], 30))
            break
    text = _text_of(rec)
    if text is not None:
        parts.append(orjson.dumps(_clip(text, 40)).decode())
    return " ".join(parts)


def read_lineage(path: str, source: str | None = None, warn: Warn | None = None
                 ) -> list[dict[str, Any]]:
    """What a lineage graph needs from each ASR stream of a file: its header, record
    count, ``subagent`` records (childSession, callId; ASR-721), ``state: resumed``
    records, and the first user prompt (for the label)."""
    source = source or display_name(path)
    streams: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    bad = _bad_line(warn)
    for line, rec in _json_lines(read_lines(path), bad):
        if header_format(rec) == ASR:
            cur = {"header": rec, "source": source, "records": 0, "subagents": [],
                   "resumes": 0, "prompt": None}
            streams.append(cur)
            continue
        if cur is None:
            got = describe(header_format(rec))
            raise InputError(line.source, line.number,
                             f"expected an ASR stream (a header line), got {got}")
        if not isinstance(rec, dict):
            bad(line, "an ASR record must be a JSON object")
            continue
        cur["records"] += 1
        rtype = rec.get("type")
        if rtype == "subagent" and isinstance(rec.get("childSession"), str):
            call = rec.get("callId")
            cur["subagents"].append((rec["childSession"], call if isinstance(call, str) else None))
        elif rtype == "state" and rec.get("state") == "resumed":
            cur["resumes"] += 1
        elif rtype == "message" and rec.get("role") == "user" and cur["prompt"] is None:
            text = _text_of(rec)
            if text is not None:
                cur["prompt"] = _clip(text, 40)
    if not streams:
        raise InputError(source, 0, "no ASR stream (no header line)")
    return streams

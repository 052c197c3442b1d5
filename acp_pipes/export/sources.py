"""Any stage in, ASR streams out: what acp-export reads, at the edge.

ASR streams are read as they are; wire logs, frames and folded entities are converted
in-process exactly as acp-asr converts them (:func:`acp_pipes.asr.mapping.convert_paths`,
every input one connection of the run, numbered on), into a temporary file of streams
back to back that is read like any other. Each stream is read twice: once, cheaply, for
the trace context its records carry (a link from another session must know the trace
it points into), then record by record for the spans. Memory stays flat: the records
stream from files.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import orjson

from acp_pipes.asr.reader import UntilCut, iter_streams
from acp_pipes.errors import InputError, Note, Warn
from acp_pipes.export.fields import parse_traceparent
from acp_pipes.io.lines import STDIN, display_name, read_lines
from acp_pipes.io.streams import ASR, describe

__all__ = ["Sources", "asr_sources"]


@dataclass
class Sources:
    """The ASR files to read (path, the name diagnostics give it), and the read error
    that cut an input short (what came before it is exported), if any."""

    files: list[tuple[str, str]]
    cut: InputError | None = None
    note: str | None = None  # a recording that holds no session: why

    def streams(self, warn: Warn | None) -> Iterator[tuple[dict, Iterator[dict]]]:
        """Every stream of every file: (header, its records as they are read)."""
        for path, name in self.files:
            lines = UntilCut((ln.raw + b"\n" if ln.terminated else ln.raw
                              for ln in read_lines(path)), name)
            for header, _, records in iter_streams(lines, name, warn):
                yield header, records
            if lines.error is not None and self.cut is None:
                self.cut = lines.error

    def trace_contexts(self) -> dict[str, tuple[int, int]]:
        """Each session's first ``_meta.traceparent`` (ASR-708): a raw scan, parsing
        only the headers and the lines that name one. Bad lines are the second pass's
        to report."""
        found: dict[str, tuple[int, int]] = {}
        for path, _ in self.files:
            sid = None
            try:
                for ln in read_lines(path):
                    raw = ln.raw
                    if b'"header"' in raw:
                        try:
                            head = orjson.loads(raw)
                        except orjson.JSONDecodeError:
                            continue
                        if type(head) is dict and head.get("type") == "header":
                            sid = head.get("sessionId")
                        continue
                    if sid is None or sid in found or b"traceparent" not in raw:
                        continue
                    try:
                        rec = orjson.loads(raw)
                    except orjson.JSONDecodeError:
                        continue
                    meta = rec.get("_meta") if type(rec) is dict else None
                    if type(meta) is dict:
                        got = parse_traceparent(meta.get("traceparent"))
                        if got is not None and isinstance(sid, str):
                            found[sid] = got
            except (InputError, OSError):
                continue  # the second pass reports it
        return found


def _kind(path: str, name: str) -> str | None:
    from acp_pipes.view.load import kind_of

    try:
        return kind_of(path)
    except InputError as e:
        raise InputError(name, e.line, e.message) from None


@contextmanager
def asr_sources(paths: list[str], *, warn: Warn, note: Note | None = None
                ) -> Iterator[Sources]:
    """The inputs as ASR files; temporary files (stdin spooled, conversions) are removed
    when the block ends."""
    temps: list[str] = []
    try:
        asr: list[tuple[str, str]] = []
        convert: list[tuple[str, str]] = []
        for path in paths:
            name = display_name(path)
            if path == STDIN:  # read twice (its kind, then its records): spool it once
                from acp_pipes.align.steps import spool_stdin

                path = spool_stdin()
                temps.append(path)
            fmt = _kind(path, name)
            if fmt == ASR:
                asr.append((path, name))
            elif fmt is None:
                raise InputError(name, 1, f"{describe(None)}: holds one direction, no "
                                 "sessions to export (record both with acp-tee)")
            else:
                convert.append((path, name))
        sources = Sources(asr)
        if convert:
            converted = _converted(convert, warn, note, temps, sources)
            if os.path.getsize(converted[0]):  # (no session: nothing converted to read)
                sources.files[:0] = [converted]
        yield sources
    finally:
        for t in temps:
            try:
                os.unlink(t)
            except OSError:
                pass


def _converted(inputs: list[tuple[str, str]], warn: Warn, note: Note | None, temps: list[str],
               sources: Sources) -> tuple[str, str]:
    from acp_pipes.asr.mapping import convert_paths

    names = dict(inputs)

    def renamed(source: str, line: int, message: str) -> None:
        warn(names.get(source, source), line, message)

    done = convert_paths([p for p, _ in inputs], warn=renamed, note=note)
    fd, tmp = tempfile.mkstemp(prefix="acp-export-", suffix=".asr.jsonl")
    temps.append(tmp)
    with os.fdopen(fd, "wb") as f:
        done.spool.write_to(f, done.headers)
    if done.unreadable is not None:
        e = done.unreadable
        sources.cut = InputError(names.get(e.source, e.source), e.line, e.message)
    sources.note = done.no_session()
    return tmp, "+".join(n for _, n in inputs)

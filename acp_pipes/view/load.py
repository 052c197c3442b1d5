"""Any stage in, one recording out: what a session page shows, read with the library.

A wire log, frames stream or bare ACP JSONL (with a direction) gives the protocol
timeline (:func:`acp_pipes.frame.core.read_frames`) and, converted in-process exactly as
acp-asr converts it (:func:`acp_pipes.fold.fold_paths` into an
:class:`acp_pipes.asr.Converter`), the sessions' transcripts. Folded entities give the
transcripts only, ASR streams too (their records are what the transcript shows). A bare
stream has one direction: it has a timeline but no transcript.

Damaged input is shown as far as it was read: lines the readers skip are reported
through ``warn`` and listed in the page; an input unreadable past a point (a ``.gz`` cut
short) keeps what came before and is returned in :attr:`Recording.cut` for the caller to
report after the page is written. A recording the fold cannot read (a protocol version
it does not know) still gets its timeline, with the reason in the page.
"""

from __future__ import annotations

from typing import Any

import orjson

from acp_pipes.errors import InputError, Warn
from acp_pipes.io.lines import display_name, read_lines
from acp_pipes.io.streams import ASR, FOLD, describe, header_format
from acp_pipes.view.timeline import Strings, Timeline
from acp_pipes.view.transcript import SessionView, lineage_links

__all__ = ["Recording", "kind_of", "load"]

class Recording:
    """What one page shows: inputs, the timeline, the sessions, notes for the reader."""

    def __init__(self) -> None:
        self.strings = Strings()
        self.timeline = Timeline(self.strings)
        self.sessions: dict[str, SessionView] = {}
        self.inputs: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.cut: list[InputError] = []
        self.validated = False

    def page_data(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """What the session page embeds: the data it reads at once, and the parts it
        parses when it needs them (``acp-frames``: the timeline's columns;
        ``acp-s-<n>``: session n's cards)."""
        frames = self.timeline.columns()
        sessions, parts = [], {"acp-frames": frames}
        for n, s in enumerate(self.sessions.values()):
            meta = s.to_json()
            parts[f"acp-s-{n}"] = meta.pop("items")
            meta["part"] = f"acp-s-{n}"
            sessions.append(meta)
        data = {
            "inputs": self.inputs,
            "notes": self.notes,
            "nframes": frames["n"],
            "nviolations": sum(len(v) for v in self.timeline.violations.values()),
            "validated": self.validated,
            "sessions": sessions,
            "strings": self.strings.items,
        }
        return data, parts


def kind_of(path: str) -> str | None:
    """The stream format of an input, from its first line that is not blank (None: a
    bare ACP JSONL stream)."""
    lines = read_lines(path)
    try:
        for line in lines:
            if not line.raw.strip():
                continue
            try:
                head = orjson.loads(line.raw)
            except orjson.JSONDecodeError:
                return None
            return header_format(head)
    finally:
        lines.close()
    raise InputError(display_name(path), 0, "empty input: no frames or records")


def load(paths: list[str], names: list[str] | None = None, *, direction: str | None = None,
         warn: Warn | None = None, validate: bool = True,
         revision: str | None = None) -> Recording:
    """Read every input (``names`` are how the page and diagnostics call them). With
    ``validate``, every frame is checked against the ACP spec (:mod:`acp_pipes.frame.validate`,
    what ``acp-frame --validate`` reports; ``revision`` forces a schema revision, as its
    ``--schema`` does) and its violations shown on its row."""
    names = names or [display_name(p) for p in paths]
    rec = Recording()
    seen: set[tuple[str, int]] = set()  # both passes read the same lines: say it once

    def note(source: str, line: int, message: str) -> None:
        key = (source, line)
        if key in seen:
            return
        seen.add(key)
        if len(rec.notes) < 1000:
            rec.notes.append(f"{source}:{line}: {message}" if line else f"{source}: {message}")
        if warn is not None:
            warn(source, line, message)

    traces: list[tuple[str, str]] = []
    convertible: list[tuple[str, str]] = []  # what fold_paths reads: wire, frames, fold
    asr: list[tuple[str, str]] = []
    for path, name in zip(paths, names, strict=True):
        fmt = kind_of(path)
        rec.inputs.append({"name": name, "what": describe(fmt)})
        if fmt == ASR:
            asr.append((path, name))
            continue
        if fmt != FOLD:
            traces.append((path, name))
        if fmt is not None:
            convertible.append((path, name))
    for path, name in traces:
        _frames(rec, path, name, direction, note, validate, revision)
    rec.validated = validate and bool(traces)
    if any(i["what"] == describe(None) for i in rec.inputs):
        rec.notes.append("a bare ACP JSONL stream holds one direction: it has a timeline "
                         "but no transcript (record both with acp-tee)")
    headers: dict[str, dict] = {}
    records: dict[str, list[dict]] = {}
    if convertible:
        _convert(rec, convertible, note, headers, records)
    for path, name in asr:
        _asr(rec, path, name, note, headers, records)
    for sid, head in headers.items():
        rec.sessions[sid] = SessionView(sid, head, records.get(sid, []))
    for sid, links in lineage_links(headers, records).items():
        rec.sessions[sid].links = links
    return rec


def _frames(rec: Recording, path: str, name: str, direction: str | None, warn: Warn,
            validate: bool, revision: str | None = None) -> None:
    from acp_pipes.frame.core import read_frames
    from acp_pipes.frame.validate import Checker

    # connections are numbered across every input, as acp-asr numbers them
    conn = rec.timeline.conn[-1] + 1 if rec.timeline.conn else 0
    timeline = rec.timeline
    first = True
    checker: Checker | None = None

    def finish() -> None:
        if checker is not None:
            for v in checker.finish():
                timeline.violation(conn, v)

    try:
        for fr in read_frames(path, direction=direction, warn=_renamed(warn, path, name),
                              headers=True):
            if "dir" not in fr:  # a frames header: the next connection starts
                finish()
                if not first:
                    conn += 1
                first = False
                timeline.new_connection()
                # a bare stream (no source) holds one direction: nothing to pair
                checker = Checker(paired=fr.get("source") is not None,
                                  revision=revision) if validate else None
                continue
            timeline.add(fr, conn)
            if checker is not None:
                for v in checker.check(fr):
                    timeline.violation(conn, v)
        finish()
    except ValueError as e:  # a bare stream without a direction
        raise InputError(name, 0, str(e)) from None
    except InputError as e:
        if e.line == 0 and not len(timeline):
            raise InputError(name, 0, e.message) from None
        rec.cut.append(InputError(name, e.line, e.message))
        rec.notes.append(f"{name}:{e.line}: {e.message} (shown as read up to there)")


def _renamed(warn: Warn, path: str, name: str) -> Warn:
    shown = display_name(path)

    def w(source: str, line: int, message: str) -> None:
        warn(name if source == shown else source, line, message)

    return w


def _convert(rec: Recording, inputs: list[tuple[str, str]], warn: Warn,
             headers: dict[str, dict], records: dict[str, list[dict]]) -> None:
    """Fold and map each input as acp-asr does: one connection per wire log, and one
    entity state per session across all of them (ASR-704), so a session resumed on a
    connection recorded to another file goes on from where the first left it."""
    from acp_pipes.asr.mapping import Converter
    from acp_pipes.fold import ProtocolVersionError, fold_paths
    from acp_pipes.fold.state import States

    conv = Converter()
    states = States()
    try:
        for i, (path, name) in enumerate(inputs):
            feed = conv.feed
            for r in fold_paths([path], warn=_renamed(warn, path, name),
                                connection=conv.conn + (1 if i else 0), states=states):
                feed(r)
    except ProtocolVersionError as e:
        rec.notes.append(f"no transcript: {e}")
        states.close()
        conv.close()
        return
    except InputError as e:  # cut short: the transcript of what was read
        if not any(c.source == e.source for c in rec.cut):
            rec.cut.append(e)
    states.close()
    conv.close()
    for sid, head in conv.headers().items():
        headers[sid] = head
        records[sid] = conv.records.get(sid, [])


def _asr(rec: Recording, path: str, name: str, warn: Warn, headers: dict[str, dict],
         records: dict[str, list[dict]]) -> None:
    from acp_pipes.asr.reader import UntilCut, read_streams

    lines = UntilCut((ln.raw + b"\n" if ln.terminated else ln.raw for ln in read_lines(path)),
                     name)
    for stream in read_streams(lines, name, _renamed(warn, path, name)):
        sid = stream.session_id
        if sid in headers:
            rec.notes.append(f"{name}:{stream.line}: session {sid!r} again: its records "
                             "follow those already read")
            records[sid].extend(stream.records)
            continue
        headers[sid] = stream.header
        records[sid] = stream.records
    if lines.error is not None:
        rec.cut.append(lines.error)
        rec.notes.append(f"{lines.error} (shown as read up to there)")

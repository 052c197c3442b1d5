"""Reading what acp-fold and acp-asr accept: wire logs, frames streams, fold streams.

Each wire log or frames stream is one connection (the ``<n>`` of ASR-716): it gets a
:class:`~acp_pipes.fold.core.Folder` of its own and becomes one fold stream. The fold
needs only each frame's direction, time and parsed message, so wire and frames records
are read directly (no canonical hashing on this path). A line that is not JSON is
reported with its file and line and skipped; what came before it is kept.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

from acp_pipes.canonical import ParseError, parse_json
from acp_pipes.fold.core import Folder
from acp_pipes.jsonl import InputError, display_name, read_lines
from acp_pipes.streams import ASR, FOLD, FRAMES, VERSIONS, WIRE, describe, header_format

__all__ = ["FOLD_VERSION", "fold", "fold_header", "fold_paths", "read_source"]

FOLD_VERSION = VERSIONS[FOLD]
Warn = Callable[[str, int, str], None]


def fold_header(connection: int, source: Any, snapshots: bool = False) -> dict:
    return {"format": FOLD, "version": FOLD_VERSION, "connection": connection,
            "snapshots": snapshots, "source": source}


def parse_raw(rec: dict) -> Any:
    """The parsed JSON-RPC message of a wire or frame record (None if it is not JSON)."""
    raw = rec.get("raw")
    if raw.__class__ is not str:
        b64 = rec.get("raw_b64")
        try:
            raw = base64.b64decode(b64, validate=True)
        except (TypeError, ValueError):
            return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            return parse_json(raw)
        except ParseError:
            return None


def fold(frames: Iterable[dict], *, connection: int = 0, snapshots: bool = False,
         warn: Callable[[str], None] | None = None) -> Iterator[dict]:
    """The pure core: frame (or wire) records of one connection -> fold records.
    A record may carry the parsed message as ``msg`` to skip parsing ``raw``."""
    folder = Folder(connection, snapshots=snapshots, warn=warn)
    feed = folder.feed
    for fr in frames:
        msg = fr["msg"] if "msg" in fr else parse_raw(fr)
        yield from feed(fr["seq"], fr.get("t"), fr["dir"], msg)
    yield from folder.finish()


def read_source(path: str, warn: Warn) -> Iterator[tuple[str, Any, int]]:
    """``("header", (format, header), line)``, then ``("frame", rec, line)`` for wire and
    frames records or ``("fold", rec, line)`` for fold records."""
    source = display_name(path)
    loads = orjson.loads
    mode: str | None = None
    for line in read_lines(path):
        try:
            rec = loads(line.raw)
        except orjson.JSONDecodeError as e:
            if not line.raw.strip():
                continue
            what = "torn last line (no LF)" if not line.terminated else "not JSON"
            if mode is None:
                raise InputError(source, line.number, f"{what}: {e}") from None
            warn(source, line.number, f"{what}, skipped: {e}")
            continue
        if mode in (WIRE, FRAMES) and rec.__class__ is dict and "dir" in rec:
            yield "frame", rec, line.number
            continue
        if mode == FOLD and rec.__class__ is dict and "ev" in rec:
            yield "fold", rec, line.number
            continue
        fmt = header_format(rec)
        if fmt in (WIRE, FRAMES, FOLD):
            version = rec.get("version")
            if version != VERSIONS[fmt]:
                raise InputError(source, line.number,
                                 f"{describe(fmt)} of version {version!r}; this acp-pipes "
                                 f"reads version {VERSIONS[fmt]}")
            mode = fmt
            yield "header", (fmt, rec), line.number
            continue
        if fmt == ASR:
            raise InputError(source, line.number,
                             "expected a wire log, frames or folded entities, got an ASR "
                             "stream")
        if mode is None:
            raise InputError(source, line.number,
                             "expected a wire log, frames or folded entities (a bare ACP "
                             "stream has one direction only: record it with acp-tee)")
        warn(source, line.number, f"not a {describe(mode)} record, skipped")


def fold_paths(paths: Iterable[str], *, snapshots: bool = False, warn: Warn,
               connection: int = 0) -> Iterator[dict]:
    """Fold streams (header, then records) for every connection in ``paths``, in order;
    fold input passes through as it is. ``connection`` numbers the first one."""
    conn = connection
    for path in paths:
        source = display_name(path)
        folder: Folder | None = None
        last = 0

        def fwarn(msg: str, _s=source) -> None:
            warn(_s, last, msg)

        for kind, item, number in read_source(path, warn):
            last = number
            if kind == "frame":
                rec = item
                seq = rec.get("seq")
                d = rec.get("dir")
                if seq.__class__ is not int or d not in ("c2a", "a2c"):
                    warn(source, number, "not a wire record (needs seq, t, dir), skipped")
                    continue
                msg = parse_raw(rec)
                if msg is None:
                    warn(source, number, "frame is not JSON, skipped")
                    continue
                yield from folder.feed(seq, rec.get("t"), d, msg)  # type: ignore[union-attr]
            elif kind == "fold":
                yield item
            else:
                if folder is not None:
                    yield from folder.finish()
                    folder = None
                fmt, header = item
                if fmt == FOLD:
                    yield header
                    conn = max(conn, int(header.get("connection") or 0) + 1)
                    continue
                source_header = header.get("source") if fmt == FRAMES else header
                yield fold_header(conn, source_header, snapshots)
                folder = Folder(conn, snapshots=snapshots, warn=fwarn)
                conn += 1
        if folder is not None:
            yield from folder.finish()

"""The index of written entities (ASR-706, ASR-717) keeps its memory flat by moving old
entries to a temporary sqlite database: the answers must not depend on where an entry
lives."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest

from acp_pipes.asr.mapping import Converter
from acp_pipes.asr.output import Spool
from acp_pipes.fold import fold_paths
from acp_pipes.fold.index import DigestIndex
from tests.conftest import REPO


def _d(i: int) -> bytes:
    return hashlib.blake2b(str(i).encode(), digest_size=16).digest()


def test_entries_answer_the_same_in_memory_and_on_disk():
    idx = DigestIndex(limit=8)
    for i in range(500):
        idx.put(_d(i), i)
    assert idx.on_disk > 400 and len(idx.mem) <= 8
    assert all(idx.get(_d(i)) == i for i in range(500))
    assert all(_d(i) not in idx for i in range(500, 1500))  # misses, filtered or not
    idx.put(_d(3), 42)  # a newer value in memory wins over the one on disk...
    assert idx.get(_d(3)) == 42
    for i in range(1000, 1020):  # ...and replaces it when it spills
        idx.put(_d(i), i)
    assert idx.get(_d(3)) == 42
    idx.close()


CASES = ["ASR-706-change-after-final", "ASR-717-resume-no-duplicates",
         "ASR-717-replayed-tool-status", "ASR-718-fork-lineage", "ASR-705-final-and-cut-off"]


def _convert(wire, limit: int | None, store) -> Converter:
    conv = Converter(store=store)
    if limit is not None:
        conv.index = DigestIndex(limit=limit)
    for rec in fold_paths([str(wire)], warn=lambda *a: None):
        conv.feed(rec)
    conv.close()
    return conv


@pytest.mark.parametrize("case", CASES)
def test_spilled_index_gives_the_same_streams(case, tmp_path):
    """ASR-706/717/718 decisions (supersedes, no duplicate, copiedFrom) with every entry
    on disk (limit 1) equal those with everything in memory, byte for byte, through
    the Spool that the CLI uses (the earlier record is read back from it)."""
    wire = REPO / "tests" / "fixtures" / "asr" / case / "wire.jsonl"
    outs = []
    for limit in (None, 1):
        spool = Spool()
        conv = _convert(wire, limit, spool)
        out = tmp_path / f"{limit}"
        out.mkdir()
        written, failed = spool.write_dir(str(out), conv.headers())
        assert not failed
        for path in written:
            outs.append((limit, path.rsplit("/", 1)[-1], Path(path).read_bytes()))
        if limit == 1:
            assert conv.index.on_disk > 0
    mem = {name: data for limit, name, data in outs if limit is None}
    disk = {name: data for limit, name, data in outs if limit == 1}
    assert mem == disk and mem
    assert any(b'"supersedes"' in d or b'"copiedFrom"' in d for d in mem.values()) or (
        case == "ASR-705-final-and-cut-off")


def test_repeat_is_checked_against_the_stored_record(tmp_path):
    """The content digest of an earlier record comes from the store: a replayed entity
    that says the same is not written again (ASR-717), one that differs supersedes."""
    wire = REPO / "tests" / "fixtures" / "asr" / "ASR-717-resume-no-duplicates" / "wire.jsonl"
    conv = _convert(wire, 1, None)
    recs = conv.records["s"]
    ids = [r.get("messageId") or r.get("callId") for r in recs if r["type"] != "state"]
    assert ids.count("u1") == 1 and ids.count("a1") == 1  # said the same: once
    sup = [r for r in recs if "supersedes" in r]
    assert [(r["type"], r["raw"]) for r in sup] == [("tool_result", "data, changed")]
    assert orjson.dumps(recs)  # plain JSON values throughout

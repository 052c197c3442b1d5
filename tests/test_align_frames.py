"""acp-align over frames streams: acp-frame's records are trusted, not framed again.

Every test starts from a real recording (the echo agent under acp-tee) framed by the
real acp-frame; the frames stream is then edited to show which path was taken.
"""

from __future__ import annotations

import io
from pathlib import Path
from unittest.mock import patch

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_pipes.align import steps as steps_module
from acp_pipes.align.steps import StepTable, load_steps
from acp_pipes.echo.client import client_session
from tests.conftest import record_lockstep, run_tool


@pytest.fixture(scope="module")
def rec(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("frames")
    client = list(client_session(5, permission_every=2))
    wire = tmp / "a.wire.jsonl"
    record_lockstep(client, wire)
    wire_b = tmp / "b.wire.jsonl"
    record_lockstep([x.replace(b'"hello 3"', b'"bye 3"') for x in client], wire_b)
    out = {"wire": wire, "wire_b": wire_b, "tmp": tmp}
    for name in ("wire", "wire_b"):
        p = run_tool("frame", str(out[name]))
        assert p.returncode == 0, p.stderr
        out[name.replace("wire", "frames")] = tmp / f"{name}.frames.jsonl"
        out[name.replace("wire", "frames")].write_bytes(p.stdout)
    return out


def summary(*args) -> dict:
    p = run_tool("align", *map(str, args), "--format", "json")
    s = orjson.loads(p.stdout)
    assert p.returncode == (0 if s["equal"] else 1), p.stderr  # 0 the same, 1 they differ
    for side in ("a", "b"):
        s[side].pop("source")
    return s


def test_frames_align_as_the_wire_logs_they_came_from(rec):
    by_wire = summary(rec["wire"], rec["wire_b"])
    assert by_wire["counts"] == {"equal": 82, "changed": 12, "only-a": 0, "only-b": 0}
    assert summary(rec["frames"], rec["frames_b"]) == by_wire
    assert summary(rec["frames"], rec["wire_b"]) == by_wire
    assert summary(rec["frames"], rec["frames_b"], "--ignore", "/id") == \
        summary(rec["wire"], rec["wire_b"], "--ignore", "/id")


def lines_of(path: Path) -> list[dict]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def write(path: Path, recs: list[dict], extra: bytes = b"") -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs) + extra)
    return path


def test_a_frames_streams_hash_is_used_not_computed_again(rec):
    """A frames record whose hash was changed by hand is taken at its word: the step
    differs from the same frame in the wire log (nothing was re-hashed). With --ignore
    the messages are normalised and hashed here, so the hand-made hash plays no part;
    so they are under the default preset (which hashes what it masked)."""
    recs = lines_of(rec["frames"])
    k = next(i for i, r in enumerate(recs) if r.get("method") == "session/prompt")
    recs[k]["hash"] = "blake3:" + "0" * 64
    tampered = write(rec["tmp"] / "tampered.frames.jsonl", recs)
    s = summary(rec["wire"], tampered, "--strict")
    assert s["counts"]["changed"] == 1 and s["first_divergence"]["a"] == k - 1
    assert s["first_divergence"]["diff"] == []  # the messages are the same
    assert summary(rec["wire"], tampered, "--strict", "--ignore", "/nothing")["distance"] == 0
    assert summary(rec["wire"], tampered)["distance"] == 0


def test_a_record_without_what_acp_frame_writes_is_framed(rec, tmp_path):
    recs = lines_of(rec["frames"])
    for r in recs[3:6]:
        for key in ("hash", "kind", "method", "sessionId"):
            r.pop(key, None)
    stripped = write(tmp_path / "stripped.frames.jsonl", recs)
    assert summary(rec["wire"], stripped)["distance"] == 0


def test_a_wire_log_after_a_frames_stream_is_framed(rec, tmp_path):
    """Streams back to back in one file: frames, then a wire log (framed here)."""
    both = tmp_path / "both.jsonl"
    both.write_bytes(rec["frames"].read_bytes() + rec["wire_b"].read_bytes())
    twice = tmp_path / "twice.jsonl"
    twice.write_bytes(rec["wire"].read_bytes() + rec["wire_b"].read_bytes())
    assert summary(both, twice)["distance"] == 0
    table = StepTable()
    a = load_steps(str(both), table)
    b = load_steps(str(twice), table)
    assert a.seq == b.seq and len(a.seq) == 2 * (len(lines_of(rec["frames"])) - 1)


def test_bad_lines_in_a_frames_stream_are_reported_and_skipped(rec, tmp_path):
    raw = rec["frames"].read_bytes().splitlines(keepends=True)
    bad = tmp_path / "bad.frames.jsonl"
    bad.write_bytes(b"".join(raw[:4]) + b"{torn\n" + b"[1,2]\n" + b"".join(raw[4:]))
    p = run_tool("align", str(bad), str(rec["wire"]), "--format", "json")
    assert p.returncode == 0, p.stderr
    assert f"{bad}:5: not JSON, frame record skipped: ".encode() in p.stderr
    assert f"{bad}:6: not a frame record (needs seq, t, dir), skipped".encode() in p.stderr
    asr = tmp_path / "asr-inside.jsonl"
    asr.write_bytes(b"".join(raw[:4]) + b'{"type":"header","asr":"1.0","sessionId":"s"}\n')
    p = run_tool("align", str(asr), str(rec["wire"]))
    assert p.returncode == 2
    assert f"{asr}:5: expected a wire log or ACP JSONL, got an ASR stream".encode() in p.stderr


def test_a_newer_frames_stream_is_refused(rec, tmp_path):
    raw = rec["frames"].read_bytes().splitlines(keepends=True)
    head = orjson.loads(raw[0])
    head["version"] = 99
    newer = tmp_path / "newer.frames.jsonl"
    newer.write_bytes(orjson.dumps(head) + b"\n" + b"".join(raw[1:]))
    p = run_tool("align", str(newer), str(rec["wire"]))
    assert p.returncode == 2 and b"version 99" in p.stderr and p.stdout == b""


def test_a_reply_before_its_request_counts_in_a_frames_stream_too(rec, tmp_path):
    """A frames stream's records are taken as written, and still (--strict) a reply
    logged before its request is a step of its own, as in the wire log it was framed
    from; by default both are put in causal order, the same run as recorded."""
    head, *rest = rec["wire"].read_bytes().splitlines()
    recs = [r for r in map(orjson.loads, rest) if "dir" in r]
    msgs = [orjson.loads(r["raw"]) for r in recs]
    ask = next(i for i, m in enumerate(msgs) if m.get("method") == "session/request_permission")
    answer = next(i for i, (r, m) in enumerate(zip(recs, msgs, strict=True))
                  if r["dir"] == "c2a" and "result" in m and m["id"] == msgs[ask]["id"])
    early = recs[:ask] + [recs[answer]] + recs[ask:answer] + recs[answer + 1:]
    wire = tmp_path / "early.wire.jsonl"
    wire.write_bytes(head + b"\n" + b"".join(orjson.dumps(r) + b"\n" for r in early))
    frames = tmp_path / "early.frames.jsonl"
    frames.write_bytes(run_tool("frame", str(wire)).stdout)
    by_wire = summary(rec["wire"], wire, "--strict")
    assert by_wire["counts"] == {"equal": 93, "changed": 0, "only-a": 1, "only-b": 1}
    assert summary(rec["frames"], frames, "--strict") == by_wire
    assert summary(rec["wire"], wire)["distance"] == 0
    assert summary(rec["frames"], frames)["distance"] == 0


def test_one_session_of_a_frames_stream(rec):
    sid = next(r["sessionId"] for r in lines_of(rec["frames"]) if r.get("sessionId"))
    by_wire = summary(rec["wire"], rec["wire_b"], "--session", sid)
    assert by_wire["a"]["steps"] < len(lines_of(rec["frames"])) - 1
    assert summary(rec["frames"], rec["frames_b"], "--session", sid) == by_wire


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), min_size=1,
                max_size=40),
       st.booleans(), st.sampled_from([1, 2, 3, 7, 64]), st.data())
def test_lines_read_back_are_the_lines_asked_for(lines, last_lf, block, data):
    """Steps are read back by counting newlines a block at a time: whatever the block
    size, the lines given are the file's lines with those numbers."""
    raw = b"\n".join(lines) + (b"\n" if last_lf else b"")
    numbers = sorted(data.draw(st.sets(st.integers(1, len(lines) + 2), max_size=6)))
    read = [x.removesuffix(b"\n") for x in io.BytesIO(raw)]  # as a file is read by line
    want = [(n, read[n - 1]) for n in numbers if n <= len(read)]
    with patch.object(steps_module, "_BLOCK", block):
        assert list(steps_module._lines_at(io.BytesIO(raw), numbers)) == want

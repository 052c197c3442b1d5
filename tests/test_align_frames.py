"""acp-align over frames streams: acp-frame's records are trusted, not framed again.

Every test starts from a real recording (the echo agent under acp-tee) framed by the
real acp-frame; the frames stream is then edited to show which path was taken.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from acp_pipes.align.steps import StepTable, load_steps
from acp_pipes.echo_client import client_session
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
    assert p.returncode in (0, 1), p.stderr
    s = orjson.loads(p.stdout)
    for side in ("a", "b"):
        s[side].pop("source")
    return s


def test_frames_align_as_the_wire_logs_they_came_from(rec):
    by_wire = summary(rec["wire"], rec["wire_b"])
    assert by_wire["counts"]["changed"] > 0
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
    the messages are normalised and hashed here, so the hand-made hash plays no part."""
    recs = lines_of(rec["frames"])
    k = next(i for i, r in enumerate(recs) if r.get("method") == "session/prompt")
    recs[k]["hash"] = "blake3:" + "0" * 64
    tampered = write(rec["tmp"] / "tampered.frames.jsonl", recs)
    s = summary(rec["wire"], tampered)
    assert s["counts"]["changed"] == 1 and s["first_divergence"]["a"] == k - 1
    assert s["first_divergence"]["diff"] == []  # the messages are the same
    assert summary(rec["wire"], tampered, "--ignore", "/nothing")["distance"] == 0


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

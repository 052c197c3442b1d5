"""acp-frame: classification, ids, response methods, sessions, hashes, bad input, summary."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import blake3
import orjson
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_pipes.echo.agent import EchoAgent
from acp_pipes.echo.client import client_session
from acp_pipes.frame.core import frames, read_frames
from acp_pipes.io.wire import decode_raw, frame_record, header
from acp_pipes.protocol.canonical import parse_json
from tests.conftest import run_tool

HDR = header(["agent"], started_ns=0, clock="epoch", host=False)


def msg(**kw) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", **kw})


def wire_log(frames_: list[tuple[str, bytes]] | list, *, hdr: dict = HDR, t0: int = 1000) -> bytes:
    """A wire log: header then one record per (dir, raw[, frame_record kwargs])."""
    out = [orjson.dumps(hdr)]
    for seq, item in enumerate(frames_):
        d, raw, *kw = item
        out.append(orjson.dumps(frame_record(seq, t0 + seq, d, raw, **(kw[0] if kw else {}))))
    return b"\n".join(out) + b"\n"


def parse_out(out: bytes) -> list[dict]:
    return [orjson.loads(ln) for ln in out.splitlines()]


def frame_cli(data: bytes, *args: str, tmp: Path | None = None, name: str = "wire.jsonl"):
    if tmp is not None:
        p = tmp / name
        p.write_bytes(data)
        return run_tool("frame", *args, str(p))
    return run_tool("frame", *args, input=data)


def jcs_hash(value) -> str:
    return "blake3:" + blake3.blake3(rfc8785.dumps(value)).hexdigest()


def echo_wire(prompts: int = 2, **kw) -> list[tuple[str, bytes]]:
    """A real session: the scripted client's frames and the echo agent's answers."""
    agent = EchoAgent()
    out: list[tuple[str, bytes]] = []
    for line in client_session(prompts, **kw):
        out.append(("c2a", line))
        out.extend(("a2c", f) for f in agent.feed(line))
    return out


# -- classification ---------------------------------------------------------------------


def test_every_kind_is_classified_through_the_cli():
    cases = [
        ("c2a", msg(id=1, method="session/prompt", params={"sessionId": "s"}), "request"),
        ("a2c", msg(method="session/update", params={"sessionId": "s"}), "notification"),
        ("a2c", msg(id=1, result={"stopReason": "end_turn"}), "response"),
        ("a2c", msg(id=7, error={"code": -32601, "message": "no"}), "error"),
        ("c2a", b"{not json", "invalid_json"),
        ("c2a", b"", "invalid_json"),
        ("c2a", b"\xff\xfe", "invalid_json"),
        ("c2a", b'{"id":1,"method":"x"}', "not_jsonrpc"),  # no "jsonrpc"
        ("c2a", b'{"jsonrpc":"1.0","id":1,"method":"x"}', "not_jsonrpc"),
        ("c2a", b'[{"jsonrpc":"2.0","id":1,"method":"x"}]', "not_jsonrpc"),  # batch
        ("c2a", b'{"jsonrpc":"2.0","id":1,"result":1,"error":{}}', "not_jsonrpc"),
        ("c2a", b'{"jsonrpc":"2.0","id":{"a":1},"method":"x"}', "not_jsonrpc"),
        ("c2a", b'{"jsonrpc":"2.0","method":5}', "not_jsonrpc"),
        ("c2a", b'{"jsonrpc":"2.0"}', "not_jsonrpc"),
        ("c2a", b'"just a string"', "not_jsonrpc"),
        ("c2a", b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"x"}', "not_jsonrpc"),
        ("c2a", b'{"jsonrpc":"2.0","id":"\\udc00","method":"m"}', "not_jsonrpc"),  # no UTF-8
        ("c2a", b"[" * 2000 + b"]" * 2000, "invalid_json"),  # deeper than JSON parsers go
        ("c2a", b'{"jsonrpc":"2.0","id":1.5,"method":"m"}', "request"),
    ]
    r = frame_cli(wire_log([(d, raw) for d, raw, _ in cases]))
    assert r.returncode == 0, r.stderr
    out = parse_out(r.stdout)
    assert out[0] == {"format": "acp-pipes/frames", "version": 1, "source": HDR}
    assert [f["kind"] for f in out[1:]] == [k for _, _, k in cases]
    # every bad frame was reported with its wire log line (header is line 1)
    err = r.stderr.decode()
    bad = [i + 2 for i, (_, _, k) in enumerate(cases) if k in ("invalid_json", "not_jsonrpc")]
    assert [int(ln.split(":")[2]) for ln in err.splitlines()] == bad
    assert "stdin:6: not JSON:" in err and "stdin:11: not JSON-RPC: a batch" in err


def test_record_fields_follow_the_contract_in_order():
    r = frame_cli(wire_log([("c2a", msg(id=0, method="initialize", params={}))]))
    rec = parse_out(r.stdout)[1]
    assert list(rec) == ["seq", "t", "dir", "raw", "kind", "method", "id", "size", "hash"]
    assert rec["seq"] == 0 and rec["t"] == 1000 and rec["dir"] == "c2a"


def test_ids_as_sent_and_responses_matched_by_type_and_direction():
    log = [
        ("c2a", msg(id=1, method="session/prompt", params={"sessionId": "s1"})),
        ("a2c", msg(id=1, method="session/request_permission", params={"sessionId": "s1"})),
        ("c2a", msg(id="1", method="session/list")),
        ("c2a", msg(id=None, method="odd/null")),
        ("c2a", msg(id=1, result={"outcome": "allow"})),  # answers the a2c request 1
        ("a2c", msg(id="1", result={"sessions": []})),  # the string id, not the number
        ("a2c", msg(id=1, result={"messageId": "m"})),  # the c2a request 1
        ("a2c", msg(id=None, error={"code": -32600, "message": "x"})),
        ("a2c", msg(id=99, result={})),  # answers nothing
        ("a2c", msg(id=1, result={})),  # already answered
    ]
    out = parse_out(frame_cli(wire_log(log)).stdout)[1:]
    assert [f["id"] for f in out] == [1, 1, "1", None, 1, "1", 1, None, 99, 1]
    assert [f.get("method") for f in out] == [
        "session/prompt", "session/request_permission", "session/list", "odd/null",
        "session/request_permission", "session/list", "session/prompt", "odd/null",
        None, None,
    ]
    assert isinstance(out[0]["id"], int) and isinstance(out[2]["id"], str)


def test_session_ids():
    log = [
        ("c2a", msg(id=1, method="session/new", params={"cwd": "/"})),
        ("a2c", msg(id=1, result={"sessionId": "new-1"})),
        ("c2a", msg(id=2, method="session/fork", params={"sessionId": "new-1"})),
        ("a2c", msg(id=2, result={"sessionId": "fork-1"})),
        ("c2a", msg(id=3, method="session/prompt", params={"sessionId": "fork-1"})),
        ("a2c", msg(method="session/update", params={"sessionId": "fork-1", "update": {}})),
        ("a2c", msg(id=3, result={"messageId": "m"})),  # inherits its request's session
        ("c2a", msg(id=4, method="session/load", params={"sessionId": "gone"})),
        ("a2c", msg(id=4, error={"code": -32002, "message": "unknown"})),
        ("c2a", msg(method="session/cancel", params={"sessionId": 5})),  # not a string
    ]
    out = parse_out(frame_cli(wire_log(log)).stdout)[1:]
    assert [f.get("sessionId") for f in out] == [
        None, "new-1", "new-1", "fork-1", "fork-1", "fork-1", "fork-1", "gone", "gone", None,
    ]


# -- bytes and hashes -------------------------------------------------------------------


def test_raw_b64_nolf_and_crlf_kept_byte_exact():
    log = [
        ("a2c", b'{"jsonrpc":"2.0","method":"n","params":{"t":"caf\xe9"}}'),  # latin-1
        ("c2a", msg(method="n") + b"\r"),
        ("a2c", msg(method="last"), {"nolf": True}),
    ]
    out = parse_out(frame_cli(wire_log(log)).stdout)[1:]
    assert "raw_b64" in out[0] and "raw" not in out[0]
    assert decode_raw(out[0]) == log[0][1] and out[0]["size"] == len(log[0][1])
    assert out[0]["kind"] == "invalid_json"
    assert out[0]["hash"] == "blake3-raw:" + blake3.blake3(log[0][1]).hexdigest()
    assert decode_raw(out[1]) == log[1][1] and out[1]["size"] == len(log[1][1])
    assert out[1]["kind"] == "notification"  # JSON allows the trailing CR
    assert out[2]["nolf"] is True and "nolf" not in out[1]
    assert list(out[2])[:5] == ["seq", "t", "dir", "raw", "nolf"]


def test_a_redacted_frames_hash_is_of_the_frame_as_logged():
    """An older log's redacted record keeps the hash of the frame as sent, against which a
    guessed secret could be checked: acp-frame hashes the frame as logged instead, for
    every log (acp-tee writes that hash itself now)."""
    original = msg(id=1, method="authenticate", params={"token": "sekrit"})
    stand_in = msg(id=1, method="authenticate", params={"token": "[REDACTED]"})
    sent = jcs_hash(orjson.loads(original))
    log = [("c2a", original, {"redacted": stand_in, "logged_hash": sent})]
    rec = parse_out(frame_cli(wire_log(log)).stdout)[1]
    assert rec["redacted"] is True and rec["raw"] == stand_in.decode()
    assert rec["hash"] == jcs_hash(orjson.loads(stand_in)) != sent
    assert rec["kind"] == "request" and rec["method"] == "authenticate"


def test_hash_is_blake3_of_rfc8785_and_key_order_blind():
    a = b'{"jsonrpc":"2.0","id":5,"method":"m","params":{"b":[1.5,2e3,"\\u00e9"],"a":null}}'
    b = b'{"params":{"a":null,"b":[1.5,2000,"\xc3\xa9"]},"method":"m","id":5,"jsonrpc":"2.0"}'
    out = parse_out(frame_cli(wire_log([("c2a", a), ("c2a", b)])).stdout)[1:]
    assert out[0]["hash"] == out[1]["hash"] == jcs_hash(orjson.loads(a))
    assert out[0]["size"] == len(a) and out[1]["size"] == len(b)
    for f in parse_out(frame_cli(wire_log(echo_wire(1))).stdout)[1:]:
        assert f["hash"] == jcs_hash(orjson.loads(decode_raw(f)))


def test_not_jsonrpc_gets_the_canonical_hash():
    raw = b'[{"b":1,"a":2}]'
    rec = parse_out(frame_cli(wire_log([("c2a", raw)])).stdout)[1]
    assert rec["kind"] == "not_jsonrpc" and rec["hash"] == jcs_hash([{"a": 2, "b": 1}])


# -- bad input --------------------------------------------------------------------------


def test_bad_lines_reported_and_kept_output_before_intact(tmp_path):
    good = echo_wire(1)
    log = wire_log([*good[:3], ("c2a", b"oops"), ("a2c", b'{"jsonrpc":"2.0"}'), *good[3:]])
    torn = b'{"seq":99,"t":1,"dir":"a2c","raw":"{\\"js'
    r = frame_cli(log + torn, tmp=tmp_path)
    assert r.returncode == 0
    err = r.stderr.decode().splitlines()
    p = tmp_path / "wire.jsonl"
    assert err[0].startswith(f"acp-frame: {p}:5: not JSON: ")
    assert err[1] == f"acp-frame: {p}:6: not JSON-RPC: neither a method nor an id"
    n = len(good) + 3
    assert err[2].startswith(f"acp-frame: {p}:{n + 1}: torn last line (no LF), wire record skipped")
    out = parse_out(r.stdout)
    assert len(out) == 1 + len(good) + 2
    assert [decode_raw(f) for f in out[1:]] == [
        *(raw for _, raw in good[:3]), b"oops", b'{"jsonrpc":"2.0"}', *(raw for _, raw in good[3:])
    ]
    assert [f["kind"] for f in out[4:6]] == ["invalid_json", "not_jsonrpc"]


def test_broken_wire_records_are_skipped_not_fatal():
    log = wire_log([("c2a", msg(method="a"))]) + b'{"seq":"x","dir":"c2a","raw":"{}"}\n'
    log += b'{"seq":5,"t":1,"dir":"c2a"}\n'
    log += orjson.dumps(frame_record(6, 2, "a2c", msg(method="b")))
    r = frame_cli(log + b"\n")
    assert r.returncode == 0
    assert [f["seq"] for f in parse_out(r.stdout)[1:]] == [0, 6]
    assert [ln.split(":")[2] for ln in r.stderr.decode().splitlines()] == ["3", "4"]


def test_wrong_input_kind(tmp_path):
    asr = b'{"type":"header","asr":{"version":"1"},"sessionId":"s"}\n{"type":"x"}\n'
    r = frame_cli(asr, tmp=tmp_path, name="s.asr.jsonl")
    assert r.returncode == 2 and r.stdout == b""
    p = tmp_path / "s.asr.jsonl"
    assert r.stderr.decode() == (
        f"acp-frame: {p}: expected a wire log or ACP JSONL, got an ASR stream\n"
    )
    r = frame_cli(b'{"format":"acp-pipes/fold","version":1}\n')
    assert r.returncode == 2
    assert b"expected a wire log or ACP JSONL, got folded entities" in r.stderr
    # a wrong stream after a good one: what came before is written, the line is named
    r = frame_cli(wire_log([("c2a", msg(method="a"))]) + asr)
    assert r.returncode == 2 and len(parse_out(r.stdout)) == 2
    assert r.stderr.startswith(b"acp-frame: stdin:3: expected a wire log or ACP JSONL")
    r = frame_cli(b'{"format":"acp-pipes/wire","version":4}\n')
    assert r.returncode == 2 and b"version 4" in r.stderr and b"please update" in r.stderr


def test_bare_stream_needs_dir_and_frames_with_it(tmp_path):
    lines = list(client_session(1))
    data = b"\n".join(lines) + b"\n\nnot json\n" + msg(method="x")  # blank, bad, no LF
    r = frame_cli(data)
    assert r.returncode == 2 and r.stdout == b""
    assert b"acp-frame: stdin: no stream header: a bare ACP JSONL stream needs --dir" in r.stderr
    r = frame_cli(data, "--dir", "c2a")
    assert r.returncode == 0
    out = parse_out(r.stdout)
    assert out[0] == {"format": "acp-pipes/frames", "version": 1, "source": None}
    assert [f["seq"] for f in out[1:]] == list(range(len(lines) + 2))
    assert {f["t"] for f in out[1:]} == {None} and {f["dir"] for f in out[1:]} == {"c2a"}
    assert [decode_raw(f) for f in out[1:]] == [*lines, b"not json", msg(method="x")]
    assert out[-1]["nolf"] is True and out[-2]["kind"] == "invalid_json"
    assert r.stderr.decode().startswith(f"acp-frame: stdin:{len(lines) + 2}: not JSON")
    # --dir is ignored for streams that carry their own header
    r2 = frame_cli(wire_log([("a2c", msg(method="y"))]), "--dir", "c2a")
    assert parse_out(r2.stdout)[1]["dir"] == "a2c"


def test_gz_input(tmp_path):
    log = wire_log(echo_wire(1))
    plain = frame_cli(log).stdout
    p = tmp_path / "wire.jsonl.gz"
    p.write_bytes(gzip.compress(log))
    r = run_tool("frame", str(p))
    assert r.returncode == 0 and r.stdout == plain
    assert run_tool("frame", input=gzip.compress(log)).stdout == plain


def test_gz_cut_short_keeps_every_frame_before_the_cut(tmp_path):
    # Many frames (more than the CLI's write batch) and a .gz cut off mid-body: every
    # frame read before the cut is written, then FILE:LINE: cannot read, exit 2.
    log = wire_log(echo_wire(60))
    whole = parse_out(frame_cli(log).stdout)
    packed = gzip.compress(log, compresslevel=0)  # stored: the cut falls mid-record
    p = tmp_path / "wire.jsonl.gz"
    p.write_bytes(packed[: len(packed) * 2 // 3])
    r = run_tool("frame", str(p))
    assert r.returncode == 2
    out = parse_out(r.stdout)
    assert 200 < len(out) < len(whole) and out == whole[: len(out)]
    assert r.stderr.decode() == f"acp-frame: {p}:{len(out) + 1}: cannot read: " \
        "Compressed file ended before the end-of-stream marker was reached\n"


def test_streams_back_to_back_and_several_files(tmp_path):
    s1 = wire_log([("c2a", msg(id=1, method="a"))])
    h2 = dict(HDR, argv=["other"])
    s2 = wire_log([("a2c", msg(id=1, result={}))], hdr=h2)  # must not answer stream 1
    (tmp_path / "one.jsonl").write_bytes(s1 + s2)
    (tmp_path / "bare.jsonl").write_bytes(msg(id=1, result={}) + b"\n" + s1)
    r = run_tool("frame", "--dir", "a2c", str(tmp_path / "one.jsonl"), str(tmp_path / "bare.jsonl"))
    assert r.returncode == 0, r.stderr
    out = parse_out(r.stdout)
    heads = [f.get("source", "-") for f in out if "format" in f]
    assert heads == [HDR, h2, None, HDR]
    assert [("format" in f, f.get("seq"), f.get("method")) for f in out] == [
        (True, None, None), (False, 0, "a"),
        (True, None, None), (False, 0, None),
        (True, None, None), (False, 0, None),
        (True, None, None), (False, 0, "a"),
    ]


def test_reframing_frames_is_idempotent():
    red = {"redacted": b"{}", "logged_hash": "blake3:00"}
    log = wire_log([*echo_wire(1), ("c2a", b"\xff"), ("c2a", b"[]"), ("c2a", msg(id=9), red)])
    once = frame_cli(log).stdout
    assert frame_cli(once).stdout == once
    assert frame_cli(once + once).stdout == once + once


# -- summary ----------------------------------------------------------------------------


def test_summary_json_counts_computed_from_the_input(tmp_path):
    session = echo_wire(3, permission_every=2)
    log = [*session, ("c2a", b"garbage"),
           ("c2a", msg(id=77, method="authenticate", params={"key": "sekrit"}),
            {"redacted": msg(id=77, method="authenticate", params={"key": "[REDACTED]"}),
             "logged_hash": "blake3:0"})]
    data = wire_log(log, hdr=header(["echo"], started_ns=5, clock="epoch"))
    r = frame_cli(data, "--summary", tmp=tmp_path)
    assert r.returncode == 0
    (s,) = parse_out(r.stdout)
    values = [(d, raw, orjson.loads(raw) if raw != b"garbage" else None) for d, raw, *_ in log]
    assert s["format"] == "acp-pipes/wire" and s["header"]["argv"] == ["echo"]
    assert s["header"]["host"]["pid"] and s["header"]["started"] == "1970-01-01T00:00:00.000000Z"
    assert s["frames"] == len(log)
    assert s["directions"] == dict(Counter(d for d, *_ in log))
    logged = [(kw[0]["redacted"] if kw else raw) for _, raw, *kw in log]  # size as logged
    assert s["bytes"] == {d: sum(len(b) for (dd, *_), b in zip(log, logged, strict=True) if dd == d)
                          for d in ("c2a", "a2c")}
    updates = Counter(v["params"]["update"]["sessionUpdate"] for _, _, v in values
                      if v and v.get("method") == "session/update")
    assert s["updates"] == dict(updates) and sum(updates.values()) > 10
    requests = sum(1 for _, _, v in values if v and "method" in v and "id" in v)
    assert s["kinds"]["request"] == requests
    assert s["kinds"]["notification"] == sum(1 for _, _, v in values if v and "id" not in v)
    assert s["kinds"]["invalid_json"] == 1 and s["redacted"] == 1
    prompts = sum(1 for _, _, v in values if v and v.get("method") == "session/prompt")
    assert s["methods"]["session/prompt"] == {"request": prompts, "response": prompts}
    perm = s["methods"]["session/request_permission"]
    assert perm == {"request": 1, "response": 1}
    sid = next(v["result"]["sessionId"] for _, _, v in values
               if v and "result" in v and "sessionId" in (v["result"] or {}))
    asked, named = {}, 0  # a response names its request's session (oracle, written plainly)
    for d, _, v in values:
        if not v:
            continue
        own = (v.get("params") or {}).get("sessionId") or (
            v.get("result") if isinstance(v.get("result"), dict) else {}).get("sessionId")
        if "method" in v and "id" in v:
            asked[(d, repr(v["id"]))] = own
        elif "method" not in v:
            own = own or asked.pop(("a2c" if d == "c2a" else "c2a", repr(v["id"])), None)
        named += own == sid
    assert s["sessions"] == {sid: named} and named > 40
    big = max(range(len(log)), key=lambda i: len(log[i][1]))
    assert s["largest"]["seq"] == big and s["largest"]["size"] == len(log[big][1])
    assert s["time"] == {"first": 1000, "last": 1000 + len(log) - 1,
                         "duration_s": (len(log) - 1) / 1e9}
    assert s["protocolVersion"] == {"requested": 2, "agreed": 2}
    assert s["problems"] == {"count": 1, "lines": [
        {"line": len(session) + 2, "message": s["problems"]["lines"][0]["message"]}]}
    assert s["problems"]["lines"][0]["message"].startswith("not JSON")
    table = frame_cli(data, "--summary", "--format", "table").stdout.decode()
    assert "session/prompt" in table and f"{prompts}" in table and "agent_message_chunk" in table


def test_summary_caps_problem_lines_and_one_per_stream():
    data = wire_log([("c2a", b"x")] * 30) + wire_log([("c2a", msg(method="a"))])
    r = frame_cli(data, "--summary", "--format", "json")
    s1, s2 = parse_out(r.stdout)
    assert s1["problems"]["count"] == 30 and len(s1["problems"]["lines"]) == 20
    assert [p["line"] for p in s1["problems"]["lines"]] == list(range(2, 22))
    assert s2["frames"] == 1 and s2["problems"]["count"] == 0


def test_summary_is_a_table_on_a_terminal_and_json_elsewhere(tmp_path):
    import os
    import pty
    import subprocess

    from tests.conftest import tool_argv, tool_env

    p = tmp_path / "wire.jsonl"
    p.write_bytes(wire_log(echo_wire(1)))
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(tool_argv("frame", "--summary", str(p)), stdout=follower,
                              stderr=subprocess.PIPE, env=tool_env(), timeout=60)
        os.close(follower)
        follower = -1
        text = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not chunk:
                break
            text += chunk
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert proc.returncode == 0
    assert text.lstrip().startswith(b"source") and b"session/prompt" in text
    assert not text.lstrip().startswith(b"{")
    piped = frame_cli(wire_log(echo_wire(1)), "--summary").stdout
    assert orjson.loads(piped)["frames"] == len(echo_wire(1))


# -- library ----------------------------------------------------------------------------


def test_cli_writes_exactly_the_library_records(tmp_path):
    p = tmp_path / "wire.jsonl"
    p.write_bytes(wire_log([*echo_wire(2), ("c2a", b"\x80"), ("a2c", b"[]")]))
    want = b"".join(orjson.dumps(f) + b"\n" for f in read_frames(p, headers=True))
    assert run_tool("frame", str(p)).stdout == want
    assert want.count(b"\n") == len(echo_wire(2)) + 3


def test_frames_library_over_wire_records():
    recs = [frame_record(0, 1, "c2a", msg(id="a", method="x")),
            frame_record(1, 2, "a2c", msg(id="a", result=1))]
    kept = orjson.dumps(recs)
    out = list(frames(recs))
    assert [(f["kind"], f.get("method")) for f in out] == [("request", "x"), ("response", "x")]
    assert orjson.dumps(recs) == kept  # the caller's records are left alone


def test_wire_records_in_other_layouts_get_the_contract_order():
    """Plain wire records are extended in place; any other layout is written anew."""
    plain = orjson.dumps(frame_record(0, 1, "c2a", msg(id=1, method="a")))
    permuted = orjson.dumps({"dir": "a2c", "raw": msg(id=1, result={}).decode(), "t": 2, "seq": 1})
    spaced = b'{"seq": 2, "t": 3, "dir": "c2a", "raw": ' + orjson.dumps(msg(method="n").decode())
    spaced += b"}"
    crlf = orjson.dumps(frame_record(3, 4, "c2a", msg(method="m"))) + b"\r"
    extra = b'{"seq":4,"t":5,"dir":"c2a","raw":"{}","future":1}'
    data = b"\n".join([orjson.dumps(HDR), plain, permuted, spaced, crlf, extra]) + b"\n"
    out = parse_out(frame_cli(data).stdout)[1:]
    order = ["seq", "t", "dir", "raw", "kind"]
    assert [list(f)[:5] for f in out] == [order] * 5
    assert [(f["seq"], f["kind"], f.get("method")) for f in out] == [
        (0, "request", "a"), (1, "response", "a"), (2, "notification", "n"),
        (3, "notification", "m"), (4, "not_jsonrpc", None)]
    assert "future" not in out[4]


frame_bytes = st.binary(max_size=40) | st.builds(
    lambda v, cr: orjson.dumps(v) + (b"\r" if cr else b""),
    st.recursive(st.none() | st.integers(-(2**63), 2**63) | st.text(max_size=5),
                 lambda c: st.lists(c, max_size=3)
                 | st.dictionaries(st.text(max_size=3), c, max_size=3),
                 max_leaves=6),
    st.booleans(),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["c2a", "a2c"]), frame_bytes), max_size=12),
       st.booleans())
def test_framing_gives_back_the_exact_bytes(tmp_path_factory, items, nolf):
    items = [(d, raw.replace(b"\n", b"")) for d, raw in items]
    if nolf and items:
        items[-1] = (*items[-1], {"nolf": True})
    p = tmp_path_factory.mktemp("h") / "wire.jsonl"
    p.write_bytes(wire_log(items))
    seen: list = []
    out = list(read_frames(p, warn=lambda *a: seen.append(a)))
    assert [decode_raw(f) for f in out] == [raw for _, raw, *_ in items]
    assert [(f["seq"], f["dir"], f["size"]) for f in out] == [
        (i, it[0], len(it[1])) for i, it in enumerate(items)]
    assert len(seen) == sum(f["kind"] in ("invalid_json", "not_jsonrpc") for f in out)
    for f, (_, raw, *_) in zip(out, items, strict=True):
        assert ("raw" in f) == _is_utf8(raw) and ("nolf" in f) == (nolf and f is out[-1])
        assert f["hash"].startswith("blake3-raw:" if f["kind"] == "invalid_json" else "blake3:")


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_an_integer_of_5000_digits_is_json(tmp_path):
    """Python converts at most 4,300 digits cheaply; a longer integer literal is still
    JSON (read as the double it overflows, as ``1e400`` is), never "not JSON": the frame
    passes byte-exact and acp-frame says nothing of it."""
    raw = ('{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s",'
           '"update":{"sessionUpdate":"_x","n":' + "9" * 5000 + "}}}")
    header = b'{"format":"acp-pipes/wire","version":2,"recorder":"t","argv":["a"],"env":{}}'
    line = orjson.dumps({"seq": 0, "t": 1, "dir": "a2c", "raw": raw})
    log = tmp_path / "big.wire.jsonl"
    log.write_bytes(header + b"\n" + line + b"\n")
    got = run_tool("frame", str(log))
    assert got.returncode == 0 and got.stderr == b"", got.stderr.decode()
    assert orjson.loads(got.stdout.splitlines()[1])["raw"].encode() == raw.encode()
    assert parse_json("9" * 4300) == int("9" * 4300)
    assert parse_json("-" + "9" * 5000) == float("-inf")

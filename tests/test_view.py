"""acp-view without a browser: the page's safety by construction, the transcript's
grouping, the timeline's columns, and the CLI's contract (bad input, cut input, stdin).
What the page looks like is tested in a real browser (test_view_browser.py)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import re
from pathlib import Path

import orjson
from hypothesis import given
from hypothesis import strategies as st

from acp_pipes.view import load, session_page
from acp_pipes.view.page import embed_json, html_page
from acp_pipes.view.transcript import items
from tests.conftest import run_tool

FIXTURES = Path(__file__).parent / "fixtures" / "asr"


def page_parts(page: bytes) -> dict[str, object]:
    """The JSON elements of a page, by id."""
    return {m.group(1).decode(): orjson.loads(m.group(2)) for m in re.finditer(
        rb'<script type="application/json" id="([a-z0-9-]+)">(.*?)</script>', page, re.S)}


def _streams(name: str) -> list[list[dict]]:
    """The records of each stream of a fixture's expected ASR file."""
    out: list[list[dict]] = []
    for line in (FIXTURES / name / "expected.asr.jsonl").read_bytes().splitlines():
        rec = orjson.loads(line)
        if rec["type"] == "header":
            out.append([])
        else:
            out[-1].append(rec)
    return out


def _asr(name: str) -> list[dict]:
    (records,) = _streams(name)
    return records


def _nested(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.lists(children) | st.dictionaries(st.text(), children)


@given(st.recursive(st.text() | st.integers(-2**53, 2**53) | st.none(), _nested,
                    max_leaves=20))
def test_embedded_json_cannot_end_its_element_and_reads_back(value):
    text = embed_json(value)
    for raw in (b"<", b">", b"&", "\u2028".encode(), "\u2029".encode()):
        assert raw not in text
    assert orjson.loads(text) == value


def test_the_policy_names_exactly_the_pages_own_script_and_style():
    page = html_page(body="<p>x</p>", style="p{color:red}", script="var a = 1;",
                     data={"x": "</script><script>alert(1)</script>"}, generator="t").decode()
    policy = re.search(r'Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert page.index("Content-Security-Policy") < page.index("<style>")

    def sha(text: str) -> str:
        return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()

    assert f"script-src 'sha256-{sha('var a = 1;')}';" in policy
    assert f"style-src 'sha256-{sha('p{color:red}')}';" in policy
    assert policy.startswith("default-src 'none';")
    assert "base-uri 'none'" in policy and "form-action 'none'" in policy
    assert "unsafe" not in policy
    assert page.count("<script") == 2


STATIC = Path(__file__).parent.parent / "acp_pipes" / "view" / "static"


def test_each_page_inlines_its_static_files_as_they_are_and_hashes_those_bytes(tmp_path):
    """acp-view's and acp-align's pages carry ``common.*`` then their own ``static/``
    files byte for byte, and the policy's hashes are of exactly those bytes: an edit to
    a file reaches the page and its hash together (a hash of other bytes blocks the
    script)."""
    wire = FIXTURES / "ASR-718-fork-lineage" / "wire.jsonl"
    other = FIXTURES / "ASR-702-identifiers-verbatim" / "wire.jsonl"
    pages = {"session": run_tool("view", str(wire)),
             "align": run_tool("align", "--format", "html", str(wire), str(other))}
    for name, r in pages.items():
        assert r.returncode == {"session": 0, "align": 1}[name], r.stderr  # two sessions differ
        page = r.stdout
        files = {ext: (STATIC / f"common.{ext}").read_bytes() + (STATIC / f"{name}.{ext}")
                 .read_bytes() for ext in ("css", "js")}
        body = (STATIC / f"{name}.html").read_bytes()
        style = re.search(rb"<style>(.*?)</style>", page, re.S).group(1)
        script = re.findall(rb"<script>(.*?)</script>", page, re.S)
        assert style == files["css"] and script == [files["js"]], name
        assert b"<body>\n" + body + b"\n<script" in page, name
        policy = re.search(rb'Content-Security-Policy" content="([^"]+)"', page).group(1)
        for kind, text in (("script", files["js"]), ("style", files["css"])):
            digest = base64.b64encode(hashlib.sha256(text).digest())
            assert b"%s-src 'sha256-%s';" % (kind.encode(), digest) in policy, name


def test_a_superseding_record_takes_the_place_of_the_one_it_replaces_ASR_706():
    got = items(_asr("ASR-706-change-after-final"))
    tools = [it for it in got if it["k"] == "tool"]
    assert len(tools) == 1
    assert tools[0]["call"]["title"] == "Edit main.py" and tools[0]["revised"] == 1
    assert tools[0]["result"]["status"] == "completed"


def test_file_changes_belong_to_their_tool_card_ASR_715():
    got = items(_asr("ASR-715-diff-to-file-change"))
    tools = [it for it in got if it["k"] == "tool"]
    assert [len(t["changes"]) for t in tools] == [1, 1, 1, 1]
    assert not any(it["k"] == "changes" for it in got)


def test_a_terminal_a_result_names_is_shown_on_its_card_ASR_714():
    recs = _asr("ASR-714-tool-result")
    named = {r["exec"]["terminalId"] for r in recs if r["type"] == "tool_result" and "exec" in r}
    got = items(recs)
    on_cards = {t["terminalId"] for it in got if it["k"] == "tool" for t in it["terminals"]}
    assert named and on_cards == named & {r["terminalId"] for r in recs if r["type"] == "terminal"}
    assert not any(it["k"] == "terminal" and it["r"]["terminalId"] in named for it in got)


def test_every_record_of_a_stream_is_shown_once():
    for fixture, recs in ((f, r) for f in sorted(FIXTURES.glob("ASR-*"))
                          for r in _streams(f.name)):
        got = items(recs)
        shown = []
        for it in got:
            for key in ("r", "call", "result"):
                if it.get(key):
                    shown.append(it[key]["id"])
            shown += [r["id"] for r in it.get("changes", []) + it.get("terminals", [])]
        replaced = {r["supersedes"] for r in recs if "supersedes" in r}
        named = {r["exec"]["terminalId"] for r in recs
                 if r["type"] == "tool_result" and "exec" in r}
        states: dict[str, list[str]] = {}
        for r in recs:
            if r["type"] == "terminal" and r["terminalId"] in named:
                states.setdefault(r["terminalId"], []).append(r["id"])
        hidden = {i for ids in states.values() for i in ids[:-1]}  # a card shows the last
        want = [r["id"] for r in recs if r["id"] not in replaced and r["id"] not in hidden]
        assert sorted(shown) == sorted(want), fixture.name
        assert len(shown) == len(set(shown)), fixture.name


def test_timeline_pairs_requests_and_responses_with_latency(tmp_path):
    rec = load([str(FIXTURES / "ASR-716-permission" / "wire.jsonl")])
    cols = rec.timeline.columns()
    seq = cols["seq"]
    for i, j in enumerate(cols["pair"]):
        if j >= 0:
            assert cols["pair"][j] == i
            assert cols["lat"][i] == abs(rec.timeline.t[i] - rec.timeline.t[j])
    kinds = cols["kind"]
    assert all(cols["pair"][i] >= 0 for i in range(len(seq)) if kinds[i] == 1)  # responses
    assert cols["t0"] == str(rec.timeline.t[0])


def test_cli_writes_one_page_from_stdin_too(tmp_path):
    wire = FIXTURES / "ASR-715-diff-to-file-change" / "wire.jsonl"
    a = run_tool("view", str(wire))
    b = run_tool("view", input=wire.read_bytes())
    assert a.returncode == b.returncode == 0, (a.stderr, b.stderr)
    assert a.stdout.startswith(b"<!DOCTYPE html>")
    da, db = page_parts(a.stdout), page_parts(b.stdout)
    assert set(da) == {"acp-data", "acp-frames", "acp-s-0"}
    assert da["acp-data"]["inputs"][0]["name"] != db["acp-data"]["inputs"][0]["name"] == "stdin"
    da["acp-data"]["inputs"] = db["acp-data"]["inputs"] = None
    assert da == db


def test_a_session_resumed_in_a_second_wire_log_is_one_session_as_acp_asr_makes_it(tmp_path):
    """A recording whose second connection went to a file of its own (a resume recorded
    to a second wire log): the two files make the page the one file makes, with the
    transcript acp-asr writes for the two files (one entity state per session across
    connections, ASR-704, ASR-717)."""
    for fixture in ("ASR-704-entity-across-connections", "ASR-717-resume-no-duplicates",
                    "ASR-717-live-after-replay"):
        whole = FIXTURES / fixture / "wire.jsonl"
        parts: list[list[bytes]] = []
        for line in whole.read_bytes().splitlines(keepends=True):
            if line.startswith(b'{"format"'):
                parts.append([])
            parts[-1].append(line)
        assert len(parts) == 2, fixture
        files = []
        for i, lines in enumerate(parts):
            files.append(tmp_path / f"{fixture}.{i}.jsonl")
            files[-1].write_bytes(b"".join(lines))
        one = page_parts(run_tool("view", str(whole)).stdout)
        two = page_parts(run_tool("view", *map(str, files)).stdout)
        assert [k for k in two if k.startswith("acp-s-")] == ["acp-s-0"], fixture
        assert two["acp-s-0"] == one["acp-s-0"], fixture
        assert two["acp-data"]["sessions"] == one["acp-data"]["sessions"], fixture
        out = tmp_path / fixture
        assert run_tool("asr", "-o", str(out), *map(str, files)).returncode == 0
        (stream,) = out.iterdir()
        header, *records = [orjson.loads(x) for x in stream.read_bytes().splitlines()]
        assert two["acp-data"]["sessions"][0]["header"] == header, fixture
        assert two["acp-s-0"] == items(records), fixture


def test_the_page_is_a_pure_function_of_the_input():
    wire = str(FIXTURES / "ASR-718-fork-lineage" / "wire.jsonl")
    assert session_page(load([wire])) == session_page(load([wire]))


def test_wrong_input_is_refused_with_its_name(tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_bytes(b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\n')
    r = run_tool("view", str(bad))
    assert r.returncode == 2
    assert f"acp-view: {bad}: no stream header: a bare ACP JSONL stream needs --dir".encode() \
        in r.stderr
    r = run_tool("view", "--dir", "c2a", str(bad))
    assert r.returncode == 0 and b"one direction" in r.stdout


def test_a_bad_line_is_reported_and_listed_in_the_page(tmp_path):
    wire = (FIXTURES / "ASR-713-prompt-message" / "wire.jsonl").read_bytes().splitlines()
    wire.insert(3, b"not json")
    path = tmp_path / "w.jsonl"
    path.write_bytes(b"\n".join(wire) + b"\n")
    r = run_tool("view", str(path))
    assert r.returncode == 0
    assert r.stderr.count(f"{path}:4: ".encode()) == 1  # once, though read twice
    assert f"{path}:4: ".encode() in r.stdout


def test_an_input_cut_short_is_shown_as_read_then_reported(tmp_path, cut_asr_stream):
    wire = (FIXTURES / "ASR-716-permission" / "wire.jsonl").read_bytes()
    packed = gzip.compress(wire * 40)
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(packed[: len(packed) * 2 // 3])
    r = run_tool("view", str(cut))
    assert r.returncode == 2
    assert re.search(rb"acp-view: .*cut.jsonl.gz:\d+: cannot read", r.stderr)
    assert r.stdout.endswith(b"</html>\n")  # the page, of what was read
    r = run_tool("view", str(cut_asr_stream["cut"]))
    assert r.returncode == 2 and r.stdout.endswith(b"</html>\n")


def test_a_v1_recording_gets_its_timeline_and_its_transcript():
    """ACP v1 (what agents in use speak) converts as acp-asr converts it."""
    wire = FIXTURES / "ASR-714-v1-tool-calls" / "wire.jsonl"
    rec = load([str(wire)])
    assert len(rec.timeline) == len(wire.read_bytes().splitlines()) - 1
    assert not any("no transcript" in n for n in rec.notes)
    (session,) = rec.sessions.values()
    calls = [r for r in _asr("ASR-714-v1-tool-calls") if r["type"] == "tool_call"]
    tools = [it for it in session.items if it["k"] == "tool"]
    assert [t["call"]["callId"] for t in tools] == [c["callId"] for c in calls]


def test_a_protocol_version_the_fold_does_not_know_still_has_its_timeline(tmp_path):
    msgs = [("c2a", {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                     "params": {"protocolVersion": 99, "clientCapabilities": {}}}),
            ("a2c", {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 99}})]
    head = {"format": "acp-pipes/wire", "version": 1, "recorder": "t", "argv": ["a"],
            "started": "2026-01-01T00:00:00.000000Z", "clock": "nanos", "env": {}}
    lines = [orjson.dumps(head)] + [
        orjson.dumps({"seq": i, "t": i, "dir": d, "raw": orjson.dumps(m).decode()})
        for i, (d, m) in enumerate(msgs)]
    path = tmp_path / "v99.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    rec = load([str(path)])
    assert len(rec.timeline) == 2 and not rec.sessions
    assert any(n.startswith("no transcript: ") and "99" in n for n in rec.notes)


def test_a_terminal_gets_no_html(tmp_path):
    """Standard output on a terminal: a usage error that says how to get the page."""
    import os
    import pty
    import subprocess

    from tests.conftest import tool_argv, tool_env

    wire = FIXTURES / "ASR-713-prompt-message" / "wire.jsonl"
    leader, follower = pty.openpty()
    try:
        r = subprocess.run(tool_argv("view", str(wire)), stdout=follower, stderr=subprocess.PIPE,
                           env=tool_env(), timeout=60)
    finally:
        os.close(follower)
        os.close(leader)
    assert r.returncode == 2
    assert r.stderr == b"acp-view: writes an HTML page: give -o PAGE.html, or redirect stdout\n"
    page = tmp_path / "p.html"
    assert run_tool("view", str(wire), "-o", str(page)).returncode == 0 and page.stat().st_size

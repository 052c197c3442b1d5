"""acp-align on recordings holding lone surrogates: ``"\\ud800"`` is a valid JSON escape
(orjson refuses to read or write it), so two runs that differ in such a string are
aligned and shown in every format as any other difference, the surrogate written as its
escape; never an internal error. Traces and ASR streams, through the real executable.
(The DOT and SVG writers are tested with the graphs.)"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from acp_pipes.echo.client import client_session
from tests.conftest import REPO, record_lockstep, run_tool
from tests.view_browser import no_object_object  # noqa: F401 - the page test checks its page

ASR_FIXTURE = REPO / "tests/fixtures/asr/ASR-702-identifiers-verbatim/expected.asr.jsonl"


def _edited(src: Path, dst: Path, old: str, new: str) -> Path:
    """``src`` (a wire log) with ``old`` replaced by ``new`` in the raw text of the
    first client frame holding it: the same run, differing in one string."""
    out, done = [], False
    for line in src.read_bytes().splitlines():
        rec = orjson.loads(line)
        if not done and rec.get("dir") == "c2a" and old in rec.get("raw", ""):
            rec["raw"] = rec["raw"].replace(old, new)
            done = True
        out.append(orjson.dumps(rec))
    assert done
    dst.write_bytes(b"".join(x + b"\n" for x in out))
    return dst


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("hostile-align")
    a = tmp / "a.wire.jsonl"
    record_lockstep(list(client_session(3)), a)
    asr_b = tmp / "b.asr.jsonl"
    asr_b.write_bytes(ASR_FIXTURE.read_bytes().replace(b'"text":"go"', b'"text":"go \\ud800"')
                      .replace(b'"planId":"plan #1"', b'"planId":"\\udc00"'))
    return {"a": a,
            "text": _edited(a, tmp / "text.wire.jsonl", '"hello 1"', '"hello \\ud800"'),
            "method": _edited(a, tmp / "method.wire.jsonl", '"session/prompt"', '"\\udc00"'),
            "asr_a": ASR_FIXTURE, "asr_b": asr_b}


def align(*args: str) -> tuple[bytes, bytes]:
    r = run_tool("align", *args, timeout=120)
    assert r.returncode == 1, r.stderr  # the runs differ
    assert b"internal error" not in r.stderr and b"Traceback" not in r.stderr, r.stderr
    return r.stdout, r.stderr


def _json(text: bytes):
    return json.loads(text.decode("utf-8"))  # UTF-8 throughout; the escapes are JSON


def test_traces_differing_in_a_lone_surrogate_string_align_in_ops(runs):
    out, err = align("--format", "ops", str(runs["a"]), str(runs["text"]))
    assert err == b""
    ops = [_json(x) for x in out.splitlines()]
    (change,) = [op for op in ops if op["op"] == "changed"]
    assert change["diff"] == [{"op": "replace", "path": "/params/prompt/0/text",
                               "a": "hello 1", "b": "hello \ud800"}]
    assert change["hash_b"].startswith("blake3-raw:")  # no JCS form: the bytes' identity
    assert b'"a":"hello 1","b":"hello \\ud800"}]}\n' in out
    assert sum(op["op"] == "equal" for op in ops) == len(ops) - 1


def test_traces_differing_in_a_lone_surrogate_string_align_in_diff_json_html(runs):
    a, b = str(runs["a"]), str(runs["text"])
    diff, _ = align("--format", "diff", a, b)
    assert '!     /params/prompt/0/text: "hello 1" → "hello \\ud800"\n'.encode() in diff
    summary, _ = align("--format", "json", a, b)
    first = _json(summary)["first_divergence"]
    assert first["op"] == "changed" and first["diff"][0]["b"] == "hello \ud800"
    assert b'"b":"hello \\ud800"' in summary
    page, _ = align("--format", "html", a, b)
    page.decode("utf-8")
    assert b'"b":"hello \\ud800"' in page  # the page's data, as the JSON escape


def test_a_lone_surrogate_method_is_shown_as_its_escape_in_diff_json_html(runs):
    """A method holding a lone surrogate reaches the step summaries raw (not via JSON):
    it is written as ``\\udc00``, never as bytes UTF-8 cannot hold."""
    a, b = str(runs["a"]), str(runs["method"])
    ops, _ = align("--format", "ops", a, b)
    assert b'{"op":"only-b","a":null,"b":4,"dir":"c2a","kind":"not_jsonrpc",' in ops
    for fmt in ("diff", "json", "html"):
        out, err = align("--format", fmt, a, b)
        out.decode("utf-8")
        assert b"\\udc00" in out, fmt
        assert err.endswith(b"not JSON-RPC: a lone surrogate in its method, id or "
                            b"sessionId\n")  # acp-frame's verdict, as a warning
    diff, _ = align("--format", "diff", a, b)
    assert "+→ \\udc00 \"hello 1\"\n".encode() in diff


@pytest.mark.parametrize("fmt", ["ops", "diff", "json", "html"])
def test_asr_streams_with_lone_surrogates_are_aligned_not_skipped(runs, fmt):
    """An ASR record holding a lone surrogate is JSON: it is read (not "not JSON,
    skipped") and aligned; having no JCS form, its identity is blake3-raw of its JSON."""
    out, err = align("--format", fmt, str(runs["asr_a"]), str(runs["asr_b"]))
    assert err == b""
    out.decode("utf-8")
    if fmt == "ops":
        changed = [op for op in map(_json, out.splitlines()) if op["op"] == "changed"]
        assert [c["diff"] for c in changed] == [
            [{"op": "replace", "path": "/content/0/text", "a": "go", "b": "go \ud800"}],
            [{"op": "replace", "path": "/planId", "a": "plan #1", "b": "\udc00"}]]
        assert all(c["hash_b"].startswith("blake3-raw:") for c in changed)
    elif fmt == "diff":
        assert '/planId: "plan #1" → "\\udc00"\n'.encode() in out
    else:
        assert b'"b":"go \\ud800"' in out


def test_an_asr_stream_with_lone_surrogates_equals_itself(runs):
    r = run_tool("align", "--format", "ops", str(runs["asr_b"]), str(runs["asr_b"]))
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert {_json(x)["op"] for x in r.stdout.splitlines()} == {"equal"}


def test_three_runs_with_a_lone_surrogate_draw_a_tree_in_json(runs):
    out, _ = align("--format", "json", str(runs["a"]), str(runs["text"]), str(runs["a"]))
    assert _json(out)["equal"] is False


@pytest.mark.parametrize("fmt", ["ops", "diff", "json", "html"])
def test_traces_differing_in_a_value_nested_1000_deep_align(runs, tmp_path: Path, fmt):
    """orjson reads 1000 levels but writes no more than 1024 in all: a changed step whose
    value nests that deep is still written, in every format."""
    deep = "[" * 1000 + '"x"' + "]" * 1000
    b = _edited(runs["a"], tmp_path / "deep.wire.jsonl", '"hello 1"', deep)
    out, err = align("--format", fmt, str(runs["a"]), str(b))
    assert err == b""
    if fmt == "ops":
        assert b'"a":"hello 1","b":' + deep.encode() + b"}]}\n" in out
    elif fmt == "diff":
        assert '/params/prompt/0/text: "hello 1" → [[[[[['.encode() in out
    else:
        assert b'"b":' + deep.encode() in out


@pytest.mark.slow  # Chromium
def test_the_html_page_with_a_lone_surrogate_opens_in_a_browser(browser, runs, tmp_path):
    """The page's data holds the surrogate as a JSON escape: Chromium parses it and the
    page shows the changed step, with no script error."""
    from tests.view_browser import open_page

    html = tmp_path / "ab.html"
    r = run_tool("align", "--format", "html", str(runs["a"]), str(runs["text"]), "-o",
                 str(html))
    assert r.returncode == 1, r.stderr
    opened = open_page(browser, html)
    assert opened.foreign_requests == [] and opened.console_errors == []
    page = opened.page
    assert page.locator("#verdict").inner_text() == "different"
    first = page.locator(".sbs-row.first")
    assert first.count() == 1 and 'session/prompt "hello 1"' in first.inner_text()

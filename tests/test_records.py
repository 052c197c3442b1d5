"""jsonl.records, the record reader of every line-by-line JSONL reader: numbering,
blank lines, the torn-versus-not-JSON judgement, the fallback, and read errors."""

from __future__ import annotations

import gzip

import pytest

from acp_pipes.errors import InputError
from acp_pipes.io.lines import open_source, records


def test_numbers_lines_passes_over_blank_ones_and_keeps_the_bytes():
    lines = [b'{"a":1}\n', b"\n", b"  \r\n", b"[2]\r\n", b"3"]
    got = list(records(lines, "x"))
    assert got == [(1, b'{"a":1}\n', {"a": 1}), (4, b"[2]\r\n", [2]), (5, b"3", 3)]
    assert [n for n, _, _ in records(lines, "x", first=10)] == [10, 13, 14]
    stripped = list(records(lines, "x", strip=True))
    assert [raw for _, raw, _ in stripped] == [b'{"a":1}', b"[2]\r", b"3"]


def test_a_last_line_without_lf_is_torn_and_one_with_lf_not_json():
    said: list[tuple[int, str]] = []
    lines = [b'{"a":1}\n', b"{oops\n", b'{"a":2}\n', b'{"cut']
    got = list(records(lines, "x", lambda n, what, e: said.append((n, what))))
    assert [n for n, _, _ in got] == [1, 3]
    assert said == [(2, "not JSON"), (4, "torn last line (no LF)")]


def test_lines_given_without_lf_are_torn_only_at_the_first():
    """A caller's ``splitlines()``: no line has an LF; the judgement is the ASR reader's
    (torn: no LF after a line that had one)."""
    said: list[tuple[int, str]] = []
    list(records([b"{", b"{"], "x", lambda n, what, e: said.append((n, what))))
    assert said == [(1, "torn last line (no LF)"), (2, "not JSON")]


def test_without_bad_a_line_that_is_not_json_names_source_and_line():
    with pytest.raises(InputError) as e:
        list(records([b"1\n", b"nope\n"], "f.jsonl"))
    assert (e.value.source, e.value.line) == ("f.jsonl", 2)
    assert e.value.message.startswith("not JSON: ")


def test_the_fallback_reads_what_orjson_refuses_and_its_value_error_means_not_json():
    said: list[int] = []

    def fallback(n: int, raw: bytes) -> object:
        if raw.startswith(b'"\\ud800"'):
            return "lone"
        raise ValueError(raw)

    lines = [b'"\\ud800"\n', b"1e400x\n"]
    got = list(records(lines, "x", lambda n, what, e: said.append(n), fallback=fallback))
    assert got == [(1, b'"\\ud800"\n', "lone")] and said == [2]


def test_a_read_error_is_the_line_after_the_last_read(tmp_path):
    whole = gzip.compress(b"".join(b'{"n":%d}\n' % i for i in range(50_000)))
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    read: list[int] = []
    with pytest.raises(InputError) as e:
        for n, _, _ in records(open_source(str(cut)), "cut.jsonl.gz"):
            read.append(n)
    assert read == list(range(1, len(read) + 1)) and read
    assert (e.value.line, e.value.message.startswith("cannot read: ")) == (len(read) + 1, True)

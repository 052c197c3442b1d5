"""acp-asr -o DIR: a directory, one file per session, and no session lost to another's
file (acp_pipes/asr/output.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_pipes.asr import file_name, session_from_name
from acp_pipes.asr.output import NAME_MAX
from tests.conftest import run_tool
from tests.test_asr_e2e import _req, records, wire_bytes

LONG = "a-session-id-longer-than-a-file-name-" * 8  # 296 characters


def _three_sessions(tmp_path: Path, second: str = "sess-2") -> Path:
    """A wire log of the echo agent with three sessions, the second named ``second``."""
    lines = [_req(0, "initialize", {"protocolVersion": 2,
                                    "clientInfo": {"name": "c", "version": "1"}})]
    lines += [_req(i, "session/new", {"cwd": "/w", "mcpServers": []}) for i in (1, 2, 3)]
    lines += [_req(10 + i, "session/prompt", {"sessionId": f"sess-{i}",
                                              "prompt": [{"type": "text", "text": f"p{i}"}]})
              for i in (1, 2, 3)]
    wire = tmp_path / "wire.jsonl"
    data = wire_bytes(lines)
    if second != "sess-2":
        data = data.replace(b'sess-2\\"', second.encode() + b'\\"')
    wire.write_bytes(data)
    return wire


def test_long_session_ids_get_a_hashed_name_and_stop_no_other(tmp_path):
    """A session ID too long for a file name used to stop acp-asr -o DIR with 'File name
    too long' and lose every session after it."""
    wire = _three_sessions(tmp_path, LONG)
    out = tmp_path / "streams"
    r = run_tool("asr", str(wire), "-o", str(out))
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in out.iterdir())
    assert len(names) == 3 and "sess-1.asr.jsonl" in names and "sess-3.asr.jsonl" in names
    hashed = next(n for n in names if not n.startswith("sess-"))
    assert len(hashed.encode()) <= NAME_MAX and hashed == file_name(LONG)
    assert session_from_name(hashed) is None  # the ID is in the header
    assert records((out / hashed).read_bytes())[0]["sessionId"] == LONG
    assert run_tool("asr", "--validate", *(str(out / n) for n in names)).returncode == 0
    assert b"".join((out / file_name(s)).read_bytes() for s in ("sess-1", LONG, "sess-3")) \
        == run_tool("asr", str(wire)).stdout


@pytest.mark.parametrize("sid", ["s", "x" * 300, "é" * 120, "%" * 90, "a.b" * 100,
                                 "lone \udc80 surrogate"])
def test_every_id_gets_one_safe_name(sid):
    name = file_name(sid)
    assert len(name.encode()) <= NAME_MAX and "/" not in name and not name.startswith(".")
    assert session_from_name(name) in (sid, None)
    assert file_name(sid + "!") != name


def test_a_session_that_cannot_be_written_is_named_and_the_others_are(tmp_path):
    wire = _three_sessions(tmp_path)
    out = tmp_path / "streams"
    (out / "sess-2.asr.jsonl").mkdir(parents=True)  # in the way of session sess-2
    r = run_tool("asr", str(wire), "-o", str(out))
    assert r.returncode == 2
    err = r.stderr.decode()
    assert "acp-asr: session 'sess-2' not written: " in err
    assert "1 of 3 sessions not written" in err
    assert records((out / "sess-1.asr.jsonl").read_bytes())[0]["sessionId"] == "sess-1"
    assert records((out / "sess-3.asr.jsonl").read_bytes())[0]["sessionId"] == "sess-3"
    assert not [p for p in out.iterdir() if p.name.endswith(".part")]


@pytest.mark.parametrize("target", ["-", "existing.jsonl"])
def test_o_is_a_directory_and_says_so(tmp_path, target):
    """``acp-asr -o -`` made a directory named '-'; ``-o existing.jsonl`` said 'File
    exists'. Both are refused before converting, saying a directory is wanted."""
    wire = _three_sessions(tmp_path)
    existing = tmp_path / "existing.jsonl"
    existing.write_bytes(b"keep me\n")
    r = run_tool("asr", str(wire), "-o", target, cwd=tmp_path)
    assert r.returncode == 2
    assert b"-o wants a directory: DIR/<sessionId>.asr.jsonl is written for each session" \
        in r.stderr
    assert not (tmp_path / "-").exists() and existing.read_bytes() == b"keep me\n"
    usage = run_tool("asr", "--help").stdout.decode()
    assert "[-o DIR]" in usage


def test_an_input_in_the_output_directory_is_not_replaced(tmp_path):
    out = tmp_path / "streams"
    out.mkdir()
    wire = _three_sessions(tmp_path)
    stream = out / "sess-1.asr.jsonl"
    stream.write_bytes(run_tool("asr", str(wire), "--session", "sess-1").stdout)
    frames = out / "sess-2.asr.jsonl"  # frames, unluckily named like a session's stream
    frames.write_bytes(run_tool("frame", str(wire)).stdout)
    before, kept = frames.read_bytes(), stream.read_bytes()
    r = run_tool("asr", str(frames), "-o", str(out))
    assert r.returncode == 2
    # refused before anything is read: -o DIR writes each session's file as it goes
    assert b"is an input in " in r.stderr and b"named as a stream acp-asr writes" in r.stderr
    assert frames.read_bytes() == before and stream.read_bytes() == kept


# -- names that stay apart where case is ignored -------------------------------------------


def _fold_apart(names) -> bool:
    from acp_pipes.io.filenames import fold

    return len({fold(n) for n in names}) == len(list(names))


def test_sessions_equal_but_for_case_get_files_apart(tmp_path):
    """``Sess-1`` and ``sess-1`` were written to ``Sess-1.asr.jsonl`` and
    ``sess-1.asr.jsonl``: one file on macOS and Windows, the second replacing the first.
    Both take their caseless name (capitals percent-encoded); the others keep theirs."""
    wire = _three_sessions(tmp_path, "Sess-1")
    out = tmp_path / "streams"
    r = run_tool("asr", str(wire), "-o", str(out))
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == ["%53ess-1.asr.jsonl", "sess-1.asr.jsonl", "sess-3.asr.jsonl"]
    assert _fold_apart(names)
    for name in names:  # still reversible: the name gives the ID back
        assert records((out / name).read_bytes())[0]["sessionId"] == session_from_name(name)
    assert b"".join((out / n).read_bytes() for n in
                    ("sess-1.asr.jsonl", "%53ess-1.asr.jsonl", "sess-3.asr.jsonl")) \
        == run_tool("asr", str(wire)).stdout
    # one session alone is named as among the others: a second run does not replace it
    one = tmp_path / "one"
    assert run_tool("asr", "--session", "Sess-1", str(wire), "-o", str(one)).returncode == 0
    assert [p.name for p in one.iterdir()] == ["%53ess-1.asr.jsonl"]
    assert (one / "%53ess-1.asr.jsonl").read_bytes() == (out / "%53ess-1.asr.jsonl").read_bytes()


def test_a_live_file_is_renamed_before_one_equal_but_for_case_is_made(tmp_path):
    """-o DIR writes each session's file as its records come: ``Sess`` is live as
    ``Sess.asr.jsonl`` before ``sess`` is seen. Its file is renamed to its caseless
    name before ``sess.asr.jsonl`` is made (where case is ignored the two would be one
    file, and ``sess`` would truncate ``Sess``'s records)."""
    from acp_pipes.asr.output import Spool

    out = tmp_path / "live"
    out.mkdir()
    spool = Spool(directory=str(out), provisional=lambda sid: {"sessionId": sid})
    spool.put("Sess", {"n": 1})
    spool.flush()
    assert sorted(p.name for p in out.iterdir()) == ["Sess.asr.jsonl"]
    spool.put("sess", {"n": 2})
    spool.put("Sess", {"n": 3})
    spool.flush()
    names = sorted(p.name for p in out.iterdir())
    assert names == ["%53ess.asr.jsonl", "sess.asr.jsonl"] and _fold_apart(names)
    assert records((out / "%53ess.asr.jsonl").read_bytes())[1:] == [{"n": 1}, {"n": 3}]
    headers = {"Sess": {"sessionId": "Sess"}, "sess": {"sessionId": "sess"}}
    written, failed = spool.write_dir(str(out), headers)
    assert not failed
    from acp_pipes.asr.output import session_names

    assert sorted(os.path.basename(p) for p in written) == names
    assert sorted(session_names(headers).values()) == names
    assert records((out / "%53ess.asr.jsonl").read_bytes()) == \
        [{"sessionId": "Sess"}, {"n": 1}, {"n": 3}]
    assert records((out / "sess.asr.jsonl").read_bytes()) == [{"sessionId": "sess"}, {"n": 2}]


ID_CHARS = st.sampled_from(["s", "S", "e", "E", "1", "-", ".", "é", "e\u0301", "ß", "ss",
                            "K", "\u212a", "%", "/", "~", "\udc80", "ǅ", "ﬁ"])


@settings(max_examples=300, deadline=None)
@given(st.sets(st.lists(ID_CHARS, min_size=1, max_size=6).map("".join), max_size=8),
       st.sampled_from(["", "nul", "CON", "x" * 240]))
def test_names_of_any_ids_fold_apart_and_ordinary_ones_are_kept(ids, extra):
    from acp_pipes.asr.output import session_names
    from acp_pipes.io.filenames import fold, is_device

    ids = {*ids, extra + "A", extra + "a"} if extra else ids
    names = session_names(ids)
    assert _fold_apart(names.values())  # apart on macOS and Windows
    for sid, name in names.items():
        assert len(name.encode()) <= NAME_MAX and "/" not in name and not is_device(name)
        assert session_from_name(name) in (sid, None)  # None: a hashed long ID
        alone = not any(fold(file_name(o)) == fold(file_name(sid)) for o in ids if o != sid)
        if alone:  # an ID no other folds like keeps its name, byte for byte
            assert name == file_name(sid)

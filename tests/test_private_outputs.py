"""An output is as private as the most private input it was made from: acp-tee writes
its wire log 0600 (it holds a whole session), and a frames stream, an ASR stream, a
page or a batch's outputs made from it are 0600 too, whatever the umask; from inputs
others may read, outputs follow the umask as before. The real executables, umask 022."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from acp_pipes.io.wire import end_record
from tests.conftest import run_tool, tool_argv, tool_env

WIRE = Path(__file__).parent / "fixtures/asr/ASR-701-one-stream-per-session/wire.jsonl"


def _umask022() -> None:
    os.umask(0o022)


def _run(tool: str, *args: str, **kw) -> subprocess.CompletedProcess:
    r = run_tool(tool, *args, preexec_fn=_umask022, **kw)
    assert r.returncode == 0, r.stderr
    return r


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _log(tmp_path: Path, mode: int, name: str = "wire.jsonl") -> Path:
    log = tmp_path / name
    shutil.copyfile(WIRE, log)
    log.chmod(mode)
    return log


@pytest.mark.parametrize("tool,args,out", [
    ("frame", [], "out.jsonl"),
    ("fold", [], "out.jsonl"),
    ("view", [], "page.html"),
    ("align", ["SELF"], "ops.jsonl"),
])
def test_o_file_from_a_private_log_is_private(tmp_path, tool, args, out):
    private = _log(tmp_path, 0o600)
    public = _log(tmp_path, 0o644, "public.jsonl")
    args = [str(public) if a == "SELF" else a for a in args]
    _run(tool, str(private), *args, "-o", str(tmp_path / out))
    assert _mode(tmp_path / out) == 0o600
    _run(tool, str(public), *args, "-o", str(tmp_path / ("p-" + out)))
    assert _mode(tmp_path / ("p-" + out)) == 0o644  # the umask, as before


def test_a_file_replaced_loses_what_others_could_read_and_stdin_counts(tmp_path):
    private = _log(tmp_path, 0o600)
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"")
    out.chmod(0o644)
    _run("frame", str(private), "-o", str(out))
    assert _mode(out) == 0o600
    again = tmp_path / "again.jsonl"
    with private.open("rb") as f:  # acp-frame -o again.jsonl < wire.jsonl
        _run("frame", "-o", str(again), stdin=f)
    assert _mode(again) == 0o600


def test_asr_streams_from_a_private_log_are_private_even_while_followed(tmp_path):
    private = _log(tmp_path, 0o600)
    _run("asr", str(private), "-o", str(tmp_path / "s"))
    files = sorted((tmp_path / "s").iterdir())
    assert files and {_mode(f) for f in files} == {0o600}
    # --follow: the files that grow while the session runs are private from the start
    growing = tmp_path / "growing.jsonl"
    growing.write_bytes(WIRE.read_bytes())  # a log without its end record yet
    growing.chmod(0o600)
    live = tmp_path / "live"
    p = subprocess.Popen(tool_argv("asr", "--follow", "-o", str(live), str(growing)),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=tool_env(),
                         preexec_fn=_umask022)
    try:
        deadline = time.monotonic() + 60
        while not (live.is_dir() and any(live.iterdir())):
            assert time.monotonic() < deadline and p.poll() is None, p.stderr.read()
            time.sleep(0.05)
        assert {_mode(f) for f in live.iterdir()} == {0o600}
        with growing.open("ab") as f:
            f.write(orjson.dumps(end_record(0, 0, 16)) + b"\n")
        assert p.wait(60) == 0, p.stderr.read()
        assert {_mode(f) for f in live.iterdir()} == {0o600}
    finally:
        p.kill()
        p.wait()


def test_batch_outputs_are_as_private_as_their_own_input(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    _log(src, 0o600, "private.jsonl")
    _log(src, 0o644, "public.jsonl")
    dest = tmp_path / "dest"
    _run("batch", "asr", str(src), "-o", str(dest), "-j", "1")
    modes = {p.relative_to(dest).parts[0]: _mode(p) for p in dest.rglob("*.asr.jsonl")}
    assert modes == {"private": 0o600, "public": 0o644}, sorted(dest.rglob("*"))


def test_a_report_is_as_private_as_the_stream_it_reports_on(tmp_path):
    private = _log(tmp_path, 0o600)
    _run("asr", str(private), "-o", str(tmp_path / "s"))
    stream = sorted((tmp_path / "s").iterdir())[0]
    _run("replay", str(stream), "--report", str(tmp_path / "report.jsonl"))
    assert _mode(tmp_path / "report.jsonl") == 0o600
    stream.chmod(0o644)
    _run("replay", str(stream), "--report", str(tmp_path / "public.jsonl"))
    assert _mode(tmp_path / "public.jsonl") == 0o644

"""The stream contract, held by every tool at once, through the real executables and
pipes: a closed pipe downstream ends a tool quietly, a closed stdin and a full stdout
are clear errors, ``-o`` never loses a user's file."""

from __future__ import annotations

import gzip
import os
import re
import signal
import stat
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import REPO, run_tool, tool_argv, tool_env

pytestmark = pytest.mark.process  # processes are the point: real pipes, signals, exits


@pytest.fixture(scope="module")
def rec(tmp_path_factory) -> dict[str, Path]:
    """Two echo sessions of 300 prompts (other prompt texts) recorded by the real acp-tee,
    their ASR streams, the first one's frames: big enough that no tool's output fits in
    a pipe's buffer."""
    d = tmp_path_factory.mktemp("contract")
    paths = {}
    for tag, text in (("", "hello"), ("2", "other")):
        client = paths["client" + tag] = d / f"client{tag}.jsonl"
        client.write_bytes(run_tool("echo-agent", "--client-session", "300",
                                    "--text", text).stdout)
        wire = paths["wire" + tag] = d / f"wire{tag}.jsonl"
        with open(client, "rb") as fin:
            r = subprocess.run(tool_argv("tee", "-o", str(wire), "--clock", "epoch",
                                         "--no-host", "--", *tool_argv("echo-agent")),
                               stdin=fin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env=tool_env(), timeout=120)
        assert r.returncode == 0, r.stderr
        paths["asr" + tag] = d / f"s{tag}.asr.jsonl"
        paths["asr" + tag].write_bytes(run_tool("asr", str(wire)).stdout)
    paths["frames"] = d / "frames.jsonl"
    paths["frames"].write_bytes(run_tool("frame", str(paths["wire"])).stdout)
    return paths


#: Each tool with arguments that write far more than a pipe holds ({wire} etc. are paths).
BIG_OUTPUT = {
    "frame": ["{wire}"],
    "frame --summary": ["--summary", "{wire}", "{wire}", "{wire}"],
    "fold": ["{wire}"],
    "asr": ["{wire}"],
    "replay --emit": ["--emit", "a2c", "{wire}"],
    "replay asr": ["{asr}"],
    "replay asr --wire": ["{asr}", "--wire", "{wire}"],
    "replay --compare": ["--compare", "{asr}", "{asr2}"],
    "align": ["{wire}", "{frames}"],
    "align --format diff": ["{wire}", "{client}", "--dir", "c2a", "--format", "diff"],
    "view": ["{wire}"],
    "export": ["otlp", "{wire}"],
    "echo-agent": ["--client-session", "3000"],
}


def _argv(case: str, rec: dict[str, Path]) -> list[str]:
    name = case.split()[0]
    return tool_argv(name, *(a.format(**rec) for a in BIG_OUTPUT[case]))


@pytest.mark.parametrize("case", BIG_OUTPUT)
def test_a_closed_pipe_ends_every_tool_quietly(case, rec):
    """``acp-x ... | head -c 100``: the reader leaves; the tool ends with 0 and says
    nothing (acp-replay with --wire used to say "cannot read the wire log: Broken pipe")."""
    proc = subprocess.Popen(_argv(case, rec), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=tool_env())
    assert proc.stdout is not None and proc.stderr is not None
    head = proc.stdout.read(100)
    proc.stdout.close()
    err = proc.stderr.read()
    assert len(head) == 100
    assert (proc.wait(timeout=120), err) == (0, b"")


@pytest.mark.parametrize("case", BIG_OUTPUT)
def test_a_full_stdout_is_a_clear_error(case, rec):
    """``>/dev/full``: one line naming stdout and the reason, exit 2, no internal error."""
    with open("/dev/full", "wb") as full:
        r = subprocess.run(_argv(case, rec), stdout=full, stderr=subprocess.PIPE,
                           stdin=subprocess.DEVNULL, env=tool_env(), timeout=120)
    prog = "acp-" + case.split()[0]
    assert (r.returncode, r.stderr.decode()) == (
        2, f"{prog}: cannot write stdout: No space left on device\n")


#: Each tool reading stdin, with the arguments that make it do so.
READS_STDIN = {
    "frame": [], "frame --summary": ["--summary"], "fold": [], "asr": [],
    "asr --validate": ["--validate"], "align": ["-", "{wire}"], "replay": ["{wire}"],
    "replay --serve": ["--serve", "{asr}"], "view": [], "echo-agent": [], "export": ["otlp"],
}


@pytest.mark.parametrize("case", READS_STDIN)
def test_a_closed_stdin_is_a_clear_error(case, rec):
    """Started with ``<&-`` (no fd 0 at all), a tool says so instead of an internal
    error: ``prog: stdin: closed: ...``, exit 2."""
    name = case.split()[0]
    argv = tool_argv(name, *(a.format(**rec) for a in READS_STDIN[case]))
    r = subprocess.run(["sh", "-c", 'exec "$@" <&-', "sh", *argv], capture_output=True,
                       env=tool_env(), timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.decode().startswith(f"acp-{name}: stdin: closed: nothing to read")
    assert r.stdout == b""


#: Each tool taking -o FILE, with its inputs.
WRITES_O = {
    "frame": ["{wire}"],
    "frame --summary": ["--summary", "{wire}"],
    "fold": ["{wire}"],
    "replay --emit": ["--emit", "a2c", "{wire}"],
    "replay asr": ["{asr}"],
    "align": ["{wire}", "{frames}"],
    "view": ["{wire}"],
    "export otlp": ["otlp", "{wire}"],
}


def _copy_inputs(rec: dict[str, Path], tmp: Path) -> dict[str, Path]:
    copies = {}
    for key in ("wire", "frames", "asr", "client"):
        copies[key] = tmp / rec[key].name
        copies[key].write_bytes(rec[key].read_bytes())
    return copies


@pytest.mark.parametrize("case", WRITES_O)
def test_o_refuses_to_overwrite_an_input(case, rec, tmp_path):
    """``acp-frame w.jsonl -o w.jsonl`` used to leave the recording empty. The output is
    refused when it is one of the inputs, by device and inode: another spelling of the
    path or a hard link is the same file."""
    files = _copy_inputs(rec, tmp_path)
    name, args = case.split()[0], [a.format(**files) for a in WRITES_O[case]]
    victim = Path(args[-1])
    before = victim.read_bytes()
    link = tmp_path / "link.jsonl"
    os.link(victim, link)
    for spelling in (str(victim), str(tmp_path / "." / victim.name), str(link)):
        r = run_tool(name, *args, "-o", spelling)
        assert r.returncode == 2, r.stderr
        assert b"is also an input" in r.stderr
        assert victim.read_bytes() == before


#: Cases of -o whose real processes run more than a second (three runs each).
SLOW_O = {"export otlp", "view"}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_O
                                  else c for c in WRITES_O])
def test_o_replaces_the_file_only_when_the_run_succeeds(case, rec, tmp_path):
    files = _copy_inputs(rec, tmp_path)
    name, args = case.split()[0], [a.format(**files) for a in WRITES_O[case]]
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"the previous run\n")
    out.chmod(0o640)
    ok = run_tool(name, *args, "-o", str(out))
    assert ok.returncode == 0, ok.stderr  # (align: a recording and its own frames, the same)
    assert out.read_bytes() == run_tool(name, *args).stdout  # the same bytes as on stdout
    assert stat.S_IMODE(out.stat().st_mode) == 0o640  # the mode of the file it replaced
    out.write_bytes(b"the previous run\n")
    cut = tmp_path / "cut.jsonl.gz"  # unreadable past its middle: a failed run (exit 2)
    cut.write_bytes(gzip.compress(Path(args[-1]).read_bytes())[:20000])
    failed = run_tool(name, *args[:-1], str(cut), "-o", str(out))
    assert failed.returncode == 2, failed.stderr
    assert b"cannot read" in failed.stderr
    assert out.read_bytes() == b"the previous run\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def _read_to_the_end(pid: int, path: Path) -> None:
    """Until process ``pid`` has read ``path`` to its end (its descriptor's offset is the
    file's size): a --follow run waiting for more."""
    size, deadline = path.stat().st_size, time.monotonic() + 60
    while time.monotonic() < deadline:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd) == str(path):
                    info = Path(f"/proc/{pid}/fdinfo/{fd.name}").read_text()
                    if int(info.split()[1]) == size:
                        return
            except OSError:
                pass
        time.sleep(0.02)
    raise AssertionError("the tool never read its input to the end")


@pytest.mark.parametrize("name", ["frame", "fold"])
def test_o_keeps_what_follow_made_when_ctrl_c_ends_it(name, rec, tmp_path):
    """Ctrl-C is how ``--follow`` ends (a frames stream has no end record): the run
    finished, and -o FILE holds what it made, the bytes stdout gets."""
    wire = tmp_path / "growing.jsonl"  # a wire log without its end record: still growing
    wire.write_bytes(b"".join(line for line in rec["wire"].read_bytes().splitlines(True)
                              if not line.startswith(b'{"end":')))
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"the previous run\n")
    proc = subprocess.Popen(tool_argv(name, "--follow", str(wire), "-o", str(out)),
                            stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env=tool_env())
    _read_to_the_end(proc.pid, wire)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert out.read_bytes() == run_tool(name, str(wire)).stdout


def test_o_through_a_symlink_replaces_the_file_it_names(rec, tmp_path):
    real = tmp_path / "real.jsonl"
    real.write_bytes(b"old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    r = run_tool("frame", str(rec["wire"]), "-o", str(link))
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and real.read_bytes() == rec["frames"].read_bytes()


def test_o_dev_null_is_written_in_place(rec):
    r = run_tool("frame", str(rec["wire"]), "-o", "/dev/null")
    assert (r.returncode, r.stderr) == (0, b"")


def test_stdout_appending_to_an_input_is_refused(rec, tmp_path):
    """``acp-frame w.jsonl >> w.jsonl`` would read what it writes, for ever."""
    w = tmp_path / "w.jsonl"
    w.write_bytes(rec["wire"].read_bytes())
    with open(w, "ab") as out:
        r = subprocess.run(tool_argv("frame", str(w)), stdout=out, stderr=subprocess.PIPE,
                           env=tool_env(), timeout=60)
    assert r.returncode == 2 and b"stdout is also an input" in r.stderr
    assert w.read_bytes() == rec["wire"].read_bytes()


# -- every documented exit status happens ------------------------------------------------

BAD_PROMPT = b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}\n'


def _exit_scenarios(rec: dict[str, Path], tmp: Path) -> dict[str, dict[int, dict]]:
    """For each tool, a run ending with each exit status its --help lists: argv (``{x}``:
    a path of ``rec``), stdin bytes, ``"interrupt"``: SIGINT while it waits on stdin, or
    ``"ctrl_c"``: SIGINT to its process group (a Ctrl-C) once the file ``"when"`` has
    two lines."""
    bad_asr = REPO / "tests" / "fixtures" / "asr" / "invalid" / "crlf-line.asr.jsonl"
    nope = str(tmp / "nope.jsonl")
    broken = tmp / "broken.jsonl"
    broken.write_bytes(b"not JSON\n" + rec["wire"].read_bytes())
    corpus = tmp / "corpus"  # acp-batch: more recordings than it converts in a blink
    corpus.mkdir()
    for i in range(200):
        os.link(rec["wire"], corpus / f"run-{i}.jsonl")
    return {
        "frame": {0: {"argv": ["{wire}"]},
                  1: {"argv": ["--validate", "--dir", "c2a"], "stdin": BAD_PROMPT},
                  2: {"argv": [nope]}, 130: {"interrupt": []}},
        "fold": {0: {"argv": ["{wire}"]}, 2: {"argv": [nope]}, 130: {"interrupt": []}},
        "asr": {0: {"argv": ["{wire}"]}, 1: {"argv": ["--validate", str(bad_asr)]},
                2: {"argv": [nope]}, 130: {"interrupt": []}},
        "replay": {0: {"argv": ["--emit", "a2c", "{wire}"]},
                   1: {"argv": ["{wire}"], "stdin": b'{"jsonrpc":"2.0","id":0,"method":"x"}\n'},
                   2: {"argv": [nope]}, 130: {"interrupt": ["{wire}"]}},
        "align": {0: {"argv": ["{wire}", "{frames}"]}, 1: {"argv": ["{wire}", "{wire2}"]},
                  2: {"argv": [nope, "{wire}"]}, 130: {"interrupt": ["-", "{wire}"]}},
        "view": {0: {"argv": ["{wire}"]}, 2: {"argv": [nope]}, 130: {"interrupt": []}},
        "export": {0: {"argv": ["otlp", "{wire}"]}, 2: {"argv": ["otlp", nope]},
                   130: {"interrupt": ["otlp"]}},
        "echo-agent": {0: {"argv": ["--client-session", "1"]},
                       2: {"argv": ["--client-session", "-1"]}, 130: {"interrupt": []}},
        "tee": {0: {"argv": ["-o", str(tmp / "t0.jsonl"), "--", "true"]},
                # --connect: the agent's side refuses a message (400: no connection)
                1: {"server": tool_argv("tee", "-o", str(tmp / "t1s.jsonl"), "--listen",
                                        "http://127.0.0.1:0/acp", "--", "true"),
                    "argv": ["-o", str(tmp / "t1.jsonl"), "--connect", "{url}"],
                    "stdin": b'{"jsonrpc":"2.0","id":1,"method":"session/new"}\n'},
                2: {"argv": ["-o", str(tmp / "t2.jsonl")]},
                3: {"argv": ["-o", str(tmp / "t3.jsonl"), "--", "sh", "-c", "exit 3"]},
                126: {"argv": ["-o", str(tmp / "t6.jsonl"), "--", str(tmp)]},
                127: {"argv": ["-o", str(tmp / "t7.jsonl"), "--", str(tmp / "no-such-agent")]},
                137: {"argv": ["-o", str(tmp / "t9.jsonl"), "--", "sh", "-c", "kill -9 $$"]}},
        "batch": {0: {"argv": ["asr", "{wire}", "-o", str(tmp / "b0")]},
                  1: {"argv": ["asr", str(broken), "-o", str(tmp / "b1")]},
                  2: {"argv": ["asr", nope, "-o", str(tmp / "b2")]},
                  130: {"ctrl_c": ["asr", str(corpus), "-o", str(tmp / "b130"), "-j", "1"],
                        "when": tmp / "b130" / "manifest.jsonl"}},
    }


def _documented_exits(name: str) -> set[int]:
    """The exit statuses ``acp-NAME --help`` lists (acp-tee's include the agent's own,
    128+N for a signal: the scenarios give one of each)."""
    text = run_tool(name, "--help").stdout.decode()
    listed = " ".join(text.split("exit status:", 1)[1].split())
    codes = {int(c) for c in re.findall(r"(?:^|[,;(] ?|\bif )(\d+) ", listed)}
    if "the agent's" in listed:
        codes |= {0, 3, 137}  # the agent's own statuses; 128+9 for a SIGKILL
    return codes


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _wait_reading_stdin(pid: int) -> None:
    """Until the process is blocked reading a pipe: started and past its imports."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            wchan = Path(f"/proc/{pid}/wchan").read_text()
        except OSError:
            wchan = ""
        if "pipe_read" in wchan or "pipe_wait" in wchan:
            return
        time.sleep(0.02)
    raise AssertionError("the tool never waited on stdin")


EVERY_TOOL = ["frame", "fold", "asr", "replay", "align", "view", "echo-agent", "tee", "batch",
              "export"]
#: Tools whose stdout is no output of theirs: acp-tee's is the client's stream (tested in
#: test_tee.py); acp-batch writes under -o DEST only.
NO_STDOUT = {"tee", "batch"}


def test_every_tool_is_held_to_the_contract():
    """A new executable joins these tests: each console script has its exit statuses made
    to happen, and each that writes to stdout is tested under a closed pipe and a full
    disk (except the NO_STDOUT ones)."""
    scripts = re.findall(r'^acp-([\w-]+) = "', (REPO / "pyproject.toml").read_text(), re.M)
    assert sorted(scripts) == sorted(EVERY_TOOL)
    assert {c.split()[0] for c in BIG_OUTPUT} == set(EVERY_TOOL) - NO_STDOUT


#: Tools whose every exit status takes real processes more than a second to make happen
#: (acp-batch's worker pool; acp-tee in front of an agent; acp-export's OTLP exporter).
SLOW_STATUSES = {"batch", "tee", "export"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_STATUSES
                                  else n for n in EVERY_TOOL])
def test_every_documented_exit_status_happens(name, rec, tmp_path):
    """The exit statuses --help lists are the ones the tool returns: acp-fold and
    acp-asr used to list "1 a difference found", which they never return."""
    scenarios = _exit_scenarios(rec, tmp_path)[name]
    assert _documented_exits(name) == set(scenarios)
    for code, how in scenarios.items():
        if "interrupt" in how:
            argv = tool_argv(name, *(a.format(**rec) for a in how["interrupt"]))
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, env=tool_env())
            _wait_reading_stdin(proc.pid)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
            assert (proc.returncode, err) == (130, b""), (name, err)
            continue
        if "ctrl_c" in how:
            proc = subprocess.Popen(tool_argv(name, *how["ctrl_c"]), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, env=tool_env(),
                                    start_new_session=True)
            deadline = time.monotonic() + 120
            while _lines(how["when"]) < 2:  # its workers are started and working
                assert proc.poll() is None and time.monotonic() < deadline, "never got going"
                time.sleep(0.02)
            os.killpg(proc.pid, signal.SIGINT)
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 130, (name, err)
            assert b"internal error" not in err and b"Traceback" not in err, err
            continue
        server, url = None, ""
        if "server" in how:  # a peer to --connect to, which says where it listens
            server = subprocess.Popen(how["server"], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      env=tool_env())
            url = server.stderr.readline().split(b"listening on ")[1].strip().decode()
        try:
            r = run_tool(name, *(a.format(url=url, **rec) for a in how["argv"]),
                         input=how.get("stdin", b""), timeout=120)
        finally:
            if server is not None:
                server.terminate()
                server.communicate(timeout=60)
        assert r.returncode == code, (name, code, r.stderr)
        assert b"internal error" not in r.stderr


# -- --session, as acp-asr has it ----------------------------------------------------------

TWO_SESSIONS = [
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2}}',
    b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}',
    b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}',
    b'{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"sess-1",'
    b'"prompt":[{"type":"text","text":"one"}]}}',
    b'{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"sess-2",'
    b'"prompt":[{"type":"text","text":"two"}]}}',
]


@pytest.fixture(scope="module")
def two_sessions(tmp_path_factory) -> Path:
    """Two sessions on one connection of the echo agent, recorded by acp-tee."""
    d = tmp_path_factory.mktemp("two")
    wire = d / "two.wire.jsonl"
    r = subprocess.run(tool_argv("tee", "-o", str(wire), "--clock", "epoch", "--no-host", "--",
                                 *tool_argv("echo-agent")),
                       input=b"".join(x + b"\n" for x in TWO_SESSIONS), capture_output=True,
                       env=tool_env(), timeout=60)
    assert r.returncode == 0, r.stderr
    return wire


@pytest.mark.parametrize("stage", ["frame", "fold"])
def test_session_selects_one_session_as_acp_asr_does(stage, two_sessions):
    """``acp-frame --session ID`` and ``acp-fold --session ID`` keep that session (and the
    connection's own frames), so converting what they write gives the stream
    ``acp-asr --session ID`` gives."""
    direct = run_tool("asr", "--session", "sess-2", str(two_sessions))
    assert direct.returncode == 0, direct.stderr
    assert b'"sessionId":"sess-1"' not in direct.stdout
    picked = run_tool(stage, "--session", "sess-2", str(two_sessions))
    assert picked.returncode == 0, picked.stderr
    assert b'sess-1\\"' not in picked.stdout and b'"sess-1"' not in picked.stdout
    assert b"sess-2" in picked.stdout
    converted = run_tool("asr", input=picked.stdout)
    assert (converted.returncode, converted.stdout) == (0, direct.stdout), converted.stderr
    missing = run_tool(stage, "--session", "nope", str(two_sessions))
    assert missing.returncode == 2 and b"no session 'nope' in the input" in missing.stderr


def test_frame_session_drops_what_another_session_made(two_sessions):
    """``acp-frame --session sess-2`` keeps that session's frames and the connection's
    own, and drops those of sess-1 and the ``session/new`` request and response that made
    it (the request names no session: its answer says it was sess-1's), as
    ``acp-replay --session`` reads a trace; sess-2's own ``session/new`` stays."""
    every = [orjson.loads(x) for x in run_tool("frame", str(two_sessions)).stdout.splitlines()]
    picked = run_tool("frame", "--session", "sess-2", str(two_sessions))
    assert (picked.returncode, picked.stderr) == (0, b"")
    frames = [orjson.loads(x) for x in picked.stdout.splitlines()]
    made_sess_1 = [f for f in every if f.get("id") == 1]
    assert [(f["dir"], f["kind"], f.get("sessionId")) for f in made_sess_1] == [
        ("c2a", "request", None), ("a2c", "response", "sess-1")]
    assert frames == [f for f in every
                      if f.get("sessionId") in (None, "sess-2") and f not in made_sess_1]
    assert [(f["kind"], f["method"]) for f in frames if f.get("id") == 2] == [
        ("request", "session/new"), ("response", "session/new")]
    assert all(f.get("sessionId") != "sess-1" for f in frames)
    assert frames[0].get("format") == "acp-pipes/frames"


# -- input a stage cannot use says why ------------------------------------------------------

@pytest.mark.parametrize("stage", ["fold", "asr"])
def test_one_direction_frames_say_why_as_the_bare_stream_does(stage, tmp_path):
    """``acp-frame --dir c2a x | acp-asr`` exited 0 with nothing; the direct form
    (``acp-asr x``) already said a bare stream has one direction only."""
    bare = tmp_path / "client.jsonl"
    bare.write_bytes(b"".join(x + b"\n" for x in TWO_SESSIONS))
    direct = run_tool(stage, str(bare))
    assert direct.returncode == 2 and b"one direction only" in direct.stderr
    frames = run_tool("frame", "--dir", "c2a", str(bare)).stdout
    piped = run_tool(stage, input=frames)
    assert (piped.returncode, piped.stdout) == (2, b"")
    assert piped.stderr == (f"acp-{stage}: stdin:1: frames of a bare ACP stream (acp-frame "
                            "--dir): one direction only, and the fold needs both: record the "
                            "session with acp-tee\n").encode()


@pytest.mark.parametrize("stage", ["fold", "asr"])
@pytest.mark.parametrize("connection", ['"x"', "1.5", "-1", "true", "null", "[0]"])
def test_a_fold_header_with_a_connection_that_is_no_number_is_refused(stage, connection,
                                                                     two_sessions):
    """It was an internal error (ValueError from int()) in acp-asr."""
    folded = run_tool("fold", str(two_sessions)).stdout
    assert folded.startswith(b'{"format":"acp-pipes/fold","version":1,"connection":0,')
    bad = folded.replace(b'"connection":0', b'"connection":' + connection.encode(), 1)
    r = run_tool(stage, input=bad)
    assert r.returncode == 2
    assert r.stderr == (f"acp-{stage}: stdin:1: a fold header's connection is a number "
                        f"(0, 1, ...), not {connection}\n").encode()


@pytest.mark.parametrize("option", ["--report", "--remap-log"])
def test_a_report_file_is_never_an_input(option, rec, tmp_path):
    """``acp-replay S.asr.jsonl --report S.asr.jsonl`` would replace the stream with its
    loss report; refused like ``-o``."""
    files = _copy_inputs(rec, tmp_path)
    victim = files["asr"] if option == "--report" else files["wire"]
    before = victim.read_bytes()
    args = [str(files["asr"])] if option == "--report" else ["--remap-ids", str(files["wire"])]
    r = run_tool("replay", *args, option, str(victim), input=b"")
    assert r.returncode == 2 and b"is also an input" in r.stderr, r.stderr
    assert victim.read_bytes() == before

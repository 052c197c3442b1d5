"""acp-batch: a corpus through each mode gives the bytes the single-file tool gives (run
for real, file by file), a bad input is reported while the others convert, a rerun
skips what was done, and a batch killed half-way then run again ends as one that was
never stopped."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, run_tool, tool_argv, tool_env
from tests.ttys import run_tool_tty

FIXTURES = REPO / "tests" / "fixtures" / "asr"
BASELINE = "runs/ASR-701-one-stream-per-session.jsonl"


def batch(cwd: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    """The real acp-batch, run in ``cwd``."""
    return subprocess.run(tool_argv("batch", *args), cwd=cwd, capture_output=True,
                          env=tool_env(), timeout=300, **kw)


def tool(cwd: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    """The single-file tool ``acp-NAME`` run in ``cwd``: the reference acp-batch's output
    is compared with."""
    return run_tool(name, *args, cwd=cwd, timeout=120)


def make_corpus(root: Path) -> list[str]:
    """runs/: v2 and v1 recordings, one in a subdirectory, one gzipped, one cut off
    mid-session; returns their names as acp-batch finds them (sorted walk)."""
    runs = root / "runs"
    (runs / "v1").mkdir(parents=True)
    for name in ("ASR-701-one-stream-per-session", "ASR-718-fork-lineage",
                 "ASR-705-final-and-cut-off"):
        shutil.copy(FIXTURES / name / "wire.jsonl", runs / f"{name}.jsonl")
    for name in ("ASR-701-v1-real-shapes", "ASR-700-v1-and-v2-together"):
        shutil.copy(FIXTURES / name / "wire.jsonl", runs / "v1" / f"{name}.jsonl")
    data = (FIXTURES / "ASR-702-identifiers-verbatim" / "wire.jsonl").read_bytes()
    (runs / "ASR-702-identifiers-verbatim.jsonl.gz").write_bytes(gzip.compress(data))
    return sorted(str(p.relative_to(root)) for p in runs.rglob("*.jsonl*"))


def stem(name: str) -> str:
    rel = name.removeprefix("runs/")
    return rel.removesuffix(".gz").removesuffix(".jsonl")


def manifest(dest: Path) -> dict[str, dict]:
    """The last entry of each input."""
    out = {}
    for line in (dest / "manifest.jsonl").read_bytes().splitlines():
        entry = json.loads(line)
        out[entry["input"]] = entry
    return out


def tree(root: Path, skip: tuple[str, ...] = ("manifest.jsonl",)) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in skip}


@pytest.fixture
def corpus(tmp_path) -> tuple[Path, list[str]]:
    return tmp_path, make_corpus(tmp_path)


# -- the bytes of the single-file tools ---------------------------------------------------


def test_asr_mode_writes_what_acp_asr_writes(corpus):
    root, names = corpus
    r = batch(root, "asr", "runs", "-o", "out", "-j", "2")
    assert r.returncode == 0, r.stderr.decode()
    expected: dict[str, bytes] = {}
    for name in names:
        assert tool(root, "asr", "-o", f"ref/{stem(name)}", name).returncode == 0
    expected = tree(root / "ref")
    # every input has a stream, several have two or more
    assert sorted(expected) == [
        "ASR-701-one-stream-per-session/s-a.asr.jsonl",
        "ASR-701-one-stream-per-session/s-b.asr.jsonl",
        "ASR-702-identifiers-verbatim/sess%2F%C3%BC%201.asr.jsonl",
        "ASR-705-final-and-cut-off/s.asr.jsonl",
        "ASR-718-fork-lineage/child.asr.jsonl", "ASR-718-fork-lineage/parent.asr.jsonl",
        "v1/ASR-700-v1-and-v2-together/v1-session.asr.jsonl",
        "v1/ASR-700-v1-and-v2-together/v2-session.asr.jsonl",
        "v1/ASR-701-v1-real-shapes/s-one.asr.jsonl", "v1/ASR-701-v1-real-shapes/s-two.asr.jsonl"]
    assert tree(root / "out") == expected
    entries = manifest(root / "out")
    assert sorted(entries) == names
    for name, e in entries.items():  # the manifest names each input's outputs
        assert e["status"] == "ok" and e["error"] is None
        assert sorted(e["outputs"]) == sorted(k for k in expected
                                              if k.startswith(stem(name) + "/"))


def test_validate_mode_writes_what_acp_frame_validate_writes(corpus):
    root, names = corpus
    r = batch(root, "validate", "runs", "-o", "out", "-j", "2")
    entries = manifest(root / "out")
    for name in names:
        ref = tool(root, "frame", "--validate", name)
        assert (root / "out" / f"{stem(name)}.validate.jsonl").read_bytes() == ref.stdout
        assert entries[name]["status"] == ("invalid" if ref.returncode == 1 else "ok")
    # as acp-frame --validate: exit 1 when a recording breaks the spec
    invalid = [n for n, e in entries.items() if e["status"] == "invalid"]
    assert r.returncode == (1 if invalid else 0), r.stderr.decode()


def test_view_mode_writes_what_acp_view_writes(corpus):
    root, names = corpus
    r = batch(root, "view", "runs", "-o", "out", "-j", "2")
    assert r.returncode == 0, r.stderr.decode()
    for name in names:
        assert tool(root, "view", name, "-o", "ref.html").returncode == 0
        assert (root / "out" / f"{stem(name)}.html").read_bytes() == \
            (root / "ref.html").read_bytes()


@pytest.mark.parametrize("fmt", ["diff", "json"])
def test_align_mode_writes_each_runs_diff_and_one_table(corpus, fmt):
    root, names = corpus
    r = batch(root, "align", "runs", "--baseline", BASELINE, "-o", "out", "--format", fmt)
    assert r.returncode == 0, r.stderr.decode()
    suffix = {"diff": ".diff", "json": ".json"}[fmt]
    rows = (root / "out" / "align.tsv").read_text().splitlines()
    head = rows[0].split("\t")
    assert head[:2] == ["run", "status"] and len(rows) == len(names) + 1
    for name, row in zip(names, rows[1:], strict=True):
        ref = tool(root, "align", "--format", fmt, BASELINE, name)
        assert (root / "out" / (stem(name) + suffix)).read_bytes() == ref.stdout
        summary = json.loads(tool(root, "align", "--format", "json", BASELINE, name).stdout)
        assert ref.returncode == (0 if summary["equal"] else 1), ref.stderr.decode()
        cells = dict(zip(head, row.split("\t"), strict=True))
        first = summary["first_divergence"]
        assert cells["run"] == name
        assert cells["status"] == ("ok" if summary["equal"] else "differs")
        assert cells["only_a"] == str(summary["counts"]["only-a"])
        assert cells["only_b"] == str(summary["counts"]["only-b"])
        assert cells["distance"] == str(summary["distance"])
        if first is None:
            assert name == BASELINE and cells["first_a"] == cells["first_b"] == "-"
        else:
            assert cells["first_a"] == str(first["a"]) if first["a"] is not None else "-"
            assert cells["first_b"] == str(first["b"]) if first["b"] is not None else "-"
            assert cells["first_op"] == first["op"]


# -- bad input, reruns, interruption -------------------------------------------------------


def test_a_corrupt_input_is_reported_while_the_rest_convert(corpus):
    root, names = corpus
    (root / "runs" / "broken.jsonl.gz").write_bytes(gzip.compress(b"x" * 5000)[:40])
    (root / "runs" / "not-acp.jsonl").write_bytes(b"\x00\x01 not a recording\n")
    r = batch(root, "asr", "runs", "-o", "out")
    assert r.returncode == 1
    err = r.stderr.decode()
    entries = manifest(root / "out")
    for bad in ("runs/broken.jsonl.gz", "runs/not-acp.jsonl"):
        e = entries[bad]
        assert e["status"] == "failed" and e["error"].startswith(bad), e
        assert f"acp-batch: {e['error']}" in err  # said once, naming the file
        assert "Traceback" not in err
    for name in names:  # the others converted, as acp-asr converts them
        assert entries[name]["status"] == "ok"
        tool(root, "asr", "-o", f"ref/{stem(name)}", name)
    assert tree(root / "out") == tree(root / "ref")
    n = len(names) + 2
    assert f"{n} of {n} recordings: {n - 2} done, 0 skipped (done before), 2 failed" in err


@pytest.mark.slow  # acp-batch's worker pool run five times
def test_a_rerun_skips_what_is_done_and_redoes_what_changed(corpus):
    root, names = corpus
    assert batch(root, "asr", "runs", "-o", "out").returncode == 0
    first = (root / "out" / "manifest.jsonl").read_bytes()
    for _ in range(3):  # the summary alone (the pool's exit once raced the interpreter's)
        r = batch(root, "asr", "runs", "-o", "out")
        assert r.returncode == 0
        lines = r.stderr.decode().splitlines()
        assert len(lines) == 2 and f"0 done, {len(names)} skipped" in lines[0], lines
    assert (root / "out" / "manifest.jsonl").read_bytes() == first  # nothing redone

    # new bytes: redone; the stream of a session it no longer has is removed
    changed = root / "runs" / "ASR-718-fork-lineage.jsonl"
    changed.write_bytes((FIXTURES / "ASR-735-session-message" / "wire.jsonl").read_bytes())
    before = manifest(root / "out")["runs/ASR-718-fork-lineage.jsonl"]
    r = batch(root, "asr", "runs", "-o", "out")
    assert f"1 done, {len(names) - 1} skipped" in r.stderr.decode()
    after = manifest(root / "out")["runs/ASR-718-fork-lineage.jsonl"]
    assert after["hash"] != before["hash"]
    tool(root, "asr", "-o", "ref", str(changed.relative_to(root)))
    assert tree(root / "out" / "ASR-718-fork-lineage") == tree(root / "ref")
    assert sorted(tree(root / "ref")) == ["boss.asr.jsonl", "worker.asr.jsonl"]  # not parent

    # another option: every input again
    r = batch(root, "asr", "runs", "-o", "out", "--agent-name", "com.example.agent")
    assert f"{len(names)} done, 0 skipped" in r.stderr.decode()
    # an output removed by hand: that input again
    os.unlink(root / "out" / "ASR-701-one-stream-per-session" / "s-a.asr.jsonl")
    r = batch(root, "asr", "runs", "-o", "out", "--agent-name", "com.example.agent")
    assert f"1 done, {len(names) - 1} skipped" in r.stderr.decode()
    assert (root / "out" / "ASR-701-one-stream-per-session" / "s-a.asr.jsonl").is_file()


def test_the_line_limit_is_part_of_the_options(corpus):
    """--max-line-bytes changes what a mode makes of an input (a longer line fails it),
    so a rerun under another limit redoes what an earlier limit made."""
    root, names = corpus
    assert batch(root, "asr", "runs", "-o", "out").returncode == 0
    name = "runs/ASR-718-fork-lineage.jsonl"
    longest = max(map(len, (root / name).read_bytes().splitlines()))
    under = [n for n in names if n.endswith(".jsonl")
             and max(map(len, (root / n).read_bytes().splitlines())) < longest]
    assert under, "an input every line of which the limit takes"
    r = batch(root, "--max-line-bytes", str(longest - 1), "asr", "runs", "-o", "out")
    assert r.returncode == 1
    entries = manifest(root / "out")
    assert entries[name]["status"] == "failed"
    assert entries[name]["error"] == (f"{name}:{_line_of(root / name, longest)}: cannot "
                                      f"read: line of more than {longest - 1} bytes (limit "
                                      f"--max-line-bytes {longest - 1})")
    assert all(entries[n]["status"] == "ok" for n in under)
    assert " done, 0 skipped (done before), " in r.stderr.decode()  # every input redone
    # the default again: redone as before, then skipped
    again = batch(root, "asr", "runs", "-o", "out")
    assert again.returncode == 0 and manifest(root / "out")[name]["status"] == "ok"
    r = batch(root, "--max-line-bytes", "64M", "asr", "runs", "-o", "out")
    assert f"0 done, {len(names)} skipped" in r.stderr.decode()


def _line_of(path: Path, length: int) -> int:
    """The number of the first line of ``length`` bytes."""
    lines = path.read_bytes().splitlines()
    return next(i for i, line in enumerate(lines, 1) if len(line) == length)


def _copies(root: Path, n: int) -> None:
    wire = (FIXTURES / "ASR-718-fork-lineage" / "wire.jsonl").read_bytes()
    runs = root / "many"
    runs.mkdir()
    for i in range(n):
        # each its own bytes (the gzip header's time), so no two hashes agree
        (runs / f"run-{i:04d}.jsonl.gz").write_bytes(gzip.compress(wire, mtime=i))


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _batch_running(root: Path, jobs: int, lines: int, **popen) -> subprocess.Popen:
    """``acp-batch view many -o out -j JOBS`` under ``root``, once its manifest holds
    ``lines`` lines (so it is mid-batch)."""
    proc = subprocess.Popen(tool_argv("batch", "view", "many", "-o", "out", "-j", str(jobs),
                                      "--no-validate"),
                            cwd=root, env=tool_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **popen)
    deadline = time.monotonic() + 240
    while _lines(root / "out" / "manifest.jsonl") < lines:
        assert proc.poll() is None and time.monotonic() < deadline, "never got going"
        time.sleep(0.01)
    return proc


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
@pytest.mark.slow  # a pool of worker processes, killed and run again
def test_a_batch_killed_half_way_then_rerun_ends_as_one_never_stopped(tmp_path, sig):
    n = 240
    _copies(tmp_path, n)
    ref = batch(tmp_path, "view", "many", "-o", "ref", "-j", "2", "--no-validate")
    assert ref.returncode == 0, ref.stderr.decode()

    proc = _batch_running(tmp_path, 1, 20, start_new_session=True)
    # Ctrl-C at a terminal reaches the whole process group; a kill -9 takes them all too
    os.killpg(proc.pid, sig)
    _, err = proc.communicate(timeout=120)
    done = _lines(tmp_path / "out" / "manifest.jsonl")
    if sig == signal.SIGINT:
        assert proc.returncode == 130, err.decode()
        assert b"interrupted: run the same command again" in err
    else:
        assert proc.returncode == -signal.SIGKILL
    assert 20 <= done < n, "the batch was not stopped half-way"

    again = batch(tmp_path, "view", "many", "-o", "out", "-j", "2", "--no-validate")
    assert again.returncode == 0, again.stderr.decode()
    skipped = int(re.search(r"(\d+) skipped", again.stderr.decode()).group(1))
    assert skipped >= done - 1  # what was done is not done again (a torn last line may be)
    assert tree(tmp_path / "out") == tree(tmp_path / "ref")
    assert not (tmp_path / "out" / ".acp-batch-tmp").exists() or \
        not any((tmp_path / "out" / ".acp-batch-tmp").iterdir())

    def state(entries):
        return {k: (e["hash"], sorted(e["outputs"]), e["status"]) for k, e in entries.items()}

    assert state(manifest(tmp_path / "out")) == state(manifest(tmp_path / "ref"))


def test_an_interrupted_batch_drops_the_rest_of_each_workers_chunk(tmp_path):
    """A SIGINT to the driver alone (``kill -INT PID``: no worker gets it) stops each
    worker once its job in hand is done: the outputs written are the manifest's and the
    few done while the stop reached the worker, not the rest of a chunk of 32 (whose
    results nobody keeps)."""
    _copies(tmp_path, 200)
    proc = _batch_running(tmp_path, 1, 1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err.decode()
    done = _lines(tmp_path / "out" / "manifest.jsonl")
    assert done < 200, "the batch was not stopped half-way"
    written = [p for p in (tmp_path / "out").iterdir() if p.suffix == ".html"]
    # 200 inputs, one worker: chunks of 32; the rest of the one in hand is not done
    assert done <= len(written) < done + 32, (done, len(written))


def _workers(pid: int) -> list[int]:
    """The pool's worker processes: forked, so their command line is the driver's (not
    multiprocessing's helpers)."""
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in map(int, (task / "children").read_text().split()):
            try:
                if Path(f"/proc/{child}/cmdline").read_bytes() == cmdline:
                    out.append(child)
            except FileNotFoundError:
                pass
    return out


@pytest.mark.slow  # a pool of worker processes, one killed
def test_a_worker_process_killed_mid_batch_costs_nothing(tmp_path):
    """A local worker killed (the OOM killer, a stray kill -9): the pool is started again,
    the jobs it held are given once more, and the batch ends as one where none died."""
    n = 240
    _copies(tmp_path, n)
    ref = batch(tmp_path, "view", "many", "-o", "ref", "-j", "2", "--no-validate")
    assert ref.returncode == 0, ref.stderr.decode()
    proc = _batch_running(tmp_path, 2, 20)
    workers = _workers(proc.pid)
    assert len(workers) == 2 and proc.poll() is None  # mid-batch
    os.kill(workers[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err.decode()
    assert b"acp-batch: a worker process died; its pool is started again" in err
    assert _lines(tmp_path / "out" / "manifest.jsonl") < 2 * n  # not all done twice
    assert tree(tmp_path / "out") == tree(tmp_path / "ref")
    assert all(e["status"] == "ok" for e in manifest(tmp_path / "out").values())


# -- engines, URLs, the terminal ------------------------------------------------------------


@pytest.fixture(scope="module")
def threads_cluster():
    """A Dask LocalCluster of two workers in this process, talking over loopback TCP:
    they share this process's fsspec memory file system."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                       protocol="tcp://", host="127.0.0.1",
                                       dashboard_address=None)
    yield cluster
    cluster.close()


@pytest.mark.slow  # Dask
def test_a_dask_cluster_converts_from_and_to_the_memory_file_system(threads_cluster, corpus,
                                                                     capsys):
    import fsspec

    from acp_pipes.cli.batch import TOOL

    root, names = corpus
    assert threads_cluster.scheduler_address.startswith("tcp://127.0.0.1:")
    assert len(threads_cluster.workers) == 2
    fs = fsspec.filesystem("memory")
    fs.rm("/corpus", recursive=True) if fs.exists("/corpus") else None
    for name in names:
        fs.pipe(f"/corpus/{name}", (root / name).read_bytes())
        tool(root, "asr", "-o", f"ref/{stem(name)}", name)
    argv = ["asr", "memory://corpus/runs", "-o", "memory://corpus/out", "--scheduler",
            threads_cluster.scheduler_address]
    assert TOOL.main(argv) == 0, capsys.readouterr().err
    got = {p.removeprefix("/corpus/out/"): fs.cat(p) for p in fs.find("/corpus/out")}
    entries = [json.loads(line) for line in got.pop("manifest.jsonl").splitlines()]
    assert got == tree(root / "ref")
    assert sorted(e["input"] for e in entries) == \
        sorted(f"memory:///corpus/{n}" for n in names)
    assert TOOL.main(argv) == 0  # again: every input skipped
    assert f"0 done, {len(names)} skipped" in capsys.readouterr().err

    # align, the baseline a URL too: each worker copies it once
    base = "memory:///corpus/" + BASELINE
    argv = ["align", "memory://corpus/runs", "--baseline", base, "-o", "memory://corpus/al",
            "--scheduler", threads_cluster.scheduler_address]
    assert TOOL.main(argv) == 0, capsys.readouterr().err
    for name in names:
        ref = tool(root, "align", "--format", "diff", BASELINE, name).stdout
        ref = ref.replace(f"--- {BASELINE}\n".encode(), f"--- {base}\n".encode(), 1)
        ref = ref.replace(f"+++ {name}\n".encode(), f"+++ memory:///corpus/{name}\n".encode(), 1)
        assert fs.cat(f"/corpus/al/{stem(name)}.diff") == ref
    table = fs.cat("/corpus/al/align.tsv").decode().splitlines()
    assert len(table) == len(names) + 1


@pytest.mark.slow  # Dask
def test_a_dask_cluster_of_worker_processes(corpus):
    """Two worker processes on loopback, and acp-batch as a process of its own; its
    --max-line-bytes holds in those workers as in local ones."""
    distributed = pytest.importorskip("distributed")
    root, names = corpus
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        r = batch(root, "validate", "runs", "-o", "out", "--scheduler",
                  cluster.scheduler_address)
        # the driver's line limit holds in workers that are not its children
        cut = batch(root, "--max-line-bytes", "300", "asr", "runs", "-o", "cut", "--scheduler",
                    cluster.scheduler_address)
    local = batch(root, "validate", "runs", "-o", "local", "-j", "2")
    assert r.returncode == local.returncode, r.stderr.decode()
    assert "failed" not in r.stderr.decode()
    assert tree(root / "out") == tree(root / "local")
    assert len(tree(root / "out")) == len(names)
    assert {k: (e["hash"], e["outputs"], e["status"]) for k, e in manifest(root / "out").items()} \
        == {k: (e["hash"], e["outputs"], e["status"]) for k, e in manifest(root / "local").items()}
    assert cut.returncode == 1 and "line of more than 300 bytes" in cut.stderr.decode()
    assert batch(root, "--max-line-bytes", "300", "asr", "runs", "-o", "local_cut").returncode == 1
    assert tree(root / "cut") == tree(root / "local_cut")
    assert {k: (e["error"], e["status"]) for k, e in manifest(root / "cut").items()} \
        == {k: (e["error"], e["status"]) for k, e in manifest(root / "local_cut").items()}


@pytest.mark.slow  # Dask
def test_a_dask_worker_lost_mid_batch_costs_nothing(tmp_path):
    """A cluster worker killed mid-batch: Dask gives its tasks to the others (its nanny
    starts it again), and the batch ends as one where none was lost."""
    distributed = pytest.importorskip("distributed")
    n = 240
    _copies(tmp_path, n)
    ref = batch(tmp_path, "view", "many", "-o", "ref", "-j", "2", "--no-validate")
    assert ref.returncode == 0, ref.stderr.decode()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        pids = list(client.run(os.getpid).values())
        proc = subprocess.Popen(tool_argv("batch", "view", "many", "-o", "out",
                                          "--no-validate", "--scheduler",
                                          cluster.scheduler_address),
                                cwd=tmp_path, env=tool_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        deadline = time.monotonic() + 240
        while _lines(tmp_path / "out" / "manifest.jsonl") < 20:
            assert proc.poll() is None and time.monotonic() < deadline, "never got going"
            time.sleep(0.02)
        assert proc.poll() is None  # mid-batch
        os.kill(pids[0], signal.SIGKILL)
        _, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err.decode()
    assert _lines(tmp_path / "out" / "manifest.jsonl") < 20 + n  # the lost work, once
    assert tree(tmp_path / "out") == tree(tmp_path / "ref")
    assert all(e["status"] == "ok" for e in manifest(tmp_path / "out").values())


def test_file_urls_read_as_their_paths(corpus):
    root, names = corpus
    r = batch(root, "validate", f"file://{root}/runs", "-o", f"file://{root}/out")
    # ASR-718-fork-lineage breaks the spec (acp-frame --validate exits 1 on it alone)
    assert r.returncode == 1, r.stderr.decode()
    assert [n for n, e in manifest(root / "out").items() if e["status"] == "invalid"] == [
        f"file://{root}/runs/ASR-718-fork-lineage.jsonl"]
    for name in names:  # the URL is the source name the report gives
        got = (root / "out" / f"{stem(name)}.validate.jsonl").read_bytes()
        ref = tool(root, "frame", "--validate", str(root / name)).stdout
        assert got == ref.replace(str(root / name).encode(), f"file://{root}/{name}".encode())


def test_memory_urls_need_workers_in_this_process(corpus):
    root, _ = corpus
    r = batch(root, "asr", "memory://nowhere/x.jsonl", "-o", "out")
    assert r.returncode == 2
    assert b"no such file" in r.stderr  # that process's memory holds nothing
    r = batch(root, "asr", "runs", "-o", "memory://out")
    assert r.returncode == 2 and b"worker processes cannot see it" in r.stderr


def test_a_progress_bar_at_a_terminal_and_none_in_a_pipe(corpus):
    root, names = corpus
    tty = run_tool_tty("batch", "asr", str(root / "runs"), "-o", str(root / "a"),
                       out_tty=False, err_tty=True, size=(24, 80))
    assert tty.returncode == 0, tty.stderr
    shown = tty.stderr.decode()
    assert f"{len(names)}/{len(names)}" in shown and "file/s" in shown and "\r" in shown
    piped = run_tool("batch", "asr", str(root / "runs"), "-o", str(root / "b"))
    assert piped.returncode == 0
    assert b"\r" not in piped.stderr and b"file/s" not in piped.stderr
    assert piped.stderr.decode().startswith(f"acp-batch: {len(names)} of {len(names)}")


@pytest.mark.parametrize("args, message", [
    (["asr", "nowhere", "-o", "out"], "nowhere: no such file or directory"),
    (["asr", "runs/v1", "runs/v1/../v1", "-o", "out"], "would write the same outputs"),
    (["align", "runs", "-o", "out"], "--baseline"),
    (["align", "runs", "--baseline", "nowhere.jsonl", "-o", "out"], "--baseline nowhere"),
    (["asr", "runs", "-o", "out", "-j", "0"], "-j must be at least 1"),
    (["frobnicate", "runs", "-o", "out"], "invalid choice"),
])
def test_usage_errors_exit_2_before_anything_is_written(corpus, args, message):
    root, _ = corpus
    r = batch(root, *args)
    assert r.returncode == 2
    assert message in r.stderr.decode()
    assert not (root / "out").exists()

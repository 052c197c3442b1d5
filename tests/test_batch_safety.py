"""acp-batch against careless and hostile input: a manifest, input names and a second
batch on the same DEST never make it write or remove anything outside DEST, or one
input's output over another's (also where the file system ignores case); its workers
never outlive a killed driver. Each runs the real acp-batch."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_pipes.io.filenames import fold
from tests.conftest import tool_argv, tool_env
from tests.test_asr_output import _three_sessions
from tests.test_batch import FIXTURES, _workers, batch, manifest, tool

WIRE = FIXTURES / "ASR-701-one-stream-per-session" / "wire.jsonl"
OTHER = FIXTURES / "ASR-702-identifiers-verbatim" / "wire.jsonl"
THIRD = FIXTURES / "ASR-703-agent-name-fallback" / "wire.jsonl"


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (hidden ones too), by path."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _no_two_fold_alike(names) -> None:
    """No two of ``names`` are one file where case and Unicode normalisation are
    ignored (macOS, Windows)."""
    by: dict[str, list[str]] = {}
    for n in names:
        by.setdefault(fold(n), []).append(n)
    assert all(len(v) == 1 for v in by.values()), {k: v for k, v in by.items() if len(v) > 1}


def _rewrite(dest: Path, name: str, **fields) -> None:
    """Set ``fields`` in input ``name``'s manifest entry (the last line says)."""
    entry = {**manifest(dest)[name], **fields}
    with open(dest / "manifest.jsonl", "ab") as f:
        f.write(json.dumps(entry).encode() + b"\n")


# -- the manifest is input ------------------------------------------------------------------


@pytest.mark.parametrize("outputs", [["../victim.txt"], "ab", None, 5, [1], {"a": 1},
                                     ["a", "/ABS"], ["manifest.jsonl"], ["a/../../victim.txt"],
                                     ["b"], ["runs.validate.jsonl"]])
def test_a_manifest_never_removes_what_is_not_its_inputs_output(tmp_path, outputs):
    """A rerun removes the outputs an input's last entry names that it no longer writes.
    Those names were trusted: ``../victim.txt`` removed a file beside DEST, ``"ab"``
    removed DEST/a and DEST/b, ``null``, ``5`` and ``[1]`` stopped the batch. Now only
    the files the mode writes for that input can be removed."""
    (tmp_path / "runs").mkdir()
    shutil.copy(WIRE, tmp_path / "runs" / "one.jsonl")
    shutil.copy(OTHER, tmp_path / "runs" / "two.jsonl")
    assert batch(tmp_path, "validate", "runs", "-o", "out").returncode == 0
    out = tmp_path / "out"
    for sentinel in (tmp_path / "victim.txt", out / "a", out / "b", tmp_path / "ABS",
                     out / "runs.validate.jsonl"):
        sentinel.write_bytes(b"keep me\n")
    if outputs == ["a", "/ABS"]:
        outputs = ["a", str(tmp_path / "ABS")]
    _rewrite(out, "runs/one.jsonl", outputs=outputs)
    shutil.copy(THIRD, tmp_path / "runs" / "one.jsonl")  # new bytes: done again
    before = _files(tmp_path)
    r = batch(tmp_path, "validate", "runs", "-o", "out")
    assert r.returncode == 0, r.stderr.decode()
    err = r.stderr.decode()
    assert "Traceback" not in err
    assert "1 done, 1 skipped (done before)" in err
    after = _files(tmp_path)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert changed == {"out/manifest.jsonl", "out/one.validate.jsonl"}, changed
    assert manifest(out)["runs/one.jsonl"]["outputs"] == ["one.validate.jsonl"]


def test_an_entry_of_the_wrong_shape_is_done_again(tmp_path):
    """A status that is no string (``[1]`` made ``in DONE`` raise) and an info that is
    no object (align's table spread it) neither stop the batch."""
    (tmp_path / "runs").mkdir()
    shutil.copy(WIRE, tmp_path / "runs" / "one.jsonl")
    shutil.copy(OTHER, tmp_path / "runs" / "two.jsonl")
    args = ("align", "runs", "--baseline", "runs/one.jsonl", "-o", "out")
    assert batch(tmp_path, *args).returncode == 0
    table = (tmp_path / "out" / "align.tsv").read_bytes()
    _rewrite(tmp_path / "out", "runs/one.jsonl", status=[1])
    _rewrite(tmp_path / "out", "runs/two.jsonl", info=[1])
    r = batch(tmp_path, *args)
    assert r.returncode == 0, r.stderr.decode()
    assert "Traceback" not in r.stderr.decode()
    assert (tmp_path / "out" / "align.tsv").read_bytes().splitlines()[:2] == \
        table.splitlines()[:2]


def test_a_manifest_that_is_a_directory_is_a_usage_error(tmp_path):
    (tmp_path / "out" / "manifest.jsonl").mkdir(parents=True)
    shutil.copy(WIRE, tmp_path / "one.jsonl")
    r = batch(tmp_path, "validate", "one.jsonl", "-o", "out")
    assert r.returncode == 2
    assert r.stderr.decode().startswith("acp-batch: out/manifest.jsonl: cannot read or "
                                        "append to the manifest: ")


# -- names --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["...jsonl", "..jsonl", "....jsonl.gz"])
def test_an_input_named_dots_writes_inside_dest(tmp_path, name):
    """``...jsonl`` had the stem ``..``: its streams were written beside DEST."""
    data = WIRE.read_bytes()
    if name.endswith(".gz"):
        import gzip

        data = gzip.compress(data, mtime=0)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / name).write_bytes(data)
    r = batch(tmp_path, "asr", f"in/{name}", "-o", "out/deep")
    assert r.returncode == 0, r.stderr.decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "out"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["deep"]
    (entry,) = manifest(tmp_path / "out" / "deep").values()
    folder = entry["outputs"][0].split("/")[0]
    assert folder.startswith("~") and len(folder) == 13  # a hash: ~<12 hex>
    assert all(o.startswith(folder + "/") for o in entry["outputs"])
    assert len(entry["outputs"]) == 2
    for rel in entry["outputs"]:
        assert (tmp_path / "out" / "deep" / rel).is_file()


def test_inputs_equal_but_for_case_or_normal_form_get_outputs_apart(tmp_path):
    """``Run.jsonl`` and ``run.jsonl`` wrote ``Run.validate.jsonl`` and
    ``run.validate.jsonl``: one file on macOS or Windows, the manifest saying both were
    done. Each is named with a hash of it now; a name unique under folding is kept."""
    runs = tmp_path / "runs"
    (runs / "Sub").mkdir(parents=True)
    (runs / "sub").mkdir()
    nfc = unicodedata.normalize("NFC", "café")
    nfd = unicodedata.normalize("NFD", "café")
    inputs = {"Run.jsonl": WIRE, "run.jsonl": OTHER, f"{nfc}.jsonl": WIRE,
              f"{nfd}.jsonl": OTHER, "Sub/x.jsonl": WIRE, "sub/x.jsonl": OTHER,
              "plain.jsonl": WIRE, "CON.jsonl": WIRE, "back\\slash.jsonl": WIRE}
    for name, src in inputs.items():
        shutil.copy(src, runs / name)
    r = batch(tmp_path, "validate", "runs", "-o", "out")
    assert r.returncode == 0, r.stderr.decode()
    entries = manifest(tmp_path / "out")
    outputs = [o for e in entries.values() for o in e["outputs"]]
    assert len(outputs) == len(inputs)
    _no_two_fold_alike(o.split("/")[0] for o in outputs)
    _no_two_fold_alike(o for o in outputs)
    assert entries["runs/plain.jsonl"]["outputs"] == ["plain.validate.jsonl"]  # as before
    assert entries["runs/back\\slash.jsonl"]["outputs"] == ["back\\slash.validate.jsonl"]
    assert entries["runs/CON.jsonl"]["outputs"][0].startswith("CON~")  # a device on Windows
    for name in inputs:  # each its own report, as acp-frame --validate writes it
        (rel,) = entries[f"runs/{name}"]["outputs"]
        ref = tool(tmp_path, "frame", "--validate", f"runs/{name}")
        assert (tmp_path / "out" / rel).read_bytes() == ref.stdout
    again = batch(tmp_path, "validate", "runs", "-o", "out")  # the same names again
    assert f"0 done, {len(inputs)} skipped" in again.stderr.decode()


def test_an_input_that_comes_to_share_a_name_is_renamed_and_done_again(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(WIRE, runs / "run.jsonl")
    assert batch(tmp_path, "validate", "runs", "-o", "out").returncode == 0
    assert manifest(tmp_path / "out")["runs/run.jsonl"]["outputs"] == ["run.validate.jsonl"]
    shutil.copy(OTHER, runs / "Run.jsonl")
    r = batch(tmp_path, "validate", "runs", "-o", "out")
    assert "2 done, 0 skipped" in r.stderr.decode()  # run.jsonl's name changed: again
    outputs = [e["outputs"][0] for e in manifest(tmp_path / "out").values()]
    _no_two_fold_alike(outputs)
    assert "run.validate.jsonl" not in outputs


def test_sessions_equal_but_for_case_get_streams_apart_as_acp_asr_names_them(tmp_path):
    wire = _three_sessions(tmp_path, "Sess-1")  # beside sess-1
    r = batch(tmp_path, "asr", str(wire), "-o", "out")
    assert r.returncode == 0, r.stderr.decode()
    (entry,) = manifest(tmp_path / "out").values()
    names = [o.split("/")[1] for o in entry["outputs"]]
    assert sorted(names) == ["%53ess-1.asr.jsonl", "sess-1.asr.jsonl", "sess-3.asr.jsonl"]
    _no_two_fold_alike(names)
    assert tool(tmp_path, "asr", "-o", "ref", str(wire)).returncode == 0
    assert _files(tmp_path / "out" / "wire") == _files(tmp_path / "ref")


# -- one batch at a time on a DEST ----------------------------------------------------------


def _blocked_batch(tmp_path: Path, *inputs: str, jobs: int = 1) -> subprocess.Popen:
    """acp-batch validate on FIFOs: each worker waits in open() until a writer comes."""
    for name in inputs:
        os.mkfifo(tmp_path / name)
    return subprocess.Popen(tool_argv("batch", "validate", *inputs, "-o", "out", "-j",
                                      str(jobs)),
                            cwd=tmp_path, env=tool_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def _wait_for(what, proc: subprocess.Popen, seconds: float = 60):
    deadline = time.monotonic() + seconds
    while not (got := what()):
        assert proc.poll() is None, proc.communicate()[1].decode()
        assert time.monotonic() < deadline, "never came"
        time.sleep(0.02)
    return got


def _has_open(pid: int, path: str) -> bool:
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except FileNotFoundError:
        return False
    for fd in fds:
        try:
            if os.readlink(fd) == path:
                return True
        except FileNotFoundError:
            pass
    return False


def _end(proc: subprocess.Popen) -> None:
    """A batch the test started, and its workers, ended (those of a driver that does not
    take them along too)."""
    workers = _workers(proc.pid)
    proc.kill()
    proc.wait()
    for w in workers:
        if not _gone(w):
            os.kill(w, signal.SIGKILL)


def _feed(proc: subprocess.Popen, fifo: str, data: bytes) -> None:
    """``data`` to each reader of ``fifo`` in turn (the batch opens its input more than
    once), one reader's EOF before the next writer, until ``proc`` ends."""
    (worker,) = _workers(proc.pid)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # no reader yet (ENXIO)
            time.sleep(0.01)
            continue
        os.set_blocking(fd, True)
        with open(fd, "wb") as f:
            f.write(data)
        while _has_open(worker, fifo) and proc.poll() is None:
            time.sleep(0.01)


def test_a_second_batch_on_the_same_dest_is_refused_naming_the_first(tmp_path):
    """Two batches on one DEST: the second removed the first's temporary files (and
    both appended to one manifest). Now the second is refused, exit 2, touching
    nothing; the first ends as if alone."""
    first = _blocked_batch(tmp_path, "a.jsonl")
    try:
        _wait_for(lambda: _workers(first.pid), first)
        lock = tmp_path / "out" / ".acp-batch-lock"
        assert lock.read_text() == f"{first.pid}\n"
        part = tmp_path / "out" / ".acp-batch-tmp" / "x.part"  # as a worker writes one
        part.parent.mkdir()
        part.write_bytes(b"half")
        before = _files(tmp_path / "out")
        shutil.copy(WIRE, tmp_path / "b.jsonl")
        r = batch(tmp_path, "validate", "b.jsonl", "-o", "out")
        assert r.returncode == 2
        assert r.stderr.decode() == (f"acp-batch: out: another acp-batch (pid {first.pid}) "
                                     "is writing there; wait for it to end, or give another "
                                     "-o\n")
        assert _files(tmp_path / "out") == before
        _feed(first, str(tmp_path / "a.jsonl"), WIRE.read_bytes())  # the first goes on
        _, err = first.communicate(timeout=120)
        assert first.returncode == 0, err.decode()
    finally:
        if first.poll() is None:
            _end(first)
    assert sorted(_files(tmp_path / "out")) == ["a.validate.jsonl", "manifest.jsonl"]
    r = batch(tmp_path, "validate", "b.jsonl", "-o", "out")  # free again
    assert r.returncode == 0, r.stderr.decode()


# -- workers die with their driver ----------------------------------------------------------


def _gone(pid: int) -> bool:
    """No such process, or one that has ended (a zombie its new parent has not reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def test_workers_die_with_a_killed_driver(tmp_path):
    """``kill -9`` of the driver left its -j workers running forever (~90 MB each);
    here they wait for input that never comes, and are gone within seconds."""
    proc = _blocked_batch(tmp_path, "a.jsonl", "b.jsonl", jobs=2)
    workers: list[int] = []
    try:
        workers = _wait_for(lambda: len(w := _workers(proc.pid)) == 2 and w, proc)
        time.sleep(0.5)  # each in its open() of the FIFO
        assert not any(map(_gone, workers))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while not all(map(_gone, workers)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(map(_gone, workers)), [w for w in workers if not _gone(w)]
    finally:
        for w in workers:  # the old code's: not to be left behind by the test
            if not _gone(w):
                os.kill(w, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_names_the_docs_show_are_the_rules():
    from acp_pipes.asr.output import file_name, session_names
    from acp_pipes.batch.places import output_stems

    doc = (Path(__file__).parents[1] / "docs" / "acp-batch.md").read_text()
    stems = output_stems(["Run", "run", "...", "2026/run-17"])
    for stem in stems.values():
        assert f"DEST/{stem}" in doc
    assert stems["2026/run-17"] == "2026/run-17"
    asr = " ".join((Path(__file__).parents[1] / "docs" / "acp-asr.md").read_text().split())
    names = session_names(["Sess", "SESS", "sess", "nul", "sess-1/a.b"])
    for sid, name in names.items():
        assert f"`{sid}` -> `{name}`" in asr
    assert file_name("sess-1/a.b") == names["sess-1/a.b"]


PARTS = ["run", "Run", "RUN", "run~a7fceeda275f", "Run~6c2f474297b1", "café",
         unicodedata.normalize("NFD", "café"), "CAFÉ", "x", "...", "..", ".", "con", "Nul.x",
         "manifest.jsonl", "Manifest.JSONL", ".acp-batch-tmp", "align.tsv", "ﬁle", "file",
         "run.", "run ", "K", "\u212a", "a" * 200]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(PARTS), min_size=1, max_size=3).map("/".join),
                min_size=1, max_size=10, unique=True))
def test_output_names_fold_apart_in_every_folder_and_plain_ones_are_kept(stems):
    from acp_pipes.batch.places import inside, output_stems
    from acp_pipes.io.filenames import is_device

    named = output_stems(stems)
    assert len(set(named.values())) == len(stems)
    folders: dict[str, dict[str, str]] = {}  # folder (as written) -> fold -> part
    for stem, out in named.items():
        assert inside(out), out  # in DEST, never one of its own files
        raw, got = stem.split("/"), out.split("/")
        assert len(raw) == len(got)
        for i, part in enumerate(got):
            seen = folders.setdefault("/".join(got[:i]), {})
            assert seen.setdefault(fold(part), part) == part, (stem, out)
            assert not part.startswith(".") or part == raw[i]  # marked: never hidden
            assert not is_device(part) and len(part.encode()) <= 255
    own = {fold(n) for n in ("manifest.jsonl", "align.tsv", ".acp-batch-tmp", ".acp-batch-lock")}
    by_folder: dict[str, dict[str, str]] = {}  # raw folder -> raw part -> its name
    for stem, out in named.items():
        raw, got = stem.split("/"), out.split("/")
        for i in range(len(raw)):
            by_folder.setdefault("/".join(raw[:i]), {})[raw[i]] = got[i]
    for folder, parts in by_folder.items():  # a part nothing else there folds like: kept
        for part, name in parts.items():
            clash = any(fold(q) == fold(part) or fold(n) == fold(part)
                        for q, n in parts.items() if q != part)
            if not clash and part.rstrip(". ") and not is_device(part) \
                    and (folder or fold(part) not in own):
                assert name == part, (folder, part, name)

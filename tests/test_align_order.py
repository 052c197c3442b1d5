"""acp-align compares what the protocol fixes, not how two pipes interleaved in the log.

The 1000-prompt pair: the echo agent recorded through the real acp-tee with the client
script piped in whole, so where the client's frames land among the agent's is up to the
scheduler; and the same sessions recorded turn by turn (lockstep), where it is not.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from acp_pipes.echo.client import client_session
from tests.conftest import record_lockstep, run_tool, tool_argv, tool_env

PROMPTS = 1000
MID = PROMPTS // 2


def record_piped(client: list[bytes], wire: Path) -> None:
    """The echo agent under acp-tee, the whole client script piped in at once."""
    script = wire.with_suffix(".client.jsonl")
    script.write_bytes(b"".join(line + b"\n" for line in client))
    with open(script, "rb") as stdin:
        p = subprocess.run(tool_argv("tee", "-o", str(wire), "--clock", "epoch", "--no-host",
                                     "--", *tool_argv("echo-agent")),
                           stdin=stdin, capture_output=True, env=tool_env(), timeout=120)
    assert p.returncode == 0, p.stderr


def changed_at(client: list[bytes], k: int) -> list[bytes]:
    out = [line.replace(f'"hello {k}"'.encode(), f'"bye {k}"'.encode()) for line in client]
    assert out != client
    return out


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("order")
    client = list(client_session(PROMPTS))
    runs = {}
    for name, script in (("a", client), ("a2", client), ("b", changed_at(client, MID))):
        runs[name] = tmp / f"piped-{name}.wire.jsonl"
        record_piped(script, runs[name])
    for name, script in (("la", client), ("lb", changed_at(client, MID))):
        runs[name] = tmp / f"lockstep-{name}.wire.jsonl"
        record_lockstep(script, runs[name])
    runs["tmp"] = tmp
    return runs


def summary(*args) -> tuple[int, dict]:
    p = run_tool("align", *map(str, args), "--format", "json")
    s = orjson.loads(p.stdout)
    assert p.returncode == (0 if s["equal"] else 1), p.stderr  # 0 the same, 1 they differ
    return p.returncode, s


def records(wire: Path) -> tuple[bytes, list[dict]]:
    """The header and the frame records (the end record left out: a log may lack it)."""
    head, *rest = wire.read_bytes().splitlines()
    return head, [r for r in map(orjson.loads, rest) if "dir" in r]


def write(path: Path, head: bytes, recs: list[dict]) -> Path:
    path.write_bytes(head + b"\n" + b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return path


def message(rec: dict) -> dict:
    return orjson.loads(rec["raw"])


def test_where_session_close_lands_is_no_difference(pair):
    """session/close moved among the agent's last frames (it is the client's, the
    agent's order is its own): the same session, exit 0."""
    head, recs = records(pair["a"])
    at = next(i for i, r in enumerate(recs) if message(r).get("method") == "session/close")
    close = recs.pop(at)
    last_prompt = max(i for i, r in enumerate(recs)
                      if message(r).get("method") == "session/prompt")
    moved = []
    for to in (last_prompt + 1, last_prompt + 5, len(recs) - 1):
        variant = recs[:to] + [close] + recs[to:]
        assert variant != recs[:at] + [close] + recs[at:] or to == at
        moved.append(write(pair["tmp"] / f"moved-{to}.wire.jsonl", head, variant))
    for path in moved:
        status, s = summary(pair["a"], path)
        assert status == 0, s
        assert s["counts"] == {"equal": len(recs) + 1, "changed": 0, "only-a": 0, "only-b": 0}
    # and two real piped recordings of one script are the same run
    status, s = summary(pair["a"], pair["a2"])
    assert status == 0 and s["distance"] == 0


def test_piped_pair_reports_what_changed_as_the_lockstep_pair_does(pair):
    """One prompt changed: the piped pair reports exactly what the turn-by-turn pair
    reports (the changed steps), nothing for where frames landed."""
    _, piped = summary(pair["a"], pair["b"])
    _, lockstep = summary(pair["la"], pair["lb"])
    assert piped["counts"] == lockstep["counts"]
    assert piped["counts"]["changed"] > 0
    assert piped["counts"]["only-a"] == piped["counts"]["only-b"] == 0
    first = piped["first_divergence"]
    assert first["op"] == "changed" and first["step_a"]["method"] == "session/prompt"
    assert first["diff"] == [{"op": "replace", "path": "/params/prompt/0/text",
                              "a": f"hello {MID}", "b": f"bye {MID}"}]
    paths = {d["path"] for c in piped["changed"] for d in c["diff"]}
    assert "/params/update/used" in paths  # the usage that follows differs too


def test_how_far_ahead_a_client_wrote_is_no_difference(pair):
    """The lockstep pair with every client prompt of A moved ahead of the agent's frames,
    as a client that pipes its whole script in may be logged: the agent's floating
    notifications (usage_update) stand after all of A's prompts and among B's, and are
    still the same notifications in the same turns. The comparison reports what the
    lockstep pair reports, and no note for where the prompts landed."""
    head, recs = records(pair["la"])
    prompts = [r for r in recs if r["dir"] == "c2a"
               and message(r).get("method") == "session/prompt"]
    first = recs.index(prompts[0])
    moved_ids = {id(r) for r in prompts}
    ahead = recs[:first] + prompts + [r for r in recs[first:] if id(r) not in moved_ids]
    assert len(ahead) == len(recs) and ahead != recs
    moved = write(pair["tmp"] / "ahead-la.wire.jsonl", head, ahead)
    _, lockstep = summary(pair["la"], pair["lb"])
    _, piped = summary(moved, pair["lb"])
    assert piped["counts"] == lockstep["counts"]
    assert not piped.get("notes")  # none for where the prompts landed


def test_a_script_written_ahead_is_the_session_sent_turn_by_turn(tmp_path):
    """A client that wrote its whole script at once, its permission answers and its
    session/close before the agent asked (piped), against the same script sent turn by
    turn: one client stream, read in the order written, so the same session (exit 0);
    the close is not moved ahead of the answer it was written after."""
    client = list(client_session(4, permission_every=2, elicit_every=3))
    piped, lockstep = tmp_path / "piped.wire.jsonl", tmp_path / "lockstep.wire.jsonl"
    record_piped(client, piped)
    record_lockstep(client, lockstep)
    _, recs = records(piped)
    asks = [i for i, r in enumerate(recs)
            if message(r).get("method") == "session/request_permission"]
    answers = [i for i, r in enumerate(recs) if r["dir"] == "c2a" and "result" in message(r)]
    assert asks and answers and answers[0] < asks[0]  # written ahead, as logged
    for a, b in ((piped, lockstep), (lockstep, piped)):
        status, s = summary(a, b)
        assert status == 0, s
        assert s["counts"]["only-a"] == s["counts"]["only-b"] == s["counts"]["changed"] == 0


def test_a_response_before_its_request_differs(tmp_path):
    """With --strict the order as logged counts: the client's answer to a permission
    request logged before the agent asked is not the same run."""
    wire = tmp_path / "perm.wire.jsonl"
    record_lockstep(list(client_session(3, permission_every=2)), wire)
    head, recs = records(wire)
    ask = next(i for i, r in enumerate(recs)
               if message(r).get("method") == "session/request_permission")
    answer = next(i for i, r in enumerate(recs)
                  if r["dir"] == "c2a" and "result" in message(r)
                  and message(r)["id"] == message(recs[ask])["id"])
    assert ask < answer
    early = recs[:ask] + [recs[answer]] + recs[ask:answer] + recs[answer + 1:]
    moved = write(tmp_path / "early.wire.jsonl", head, early)
    p = run_tool("align", "--strict", str(wire), str(moved), "--format", "diff")
    assert p.returncode == 1, p.stderr
    assert "(before its request)" in p.stdout.decode()
    # the same answer later among the agent's frames (still after the request): equal
    late = recs[:answer] + recs[answer + 1:answer + 3] + [recs[answer]] + recs[answer + 3:]
    assert summary(wire, write(tmp_path / "late.wire.jsonl", head, late), "--strict")[0] == 0


def test_sessions_interleave_freely_but_keep_their_own_order(tmp_path):
    """Two sessions on one connection: how their frames interleave is no difference;
    a session's own frames out of order is."""
    def prompt(sid: str, n: int) -> bytes:
        return orjson.dumps({"jsonrpc": "2.0", "id": f"{sid}-{n}", "method": "session/prompt",
                             "params": {"sessionId": sid,
                                        "prompt": [{"type": "text", "text": f"p{n}"}]}})

    s1 = [prompt("s1", n) for n in range(3)]
    s2 = [prompt("s2", n) for n in range(3)]
    one = tmp_path / "one.jsonl"
    two = tmp_path / "two.jsonl"
    bad = tmp_path / "bad.jsonl"
    one.write_bytes(b"\n".join([x for pair in zip(s1, s2, strict=True) for x in pair]) + b"\n")
    two.write_bytes(b"\n".join(s2 + s1) + b"\n")
    bad.write_bytes(b"\n".join(s2 + [s1[1], s1[0], s1[2]]) + b"\n")
    assert run_tool("align", str(one), str(two), "--dir", "c2a").returncode == 0
    status, s = summary(one, bad, "--dir", "c2a")
    assert status == 1 and s["counts"]["equal"] == 5


def test_ids_made_up_per_run_pair_sessions_in_order(tmp_path):
    """Runs of an agent that makes up session ids: with --strict and --ignore on the
    ids, sessions pair in the order they appear, so the runs are equal; by default the
    ids are a consistent renaming, equal with no flag."""
    def frames(sid: str) -> bytes:
        msgs = [{"jsonrpc": "2.0", "id": 1, "method": "session/prompt",
                 "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}},
                {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}]
        return b"".join(orjson.dumps(m) + b"\n" for m in msgs)

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(frames("x-1"))
    b.write_bytes(frames("y-9"))
    status, s = summary(a, b, "--dir", "c2a", "--strict")
    assert status == 1 and s["counts"]["changed"] == 2
    assert s["changed"][0]["diff"] == [{"op": "replace", "path": "/params/sessionId",
                                        "a": "x-1", "b": "y-9"}]
    assert summary(a, b, "--dir", "c2a", "--strict", "--ignore", "/params/sessionId")[0] == 0
    status, s = summary(a, b, "--dir", "c2a")
    assert status == 0 and s["renamed"] == [{"kind": "session", "a": "x-1", "b": "y-9"}]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))

"""Structure-aware fuzz of the fold and the ACP->ASR converter.

A real echo-agent session (every entity kind the agent makes: prompts, chunked messages,
tool calls, permissions, elicitations, a resume with replay) is recorded in memory; each
example replaces JSON values inside its frames by values of other JSON types (null,
numbers, huge integers, strings with lone surrogates, lists, objects) and folds and
converts the result. Valid JSON with wrong-typed fields is exactly what a recording of a
buggy agent holds: the only exceptions allowed are the documented refusals
(InputError, ProtocolVersionError), and everything produced must be writable JSONL.
"""

from __future__ import annotations

import io
import json
import random

import orjson
import pytest

from acp_pipes.asr.mapping import Converter
from acp_pipes.asr.output import Spool
from acp_pipes.echo.agent import EchoAgent
from acp_pipes.echo.client import client_session
from acp_pipes.errors import InputError
from acp_pipes.fold import ProtocolVersionError, fold_paths
from acp_pipes.io.lines import write_records

EXAMPLES = 200
SEED = 20261130
T0 = 1_764_000_000_000_000_000

#: Replacement values: every JSON type, and the values JSON allows but Python code
#: tends not to expect (64-bit overflow, a lone surrogate, deep and empty containers).
ODD_VALUES = [None, True, False, 0, -1, 1.5, 2**63, 2**70, -(2**70), 1e308, "", "x",
              "\ud800", "sess-1", "msg-user-1", "0", [], [None], ["a", 1], [[[]]], {},
              {"a": 1}, {"sessionId": []}, {"type": "text", "text": 5},
              [{"type": "text"}], {"": None}, [[[]]] * 3]


def _nested(depth: int) -> list:
    v: list = []
    for _ in range(depth):
        v = [v]
    return v


ODD_VALUES.append(_nested(300))  # deeper than orjson writes


def _session_wire() -> list[dict]:
    """Wire records of one echo-agent connection, built in process."""
    client = list(client_session(3, permission_every=2, elicit_every=3))
    client.insert(-1, orjson.dumps({
        "jsonrpc": "2.0", "id": 90, "method": "session/resume",
        "params": {"sessionId": "sess-1", "cwd": "/tmp/acp-echo",
                   "replayFrom": {"type": "start"}}}))
    agent = EchoAgent()
    recs: list[dict] = []
    for line in client:
        recs.append({"seq": len(recs), "t": T0 + len(recs), "dir": "c2a", "raw": line.decode()})
        for f in agent.feed(line):
            recs.append({"seq": len(recs), "t": T0 + len(recs), "dir": "a2c",
                         "raw": f.decode()})
    return recs


WIRE = _session_wire()
HEADER = {"format": "acp-pipes/wire", "version": 1, "recorder": "test", "argv": ["echo"],
          "started": "x", "clock": "nanos:0", "env": {}}


def _slots(value, path=()):
    """Every place in a JSON value a value can be put: (path to container, key)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield path, k
            yield from _slots(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield path, i
            yield from _slots(v, (*path, i))


def _mutate(rng: random.Random, msg):
    """Replace one value (or the whole message) by a value of another JSON type."""
    slots = list(_slots(msg))
    new = rng.choice(ODD_VALUES)
    if not slots or rng.random() < 0.03:
        return new
    path, key = rng.choice(slots)
    target = msg
    for p in path:
        target = target[p]
    target[key] = new
    return msg


def _mutated_log(rng: random.Random) -> tuple[bytes, list[str]]:
    recs = [dict(r) for r in WIRE]
    changes = []
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(recs))
        msg = _mutate(rng, json.loads(recs[i]["raw"]))
        # stdlib json writes what orjson cannot: integers beyond 64 bits, lone surrogates
        recs[i]["raw"] = json.dumps(msg, separators=(",", ":"))
        changes.append(f"seq {i}: {recs[i]['raw']}")
    lines = [json.dumps(HEADER)] + [json.dumps(r) for r in recs]
    return "".join(x + "\n" for x in lines).encode(), changes


def fold_and_convert(path: str) -> tuple[bytes, bytes, list[str]]:
    """What acp-fold and acp-asr do with ``path``, in process: both outputs, warnings."""
    warnings: list[str] = []

    def warn(source, line, msg):
        warnings.append(f"{source}:{line}: {msg}")

    folded = io.BytesIO()
    write_records(fold_paths([path], warn=warn), folded)
    conv = Converter(store=Spool())
    for rec in fold_paths([path], warn=warn):
        conv.feed(rec)
    conv.close()
    converted = io.BytesIO()
    conv.store.write_to(converted, conv.headers())
    return folded.getvalue(), converted.getvalue(), warnings


def test_unmutated_session_folds_and_converts(tmp_path):
    """The fuzz base is a real session: it folds and converts without a warning."""
    path = tmp_path / "wire.jsonl"
    path.write_bytes(b"".join(x + b"\n" for x in map(orjson.dumps, [HEADER, *WIRE])))
    folded, converted, warnings = fold_and_convert(str(path))
    assert warnings == []
    kinds = {r.get("entity") for r in map(orjson.loads, folded.splitlines())}
    assert {"user_message", "agent_message", "tool_call", "permission",
            "elicitation"} <= kinds
    assert converted.count(b'"type":"header"') == 1


@pytest.mark.parametrize("batch", range(4))
def test_mutated_frames_raise_only_input_errors(tmp_path, batch):
    """Wrong-typed values anywhere in any frame: the fold and the converter either
    produce writable JSONL or refuse with a documented error, never another exception."""
    rng = random.Random(SEED + batch)
    path = tmp_path / "wire.jsonl"
    for n in range(EXAMPLES // 4):
        data, changes = _mutated_log(rng)
        path.write_bytes(data)
        try:
            fold_and_convert(str(path))
        except (InputError, ProtocolVersionError):
            pass
        except Exception as e:  # noqa: BLE001 - the point of the test
            raise AssertionError(f"example {batch}/{n}: {type(e).__name__}: {e}\n"
                                 + "\n".join(changes)) from e

"""Structure-aware fuzz of the ACP v1 lift, as tests/test_fold_fuzz.py does for v2.

The bases are the v1 conformance recordings (every shape the lift handles: derived
message IDs, turns ended by the prompt response, tool calls and diffs, permissions with
their tool call, plans, session/load, client terminals). Each example replaces one to
three JSON values inside their frames by values of other JSON types; fold and convert
must produce writable JSONL or refuse with a documented error, never another exception.
"""

from __future__ import annotations

import json
import random

import orjson
import pytest

from acp_pipes.errors import InputError
from acp_pipes.fold import ProtocolVersionError
from tests.test_fold_fuzz import _mutate, fold_and_convert
from tests.test_v1 import V1_CASES

EXAMPLES = 160
SEED = 20261201


def _logs() -> list[list[dict]]:
    """Each v1 recording as its lines (headers and frame records)."""
    return [[orjson.loads(x) for x in (case / "wire.jsonl").read_bytes().splitlines()]
            for case in V1_CASES]


LOGS = _logs()


@pytest.mark.parametrize("batch", range(4))
def test_mutated_v1_frames_raise_only_input_errors(tmp_path, batch):
    rng = random.Random(SEED + batch)
    path = tmp_path / "wire.jsonl"
    for n in range(EXAMPLES // 4):
        recs = [dict(r) for r in rng.choice(LOGS)]
        frames = [i for i, r in enumerate(recs) if "raw" in r and i > 2]  # past initialize
        changes = []
        for _ in range(rng.randint(1, 3)):
            i = rng.choice(frames)
            msg = _mutate(rng, json.loads(recs[i]["raw"]))
            # stdlib json writes what orjson cannot: integers beyond 64 bits, surrogates
            recs[i]["raw"] = json.dumps(msg, separators=(",", ":"))
            changes.append(f"line {i}: {recs[i]['raw']}")
        path.write_bytes("".join(json.dumps(r) + "\n" for r in recs).encode())
        try:
            folded, converted, _ = fold_and_convert(str(path))
        except (InputError, ProtocolVersionError):
            continue
        except Exception as e:  # noqa: BLE001 - the point of the test
            raise AssertionError(f"example {batch}/{n}: {type(e).__name__}: {e}\n"
                                 + "\n".join(changes)) from e
        for line in (folded + converted).splitlines():
            orjson.loads(line)  # every line written is JSON

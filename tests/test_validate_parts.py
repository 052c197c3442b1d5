"""A large failing value is explained part by part (acp_pipes.frame.validate.schema.Schema.findings):
what it reports is what the validator's whole error list says, and the work is bounded by
what is reported.

The validator (jsonschema_rs) builds a value's whole error list at once, ~0.3 ms an error
(a union's error holds every branch's): a prompt of 20,000 bad blocks took seconds and a
gigabyte to report 20. Nothing here is timed: the work is measured by the Python objects
built (tracemalloc's peak) and by a real acp-frame's peak memory.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tracemalloc

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import acp_pipes.frame.validate.schema as schema_mod
from acp_pipes.frame.validate.schema import REVISIONS, schema
from tests.conftest import tool_argv, tool_env
from tests.test_validate import m, records, v2
from tests.test_validate_schema import mutated

V2 = REVISIONS[2]


@contextlib.contextmanager
def whole_below(n: int):
    """Values above ``n`` JSON values explained part by part (0: every value)."""
    was = schema_mod._WHOLE
    schema_mod._WHOLE = n
    try:
        yield
    finally:
        schema_mod._WHOLE = was


def key(f) -> tuple:
    return (f.pointer, f.message, f.location, f.words, f.reserved)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(), mutated(), st.booleans())
def test_part_by_part_reports_what_the_whole_error_list_says(case, other, twice):
    # every value explained part by part (_WHOLE 0) against the whole error list
    revision, name, value = case
    if twice and other[:2] == case[:2] and isinstance(value, dict) \
            and isinstance(other[2], dict):
        value = {**other[2], **value}  # two edits
    s = schema(revision, True)
    closed = s.is_valid(name, value)
    if closed and s.is_valid(name, value, closed=True):
        return
    with whole_below(10**9):
        whole, total = s.findings(name, value, "/params", closed=closed, limit=10**6)
    with whole_below(0):
        parts, counted = s.findings(name, value, "/params", closed=closed, limit=10**6)
    # the same findings, in another order (own keywords, then parts in the value's order)
    assert sorted(map(key, parts)) == sorted(map(key, whole)), (name, value)
    assert counted == total == len(whole)


def bad_prompt(blocks: int) -> dict:
    return {"sessionId": "sess-1", "prompt": [{"type": "text"} for _ in range(blocks)]}


def v1_tool_call(items: int) -> dict:
    """A v1 tool call whose content items each lack their text (v1's SessionUpdate and
    ContentBlock are oneOf unions)."""
    return {"sessionId": "s", "update": {
        "sessionUpdate": "tool_call", "toolCallId": "t", "title": "x",
        "content": [{"type": "content", "content": {"type": "text"}}] * items}}


@pytest.mark.parametrize("revision,name,value,pointer", [
    (V2, "PromptRequest", bad_prompt, "/params/prompt/{}"),
    (REVISIONS[1], "SessionNotification", v1_tool_call, "/params/update/content/{}/content"),
])
def test_twenty_reported_of_twenty_thousand_errors_and_the_rest_not_built(
        revision, name, value, pointer):
    s = schema(revision, True)
    s.findings(name, value(300))  # compile the parts' validators
    peaks = []
    for n in (2_000, 20_000):
        v = value(n)
        tracemalloc.start()
        found, total = s.findings(name, v, "/params")
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert [f.pointer for f in found] == [pointer.format(i) for i in range(20)]
        assert total is None
    # the whole error list of 2,000 errors is ~20 MB of Python objects; twenty findings
    # and a walk over the value are a few hundred KB, the same for ten times the errors
    assert peaks[1] < 2 * 1024 * 1024, peaks
    assert peaks[1] < 2 * peaks[0] + 256 * 1024, peaks


def test_a_union_part_is_explained_by_the_branch_meant():
    # a chunk's content (a ContentBlock, a union) too large to explain at once: the
    # branch meant is the text one, and its bad field is found there
    s = schema(V2, True)
    update = {"sessionId": "sess-1", "update": {
        "sessionUpdate": "agent_message_chunk", "messageId": "a1",
        "content": {"type": "text", "text": 5, "annotations": {"audience": ["user"] * 500}}}}
    with whole_below(10**9):
        whole, _ = s.findings("UpdateSessionNotification", update, "/params")
    found, total = s.findings("UpdateSessionNotification", update, "/params")
    assert [key(f) for f in found] == [key(f) for f in whole]
    assert [f.pointer for f in found] == ["/params/update/content/text"]
    assert total == 1


def test_acp_frame_validate_memory_grows_with_the_input_not_with_its_errors(tmp_path):
    # a real acp-frame --validate: twenty frames of 20,000 bad blocks (~0.7 MB each); the
    # errors of one such frame took 1.2 GB before they were explained part by part
    convo = v2()
    bad = [("c2a", m(id=100 + i, method="session/prompt", params=bad_prompt(20_000)))
           for i in range(20)]
    lines = [orjson.dumps(r) for r in records(convo[:4] + bad)]
    log = tmp_path / "bad.jsonl"
    log.write_bytes(b"\n".join(lines) + b"\n")
    out_file = tmp_path / "out.jsonl"
    # a fresh process runs acp-frame, so the peak is acp-frame's alone
    probe = subprocess.run([sys.executable, "-c", PROBE, str(out_file),
                            *tool_argv("frame", "--validate", str(log))],
                           capture_output=True, env=tool_env(), check=True)
    code, peak = map(int, probe.stdout.split())  # peak in KiB
    assert code == 1, probe.stderr
    out = [orjson.loads(x) for x in out_file.read_bytes().splitlines()]
    found = [v for v in out if v.get("rule") == "schema"]
    assert len(found) == 20 * 20
    assert found[19]["message"].endswith("(and more in this frame, not counted)")
    size = log.stat().st_size // 1024
    # start-up and the compiled schemas are ~100 MB; the frames are read one at a time
    assert peak < 200 * 1024 + 4 * size, (peak, size)


#: Runs argv[2:] with stdout to argv[1]; prints its exit status and peak RSS (KiB).
PROBE = """\
import resource, subprocess, sys
with open(sys.argv[1], "wb") as out:
    code = subprocess.run(sys.argv[2:], stdout=out).returncode
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""

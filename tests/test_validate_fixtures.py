"""acp-frame --validate over recordings kept as fixtures, one at least per rule beyond
the schema that real agents break: ``tests/fixtures/validate/<rule>-<what>.wire.jsonl``,
its violations (rule, seq, pointer, message) in ``<same>.expected.jsonl``.

``unannounced-tool-call-fast-agent`` is a real recording (fast-agent 0.x, ACP v1, driven
as tests/test_fast_agent.py drives it): it asks permission for its ``execute`` tool under
the tool call id ``"pending"``, which it never announced. The others are hand-made from
the conversations of tests/test_validate.py, each broken in one place.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.conftest import run_tool

HERE = Path(__file__).parent / "fixtures" / "validate"
FIXTURES = sorted(HERE.glob("*.wire.jsonl"))
NEW_RULES = ("cancel-stop-reason", "relative-path", "unannounced-tool-call",
             "tool-call-id-reused", "unknown-session", "request-id")


@pytest.mark.parametrize("wire", FIXTURES, ids=lambda p: p.name.removesuffix(".wire.jsonl"))
def test_fixture_reports_what_it_is_named_for(wire):
    expected = [orjson.loads(x) for x in wire.with_name(
        wire.name.replace(".wire.jsonl", ".expected.jsonl")).read_bytes().splitlines()]
    r = run_tool("frame", "--validate", str(wire))
    out = [orjson.loads(x) for x in r.stdout.splitlines()]
    got = [{k: v[k] for k in ("rule", "seq", "pointer", "message")} for v in out
           if v["type"] == "violation"]
    assert got == expected
    assert any(v["rule"] == wire.name.split("-")[0] or
               wire.name.startswith(v["rule"]) for v in got)
    summary = out[-1]
    errors = [v for v in out if v["type"] == "violation" and "level" not in v]
    assert r.returncode == (1 if errors else 0), r.stderr
    assert summary["violations"] == len(errors)


def test_every_new_rule_has_a_fixture():
    names = [p.name for p in FIXTURES]
    assert [rule for rule in NEW_RULES if not any(n.startswith(rule + "-") for n in names)
            ] == []

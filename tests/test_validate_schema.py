"""The schema side of --validate, proven rather than assumed.

- The compiled validator (jsonschema_rs) and the reference one (the jsonschema package)
  agree on every definition a method uses, over real frames and mutations of them.
- The closed copy (``other`` variants take ``_`` extension values only) is stricter than
  the official schema and nothing else: valid under it means valid under the official
  file; where they disagree the findings name a reserved value.
- The capability table agrees with the schema's own words.
"""

from __future__ import annotations

import functools
import re

import jsonschema
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from acp_pipes.frame.validate.rules import GATES, capability_source
from acp_pipes.frame.validate.schema import REVISIONS, schema
from tests.test_frame import echo_wire
from tests.test_validate import v1, v2

SIDES = {"c2a": "agent", "a2c": "client"}


@functools.cache
def reference(revision: str, unstable: bool, name: str) -> jsonschema.Draft202012Validator:
    root = schema(revision, unstable).root
    return jsonschema.Draft202012Validator({"$defs": root["$defs"], "$ref": f"#/$defs/{name}"})


def samples() -> list[tuple[str, str, object]]:
    """(revision, $defs name, value) of every params/result of real conversations: the
    echo agent's (v2, with permissions, elicitations) and the hand-written ones."""
    out = []
    convos = [(REVISIONS[2], [(d, orjson.loads(raw)) for d, raw in
                              echo_wire(3, permission_every=2, elicit_every=3)]),
              (REVISIONS[2], v2()), (REVISIONS[1], v1())]
    for revision, convo in convos:
        s = schema(revision, True)
        asked: dict = {}
        for d, msg in convo:
            if "method" in msg:
                kind = "Request" if "id" in msg else "Notification"
                name = s.definition(msg["method"], SIDES[d], kind)
                if "id" in msg:
                    asked[(d, msg["id"])] = msg["method"]
                out.append((revision, name, msg.get("params")))
            elif "result" in msg:
                other = "a2c" if d == "c2a" else "c2a"
                method = asked[(other, msg["id"])]
                out.append((revision, s.definition(method, SIDES[other], "Response"),
                            msg["result"]))
    return [x for x in out if x[1] is not None]


SAMPLES = samples()

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 70000) | st.floats(allow_nan=False,
                                                                   allow_infinity=False)
    | st.sampled_from(["", "text", "image", "end_turn", "_x", "agent_message_chunk", "idle"]),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["type", "text", "sessionId", "content", "x"]), inner,
                      max_size=3),
    max_leaves=6)


def paths(value, here=()):
    yield here
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, (*here, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths(v, (*here, i))


@st.composite
def mutated(draw):
    """A real params/result with one edit: a value replaced, a key dropped or added."""
    revision, name, value = draw(st.sampled_from(SAMPLES))
    value = orjson.loads(orjson.dumps(value))  # a copy
    where = draw(st.sampled_from(list(paths(value))))
    how = draw(st.sampled_from(["replace", "drop", "add", "keep"]))
    if how == "keep":
        return revision, name, value
    if not where:
        return revision, name, draw(json_values) if how == "replace" else value
    parent = value
    for p in where[:-1]:
        parent = parent[p]
    last = where[-1]
    if how == "replace":
        parent[last] = draw(json_values)
    elif how == "drop" and isinstance(parent, dict):
        del parent[last]
    elif how == "add" and isinstance(parent, dict):
        parent[draw(st.sampled_from(["extra", "_meta", "type", "status"]))] = draw(json_values)
    return revision, name, value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(), st.booleans())
def test_compiled_and_reference_validators_agree(case, unstable):
    revision, name, value = case
    s = schema(revision, unstable)
    if name not in s.defs:
        return  # an unstable-only method, drawn for the stable file
    assert s.is_valid(name, value) == reference(revision, unstable, name).is_valid(value), (
        name, value)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
# a string union (PlanEntryPriority): "" misses the named values by value, so the
# "other" branch is the one meant, and the reserved value is found there
@example((REVISIONS[2], "UpdateSessionNotification", {"sessionId": "s", "update": {
    "sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p", "entries": [
        {"content": "c", "priority": "", "status": "pending"}]}}}))
# a path the schema's words call absolute, that is not
@example((REVISIONS[2], "NewSessionRequest", {"cwd": "", "mcpServers": []}))
def test_the_closed_copy_only_refuses_reserved_values_and_relative_paths(case):
    revision, name, value = case
    s = schema(revision, True)
    closed, official = s.is_valid(name, value, closed=True), s.is_valid(name, value)
    if closed:
        assert official
    elif official:
        findings, total = s.findings(name, value, closed=True)
        assert total >= 1
        for f in findings:  # the pointer leads to the string the closed copy refused
            assert f.rule in ("reserved-value", "relative-path"), f
            node = value
            for part in f.pointer.split("/")[1:]:
                node = node[int(part) if isinstance(node, list) else part]
            assert isinstance(node, str)
            if f.rule == "reserved-value":
                assert not node.startswith("_")
            else:  # not /home/..., C:\\Users\\... nor \\\\server\\share
                assert not re.match(r"(?:/|[A-Za-z]:[\\/]|\\\\)", node)
    else:
        findings, total = s.findings(name, value)
        assert findings and total >= len(findings)


def test_every_real_sample_is_valid():
    for revision, name, value in SAMPLES:
        assert schema(revision, True).is_valid(name, value, closed=True), (name, value)


@pytest.mark.parametrize("version,feature,holder,path", [
    (v, feature, holder, path) for v, table in GATES.items()
    for feature, rows in table.items() for holder, path in rows])
def test_each_capability_row_is_what_the_schema_says(version, feature, holder, path):
    location, words = capability_source(version, holder, path, feature)
    assert location.endswith("/properties/" + path[-1]), location
    # the capability's description, or the gated method's, names the other
    s = schema(REVISIONS[version], True)
    prop = s.root
    for part in location.removeprefix("#/").split("/"):
        prop = prop[part]
    text = prop["description"]
    kind, _, name = feature.partition("/")
    if not s.sides(feature):  # content, a transport, a mode, an update, a parameter
        key = {"resource": "embedded"}.get(name, name).split("_")[0]
        assert key.lower() in text.lower(), (feature, text)
        return
    mentions = (f"`{feature}`" in text or f"`{kind}/*`" in text
                or f"the {feature} method" in text or path[-1] == "authMethods")
    for (method, _side), defs in s.methods.items():
        if method == feature:
            for def_name in defs.values():
                mentions |= ".".join(path[1:]) in s.defs[def_name].get("description", "")
    assert mentions, (feature, path, text)

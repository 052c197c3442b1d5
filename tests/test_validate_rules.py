"""The rules --validate adds beyond the schema, held to the schema's own words: each
quoted sentence is in the file it is quoted from, and the paths held absolute are those
the descriptions call absolute, no more and no fewer."""

from __future__ import annotations

import re

import pytest

from acp_pipes.frame.validate.closed import absolute_paths
from acp_pipes.frame.validate.rules import CANCELLED_WORDS, TOOL_CALL_WORDS, schema_words
from acp_pipes.frame.validate.schema import NEWEST_V2, _capability_paths, schema
from acp_pipes.schemas import ACP_REVISIONS, ACP_V1, ACP_V2


@pytest.mark.parametrize("table", [CANCELLED_WORDS, TOOL_CALL_WORDS])
def test_quoted_words_are_the_schemas(table):
    for revision, (_, words) in table.items():
        file, location, para = schema_words(revision, table)
        assert file == f"{revision}/schema.unstable.json" and location.startswith("#/$defs/")
        assert words in para, (revision, para)
    assert "MUST" in CANCELLED_WORDS[ACP_V1][1] and "MUST" in CANCELLED_WORDS[ACP_V2][1]


@pytest.mark.parametrize("revision", ACP_REVISIONS)
def test_absolute_paths_are_what_the_descriptions_call_absolute(revision):
    defs = schema(revision, True).defs
    held = set(absolute_paths(defs))
    said = set()
    for name, d in defs.items():
        for key, prop in (d.get("properties") or {}).items():
            if re.search("absolute", prop.get("description") or "", re.I):
                said.add((name, key))
    # every property whose words say absolute is held, itself or through AbsolutePath
    for name, key in said:
        prop = defs[name]["properties"][key]
        assert (name, "properties", key) in held or (
            name, "properties", key, "items") in held or "#/$defs/AbsolutePath" in str(
            prop), (name, key)
    # and nothing else is
    assert {w[:3] for w in held if w != ("AbsolutePath",)} <= {
        (n, "properties", k) for n, k in said}
    if revision == ACP_V1:
        assert {("NewSessionRequest", "properties", "cwd"),
                ("ReadTextFileRequest", "properties", "path"),
                ("NewSessionRequest", "properties", "additionalDirectories", "items"),
                ("CreateTerminalRequest", "properties", "cwd")} <= held
        assert ("AbsolutePath",) not in held
    else:
        assert ("AbsolutePath",) in held


def test_the_newer_v2_capabilities_are_only_in_the_newer_schema():
    new = _capability_paths(NEWEST_V2, "agent") - _capability_paths(ACP_V2, "agent")
    assert ("capabilities", "session", "title") in new
    assert ("capabilities", "session") not in new

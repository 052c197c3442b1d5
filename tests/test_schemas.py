"""The ACP schemas acp-pipes bundles: each revision whole with its licence, named in
``--help``, picked by the protocol version a recording negotiated, and another picked
with ``--schema`` wherever frames are validated (acp-frame, acp-batch validate,
acp-view)."""

from __future__ import annotations

import json

import orjson

from acp_pipes.schemas import ACP_REVISIONS, BUNDLED, acp_schema
from tests.conftest import REPO, run_tool

ACP = REPO / "acp_pipes" / "schemas" / "acp"
#: alpha.9 takes a null request id, the SDK 2.4.0 draft refuses it; the recording's
#: initialize advertises a capability only 2.4.0 defines, so that is its default
NULL_ID = REPO / "tests" / "fixtures" / "validate" / "request-id-null-sdk-2.4.0.wire.jsonl"


def test_every_bundled_revision_is_whole_and_licensed():
    assert set(BUNDLED) == set(ACP_REVISIONS)
    readme = (ACP / "README.md").read_text()
    assert "Apache" in (ACP / "LICENSE").read_text()
    for rev in ACP_REVISIONS:
        for name in ("schema.json", "schema.unstable.json"):
            data = json.loads((ACP / rev / name).read_text())
            assert data["title"] == "Agent Client Protocol" and data["$defs"], (rev, name)
        assert acp_schema(rev)["$defs"]
        assert f"`{rev}/`" in readme, rev


def test_help_names_every_bundled_revision():
    out = run_tool("frame", "--help").stdout.decode()
    for rev, what in BUNDLED.items():
        assert f"  {rev}" in out and what in out, rev
    for tool in (("batch", "validate"), ("view",)):
        out = run_tool(*tool, "--help").stdout.decode().replace("\n", " ")
        assert "--schema REVISION" in out
        for rev in ACP_REVISIONS:
            assert rev in out, (tool, rev)


def _rules(stdout: bytes) -> dict:
    return [orjson.loads(x) for x in stdout.splitlines()][-1]["rules"]


def test_schema_picks_another_revision_in_acp_frame():
    assert _rules(run_tool("frame", "--validate", str(NULL_ID)).stdout) == {"request-id": 2}
    got = run_tool("frame", "--validate", "--schema", "v2.0.0-alpha.9", str(NULL_ID))
    assert got.returncode == 0 and _rules(got.stdout) == {}


def test_schema_picks_another_revision_in_acp_batch(tmp_path):
    for schema, want in ((None, {"request-id": 2}), ("v2.0.0-alpha.9", {})):
        dest = tmp_path / (schema or "default")
        args = ["batch", "validate", str(NULL_ID), "-o", str(dest)]
        got = run_tool(*args, *(["--schema", schema] if schema else []))
        assert got.returncode == (1 if want else 0), got.stderr.decode()
        (report,) = dest.glob("*.validate.jsonl")
        assert _rules(report.read_bytes()) == want
        direct = run_tool("frame", "--validate", *(["--schema", schema] if schema else []),
                          str(NULL_ID)).stdout
        assert [orjson.loads(x) for x in report.read_bytes().splitlines()][:-1] == [
            orjson.loads(x) for x in direct.splitlines()][:-1]


def test_schema_picks_another_revision_in_acp_view(tmp_path):
    pages = {}
    for schema in (None, "v2.0.0-alpha.9"):
        page = tmp_path / f"{schema}.html"
        got = run_tool("view", str(NULL_ID), "-o", str(page),
                       *(["--schema", schema] if schema else []))
        assert got.returncode == 0, got.stderr.decode()
        pages[schema] = page.read_text()
    said = "not a request id of ACP v2-sdk-2.4.0"  # the violation, on its row
    assert said in pages[None] and said not in pages["v2.0.0-alpha.9"]
    got = run_tool("view", "--no-validate", "--schema", "v1", str(NULL_ID), "-o",
                   str(tmp_path / "x.html"))
    assert got.returncode == 2 and b"--schema" in got.stderr

"""Library code checks with ``if``, never with ``assert``: ``python -O`` drops an assert,
and since the package's pytest plugin (entry point ``pytest11``) makes pytest rewrite
the asserts of every module of its distribution, a wheel-installed acp-pipes would run
pytest's rewritten asserts inside any user's test session. Doctests (docstrings) are no
statements and are not counted."""

from __future__ import annotations

import ast

from tests.conftest import REPO


def test_the_library_holds_no_assert_statement():
    found = []
    for path in sorted((REPO / "acp_pipes").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        found += [f"{path.relative_to(REPO)}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Assert)]
    assert found == []

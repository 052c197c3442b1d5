"""The LCS behind acp-align against an independent quadratic DP, on random inputs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_pipes.align.myers import align, opcodes


def dp_lcs(a: list[int], b: list[int]) -> int:
    """Textbook O(NM) LCS length."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def check_script(a: list[int], b: list[int], al) -> None:
    """The edit script is valid: it rebuilds B from A, equal ops pair equal steps, and
    indices strictly increase on both sides."""
    out: list[int] = []
    last_a = last_b = -1
    ia = ib = 0
    for tag, a0, a1, b0, b1 in opcodes(al):
        assert a0 == ia and b0 == ib  # no step skipped or repeated
        if tag == "equal":
            assert a[a0:a1] == b[b0:b1]
            assert a1 - a0 == b1 - b0 > 0
            out.extend(a[a0:a1])
        elif tag == "only-a":
            assert b0 == b1 and a1 > a0
        else:
            assert a0 == a1 and b1 > b0
            out.extend(b[b0:b1])
        for i in range(a0, a1):
            assert i > last_a
            last_a = i
        for j in range(b0, b1):
            assert j > last_b
            last_b = j
        ia, ib = a1, b1
    assert (ia, ib) == (len(a), len(b))
    assert out == b


small = st.lists(st.integers(0, 4), max_size=40)


@settings(max_examples=300, deadline=None)
@given(small, small)
def test_lcs_length_matches_dp(a, b):
    al = align(a, b)
    assert al.lcs == dp_lcs(a, b)
    assert al.distance == len(a) + len(b) - 2 * al.lcs
    assert not al.approximate
    check_script(a, b, al)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 30), max_size=60), st.data())
def test_edited_copies(a, data):
    """B is A with scattered edits (insert, delete, replace): the common real case."""
    b = list(a)
    for _ in range(data.draw(st.integers(0, 8))):
        op = data.draw(st.sampled_from(["ins", "del", "rep"]))
        if op == "ins" or not b:
            b.insert(data.draw(st.integers(0, len(b))), data.draw(st.integers(0, 40)))
        elif op == "del":
            del b[data.draw(st.integers(0, len(b) - 1))]
        else:
            b[data.draw(st.integers(0, len(b) - 1))] = data.draw(st.integers(0, 40))
    al = align(a, b)
    assert al.lcs == dp_lcs(a, b)
    check_script(a, b, al)


@settings(max_examples=200, deadline=None)
@given(small, small, st.integers(1, 3))
def test_max_cost_still_valid(a, b, bound):
    """Past --max-cost the script may be longer than minimal, never invalid."""
    al = align(a, b, bound)
    check_script(a, b, al)
    assert al.lcs <= dp_lcs(a, b)
    if not al.approximate:
        assert al.lcs == dp_lcs(a, b)


def test_max_cost_marks_approximate():
    a = list(range(40))
    al = align(a, a[::-1], max_cost=2)
    assert al.approximate
    check_script(a, a[::-1], al)
    assert not align(a, a[::-1]).approximate


def test_long_runs_gallop_exactly():
    """Long shared runs (followed by galloping memcmp) around a few edits."""
    a = list(range(5000)) * 2
    b = a[:1234] + [99999] + a[1234:7000] + a[7001:]
    al = align(a, b)
    assert al.lcs == len(a) - 1
    check_script(a, b, al)

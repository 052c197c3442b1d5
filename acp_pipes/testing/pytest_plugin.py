"""The pytest plugin (entry point ``pytest11``): ACP sessions as cassettes, as VCR.py and
pytest-recording keep HTTP exchanges. The work is :mod:`acp_pipes.testing.cassette`'s; this
module only reads the marker and the option and turns what went wrong into a failure.

- ``acp_agent(argv)`` (for clients): the command a client under test launches as its
  agent; it records the real agent through acp-tee, or plays the test's cassette with
  acp-replay, so the suite runs without the agent. A client that sends what the cassette
  does not hold fails the test itself with the difference (:class:`Divergence`, raised
  in the test's call as its failure, whatever the client did after), not an error at
  teardown.
- ``acp_client_replay(trace, argv)`` (for agents): re-drives the agent ``argv`` from a
  cassette with ``acp-replay --client`` (the model of the same session) and fails the
  test with the first difference.
- ``@pytest.mark.acp_cassette(path=None, ...)`` and ``--acp-record-mode once|none|all``.

Manual: docs/pytest.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from acp_pipes.testing.cassette import (
    EXIT_WAIT,
    RECORD_MODES,
    CassetteError,
    ClientReplay,
    Divergence,
    Playback,
    Recording,
    client_replay,
    default_path,
    plan,
)

MARKER = "acp_cassette"
_REPORTS = pytest.StashKey[dict]()
_EXIT_WAIT = pytest.StashKey[float]()
_PLAYING = pytest.StashKey[list]()  # the test's cassettes played as its agent


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("acp-pipes", "ACP cassettes (acp-pipes)")
    group.addoption(
        "--acp-record-mode", choices=RECORD_MODES, default=None,
        help="once: play a test's cassette, record it when missing (default); none: play "
        "only, a missing cassette fails; all: record every cassette again")
    parser.addini("acp_record_mode", "default --acp-record-mode", default="once")
    parser.addini("acp_exit_wait", "seconds acp_agent waits, after a test, for the "
                  f"agent it launched to exit (default {EXIT_WAIT:g})", default=str(EXIT_WAIT))


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_EXIT_WAIT] = _exit_wait(config)  # a bad value stops the run at once
    config.addinivalue_line(
        "markers",
        f"{MARKER}(path=None, *, record_mode=None, ignore=(), tee_args=None, "
        "replay_args=()): the test's ACP cassette (default cassettes/<module>/<test>"
        ".wire.jsonl beside the test file) and how acp_agent records and plays it")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A cassette that diverged fails the test's own call with the difference: acp-replay
    ends at the difference, so by the time the client has noticed (and failed, or not),
    its report is there. What the test raised after is the difference's consequence (a
    client whose agent went away), said after it."""
    try:
        result = yield
    except BaseException as e:
        problems = _stopped(item, item.config.stash[_EXIT_WAIT])
        if problems:
            then = f"{type(e).__name__}: {e}".strip().splitlines()[0][:300]
            raise Divergence("\n\n".join(problems)
                             + f"\n\n(the test then failed with {then})") from None
        raise
    problems = _stopped(item, 0.0)
    if problems:
        raise Divergence("\n\n".join(problems))
    return result


def _stopped(item: pytest.Item, wait: float) -> list[str]:
    """What the test's cassettes played as its agent reported once they ended (``wait``:
    for one still playing, when the test failed: it may have failed because it ended)."""
    problems: list[str] = []
    for play in item.stash.get(_PLAYING, []):
        problems += play.stopped(wait)
    return problems


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Keep each phase's report, so a fixture's teardown knows whether the test passed;
    a :class:`Divergence` is shown as its message alone (the difference, not the
    plugin's traceback)."""
    report = yield
    if call.excinfo is not None and isinstance(call.excinfo.value, Divergence):
        report.longrepr = str(call.excinfo.value)
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    return report


def _marker(request: pytest.FixtureRequest) -> dict:
    mark = request.node.get_closest_marker(MARKER)
    if mark is None:
        return {}
    kw = dict(mark.kwargs)
    if mark.args:
        if len(mark.args) > 1 or "path" in kw:
            raise pytest.UsageError(f"{request.node.nodeid}: {MARKER} takes one path")
        kw["path"] = mark.args[0]
    unknown = set(kw) - {"path", "record_mode", "ignore", "tee_args", "replay_args"}
    if unknown:
        raise pytest.UsageError(f"{request.node.nodeid}: {MARKER}: unknown "
                                f"{', '.join(sorted(unknown))}")
    return kw


def _beside(request: pytest.FixtureRequest, path: str | Path | None) -> Path:
    """``path`` resolved against the test file's directory; None: the default cassette."""
    test_file = Path(request.node.path)
    if path is None:
        return default_path(test_file, request.node.nodeid.split("::", 1)[-1])
    return test_file.parent / Path(path)


def _exit_wait(config: pytest.Config) -> float:
    text = config.getini("acp_exit_wait")
    try:
        wait = float(text)
    except ValueError:
        wait = -1.0
    if not wait >= 0:  # also NaN
        raise pytest.UsageError(f"acp_exit_wait: {text!r} is not a number of seconds")
    return wait


def _passed(request: pytest.FixtureRequest) -> bool:
    reports = request.node.stash.get(_REPORTS, {})
    return all(reports[w].passed for w in ("setup", "call") if w in reports) \
        and "call" in reports


@pytest.fixture
def acp_agent(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[Callable[[Sequence[str]], list[str]]]:
    """``acp_agent(argv)``: the command the client under test launches in place of the
    agent ``argv``: recording it through acp-tee, or playing the test's cassette."""
    kw = _marker(request)
    mode = (kw.get("record_mode") or request.config.getoption("acp_record_mode")
            or request.config.getini("acp_record_mode"))
    cassette = _beside(request, kw.get("path"))
    ignore = [a for p in kw.get("ignore", ()) for a in ("--ignore", p)]
    used: list[Recording | Playback] = []

    def agent(argv: Sequence[str]) -> list[str]:
        if used:
            pytest.fail(f"acp_agent was called twice: a cassette ({cassette}) holds one "
                        "agent session", pytrace=False)
        try:
            what = plan(cassette, mode)
        except CassetteError as e:
            problem = str(e)
        else:
            if what == "record":
                tee_args = kw.get("tee_args")
                rec = Recording(cassette, ("--no-host",) if tee_args is None else tee_args)
                used.append(rec)
                return rec.argv(list(argv))
            reports = tmp_path_factory.mktemp("acp-replay", numbered=True)
            play = Playback(cassette, reports, [*ignore, *kw.get("replay_args", ())])
            used.append(play)
            request.node.stash.setdefault(_PLAYING, []).append(play)
            return play.argv()
        pytest.fail(problem, pytrace=False)  # (outside the except: said once)

    yield agent
    passed = _passed(request)
    wait = request.config.stash[_EXIT_WAIT]
    problems = []
    for use in used:
        problems += use.finish(passed, wait) if isinstance(use, Recording) \
            else use.finish(wait)
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.fixture
def acp_client_replay(request: pytest.FixtureRequest, tmp_path: Path
                      ) -> Callable[..., ClientReplay]:
    """``acp_client_replay(trace, argv, *, ignore=(), timeout=None, workspace=None,
    noise=(), args=())``: re-drive the agent ``argv`` from the cassette ``trace``
    (relative to the test file; None: the test's own cassette); the first difference
    fails the test (:class:`Divergence`), else it returns the run."""
    runs = iter(range(1, 1 << 30))

    def replay(trace: str | Path | None, argv: Sequence[str], *, ignore: Sequence[str] = (),
               timeout: float | None = None, workspace: str | Path | None = None,
               noise: Sequence[str | Path] = (), args: Sequence[str] = ()) -> ClientReplay:
        path = _beside(request, trace)
        log = tmp_path / f"rerun-{next(runs)}.wire.jsonl"
        others = [_beside(request, n) for n in noise]
        try:
            run = client_replay(path, list(argv), log, ignore=ignore, timeout=timeout,
                                workspace=workspace, noise=others, args=args)
        except CassetteError as e:
            problem = str(e)
        else:
            if run.returncode == 1:
                raise Divergence(run.problem)
            if not run.ok:
                pytest.fail(run.problem, pytrace=False)
            return run
        pytest.fail(problem, pytrace=False)  # (outside the except: said once)

    return replay

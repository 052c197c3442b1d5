"""Replay as the client: re-drive a live agent from its own recording.

The agent under test is the only process started. Its frames are compared, in order,
with the recorded agent frames; the identifiers it mints (:data:`acp_pipes.minted.MINTED_KEYS`:
session, tool-call, permission, message ids) are learned from its live frames as a
consistent renaming (recorded -> live, one to one) and rewritten in every client frame
sent after, and clocks (:data:`acp_pipes.minted.CLOCKS`) are not compared.

Pacing is the protocol's: a recorded client request or notification is sent once the
agent frames recorded before it have come (so a prompt goes when the turn before it has
ended), and the recorded client answers are not sent in their place: when the live
agent asks (permission, elicitation, ``fs/*``, ``terminal/*``) and its request equals the
recorded one (method and content, under the renaming), the recorded answer to that
request is sent with the live request's id. The timeout is only for an agent that goes
silent.

The run stops at the first divergence (a frame that differs, a broken renaming, a
request the recording cannot answer, an extra frame, silence, an early exit) with one
report: what was expected, what came, the JSON pointers that differ. Every frame of the
run, both directions, goes to a new wire log (:mod:`acp_pipes.wire`, acp-tee's format).
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import orjson

from acp_pipes.errors import UsageError
from acp_pipes.jsondiff import dumps
from acp_pipes.minted import drop_clocks, learn, rename
from acp_pipes.redact import Redactor, logged_hash
from acp_pipes.trace.agent import ReplayOptions
from acp_pipes.trace.ids import id_key, id_span, splice_id
from acp_pipes.trace.report import pointer_diff
from acp_pipes.trace.tracefile import UNPARSED, Pair, Trace, TraceReader, classify, parsed
from acp_pipes.wire import A2C, C2A, end_record, frame_record, header, make_clock

__all__ = ["DriveResult", "drive_agent"]


@dataclass
class DriveResult:
    """``status``: ``ok`` (no difference), ``different`` (differences reported),
    ``stopped`` (``strict`` stopped at the first one) or ``agent_exited`` (the agent ended
    before the recorded session did). ``frames`` counts the frames of the run."""

    status: str
    differences: int
    sent: int
    received: int
    returncode: int | None
    reports: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class _Log:
    """The run's wire log: one lock hands out seq and t and writes the record."""

    def __init__(self, out: BinaryIO | None, clock_spec: str, argv: Sequence[str], host: bool):
        self.out = out
        self.clock = make_clock(clock_spec)
        self.lock = threading.Lock()
        self.seq = 0
        self.redactor = Redactor()
        if out is not None:
            head = header(argv, started_ns=self.clock(), clock=clock_spec, host=host,
                          recorder="acp-replay --client")
            out.write(orjson.dumps(head) + b"\n")
            out.flush()

    def frame(self, direction: str, raw: bytes, nolf: bool) -> int:
        """Log one frame, its secrets redacted as acp-tee redacts them (a key of the run's
        own): the agent's frames are live, and a run's log is shared as a recording is."""
        with self.lock:
            seq = self.seq
            self.seq += 1
            if self.out is not None:
                logged = self.redactor.frame(direction, raw) if self.redactor.wants(
                    direction, raw) else None
                extra: dict[str, Any] = {} if logged is None else {
                    "redacted": logged, "logged_hash": logged_hash(logged)}
                self.out.write(orjson.dumps(frame_record(seq, self.clock(), direction, raw,
                                                         nolf=nolf, **extra)) + b"\n")
                self.out.flush()
            return seq

    def end(self, returncode: int | None) -> None:
        """The log's end record: the agent's exit status (128+N, ``signal`` N, when a
        signal ended it)."""
        if self.out is None or returncode is None:
            return
        signal = -returncode if returncode < 0 else None
        status = 128 + signal if signal is not None else returncode
        with self.lock:
            self.out.write(orjson.dumps(end_record(self.clock(), status, self.seq, signal))
                           + b"\n")
            self.out.flush()


class _Driver:
    """One run (see :func:`drive_agent`), on the calling thread; the agent's output is
    read on a thread of its own and queued. The trace is read as the run needs it, so
    memory holds the frames in flight, not the session."""

    reader: threading.Thread  # the agent's output read and queued (set by drive_agent)

    def __init__(self, trace: Iterable[Pair], proc: subprocess.Popen[bytes], log: _Log,
                 opt: ReplayOptions):
        self.it = iter(trace)
        self.proc = proc
        self.log = log
        self.opt = opt
        self.norm = opt.normalizer()
        self.live: deque[tuple[int, bytes]] = deque()  # (seq, raw), not yet compared
        self.arrived = 0
        self.cond = threading.Condition()
        self.eof = False
        self.reports: list[dict[str, Any]] = []
        self.differences = 0
        self.checked = 0  # live agent frames compared
        self.recorded: deque[Pair] = deque()  # recorded agent frames not yet compared
        self.seen_a2c = 0  # recorded agent frames read
        self.pending: deque[tuple[dict[str, Any], bytes, int]] = deque()  # to send
        self.answers: dict[bytes, Pair] = {}  # recorded request id -> recorded answer
        self.trace_done = False
        self.names: dict[str, str] = {}  # minted values: recorded -> live
        self.back: dict[str, str] = {}
        self.renamed = False  # some learned name differs (else equal bytes are equal)
        self.sent = 0
        self.last_sent: dict[str, Any] | None = None

    def say(self, event: dict[str, Any]) -> None:
        event = {"event": event.pop("event"), "tool": "acp-replay", **event}
        self.reports.append(event)
        if self.opt.report is not None:
            self.opt.report(event)

    # the agent's output, on its own thread
    def read(self) -> None:
        try:
            for line in self.proc.stdout:
                nolf = not line.endswith(b"\n")
                raw = line if nolf else line[:-1]
                seq = self.log.frame(A2C, raw, nolf)
                with self.cond:
                    self.live.append((seq, raw))
                    self.arrived += 1
                    self.cond.notify_all()
        except (OSError, ValueError):
            pass
        finally:
            with self.cond:
                self.eof = True
                self.cond.notify_all()

    def read_trace(self) -> None:
        """Read one more recorded frame: an agent frame is queued for comparison, a
        client answer (to an agent request) kept by the request's id, any other client
        frame queued to be sent once the agent frames recorded before it have come."""
        pair = next(self.it, None)
        if pair is None:
            self.trace_done = True
            return
        f, raw = pair
        if f["dir"] == A2C:
            self.recorded.append(pair)
            self.seen_a2c += 1
            return
        c = classify(f, raw)
        if c.get("kind") in ("response", "error"):
            self.answers[id_key(c.get("id"))] = pair
        else:
            self.pending.append((f, raw, self.seen_a2c))

    def diverge(self, event: dict[str, Any]) -> None:
        self.differences += 1
        if self.last_sent is not None:
            event.setdefault("after_client_seq", self.last_sent.get("seq"))
        self.say(event)

    def check(self, seq: int, raw: bytes) -> bool:
        """Compare one live agent frame with the next recorded one under the renaming
        (learning it), and answer it when it is a request; False at a divergence."""
        while not self.recorded and not self.trace_done:
            self.read_trace()
        self.checked += 1
        if not self.recorded:
            value = _value(raw)
            self.diverge({"event": "extra", "live_seq": seq, "received": value,
                          "message": f"the agent sent frame live seq {seq}, more than "
                          "was recorded"})
            return False
        rec, rraw = self.recorded.popleft()
        f = classify(rec, rraw)
        request = f.get("kind") == "request"
        if raw != rraw or self.renamed or rec.get("redacted"):
            value = _value(raw)
            recorded = _value(rraw)
            bad = learn(recorded, value, self.names, self.back)
            if not self.renamed:
                self.renamed = any(k != v for k, v in self.names.items())
            expected = self.norm.view(drop_clocks(rename(recorded, self.names)),
                                      drop_id=request)
            received = self.norm.view(drop_clocks(value), drop_id=request)
            diff = pointer_diff(expected, received)
            if bad or diff:
                where = ", ".join([d["path"] or "/" for d in diff] + bad)
                self.diverge({
                    "event": "diverged", "seq": f.get("seq"), "live_seq": seq,
                    "method": f.get("method"), "expected": expected, "received": received,
                    "diff": diff, "renaming_broken": bad,
                    "message": f"agent frame seq {f.get('seq')}"
                    f"{' (' + f['method'] + ')' if f.get('method') else ''} differs from "
                    f"the recording at {where}"})
                return False
        if request:
            return self.answer(f, raw)
        return True

    def answer(self, f: dict[str, Any], raw: bytes) -> bool:
        """Send the recorded answer to the recorded request the live one matched (same
        method and content under the renaming), with the live request's id."""
        key = id_key(f.get("id"))
        while key not in self.answers and not self.trace_done:
            self.read_trace()
        got = self.answers.pop(key, None)
        span = id_span(raw)
        if got is None or span is None:
            self.diverge({"event": "unanswerable", "seq": f.get("seq"),
                          "method": f.get("method"), "received": _value(raw),
                          "message": f"the agent's request {f.get('method')} (recorded "
                          f"seq {f.get('seq')}) has no answer in the recording"})
            return False
        token = raw[span[0]:span[1]]
        if self.opt.remap_log is not None:
            self.opt.remap_log.write(b'{"recorded":' + dumps(f.get("id")) + b',"live":'
                                     + token + b',"dir":"a2c","seq":'
                                     + dumps(f.get("seq")) + b"}\n")
        arec, araw = got
        return self.send(arec, splice_id(self._renamed(araw), token))

    def _renamed(self, raw: bytes) -> bytes:
        """A recorded client frame with the learned names (its bytes kept when none
        applies)."""
        if not self.renamed:
            return raw
        value = _value(raw)
        new = rename(value, self.names)
        return raw if new is value else orjson.dumps(new)

    def send(self, f: dict[str, Any], raw: bytes) -> bool:
        nolf = bool(f.get("nolf"))
        self.log.frame(C2A, raw, nolf)  # logged before it is sent: the answer follows it
        try:
            self.proc.stdin.write(raw if nolf else raw + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        self.sent += 1
        return True

    def next_live(self, deadline: float) -> tuple[int, bytes] | None | bool:
        """The next live agent frame; None at the deadline, False at the agent's EOF."""
        with self.cond:
            while not self.live:
                if self.eof:
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)
            return self.live.popleft()

    def run(self) -> DriveResult:
        timeout = self.opt.timeout
        deadline = time.monotonic() + timeout
        prev_t = None
        status = None
        while status is None:
            with self.cond:
                live = self.live.popleft() if self.live else None
            if live is not None:
                deadline = time.monotonic() + timeout
                if not self.check(*live):
                    status = "stopped"
                continue
            if self.pending and self.checked >= self.pending[0][2]:
                f, raw, _ = self.pending.popleft()
                t = f.get("t")
                if self.opt.pace == "recorded" and t is not None and prev_t is not None:
                    if (t - prev_t) > 0:
                        self.opt.sleep((t - prev_t) / 1e9)
                prev_t = t
                if not self.send(f, self._renamed(raw)):
                    status = "agent_exited"
                self.last_sent = f
                deadline = time.monotonic() + timeout
                continue
            if not self.pending and not self.trace_done:
                self.read_trace()
                continue
            if self.trace_done and not self.pending and self.checked >= self.seen_a2c:
                break  # the whole recording happened
            got = self.next_live(deadline)
            if got is None:
                self.diverge({"event": "timeout", "waiting_for": self.seen_a2c
                              if not self.pending else self.pending[0][2],
                              "received": self.checked, "timeout": timeout,
                              "message": f"the agent sent nothing for {timeout:g} s; it "
                              f"had sent {self.checked} of the recorded agent frames"})
                status = "stopped"
            elif got is False:
                status = "agent_exited"
            else:
                with self.cond:
                    self.live.appendleft(got)
        return self.end(status)

    def end(self, status: str | None) -> DriveResult:
        proc = self.proc
        try:
            proc.stdin.close()
        except OSError:
            pass
        if status == "stopped":
            proc.terminate()
        try:
            proc.wait(timeout=self.opt.timeout)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.reader.join()
        if status is None:  # anything the agent sent after the recorded session
            while self.live and status is None:
                if not self.check(*self.live.popleft()):
                    status = "stopped"
        if status == "agent_exited":
            self.diverge({"event": "agent_exited", "returncode": proc.returncode,
                          "sent": self.sent, "received": self.checked,
                          "message": "the agent ended before the recorded session did"})
        if status is None:
            status = "ok"
        return DriveResult(status, self.differences, self.sent, self.arrived,
                           proc.returncode, self.reports)


def _value(raw: bytes) -> Any:
    """A frame's JSON value (:func:`acp_pipes.trace.tracefile.parsed`); the text itself
    when it is not JSON (then nothing equals it but the same text)."""
    value = parsed(raw)
    return raw.decode("utf-8", "replace") if value is UNPARSED else value


def drive_agent(
    trace: Trace | TraceReader | Iterable[dict[str, Any]],
    argv: Sequence[str],
    out: BinaryIO | None = None,
    options: ReplayOptions | None = None,
    *,
    clock: str = "system",
    host: bool = True,
) -> DriveResult:
    """Start ``argv`` (the agent under test), replay the recorded client frames to it and
    write the run's wire log to ``out``. Raises an OptionError for a bad ``clock`` and a
    UsageError when the agent cannot be started, both before anything is sent.
    ``trace`` is read as the run goes when it is a :class:`TraceReader`.

    Recording a session with the echo agent in memory, then driving a live echo agent
    with it, reproduces the agent's bytes:

    >>> import io, sys
    >>> from acp_pipes.echo.agent import echo_agent
    >>> from acp_pipes.echo.client import client_session
    >>> client = list(client_session(2, permission_every=2))
    >>> wire = []
    >>> def log(d, raw):
    ...     wire.append({"seq": len(wire), "t": 0, "dir": d, "raw": raw.decode()})
    >>> def fed():
    ...     for line in client:
    ...         log("c2a", line)
    ...         yield line
    >>> for frame in echo_agent(fed()):
    ...     log("a2c", frame)
    >>> log = io.BytesIO()
    >>> r = drive_agent(wire, [sys.executable, "-m", "acp_pipes.cli.echo_agent"], log,
    ...                 clock="epoch", host=False)
    >>> r.status, r.sent == len(client)
    ('ok', True)
    >>> lines = [orjson.loads(x) for x in log.getvalue().splitlines()]
    >>> [x["raw"] for x in lines[1:-1]] == [w["raw"] for w in wire], lines[-1]["end"]
    (True, True)
    """
    tr = trace if isinstance(trace, (Trace, TraceReader)) else Trace.of(trace)
    opt = options or ReplayOptions()
    if not argv:
        raise ValueError("no agent command")
    make_clock(clock)  # refused before the agent starts
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    except OSError as e:
        raise UsageError(f"cannot start {argv[0]}: {e.strerror or e}") from None
    log = _Log(out, clock, argv, host)
    driver = _Driver(tr, proc, log, opt)
    driver.reader = threading.Thread(target=driver.read, name="acp-replay-agent-out",
                                     daemon=True)
    driver.reader.start()
    try:
        result = driver.run()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    log.end(result.returncode)
    return result

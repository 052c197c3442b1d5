"""Replay as the client: drive a live agent with the recorded client frames.

The agent under test is the only process started. Each recorded client (c2a) frame is
sent, byte for byte, once the agent frames the recording shows before it have arrived, so
the agent sees the same interleaving; its requests (permission, elicitation, fs/*,
terminal/*) are answered by the recorded client answers, which follow them in the
recording. Every frame of the run, both directions, goes to a new wire log
(:mod:`acp_pipes.wire`, the format acp-tee writes).

"Arrived" is positional: the n-th agent frame of the run stands for the n-th agent frame
of the recording and is compared with it by hash modulo the declared normalisers; a
difference is reported (one dict per difference, JSON lines in the CLI) but still counts
as arrived, so one changed frame does not stall the run. A window that does not fill
within ``timeout`` seconds is reported and the next client frame is sent anyway.
``strict`` stops at the first difference.

With ``remap_ids`` the recorded client answers to the agent's requests carry the live
request's id (spliced into the recorded bytes), and responses are compared modulo id.
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

from acp_pipes.canonical import ParseError, parse_json
from acp_pipes.redact import Redactor, logged_hash
from acp_pipes.trace.agent import ReplayOptions, live_hash, recorded_hash
from acp_pipes.trace.ids import id_key, note_live_id, splice_id
from acp_pipes.trace.report import pointer_diff
from acp_pipes.trace.tracefile import Pair, Trace, TraceReader, classify
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
                extra = {} if logged is None else {"redacted": logged,
                                                   "logged_hash": logged_hash(logged)}
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


#: Recorded agent frames read ahead of the live agent's, at most: the driver waits for the
#: agent before reading more of the trace, so memory holds what is in flight.
WINDOW = 4096


class _Driver:
    """One run (see :func:`drive_agent`). The trace is read as the run goes; live agent
    frames are compared as they come and then dropped, so memory holds the frames not
    yet compared on either side, not the session."""

    def __init__(self, trace: Iterable[Pair], proc: subprocess.Popen, log: _Log,
                 opt: ReplayOptions):
        self.trace = trace
        self.proc = proc
        self.log = log
        self.opt = opt
        self.norm = opt.normalizer()
        self.remap = opt.remap_ids
        self.live: deque[tuple[int, bytes]] = deque()  # (seq, raw), not yet compared
        self.arrived = 0  # live agent frames so far
        self.recorded: deque[Pair] = deque()  # recorded agent frames not yet compared
        self.cond = threading.Condition()
        self.eof = False
        self.reports: list[dict[str, Any]] = []
        self.differences = 0
        self.checked = 0
        self.ids: dict[bytes, bytes] = {}  # recorded agent request id -> live id token

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

    def wait_for(self, need: int, deadline: float) -> bool:
        """Wait until ``need`` agent frames arrived, comparing them as they come; False
        on ``deadline`` or agent EOF."""
        while True:
            with self.cond:
                while self.arrived <= self.checked and self.arrived < need and not self.eof:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self.cond.wait(left)
                arrived = self.arrived
            self.compare(min(arrived, self.checked + len(self.recorded)))
            if arrived >= need:
                return True
            if self.eof or time.monotonic() >= deadline:
                return False

    def compare(self, upto: int) -> None:
        """Compare the live agent frames checked..upto with the recorded ones; beyond the
        recording, each is an extra frame."""
        while self.checked < upto:
            with self.cond:
                if not self.live:
                    return
                seq, raw = self.live.popleft()
            self.checked += 1
            if not self.recorded:
                value, h = live_hash(raw, self.norm, self.remap)
                self.differences += 1
                self.say({"event": "extra", "live_seq": seq, "received": _brief(value, h),
                          "message": "the agent sent more than was recorded"})
                continue
            rec, rraw = self.recorded.popleft()
            if self.remap and (b'"method"' in raw or b"\\u" in raw):
                f = classify(rec, rraw)
                if f.get("kind") == "request":
                    note_live_id(self.ids, f, raw, A2C, self.opt.remap_log)
            if raw == rraw and not rec.get("redacted"):
                continue  # equal bytes: equal under any normaliser
            value, h = live_hash(raw, self.norm, self.remap)
            expected = recorded_hash(rec, rraw, self.norm, self.remap)
            if h == expected:
                continue
            self.differences += 1
            f = classify(rec, rraw)
            event: dict[str, Any] = {"event": "differs", "seq": f.get("seq"), "live_seq": seq,
                                     "method": f.get("method"), "expected": {"hash": expected},
                                     "received": _brief(value, h)}
            if value is not None:
                try:
                    recorded = parse_json(rraw)
                    event["diff"] = pointer_diff(self.norm.view(recorded, drop_id=self.remap),
                                                 self.norm.view(value, drop_id=self.remap))
                except ParseError:
                    pass
            self.say(event)

    def stopping(self) -> bool:
        return self.opt.strict and self.differences > 0

    def run(self) -> DriveResult:
        stdin = self.proc.stdin
        sent = 0
        seen_a2c = 0
        status = None
        last = time.monotonic()
        prev_t = None
        for f, raw in self.trace:
            t = f.get("t")
            if f["dir"] == A2C:
                seen_a2c += 1
                prev_t = t
                self.recorded.append((f, raw))
                if len(self.recorded) >= WINDOW:  # read no further ahead of the agent
                    self.wait_for(seen_a2c - WINDOW // 2, last + self.opt.timeout)
                    if self.stopping():
                        status = "stopped"
                        break
                continue
            if not self.wait_for(seen_a2c, last + self.opt.timeout):
                if self.eof:
                    status = "agent_exited"
                    break
                self.differences += 1
                self.say({"event": "timeout", "seq": f.get("seq"), "waiting_for": seen_a2c,
                          "received": self.arrived, "timeout": self.opt.timeout,
                          "message": f"the agent sent {self.arrived} of the {seen_a2c} "
                          f"frames recorded before client frame seq {f.get('seq')}"})
            if self.stopping():
                status = "stopped"
                break
            if self.opt.pace == "recorded" and t is not None and prev_t is not None:
                delay = (t - prev_t) / 1e9 - (time.monotonic() - last)
                if delay > 0:
                    self.opt.sleep(delay)
            if self.remap and (b'"id"' in raw or b"\\u" in raw):
                c = classify(f, raw)
                if c["kind"] in ("response", "error"):
                    token = self.ids.get(id_key(c.get("id")))
                    if token is not None:
                        raw = splice_id(raw, token)
            nolf = bool(f.get("nolf"))
            self.log.frame(C2A, raw, nolf)  # logged before it is sent: the answer follows it
            try:
                stdin.write(raw if nolf else raw + b"\n")
                stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                status = "agent_exited"
                break
            sent += 1
            last = time.monotonic()
            prev_t = t
        if status is None:
            if not self.wait_for(seen_a2c, last + self.opt.timeout) and not self.stopping():
                self.differences += 1
                self.say({"event": "missing", "waiting_for": seen_a2c,
                          "received": self.arrived, "timeout": self.opt.timeout,
                          "message": f"the agent sent {self.arrived} of the "
                          f"{seen_a2c} recorded frames"})
        return self.end(status, sent)

    def end(self, status: str | None, sent: int) -> DriveResult:
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
        if status != "stopped":
            self.compare(self.arrived)  # anything after the last recorded frame
        if status == "agent_exited":
            self.differences += 1
            self.say({"event": "agent_exited", "returncode": proc.returncode,
                      "sent": sent, "received": self.arrived,
                      "message": "the agent ended before the recorded session did"})
        if status is None:
            status = "different" if self.differences else "ok"
        return DriveResult(status, self.differences, sent, self.arrived, proc.returncode,
                           self.reports)


def _brief(value: Any, h: str) -> dict[str, Any]:
    d: dict[str, Any] = {"hash": h}
    if isinstance(value, dict):
        if isinstance(value.get("method"), str):
            d["method"] = value["method"]
        if "id" in value:
            d["id"] = value["id"]
    elif value is None:
        d["error"] = "not JSON"
    return d


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
    write the run's wire log to ``out``. Raises OSError when the agent cannot be started.
    ``trace`` is read as the run goes when it is a :class:`TraceReader`.

    Recording a session with the echo agent in memory, then driving a live echo agent
    with it, reproduces the agent's bytes:

    >>> import io, sys
    >>> from acp_pipes.echo_agent import echo_agent
    >>> from acp_pipes.echo_client import client_session
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
    proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
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

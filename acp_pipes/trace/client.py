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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import orjson

from acp_pipes.canonical import ParseError, parse_json
from acp_pipes.trace.agent import ReplayOptions, Trace, live_hash
from acp_pipes.trace.ids import id_key, note_live_id, splice_id
from acp_pipes.trace.report import pointer_diff
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
        if out is not None:
            head = header(argv, started_ns=self.clock(), clock=clock_spec, host=host,
                          recorder="acp-replay --client")
            out.write(orjson.dumps(head) + b"\n")
            out.flush()

    def frame(self, direction: str, raw: bytes, nolf: bool) -> int:
        with self.lock:
            seq = self.seq
            self.seq += 1
            if self.out is not None:
                self.out.write(orjson.dumps(frame_record(seq, self.clock(), direction, raw,
                                                         nolf=nolf)) + b"\n")
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
    def __init__(self, trace: Trace, proc: subprocess.Popen, log: _Log, opt: ReplayOptions):
        self.trace = trace
        self.proc = proc
        self.log = log
        self.opt = opt
        self.norm = opt.normalizer()
        self.remap = opt.remap_ids
        self.live: list[tuple[int, bytes, Any, str]] = []  # (seq, raw, value, hash)
        self.cond = threading.Condition()
        self.eof = False
        self.reports: list[dict[str, Any]] = []
        self.differences = 0
        self.checked = 0
        self.ids: dict[bytes, bytes] = {}  # recorded agent request id -> live id token
        frames = trace.frames
        self.a2c = [i for i, f in enumerate(frames) if f["dir"] == A2C]
        identity = self.norm.identity and not self.remap
        self.a2c_hash = [frames[i].get("hash") if identity
                         else self.norm.hash_frame(frames[i], drop_id=self.remap)
                         for i in self.a2c]

    def say(self, event: dict[str, Any]) -> None:
        event = {"event": event.pop("event"), "tool": "acp-replay", **event}
        self.reports.append(event)
        if self.opt.report is not None:
            self.opt.report(event)

    # the agent's output, on its own thread
    def read(self) -> None:
        norm, remap = self.norm, self.remap
        try:
            for line in self.proc.stdout:
                nolf = not line.endswith(b"\n")
                raw = line if nolf else line[:-1]
                seq = self.log.frame(A2C, raw, nolf)
                value, h = live_hash(raw, norm, remap)
                with self.cond:
                    self.live.append((seq, raw, value, h))
                    self.cond.notify_all()
        except (OSError, ValueError):
            pass
        finally:
            with self.cond:
                self.eof = True
                self.cond.notify_all()

    def wait_for(self, need: int) -> bool:
        """Wait until ``need`` agent frames arrived; False on timeout or agent EOF."""
        deadline = time.monotonic() + self.opt.timeout
        with self.cond:
            while len(self.live) < need and not self.eof:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(left)
            return len(self.live) >= need

    def compare(self, upto: int) -> None:
        """Compare the live agent frames checked..upto with the recording."""
        frames = self.trace.frames
        with self.cond:
            live = self.live[self.checked : upto]
        for seq, raw, value, h in live:
            p = self.checked
            self.checked += 1
            if p >= len(self.a2c):
                self.differences += 1
                self.say({"event": "extra", "live_seq": seq, "received": _brief(value, h),
                          "message": "the agent sent more than was recorded"})
                continue
            f = frames[self.a2c[p]]
            if self.remap and f.get("kind") == "request" and isinstance(value, dict) \
                    and "method" in value:
                self._map_id(f, raw)
            if h == self.a2c_hash[p]:
                continue
            self.differences += 1
            event: dict[str, Any] = {"event": "differs", "seq": f.get("seq"), "live_seq": seq,
                                     "method": f.get("method"),
                                     "expected": {"hash": self.a2c_hash[p]},
                                     "received": _brief(value, h)}
            if value is not None:
                try:
                    rec = parse_json(self.trace.raws[self.a2c[p]])
                    event["diff"] = pointer_diff(self.norm.view(rec, drop_id=self.remap),
                                                 self.norm.view(value, drop_id=self.remap))
                except ParseError:
                    pass
            self.say(event)

    def _map_id(self, f: dict[str, Any], raw: bytes) -> None:
        note_live_id(self.ids, f, raw, A2C, self.opt.remap_log)

    def stopping(self) -> bool:
        return self.opt.strict and self.differences > 0

    def run(self) -> DriveResult:
        frames, raws = self.trace.frames, self.trace.raws
        stdin = self.proc.stdin
        sent = 0
        seen_a2c = 0
        status = None
        last = time.monotonic()
        prev_t = None
        for i, f in enumerate(frames):
            t = f.get("t")
            if f["dir"] == A2C:
                seen_a2c += 1
                prev_t = t
                continue
            if not self.wait_for(seen_a2c):
                self.compare(len(self.live))
                if self.eof:
                    status = "agent_exited"
                    break
                self.differences += 1
                self.say({"event": "timeout", "seq": f.get("seq"), "waiting_for": seen_a2c,
                          "received": len(self.live), "timeout": self.opt.timeout,
                          "message": f"the agent sent {len(self.live)} of the {seen_a2c} "
                          f"frames recorded before client frame seq {f.get('seq')}"})
            else:
                self.compare(seen_a2c)
            if self.stopping():
                status = "stopped"
                break
            if self.opt.pace == "recorded" and t is not None and prev_t is not None:
                delay = (t - prev_t) / 1e9 - (time.monotonic() - last)
                if delay > 0:
                    self.opt.sleep(delay)
            raw = raws[i]
            if self.remap and f.get("kind") in ("response", "error"):
                token = self.ids.get(id_key(f.get("id")))
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
            if self.wait_for(len(self.a2c)):
                self.compare(len(self.a2c))
            else:
                self.compare(len(self.live))
                if not self.stopping():
                    self.differences += 1
                    self.say({"event": "missing", "waiting_for": len(self.a2c),
                              "received": len(self.live), "timeout": self.opt.timeout,
                              "message": f"the agent sent {len(self.live)} of the "
                              f"{len(self.a2c)} recorded frames"})
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
            self.compare(len(self.live))  # anything after the last recorded frame
        if status == "agent_exited":
            self.differences += 1
            self.say({"event": "agent_exited", "returncode": proc.returncode,
                      "sent": sent, "received": len(self.live),
                      "message": "the agent ended before the recorded session did"})
        if status is None:
            status = "different" if self.differences else "ok"
        return DriveResult(status, self.differences, sent, len(self.live), proc.returncode,
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
    trace: Trace | Iterable[dict[str, Any]],
    argv: Sequence[str],
    out: BinaryIO | None = None,
    options: ReplayOptions | None = None,
    *,
    clock: str = "system",
    host: bool = True,
) -> DriveResult:
    """Start ``argv`` (the agent under test), replay the recorded client frames to it and
    write the run's wire log to ``out``. Raises OSError when the agent cannot be started.

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
    tr = trace if isinstance(trace, Trace) else Trace.of(trace)
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

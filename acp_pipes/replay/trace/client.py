"""Replay as the client: re-drive a live agent from its own recording.

The agent under test is the only process started (in a process group of its own). What
counts as the same session is the model's (:mod:`acp_pipes.sameness`, docs/sameness.md):
the agent's frames are matched against the recording as a partial order, not a sequence
(a response after its request, a turn's frames inside the turn, one entity's frames in
their order, floating notifications anywhere in their window), under the view both are
compared as (minted identifiers learned as a renaming and rewritten in every client
frame sent after, clocks dropped, the vendor's volatile values by preset, noise learned
from other recordings). ``--strict-order`` compares in recorded order instead, as every
re-drive did before the model.

Pacing is the protocol's: a recorded client request or notification is sent once the
agent frames recorded before it that a client waits for have come (so a prompt goes when
the turn before it has ended; a floating notification is waited for by nobody) and the
client frames recorded before it went (a client's bytes are one stream: a script piped
in whole answers a permission ahead of the agent's request, and its next step goes after
that answer); the recorded client answers are not sent in their place: when the live
agent asks (permission, elicitation, ``fs/*``, ``terminal/*``) and its request is the
recorded one (method and content, under the view), the recorded answer to that request
is sent with the live request's id. With ``--workspace DIR`` the recorded session's
working directory is DIR in everything sent and compared, and a recorded
``fs/write_text_file`` the recorded client performed is performed under DIR
(:mod:`acp_pipes.replay.trace.workspace`). The timeout is only for an agent that goes
silent.

The run stops at the first difference (``--keep-going``: goes on to the end) and says
it as one report: its kind, the recorded and live frames as compared, the JSON pointers
that differ; what the model tolerated is said as notes. Once the recording is done, the
agent's input is closed and after a grace its process group ended. Every frame of the
run, both directions, goes to a new wire log (:mod:`acp_pipes.io.wire`, acp-tee's format,
written by acp-tee's writer, :class:`acp_pipes.tee.logfile.WireLog`).

Its parts: the recording as the run reads it (:mod:`~acp_pipes.replay.trace.recording`),
the agent's pipes (:mod:`~acp_pipes.replay.trace.pipes`), how long a silence may last
(:mod:`~acp_pipes.replay.trace.patience`); here, the run that ties them to the model.
"""

from __future__ import annotations

import subprocess
import time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any, BinaryIO

from acp_pipes.io.wire import A2C, C2A
from acp_pipes.protocol.jsonrpc import id_key
from acp_pipes.protocol.jsontext import dumps
from acp_pipes.replay.trace.answers import ClientSide
from acp_pipes.replay.trace.ids import frame_value, splice_id, top_id_span
from acp_pipes.replay.trace.options import ReplayOptions
from acp_pipes.replay.trace.patience import Patience
from acp_pipes.replay.trace.pipes import AgentPipes, end_log, open_log
from acp_pipes.replay.trace.recording import (
    BACKLOG,
    SKIP,
    STEP,
    TAKE,
    Recording,
    asks,
    described,
)
from acp_pipes.replay.trace.report import DriveResult
from acp_pipes.replay.trace.spawn import end_agent, start_agent
from acp_pipes.replay.trace.tracefile import Trace, TraceReader
from acp_pipes.sameness import strict
from acp_pipes.sameness.slots import Matched, Slot
from acp_pipes.sameness.verdicts import Difference, Note
from acp_pipes.tee.logfile import WireLog

__all__ = ["DriveResult", "drive_agent"]

class _Driver:
    """One run (see :func:`drive_agent`), on the calling thread alone: the agent's pipes
    (:class:`AgentPipes`) taken between the comparisons, the trace read as the run needs
    it (:class:`Recording`).

    What is the same is the model's (:class:`acp_pipes.sameness.match.Matcher`): the
    recording's frames are admitted to it as they are read, the agent's frames matched
    against it (most by their bytes alone, inline in :meth:`compare_live`), and the
    client's frames go when it says a client would have sent them."""

    def __init__(self, trace: Trace | TraceReader, proc: subprocess.Popen[bytes],
                 log: WireLog, opt: ReplayOptions):
        from acp_pipes.sameness.match import Matcher
        from acp_pipes.sameness.volatile import Rules, View

        self.recording = Recording(trace)
        self.proc = proc
        self.log = log
        self.opt = opt
        self.m = Matcher(View(Rules(ignore=tuple(opt.ignore))), rules_for=opt.rules_for,
                         noise=opt.noise, keep_going=opt.keep_going)
        self.reports: list[dict[str, Any]] = []
        self.differences = 0
        self.notes = 0
        self.checked = 0  # live agent frames compared
        self.pending: deque[Slot] = deque()  # the recorded client steps still to send
        self.client = ClientSide(self.m, opt.workspace)
        self.last_sent: dict[str, Any] | None = None
        self.prev_t: Any = None  # --pace recorded: the time of the client frame sent last
        self.patience = Patience(opt.timeout)
        self.pipes = AgentPipes(proc, log)
        self.ending = False  # the run is over: no more reading ahead

    def say(self, event: dict[str, Any]) -> None:
        event = {"event": event.pop("event"), "tool": "acp-replay", **event}
        self.reports.append(event)
        if self.opt.report is not None:
            self.opt.report(event)

    # waiting

    def wait(self, timeout: float | None) -> None:
        """Take what the agent's pipes have ready; when nothing is, read the trace ahead
        and build the model's order (:meth:`idle`), then wait up to ``timeout`` s."""
        self.pipes.wait(timeout, self.idle)

    def wait_trace(self) -> None:
        """Wait for the agent or a trace that can block, whichever comes first."""
        self.pipes.wait(None, ahead=self.recording.ahead)

    def idle(self) -> bool:
        """While the agent has nothing ready: the trace read ahead
        (:meth:`Recording.idle`); True when the agent's pipes were ready (and taken)."""
        if self.ending:
            return False
        return self.recording.idle(self.pipes.took, self.m)

    def pause(self, seconds: float) -> None:
        """``--pace recorded``: wait ``seconds``, the agent's output read meanwhile; a
        sleep of the caller's own is called as it is."""
        if self.opt.sleep is not time.sleep:
            self.log.flush()
            self.opt.sleep(seconds)
            return
        pipes = self.pipes
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0 and not pipes.broken:
            if pipes.eof and not pipes.out:
                self.log.flush()
                time.sleep(left)
                break
            self.wait(left)

    # the recording

    def admit(self) -> Slot | None:
        """Admit the next recorded frame to the matcher (None after the last): a client
        answer (to an agent request) is kept by the request's id, any other client
        frame queued to be sent when the model says."""
        recording = self.recording
        if not recording.look and not recording.fill(self.wait_trace):
            return None
        rec, raw, judged = recording.pop()
        if judged.__class__ is int:
            slot = self.m.admit(rec, raw, step=True if judged == STEP else None)
        else:
            slot = self.m.admit(rec, raw, judged)
        if slot.dir == C2A:
            if not slot.step:
                self.client.keep(slot)
            else:
                self.pending.append(slot)
            if self.client.cwd is None and b'"cwd"' in raw:
                self.client.mapped(slot)
        elif asks(raw) and slot.event().kind == "request":
            self.client.asked(slot)
        return slot

    def read_for_live(self) -> None:
        """Admit the recording as far as a live agent frame can reach: through the
        second client step not sent yet (a floating notification may come a step
        early), on to the request of an answer read before it (a script piped in
        whole), or to its end."""
        pending, early = self.pending, self.client.early
        while (len(pending) < 2 or early) and self.admit() is not None:
            pass

    def step_ready(self) -> bool:
        """Whether the next recorded client step may go. Its frame is admitted once no
        agent frame recorded before it can hold it back by its bytes alone (one that
        names no floating kind, :func:`acp_pipes.sameness.slots.may_float`), so a
        turn's frames are matched by their bytes as they come, never admitted."""
        m, look = self.m, self.recording.look
        while not self.pending:
            if not look:
                if self.admit() is None:
                    return False
                continue
            rec, raw, _ = look[0]
            if rec["dir"] == A2C and (self.opt.strict_order or m.holds(raw)):
                return False  # the step waits for this agent frame
            self.admit()
        return self.may_send(self.pending[0])

    def may_send(self, slot: Slot) -> bool:
        """Whether the next client step may go: after the agent frames it waits for
        (``--strict-order``: all before it) and the client frames before it (holds)."""
        m, client = self.m, self.client
        ok = strict.sendable(m, slot) if self.opt.strict_order else m.may_send(slot)
        if not ok or not m.open_c2a:
            return ok
        if client.early:
            self.read_for_live()  # on to the request of an answer read (or the end)
        return not client.holds(slot, self.recording.more)

    def due(self) -> Slot | None:
        """The recorded agent frame the run waits for (admitted to the matcher first,
        when it is not yet)."""
        m = self.m
        while True:
            slot = m.waiting_for() if not self.opt.strict_order else \
                next(m.unmatched(), None)
            if slot is not None or self.admit() is None:
                return slot

    def all_came(self) -> bool:
        """Every recorded agent frame a client would wait for has come."""
        if self.opt.strict_order:
            return next(self.m.unmatched(), None) is None
        return self.m.all_came()

    # judging

    def difference(self, d: Difference) -> None:
        """Say a difference, with the client frame sent last and, without
        ``--workspace``, the recorded writes the re-drive did not perform."""
        self.differences += 1
        event = d.to_event()
        if self.last_sent is not None:
            event["after_client_seq"] = self.last_sent.get("seq")
        self.client.unperformed(event)
        self.say(event)

    def verdicts(self, found: Iterable[Any]) -> bool:
        """Say what the matcher found; False when a difference stops the run."""
        go = True
        for v in found:
            if isinstance(v, Note):
                self.notes += 1
                self.say(v.to_event())
            elif isinstance(v, Difference):
                self.difference(v)
                go = go and self.opt.keep_going
        return go

    def judge(self, seq: int, raw: bytes) -> bool:
        """One live agent frame the bytes did not settle: matched by the model (its
        answer sent when it is a request), held (a floating notification), or a
        difference; False when the run stops."""
        self.read_for_live()
        self.checked += 1
        got: Matched | Difference | Note | None
        if self.opt.strict_order:
            got = strict.in_order(self.m, raw, seq)
        else:
            got = self.m.live(raw, seq)
        if got is None:
            return True
        if isinstance(got, Matched):
            self.verdicts(got.notes)
            if got.slot.event().kind == "request":
                return self.answer(got.slot, raw)
            return True
        if isinstance(got, Note):
            return self.verdicts([got])
        go = self.verdicts([got])
        slot = got.slot
        if go and slot is not None and slot.event().kind == "request":
            return self.answer(slot, raw)
        return go

    def judge_all(self) -> bool:
        """Judge every live frame not compared yet; False when the run stops."""
        live = self.pipes.live
        while live:
            if not self.judge(*live.popleft()):
                return False
        return True

    def silence(self, timeout: float, waited: float | None = None) -> None:
        slot = self.due()
        event = {"waiting_for": None, "received": self.checked, "timeout": timeout}
        what = ""
        if slot is not None:
            ev = slot.event()
            event["waiting_for"] = ev.seq
            what = f": the recording's agent frame seq {ev.seq} ({ev.label}) never came"
        waited = round(max(timeout, waited or 0.0), 1)
        d = Difference("timeout", f"the agent sent nothing for {waited:g} s{what}",
                       slot.event() if slot is not None else None, None)
        d.extra.update(event)
        self.difference(d)

    def answer(self, slot: Slot, raw: bytes) -> bool:
        """Send the recorded answer to the recorded request the live one matched (same
        method and content under the renaming), with the live request's id."""
        rec = slot.event()
        key = id_key(rec.rid)
        client = self.client
        while not client.has_answer(key) and self.admit() is not None:
            pass
        got = client.answer_to(key)
        span = top_id_span(raw, True)  # (it matched a request: it has a top-level id)
        if got is None or span is None:
            self.difference(Difference(
                "unanswerable", f"the agent's request {rec.method} (recorded seq {rec.seq})"
                " has no answer in the recording", rec, None, None, frame_value(raw)))
            return self.opt.keep_going and span is not None and got is not None
        token = raw[span[0]:span[1]]
        if self.opt.remap_log is not None:
            self.opt.remap_log.write(b'{"recorded":' + dumps(rec.rid) + b',"live":'
                                     + token + b',"dir":"a2c","seq":'
                                     + dumps(rec.seq) + b"}\n")
        if rec.method == "fs/write_text_file":
            note = client.perform(got, frame_value(raw), rec)
            if note is not None:
                self.notes += 1
                self.say(note)
        araw = client.outgoing(got.raw)
        aspan = top_id_span(araw, True)  # an answer (response or error) has an id
        ok = self.send(got.rec, araw if aspan is None else splice_id(araw, token, aspan))
        if ok:
            self.verdicts(self.m.sent(got))
        return ok

    def send(self, f: dict[str, Any], raw: bytes) -> bool:
        """Log a frame and send it (:meth:`AgentPipes.send`); False when the agent's
        input is closed."""
        return self.pipes.send(raw, bool(f.get("nolf")))

    # the run

    def run(self) -> DriveResult:
        """The recording's client frames sent as the model says, the agent's frames
        judged as they come, until the recording is done or the run stops."""
        status = None
        pipes, patience = self.pipes, self.patience
        while status is None:
            if pipes.live:
                status = self.compare_live()
                patience.reset()
            elif self.step_ready():
                status = self.send_step()
                patience.reset()
            elif not self.pending and not self.recording.more and self.all_came():
                break  # the whole recording happened
            elif pipes.broken or (pipes.eof and not pipes.out):
                status = "agent_exited"
            else:
                status = self.wait_for_agent()
        if status is None:  # the client frames still in the pipe, then its end
            status = self.finish(self.opt.timeout)
        if status is None:
            status = self.floating()
        return self.end(status)

    def compare_live(self) -> str | None:
        """Compare the agent's frames read and not compared yet; "stopped" at a
        difference that stops the run."""
        live, look, judge, m = self.pipes.live, self.recording.look, self.judge, self.m
        recording = self.recording
        while live:
            # the model's first case, inline: the next recorded frame is an agent frame
            # with these bytes, no request, everything before it matched or sent,
            # nothing renamed: taken as matched, the order built past it while the agent
            # works (Matcher.take), or, when nothing can wait on it, never even parsed
            # (Matcher.skip)
            if look and m.open_a2c == 0 and m.open_c2a == 0 and not m.renamed:
                entry = look[0]
                raw = entry[1]
                if live[0][1] == raw:
                    judged = entry[2]
                    if judged == SKIP:
                        live.popleft()
                        look.popleft()
                        recording.look_bytes -= len(raw)
                        self.checked += 1
                        m.skip()
                        continue
                    if judged == TAKE and not entry[0].get("redacted"):
                        live.popleft()
                        if not self.take(look.popleft()):
                            return "stopped"
                        continue
            seq, raw = live.popleft()
            while m.open_a2c == 0 and self.admit() is not None:
                pass  # the next recorded agent frame, admitted
            fast = m.fast(raw)
            if fast is not None:
                self.checked += 1
                if asks(raw) and fast.event().kind == "request" \
                        and not self.answer(fast, raw):
                    return "stopped"
                continue
            if not judge(seq, raw):
                return "stopped"
        return None

    def take(self, entry: list[Any]) -> bool:
        """The next recorded frame (``entry``, read ahead and judged :data:`TAKE`), an
        agent frame the live one equals by its bytes: taken as matched, its answer sent
        when it is a request; False when the run stops."""
        rec, raw = entry[0], entry[1]
        self.recording.look_bytes -= len(raw)
        self.checked += 1
        # (only a request is described now: its answer is due)
        ev = described(rec, raw) if asks(raw) else None
        m = self.m
        slot = m.take(rec, raw, ev)
        if ev is not None and ev.kind == "request":
            self.client.asked(slot)
        if len(m.unbuilt) > 2 * BACKLOG:  # an agent faster than the run: it never idles
            m.build_some(BACKLOG)
        return ev is None or ev.kind != "request" or self.answer(slot, raw)

    def send_step(self) -> str | None:
        """Send the next recorded client step (after its recorded gap, ``--pace
        recorded``)."""
        slot = self.pending.popleft()
        f = slot.rec
        t = f.get("t")
        prev_t, self.prev_t = self.prev_t, t
        if self.opt.pace == "recorded" and t is not None and prev_t is not None:
            if (t - prev_t) > 0:
                self.pause((t - prev_t) / 1e9)
        status = None
        if not self.send(f, self.client.outgoing(slot.raw)):
            status = "agent_exited"
        self.last_sent = f
        if not self.verdicts(self.m.sent(slot)):
            status = "stopped"
        return status

    def wait_for_agent(self) -> str | None:
        """Nothing to compare or send: wait for the agent, as long as :class:`Patience`
        allows; "stopped" when the silence lasted longer."""
        patience = self.patience
        left = patience.left()
        if left > 0:
            self.wait(left)
            if self.pipes.moved:
                patience.reset()
            return None
        if not patience.patient:
            slot, sent = self.due(), self.last_sent
            if slot is None or sent is None:
                patience.patient = True
            elif patience.stretch(slot.rec.get("t"), sent.get("t")):
                return None
        self.silence(self.opt.timeout, patience.waited())
        return "stopped"

    def floating(self) -> str | None:
        """The recording is done: the floating notifications still due get
        :data:`acp_pipes.replay.trace.options.GRACE` to come, then the model says
        what is left over."""
        m = self.m
        until = time.monotonic() + self.opt.grace
        while (m.floats or m.held) and not self.opt.strict_order:
            if not self.judge_all():
                return "stopped"
            if not m.floats or self.pipes.eof or (left := until - time.monotonic()) <= 0:
                break
            self.wait(left)
        if not self.judge_all():
            return "stopped"
        if not self.verdicts(m.finish()):
            return "stopped"
        return None

    def finish(self, timeout: float) -> str | None:
        """Write what is left for the agent, reading it meanwhile (None when it all
        went)."""
        pipes = self.pipes
        deadline = time.monotonic() + timeout
        while pipes.out:
            left = deadline - time.monotonic()
            if left <= 0:
                self.silence(timeout)
                return "stopped"
            self.wait(left)
            if pipes.moved:
                deadline = time.monotonic() + timeout
        return "agent_exited" if pipes.broken else None

    def end(self, status: str | None) -> DriveResult:
        """The recording is done (or the run stopped): the agent's input closed, a
        grace to exit while its output is read, then its process group ended
        (:meth:`AgentPipes.end`)."""
        proc = self.proc
        self.ending = True
        self.pipes.end(self.opt.grace, stopped=status == "stopped")
        self.recording.close()
        self.client.close()
        if status is None:  # anything the agent sent after the recorded session
            if not self.judge_all():
                status = "stopped"
            elif not self.opt.strict_order and not self.verdicts(self.m.settle(final=True)):
                status = "stopped"
        if status == "agent_exited":
            status = self.exited_early()
        if status is None:
            status = "ok" if self.differences == 0 else "stopped"
        return DriveResult(status, self.differences, self.pipes.sent, self.pipes.arrived,
                           proc.returncode, self.reports, self.notes)

    def exited_early(self) -> str:
        """The agent ended before the recorded session did: a difference, or, when it
        sent nothing at all, a failure to start."""
        returncode = self.proc.returncode
        if self.pipes.arrived == 0:
            self.say({"event": "agent_failed", "returncode": returncode,
                      "message": f"the agent exited (status {returncode}) before "
                      "it sent anything: it did not start"})
            return "agent_failed"
        d = Difference("agent_exited", "the agent ended before the recorded session did")
        d.extra.update({"returncode": returncode, "sent": self.pipes.sent,
                        "received": self.checked})
        self.difference(d)
        return "agent_exited"


def drive_agent(
    trace: Trace | TraceReader | Iterable[dict[str, Any]],
    argv: Sequence[str],
    out: BinaryIO | None = None,
    options: ReplayOptions | None = None,
    *,
    agent: subprocess.Popen[bytes] | None = None,
) -> DriveResult:
    """Start ``argv`` (the agent under test), replay the recorded client frames to it and
    write the run's wire log to ``out`` (its clock and header as ``options`` say). Raises
    an OptionError for a bad clock and a UsageError when the agent cannot be started,
    both before anything is sent. ``trace`` is read as the run goes when it is a
    :class:`TraceReader`. ``agent``: the agent started already from ``argv``
    (:func:`acp_pipes.replay.trace.spawn.start_agent`), driven from here on, and ended
    here whatever happens.

    Recording a session with the echo agent in memory, then driving a live echo agent
    with it, reproduces the bytes of each direction, in order (across directions, a
    permission request's answer and the agent's frame written right after the request
    cross in flight: their order in the log is the scheduler's, as in any recording):

    >>> import io, sys, orjson
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
    ...                 ReplayOptions(clock="epoch", host=False))
    >>> r.status, r.sent == len(client)
    ('ok', True)
    >>> lines = [orjson.loads(x) for x in log.getvalue().splitlines()]
    >>> def frames(records, d):
    ...     return [x["raw"] for x in records if x.get("dir") == d]
    >>> [frames(lines, d) == frames(wire, d) for d in ("c2a", "a2c")], lines[-1]["end"]
    ([True, True], True)
    >>> len(lines) == len(wire) + 2  # the header, every frame, the end record
    True
    """
    if not argv:
        raise ValueError("no agent command")
    proc = agent
    try:
        tr = trace if isinstance(trace, (Trace, TraceReader)) else Trace.of(trace)
        opt = options or ReplayOptions()
        opt.tick()  # refused before the agent starts
    except BaseException:
        if proc is not None:
            end_agent(proc)
        raise
    if proc is None:
        proc = start_agent(argv)
    log = None
    try:
        log = open_log(out, argv, opt)
        result = _Driver(tr, proc, log, opt).run()
    except BaseException:
        try:
            if log is not None:
                log.flush()  # the frames so far, as they went
        except (OSError, ValueError):
            pass
        proc.kill()
        proc.wait()
        raise
    end_log(log, result.returncode)
    return result

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
the turn before it has ended; a floating notification is waited for by nobody), and the
recorded client answers are not sent in their place: when the live agent asks
(permission, elicitation, ``fs/*``, ``terminal/*``) and its request is the recorded one
(method and content, under the view), the recorded answer to that request is sent with
the live request's id. With ``--workspace DIR`` the recorded session's working directory
is DIR in everything sent and compared, and a recorded ``fs/write_text_file`` the
recorded client performed is performed under DIR
(:mod:`acp_pipes.replay.trace.workspace`). The timeout is only for an agent that goes
silent.

The run stops at the first difference (``--keep-going``: goes on to the end) and says
it as one report: its kind, the recorded and live frames as compared, the JSON pointers
that differ; what the model tolerated is said as notes. Once the recording is done, the
agent's input is closed and after a grace its process group ended. Every frame of the
run, both directions, goes to a new wire log (:mod:`acp_pipes.io.wire`, acp-tee's format).
"""

from __future__ import annotations

import os
import re
import select
import signal
import stat
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

import orjson

from acp_pipes.io.wire import A2C, C2A, end_record, frame_lines, header, make_clock
from acp_pipes.protocol.redact import Redactor
from acp_pipes.replay.trace.ids import id_key, id_span, splice_id
from acp_pipes.replay.trace.options import ReplayOptions
from acp_pipes.replay.trace.spawn import end_agent, exited, signal_agent, start_agent, stop_agent
from acp_pipes.replay.trace.tracefile import UNPARSED, Pair, Trace, TraceReader, parsed
from acp_pipes.sameness.jsondiff import dumps
from acp_pipes.sameness.slots import Matched, Slot
from acp_pipes.sameness.minted import rename
from acp_pipes.sameness.verdicts import Difference, Note

if TYPE_CHECKING:
    from acp_pipes.replay.trace.workspace import Workspace

__all__ = ["DriveResult", "drive_agent"]

_READ = 65536  # a pipe's default capacity: one read takes what the agent has written
_AHEAD = 256  # recorded frames read ahead of the run from a trace that can block (a pipe)
# Read ahead from a file while the agent has nothing ready: at most this many recorded
# frames, and this many of their bytes. Much of it is read while the agent starts (of a
# 1000-prompt echo session's 16,566 frames, ~5,600 before its first answer), so they are
# parsed and judged (_plain) before the run needs them; 64 frames ahead, all of it was
# done in the gaps of the session's ping-pong, where the driver's CPU is wall time
# (BENCHMARKS.md, acp-replay --client: 1.14x the bare client before, 1.09x now).
_LOOKAHEAD = 8192
_LOOKAHEAD_BYTES = 8 << 20
#: Frames matched by their bytes whose place in the model's order is not built yet (a
#: run that goes as recorded never asks for it), at most: past it they are built while
#: the agent works, so memory stays bounded (~300 bytes a frame, its record aside).
_BACKLOG = 4096
#: How many times as long as the recording waited for the next agent frame a re-drive
#: waits for it when that is longer than --timeout (:meth:`_Driver.patience`).
_PATIENCE = 4


@dataclass
class DriveResult:
    """``status``: ``ok`` (no difference; notes may say what was tolerated),
    ``stopped`` (at the first difference, or with ``--keep-going`` after the last:
    each is reported), ``agent_exited`` (the agent ended before the recorded session
    did) or ``agent_failed`` (it exited before it sent anything: it did not start).
    ``sent`` and ``received`` count the frames of the run each way."""

    status: str
    differences: int
    sent: int
    received: int
    returncode: int | None
    reports: list[dict[str, Any]] = field(default_factory=list)
    notes: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class _Log:
    """The run's wire log. A frame gets its seq and ``t`` when it is read from the agent
    or sent to it (:meth:`note`); its record is written when the run would otherwise
    wait (:meth:`flush`: before every wait on the agent or the trace, and at the end), so
    the comparing and sending between the agent's last frame and the next prompt is all
    that stands in the agent's way. Whoever reads the log as it grows has every frame by
    the time the run waits for the next, in seq order (an answer after its request)."""

    def __init__(self, out: BinaryIO | None, clock_spec: str, argv: Sequence[str], host: bool):
        self.out = out
        self.clock = make_clock(clock_spec)
        self.seq = 0
        self.redactor = Redactor()
        self.noted: list[tuple[str, int, int, Sequence[bytes], bool]] = []  # not written
        if out is not None:
            head = header(argv, started_ns=self.clock(), clock=clock_spec, host=host,
                          recorder="acp-replay --client")
            out.write(orjson.dumps(head) + b"\n")
            out.flush()

    def note(self, direction: str, raws: Sequence[bytes], nolf: bool = False) -> int:
        """Give frames received (or sent) together their seqs and one ``t``; returns the
        first seq."""
        seq = self.seq
        self.seq += len(raws)
        if self.out is not None:
            self.noted.append((direction, seq, self.clock(), raws, nolf))
        return seq

    def flush(self) -> None:
        """Write the records of the frames noted, their secrets redacted as acp-tee
        redacts them (a key of the run's own: the agent's frames are live, and a run's
        log is shared as a recording is), and flush."""
        sink = self.out
        if not self.noted or sink is None:
            return
        noted, self.noted = self.noted, []
        redactor = self.redactor
        out = bytearray()
        plain: list[dict[str, Any]] = []  # frame_record's dicts, dumped in one call
        for direction, at, t, raws, nolf in noted:
            wants = redactor.wants_c2a if direction == C2A else redactor.wants_a2c
            # wants() looks for substrings: no frame wants what their concatenation
            # does not (and for the agent's frames it holds no state)
            if not wants(raws[0] if len(raws) == 1 else b"\n".join(raws)):
                try:
                    plain += [{"seq": at + i, "t": t, "dir": direction, "raw": raw.decode()}
                              for i, raw in enumerate(raws)]
                except UnicodeDecodeError:  # raw_b64: one by one, below
                    pass
                else:
                    if nolf:
                        plain[-1]["nolf"] = True
                    continue
            if plain:
                out += _records(plain)
                plain = []
            frame_lines(out, at, t, direction, raws, nolf, redactor)
        if plain:
            out += _records(plain)
        sink.write(out)
        sink.flush()

    def end(self, returncode: int | None) -> None:
        """The log's end record: the agent's exit status (128+N, ``signal`` N, when a
        signal ended it)."""
        self.flush()
        if self.out is None or returncode is None:
            return
        signal = -returncode if returncode < 0 else None
        status = 128 + signal if signal is not None else returncode
        self.out.write(orjson.dumps(end_record(self.clock(), status, self.seq, signal))
                       + b"\n")
        self.out.flush()


def _records(recs: list[dict[str, Any]]) -> bytes:
    r"""Wire records of flat dicts (ints, strings, true), one a line, in one orjson call
    (a call a record cost twice as much): the array's separators ``},{"seq":`` become
    line ends, and nothing else can be one, since every quote inside a string is
    escaped.

    >>> recs = [{"seq": 0, "t": 1, "dir": "a2c", "raw": '{"x":"},{\\"seq\\":"}'},
    ...         {"seq": 1, "t": 1, "dir": "c2a", "raw": "},{\"seq\":", "nolf": True}]
    >>> _records(recs) == b"".join(orjson.dumps(r) + b"\n" for r in recs)
    True
    """
    return orjson.dumps(recs)[1:-1].replace(b'},{"seq":', b'}\n{"seq":') + b"\n"


class _Ahead:
    """A trace that can block (a pipe, a FIFO, a terminal), read on a thread of its own
    at most :data:`_AHEAD` frames ahead, so the run keeps reading the agent while the
    recording is still to come; a byte on :attr:`fd` says something was read."""

    END = object()

    def __init__(self, pairs: Iterable[Pair]) -> None:
        self.queue: deque[Pair] = deque()
        self.room = threading.Semaphore(_AHEAD)
        self.lock = threading.Lock()  # done and closed: the pipe is closed once, by the last
        self.done = False
        self.closed = False
        self.error: BaseException | None = None
        self.fd, self._wake = os.pipe()
        os.set_blocking(self.fd, False)
        os.set_blocking(self._wake, False)
        threading.Thread(target=self._read, args=(iter(pairs),), name="acp-replay-trace",
                         daemon=True).start()

    def _read(self, it: Iterator[Pair]) -> None:
        try:
            for pair in it:
                self.room.acquire()
                self.queue.append(pair)
                self._signal()
        except BaseException as e:  # raised where the run reads the trace
            self.error = e
        finally:
            with self.lock:
                self.done = True
                if self.closed:
                    self._close()
                else:
                    self._signal()

    def _signal(self) -> None:
        try:
            os.write(self._wake, b"\0")
        except BlockingIOError:  # full: a wake-up is pending already
            pass

    def get(self) -> Pair | None | object:
        """The next pair; None when none is read yet, :attr:`END` after the last."""
        if self.queue:
            self.room.release()
            return self.queue.popleft()
        if self.done:
            if self.queue:  # appended just before done was set
                return self.get()
            if self.error is not None:
                raise self.error
            return self.END
        return None

    def drained(self) -> None:
        try:
            while os.read(self.fd, 4096):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        """Done with the trace; its pipe is closed once the thread is done too (closed
        before, its number could be another file's when the thread writes to it)."""
        with self.lock:
            self.closed = True
            if self.done:
                self._close()

    def _close(self) -> None:
        os.close(self.fd)
        os.close(self._wake)


def _may_block(trace: Trace | TraceReader) -> bool:
    """Whether reading ``trace`` can wait (a pipe, a FIFO, a terminal, not a file)."""
    if not isinstance(trace, TraceReader):
        return False  # in memory
    try:
        st = os.fstat(0) if trace.source == "stdin" else os.stat(trace.source)
    except (OSError, ValueError):
        return True
    return not stat.S_ISREG(st.st_mode)


class _Driver:
    """One run (see :func:`drive_agent`), on the calling thread alone: the agent's
    output is read, and its input written, as :func:`select.poll` says they are ready,
    between the comparisons (a thread reading the agent cost more in handing the
    interpreter lock back and forth than the comparisons themselves). A frame too big for
    the pipe goes in pieces while the agent's output is still read, so an agent writing
    while it is sent one never waits on the driver. The trace is read as the run needs
    it, so memory holds the frames in flight, not the session.

    What is the same is the model's (:class:`acp_pipes.sameness.match.Matcher`): the
    recording's frames are admitted to it as they are read, the agent's frames matched
    against it (most by their bytes alone, inline in :meth:`run`), and the client's
    frames go when it says a client would have sent them."""

    def __init__(self, trace: Trace | TraceReader, proc: subprocess.Popen[bytes], log: _Log,
                 opt: ReplayOptions):
        from acp_pipes.sameness.match import Matcher
        from acp_pipes.sameness.volatile import Rules, View

        self.ahead = _Ahead(trace) if _may_block(trace) else None
        self.it = iter(trace) if self.ahead is None else iter(())
        # the recording read and not yet admitted to the matcher, in order (read ahead
        # from a file while the agent works, :meth:`idle`): [record, bytes, how it was
        # judged: an agent frame's _SKIP or _TAKE, a client frame's event, or None: not
        # described yet]
        self.look: deque[list[Any]] = deque()
        self.undescribed: deque[list[Any]] = deque()  # of those, to describe
        self.look_bytes = 0
        self.trace_error: Exception | None = None  # met reading ahead, raised in its place
        self.proc = proc
        self.log = log
        self.opt = opt
        self.m = Matcher(View(Rules(ignore=tuple(opt.ignore))), rules_for=opt.rules_for,
                         noise=opt.noise, keep_going=opt.keep_going)
        self.live: deque[tuple[int, bytes]] = deque()  # (seq, raw), not yet compared
        self.arrived = 0
        self.eof = False
        self.reports: list[dict[str, Any]] = []
        self.differences = 0
        self.notes = 0
        self.checked = 0  # live agent frames compared
        self.pending: deque[Slot] = deque()  # the recorded client steps still to send
        # recorded request id -> its recorded answers, in order (an id can come again once
        # answered, and the trace is read ahead)
        self.answers: dict[bytes, deque[Slot]] = {}
        self.trace_done = False
        self.sent = 0
        self.last_sent: dict[str, Any] | None = None
        self.workspace: Workspace | None = None
        self.cwd: str | None = None  # the recorded session's working directory
        self.unwritten: list[dict[str, Any]] = []  # writes not performed (no workspace)
        if opt.workspace is not None:
            from acp_pipes.replay.trace.workspace import Workspace

            self.workspace = Workspace(opt.workspace)
        # the pipes
        if proc.stdout is None or proc.stdin is None:
            raise ValueError("the agent must be started with stdin and stdout on pipes")
        self.rfd = proc.stdout.fileno()
        self.wfd: int | None = proc.stdin.fileno()
        os.set_blocking(self.rfd, False)
        os.set_blocking(self.wfd, False)
        self.poll = select.poll()
        self.poll.register(self.rfd, select.POLLIN)
        self.tail: list[bytes] = []  # the agent's frame still without its LF
        self.out = bytearray()  # bytes for the agent not written yet
        self.written = 0  # bytes written to the agent since out was last empty
        self.ends: deque[int] = deque()  # where each frame in out ends (as written counts)
        self.broken = False  # the agent's input is closed
        self.moved = False  # the last wait read or wrote something
        self.ending = False  # the run is over: no more reading ahead

    def say(self, event: dict[str, Any]) -> None:
        event = {"event": event.pop("event"), "tool": "acp-replay", **event}
        self.reports.append(event)
        if self.opt.report is not None:
            self.opt.report(event)

    # the pipes

    def wait(self, timeout: float | None, trace: bool = False) -> None:
        """Take what the agent's pipes have ready; when nothing is, write the log and
        read the trace ahead (:meth:`idle`), then wait up to ``timeout`` s (None: no
        limit) for the agent's output, room in its input when bytes wait to go, or
        (``trace``) the trace read ahead. :attr:`moved` says whether bytes went either
        way."""
        self.moved = False
        ready = self.poll.poll(0)
        if not ready:
            self.log.flush()  # all of it before the run waits
            if not trace and self.idle():
                return
            ahead = self.ahead if trace else None
            if ahead is not None:
                self.poll.register(ahead.fd, select.POLLIN)
            try:
                ready = self.poll.poll(None if timeout is None
                                       else max(0, int(timeout * 1000) + 1))
            finally:
                if ahead is not None:
                    self.poll.unregister(ahead.fd)
        self.ready(ready)

    def ready(self, events: list[tuple[int, int]]) -> None:
        for fd, _ in events:
            if fd == self.rfd:
                self.read()
            elif fd == self.wfd:
                self.write()
            elif self.ahead is not None:
                self.ahead.drained()

    def idle(self) -> bool:
        """Read the trace ahead (up to :data:`_LOOKAHEAD` frames) while the agent has
        nothing ready, so its parsing is done while the agent works, not after; True
        when the agent's pipes were ready (and taken)."""
        if self.ahead is not None or self.ending:
            return False
        look = self.look
        while (len(look) < _LOOKAHEAD and self.look_bytes < _LOOKAHEAD_BYTES
               and self.read_ahead(4)):
            events = self.poll.poll(0)
            if events:
                self.ready(events)
                return True
        # the frames read ahead described, a frame at a time (~5 us a frame: the agent's
        # next frame waits on no more than one of them)
        undescribed = self.undescribed
        while undescribed:
            entry = undescribed.popleft()
            if entry[2] is None:
                entry[2] = _described(entry[0], entry[1])
            events = self.poll.poll(0)
            if events:
                self.ready(events)
                return True
        # the order built past the frames matched by their bytes once they are many: a
        # run that goes as recorded never needs it (a difference builds it at once)
        m = self.m
        while len(m.unbuilt) > _BACKLOG and m.build_some(1):
            events = self.poll.poll(0)
            if events:
                self.ready(events)
                return True
        return False

    def read_ahead(self, n: int = 16) -> bool:
        """Read up to ``n`` frames of a trace file into :attr:`look` (an agent frame
        judged as it is read: :func:`_skippable`); False at its end (or an error, kept
        to be raised where the run reaches it, as without reading ahead)."""
        if self.trace_error is not None:
            return False
        it, look = self.it, self.look
        try:
            for _ in range(n):
                pair = next(it, None)
                if pair is None:
                    self.it = iter(())
                    return False
                rec, raw = pair
                if rec["dir"] == A2C:  # (ahead_one's first case, inline: most frames)
                    self.look_bytes += len(raw)
                    look.append([rec, raw, _SKIP if _skippable(rec, raw) else _TAKE])
                else:
                    self.ahead_one(rec, raw)
        except Exception as e:
            self.trace_error = e
            return False
        return True

    def ahead_one(self, rec: dict[str, Any], raw: bytes) -> None:
        """One frame read ahead into :attr:`look`: an agent frame judged by its bytes
        (:func:`_skippable`, cheap; described when the model needs it), a client frame
        described later, while the agent works (:meth:`idle`), or when it is needed."""
        self.look_bytes += len(raw)
        if rec["dir"] == A2C:
            self.look.append([rec, raw, _SKIP if _skippable(rec, raw) else _TAKE])
        elif ("kind" not in rec and b'"method"' in raw and b'"result"' not in raw
              and b'"error"' not in raw and b"\\u" not in raw):
            self.look.append([rec, raw, _STEP])  # (an answer has a result or an error)
        else:
            entry = [rec, raw, None]
            self.look.append(entry)
            self.undescribed.append(entry)

    def mapped(self, slot: Slot) -> None:
        """The recorded session's working directory: with ``--workspace``, mapped onto
        it from here on (in what is sent, and in what is compared)."""
        ev = slot.event()
        params = ev.value.get("params") if ev.value.__class__ is dict else None
        cwd = params.get("cwd") if params.__class__ is dict else None
        if cwd.__class__ is not str or not cwd.startswith("/"):
            return
        self.cwd = cwd
        if self.workspace is not None:
            self.m.view = self.m.view.with_paths({cwd: self.workspace.root})

    def read(self) -> None:
        """Read what the agent has written and give its frames their seqs as they
        come."""
        try:
            chunk = os.read(self.rfd, _READ)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        self.moved = True
        if not chunk:
            self.eof = True
            self.poll.unregister(self.rfd)
            if self.tail:  # the last frame, without LF
                raw = b"".join(self.tail)
                self.tail = []
                self.live.append((self.log.note(A2C, [raw], nolf=True), raw))
                self.arrived += 1
            return
        end = chunk.rfind(b"\n")
        if end < 0:
            self.tail.append(chunk)
            return
        if self.tail:
            self.tail.append(chunk[:end])
            raws = b"".join(self.tail).split(b"\n")
        else:
            raws = chunk[:end].split(b"\n")
        self.tail = [chunk[end + 1:]] if end + 1 < len(chunk) else []
        seq = self.log.note(A2C, raws)
        self.live.extend(zip(range(seq, seq + len(raws)), raws, strict=True))
        self.arrived += len(raws)

    def write(self) -> None:
        """Write what the agent's input pipe has room for."""
        wfd = self.wfd
        if wfd is None:
            return
        try:
            n = os.write(wfd, self.out)
        except BlockingIOError:
            return
        except (OSError, ValueError):
            self.close_input(broken=True)
            return
        self.moved = True
        del self.out[:n]
        self.written += n
        while self.ends and self.ends[0] <= self.written:
            self.ends.popleft()
            self.sent += 1
        if not self.out:
            self.written = 0
            self.poll.unregister(wfd)

    def close_input(self, broken: bool = False) -> None:
        wfd = self.wfd
        if wfd is None:
            return
        if self.out:
            self.poll.unregister(wfd)
            self.out.clear()
            self.ends.clear()
        self.wfd = None
        self.broken = broken
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass

    def pause(self, seconds: float) -> None:
        """``--pace recorded``: wait ``seconds``, the agent's output read meanwhile; a
        sleep of the caller's own is called as it is."""
        if self.opt.sleep is not time.sleep:
            self.log.flush()
            self.opt.sleep(seconds)
            return
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0 and not self.broken:
            if self.eof and not self.out:
                self.log.flush()
                time.sleep(left)
                break
            self.wait(left)

    # the trace

    def next_pair(self) -> Pair | None:
        """The next recorded frame, None after the last; from a trace that can block,
        the agent's output is read while it comes."""
        if self.trace_error is not None:
            raise self.trace_error
        if self.ahead is None:
            return next(self.it, None)
        while (got := self.ahead.get()) is None:
            self.wait(None, trace=True)
        return got if isinstance(got, tuple) else None  # else _Ahead.END

    def admit(self) -> Slot | None:
        """Admit the next recorded frame to the matcher (None after the last): a client
        answer (to an agent request) is kept by the request's id, any other client
        frame queued to be sent when the model says."""
        look = self.look
        if not look:
            if self.trace_done:
                return None
            if self.ahead is None:
                self.read_ahead()
            else:
                pair = self.next_pair()
                if pair is not None:
                    self.ahead_one(*pair)
            if not look:
                if self.trace_error is not None:
                    raise self.trace_error
                self.trace_done = True
                return None
        rec, raw, judged = look.popleft()
        self.look_bytes -= len(raw)
        if judged is None:
            judged = _described(rec, raw)
        if judged.__class__ is int:
            slot = self.m.admit(rec, raw, step=True if judged == _STEP else None)
        else:
            slot = self.m.admit(rec, raw, judged)
        if slot.dir == C2A:
            if not slot.step:
                key = id_key(slot.event().rid)
                if key in self.answers:
                    self.answers[key].append(slot)
                else:
                    self.answers[key] = deque((slot,))
            else:
                self.pending.append(slot)
            if self.cwd is None and b'"cwd"' in raw:
                self.mapped(slot)
        return slot

    @property
    def more(self) -> bool:
        """Whether the recording has frames not admitted yet."""
        return bool(self.look) or not self.trace_done

    def read_for_live(self) -> None:
        """Admit the recording as far as a live agent frame can reach: through the
        second client step not sent yet (a floating notification may come a step
        early), or to its end."""
        while len(self.pending) < 2 and self.admit() is not None:
            pass

    def step_ready(self) -> bool:
        """Whether the next recorded client step may go. Its frame is admitted once no
        agent frame recorded before it can hold it back by its bytes alone (one that
        names no floating kind, :func:`acp_pipes.sameness.match.may_float`), so a
        turn's frames are matched by their bytes as they come, never admitted."""
        m = self.m
        while not self.pending:
            if not self.look:
                if self.admit() is None:
                    return False
                continue
            rec, raw, _ = self.look[0]
            if rec["dir"] == A2C and (self.opt.strict_order or m.holds(raw)):
                return False  # the step waits for this agent frame
            self.admit()
        return self.may_send(self.pending[0])

    # judging

    def difference(self, d: Difference) -> None:
        """Say a difference, with the client frame sent last and, without
        ``--workspace``, the recorded writes the re-drive did not perform."""
        self.differences += 1
        event = d.to_event()
        if self.last_sent is not None:
            event["after_client_seq"] = self.last_sent.get("seq")
        if self.unwritten:
            event["unperformed_writes"] = list(self.unwritten)
            paths = ", ".join(w["path"] for w in self.unwritten[:3])
            event["message"] += (f" (after {len(self.unwritten)} recorded file write"
                                 f"{'s' if len(self.unwritten) != 1 else ''} the re-drive "
                                 f"did not perform: {paths}; give --workspace DIR to "
                                 "perform them)")
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
            got = self.m.in_order(raw, seq)
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

    def answer(self, slot: Slot, raw: bytes) -> bool:
        """Send the recorded answer to the recorded request the live one matched (same
        method and content under the renaming), with the live request's id."""
        rec = slot.event()
        key = id_key(rec.rid)
        while key not in self.answers and self.admit() is not None:
            pass
        got = None
        if key in self.answers:
            queued = self.answers[key]
            got = queued.popleft()
            if not queued:
                del self.answers[key]
        span = _id_span(raw, True)  # (it matched a request: it has a top-level id)
        if got is None or span is None:
            self.difference(Difference(
                "unanswerable", f"the agent's request {rec.method} (recorded seq {rec.seq})"
                " has no answer in the recording", rec, None, None, _value(raw)))
            return self.opt.keep_going and span is not None and got is not None
        token = raw[span[0]:span[1]]
        if self.opt.remap_log is not None:
            self.opt.remap_log.write(b'{"recorded":' + dumps(rec.rid) + b',"live":'
                                     + token + b',"dir":"a2c","seq":'
                                     + dumps(rec.seq) + b"}\n")
        if rec.method == "fs/write_text_file":
            self.perform(got, _value(raw), rec)
        araw = self.outgoing(got.raw)
        aspan = _id_span(araw, True)  # an answer (response or error) has an id
        ok = self.send(got.rec, araw if aspan is None else splice_id(araw, token, aspan))
        if ok:
            self.verdicts(self.m.sent(got))
        return ok

    def perform(self, answer: Slot, live: Any, rec: Any) -> None:
        """A file write the recorded client performed (it answered with a result):
        performed under ``--workspace``, else noted as not performed."""
        value = answer.event().value
        if value.__class__ is not dict or "result" not in value:
            return  # the recorded client refused it: nothing to perform
        params = live.get("params") if live.__class__ is dict else None
        if params.__class__ is not dict:
            return
        path, content = params.get("path"), params.get("content")
        if self.workspace is None:
            self.unwritten.append({"path": path, "seq": rec.seq})
            return
        why = self.workspace.write(path, content) if isinstance(path, str) \
            and isinstance(content, str) else "no path and text content"
        if why is not None:
            self.notes += 1
            self.say({"event": "note", "kind": "write_refused", "seq": rec.seq,
                      "method": rec.method, "path": path,
                      "message": f"the recorded write of {path} was not performed: {why}"})

    def outgoing(self, raw: bytes) -> bytes:
        """A recorded client frame as it goes now: with the learned names, and under
        ``--workspace`` the recorded working directory mapped onto it (its bytes kept
        when neither applies)."""
        m = self.m
        if not m.renamed and not m.view.maps_paths:
            return raw
        value = _value(raw)
        new = rename(value, m.names) if m.renamed else value
        new = m.view.map_paths(new)
        return raw if new is value else orjson.dumps(new)

    def send(self, f: dict[str, Any], raw: bytes) -> bool:
        """Log a frame, then send it: written at once as far as the pipe has room, the
        rest as the agent reads (:meth:`wait`). False when the agent's input is closed."""
        # what the agent wrote before this frame goes is logged before it (seq is receipt
        # order), and the frame gets its seq before it is sent: the answer follows it
        ready = self.poll.poll(0)
        if ready:
            self.ready(ready)
        if self.wfd is None:
            return False
        nolf = bool(f.get("nolf"))
        self.log.note(C2A, [raw], nolf)
        data = raw if nolf else raw + b"\n"
        if not self.out:
            try:
                n = os.write(self.wfd, data)
            except BlockingIOError:
                n = 0
            except (OSError, ValueError):
                self.close_input(broken=True)
                return False
            if n == len(data):
                self.sent += 1
                return True
            self.poll.register(self.wfd, select.POLLOUT)
            self.written = n
            self.out += memoryview(data)[n:]
        else:
            self.out += data
        self.ends.append(self.written + len(self.out))
        return True

    def may_send(self, slot: Slot) -> bool:
        if self.opt.strict_order:
            return self.m.in_order_sendable(slot)
        return self.m.may_send(slot)

    def run(self) -> DriveResult:
        timeout = self.opt.timeout
        deadline = time.monotonic() + timeout
        prev_t = None
        status = None
        live, look, judge, m = self.live, self.look, self.judge, self.m
        silent_since, patient = time.monotonic(), False
        while status is None:
            if live:
                while live:
                    # the model's first case, inline: the next recorded frame is an agent
                    # frame with these bytes, no request, everything before it matched
                    # or sent, nothing renamed: taken as matched, the order built past
                    # it while the agent works (Matcher.take), or, when nothing can
                    # wait on it, never even parsed (Matcher.skip)
                    if look and m.open_a2c == 0 and m.open_c2a == 0 and not m.renamed:
                        entry = look[0]
                        raw = entry[1]
                        if live[0][1] == raw:
                            judged = entry[2]
                            if judged == _SKIP:
                                live.popleft()
                                look.popleft()
                                self.look_bytes -= len(raw)
                                self.checked += 1
                                m.skip()
                                continue
                            rec = entry[0]
                            if judged == _TAKE and not rec.get("redacted"):
                                live.popleft()
                                look.popleft()
                                self.look_bytes -= len(raw)
                                self.checked += 1
                                # (only a request is described now: its answer is due)
                                ev = _described(rec, raw) if _asks(raw) else None
                                slot = m.take(rec, raw, ev)
                                if ev is not None and ev.kind == "request" \
                                        and not self.answer(slot, raw):
                                    status = "stopped"
                                    break
                                continue
                    seq, raw = live.popleft()
                    while m.open_a2c == 0 and self.admit() is not None:
                        pass  # the next recorded agent frame, admitted
                    fast = m.fast(raw)
                    if fast is not None:
                        self.checked += 1
                        if _asks(raw) and fast.event().kind == "request" \
                                and not self.answer(fast, raw):
                            status = "stopped"
                            break
                        continue
                    if not judge(seq, raw):
                        status = "stopped"
                        break
                deadline = time.monotonic() + timeout
                silent_since, patient = time.monotonic(), False
                continue
            if self.step_ready():
                slot = self.pending.popleft()
                f = slot.rec
                t = f.get("t")
                if self.opt.pace == "recorded" and t is not None and prev_t is not None:
                    if (t - prev_t) > 0:
                        self.pause((t - prev_t) / 1e9)
                prev_t = t
                if not self.send(f, self.outgoing(slot.raw)):
                    status = "agent_exited"
                self.last_sent = f
                if not self.verdicts(m.sent(slot)):
                    status = "stopped"
                deadline = time.monotonic() + timeout
                silent_since, patient = time.monotonic(), False
                continue
            if not self.pending and not self.more and self.all_came():
                break  # the whole recording happened
            if self.broken or (self.eof and not self.out):
                status = "agent_exited"
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                more = 0.0 if patient else self.patience(timeout)
                patient = True
                if more > 0:
                    deadline += more
                    continue
                self.silence(timeout, deadline - silent_since)
                status = "stopped"
                continue
            self.wait(left)
            if self.moved:
                deadline = time.monotonic() + timeout
                silent_since, patient = time.monotonic(), False
        if status is None:  # the client frames still in the pipe, then its end
            status = self.finish(timeout)
        if status is None:
            status = self.floating()
        return self.end(status)

    def all_came(self) -> bool:
        """Every recorded agent frame a client would wait for has come."""
        if self.opt.strict_order:
            return next(self.m.unmatched(), None) is None
        return self.m.all_came()

    def floating(self) -> str | None:
        """The recording is done: the floating notifications still due get
        :data:`acp_pipes.replay.trace.options.GRACE` to come, then the model says
        what is left over."""
        m = self.m
        until = time.monotonic() + self.opt.grace
        while (m.floats or m.held) and not self.opt.strict_order:
            while self.live:
                if not self.judge(*self.live.popleft()):
                    return "stopped"
            if not m.floats or self.eof or (left := until - time.monotonic()) <= 0:
                break
            self.wait(left)
        while self.live:
            if not self.judge(*self.live.popleft()):
                return "stopped"
        if not self.verdicts(m.finish()):
            return "stopped"
        return None

    def patience(self, timeout: float) -> float:
        """How much longer than ``timeout`` the agent may stay silent now: the recording
        took its time here too (an agent's start-up, a slow tool), so the wait for the
        agent frame due next may last four times as long as the recording waited for it
        after the client frame sent last (a loaded CI machine is slower, not wrong)."""
        slot = self.due()
        sent = self.last_sent
        if slot is None or sent is None:
            return 0.0
        due, since = slot.rec.get("t"), sent.get("t")
        if not isinstance(due, int) or not isinstance(since, int) or due <= since:
            return 0.0
        return max(0.0, _PATIENCE * (due - since) / 1e9 - timeout)

    def due(self) -> Slot | None:
        """The recorded agent frame the run waits for (admitted to the matcher first,
        when it is not yet)."""
        m = self.m
        while True:
            slot = m.waiting_for() if not self.opt.strict_order else \
                next(m.unmatched(), None)
            if slot is not None or self.admit() is None:
                return slot

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

    def finish(self, timeout: float) -> str | None:
        """Write what is left for the agent, reading it meanwhile (None when it all
        went)."""
        deadline = time.monotonic() + timeout
        while self.out:
            left = deadline - time.monotonic()
            if left <= 0:
                self.silence(timeout)
                return "stopped"
            self.wait(left)
            if self.moved:
                deadline = time.monotonic() + timeout
        return "agent_exited" if self.broken else None

    def drain(self, seconds: float, until_exit: bool = False) -> None:
        """Read the agent's output, up to its EOF (``until_exit``: or its exit) or for
        ``seconds``."""
        until = time.monotonic() + seconds
        while not self.eof and (left := until - time.monotonic()) > 0:
            if until_exit and exited(self.proc, 0):
                return
            self.wait(min(left, 0.05) if until_exit else left)

    def end(self, status: str | None) -> DriveResult:
        """The recording is done (or the run stopped): the agent's input closed, a
        grace to exit while its output is read, then its process group ended
        (:func:`acp_pipes.replay.trace.spawn.stop_agent`)."""
        proc = self.proc
        self.ending = True
        self.close_input()
        grace = self.opt.grace
        if status == "stopped":
            signal_agent(proc, signal.SIGTERM)
        until = time.monotonic() + grace
        self.drain(grace, until_exit=True)  # the agent ends once its input does
        self.log.flush()
        if not exited(proc, max(0.0, until - time.monotonic())):
            signal_agent(proc, signal.SIGTERM)
            self.drain(grace, until_exit=True)
        stop_agent(proc, grace)  # SIGKILL what is left of its group, reaped
        self.drain(0.2)  # what it wrote last (a child of its own may hold the pipe)
        self.log.flush()
        if self.ahead is not None:
            self.ahead.close()
        if self.workspace is not None:
            self.workspace.close()
        if status is None:  # anything the agent sent after the recorded session
            while self.live and status is None:
                if not self.judge(*self.live.popleft()):
                    status = "stopped"
            if status is None and not self.opt.strict_order \
                    and not self.verdicts(self.m.settle(final=True)):
                status = "stopped"
        if status == "agent_exited":
            if self.arrived == 0:
                status = "agent_failed"
                self.say({"event": "agent_failed", "returncode": proc.returncode,
                          "message": f"the agent exited (status {proc.returncode}) before "
                          "it sent anything: it did not start"})
            else:
                d = Difference("agent_exited", "the agent ended before the recorded "
                               "session did")
                d.extra.update({"returncode": proc.returncode, "sent": self.sent,
                                "received": self.checked})
                self.difference(d)
        if status is None:
            status = "ok" if self.differences == 0 else "stopped"
        return DriveResult(status, self.differences, self.sent, self.arrived,
                           proc.returncode, self.reports, self.notes)


#: How a recorded frame read ahead is judged (:meth:`_Driver.ahead_one`): an agent frame
#: matched by its bytes alone needs nothing more (_SKIP: nothing can wait on it), or its
#: place in the order, built later (_TAKE); a client frame with "method" in its bytes is
#: a step (_STEP: described when the order needs it); any other is described
#: (:func:`_described`).
_SKIP, _TAKE, _STEP = 1, 2, 3


def _described(rec: dict[str, Any], raw: bytes) -> Any:
    """A recorded frame described for the model (:func:`acp_pipes.sameness.events.describe`),
    its place in the run given when it is admitted."""
    from acp_pipes.sameness.events import describe

    return describe(-1, rec["dir"], raw, seq=rec.get("seq"))


def _asks(raw: bytes) -> bool:
    """Whether an agent frame's bytes may be a request (whose answer is due): one without
    ``"id"`` and ``"method"`` in its bytes, nor a ``\\u`` escape that could spell them,
    is none."""
    return b'"id"' in raw and b'"method"' in raw or b"\\u" in raw


def _skippable(rec: dict[str, Any], raw: bytes) -> bool:
    r"""Whether a recorded agent frame, matched by its bytes, needs nothing more: nothing
    redacted, not a frame record (whose ``kind`` says what it is), and nothing can wait
    on it: no ``"id"`` (no answer, no request), no v2 ``state_update`` ``idle`` (the end
    of a turn), no ``\u`` escape that could spell either. Judged once, as the trace is
    read ahead while the agent works, so that what stands between the agent's frames and
    the next prompt is a comparison of bytes (and the model need not even parse it).

    >>> _skippable({}, b'{"method":"session/update","params":{"x":1}}')
    True
    >>> [_skippable({}, b) for b in (b'{"id":1,"result":{}}', b'{"\\u0069d":1}',
    ...                              b'{"update":{"state":"idle"}}')]
    [False, False, False]
    """
    # (three searches for bytes: each a memchr; one regex of the three cost 3 us a frame)
    return ("kind" not in rec and not rec.get("redacted") and b'"id"' not in raw
            and b'"idle"' not in raw and b"\\u" not in raw)


#: a top-level id member's value token, when ``"id"`` is in the bytes once (see _id_span)
_ID_TOKEN = re.compile(rb'"id"[ \t\r\n]*:[ \t\r\n]*("(?:[^"\\]|\\.)*"|[^,}\]\s{\[][^,}\]\s]*)',
                       re.S)


def _id_span(raw: bytes, has_id: bool) -> tuple[int, int] | None:
    """:func:`acp_pipes.protocol.jsonrpc.id_span` of a JSON object that has a top-level ``id``
    (``has_id``), found at once when ``"id"`` is in its bytes once and no ``\\u``
    escape could spell it otherwise: then that one is the top-level key. Else (a nested
    id too, or an object or array as the id) the scanner walks the object, which for a
    request with big params took ~0.1 ms.

    >>> raw = b'{"jsonrpc":"2.0","id" :\t"r-1","method":"m","params":{"x":[1]}}'
    >>> raw[slice(*_id_span(raw, True))], _id_span(raw, True) == id_span(raw)
    (b'"r-1"', True)
    >>> raw = b'{"id":7,"params":{"id":1}}'  # twice: the scanner's answer
    >>> _id_span(raw, True) == id_span(raw) == (6, 7)
    True
    """
    if has_id and b"\\u" not in raw and raw.count(b'"id"') == 1:
        m = _ID_TOKEN.search(raw)
        if m is not None:
            return m.span(1)
    return id_span(raw)


def _value(raw: bytes) -> Any:
    """A frame's JSON value (:func:`acp_pipes.replay.trace.tracefile.parsed`); the text itself
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
    agent: subprocess.Popen[bytes] | None = None,
) -> DriveResult:
    """Start ``argv`` (the agent under test), replay the recorded client frames to it and
    write the run's wire log to ``out``. Raises an OptionError for a bad ``clock`` and a
    UsageError when the agent cannot be started, both before anything is sent.
    ``trace`` is read as the run goes when it is a :class:`TraceReader`. ``agent``: the
    agent started already from ``argv`` (:func:`acp_pipes.replay.trace.spawn.start_agent`),
    driven from here on, and ended here whatever happens.

    Recording a session with the echo agent in memory, then driving a live echo agent
    with it, reproduces the bytes of each direction, in order (across directions, a
    permission request's answer and the agent's frame written right after the request
    cross in flight: their order in the log is the scheduler's, as in any recording):

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
        make_clock(clock)  # refused before the agent starts
    except BaseException:
        if proc is not None:
            end_agent(proc)
        raise
    if proc is None:
        proc = start_agent(argv)
    log = None
    try:
        log = _Log(out, clock, argv, host)
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
    log.end(result.returncode)
    return result

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

import os
import re
import select
import stat
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

import orjson

from acp_pipes.jsondiff import dumps
from acp_pipes.minted import drop_clocks, learn, rename
from acp_pipes.redact import Redactor
from acp_pipes.replay.trace.ids import id_key, id_span, splice_id
from acp_pipes.replay.trace.options import ReplayOptions
from acp_pipes.replay.trace.report import pointer_diff
from acp_pipes.replay.trace.spawn import end_agent, start_agent
from acp_pipes.replay.trace.tracefile import UNPARSED, Pair, Trace, TraceReader, classify, parsed
from acp_pipes.wire import A2C, C2A, end_record, frame_lines, header, make_clock

if TYPE_CHECKING:
    from acp_pipes.normalize import Normalizer

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
_TAKE = 64  # frames taken from those read ahead at a time


@dataclass
class DriveResult:
    """``status``: ``ok`` (no difference), ``stopped`` (at the first difference, which
    is reported: a re-drive always stops there, ``strict`` or not) or ``agent_exited``
    (the agent ended before the recorded session did). ``sent`` and ``received`` count
    the frames of the run each way."""

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
    it, so memory holds the frames in flight, not the session."""

    def __init__(self, trace: Trace | TraceReader, proc: subprocess.Popen[bytes], log: _Log,
                 opt: ReplayOptions):
        self.ahead = _Ahead(trace) if _may_block(trace) else None
        self.it = iter(trace) if self.ahead is None else iter(())
        # read ahead from a file (:meth:`idle`): (record, bytes, plain: see _plain)
        self.look: deque[tuple[dict[str, Any], bytes, bool]] = deque()
        self.look_bytes = 0
        self.trace_error: Exception | None = None  # met reading ahead, raised in its place
        self.proc = proc
        self.log = log
        self.opt = opt
        self._norm: Normalizer | None = None  # made when a frame is first compared as JSON
        self.live: deque[tuple[int, bytes]] = deque()  # (seq, raw), not yet compared
        self.arrived = 0
        self.eof = False
        self.reports: list[dict[str, Any]] = []
        self.differences = 0
        self.checked = 0  # live agent frames compared
        # recorded agent frames not yet compared: (record, bytes, plain: see _plain)
        self.recorded: deque[tuple[dict[str, Any], bytes, bool]] = deque()
        self.seen_a2c = 0  # recorded agent frames read
        self.pending: deque[tuple[dict[str, Any], bytes, int]] = deque()  # to send
        # recorded request id -> its recorded answers, in order (an id can come again once
        # answered, and the trace is read ahead)
        self.answers: dict[bytes, deque[Pair]] = {}
        self.trace_done = False
        self.names: dict[str, str] = {}  # minted values: recorded -> live
        self.back: dict[str, str] = {}
        self.renamed = False  # some learned name differs (else equal bytes are equal)
        self.sent = 0
        self.last_sent: dict[str, Any] | None = None
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

    @property
    def norm(self) -> Normalizer:
        """The ``--ignore`` normaliser, made (and :mod:`acp_pipes.canonical` loaded, ~15
        ms) when a frame is first compared as JSON: a run whose frames are the recorded
        bytes never needs it."""
        if self._norm is None:
            self._norm = self.opt.normalizer()
        return self._norm

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
               and self.read_ahead()):
            events = self.poll.poll(0)
            if events:
                self.ready(events)
                return True
        return False

    def read_ahead(self, n: int = 16) -> bool:
        """Read up to ``n`` frames of a trace file into :attr:`look`; False at its end
        (or an error, kept to be raised where the run reaches it, as without reading
        ahead)."""
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
                self.look_bytes += len(raw)
                if rec["dir"] == A2C:
                    look.append((rec, raw, _plain(rec, raw)))
                else:
                    classify(rec, raw)
                    look.append((rec, raw, False))
        except Exception as e:
            self.trace_error = e
            return False
        return True

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

    def read_trace(self) -> None:
        """Read more of the recording (up to :data:`_TAKE` frames of what was read ahead,
        else a few frames of a file, else one): an agent frame is queued for comparison,
        a client answer (to an agent request) kept by the request's id, any other client
        frame queued to be sent once the agent frames recorded before it have come."""
        look = self.look
        if not look and self.ahead is None:
            self.read_ahead()
        for _ in range(_TAKE):
            if look:
                f, raw, plain = look.popleft()
                self.look_bytes -= len(raw)
            else:
                pair = self.next_pair()
                if pair is None:
                    self.trace_done = True
                    return
                f, raw = pair
                plain = f["dir"] == A2C and _plain(f, raw)
            if f["dir"] == A2C:
                self.recorded.append((f, raw, plain))
                self.seen_a2c += 1
            else:
                c = classify(f, raw)
                if c.get("kind") in ("response", "error"):
                    key = id_key(c.get("id"))
                    if key in self.answers:
                        self.answers[key].append((f, raw))
                    else:
                        self.answers[key] = deque(((f, raw),))
                else:
                    self.pending.append((f, raw, self.seen_a2c))
            if not look:
                return

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
        rec, rraw, plain = self.recorded.popleft()
        if raw == rraw and not self.renamed and not rec.get("redacted"):
            # the same bytes: only a request needs more (its answer)
            if plain:
                return True
            f = classify(rec, rraw)
            return self.answer(f, raw, True) if f.get("kind") == "request" else True
        f = classify(rec, rraw)
        request = f.get("kind") == "request"
        value = _value(raw)
        recorded = _value(rraw)
        bad = learn(recorded, value, self.names, self.back)
        if not self.renamed:
            self.renamed = any(k != v for k, v in self.names.items())
        expected = self.norm.view(drop_clocks(rename(recorded, self.names)), drop_id=request)
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
            return self.answer(f, raw, value.__class__ is dict and "id" in value)
        return True

    def answer(self, f: dict[str, Any], raw: bytes, has_id: bool) -> bool:
        """Send the recorded answer to the recorded request the live one matched (same
        method and content under the renaming), with the live request's id (``has_id``:
        the live frame is an object with a top-level id)."""
        key = id_key(f.get("id"))
        while key not in self.answers and not self.trace_done:
            self.read_trace()
        got = None
        if key in self.answers:
            queued = self.answers[key]
            got = queued.popleft()
            if not queued:
                del self.answers[key]
        span = _id_span(raw, has_id)
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
        araw = self._renamed(araw)
        aspan = _id_span(araw, True)  # an answer (response or error) has an id
        return self.send(arec, araw if aspan is None else splice_id(araw, token, aspan))

    def _renamed(self, raw: bytes) -> bytes:
        """A recorded client frame with the learned names (its bytes kept when none
        applies)."""
        if not self.renamed:
            return raw
        value = _value(raw)
        new = rename(value, self.names)
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

    def run(self) -> DriveResult:
        timeout = self.opt.timeout
        deadline = time.monotonic() + timeout
        prev_t = None
        status = None
        live, check, recorded = self.live, self.check, self.recorded
        while status is None:
            if live:
                while live:
                    # check()'s first case inline: the recorded bytes of a plain frame
                    # (no request, nothing redacted), no renaming
                    if recorded and not self.renamed:
                        if recorded[0][2] and live[0][1] == recorded[0][1]:
                            live.popleft()
                            recorded.popleft()
                            self.checked += 1
                            continue
                    if not check(*live.popleft()):
                        status = "stopped"
                        break
                deadline = time.monotonic() + timeout
                continue
            if self.pending and self.checked >= self.pending[0][2]:
                f, raw, _ = self.pending.popleft()
                t = f.get("t")
                if self.opt.pace == "recorded" and t is not None and prev_t is not None:
                    if (t - prev_t) > 0:
                        self.pause((t - prev_t) / 1e9)
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
            if self.broken or (self.eof and not self.out):
                status = "agent_exited"
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                self.silence(timeout)
                status = "stopped"
                continue
            self.wait(left)
            if self.moved:
                deadline = time.monotonic() + timeout
        if status is None:  # the client frames still in the pipe, then its end
            status = self.finish(timeout)
        return self.end(status)

    def silence(self, timeout: float) -> None:
        self.diverge({"event": "timeout", "waiting_for": self.seen_a2c
                      if not self.pending else self.pending[0][2],
                      "received": self.checked, "timeout": timeout,
                      "message": f"the agent sent nothing for {timeout:g} s; it "
                      f"had sent {self.checked} of the recorded agent frames"})

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

    def drain(self, seconds: float) -> None:
        """Read the agent's output, up to its EOF or for ``seconds``."""
        until = time.monotonic() + seconds
        while not self.eof and (left := until - time.monotonic()) > 0:
            self.wait(left)

    def end(self, status: str | None) -> DriveResult:
        proc = self.proc
        self.ending = True
        self.close_input()
        if status == "stopped":
            proc.terminate()
        until = time.monotonic() + self.opt.timeout
        self.drain(self.opt.timeout)  # the agent ends once its input does
        self.log.flush()
        try:
            proc.wait(timeout=max(0.0, until - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.terminate()
            self.drain(2)
            try:
                proc.wait(timeout=max(0.0, until + 2 - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.drain(2)  # what it wrote last (bounded: a child of its own may hold the pipe)
        self.log.flush()
        if self.ahead is not None:
            self.ahead.close()
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


def _plain(rec: dict[str, Any], raw: bytes) -> bool:
    """Whether a recorded agent frame needs nothing but its bytes compared: no request
    (whose answer must be sent: bytes with neither ``"id"`` nor ``"method"``, nor a
    ``\\u`` escape that could spell them, are none), nothing redacted. Judged as the
    trace is read ahead, while the agent works, so that what stands between the agent's
    frames and the next prompt is a comparison of bytes."""
    return ("kind" not in rec and not rec.get("redacted")
            and not (b'"id"' in raw and b'"method"' in raw)
            and (b"\\" not in raw or b"\\u" not in raw))


#: a top-level id member's value token, when ``"id"`` is in the bytes once (see _id_span)
_ID_TOKEN = re.compile(rb'"id"[ \t\r\n]*:[ \t\r\n]*("(?:[^"\\]|\\.)*"|[^,}\]\s{\[][^,}\]\s]*)',
                       re.S)


def _id_span(raw: bytes, has_id: bool) -> tuple[int, int] | None:
    """:func:`acp_pipes.jsonrpc.id_span` of a JSON object that has a top-level ``id``
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

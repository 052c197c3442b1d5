"""The recording as a re-drive (:mod:`acp_pipes.replay.trace.client`) reads it: as the run
needs it, so memory holds the frames in flight, not the session; ahead of the run from a
file while the agent works, each frame judged once as it is read (so that what stands
between the agent's frames and the next prompt is a comparison of bytes); on a thread of
its own from a trace that can block (a pipe), so the run keeps reading the agent while
the recording is still to come."""

from __future__ import annotations

import os
import stat
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from acp_pipes.io.wire import A2C
from acp_pipes.replay.trace.tracefile import Pair, Trace, TraceReader

if TYPE_CHECKING:
    from acp_pipes.sameness.match import Matcher

__all__ = ["AHEAD", "BACKLOG", "LOOKAHEAD", "LOOKAHEAD_BYTES", "SKIP", "STEP", "TAKE",
           "Ahead", "Recording", "asks", "described", "may_block", "skippable"]

AHEAD = 256  # recorded frames read ahead of the run from a trace that can block (a pipe)
# Read ahead from a file while the agent has nothing ready: at most this many recorded
# frames, and this many of their bytes. Much of it is read while the agent starts (of a
# 1000-prompt echo session's 16,566 frames, ~5,600 before its first answer), so they are
# parsed and judged (:func:`skippable`) before the run needs them; 64 frames ahead, all
# of it was done in the gaps of the session's ping-pong, where the driver's CPU is wall
# time (BENCHMARKS.md, acp-replay --client: 1.14x the bare client before, 1.09x now).
LOOKAHEAD = 8192
LOOKAHEAD_BYTES = 8 << 20
#: Frames matched by their bytes whose place in the model's order is not built yet (a
#: run that goes as recorded never asks for it), at most: past it they are built while
#: the agent works, so memory stays bounded (~300 bytes a frame, its record aside).
BACKLOG = 4096

#: How a recorded frame read ahead is judged (:meth:`Recording.ahead_one`): an agent frame
#: matched by its bytes alone needs nothing more (SKIP: nothing can wait on it), or its
#: place in the order, built later (TAKE); a client frame with "method" in its bytes is
#: a step (STEP: described when the order needs it); any other is described
#: (:func:`described`).
SKIP, TAKE, STEP = 1, 2, 3


def described(rec: dict[str, Any], raw: bytes) -> Any:
    """A recorded frame described for the model (:func:`acp_pipes.sameness.events.describe`),
    its place in the run given when it is admitted."""
    from acp_pipes.sameness.events import describe

    return describe(-1, rec["dir"], raw, seq=rec.get("seq"))


def asks(raw: bytes) -> bool:
    """Whether an agent frame's bytes may be a request (whose answer is due): one without
    ``"id"`` and ``"method"`` in its bytes, nor a ``\\u`` escape that could spell them,
    is none."""
    return b'"id"' in raw and b'"method"' in raw or b"\\u" in raw


def skippable(rec: dict[str, Any], raw: bytes) -> bool:
    r"""Whether a recorded agent frame, matched by its bytes, needs nothing more: nothing
    redacted, not a frame record (whose ``kind`` says what it is), and nothing can wait
    on it: no ``"id"`` (no answer, no request), no v2 ``state_update`` ``idle`` (the end
    of a turn), no ``\u`` escape that could spell either. Judged once, as the trace is
    read ahead while the agent works, so that what stands between the agent's frames and
    the next prompt is a comparison of bytes (and the model need not even parse it).

    >>> skippable({}, b'{"method":"session/update","params":{"x":1}}')
    True
    >>> [skippable({}, b) for b in (b'{"id":1,"result":{}}', b'{"\\u0069d":1}',
    ...                             b'{"update":{"state":"idle"}}')]
    [False, False, False]
    """
    # (three searches for bytes: each a memchr; one regex of the three cost 3 us a frame)
    return ("kind" not in rec and not rec.get("redacted") and b'"id"' not in raw
            and b'"idle"' not in raw and b"\\u" not in raw)


def may_block(trace: Trace | TraceReader) -> bool:
    """Whether reading ``trace`` can wait (a pipe, a FIFO, a terminal, not a file)."""
    if not isinstance(trace, TraceReader):
        return False  # in memory
    try:
        st = os.fstat(0) if trace.source == "stdin" else os.stat(trace.source)
    except (OSError, ValueError):
        return True
    return not stat.S_ISREG(st.st_mode)


class Ahead:
    """A trace that can block (a pipe, a FIFO, a terminal), read on a thread of its own
    at most :data:`AHEAD` frames ahead; a byte on :attr:`fd` says something was read."""

    END = object()

    def __init__(self, pairs: Iterable[Pair]) -> None:
        self.queue: deque[Pair] = deque()
        self.room = threading.Semaphore(AHEAD)
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


class Recording:
    """The recorded frames read and not yet admitted to the model, in order
    (:attr:`look`: ``[record, bytes, how it was judged]``, the judgement an agent frame's
    :data:`SKIP` or :data:`TAKE`, a client frame's :data:`STEP` or event, or None: not
    described yet), and the trace they come from."""

    def __init__(self, trace: Trace | TraceReader) -> None:
        self.ahead = Ahead(trace) if may_block(trace) else None
        self.it: Iterator[Pair] = iter(trace) if self.ahead is None else iter(())
        self.look: deque[list[Any]] = deque()
        self.undescribed: deque[list[Any]] = deque()  # of look's entries, to describe
        self.look_bytes = 0
        self.error: Exception | None = None  # met reading ahead, raised in its place
        self.done = False  # every frame is in look (or admitted)

    @property
    def more(self) -> bool:
        """Whether the recording has frames not admitted yet."""
        return bool(self.look) or not self.done

    def read_ahead(self, n: int = 16) -> bool:
        """Read up to ``n`` frames of a trace file into :attr:`look` (an agent frame
        judged as it is read: :func:`skippable`); False at its end (or an error, kept
        to be raised where the run reaches it, as without reading ahead)."""
        if self.error is not None:
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
                    look.append([rec, raw, SKIP if skippable(rec, raw) else TAKE])
                else:
                    self.ahead_one(rec, raw)
        except Exception as e:
            self.error = e
            return False
        return True

    def ahead_one(self, rec: dict[str, Any], raw: bytes) -> None:
        """One frame read ahead into :attr:`look`: an agent frame judged by its bytes
        (:func:`skippable`, cheap; described when the model needs it), a client frame
        described later, while the agent works, or when it is needed."""
        self.look_bytes += len(raw)
        if rec["dir"] == A2C:
            self.look.append([rec, raw, SKIP if skippable(rec, raw) else TAKE])
        elif ("kind" not in rec and b'"method"' in raw and b'"result"' not in raw
              and b'"error"' not in raw and b"\\u" not in raw):
            self.look.append([rec, raw, STEP])  # (an answer has a result or an error)
        else:
            entry = [rec, raw, None]
            self.look.append(entry)
            self.undescribed.append(entry)

    def idle(self, took: Callable[[], bool], m: Matcher) -> bool:
        """Read a trace file ahead (up to :data:`LOOKAHEAD` frames) while the agent has
        nothing ready, so its parsing is done while the agent works, not after; after
        each few frames ``took()`` takes what the agent's pipes have ready, and True
        says they had something."""
        if self.ahead is not None:
            return False
        look = self.look
        while (len(look) < LOOKAHEAD and self.look_bytes < LOOKAHEAD_BYTES
               and self.read_ahead(4)):
            if took():
                return True
        # the frames read ahead described, a frame at a time (~5 us a frame: the agent's
        # next frame waits on no more than one of them)
        undescribed = self.undescribed
        while undescribed:
            entry = undescribed.popleft()
            if entry[2] is None:
                entry[2] = described(entry[0], entry[1])
            if took():
                return True
        # the order built past the frames matched by their bytes once they are many: a
        # run that goes as recorded never needs it (a difference builds it at once)
        while len(m.unbuilt) > BACKLOG and m.build_some(1):
            if took():
                return True
        return False

    def fill(self, wait: Callable[[], None]) -> bool:
        """The next recorded frame read into the empty :attr:`look`; False after the last.
        From a trace that can block, ``wait()`` is called until it comes (the agent's
        output read meanwhile)."""
        if self.done:
            return False
        ahead = self.ahead
        if ahead is None:
            self.read_ahead()
        else:
            while (got := ahead.get()) is None:
                wait()
            if isinstance(got, tuple):  # else Ahead.END
                self.ahead_one(*got)
        if not self.look:
            if self.error is not None:
                raise self.error
            self.done = True
            return False
        return True

    def pop(self) -> tuple[dict[str, Any], bytes, Any]:
        """The next frame read, described when it was not yet."""
        rec, raw, judged = self.look.popleft()
        self.look_bytes -= len(raw)
        if judged is None:
            judged = described(rec, raw)
        return rec, raw, judged

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()

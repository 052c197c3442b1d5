"""RFC 6455's rule that a client masks every frame, as acp-tee's listener holds clients
to it (acp_pipes.tee.masking.Masked, in front of aiohttp's frame reader): whatever the
frames (7-, 16- and 64-bit lengths, empty ones) and however the bytes are split into
reads, the first unmasked frame is found where it starts and everything before it
reaches the reader as it came. The executables' side (the 1002 a client gets) is
tests/test_tee_remote_policy.py."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from acp_pipes.tee.masking import Masked as _Masked


def _frame(size: int, masked: bool) -> bytes:
    if size < 126:
        head = bytes([0x81, (0x80 if masked else 0) | size])
    elif size < 1 << 16:
        head = bytes([0x81, (0x80 if masked else 0) | 126]) + struct.pack("!H", size)
    else:
        head = bytes([0x81, (0x80 if masked else 0) | 127]) + struct.pack("!Q", size)
    return head + (b"\x01\x02\x03\x04" if masked else b"") + b"x" * size


class _Reader:
    def __init__(self) -> None:
        self.got = bytearray()

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self.got += data
        return False, b""

    def feed_eof(self) -> None:
        pass


class _Queue:
    def __init__(self) -> None:
        self.error: Exception | None = None

    def set_exception(self, e: Exception) -> None:
        self.error = e


SIZES = st.sampled_from([0, 1, 124, 125, 126, 127, 300, 65535, 65536, 70000])


@given(frames=st.lists(st.tuples(SIZES, st.booleans()), min_size=1, max_size=6),
       cuts=st.lists(st.integers(min_value=0, max_value=300_000), max_size=12))
def test_the_first_unmasked_frame_is_found_however_the_reads_fall(frames, cuts):
    data = b"".join(_frame(size, masked) for size, masked in frames)
    first = next((i for i, (_s, masked) in enumerate(frames) if not masked), None)
    starts = [0]
    for size, masked in frames:
        starts.append(starts[-1] + len(_frame(size, masked)))
    reader, queue = _Reader(), _Queue()
    masked = _Masked(reader, queue)
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    answers = [masked.feed_data(data[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    if first is None:
        assert queue.error is None and bytes(reader.got) == data
        assert all(a == (False, b"") for a in answers)
    else:
        assert queue.error is not None and "not masked" in str(queue.error)
        assert bytes(reader.got) == data[:starts[first]] or (
            # its header began in an earlier read, which went to the reader whole
            len(reader.got) > starts[first]
            and bytes(reader.got) == data[:len(reader.got)]
            and len(reader.got) - starts[first] < 2)
        assert answers[-1] == (True, b"")

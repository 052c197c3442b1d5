"""Replay of ASR streams: a stored session played back as ACP (ASR-724..733).

The last stage of the pipeline (record -> frame -> fold -> asr -> replay): an ASR stream
(read by :mod:`acp_pipes.asr.reader`) becomes what an agent sends when a client reopens
the session.

- :mod:`acp_pipes.replay.asr.updates`: the stream as ``session/update`` notifications, and
  the loss report (:class:`~acp_pipes.replay.asr.updates.Replay`).
- :mod:`acp_pipes.replay.asr.index`: what a replay sends, found in one pass over a stream.
- :mod:`acp_pipes.replay.asr.capture`: the captured agent frames resent from the wire logs
  the stream was recorded from (byte-level, ``--wire``).
- :mod:`acp_pipes.replay.asr.serve`: a read-only ACP agent serving stored sessions.
- :mod:`acp_pipes.replay.asr.equivalence`: the context views of two streams compared
  (ASR-732).

Byte-exact replay of a recorded wire log is :mod:`acp_pipes.replay.trace`.
"""

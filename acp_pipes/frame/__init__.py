"""acp-frame's library: a recording framed (:mod:`acp_pipes.frame.core`), summarised
(:mod:`acp_pipes.frame.summary`, ``--summary``; request and turn latency,
:mod:`acp_pipes.frame.latency`) and checked against the ACP spec
(:mod:`acp_pipes.frame.validate`, ``--validate``); the frames of one session picked out
(:mod:`acp_pipes.frame.session`, ``--session``).

Framing is the contract between ``acp-frame`` and every later stage (fold, asr, replay,
align): :func:`acp_pipes.frame.core.read_frames` is what they read a recording through.
"""

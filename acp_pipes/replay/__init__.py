"""acp-replay's library: a recording played back, two ways.

- :mod:`acp_pipes.replay.trace`: a trace (a wire log or frames) byte for byte to a live
  peer, as the agent or as the client.
- :mod:`acp_pipes.replay.asr`: an ASR stream as the ACP an agent sends when a client
  reopens the session (ASR-724..733), and two streams' context views compared.

Neither imports the other; the tool (:mod:`acp_pipes.cli.replay`) picks one by its input.
"""

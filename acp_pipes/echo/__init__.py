"""The echo agent and its scripted clients: deterministic sessions for the demo, the
tests and the benchmarks.

- :mod:`.agent`: an ACP v2 agent whose output is a pure function of its input bytes
  (``acp-echo-agent``, ``python -m acp_pipes.cli.echo_agent``);
- :mod:`.session`: one of its sessions and the turn it may be waiting in;
- :mod:`.client`: the client side of its sessions, scripted in advance.
"""

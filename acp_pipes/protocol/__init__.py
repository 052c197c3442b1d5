"""The protocol's messages, as bytes and as values: JSON-RPC 2.0 as ACP sends it, the
canonical form that gives a JSON value its identity, and credentials kept out of both.

- :mod:`~acp_pipes.protocol.jsonrpc`: one message classified, built, checked.
- :mod:`~acp_pipes.protocol.canonical`: RFC 8785 form and ``blake3:`` hashes.
- :mod:`~acp_pipes.protocol.redact`: secrets out of logs, reports and comparisons.
"""

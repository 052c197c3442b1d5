"""Streams in and out: what every tool reads and writes, and nothing about ACP's meaning.

- :mod:`~acp_pipes.io.lines`: JSONL inputs opened, read line by line with their numbers,
  parsed; records written as lines.
- :mod:`~acp_pipes.io.live`: inputs still being written (a pipe behind acp-tee, ``--follow``).
- :mod:`~acp_pipes.io.settings`: the run's settings (line limit, program name, privacy),
  honoured by every reader and writer.
- :mod:`~acp_pipes.io.wire`: the wire log's records (what acp-tee writes), byte-exact.
- :mod:`~acp_pipes.io.streams`: stream headers, and which kind of stream an input is.
- :mod:`~acp_pipes.io.output`: outputs replaced whole or not at all, never an input.
- :mod:`~acp_pipes.io.filenames`: output names that stay apart on every file system.
- :mod:`~acp_pipes.io.terminal`: terminal or pipe, decided once per run.
"""

"""Alignment of recordings: where two (or more) runs parted ways.

- :mod:`.myers`: the exact LCS / minimal edit script over int sequences.
- :mod:`.steps`: traces and ASR streams -> step sequences (what counts as "the same").
- :mod:`.render`: ops JSONL, unified diff and the JSON summary.
- :mod:`.graph`: divergence graphs (two-way, N-way prefix tree, session lineage) as
  networkx graphs, Graphviz DOT and SVG.
"""

from acp_pipes.align.myers import Alignment, align, opcodes

__all__ = ["Alignment", "align", "opcodes"]

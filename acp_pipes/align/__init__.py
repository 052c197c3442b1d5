"""Alignment of recordings: where two (or more) runs parted ways.

- :mod:`.myers`: the exact LCS / minimal edit script over int sequences.
- :mod:`.steps`: traces and ASR streams -> step sequences (what counts as "the same"),
  traces read by :mod:`.traces`, both filling one :mod:`.table`.
- :mod:`.render`: ops JSONL, unified diff and the JSON summary.
- :mod:`.graph`: divergence graphs (two-way, N-way prefix tree) as networkx graphs;
- :mod:`.lineage`: the sessions of ASR streams and how they came to be, as a graph;
- :mod:`.dot`: those graphs written as Graphviz DOT, and drawn as SVG by ``dot``.
"""

from acp_pipes.align.myers import Alignment, align, opcodes

__all__ = ["Alignment", "align", "opcodes"]

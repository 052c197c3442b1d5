"""Alignment of recordings: where two (or more) runs parted ways.

- :mod:`.myers`: the exact LCS / minimal edit script over int sequences.
- :mod:`.steps`: traces and ASR streams -> step sequences (what counts as "the same"),
  traces read by :mod:`.traces` into a :mod:`.builder`, both filling one :mod:`.table`.
- :mod:`.compare`: two runs compared (``--strict``: over the order the protocol fixes);
  :mod:`.session`: by the model of the same session (:mod:`.model`, :mod:`.volatile`),
  its steps in :mod:`.pairs`, :mod:`.floats` and :mod:`.order`; either gives one
  :mod:`.comparison`.
- :mod:`.render`: ops JSONL, unified diff and the JSON summary.
- :mod:`.graph`: divergence graphs (two-way, N-way prefix tree) as networkx graphs;
- :mod:`.lineage`: the sessions of ASR streams and how they came to be, as a graph;
- :mod:`.dot`: those graphs written as Graphviz DOT, and drawn as SVG by ``dot``.
"""

from acp_pipes.align.myers import Alignment, align, opcodes

__all__ = ["Alignment", "align", "opcodes"]

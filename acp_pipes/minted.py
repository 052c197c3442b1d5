"""Moved: the minted identifiers and clocks are part of the model of "the same session",
:mod:`acp_pipes.sameness.minted`; this name stays for the modules that still import it."""

from acp_pipes.sameness.minted import CLOCKS, MINTED_KEYS, MINTED_KINDS, drop_clocks, learn, rename

__all__ = ["CLOCKS", "MINTED_KEYS", "MINTED_KINDS", "drop_clocks", "learn", "rename"]

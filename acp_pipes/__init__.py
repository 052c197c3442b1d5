"""acp-pipes: record, store, replay and compare Agent Client Protocol sessions.

Every tool is a thin CLI (``acp_pipes.cli``) over the modules of this package,
which are pure iterators over records and can be used in-process.
"""

__version__ = "0.1.0"

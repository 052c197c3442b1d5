"""acp-fold's library: ACP v2 frames in, one record per entity when it becomes final.

See docs/acp-fold.md for the record format. :func:`fold` is the pure core (frame
records of one connection in, fold records out); :func:`fold_paths` reads wire logs or
frames streams and yields a fold stream per connection, header first. Every connection
of a run folds onto one state per entity (:class:`~acp_pipes.fold.state.States`): ACP's
patch rule applies to the entity, whatever connection the update arrives on.
"""

from __future__ import annotations

from acp_pipes.fold.core import MAX_HELD, Folder, ProtocolVersionError
from acp_pipes.fold.source import FOLD_VERSION, fold, fold_header, fold_paths, read_source

__all__ = [
    "FOLD_VERSION",
    "MAX_HELD",
    "Folder",
    "ProtocolVersionError",
    "fold",
    "fold_header",
    "fold_paths",
    "read_source",
]

"""acp-asr's library: ACP v2 recordings -> ASR streams, one per ACP session.

:class:`~acp_pipes.asr.mapping.Converter` maps fold records (acp_pipes.fold) to ASR
records; :func:`convert` does it in memory, :func:`convert_paths` reads recordings as
acp-asr does; :mod:`acp_pipes.asr.output` writes
streams; :mod:`acp_pipes.asr.validate` checks them. docs/asr.md is the format.
"""

from acp_pipes.asr.mapping import Converted, Converter, convert, convert_paths
from acp_pipes.asr.output import Spool, file_name, session_from_name
from acp_pipes.asr.paths import declare_roots, path_ref

__all__ = ["Converted", "Converter", "Spool", "convert", "convert_paths", "declare_roots",
           "file_name", "path_ref", "session_from_name"]

"""Where the manual pages are, for ``--help`` to name them; and each executable's
argument parser, for the tools that make man pages and shell completion from it.

The pages of the checkout's ``docs/`` ship inside the package as ``acp_pipes/docs/``
(package data; in a checkout, a link to ``docs/``), so a path under the installed
package is one every installation has: ``pip``, ``pipx`` or a checkout alike.

``acp_pipes.cli.manual.acp_frame`` is acp-frame's parser (an attribute made when asked
for, PEP 562): argparse-manpage (``--module acp_pipes.cli.manual --object acp_frame``)
and shtab (``acp_pipes.cli.manual.acp_frame``) find a parser by module and name, and
``make manuals`` (scripts/manuals) runs them for every executable.
"""

from __future__ import annotations

import argparse
import importlib
import os
from typing import TYPE_CHECKING

import acp_pipes

if TYPE_CHECKING:
    from acp_pipes.cli.runner import Tool

DOCS = os.path.join(os.path.dirname(os.path.abspath(acp_pipes.__file__)), "docs")


def page(name: str) -> str:
    """The path of the manual page ``name`` (``"acp-frame.md"``) in this installation."""
    return os.path.join(DOCS, name)


#: The module of an executable whose name does not say it (acp-replay starts an agent
#: early in acp_pipes.cli.replay, before its Tool is built).
MODULES = {"acp-replay": "replay_tool"}


def tool(name: str) -> Tool:
    """The :class:`~acp_pipes.cli.runner.Tool` behind executable ``name``."""
    module = importlib.import_module(
        "acp_pipes.cli." + MODULES.get(name, name.removeprefix("acp-").replace("-", "_")))
    made = getattr(module, "make_tool", None)
    return made() if made is not None else module.TOOL


def __getattr__(attr: str) -> argparse.ArgumentParser:
    """``acp_frame``: the parser of acp-frame, as the executable builds it."""
    if not attr.startswith("acp_"):
        raise AttributeError(attr)
    return tool(attr.replace("_", "-")).parser()

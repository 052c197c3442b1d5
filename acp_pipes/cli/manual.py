"""Where the manual pages are, for ``--help`` to name them.

The pages of the checkout's ``docs/`` ship inside the package as ``acp_pipes/docs/``
(package data; in a checkout, a link to ``docs/``), so a path under the installed
package is one every installation has: ``pip``, ``pipx`` or a checkout alike.
"""

from __future__ import annotations

import os

import acp_pipes

DOCS = os.path.join(os.path.dirname(os.path.abspath(acp_pipes.__file__)), "docs")


def page(name: str) -> str:
    """The path of the manual page ``name`` (``"acp-frame.md"``) in this installation."""
    return os.path.join(DOCS, name)

"""What to run to add an optional extra (``export``, ``cluster``) to this installation.

``pip install 'acp-pipes[export]'`` is true only where acp-pipes came from a package
index, which it does not (a checkout, its wheel, pipx). What is true everywhere is to
install the extra's own requirements (from this installation's metadata) into the
environment acp-pipes runs in: with pipx, ``pipx inject acp-pipes ...``; otherwise
with the pip of the interpreter running now (``python -m pip``, or ``pip --python``
for an environment made without pip).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import sys

__all__ = ["install_hint", "requirements"]


def requirements(extra: str) -> list[str]:
    """The requirements the extra adds, as this installation's metadata lists them."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        listed = requires("acp-pipes") or []
    except PackageNotFoundError:  # run from a checkout that was never installed
        listed = []
    wanted = []
    for req in listed:
        spec, _, marker = req.partition(";")
        if re.search(rf"""extra\s*==\s*["']{re.escape(extra)}["']""", marker):
            wanted.append(spec.strip().replace(" ", ""))
    return wanted


def install_hint(extra: str, prefix: str | None = None,
                 python: str | None = None) -> str:
    """A command that adds ``extra`` to the environment at ``prefix`` (default: this
    one, run by ``python``): ``/opt/env/bin/python -m pip install 'opentelemetry-sdk>=1.30'
    ...`` for a virtual environment at /opt/env (tests/test_extras.py)."""
    prefix = prefix or sys.prefix
    python = python or sys.executable
    reqs = requirements(extra)
    if not reqs:  # not installed: run from a checkout, which installs with its extras
        checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        where = checkout if os.path.exists(os.path.join(checkout, "pyproject.toml")) else (
            "acp-pipes")
        return f"{shlex.quote(python)} -m pip install {shlex.quote(f'{where}[{extra}]')}"
    args = " ".join(shlex.quote(r) for r in reqs)
    if os.path.exists(os.path.join(prefix, "pipx_metadata.json")):  # a pipx environment
        return f"pipx inject acp-pipes {args}"
    if importlib.util.find_spec("pip") is None:  # made without pip (venv --without-pip)
        return f"pip --python {shlex.quote(python)} install {args}"
    return f"{shlex.quote(python)} -m pip install {args}"

"""What goes wrong and how it is said, one vocabulary for the whole package.

- :class:`AcpPipesError` is the base of every error the library raises for a reason the
  user can act on (unusable input, wrong arguments, a protocol version it does not map,
  a missing program). The CLI runner catches it once and prints ``prog: message``, exit
  2; anything else escaping a tool is a bug, said as "internal error". A library error
  that is also a ``ValueError`` (a refused protocol version, a value with no canonical
  form, an option's value: :class:`OptionError`) inherits from both, so ``except
  ValueError`` around it keeps working. A file that cannot be opened is said where it is
  opened, naming it (``FILE: cannot open: ...``, ``cannot write FILE: ...``).
- :data:`Warn` is the one callback for a problem in the input that a reader reports and
  skips: ``warn(source, line, message)``, said as ``prog: SOURCE:LINE: message`` (line 0:
  the whole source); a reader that knows no lines says 0. A parameter of that type is
  named ``warn``, and one of type :data:`Note` ``note``: a line about the run itself
  (where a log goes, a log acp-tee cannot write), said as ``prog: message``, not counted
  as a problem of the input.
- :func:`say` is the one way a diagnostic line reaches stderr.

This module imports nothing but sys (and ``_collections_abc``, which the interpreter has
loaded before any module runs): acp-tee imports it before it starts its agent.
"""

import sys
from _collections_abc import Callable  # collections.abc's own, without collections' import

#: A problem in the input, reported and skipped: ``warn(source, line, message)``.
Warn = Callable[[str, int, str], None]
#: A line about the run itself, no problem of the input: ``note(message)``.
Note = Callable[[str], None]


class AcpPipesError(Exception):
    """The base of every error the user can act on; ``str()`` is the whole message."""

    #: The exit status a tool ends with when this error ends it.
    status = 2


class InputError(AcpPipesError):
    """Unusable input, reported as ``SOURCE:LINE: message`` (line 0: the whole source)."""

    def __init__(self, source: str, line: int, message: str):
        super().__init__(message)
        self.source = source
        self.line = line
        self.message = message

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        return f"{where}: {self.message}"


class UsageError(AcpPipesError):
    """Wrong arguments, or input of the wrong kind for this tool."""


class OptionError(UsageError, ValueError):
    """A value an option does not take (``--clock``, acp-tee's ``-o`` template,
    ``--header``, a URL), raised by the library function that reads it: the runner says
    it as the usage error it is, no tool translating; a library caller may still catch
    the ValueError it was."""


def say(line: str) -> None:
    """One line on stderr, for diagnostics; never raises, and never lands on stdout: with
    stderr closed (``2>&-``: ``sys.stderr`` is None, and ``print(file=None)`` would write
    to stdout, into acp-tee's client stream) or gone (a broken pipe) it is dropped."""
    err = sys.stderr
    if err is None:
        return
    try:
        err.write(line + "\n")
        err.flush()
    except BrokenPipeError:  # (`2>&1 | head`): quiet from now on, the final flush too
        _to_devnull(err)
    except (OSError, ValueError):
        pass


def _to_devnull(stream) -> None:
    """Point ``stream``'s descriptor at /dev/null, so what it still holds is dropped
    without an error at exit (which would make the exit status 120)."""
    import os  # (loaded before any module runs: no cost)

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


__all__ = ["AcpPipesError", "InputError", "Note", "OptionError", "UsageError", "Warn", "say"]

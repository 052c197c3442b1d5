"""One module per executable (``acp-frame`` is ``acp_pipes.cli.frame``), all on one runner.

A Ctrl-C while a tool is still importing (its first ~50 ms) would surface as a
KeyboardInterrupt traceback from whatever module was loading, or worse inside an
extension module's initialisation. When this package is imported to start a tool
(``python -m acp_pipes.cli.X``, whose ``sys.argv[0]`` is ``-m`` meanwhile, or an
``acp-*`` console script), SIGINT therefore ends the process at once with 130 until
:func:`acp_pipes.cli.runner.run` takes over and restores Python's own handler.
"""

import os
import sys

try:  # the C module under signal.py, whose enums (~3 ms) acp-tee's start need not pay
    import _signal as signal
except ImportError:  # pragma: no cover - an interpreter without it
    import signal


def _interrupted_while_starting(signum, frame):  # pragma: no cover - timing dependent
    os._exit(130)


if (sys.argv[:1] == ["-m"] or os.path.basename(sys.argv[0] if sys.argv else "").startswith("acp-")
        ) and signal.getsignal(signal.SIGINT) != signal.SIG_IGN:  # ignored: stays ignored
    signal.signal(signal.SIGINT, _interrupted_while_starting)

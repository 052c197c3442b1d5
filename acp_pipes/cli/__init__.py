"""One module per executable (``acp-frame`` is ``acp_pipes.cli.frame``), all on one runner
(:mod:`acp_pipes.cli.runner`). acp-tee alone bends the usual order to start its agent
sooner; :mod:`acp_pipes.cli.tee` says how and what it saves."""

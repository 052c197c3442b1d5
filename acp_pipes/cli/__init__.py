"""One module per executable (``acp-frame`` is ``acp_pipes.cli.frame``), all on one runner."""

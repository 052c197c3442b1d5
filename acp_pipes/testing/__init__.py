"""acp-pipes in other projects' test suites: cassettes (:mod:`~acp_pipes.testing.cassette`)
and the pytest plugin that plays them (:mod:`~acp_pipes.testing.pytest_plugin`)."""

"""Real agents from the registries, run offline against tests/agents/canned_llm.py: an
opt-in suite (`make test-agents`, which installs them), not part of `make test`."""

import os

collect_ignore_glob = [] if os.environ.get("ACP_PIPES_REAL_AGENTS") else ["test_*.py"]

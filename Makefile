# Everything bootstraps itself: a fresh clone needs only python3 (>= 3.10) and these targets.
# Two environments, one per MCP SDK line, and one for the Claude tests (Python >= 3.12); each
# installs this package editable with exact pins.
PYTHON ?= python3

VENV   ?= .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
# The demo needs the package and the MCP SDK only; the tests add their tools on top.
BASE_STAMP := $(VENV)/.installed-base
STAMP  := $(VENV)/.installed

VENV1  ?= .venv-mcp1
BIN1   := $(VENV1)/bin
STAMP1 := $(VENV1)/.installed

# Exact Claude counts need ctok (the `claude` extra), which needs Python >= 3.12: a third
# environment on the first such interpreter .ci/python312 finds (none: its tests are skipped).
VENVC  ?= .venv-claude
BINC   := $(VENVC)/bin
STAMPC := $(VENVC)/.installed
PYTHON_CLAUDE ?= $(shell sh .ci/python312)

PYTEST_ARGS ?=

.PHONY: all install install-mcp1 install-claude demo docs test test-pythons lint typecheck unit unit-mcp1 unit-claude bench bench-claude bench-instrumented bench-loop-stall bench-startup clean

all: test

$(BASE_STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[instruments]'
	touch $@

$(STAMP): $(BASE_STAMP)
	$(PY) -m pip install -q -c constraints.txt -e '.[instruments,huggingface,test]' fastmcp mcp-server-git
	touch $@

$(STAMP1): pyproject.toml constraints-mcp1.txt
	$(PYTHON) -m venv $(VENV1)
	$(BIN1)/python -m pip install -q --upgrade pip
	$(BIN1)/python -m pip install -q -c constraints-mcp1.txt -e '.[instruments,test]' fastmcp
	touch $@

$(STAMPC): pyproject.toml constraints-claude.txt
	@if [ -z "$(PYTHON_CLAUDE)" ]; then \
		echo "no Python >= 3.12 found (pyenv install 3.12, or PYTHON_CLAUDE=...): the Claude tests are skipped"; \
	else \
		$(PYTHON_CLAUDE) -m venv $(VENVC) && \
		$(BINC)/python -m pip install -q --upgrade pip && \
		$(BINC)/python -m pip install -q -c constraints-claude.txt -e '.[instruments,claude,test]' fastmcp && \
		touch $@; \
	fi

install: $(STAMP)
install-mcp1: $(STAMP1)
install-claude: $(STAMPC)

demo: $(BASE_STAMP)
	$(PY) -m examples.demo

# The settings tables (README.md, docs/telemetry.md, the instrumentor's docstring) from config.py.
docs: $(STAMP)
	$(PY) -m tests.settings_tables

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy instrumentation exporters

# The whole suite on mcp 2.x (fastmcp 4), then everything that depends on the SDK line on 1.x (fastmcp 3).
unit: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

unit-mcp1: $(STAMP1)
	$(BIN1)/python -m pytest $(PYTEST_ARGS) tests/integration tests/e2e tests/cli

# The tests marked `claude` (counts against ctok, the e2e under ENCODING=claude-4.7) on Python >= 3.12.
unit-claude: $(STAMPC)
	@if [ -x $(BINC)/python ]; then $(BINC)/python -m pytest $(PYTEST_ARGS) -m claude tests; \
	else echo "unit-claude: skipped, no Python >= 3.12 found"; fi

test: lint typecheck unit unit-mcp1 unit-claude

# The unit and integration tests on every Python the classifiers claim that this machine has
# (pyenv's or python3.X on PATH), on both SDK lines, each in a .venv-py3.X[-mcp1] of its own
# (tests/pythons.py). `make test-pythons PYTHONS=3.10,3.13` runs those only. CI runs one Python.
PYTHONS ?=
test-pythons:
	$(PYTHON) -m tests.pythons $(if $(PYTHONS),--only $(PYTHONS)) $(if $(PYTEST_ARGS),-- $(PYTEST_ARGS))

# Every benchmark, each writing its table into docs/performance.md, then the README's summary
# of them (`make bench PERF_DOC=` leaves both alone); fails at the end when a benchmark
# missed its bound.
PERF_DOC ?= docs/performance.md
MARKDOWN = $(if $(PERF_DOC),--markdown $(PERF_DOC))
BENCHES := "engine" "engine_bounds" "startup" "worker_cost" "slicing" "counting" "footprint" "saturation" \
	"instructions" "loop_stall --full" "exporters" "guard" "instrumented"

bench: $(STAMP)
	@missed=""; for run in $(BENCHES); do \
		echo "== python -m tests.bench.$$run"; \
		$(PY) -m tests.bench.$$run $(MARKDOWN) || missed="$$missed, $$run"; \
	done; \
	if [ -x $(BINC)/python ]; then echo "== .venv-claude: python -m tests.bench.claude"; \
		$(BINC)/python -m tests.bench.claude $(MARKDOWN) || missed="$$missed, claude"; fi; \
	if [ -n "$(PERF_DOC)" ]; then $(PY) -m tests.bench.summary --performance $(PERF_DOC); fi; \
	if [ -n "$$missed" ]; then echo "missed a bound or failed: $${missed#, }"; exit 1; fi

# How late an event loop wakes up while the analysis runs, next to while the MCP SDK receives the
# same payload on it, per payload kind (1 KB to 20 MB).
bench-loop-stall: $(STAMP)
	$(PY) -m tests.bench.loop_stall --full $(MARKDOWN)

# Tool-call latency with and without the instrumentation (stdio and in-memory, 1 KB to 20 MB).
bench-instrumented: $(STAMP)
	$(PY) -m tests.bench.instrumented $(MARKDOWN)

# Claude counting: MB/s and PSS against ctok and tiktoken o200k, in .venv-claude.
bench-claude: $(STAMPC)
	$(BINC)/python -m tests.bench.claude $(MARKDOWN)

# What instrument() adds to a process's start (CPU time, alternating runs).
bench-startup: $(STAMP)
	$(PY) -m tests.bench.startup $(MARKDOWN)

clean:
	rm -rf $(VENV) $(VENV1) $(VENVC) .venv-py3.* .mypy_cache .ruff_cache .pytest_cache build dist

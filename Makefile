# Everything bootstraps itself: a fresh clone needs only python3 (>= 3.10) and these targets.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: all install demo test lint typecheck unit bench clean

all: test

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[instruments,huggingface,test]'
	touch $@

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m examples.engine_demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy instrumentation exporters

unit: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

test: lint typecheck unit

bench: $(STAMP)
	$(PY) -m tests.bench.engine

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache build dist

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv test test-quick lint demo bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "pyhudi needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

# the whole suite (what CI runs), including the Spark-heavy modules marked slow (local-cluster, kill -9, CLI
# subprocesses, randomized flows)
test: $(STAMP)
	$(BIN)/python -m pytest -q

# the quick tier while developing: everything except the tests marked slow
test-quick: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check pyhudi tests benchmarks
	$(BIN)/mypy

demo: $(STAMP)
	$(BIN)/python -m pyhudi.demo

clean:
	rm -rf $(VENV) demo-data

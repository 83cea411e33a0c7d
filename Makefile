PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv test test-all lint demo bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "pyhudi needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

# the default tier (what CI runs): everything except the Spark-heavy modules marked slow
test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

# every test, including the Spark-heavy suites (local-cluster, kill -9, CLI subprocesses, randomized flows)
test-all: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check pyhudi tests benchmarks
	$(BIN)/mypy

demo: $(STAMP)
	$(BIN)/python -m pyhudi.demo

clean:
	rm -rf $(VENV) demo-data

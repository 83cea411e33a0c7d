PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
UV := uv==0.13.9

.PHONY: venv test test-quick lint docs demo bench bench-quick clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "pyhudi needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	# uv installs the pinned dependencies (from PyPI, or UV_INDEX_URL) in about a minute, their bytecode compiled
	# as pip compiles it: pip took 2m18s for the same install on 2 cores, from no cache
	$(BIN)/pip install --quiet $(UV)
	$(BIN)/uv pip install --quiet --python $(BIN)/python --compile-bytecode -e '.[dev]'
	# pyhudi's own bytecode, as pip compiles a wheel's at install: a process whose environment writes none
	# (PYTHONDONTWRITEBYTECODE) would otherwise compile every module from source, the driver and the Python
	# daemon alike
	$(BIN)/python -m compileall -q pyhudi
	# a class-data archive of the Spark driver's classes: every later process starts its session faster
	$(BIN)/python -m pyhudi.spark.cds
	# pyhudi's jar (Spark's parquet reader for the scans it reads exactly), compiled now rather than by the
	# first session that reads a table
	$(BIN)/python -m pyhudi.spark.native
	@touch $(STAMP)

venv: $(STAMP)

# the whole suite (what CI runs), including the Spark-heavy modules marked slow (local-cluster, kill -9, CLI
# subprocesses, randomized flows, an S3 server on loopback); three pytest-xdist workers, each with its own Spark
# session: on two cores a third keeps them busy while the others wait on child processes, a Spark job's start or
# a heartbeat (PYTEST_WORKERS=0: no workers, the tests run in pytest's own process)
PYTEST_WORKERS ?= 3
test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist worksteal --durations=25

# the quick tier while developing: everything except the tests marked slow
test-quick: $(STAMP)
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check pyhudi tests benchmarks
	$(BIN)/mypy

# the configuration reference, docs/configuration.md, generated from the options in pyhudi/config.py
docs: $(STAMP)
	$(BIN)/python -m pyhudi.config_doc --write

demo: $(STAMP)
	$(BIN)/python -m pyhudi.demo

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/uv pip install --quiet --python $(BIN)/python --compile-bytecode -e '.[dev,bench]'
	@touch $(BENCH_STAMP)

# the index benchmark suite (1M/5M/20M-row tables as far as a 60-minute budget allows; peers Delta Lake and
# Iceberg): benchmarks/results/index_bench.{json,md} and plots; then the record index on 2M rows (tagging
# against GLOBAL_SIMPLE, bytes per entry, the lookup model K + c * M/N fitted over M and N):
# benchmarks/results/record_index.json. BENCH_ARGS / RLI_BENCH_ARGS pass options (see --help).
bench: $(BENCH_STAMP)
	$(BIN)/python benchmarks/bench_index.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/bench_record_index.py --repeat 5 $(RLI_BENCH_ARGS)

# the same in a few minutes (one 200k-row table): benchmarks/results/index_bench_quick.*
bench-quick: $(BENCH_STAMP)
	$(BIN)/python benchmarks/bench_index.py --quick $(BENCH_ARGS)

clean:
	rm -rf $(VENV) demo-data

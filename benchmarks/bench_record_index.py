"""Record-index benchmark: ``python benchmarks/bench_record_index.py [--rows N | --quick] [--upsert-rows U]``.

On a table of R rows (random UUID keys, a year of ``YYYY/MM/DD`` partitions, ~150-byte rows; bulk_insert, then
the record index built): (a) ``timings_s.tag`` of U-row upserts (half updates, half new keys) with RECORD_INDEX
and GLOBAL_SIMPLE, each written into a fresh hard-linked clone of the same table, alternating, median of
``--repeat`` runs; (b) the index's size and where its bytes go, with re-encodings at other block sizes and gzip
settings; (c) the lookup model ``T(M, N) ~ K + (M/N) * c`` fitted over N = 2, 4, 8, 16 (and the estimated N)
and M = 1k, 10k, 100k. See :mod:`pyhudi.bench.rli_bench`.

Prints one JSON object (the same as ``pyhudi bench rli --json``) and stores it in
benchmarks/results/record_index.json (``--quick``: record_index_quick.json). Starts Spark (local[2] unless
PYHUDI_SPARK_MASTER says otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

from pyhudi.bench.rli_bench import DEFAULT_ROWS, QUICK_ROWS, UPSERT_ROWS, run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=None, help=f"table rows (default {DEFAULT_ROWS})")
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS} rows")
    ap.add_argument("--upsert-rows", type=int, default=UPSERT_ROWS)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None, help="results file (default benchmarks/results/record_index[_quick].json)")
    ap.add_argument("--driver-memory", default="4g", help="heap of the local Spark driver (it runs the tasks too)")
    a = ap.parse_args()
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", f"--driver-memory {a.driver_memory} pyspark-shell")
    rows = a.rows or (QUICK_ROWS if a.quick else DEFAULT_ROWS)
    res = run(rows, upsert_rows_n=a.upsert_rows, repeat=a.repeat, log=lambda m: print(m, file=sys.stderr, flush=True))
    res["machine"] = f"{platform.machine()}, {res['cpus']} cpus, Python {platform.python_version()}"
    name = "record_index_quick.json" if a.quick and a.rows is None else "record_index.json"
    out = Path(a.out) if a.out else Path(__file__).parent / "results" / name
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res))


if __name__ == "__main__":
    main()

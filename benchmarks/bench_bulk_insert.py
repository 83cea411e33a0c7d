"""Bulk-load benchmark: ``python benchmarks/bench_bulk_insert.py [--rows 200000,2000000] [--repeat 3]``.

The same rows (about 150 bytes, random UUID keys, 365 day partitions: the record-index benchmark's data, read from
parquet input files) are loaded three ways in one process, alternating, ``--repeat`` times each:

- ``pyhudi``: ``Table.create`` + ``Table.write(spark.read.parquet(input), "bulk_insert")`` of a copy-on-write
  table with the metadata table and the record index (built by the same commit), Hudi's defaults otherwise;
- ``spark``: Spark's own partitioned parquet write of the same rows, sorted by key within each partition as a
  bulk insert sorts them: ``spark.read.parquet(input).repartition("dt").sortWithinPartitions("id")
  .write.partitionBy("dt").parquet(...)``;
- ``spark_zstd``: the same with ``compression=zstd``, the codec pyhudi's files use by default
  (``hoodie.parquet.compression.codec=zstd``, pyhudi at level 1, Spark at parquet-java's level 3); Spark's own
  default is snappy;
- ``delta``: delta-rs ``write_deltalake(path, <the input as an Arrow stream>, partition_by=["dt"])``.

Each size gets ``--warmup`` unmeasured loads of each kind first (default 1: the session's first jobs start
Python workers and compile code). Prints one JSON object and stores it in benchmarks/results/bulk_insert.json (``--out``): per size
the median wall seconds, rows/s, ``pyhudi``'s stage timings and the ratio to Spark's own write.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from pyhudi.bench.rli_bench import BASE_OPTIONS, day_partitions, random_uuid_keys, rows_table

INPUT_CHUNK = 1_000_000
DAYS = 365
OPTIONS = {**BASE_OPTIONS, "hoodie.index.type": "RECORD_INDEX", "hoodie.metadata.record.index.enable": "true"}


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def generate(path: str, rows: int, seed: int = 23) -> None:
    rng = np.random.default_rng(seed)
    os.makedirs(path)
    for i in range(0, rows, INPUT_CHUNK):
        n = min(INPUT_CHUNK, rows - i)
        t = rows_table(random_uuid_keys(n, rng), day_partitions(rng.integers(0, DAYS, n)), 1, rng)
        pq.write_table(t, os.path.join(path, f"part-{i // INPUT_CHUNK:04d}.parquet"))


def load_pyhudi(spark: Any, inp: str, out: str) -> dict[str, Any]:
    from pyhudi.table.table import Table

    t0 = time.perf_counter()
    table = Table.create(out, pq.read_schema(os.path.join(inp, sorted(os.listdir(inp))[0])), OPTIONS)
    res = table.write(spark.read.parquet(inp), "bulk_insert", OPTIONS).to_dict()
    wall = time.perf_counter() - t0
    assert "record_index" in Table.open(out).config.metadata_partitions, "the load did not build the record index"
    return {"wall_s": round(wall, 3), "timings_s": res.get("timings_s"), "files": res.get("files_written")}


def load_spark(spark: Any, inp: str, out: str, codec: str | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    w = spark.read.parquet(inp).repartition("dt").sortWithinPartitions("id").write.partitionBy("dt").mode("error")
    if codec:
        w = w.option("compression", codec)
    w.parquet(out)
    return {"wall_s": round(time.perf_counter() - t0, 3)}


def load_delta(inp: str, out: str) -> dict[str, Any]:
    from pyhudi.bench.peers import delta_create

    t0 = time.perf_counter()
    made = delta_create(out, inp)
    return {"wall_s": round(time.perf_counter() - t0, 3), "files": made["files"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="200000,2000000", help="comma-separated table sizes")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured loads of each kind before the measured ones")
    ap.add_argument("--no-delta", action="store_true")
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "bulk_insert.json"))
    a = ap.parse_args()

    from pyhudi.bench.peers import store_result
    from pyhudi.spark.session import get_spark

    kinds = ["pyhudi", "spark", "spark_zstd"] + ([] if a.no_delta else ["delta"])
    work = tempfile.mkdtemp(prefix="bench-bulk-", dir=a.work_dir)
    result: dict[str, Any] = {"repeat": a.repeat, "warmup": a.warmup, "options": OPTIONS, "sizes": {}}
    try:
        spark = get_spark()
        for rows in (int(s) for s in a.rows.split(",")):
            inp = os.path.join(work, f"input-{rows}")
            t0 = time.perf_counter()
            generate(inp, rows)
            _log(f"{rows} rows generated in {time.perf_counter() - t0:.1f} s")
            runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
            for r in range(a.warmup + a.repeat):  # the first --warmup rounds are not measured
                for k in kinds:
                    out = os.path.join(work, f"{k}-{rows}-{r}")
                    m = (load_pyhudi(spark, inp, out) if k == "pyhudi" else load_delta(inp, out) if k == "delta"
                         else load_spark(spark, inp, out, "zstd" if k == "spark_zstd" else None))
                    shutil.rmtree(out, ignore_errors=True)
                    _log(f"{rows} rows, {k}{' (warm-up)' if r < a.warmup else ''}: {m['wall_s']:.2f} s "
                         f"{m.get('timings_s') or ''}")
                    if r >= a.warmup:
                        runs[k].append(m)
            size: dict[str, Any] = {}
            for k in kinds:
                med = statistics.median(m["wall_s"] for m in runs[k])
                size[k] = {"median_s": round(med, 3), "rows_per_s": round(rows / med),
                           "runs_s": [m["wall_s"] for m in runs[k]]}
            size["pyhudi"]["timings_s"] = {
                s: round(statistics.median((m["timings_s"] or {}).get(s, 0.0) for m in runs["pyhudi"]), 3)
                for s in (runs["pyhudi"][0]["timings_s"] or {})
            }
            size["pyhudi_over_spark"] = round(size["pyhudi"]["median_s"] / size["spark"]["median_s"], 2)
            size["pyhudi_over_spark_zstd"] = round(size["pyhudi"]["median_s"] / size["spark_zstd"]["median_s"], 2)
            if "delta" in size:
                size["pyhudi_over_delta"] = round(size["pyhudi"]["median_s"] / size["delta"]["median_s"], 2)
            result["sizes"][str(rows)] = size
            shutil.rmtree(inp, ignore_errors=True)
            _log(json.dumps({rows: size}))
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    store_result(result, a.out)


if __name__ == "__main__":
    main()

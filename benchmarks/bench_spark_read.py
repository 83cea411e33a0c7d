"""Spark-native reads: ``spark.read.format("hudi")`` against Spark's own parquet reader given the same files.

A copy-on-write table of ``--rows`` (2M) rows in 365 daily partitions (``dt = yyyy/mm/dd``, one file group per
day), with the record index; columns ``id`` (the key), ``dt``, ``ts``, ``v`` (double) and ``seq`` (day number *
10^7 + row: a column whose values follow the partitions, so a range of it falls in a few files). In one
session, every query run once untimed, then ``--repeat`` (3) rounds of all of them in turn; median per query:

- ``count(*)`` and ``sum(v)``: the whole table, through the source (which hands this copy-on-write snapshot to
  Spark's parquet reader, ``pyhudi.spark.native``), through the Python source alone
  (``pyhudi.read.spark.parquet=false``) and through ``spark.read.parquet(files)`` on the latest base files;
- one partition of 365 (``where dt = '<day>'``, ``sum(v)``);
- one key (``where id = '<key>'``, collected): the record index names the one file group to read;
- a range of ``seq`` holding ~1% of the rows (four days): the table keeps ``column_stats``
  (``--no-column-stats``: it does not, and every file is planned, its row groups skipped by their parquet
  statistics in the tasks);

and the files each filtered query plans to read (and the files Spark's reader was handed), and how long planning it takes on the driver
(:func:`pyhudi.spark.source.plan_query`).

``--table-type MERGE_ON_READ``: a merge-on-read table, whose newest ``--logged-days`` (18, 5%) partitions then
get an upsert of 2% of their rows (updates, in log files): ``format("hudi")`` splits its snapshot between Spark's
parquet reader (the file slices without log files) and the Python source (those with log files); the Python
source alone merges them all; ``spark.read.parquet(files)`` reads the base files only (older values where logs
update them: a baseline of speed, not of results).

``python benchmarks/bench_spark_read.py [--rows N] [--base DIR]`` prints one JSON object and stores it in
benchmarks/results/spark_read.json (``--out``; spark_read_mor.json for a merge-on-read table).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

DAYS = [(dt.date(2026, 1, 1) + dt.timedelta(days=i)).strftime("%Y/%m/%d") for i in range(365)]
OPTS = {
    "hoodie.table.name": "spark_read",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "dt",
    "hoodie.table.ordering.fields": "ts",
    "hoodie.index.type": "RECORD_INDEX",
    "hoodie.metadata.record.index.enable": "true",
    "hoodie.metadata.index.column.stats.enable": "true",
}


def rows(ids: np.ndarray) -> pa.Table:
    day = ids % len(DAYS)
    return pa.table({
        "id": pa.array([f"id{i:010d}" for i in ids]),
        "dt": pa.array([DAYS[d] for d in day]),
        "ts": pa.array(np.ones(len(ids), dtype=np.int64)),
        "v": pa.array(ids.astype(np.float64)),
        "seq": pa.array(day.astype(np.int64) * 10_000_000 + ids),
    })


def timed_alternating(arms: dict[str, Callable[[], Any]], repeat: int) -> dict[str, dict[str, Any]]:
    """Each arm run once untimed (its first run starts Python workers and compiles), then ``repeat`` rounds
    of every arm in turn, so the machine's noise falls on all of them alike; median per arm."""
    runs: dict[str, list[float]] = {name: [] for name in arms}
    out: dict[str, Any] = {name: fn() for name, fn in arms.items()}
    for _ in range(repeat):
        for name, fn in arms.items():
            t0 = time.perf_counter()
            out[name] = fn()
            runs[name].append(time.perf_counter() - t0)
    return {name: {"median_s": round(statistics.median(runs[name]), 3), "runs_s": [round(x, 3) for x in runs[name]],
                   "result": out[name] if isinstance(out[name], (int, float, str)) else str(out[name])}
            for name in arms}


def timed(fn: Callable[[], Any], repeat: int) -> dict[str, Any]:
    runs = []
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        runs.append(time.perf_counter() - t0)
    return {"median_s": round(statistics.median(runs), 3), "runs_s": [round(r, 3) for r in runs],
            "result": out if isinstance(out, (int, float, str)) or out is None else str(out)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--base", default=None, help="reuse/create the table here")
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-column-stats", action="store_true", help="a table without column_stats")
    ap.add_argument("--table-type", default="COPY_ON_WRITE", choices=["COPY_ON_WRITE", "MERGE_ON_READ"])
    ap.add_argument("--logged-days", type=int, default=18,
                    help="merge-on-read: the newest partitions an upsert gives log files")
    a = ap.parse_args()
    mor = a.table_type == "MERGE_ON_READ"
    a.out = a.out or str(Path(__file__).parent / "results" / ("spark_read_mor.json" if mor else "spark_read.json"))
    opts = {**OPTS, "hoodie.metadata.index.column.stats.enable": str(not a.no_column_stats).lower(),
            "hoodie.datasource.write.table.type": a.table_type}

    from pyhudi import config as C
    from pyhudi.read.filters import EQ, GE, LE, Pred
    from pyhudi.spark.native import planner_of
    from pyhudi.spark.session import get_spark
    from pyhudi.spark.source import plan_query
    from pyhudi.table.table import Table

    spark = get_spark()
    base = a.base or str(Path(tempfile.mkdtemp(prefix="bench-spark-read-")) / "t")
    load_s = None
    if not Table.exists(base):
        t0 = time.perf_counter()
        t = Table.create(base, rows(np.arange(1)).schema, opts)
        t.write(spark.createDataFrame(rows(np.arange(a.rows))), "bulk_insert", opts)
        load_s = round(time.perf_counter() - t0, 1)
        print(f"loaded {a.rows} rows in {load_s}s", file=sys.stderr, flush=True)
        if mor and a.logged_days:
            ids = np.arange(a.rows)
            late = ids[(ids % len(DAYS) >= len(DAYS) - a.logged_days)  # 2% of their rows: every 50th of a day's
                       & ((ids // len(DAYS)) % 50 == 7)]
            up = rows(late)
            up = up.set_column(up.schema.get_field_index("v"), "v", pa.array(-late.astype(np.float64)))
            up = up.set_column(up.schema.get_field_index("ts"), "ts", pa.array(np.full(len(late), 2, np.int64)))
            Table.open(base).write(spark.createDataFrame(up), "upsert", opts)
            print(f"updated {len(late)} rows of the newest {a.logged_days} days", file=sys.stderr, flush=True)
    plan, _ = plan_query({"path": base})
    files = [os.path.join(base, s.base_file) for s in plan.slices if s.base_file]
    logged = sum(1 for s in plan.slices if s.log_files)
    day = DAYS[151]
    key = f"id{(a.rows // 2):010d}"
    d0 = 100  # seq range: four days' rows, ~1.1% of the table and of its files
    lo, hi = d0 * 10_000_000, (d0 + 4) * 10_000_000 - 1
    src = spark.read.format("hudi").load(base)
    py_src = spark.read.format("hudi").option(C.READ_SPARK_PARQUET, "false").load(base)
    pq_df = spark.read.parquet(*files)
    planner = planner_of(spark)
    listed: dict[str, int | None] = {}

    def listing(name: str, fn: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            if planner is not None:
                planner.planned = None
            out = fn()
            listed[name] = planner.planned if planner is not None else None
            return out
        return run

    r = a.repeat
    arms: dict[str, Callable[[], Any]] = {
        "count_hudi": listing("count", lambda: src.count()),
        "count_parquet": lambda: pq_df.count(),
        "count_python_source": lambda: py_src.count(),
        "sum_hudi": lambda: src.agg({"v": "sum"}).collect()[0][0],
        "sum_parquet": lambda: pq_df.agg({"v": "sum"}).collect()[0][0],
        "sum_python_source": lambda: py_src.agg({"v": "sum"}).collect()[0][0],
        "one_partition_hudi": listing("one_partition",
                                      lambda: src.where(f"dt = '{day}'").agg({"v": "sum"}).collect()[0][0]),
        "one_partition_parquet": lambda: pq_df.where(f"dt = '{day}'").agg({"v": "sum"}).collect()[0][0],
        "key_hudi": listing("key", lambda: src.where(f"id = '{key}'").collect()[0]["v"]),
        "key_parquet": lambda: pq_df.where(f"id = '{key}'").collect()[0]["v"],
        "range_hudi": listing("range", lambda: src.where(f"seq between {lo} and {hi}").agg({"v": "sum"})
                              .collect()[0][0]),
        "range_parquet": lambda: pq_df.where(f"seq between {lo} and {hi}").agg({"v": "sum"}).collect()[0][0],
    }
    if mor and logged:  # one partition whose slice has log files: the Python half alone
        last = DAYS[-1]
        arms["one_logged_partition_hudi"] = listing(
            "one_logged_partition", lambda: src.where(f"dt = '{last}'").agg({"v": "sum"}).collect()[0][0])
        arms["one_logged_partition_python_source"] = (
            lambda: py_src.where(f"dt = '{last}'").agg({"v": "sum"}).collect()[0][0])
    res = timed_alternating(arms, r)
    for q in ("count", "sum"):  # the source's two readers return the same rows
        assert res[f"{q}_hudi"]["result"] == res[f"{q}_python_source"]["result"], res
    queries = {"full": (), "one_partition": (Pred("dt", EQ, day),), "key": (Pred("id", EQ, key),),
               "range": (Pred("seq", GE, lo), Pred("seq", LE, hi))}
    planned = {name: plan_query({"path": base}, preds)[1].as_dict() for name, preds in queries.items()}
    planning = {name: timed(lambda preds=preds: len(plan_query({"path": base}, preds)[0].slices), r)
                for name, preds in queries.items()}
    full = res["count_hudi"]["median_s"]
    out = {
        "rows": a.rows,
        "partitions": len(DAYS),
        "table_type": a.table_type,
        "files": len(files),
        "file_slices_with_log_files": logged,
        "load_s": load_s,
        "column_stats": not a.no_column_stats,
        "queries": res,
        "planned": planned,
        # base files Spark's parquet reader was handed (None: the session has no pyhudi rule, the Python source
        # read the table)
        "files_listed_for_spark": listed,
        "planning_on_driver": planning,
        "ratios": {
            "count_hudi_over_parquet": round(full / res["count_parquet"]["median_s"], 2),
            "sum_hudi_over_parquet": round(res["sum_hudi"]["median_s"] / res["sum_parquet"]["median_s"], 2),
            "count_python_source_over_parquet": round(res["count_python_source"]["median_s"]
                                                      / res["count_parquet"]["median_s"], 2),
            "sum_python_source_over_parquet": round(res["sum_python_source"]["median_s"]
                                                    / res["sum_parquet"]["median_s"], 2),
            "full_scan_over_one_partition": round(res["sum_hudi"]["median_s"] / res["one_partition_hudi"]["median_s"],
                                                  1),
            "full_scan_over_range": round(res["sum_hudi"]["median_s"] / res["range_hudi"]["median_s"], 1),
            "sum_python_source_over_hudi": round(res["sum_python_source"]["median_s"] / res["sum_hudi"]["median_s"],
                                                 2),
        },
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_avg_at_end": [round(x, 1) for x in os.getloadavg()],
                    "spark_master": spark.sparkContext.master},
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()

"""Commit-path benchmark: ``python benchmarks/bench_commit.py [--commits 50] [--rows 200] [--table-rows 20000]``.

What the transaction costs per commit with optimistic concurrency control (the FileSystemBasedLockProvider's lock
file taken at begin, at commit and for each post-commit service; the commit-time heartbeat and conflict checks)
against the single-writer default, on one table in one Spark session: small upserts (half updates of random live
keys, half new keys), the two modes alternating commit by commit so that both see the same table sizes and machine
load. Reports per mode the median of the whole write and of its stages (``timings_s``), and the time spent
waiting for the lock and in the commit-time checks.

Prints one JSON object and stores it in benchmarks/results/commit.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

OPTS = {
    "hoodie.table.name": "commit_bench",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "dt",
    "hoodie.table.ordering.fields": "ts",
}
OCC = {
    "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
    "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
}


def _rows(ids: list[int], ts: int) -> pa.Table:
    return pa.table({
        "id": [f"id{i:09d}" for i in ids],
        "dt": [f"2026/01/{i % 8 + 1:02d}" for i in ids],
        "ts": pa.array([ts] * len(ids), pa.int64()),
        "v": [float(i) for i in ids],
    })


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commits", type=int, default=50, help="commits per mode")
    ap.add_argument("--rows", type=int, default=200, help="rows per upsert")
    ap.add_argument("--table-rows", type=int, default=20_000)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "commit.json"))
    a = ap.parse_args()

    from pyhudi.spark.session import get_spark
    from pyhudi.table.table import Table

    spark = get_spark()
    rng = random.Random(7)
    base = str(Path(tempfile.mkdtemp(prefix="bench-commit-")) / "t")
    t = Table.create(base, _rows([0], 0).schema, OPTS)
    t.write(spark.createDataFrame(_rows(list(range(a.table_rows)), 1)), "bulk_insert", OPTS)
    nxt = a.table_rows
    runs: dict[str, list[dict[str, float]]] = {"single_writer": [], "occ": []}
    for i in range(2 * a.commits + 2):  # two warm-up commits, then alternating modes
        mode = "occ" if i % 2 else "single_writer"
        upd = rng.sample(range(nxt), a.rows // 2)
        new = list(range(nxt, nxt + a.rows - len(upd)))
        nxt += len(new)
        df = spark.createDataFrame(_rows(upd + new, i + 2))
        opts = {**OPTS, **(OCC if mode == "occ" else {})}
        t0 = time.perf_counter()
        res = Table.open(base).write(df, "upsert", opts)
        wall = time.perf_counter() - t0
        if i >= 2:
            runs[mode].append({**res.timings, "wall": wall})
        print(f"{i} {mode} {wall:.3f}s", file=sys.stderr, flush=True)

    def med(mode: str, key: str) -> float:
        return round(statistics.median(r.get(key, 0.0) for r in runs[mode]), 4)

    keys = sorted({k for rs in runs.values() for r in rs for k in r})
    out = {
        "commits_per_mode": a.commits,
        "rows_per_upsert": a.rows,
        "table_rows": a.table_rows,
        "median_s": {m: {k: med(m, k) for k in keys} for m in runs},
        "occ_minus_single_writer_s": {k: round(med("occ", k) - med("single_writer", k), 4) for k in keys},
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
    }
    Path(a.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out))
    spark.stop()


if __name__ == "__main__":
    main()

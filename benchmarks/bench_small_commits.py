"""Small-commit benchmark: ``python benchmarks/bench_small_commits.py [--table-rows 1000000] [--rows 2000]``.

The fixed cost of a commit, as a pipeline committing every few minutes pays it: upserts of ``--rows`` rows into a
``--table-rows``-row table (record index, metadata table, 365 daily partitions), each half new records of the
latest day and half updates of records of the last three days (so a commit rewrites a few files, not the table),
``--commits`` of them in one warm Spark session after ``--warmup`` unmeasured ones. Reports the median latency and the median of every stage
of ``timings_s`` (where the time goes), and optionally a cProfile of one commit on the driver. ``--option K=V``
adds write options (e.g. column statistics on).

Prints one JSON object and stores it in benchmarks/results/small_commits.json.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import platform
import pstats
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

OPTS = {
    "hoodie.table.name": "small_commits",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "dt",
    "hoodie.table.ordering.fields": "ts",
}
DAYS = [f"2026/{m:02d}/{d:02d}" for m in range(1, 13) for d in range(1, 29)][:365]


def rows(ids: np.ndarray, ts: int) -> pa.Table:
    return pa.table({
        "id": pa.array([f"id{i:010d}" for i in ids]),
        "dt": pa.array([DAYS[i % len(DAYS)] for i in ids]),
        "ts": pa.array(np.full(len(ids), ts, dtype=np.int64)),
        "v": pa.array(ids.astype(np.float64)),
    })


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--table-rows", type=int, default=1_000_000)
    ap.add_argument("--rows", type=int, default=2_000)
    ap.add_argument("--commits", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="cProfile the last commit (driver side)")
    ap.add_argument("--base", default=None, help="reuse/create the table here")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "small_commits.json"))
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="a write option for the table's creation and every upsert (repeatable), e.g. "
                         "hoodie.metadata.index.column.stats.enable=true")
    a = ap.parse_args()
    opts = {**OPTS, **dict(o.split("=", 1) for o in a.option)}

    from pyhudi.spark.session import get_spark
    from pyhudi.table.table import Table

    spark = get_spark()
    base = a.base or str(Path(tempfile.mkdtemp(prefix="bench-small-")) / "t")
    rng = np.random.default_rng(3)
    if not Table.exists(base):
        t0 = time.perf_counter()
        t = Table.create(base, rows(np.arange(1), 0).schema, opts)
        t.write(spark.createDataFrame(rows(np.arange(a.table_rows), 1)), "bulk_insert", opts)
        print(f"loaded {a.table_rows} rows in {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)
    nxt = a.table_rows + 10_000_000 * random.Random().randint(1, 9)  # new keys never collide across runs
    ids = np.arange(a.table_rows)
    recent = ids[ids % len(DAYS) >= len(DAYS) - 3]  # the last three days
    runs = []
    prof = None
    for i in range(a.warmup + a.commits):
        upd = rng.choice(recent, a.rows // 2, replace=False)
        first = nxt - nxt % len(DAYS) + len(DAYS) - 1  # ids of the latest day: id % 365 == 364
        new = first + len(DAYS) * np.arange(a.rows - len(upd))
        nxt = int(new[-1]) + 1
        df = spark.createDataFrame(rows(np.concatenate([upd, new]), i + 2))
        last = a.profile and i == a.warmup + a.commits - 1
        if last:
            prof = cProfile.Profile()
            prof.enable()
        t0 = time.perf_counter()
        res = Table.open(base).write(df, "upsert", opts)
        wall = time.perf_counter() - t0
        if prof is not None and last:
            prof.disable()
        if i >= a.warmup:
            runs.append({**res.timings, "wall": wall})
        print(f"{i} {wall:.3f}s {json.dumps({k: round(v, 3) for k, v in res.timings.items()})}", file=sys.stderr,
              flush=True)
    keys = sorted({k for r in runs for k in r})
    out = {
        "table_rows": a.table_rows,
        "rows_per_upsert": a.rows,
        "commits": a.commits,
        "options": dict(o.split("=", 1) for o in a.option),
        "median_s": {k: round(statistics.median(r.get(k, 0.0) for r in runs), 4) for k in keys},
        "runs_wall_s": [round(r["wall"], 3) for r in runs],
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
    }
    if prof is not None:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(40)
        out["profile_top"] = s.getvalue().splitlines()[:80]
    Path(a.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "profile_top"}))
    if prof is not None:
        print("\n".join(out["profile_top"]), file=sys.stderr)
    spark.stop()


if __name__ == "__main__":
    main()

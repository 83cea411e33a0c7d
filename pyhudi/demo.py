"""``make demo``: generate sample data, write it to a table, upsert into it, print a summary.

Sample records have random UUID keys and ``YYYY/MM/DD`` partitions (nested paths), an event-time column for
ordering, and a few payload columns. Runs on local Spark: the first batch is saved as a parquet file
(``demo-data/trips-input``, data as it usually arrives) and loaded with Spark's reader, the second is a DataFrame made
from Arrow in the driver; the table lands in ``demo-data/trips``.
"""

from __future__ import annotations

import os
import shutil
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def sample(n: int, rng: np.random.Generator, days: int = 30) -> pa.Table:
    from pyhudi.bench.hfile_bench import random_uuid_keys

    day = rng.integers(0, days, size=n)
    dates = (np.datetime64("2026-10-01") + day.astype("timedelta64[D]")).astype("datetime64[s]")
    part = pc.strftime(pa.array(dates), format="%Y/%m/%d")
    return pa.table(
        {
            "uuid": random_uuid_keys(n, rng),
            "ts": pa.array(rng.integers(1_790_000_000_000, 1_800_000_000_000, size=n), pa.int64()),
            "rider": [f"rider-{i % 997:03d}" for i in rng.integers(0, 10_000, size=n)],
            "fare": pa.array(np.round(rng.uniform(3, 120, size=n), 2)),
            "city": pa.array(rng.choice(["amsterdam", "lisbon", "oslo", "porto"], size=n)),
            "date": part,
        }
    )


def main() -> int:
    from pyhudi.spark.java import SHORT_JOB_INPUT_BYTES
    from pyhudi.spark.session import get_spark
    from pyhudi.table.table import Table

    out = os.path.abspath(os.environ.get("PYHUDI_DEMO_DIR", "demo-data"))
    base = os.path.join(out, "trips")
    inp = os.path.join(out, "trips-input")
    shutil.rmtree(base, ignore_errors=True)
    shutil.rmtree(inp, ignore_errors=True)
    n = int(os.environ.get("PYHUDI_DEMO_ROWS", "200000"))
    rng = np.random.default_rng(7)
    print(f"starting Spark (local) and writing {n} sample rows to {base}", flush=True)
    first = sample(n, rng)
    # a few small writes: a short job for the JVM (pyhudi.spark.java.SHORT_JOB_JAVA_OPTIONS); the demo reads the
    # table with Table.read, not through the data source
    spark = get_spark(short_job=first.nbytes <= SHORT_JOB_INPUT_BYTES, data_source=False)
    opts = {
        "hoodie.table.name": "trips",
        "hoodie.datasource.write.recordkey.field": "uuid",
        "hoodie.datasource.write.partitionpath.field": "date",
        "hoodie.table.ordering.fields": "ts",
    }
    t = Table.create(base, first.schema, opts)
    # read by Spark's tasks from a file: a DataFrame of 200k rows made from Arrow in the driver is a local relation
    # the write caches first (the first write took 0.8-1.3 s longer that way)
    os.makedirs(inp)
    pq.write_table(first, os.path.join(inp, "part-0.parquet"))
    r1 = t.write(spark.read.parquet(inp), "bulk_insert", opts)
    print(f"bulk_insert  {r1.instant}: {r1.inserted} inserted into {r1.files_written} files "
          f"in {r1.partitions} partitions ({r1.timings['total']:.1f}s)", flush=True)
    m = max(1, n // 10)
    # half updates of existing records (same key and partition, later event time, new fare), half new records
    updates = first.take(pa.array(rng.choice(n, size=m // 2, replace=False)))
    updates = updates.set_column(1, "ts", pa.array(np.full(len(updates), 1_900_000_000_000), pa.int64()))
    updates = updates.set_column(3, "fare", pa.array(np.round(rng.uniform(3, 120, size=len(updates)), 2)))
    inserts = sample(m - len(updates), rng)
    batch = pa.concat_tables([updates, inserts])
    t0 = time.perf_counter()
    r2 = t.write(spark.createDataFrame(batch), "upsert", opts)
    print(f"upsert       {r2.instant}: {r2.inserted} inserted, {r2.updated} updated, {r2.deleted} deleted "
          f"in {r2.files_written} files ({time.perf_counter() - t0:.1f}s; tag {r2.timings.get('tag', 0):.1f}s)",
          flush=True)
    total = t.read(spark).count()
    ok = total == n + len(inserts) and r2.updated == len(updates) and r2.inserted == len(inserts)
    t = Table.open(base)
    stats = t.record_index_stats()
    print(f"record index: {stats['entries']} keys in {stats['file_groups']} file groups, "
          f"{stats['bytes_per_entry']:.1f} bytes per key")
    probe = [str(k) for k in updates.column("uuid").to_pylist()[:3]] + ["no-such-key"]
    t0 = time.perf_counter()
    found = t.lookup(probe).to_pylist()
    ms = (time.perf_counter() - t0) * 1000
    for f in found:
        where = f"{f['partition']}/{f['file_id']}" if f["found"] else "not found"
        print(f"  lookup {f['key']}: {where}")
    print(f"  ({len(probe)} keys looked up in {ms:.0f} ms)")
    ok = ok and stats["entries"] == total and [f["found"] for f in found] == [True, True, True, False]
    print(f"table now holds {total} records (expected {n + len(inserts)}); timeline:")
    for i in t.timeline():
        print(f"  {i.requested_time}  {i.action:<12} {i.state.name}")
    spark.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

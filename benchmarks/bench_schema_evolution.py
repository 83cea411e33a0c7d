"""Schema-evolution benchmark: ``python benchmarks/bench_schema_evolution.py [--table-rows 2000000] [--rounds 2]``.

Does adding a column cost one ordinary upsert (no rewrite of the table)? One copy-on-write table of
``--table-rows`` rows (bulk insert, 8 partitions), then ``--rounds`` pairs of upserts of the same shape
(``--updates`` updates of random keys of one partition plus ``--inserts`` new keys in it), alternating: an ordinary
upsert, then one whose input carries a new column (added to the table schema by that commit). Reports per kind the
median wall time, the files and bytes written, against the table's file groups and bytes, and checks that the
evolved rows read back with the new column (others null).

Prints one JSON object and stores it in benchmarks/results/schema_evolution.json.
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
import pyarrow.compute as pc

OPTS = {
    "hoodie.table.name": "evo_bench",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "dt",
    "hoodie.table.ordering.fields": "ts",
}
PARTS = 8


def _rows(ids: list[int], ts: int, extra: dict[str, pa.Array] | None = None) -> pa.Table:
    t = pa.table({
        "id": [f"id{i:09d}" for i in ids],
        "dt": [f"2026/01/{i % PARTS + 1:02d}" for i in ids],
        "ts": pa.array([ts] * len(ids), pa.int64()),
        "v": [float(i) for i in ids],
        "s": [f"payload-{i % 977}" for i in ids],
    })
    for name, arr in (extra or {}).items():
        t = t.append_column(name, arr)
    return t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--table-rows", type=int, default=2_000_000)
    ap.add_argument("--updates", type=int, default=20_000)
    ap.add_argument("--inserts", type=int, default=2_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "schema_evolution.json"))
    a = ap.parse_args()

    from pyhudi.spark.session import get_spark
    from pyhudi.table.table import Table

    spark = get_spark()
    rng = random.Random(22)
    base = str(Path(tempfile.mkdtemp(prefix="bench-evo-")) / "t")
    t = Table.create(base, _rows([0], 0).schema, OPTS)
    t0 = time.perf_counter()
    step = 10**6
    for lo in range(0, a.table_rows, step):  # bulk insert in slices: the driver builds each DataFrame
        t.write(spark.createDataFrame(_rows(list(range(lo, min(a.table_rows, lo + step))), 1)), "bulk_insert", OPTS)
    load_s = time.perf_counter() - t0
    nxt = a.table_rows
    runs: dict[str, list[dict[str, float]]] = {"ordinary": [], "add_column": []}
    extra: dict[str, pa.DataType] = {}
    for i in range(2 * a.rounds + 1):  # one warm-up upsert, then alternating kinds
        kind = "add_column" if i % 2 == 0 and i else "ordinary"
        part = rng.randrange(PARTS)
        upd = [k for k in rng.sample(range(part, a.table_rows, PARTS), a.updates)]
        new = [nxt + PARTS * j + part for j in range(a.inserts)]  # new keys in the same partition
        nxt += PARTS * a.inserts
        if kind == "add_column":
            extra[f"c{i}"] = pa.string()
        n = len(upd) + len(new)
        cols = {c: pa.array([f"{c}-{k}" for k in upd + new], ty) for c, ty in extra.items()}
        df = spark.createDataFrame(_rows(upd + new, i + 2, cols))
        view = Table.open(base).view()
        groups = len(list(view.latest_file_slices()))
        table_bytes = sum(f.size for f in view.latest_base_files())
        t0 = time.perf_counter()
        res = Table.open(base).write(df, "upsert", OPTS)
        wall = time.perf_counter() - t0
        written = sum(s.file_size for s in res.stats)
        if i:
            runs[kind].append({"wall_s": wall, "files_written": len(res.stats), "bytes_written": written,
                               "table_file_groups": groups, "table_bytes": table_bytes, "rows": n,
                               **{f"stage_{k}_s": v for k, v in res.timings.items()}})
        print(f"{i} {kind} {wall:.2f}s files {len(res.stats)}/{groups}", file=sys.stderr, flush=True)
    # the evolved rows read back with the new columns, the others with null there
    t = Table.open(base)
    last = sorted(extra)[-1]
    sample = [f"id{k:09d}" for k in (upd[:50] + [(p * PARTS + (part + 1) % PARTS) for p in range(50)])]
    got = t.read_keys(sample)
    ok = (pc.sum(pc.is_valid(got.column(last))).as_py() == 50 and got.num_rows == len(set(sample)))
    assert [f.name for f in t.schema()][-len(extra):] == sorted(extra, key=lambda c: int(c[1:])), t.schema()

    def med(kind: str, key: str) -> float:
        return round(statistics.median(r[key] for r in runs[kind]), 4)

    keys = sorted({k for rs in runs.values() for r in rs for k in r})
    out = {
        "table_rows": a.table_rows,
        "rows_per_upsert": a.updates + a.inserts,
        "rounds": a.rounds,
        "load_s": round(load_s, 1),
        "median": {k: {key: med(k, key) for key in keys} for k in runs},
        "add_column_over_ordinary_wall": round(med("add_column", "wall_s") / med("ordinary", "wall_s"), 3),
        "read_back_ok": bool(ok),
        "columns_added": sorted(extra),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
    }
    Path(a.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out))
    spark.stop()


if __name__ == "__main__":
    main()

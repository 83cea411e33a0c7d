"""Merge-on-read benchmark: ``python benchmarks/bench_mor.py [--rows 2000000] [--upsert-rows 100000] [--upserts 5]``.

The same rows (about 150 bytes, random UUID keys, 365 day partitions: the record-index benchmark's data) are
bulk-inserted into a copy-on-write table, a merge-on-read table and a Delta table (delta-rs), then ``--upserts``
upserts of ``--upsert-rows`` rows each (half updates of random live keys, half new keys) go into each, in the same
process and run. Hudi tables use the record index and Hudi's defaults (a merge-on-read table compacts inline after 5
deltacommits); delta-rs runs ``MERGE ... WHEN MATCHED UPDATE * WHEN NOT MATCHED INSERT *``. The first upsert after
the load and the steady state (upserts 2 to N, median) are reported apart.

Then the reads: a merge-on-read table given the same upserts with inline compaction off (``--upserts`` uncompacted
deltacommits) is read in full through Spark (``Table.read(spark)`` written to Spark's ``noop`` sink), compacted
(``Table.compact``: compaction throughput in rows/s), and read again.

``--no-reads`` skips the reads and the compaction. Prints one JSON object and stores it in
benchmarks/results/mor.json (``--out``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pyhudi.bench.rli_bench import BASE_OPTIONS, day_partitions, random_uuid_keys, rows_table, write_input

INPUT_CHUNK = 1_000_000
DAYS = 365


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def generate(work: str, rows: int, upsert_rows: int, upserts: int, days: int = DAYS, seed: int = 19) -> list[str]:
    """The load's input (``work/input``) and one input folder per upsert; returns the upsert folders."""
    rng = np.random.default_rng(seed)
    keys = random_uuid_keys(rows, rng)
    dts = day_partitions(rng.integers(0, days, rows))
    inp = os.path.join(work, "input")
    os.makedirs(inp)
    for i in range(0, rows, INPUT_CHUNK):
        pq.write_table(rows_table(keys[i:i + INPUT_CHUNK], dts[i:i + INPUT_CHUNK], 1, rng),
                       os.path.join(inp, f"part-{i // INPUT_CHUNK:04d}.parquet"))
    out = []
    for u in range(upserts):
        n_upd = upsert_rows // 2
        pick = pa.array(rng.choice(len(keys), size=n_upd, replace=False))
        new_keys = random_uuid_keys(upsert_rows - n_upd, rng)
        new_dts = day_partitions(rng.integers(0, days, upsert_rows - n_upd))
        batch = rows_table(pa.concat_arrays([keys.take(pick), new_keys]),
                           pa.concat_arrays([dts.take(pick), new_dts]), 2 + u, rng)
        path = os.path.join(work, f"upsert-{u}")
        write_input(batch, path, files=2)
        out.append(path)
        keys, dts = pa.concat_arrays([keys, new_keys]), pa.concat_arrays([dts, new_dts])  # the new keys are live
    return out


def _first_and_steady(out: dict[str, Any]) -> None:
    """The first upsert's wall time, and the median of the others (the steady state)."""
    walls = [u["wall_s"] for u in out["upserts"]]
    out["first_upsert_s"] = walls[0]
    out["steady_median_s"] = round(statistics.median(walls[1:]), 3) if len(walls) > 1 else None


def hudi_options(table_type: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**BASE_OPTIONS, "hoodie.table.type": table_type, "hoodie.index.type": "RECORD_INDEX",
            "hoodie.metadata.record.index.enable": "true", **(extra or {})}


def hudi_run(spark: Any, work: str, name: str, opts: dict[str, str], upsert_dirs: list[str]) -> dict[str, Any]:
    from pyhudi.table.table import Table

    path = os.path.join(work, name)
    inp = os.path.join(work, "input")
    t0 = time.perf_counter()
    table = Table.create(path, pq.read_schema(os.path.join(inp, sorted(os.listdir(inp))[0])), opts)
    table.write(spark.read.parquet(inp), "bulk_insert", opts)
    if "record_index" not in Table.open(path).config.metadata_partitions:
        Table.open(path).build_record_index()
    out: dict[str, Any] = {"load_s": round(time.perf_counter() - t0, 2), "upserts": []}
    out["loaded_layout"] = layout(path)
    _log(f"{name}: loaded in {out['load_s']} s ({out['loaded_layout']})")
    for i, d in enumerate(upsert_dirs):
        t0 = time.perf_counter()
        res = Table.open(path).write(spark.read.parquet(d), "upsert", opts)
        wall = time.perf_counter() - t0
        r = res.to_dict()
        out["upserts"].append({"wall_s": round(wall, 3), "files_written": r.get("files_written"),
                               "inserted": r.get("inserted"), "updated": r.get("updated"),
                               "timings_s": r.get("timings_s")})
        _log(f"{name}: upsert {i + 1} {wall:.2f} s ({r.get('updated')} updated, {r.get('inserted')} inserted)")
    _first_and_steady(out)
    out["final_layout"] = layout(path)
    out["path"] = path
    return out


def layout(path: str) -> dict[str, Any]:
    """File groups of the table's latest view, and the median size of their base files."""
    from pyhudi.table.table import Table

    slices = Table.open(path).view().latest_file_slices()
    sizes = [s.base_file.size for s in slices if s.base_file is not None]
    return {"partitions": len({s.partition for s in slices}), "file_groups": len(slices),
            "with_log_files": sum(1 for s in slices if s.has_log_files),
            "median_base_file_mb": round(statistics.median(sizes) / 2**20, 2) if sizes else None}


def delta_run(work: str, upsert_dirs: list[str]) -> dict[str, Any]:
    from pyhudi.bench.peers import delta_create, delta_upsert

    path = os.path.join(work, "delta")
    t0 = time.perf_counter()
    created = delta_create(path, os.path.join(work, "input"))
    out: dict[str, Any] = {"load_s": round(time.perf_counter() - t0, 2), "files": created["files"], "upserts": []}
    _log(f"delta: loaded in {out['load_s']} s")
    for i, d in enumerate(upsert_dirs):
        source = pq.read_table(d)
        t0 = time.perf_counter()
        m = delta_upsert(path, source)
        wall = time.perf_counter() - t0
        out["upserts"].append({"wall_s": round(wall, 3), **m})
        _log(f"delta: upsert {i + 1} {wall:.2f} s ({m})")
    _first_and_steady(out)
    return out


def full_read_s(spark: Any, path: str, repeat: int = 3) -> float:
    """Median seconds of a snapshot read of every row and column (Spark's ``noop`` sink)."""
    from pyhudi.table.table import Table

    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        Table.open(path).read(spark).write.format("noop").mode("overwrite").save()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times), 3)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--upsert-rows", type=int, default=100_000)
    ap.add_argument("--upserts", type=int, default=5)
    ap.add_argument("--days", type=int, default=DAYS, help="day partitions of the table (365)")
    ap.add_argument("--no-delta", action="store_true")
    ap.add_argument("--no-cow", action="store_true")
    ap.add_argument("--no-reads", action="store_true", help="skip the snapshot reads and the compaction")
    ap.add_argument("--mor-option", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra option of the merge-on-read tables' writes (repeatable)")
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "mor.json"))
    a = ap.parse_args()

    from pyhudi.bench.peers import store_result
    from pyhudi.spark.session import get_spark

    work = tempfile.mkdtemp(prefix="bench-mor-", dir=a.work_dir)
    try:
        t0 = time.perf_counter()
        dirs = generate(work, a.rows, a.upsert_rows, a.upserts, a.days)
        _log(f"data generated in {time.perf_counter() - t0:.1f} s")
        spark = get_spark()
        result: dict[str, Any] = {"rows": a.rows, "upsert_rows": a.upsert_rows, "upserts": a.upserts, "days": a.days}
        mor_extra = dict(o.split("=", 1) for o in a.mor_option)
        result["mor_options"] = mor_extra
        if not a.no_cow:
            result["cow"] = hudi_run(spark, work, "cow", hudi_options("COPY_ON_WRITE"), dirs)
            shutil.rmtree(result["cow"].pop("path"), ignore_errors=True)
        result["mor"] = hudi_run(spark, work, "mor", hudi_options("MERGE_ON_READ", mor_extra), dirs)
        shutil.rmtree(result["mor"].pop("path"), ignore_errors=True)
        if not a.no_delta:
            result["delta"] = delta_run(work, dirs)
            shutil.rmtree(os.path.join(work, "delta"), ignore_errors=True)
        if not a.no_reads:
            result["mor_reads"] = reads_run(spark, work, mor_extra, dirs)
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for k in ("cow", "mor", "delta"):
        if k in result:
            result.setdefault("steady_median_s", {})[k] = result[k]["steady_median_s"]
            result.setdefault("first_upsert_s", {})[k] = result[k]["first_upsert_s"]
    if "delta" in result and "mor" in result:
        result["delta_over_mor_steady"] = round(result["delta"]["steady_median_s"] / result["mor"]["steady_median_s"], 2)
    store_result(result, a.out)


def reads_run(spark: Any, work: str, mor_extra: dict[str, str], dirs: list[str]) -> dict[str, Any]:
    """A merge-on-read table given the same upserts without inline compaction: read, compacted, read again."""
    from pyhudi.table.table import Table

    opts = hudi_options("MERGE_ON_READ", {**mor_extra, "hoodie.compact.inline": "false"})
    reads = hudi_run(spark, work, "mor_uncompacted", opts, dirs)
    path = reads.pop("path")
    table = Table.open(path)
    total = table.read(spark).count()
    reads["read_uncompacted_s"] = full_read_s(spark, path)
    t0 = time.perf_counter()
    done = Table.open(path).compact(spark=spark)
    compact_s = time.perf_counter() - t0
    reads["compaction_s"] = round(compact_s, 2)
    reads["compactions"] = len(done)
    reads["compaction_rows_per_s"] = round(total / compact_s)
    reads["read_compacted_s"] = full_read_s(spark, path)
    reads["read_uncompacted_over_compacted"] = round(reads["read_uncompacted_s"] / reads["read_compacted_s"], 3)
    reads["rows"] = total
    return reads


if __name__ == "__main__":
    main()

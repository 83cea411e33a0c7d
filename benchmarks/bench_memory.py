"""Peak memory of whole commands: ``python benchmarks/bench_memory.py [--rows 20000000] [--upsert-rows 100000]``.

Each step is one fresh ``pyhudi`` process, run as a scheduler runs it, with the default session settings; a
sampler in this process adds up the RSS of the command's whole process tree (the Python driver, the JVM it starts,
which runs the tasks in local mode, and the Python workers) every 50 ms:

1. ``pyhudi write T --operation bulk_insert`` of ``--rows`` rows (the bulk-load benchmark's rows: random UUID keys,
   365 day partitions) into a new copy-on-write table with the record index;
2. ``pyhudi write T --operation upsert`` of ``--upsert-rows`` rows into it (half updates of random live keys, half
   inserts);
3. ``pyhudi validate T`` (the metadata table and the record index checked against the files).

Prints one JSON object and stores it in benchmarks/results/memory.json (``--out``): per step the wall seconds,
the peak RSS of the tree and its parts at the peak (driver, jvm, python_workers).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from pyhudi.bench.rli_bench import day_partitions, random_uuid_keys, rows_table, upsert_rows, write_input

INPUT_CHUNK = 1_000_000
DAYS = 365
WRITE_ARGS = ["--record-key", "id", "--partition-field", "dt", "--ordering-field", "ts",
              "--index-type", "RECORD_INDEX", "--json"]


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def generate(path: str, upsert_path: str, rows: int, upsert_n: int, seed: int = 23) -> None:
    """``rows`` rows in 1M-row parquet files under ``path``; the upsert batch (keys drawn from them) under
    ``upsert_path``."""
    rng = np.random.default_rng(seed)
    os.makedirs(path)
    chunks = []
    for i in range(0, rows, INPUT_CHUNK):
        n = min(INPUT_CHUNK, rows - i)
        t = rows_table(random_uuid_keys(n, rng), day_partitions(rng.integers(0, DAYS, n)), 1, rng)
        pq.write_table(t, os.path.join(path, f"part-{i // INPUT_CHUNK:04d}.parquet"))
        if i == 0:
            chunks.append(t)
    first = chunks[0]
    write_input(upsert_rows(first.column("id").combine_chunks(), first.column("dt").combine_chunks(), upsert_n, rng),
                upsert_path, files=1)


def measured(cmd: list[str], log: str) -> dict[str, Any]:
    """Run ``cmd`` as a fresh process; its wall time, exit code, last JSON line and peak tree RSS."""
    from pyhudi.bench.measure import PeakRSS

    t0 = time.perf_counter()
    with open(log, "w") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        with PeakRSS(pid=p.pid) as mem:
            out, _ = p.communicate()
    wall = time.perf_counter() - t0
    last = next((json.loads(line) for line in reversed(out.splitlines()) if line.startswith("{")), None)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}); see {log}")
    # the tree's RSS over the run, a sample a second (when the peak came: which stage of the command)
    step = max(1, int(1 / mem.interval_s))
    timeline = [[round(t - mem.samples[0][0], 1), round(v / 1e9, 2)] for t, v in mem.samples[::step]]
    peak_at = next((round(t - mem.samples[0][0], 1) for t, v in mem.samples if v == mem.peak), None)
    return {"wall_s": round(wall, 2), "peak_rss_gb": round(mem.peak / 1e9, 2), "peak_at_s": peak_at,
            "peak_parts_gb": {k: round(v / 1e9, 2) for k, v in sorted(mem.peak_parts.items())},
            "peak_pss_gb": round(mem.peak_pss / 1e9, 2),
            "peak_pss_parts_gb": {k: round(v / 1e9, 2) for k, v in sorted(mem.peak_pss_parts.items())},
            "timings_s": (last or {}).get("timings_s"), "rss_gb_by_second": timeline}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--upsert-rows", type=int, default=100_000)
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work folder (its path is logged)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "memory.json"))
    a = ap.parse_args()

    from pyhudi.bench.peers import store_result

    cli = [sys.executable, "-c", "from pyhudi.cli.main import main; main()"]
    work = tempfile.mkdtemp(prefix="bench-memory-", dir=a.work_dir)
    _log(f"work folder {work}")
    result: dict[str, Any] = {"rows": a.rows, "upsert_rows": a.upsert_rows,
                              "driver_memory": os.environ.get("PYHUDI_SPARK_DRIVER_MEMORY", "default"), "steps": {}}
    try:
        inp, ups, table = (os.path.join(work, n) for n in ("input", "upsert", "t"))
        t0 = time.perf_counter()
        generate(inp, ups, a.rows, a.upsert_rows)
        _log(f"input generated in {time.perf_counter() - t0:.1f} s")
        steps = {
            "bulk_insert": [*cli, "write", table, "--input", inp, "--operation", "bulk_insert", *WRITE_ARGS],
            "upsert": [*cli, "write", table, "--input", ups, "--operation", "upsert", *WRITE_ARGS],
            "validate": [*cli, "validate", table, "--json"],
        }
        for name, cmd in steps.items():
            m = measured(cmd, os.path.join(work, f"{name}.log"))
            result["steps"][name] = m
            _log(f"{name}: {json.dumps({k: v for k, v in m.items() if k != 'rss_gb_by_second'})}")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    store_result(result, a.out)


if __name__ == "__main__":
    main()

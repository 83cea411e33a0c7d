"""Cold-start benchmark: ``python benchmarks/bench_cold_start.py [--rows 200000] [--runs 3]``.

What a fresh process pays: ``pyhudi write --operation bulk_insert`` of ``--rows`` rows (UUID keys, 30 daily
partitions, the demo's records) into a new table, timed from process start to exit, with the Spark driver's
class-data archive (``pyhudi.spark.cds``, built by ``make venv``) and without it (``PYHUDI_SPARK_CDS=0``),
alternating; and the same write's own ``timings_s`` (the work after the session started). Also the start of a
bare local session and its first job, both ways. Prints one JSON object and stores it in
``benchmarks/results/cold_start.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
SESSION = """
import time
t0 = time.perf_counter()
from pyhudi.spark.session import get_spark
s = get_spark()
t1 = time.perf_counter()
s.range(10).collect()
t2 = time.perf_counter()
print({"session_s": round(t1 - t0, 2), "first_job_s": round(t2 - t1, 2)})
"""


def _pyhudi() -> str:
    return str(Path(sys.executable).with_name("pyhudi"))


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return wall, r.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3, help="runs of each mode, alternating")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cold_start.json"))
    a = ap.parse_args()

    from pyhudi.demo import sample

    work = Path(tempfile.mkdtemp(prefix="bench-cold-"))
    src = work / "input.parquet"
    pq.write_table(sample(a.rows, np.random.default_rng(7)), src)
    modes = {"cds": "1", "no_cds": "0"}
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    try:
        for i in range(a.runs):
            for mode, flag in modes.items():
                env = {**os.environ, "PYHUDI_SPARK_CDS": flag}
                wall, out = _timed([sys.executable, "-c", SESSION], env)
                session = json.loads(out.strip().splitlines()[-1].replace("'", '"'))
                table = work / f"t-{mode}-{i}"
                wall_w, out_w = _timed(
                    [_pyhudi(), "write", str(table), "--input", str(src), "--operation", "bulk_insert",
                     "--record-key", "uuid", "--partition-field", "date", "--ordering-field", "ts", "--json"], env)
                res = json.loads(out_w.strip().splitlines()[-1])
                runs[mode].append({"session_process_s": round(wall, 2), **session,
                                   "bulk_insert_process_s": round(wall_w, 2), "timings_s": res["timings_s"]})
                shutil.rmtree(table, ignore_errors=True)
                print(mode, json.dumps(runs[mode][-1]), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def med(mode: str, key: str) -> float:
        return round(statistics.median(r[key] for r in runs[mode]), 2)

    out = {
        "rows": a.rows,
        "runs_per_mode": a.runs,
        "median": {
            m: {k: med(m, k) for k in ("session_s", "first_job_s", "session_process_s", "bulk_insert_process_s")}
            | {"bulk_insert_timings_total_s": round(statistics.median(r["timings_s"]["total"] for r in runs[m]), 2)}
            for m in modes
        },
        "runs": runs,
        "cpus": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
    }
    Path(a.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out["median"]))


if __name__ == "__main__":
    main()

"""Cold-start benchmark: ``python benchmarks/bench_cold_start.py [--rows 200000] [--runs 3]
[--upsert-table-rows 2000000]``.

What a fresh process pays: ``pyhudi write --operation bulk_insert`` of ``--rows`` rows (UUID keys, 30 daily
partitions, the demo's records) into a new table, timed from process start to exit, with the Spark driver's
class-data archive (``pyhudi.spark.cds``, built by ``make venv``) and without it (``PYHUDI_SPARK_CDS=0``),
alternating; and the same write's own ``timings_s`` (the work after the session started). Also the start of a
bare local session (as the ``pyhudi write`` command starts it) and its first job, both ways.

Then an upsert of 100,000 rows (half updates of random live keys, half new keys) into a table of
``--upsert-table-rows`` rows (about 150 bytes, 365 day partitions, the record index), each into a fresh copy of
the table: ``pyhudi write --operation upsert`` in a fresh process, start to exit, against the same command run
in one warm process (after one unmeasured upsert), alternating. Prints one JSON object and stores it in
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
s = get_spark(data_source=False)
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


# the same upsert command, again and again in one process: the warm side of the upsert comparison, in a session
# started as a long-running one (the command alone would start a short job's JVM for its small input). Reads
# the table copies to write from stdin, one per line, prints the wall seconds of each
WARM = """
import sys, time
from pyhudi.cli.main import main
from pyhudi.spark.session import get_spark
get_spark(data_source=False)  # the default JVM, tuned for long-running sessions (no short_job)
args = sys.argv[1:]
for line in sys.stdin:
    t0 = time.perf_counter()
    main(["write", line.strip(), *args], standalone_mode=False)
    print("WALL", round(time.perf_counter() - t0, 3), flush=True)
"""


def _upsert_args(src: Path) -> list[str]:
    return ["--input", str(src), "--operation", "upsert", "--record-key", "id", "--partition-field", "dt",
            "--ordering-field", "ts", "--json"]


def upsert_runs(work: Path, table_rows: int, runs: int) -> dict:
    """The cold and warm upserts (see the module doc), alternating."""
    from pyhudi.bench.hfile_bench import random_uuid_keys
    from pyhudi.bench.rli_bench import clone_table, day_partitions, rows_table, upsert_rows, write_input

    rng = np.random.default_rng(11)
    keys = random_uuid_keys(table_rows, rng)
    dts = day_partitions(rng.integers(0, 365, table_rows))
    write_input(rows_table(keys, dts, 1, rng), str(work / "table-input"))
    write_input(upsert_rows(keys, dts, 100_000, rng), str(work / "upsert"), files=1)
    base = work / "table"
    load_s, _ = _timed([_pyhudi(), "write", str(base), "--input", str(work / "table-input"), "--operation",
                        "bulk_insert", "--record-key", "id", "--partition-field", "dt", "--ordering-field", "ts",
                        "--json"], dict(os.environ))
    upsert = _upsert_args(work / "upsert")
    warm = subprocess.Popen([sys.executable, "-c", WARM, *upsert], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    assert warm.stdin is not None and warm.stdout is not None

    def warm_upsert(n: int) -> float:
        clone = work / f"warm-{n}"
        clone_table(str(base), str(clone))
        warm.stdin.write(f"{clone}\n")  # type: ignore[union-attr]
        warm.stdin.flush()  # type: ignore[union-attr]
        for line in warm.stdout:  # type: ignore[union-attr]
            if line.startswith("WALL "):
                shutil.rmtree(clone, ignore_errors=True)
                return float(line.split()[1])
        raise SystemExit("the warm upsert process ended early")

    out: dict = {"table_rows": table_rows, "upsert_rows": 100_000, "bulk_insert_process_s": round(load_s, 2),
                 "warm_up_upsert_s": warm_upsert(0), "cold_process_s": [], "warm_s": []}
    try:
        for i in range(runs):
            clone = work / f"cold-{i}"
            clone_table(str(base), str(clone))
            wall, _ = _timed([_pyhudi(), "write", str(clone), *upsert], dict(os.environ))
            shutil.rmtree(clone, ignore_errors=True)
            out["cold_process_s"].append(round(wall, 2))
            out["warm_s"].append(warm_upsert(i + 1))
            print("upsert", json.dumps({"cold": out["cold_process_s"][-1], "warm": out["warm_s"][-1]}),
                  file=sys.stderr, flush=True)
    finally:
        warm.stdin.close()
        warm.wait()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3, help="runs of each mode, alternating")
    ap.add_argument("--upsert-table-rows", type=int, default=2_000_000,
                    help="rows of the table the cold and warm upserts write into (0: no upserts)")
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
        upserts = upsert_runs(work, a.upsert_table_rows, a.runs) if a.upsert_table_rows else None
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
        "upsert": upserts,
        "cpus": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
    }
    if upserts:
        cold = statistics.median(upserts["cold_process_s"])
        warm = statistics.median(upserts["warm_s"])
        session = out["median"]["cds"]["session_s"]
        upserts["median"] = {
            "cold_process_s": round(cold, 2), "warm_s": round(warm, 2), "session_s": session,
            # the target: a cold upsert within 1.5x of the warm one plus Spark's own start-up
            "target_s": round(1.5 * warm + session, 2), "cold_over_warm_plus_session": round(cold / (warm + session), 3),
        }
    Path(a.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({**out["median"], "upsert": upserts["median"] if upserts else None}))


if __name__ == "__main__":
    main()

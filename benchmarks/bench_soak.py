"""Soak benchmark: ``python benchmarks/bench_soak.py [--commits 2000] [--window 100]``.

A long-running pipeline in miniature (:mod:`pyhudi.bench.soak`): ``--commits`` small upserts (a few new keys and
updates, a delete every tenth commit) into one table in one warm Spark session, archival, cleaning and the
metadata table's compaction on their defaults. Per window of ``--window`` commits: the median and max commit
latency, the median CPU seconds of a commit (driver, JVM and Python workers: what it costs whatever else the
machine runs) and the median of every stage of ``timings_s``, the largest active timeline of the data table and of the
metadata table (every instant, completed commits, pending) and the LSM history's files at the window's end.
Every ``--check-every`` commits and at the end, hudi-rs and pyhudi read the table and are compared with the model.

The JSON (printed at the end) is rewritten after every window, so an interrupted run leaves its figures in
``--out`` (default benchmarks/results/soak.json) with ``commits_done`` and ``finished``; Ctrl-C or SIGTERM stops it
after the commit under way, and it still checks the model and writes the figures so far.
"""

from __future__ import annotations

import argparse
import json
import platform
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commits", type=int, default=2000)
    ap.add_argument("--window", type=int, default=100)
    ap.add_argument("--check-every", type=int, default=500, help="compare hudi-rs with the model this often")
    ap.add_argument("--shuffle-partitions", type=int, default=None, help="spark.sql.shuffle.partitions (default: "
                    "the session's)")
    ap.add_argument("--base", default=None, help="create the table here (default: a temporary folder)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "soak.json"))
    a = ap.parse_args()

    from pyhudi.bench.soak import (
        OPTIONS,
        SoakWorkload,
        history_files,
        hudi_rs_rows,
        rows_of,
        timeline_sizes,
        tree_cpu_seconds,
    )
    from pyhudi.spark.session import get_spark
    from pyhudi.table.table import Table

    spark = get_spark()
    if a.shuffle_partitions:
        spark.conf.set("spark.sql.shuffle.partitions", str(a.shuffle_partitions))
    base = a.base or str(Path(tempfile.mkdtemp(prefix="bench-soak-")) / "t")
    wl = SoakWorkload()
    table = Table.create(base, wl.table([]).schema, OPTIONS)
    storage = table.storage
    started = time.time()
    windows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    walls: list[float] = []
    cpus: list[float] = []
    cur: list[dict[str, float]] = []
    peak: dict[str, dict[str, int]] = {}  # over the whole run
    win_peak: dict[str, dict[str, int]] = {}  # over the current window
    out: dict[str, Any] = {}

    def flush(finished: bool) -> None:
        out.update({
            "commits_requested": a.commits,
            "commits_done": len(walls),
            "finished": finished,
            "window": a.window,
            "rows_per_commit": wl.inserts + wl.updates,
            "partitions": wl.partitions,
            "options": "defaults (keep.min/max.commits 20/30, cleaner.commits.retained 10, "
                       "metadata compact.max.delta.commits 10, timeline compaction batch 10)",
            "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
            "live_rows": len(wl.live),
            "elapsed_s": round(time.time() - started, 1),
            "median_latency_s_per_window": [w["median_s"] for w in windows],
            "windows": windows,
            "peak_active_timeline": peak,
            "model_checks": checks,
            "machine": f"{platform.machine()}, Python {platform.python_version()}",
        })
        Path(a.out).write_text(json.dumps(out, indent=2) + "\n")

    def check(i: int) -> None:
        want = wl.snapshot()
        got_rs = hudi_rs_rows(base)
        got_py = rows_of(Table.open(base).to_arrow())
        checks.append({"after_commit": i, "rows": len(want), "hudi_rs_exact": got_rs == want,
                       "pyhudi_exact": got_py == want})

    def one(i: int) -> None:
        nonlocal cur, win_peak
        op, batch = wl.batch()
        df = spark.createDataFrame(wl.table(batch))
        c0, t0 = tree_cpu_seconds(), time.perf_counter()
        res = Table.open(base).write(df, op, OPTIONS)
        wall, c1 = time.perf_counter() - t0, tree_cpu_seconds()
        wl.applied(op, batch)
        walls.append(wall)
        if c0 is not None and c1 is not None:
            cpus.append(c1 - c0)
        cur.append({**res.timings, "wall": wall, **({"cpu": c1 - c0} if c0 is not None and c1 is not None else {})})
        sizes = timeline_sizes(storage, base)
        for acc in (peak, win_peak):
            for tname, s in sizes.items():
                p = acc.setdefault(tname, {})
                for k, v in s.items():
                    p[k] = max(p.get(k, 0), v)
        print(f"{i} {op} {wall:.3f}s data={sizes['data']} mdt={sizes.get('metadata')}", file=sys.stderr, flush=True)
        if (i + 1) % a.check_every == 0 and i + 1 < a.commits:
            check(i)
        if (i + 1) % a.window == 0 or i + 1 == a.commits:
            keys = sorted({k for r in cur for k in r})
            windows.append({
                "first": i + 1 - len(cur),
                "last": i,
                "median_s": round(statistics.median(r["wall"] for r in cur), 4),
                "max_s": round(max(r["wall"] for r in cur), 4),
                "median_cpu_s": round(statistics.median(r.get("cpu", 0.0) for r in cur), 4),
                "median_stage_s": {k: round(statistics.median(r.get(k, 0.0) for r in cur), 4) for k in keys},
                "peak_active_timeline": win_peak,
                "active_timeline_at_end": sizes,
                "history_files_at_end": history_files(storage, base),
            })
            cur, win_peak = [], {}
            flush(False)

    # Ctrl-C or SIGTERM stops the run after the commit under way (an exception inside a Spark call would break
    # the session's gateway): the model check of what was committed and the figures so far are still written
    stopping: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: stopping.append(signum))
    for i in range(a.commits):
        if stopping:
            out["stopped_after_commits"] = len(walls)
            break
        one(i)
    check(len(walls) - 1)
    for name, xs in (("latency", walls), ("cpu", cpus)):
        if len(xs) >= 60:
            early, late = statistics.median(xs[10:60]), statistics.median(xs[-50:])
            out[f"median_{name}_commits_10_60_s"] = round(early, 4)
            out[f"median_{name}_last_50_s"] = round(late, 4)
            out[f"{name}_last_50_over_10_60"] = round(late / early, 3)
    flush(len(walls) == a.commits)
    print(json.dumps({k: v for k, v in out.items() if k != "windows"}))
    spark.stop()


if __name__ == "__main__":
    main()

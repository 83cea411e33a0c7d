"""Merge-on-read read benchmark: one file slice (a base file plus log records in Avro data blocks and delete
blocks) merged by the file-slice reader, against reading the same rows compacted into one base file, in the
same run; and Avro decoding, the compiled decoder against fastavro.

Two slices over a base file of ``--base-rows`` (1M) rows:

- ``log_heavy``: ``--log-records`` (1M) log records in ``--commits`` (10) deltacommits -- as many log records as
  base rows (90% updates of random base keys, 10% inserts, 1000 deletes per commit);
- ``five_deltacommits``: 5 deltacommits of 2% of the base rows each (100k log records for 1M rows).

``python benchmarks/bench_mor_read.py [--base-rows N] [--log-records N] [--commits N]`` prints one JSON object
and stores it in benchmarks/results/mor_read.json. Each read runs in a fresh process (best of 3; the reader's
compiled kernels are loaded before the clock starts) that reports wall and CPU seconds, its peak RSS and the RSS
the read added.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
from pathlib import Path

from pyhudi.bench.mor_bench import run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-rows", type=int, default=1_000_000)
    ap.add_argument("--log-records", type=int, default=1_000_000)
    ap.add_argument("--commits", type=int, default=10)
    ap.add_argument("--no-store", action="store_true", help="do not write benchmarks/results/mor_read.json")
    args = ap.parse_args()
    out = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                       "load_avg_at_start": os.getloadavg()}}
    with tempfile.TemporaryDirectory(prefix="pyhudi-mor-bench-") as root:
        out["log_heavy"] = run(os.path.join(root, "heavy"), args.base_rows, args.log_records, args.commits)
    with tempfile.TemporaryDirectory(prefix="pyhudi-mor-bench-") as root:
        out["five_deltacommits"] = run(root, args.base_rows, args.base_rows // 10, 5)
    out["machine"]["load_avg_at_end"] = os.getloadavg()
    text = json.dumps(out, indent=2)
    print(text)
    if not args.no_store:
        (Path(__file__).parent / "results" / "mor_read.json").write_text(text + "\n")


if __name__ == "__main__":
    main()

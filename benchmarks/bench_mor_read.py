"""Merge-on-read read benchmark: one file slice (a base file plus log records in Avro data blocks and delete
blocks) merged by the file-slice reader, against reading the same rows compacted into one base file, in the
same run; and Avro decoding, the compiled decoder against fastavro.

``python benchmarks/bench_mor_read.py [--base-rows 1000000] [--log-records 1000000] [--commits 10]`` prints one
JSON object and stores it in benchmarks/results/mor_read.json. Each read runs in a fresh process (best of 3)
that reports its peak RSS and the Arrow memory pool's peak.
"""

from __future__ import annotations

import argparse
import json
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
    with tempfile.TemporaryDirectory(prefix="pyhudi-mor-bench-") as root:
        out = run(root, args.base_rows, args.log_records, args.commits)
    text = json.dumps(out, indent=2)
    print(text)
    if not args.no_store:
        res = Path(__file__).parent / "results" / "mor_read.json"
        res.write_text(text + "\n")


if __name__ == "__main__":
    main()

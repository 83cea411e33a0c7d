"""HFile benchmark: ``python benchmarks/bench_hfile.py [--entries N] [--lookups M]``.

Prints one JSON object (the same as ``pyhudi bench hfile --json``) and stores it in benchmarks/results/hfile.json.
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

from pyhudi.bench.hfile_bench import run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--lookups", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    res = run(a.entries, a.lookups, repeat=a.repeat)
    res["machine"] = f"{platform.machine()}, {res['cpus']} cpus, Python {platform.python_version()}"
    out = Path(__file__).parent / "results" / "hfile.json"
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res))


if __name__ == "__main__":
    main()

"""Index benchmark suite: ``python benchmarks/bench_index.py [--quick] [--sizes 1000000,5000000,20000000] ...``.

Tagging time, upsert time, bytes read and peak memory of every available index type (RECORD_INDEX,
GLOBAL_SIMPLE, GLOBAL_BLOOM, SIMPLE, BLOOM) at several table sizes, with Delta Lake (delta-rs) and Iceberg
(pyiceberg) upserting the same data on the same machine. See :mod:`pyhudi.bench.index_bench`.

Stores benchmarks/results/index_bench.json, index_bench.md and the plots index_tag_vs_size.png and
index_upsert_vs_peers.png (``--quick``: the same names with ``_quick``). Same options as ``pyhudi bench index``.
"""

from __future__ import annotations

import sys

from pyhudi.cli.bench_cmd import bench_index

if __name__ == "__main__":
    bench_index.main(args=sys.argv[1:], prog_name="bench_index.py")

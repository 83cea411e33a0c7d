"""File-system view benchmark: build the latest file slices of a table with P partitions and F files through the
metadata table versus through a storage listing, in the same run.

``python benchmarks/bench_fsview.py [--partitions 200] [--files 10000] [--commits 20]`` prints one JSON object
and stores it in benchmarks/results/fsview.json. The data files are real files with Hudi names but a few bytes
of content: building a view never opens them.
"""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from pyhudi.io.storage import Storage
from pyhudi.metadata.writer import MetadataWriter
from pyhudi.table import filenames
from pyhudi.table.properties import METAFOLDER, TableConfig, create_table_config
from pyhudi.table.table import Table
from pyhudi.table.timeline import COMMIT, ActiveTimeline, InstantTimeGenerator
from pyhudi.write.status import WriteStat


def build(base: str, partitions: int, files: int, commits: int) -> None:
    storage, _ = Storage.from_uri(base)
    cfg = TableConfig.create("bench", table_type="COPY_ON_WRITE", record_key_fields=["k"], partition_fields=["p"])
    create_table_config(storage, posixpath.join(base, METAFOLDER), cfg)
    tl = ActiveTimeline.load(storage, base, cfg)
    storage.makedirs(ActiveTimeline.timeline_dir_for(base, cfg))
    gen = InstantTimeGenerator()
    mdt = MetadataWriter(storage, base, cfg)
    mdt.create(tl)
    from pyhudi.table.properties import read_table_config

    mdt.data_config = read_table_config(storage, posixpath.join(base, METAFOLDER))
    parts = [f"2026/{1 + i // 28 % 12:02d}/{1 + i % 28:02d}" if i < 336 else f"p{i}" for i in range(partitions)]
    per_commit = files // commits
    n = 0
    for _ in range(commits):
        t = gen.next(floor=tl.reload().latest_time())
        req = tl.create_requested(COMMIT, t)
        inflight = tl.transition_to_inflight(req, None)
        stats: dict[str, list] = {}
        for _j in range(per_commit):
            p = parts[n % partitions]
            n += 1
            fid = f"{uuid.uuid4()}-0"
            name = filenames.make_base_file_name(fid, "0-0-0", t)
            filenames.write_partition_metadata(storage, base, p, t)
            storage.write_bytes(posixpath.join(base, p, name), b"PAR1")
            stats.setdefault(p, []).append(
                WriteStat(p, fid, posixpath.join(p, name), "null", None, 1, 1, 0, 0, 4, None, None, 0).to_hudi()
            )
        md = {"partitionToWriteStats": stats, "compacted": False, "extraMetadata": {}, "version": None,
              "operationType": "INSERT"}
        mdt.apply_commit(t, md)
        tl.complete(inflight, md, gen.next(floor=t))
    mdt.compact(tl.reload(), gen.next(floor=tl.reload().latest_time()))


def timed(fn, repeat: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--commits", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pyhudi-fsview-") as d:
        base = os.path.join(d, "t")
        t0 = time.perf_counter()
        build(base, a.partitions, a.files, a.commits)
        build_s = time.perf_counter() - t0
        table = Table.open(base)
        counts = {
            "metadata": len(table.view(use_metadata=True).latest_file_slices()),
            "listing": len(table.view(use_metadata=False).latest_file_slices()),
        }
        if counts["metadata"] != counts["listing"] or counts["listing"] != a.files:
            raise AssertionError(f"views disagree: {counts}")
        via_mdt = timed(lambda: Table.open(base).view(use_metadata=True).latest_file_slices(), a.repeat)
        via_list = timed(lambda: Table.open(base).view(use_metadata=False).latest_file_slices(), a.repeat)
    res = {
        "partitions": a.partitions,
        "files": a.files,
        "build_table_s": round(build_s, 2),
        "view_via_metadata_s": round(statistics.median(via_mdt), 3),
        "view_via_listing_s": round(statistics.median(via_list), 3),
        "listing_over_metadata": round(statistics.median(via_list) / statistics.median(via_mdt), 2),
        "storage": "local filesystem",
        "cpus": os.cpu_count(),
    }
    out = Path(__file__).parent / "results" / "fsview.json"
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res))


if __name__ == "__main__":
    main()

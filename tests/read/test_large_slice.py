"""A file slice of 500k log records (10 log files of Avro data blocks and delete blocks, made by the project's log
writer) over a base file of 500k rows: read streamed with bounded memory, merged as a record-by-record model says,
and the merge throughput reported (rows/s). ``benchmarks/bench_mor_read.py`` measures a slice of 1M and 1M."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow.compute as pc
import pytest

from pyhudi import Table
from pyhudi.bench.mor_bench import make_tables, measure_read
from pyhudi.read import plan as read_plan
from pyhudi.read import warm_up

pytestmark = pytest.mark.slow  # ~1 min: writes 500k base rows and 500k log records, reads them six times


def test_half_a_million_log_records(tmp_path: Path, record_property) -> None:  # type: ignore[no-untyped-def]
    model: dict[str, tuple[int | None, float]] = {}
    # updates hit 50k keys of the base file 9 times each on average; 50k inserts; 10k deletes
    info = make_tables(str(tmp_path), base_rows=500_000, log_records=500_000, commits=10,
                       update_keys=50_000, model=model)
    (sl,) = read_plan.snapshot(Table.open(info["mor"])).slices
    assert len(sl.log_files) == 10 and info["log_records"] == 500_000

    # merged as the model says: every key, its ts and fare
    warm_up()
    start = time.perf_counter()
    got: dict[str, tuple[int | None, float]] = {}
    for b in read_plan.snapshot(Table.open(info["mor"])).batches():
        got.update(zip(b.column("uuid").to_pylist(),
                       zip(b.column("ts").to_pylist(), b.column("fare").to_pylist(), strict=True), strict=True))
    secs = time.perf_counter() - start
    assert len(got) == len(model) == info["merged_rows"]
    assert got == model

    # streamed, each read in a fresh process, its memory measured as the RSS the read added to the process
    # (decoded log strings live in numpy buffers, which the Arrow pool does not count). The base file alone (as of
    # the first commit) takes what streaming the compacted table's file takes (pyarrow's reader and allocator);
    # reading 3 log files or all 10 (3.3 times the log records, folded to one per key every 125k) takes about the
    # same: memory follows the log's distinct keys, not its length.
    commits = [i.requested_time for i in Table.open(info["mor"]).timeline().completed_commits()]
    compacted = Table.open(info["compacted"]).to_arrow()
    merged_mb, log_mb = compacted.nbytes / 2**20, info["log_bytes"] / 2**20
    plain = measure_read(info["compacted"], repeat=1)
    base_only = measure_read(info["mor"], repeat=1, as_of=commits[0])
    # the two compared: the least RSS of two reads each (a read's RSS varies by a fifth with the machine's load)
    three = measure_read(info["mor"], repeat=2, log_compact_rows=125_000, as_of=commits[3], by="read_rss_mb")
    streamed = measure_read(info["mor"], repeat=2, log_compact_rows=125_000, by="read_rss_mb")
    assert streamed["rows"] == plain["rows"] == compacted.num_rows
    assert streamed["fare_sum"] == pytest.approx(pc.sum(compacted.column("fare")).as_py(), rel=1e-9)
    assert base_only["rows"] == info["base_rows"]
    assert base_only["read_rss_mb"] < 1.5 * plain["read_rss_mb"] + 50, (base_only, plain)
    assert streamed["read_rss_mb"] < 1.5 * three["read_rss_mb"], (three, streamed)

    rate = (info["base_rows"] + info["log_records"]) / streamed["seconds"]
    for k, v in {"merge_input_rows_per_s": round(rate), "log_records_per_s":
                 round(info["log_records"] / streamed["seconds"]), "read_rss_mb": streamed["read_rss_mb"],
                 "peak_rss_mb": streamed["peak_rss_mb"]}.items():
        record_property(k, v)
    print(f"\n500k base rows + 500k log records merged in {streamed['seconds']:.2f} s (streamed, folding every 125k): "
          f"{rate:,.0f} input rows/s, {info['log_records'] / streamed['seconds']:,.0f} log records/s; "
          f"the read's RSS {streamed['read_rss_mb']:.0f} MB (Arrow pool peak {streamed['arrow_peak_mb']:.0f} MB) "
          f"(log {log_mb:.0f} MB of Avro, merged rows {merged_mb:.0f} MB as Arrow); "
          f"the read's RSS: compacted file {plain['read_rss_mb']:.0f} MB in {plain['seconds']:.2f} s, base file "
          f"alone {base_only['read_rss_mb']:.0f} MB, with 3 log files {three['read_rss_mb']:.0f} MB; in-process "
          f"read without folding early: {secs:.2f} s")

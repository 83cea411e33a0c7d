"""The index benchmark suite's plumbing: the byte counter, targets and reports on made-up figures, and one tiny
end-to-end run (20k rows, Spark in a child process, peers where installed)."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pyhudi.bench import index_bench as ib
from pyhudi.bench import index_report
from pyhudi.bench.measure import (
    KINDS,
    PSS_MIN_INTERVAL_S,
    PeakRSS,
    counting_storage,
    kind_of,
    table_bytes_read,
    tree_rchar,
)
from pyhudi.io.storage import Storage
from pyhudi.table import base_file


def test_counting_storage_counts_reads_by_kind(tmp_path):
    t = pa.table({"_hoodie_record_key": [f"k{i}" for i in range(1000)], "v": np.arange(1000)})
    data = tmp_path / "2025" / "01" / "01" / "f.parquet"
    data.parent.mkdir(parents=True)
    pq.write_table(t, data)
    meta = tmp_path / ".hoodie" / "metadata" / "record_index" / "x.hfile"
    meta.parent.mkdir(parents=True)
    meta.write_bytes(b"x" * 5000)
    counters = str(tmp_path / "counters")
    with counting_storage(counters):
        storage, _path = Storage.from_uri(str(tmp_path))
        assert storage.is_local
        before = table_bytes_read(counters)
        assert before["total"] == 0
        assert storage.read_bytes(str(meta)) == b"x" * 5000
        got = base_file.read_base_file(storage, str(data), columns=["_hoodie_record_key"])
        assert got.num_rows == 1000
        after = table_bytes_read(counters)
        storage.write_bytes(str(tmp_path / ".hoodie" / "y"), b"abc")  # writes are not counted
    assert after["record_index"] == 5000
    # what Arrow's dataset reader asks for (a small file's footer read covers all of it, more than once)
    assert after["data_files"] >= os.path.getsize(data)
    assert after["total"] == sum(after[k] for k in KINDS)
    assert table_bytes_read(counters) == after
    assert Storage.from_uri(str(tmp_path))[0].__class__ is Storage  # restored


def test_kind_of():
    assert KINDS[kind_of("/t/.hoodie/metadata/record_index/.x.log.1")] == "record_index"
    assert KINDS[kind_of("/t/.hoodie/metadata/files/a.hfile")] == "metadata_other"
    assert KINDS[kind_of("/t/.hoodie/timeline/1.commit")] == "timeline"
    assert KINDS[kind_of("/t/2025/01/01/a.parquet")] == "data_files"


def test_process_counters():
    pytest.importorskip("psutil")
    with PeakRSS(interval_s=0.01) as mem:
        x = bytearray(50 * 2**20)
        x[::4096] = b"y" * len(x[::4096])
        mem.sample()
        time.sleep(PSS_MIN_INTERVAL_S)  # PSS is read near the RSS peak, at most every PSS_MIN_INTERVAL_S
        mem.sample()
    assert mem.peak >= 50 * 2**20
    assert mem.peak_pss >= 50 * 2**20  # the 50 MB are private pages
    assert "driver" in mem.peak_parts
    r = tree_rchar()
    assert r is None or r > 0


def _fake(rows: int, ri: float, gs: float, peers: dict[str, float]) -> dict:
    def h(tag: float, up: float) -> dict:
        return {"tag_s": tag, "upsert_s": up, "table_bytes_read": 10**6, "table_bytes_read_tag": 10**5,
                "os_rchar_bytes": 2 * 10**6, "peak_rss_bytes": 2**31, "runs": 1}

    summary = {"uniform": {"RECORD_INDEX": h(ri, 10.0), "GLOBAL_SIMPLE": h(gs, 20.0)}}
    return {
        "rows": rows, "status": "done",
        "hudi": {"summary": summary, "build": {"bulk_insert_s": 1.0, "base_files": 3, "base_file_bytes": 10**6,
                                               "record_index": {"file_groups": 2, "bytes": 1000, "bytes_per_entry": 50}}},
        "peers": {p: {"status": "done", "create": {"create_s": 1.0, "files": 3},
                      "summary": {"uniform": {"upsert_s": v, "os_rchar_bytes": 10**6, "peak_rss_bytes": 2**30}}}
                  for p, v in peers.items()},
    }


def test_targets_and_reports(tmp_path):
    res = {
        "quick": False, "config": {"upsert_rows": 100, "repeat": 1, "peer_repeat": 1, "recent_days": 18},
        "machine": {"cpus": 2, "memory_gib": 23.5},
        "indexes": {"measured": ["RECORD_INDEX", "GLOBAL_SIMPLE"], "skipped": {"BLOOM": "not available"}},
        "peers": {"measured": ["delta", "iceberg"]},
        "sizes": [_fake(1000, 1.0, 5.0, {"delta": 20.0, "iceberg": 30.0}),
                  _fake(2000, 1.2, 24.0, {"delta": 5.0}),
                  {"rows": 4000, "status": "skipped", "reason": "estimated 99 min"}],
    }
    t = index_report.targets(res)["uniform"]
    assert t["record_index_tag_10x_faster_than_global_simple"]["holds"] is True
    assert t["record_index_tag_10x_faster_than_global_simple"]["ratio"] == 20.0
    assert t["record_index_tag_10x_faster_than_global_bloom"]["holds"] is None
    assert t["record_index_tag_growth_at_most_1.5x"] == {
        "from_rows": 1000, "to_rows": 2000, "from_tag_s": 1.0, "to_tag_s": 1.2, "growth": 1.2, "holds": True}
    assert t["record_index_upsert_faster_than_delta"]["holds"] is False  # 10 s vs 5 s at 2000 rows
    assert t["record_index_upsert_faster_than_iceberg"]["rows"] == 1000  # the largest size iceberg ran
    assert t["record_index_upsert_faster_than_iceberg"]["holds"] is True
    res["targets"] = index_report.targets(res)
    md = index_report.markdown(res)
    assert "BLOOM: skipped, not available" in md
    assert "4,000 rows: skipped, estimated 99 min" in md
    assert "| uniform | pyhudi RECORD_INDEX | 1.20 | 10.0 |" in md
    pytest.importorskip("matplotlib")
    files = index_report.write_reports(res, str(tmp_path), "index_bench_x")
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["index_bench_x.json", "index_bench_x.md", "index_tag_vs_size_x.png", "index_upsert_vs_peers_x.png"])
    assert json.loads((tmp_path / "index_bench_x.json").read_text())["reports"]["plots"] == files["plots"]


def test_available_indexes_reports_the_missing():
    ok, skipped = ib.available_indexes(("RECORD_INDEX", "NO_SUCH_INDEX"))
    assert ok == ["RECORD_INDEX"]
    assert "NO_SUCH_INDEX" in skipped and "INDEX_TYPES" in skipped["NO_SUCH_INDEX"]


@pytest.mark.slow
@pytest.mark.spark
def test_tiny_suite_end_to_end(tmp_path):
    pytest.importorskip("psutil")
    # one workload (the suite runs each the same way); its targets and reports are checked on made-up figures above
    res = ib.run_suite([20_000], upsert_rows=2_000, repeat=1, indexes=("RECORD_INDEX", "GLOBAL_SIMPLE", "NO_SUCH"),
                       peers=("delta",), budget_s=None, peer_timeout_s=300, work_dir=str(tmp_path), progress=False,
                       workloads=("uniform",))
    assert res["indexes"] == {"measured": ["RECORD_INDEX", "GLOBAL_SIMPLE"], "skipped": {
        "NO_SUCH": ib.available_indexes(("NO_SUCH",))[1]["NO_SUCH"]}}
    (size,) = res["sizes"]
    assert size["status"] == "done"
    summ = size["hudi"]["summary"]
    assert set(summ) == {"uniform"}
    for w, per in summ.items():
        assert set(per) == {"RECORD_INDEX", "GLOBAL_SIMPLE"}
        # both indexes found the same keys: the same inserts and updates
        assert per["RECORD_INDEX"]["inserted_updated"] == per["GLOBAL_SIMPLE"]["inserted_updated"]
        (ins, upd), = per["RECORD_INDEX"]["inserted_updated"]
        assert ins + upd == 2_000 and upd == size["data"]["workloads"][w]["updates"]
        # the record index reads a few MB to tag; GLOBAL_SIMPLE reads every base file's keys
        assert per["RECORD_INDEX"]["table_bytes_read_tag"] < per["GLOBAL_SIMPLE"]["table_bytes_read_tag"]
        assert per["RECORD_INDEX"]["peak_rss_bytes"] > 0
    for run in size["hudi"]["runs"]:
        assert run["table_bytes_read_tag"]["data_files"] >= 0
        assert run["timings_s"]["tag"] > 0
    delta = size["peers"].get("delta")
    if delta is not None and "skipped" not in res["peers"]:
        assert delta["status"] == "done", delta
        for w in ("uniform",):
            assert delta["summary"][w]["inserted_updated"] == summ[w]["RECORD_INDEX"]["inserted_updated"]
    assert "uniform" in res["targets"]
    assert not os.listdir(tmp_path)  # the work directory is removed

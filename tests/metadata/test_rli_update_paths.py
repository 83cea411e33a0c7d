"""The record index's part of a commit is written from the driver for small commits and by a Spark job for large
ones (``DRIVER_UPDATE_MAX_KEYS``): both give the same index. The same writes (inserts, updates, partition moves
under a global index, deletes of stored and unknown keys) into two tables, one per path: validate is ok on both,
every lookup agrees with the other table and with where hudi-rs reads the row, and the record-index log files
touch the same file groups with the same number of entries."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from pyhudi.metadata import record_index
from pyhudi.metadata.validate import validate_table
from pyhudi.table.table import Table
from tests.support.robust import OPTS, hudi_rs_read, rows, to_arrow

pytestmark = pytest.mark.spark

RLI_OPTS = {
    **OPTS,
    "hoodie.index.type": "RECORD_INDEX",
    "hoodie.metadata.record.index.enable": "true",
    "hoodie.metadata.record.index.min.filegroup.count": "4",
    "hoodie.metadata.record.index.max.filegroup.count": "4",
    "hoodie.record.index.update.partition.path": "true",
}


def _run(spark, base: str) -> list[dict]:  # type: ignore[no-untyped-def]
    first = rows(range(60))
    t = Table.create(base, to_arrow(first).schema, RLI_OPTS)
    t.write(spark.createDataFrame(to_arrow(first)), "insert", RLI_OPTS)
    # updates in place, new keys, and keys moved to the other partition (rows() puts even ids in a, odd in b)
    moved = [{**r, "p": "b" if r["p"] == "a" else "a"} for r in rows(range(0, 10), ts=3, v=0.5)]
    batch = rows(range(10, 30), ts=2, v=0.25) + rows(range(60, 90), ts=2) + moved
    Table.open(base).write(spark.createDataFrame(to_arrow(batch)), "upsert", RLI_OPTS)
    gone = rows([1, 2, 11, 75, 500], ts=9)  # 500 was never written
    Table.open(base).write(spark.createDataFrame(to_arrow(gone)), "delete", RLI_OPTS)
    rep = validate_table(Table.open(base))
    assert rep.ok and rep.record_index is not None, rep.to_dict()
    rs = hudi_rs_read(base)
    where = dict(zip(rs.column("_hoodie_record_key").to_pylist(), rs.column("_hoodie_partition_path").to_pylist(),
                     strict=True))
    probe = [f"k{i:03d}" for i in range(100)] + ["k500"]
    found = Table.open(base).lookup(probe).to_pylist()
    for r in found:
        assert r["found"] == (r["key"] in where), r
        if r["found"]:
            assert r["partition"] == where[r["key"]], r
    return [{"key": r["key"], "found": r["found"], "partition": r["partition"]} for r in found]


def _log_files(base: str) -> list[tuple[str, int]]:
    """(file group, number of log files) of the record index's partition."""
    folder = Path(base) / ".hoodie" / "metadata" / "record_index"
    groups = Counter(f.name.split("_")[0].lstrip(".") for f in folder.iterdir() if f.name.startswith("."))
    return sorted(groups.items())


def test_driver_and_spark_paths_write_the_same_index(spark, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    here = _run(spark, str(tmp_path / "driver"))
    monkeypatch.setattr(record_index, "DRIVER_UPDATE_MAX_KEYS", 0)
    spark_job = _run(spark, str(tmp_path / "spark"))
    assert here == spark_job
    assert _log_files(str(tmp_path / "driver")) == _log_files(str(tmp_path / "spark"))
    # a Spark task makes a file group's log file a few keys at a time: several blocks in one file, from packed keys
    # that reach it in many Arrow batches (cut by size: here every row one)
    monkeypatch.setattr(record_index, "LOG_BLOCK_MAX_KEYS", 3)
    monkeypatch.setattr(record_index, "PACKED_KEYS_BATCH_BYTES", 1)
    small_blocks = _run(spark, str(tmp_path / "blocks"))
    assert small_blocks == here
    assert _log_files(str(tmp_path / "blocks")) == _log_files(str(tmp_path / "driver"))
    assert max(_blocks_per_log_file(str(tmp_path / "blocks"))) > 1
    assert max(_blocks_per_log_file(str(tmp_path / "driver"))) <= 2  # one data block, and a delete block


def _blocks_per_log_file(base: str) -> list[int]:
    from pyhudi.io.logfile import read_log_blocks
    from tests.support.storage import LOCAL

    folder = Path(base) / ".hoodie" / "metadata" / "record_index"
    return [len(read_log_blocks(LOCAL, str(f))) for f in folder.iterdir() if ".log." in f.name]


def test_a_log_writing_task_refuses_keys_of_another_file_group(tmp_path: Path) -> None:
    """Each record-index log file is written by the task its file group is routed to; rows of another file group
    reaching it (a routing bug) fail the task instead of landing in the wrong file group's log."""
    import pyarrow as pa

    from pyhudi.io.storage import Storage

    storage, base = Storage.from_uri(str(tmp_path))
    batch = pa.record_batch({"key": ["a", "b"], record_index._FG_COL: pa.array([1, 2], pa.int32())})

    def block(t: pa.Table) -> tuple[pa.Array, pa.Array, list[str]]:  # pragma: no cover - never reached
        raise AssertionError("no block is made")

    run = record_index._streamed_group_log(storage, base, "20261126000000000", block)
    with pytest.raises(RuntimeError, match="reached the task writing 1"):
        list(run(iter([batch])))
    assert not list(tmp_path.iterdir())


def test_new_keys_held_on_both_paths(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The commit-time check of optimistic writers (``new_keys_held``): a write's inserted keys that it does not
    also delete (moved keys) and that the record index holds, the same from the driver and from Spark tasks."""
    import pyarrow as pa

    from pyhudi.io.arrow import pack_strings
    from pyhudi.metadata.record_index import new_keys_held, record_index_lookup

    base = str(tmp_path / "t")
    first = rows(range(20))
    Table.create(base, to_arrow(first).schema, RLI_OPTS).write(spark.createDataFrame(to_arrow(first)), "insert",
                                                                RLI_OPTS)
    t = Table.open(base)
    lookup = record_index_lookup(t.storage, t.base_path, t.timeline(), t.config)
    assert lookup is not None
    # k003 is moved (inserted and deleted by the write), k005 and k008 are held, k100 and k101 are new
    status = pa.table({
        "partition": ["a", "b"], "file_id": ["f1", "f2"],
        "inserted_keys": [pack_strings(pa.array(["k100", "k008", "k003"])), pack_strings(pa.array(["k005", "k101"]))],
        "deleted_keys": [[], ["k003"]],
    })
    df = spark.createDataFrame(status.to_pandas())
    stored = {r["id"]: r["p"] for r in first}
    for changed in (6, record_index.DRIVER_UPDATE_MAX_KEYS + 1):
        held = new_keys_held(lookup, df, changed, limit=10)
        assert sorted((k, p) for k, p, _ in held) == [("k005", stored["k005"]), ("k008", stored["k008"])], changed
    assert len(new_keys_held(lookup, df, 6, limit=1)) == 1

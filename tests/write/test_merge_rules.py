"""How an upsert or insert merges with the stored records, on both table types, read back by pyhudi and hudi-rs:

- an upsert not combined (``hoodie.combine.before.upsert=false``) that names a stored key twice leaves one record of
  it (the greatest ordering value), as Hudi's merge handle keys incoming records;
- an ``insert`` of stored keys into a small file keeps both records of each
  (``hoodie.merge.allow.duplicate.on.inserts``, true by default as in Hudi), as it does into a new file group;
- a flagged delete under a non-global index is ordered against the record of its own partition;
- commit-time ordering combines a batch by arrival (the last record wins) and takes null ordering values."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pyhudi.metadata.validate import validate_table
from pyhudi.table.table import Table

hudi = pytest.importorskip("hudi")
pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("key", pa.string()), ("ts", pa.int64()), ("part", pa.string()), ("v", pa.string()),
                    ("_hoodie_is_deleted", pa.bool_())])
OPTS = {"hoodie.table.name": "m", "hoodie.datasource.write.recordkey.field": "key",
        "hoodie.datasource.write.partitionpath.field": "part", "hoodie.table.ordering.fields": "ts",
        "hoodie.compact.inline": "false"}
TABLE_TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]


def _write(spark, base: str, rows: list[dict], operation: str, opts: dict) -> None:  # type: ignore[no-untyped-def]
    t = pa.Table.from_pylist([{"_hoodie_is_deleted": False, "part": "p", **r} for r in rows], SCHEMA)
    Table.for_dataframe(base, spark.createDataFrame(t), opts).write(spark.createDataFrame(t), operation, opts)


def _read(base: str) -> list[tuple]:
    """pyhudi's and hudi-rs's rows (key, ts, part, v), asserted equal."""
    rs = pa.Table.from_batches(list(hudi.HudiTableBuilder.from_base_uri(base).build().read(hudi.HudiReadOptions())))
    ours = Table.open(base).to_arrow()

    def rows(t: pa.Table) -> list[tuple]:
        return sorted((r["key"], r["ts"], r["part"], r["v"]) for r in t.select(["key", "ts", "part", "v"]).to_pylist())

    assert rows(ours) == rows(rs)
    return rows(ours)


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_an_upsert_not_combined_updates_a_stored_key_once(spark, tmp_path, table_type: str) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.table.type": table_type, "hoodie.combine.before.upsert": "false"}
    _write(spark, base, [{"key": k, "ts": 1, "v": f"{k}1"} for k in "abc"], "insert", opts)
    _write(spark, base, [{"key": "a", "ts": 5, "v": "a5"}, {"key": "a", "ts": 3, "v": "a3"},
                         {"key": "b", "ts": 3, "v": "b3"}, {"key": "b", "ts": 5, "v": "b5"},
                         {"key": "c", "ts": 4, "v": "c4"}, {"key": "c", "ts": 2, "v": "c2"}], "upsert", opts)
    assert _read(base) == [("a", 5, "p", "a5"), ("b", 5, "p", "b5"), ("c", 4, "p", "c4")]
    assert validate_table(Table.open(base)).ok
    if table_type == "MERGE_ON_READ":
        Table.open(base).compact(opts, spark=spark)
        assert _read(base) == [("a", 5, "p", "a5"), ("b", 5, "p", "b5"), ("c", 4, "p", "c4")]


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_an_insert_into_a_small_file_keeps_the_stored_records(spark, tmp_path, table_type: str) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.table.type": table_type, "hoodie.index.type": "SIMPLE", "hoodie.metadata.enable": "false"}
    _write(spark, base, [{"key": "a", "ts": 5, "v": "a5"}, {"key": "b", "ts": 5, "v": "b5"}], "insert", opts)
    _write(spark, base, [{"key": "a", "ts": 3, "v": "a3"}, {"key": "b", "ts": 9, "v": "b9"},
                         {"key": "c", "ts": 1, "v": "c1"}], "insert", opts)
    assert [f for f in (tmp_path / "t" / "p").iterdir() if f.suffix == ".parquet"]  # the small file took them
    assert _read(base) == [("a", 3, "p", "a3"), ("a", 5, "p", "a5"), ("b", 5, "p", "b5"), ("b", 9, "p", "b9"),
                           ("c", 1, "p", "c1")]
    # with duplicates on inserts refused, the insert merges with the file group's stored records
    merged = str(tmp_path / "merged")
    opts = {**opts, "hoodie.merge.allow.duplicate.on.inserts": "false"}
    _write(spark, merged, [{"key": "a", "ts": 5, "v": "a5"}, {"key": "b", "ts": 5, "v": "b5"}], "insert", opts)
    _write(spark, merged, [{"key": "a", "ts": 3, "v": "a3"}, {"key": "b", "ts": 9, "v": "b9"},
                           {"key": "c", "ts": 1, "v": "c1"}], "insert", opts)
    assert _read(merged) == [("a", 5, "p", "a5"), ("b", 9, "p", "b9"), ("c", 1, "p", "c1")]


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_a_flagged_delete_under_a_non_global_index_meets_its_own_partitions_record(spark, tmp_path, table_type: str) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.table.type": table_type, "hoodie.index.type": "SIMPLE", "hoodie.metadata.enable": "false"}
    _write(spark, base, [{"key": "a", "ts": 10, "part": "p1", "v": "a-p1"},
                         {"key": "a", "ts": 1, "part": "p2", "v": "a-p2"}], "insert", opts)
    _write(spark, base, [{"key": "a", "ts": 5, "part": "p1", "v": "del", "_hoodie_is_deleted": True},
                         {"key": "a", "ts": 5, "part": "p2", "v": "del", "_hoodie_is_deleted": True}], "upsert", opts)
    assert _read(base) == [("a", 10, "p1", "a-p1")]  # p1's stored record is newer than its delete; p2's is not


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_commit_time_ordering_combines_by_arrival(spark, tmp_path, table_type: str) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.table.type": table_type, "hoodie.record.merge.mode": "COMMIT_TIME_ORDERING"}
    _write(spark, base, [{"key": "a", "ts": 5, "v": "a5"}, {"key": "b", "ts": 5, "v": "b5"}], "insert", opts)
    _write(spark, base, [{"key": "a", "ts": 1, "v": "a1-later"}, {"key": "b", "ts": 9, "v": "b9"},
                         {"key": "b", "ts": 2, "v": "b2-last"}], "upsert", opts)
    assert _read(base) == [("a", 1, "p", "a1-later"), ("b", 2, "p", "b2-last")]
    _write(spark, base, [{"key": "a", "ts": None, "v": "a-null"}], "upsert", opts)
    assert _read(base) == [("a", None, "p", "a-null"), ("b", 2, "p", "b2-last")]


def test_a_flagged_delete_in_a_log_keeps_its_ordering_value(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Merge-on-read: a record flagged deleted (ts 7) is logged with its ordering value, as Hudi's append handle
    logs it, so a late event (ts 6) appended after it to the file group (an index that finds the key in the base
    file) loses to it, read and compacted; it was logged as a commit-time delete and the late event revived the
    key. A delete operation still deletes whatever the ordering values."""
    base = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.table.type": "MERGE_ON_READ", "hoodie.index.type": "SIMPLE",
            "hoodie.metadata.enable": "false"}
    _write(spark, base, [{"key": "a", "ts": 5, "v": "a5"}, {"key": "b", "ts": 5, "v": "b5"}], "insert", opts)
    _write(spark, base, [{"key": "a", "ts": 7, "v": "del", "_hoodie_is_deleted": True}], "upsert", opts)
    _write(spark, base, [{"key": "a", "ts": 6, "v": "late"}], "upsert", opts)
    assert _read(base) == [("b", 5, "p", "b5")]
    _write(spark, base, [{"key": "b", "ts": 1, "v": "x"}], "delete", opts)
    assert _read(base) == []
    Table.open(base).compact(opts, spark=spark)
    assert _read(base) == []


def test_a_flagged_delete_meets_the_newest_copy_of_a_key_stored_twice(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An insert stored a key twice in one file group (ts 10 and ts 1): a flagged delete at ts 5 is older than the
    newest copy and deletes neither (as Hudi's merge, which meets the first copy); it deleted both."""
    base = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.table.type": "COPY_ON_WRITE"}
    _write(spark, base, [{"key": "k", "ts": 10, "v": "k10"}], "insert", opts)
    _write(spark, base, [{"key": "k", "ts": 1, "v": "k1"}], "insert", opts)
    assert _read(base) == [("k", 1, "p", "k1"), ("k", 10, "p", "k10")]
    _write(spark, base, [{"key": "k", "ts": 5, "v": "del", "_hoodie_is_deleted": True}], "upsert", opts)
    assert _read(base) == [("k", 1, "p", "k1"), ("k", 10, "p", "k10")]


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_an_upsert_not_combined_moves_a_stored_key_once(spark, tmp_path, table_type: str) -> None:  # type: ignore[no-untyped-def]
    """A global index that moves keys, a batch not combined naming a stored key twice with other partitions: one
    record of the key remains (the greatest ordering value), not one per partition it arrived with."""
    base = str(tmp_path / "t")
    index = ({"hoodie.index.type": "GLOBAL_SIMPLE", "hoodie.metadata.enable": "false"} if table_type == "COPY_ON_WRITE"
             else {"hoodie.index.type": "RECORD_INDEX", "hoodie.record.index.update.partition.path": "true"})
    opts = {**OPTS, "hoodie.table.type": table_type, "hoodie.combine.before.upsert": "false", **index}
    _write(spark, base, [{"key": "k", "ts": 4, "part": "p1", "v": "k4"},
                         {"key": "j", "ts": 4, "part": "p1", "v": "j4"}], "insert", opts)
    _write(spark, base, [{"key": "k", "ts": 5, "part": "p2", "v": "k5"}, {"key": "k", "ts": 6, "part": "p2", "v": "k6"},
                         {"key": "j", "ts": 7, "part": "p1", "v": "j7"}, {"key": "j", "ts": 6, "part": "p3", "v": "j6"}],
           "upsert", opts)
    assert _read(base) == [("j", 7, "p1", "j7"), ("k", 6, "p2", "k6")]


@pytest.mark.parametrize("kind", ["int32", "date32", "timestamp", "float64", "string"])
def test_a_logged_flagged_delete_keeps_its_ordering_value_of_each_type(spark, tmp_path, kind: str) -> None:  # type: ignore[no-untyped-def]
    import datetime as dt

    make = {"int32": (pa.int32(), lambda n: n), "date32": (pa.date32(), lambda n: dt.date(2026, 1, n)),
            "timestamp": (pa.timestamp("us", tz="UTC"), lambda n: dt.datetime(2026, 1, 1, n, tzinfo=dt.UTC)),
            "float64": (pa.float64(), lambda n: float(n)), "string": (pa.string(), lambda n: f"t{n}")}[kind]
    schema = pa.schema([("key", pa.string()), ("ts", make[0]), ("part", pa.string()), ("v", pa.string()),
                        ("_hoodie_is_deleted", pa.bool_())])
    base = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.table.type": "MERGE_ON_READ", "hoodie.index.type": "SIMPLE",
            "hoodie.metadata.enable": "false"}

    def write(rows: list[dict]) -> None:
        t = pa.Table.from_pylist([{"_hoodie_is_deleted": False, "part": "p", **r, "ts": make[1](r["ts"])}
                                  for r in rows], schema)
        Table.for_dataframe(base, spark.createDataFrame(t), opts).write(spark.createDataFrame(t), "upsert", opts)

    write([{"key": "a", "ts": 5, "v": "a5"}, {"key": "b", "ts": 5, "v": "b5"}])
    write([{"key": "a", "ts": 7, "v": "del", "_hoodie_is_deleted": True}])
    write([{"key": "a", "ts": 6, "v": "late"}])
    rs = pa.Table.from_batches(list(hudi.HudiTableBuilder.from_base_uri(base).build().read(hudi.HudiReadOptions())))
    assert sorted(Table.open(base).to_arrow().column("key").to_pylist()) == sorted(rs.column("key").to_pylist()) == ["b"]


def test_a_delete_reads_only_its_key_and_partition_columns(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A delete's other columns are never read: an export whose ordering column is a string deletes its keys (it
    failed in a write task, converting the column to the table's type)."""
    base = str(tmp_path / "t")
    _write(spark, base, [{"key": k, "ts": 1, "v": k} for k in "abc"], "insert", OPTS)
    export = spark.createDataFrame([("a", "p", "2026-01-01", 1.5)], "key string, part string, ts string, v double")
    assert Table.open(base).write(export, "delete", OPTS).deleted == 1
    assert [r[0] for r in _read(base)] == ["b", "c"]

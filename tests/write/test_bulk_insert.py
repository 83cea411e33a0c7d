"""bulk_insert makes record keys in its write tasks (the planning counts read only the key and partition
columns, grouped by their raw values): the keys and partition paths it writes are the key generator's for every kind of key (a string field,
several fields, an integer), records flagged ``_hoodie_is_deleted`` are left out, and the combined
path (``hoodie.combine.before.insert``) writes the same records. Read back by hudi-rs."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pyhudi.metadata.validate import validate_table
from pyhudi.table.keygen import KeyGenerator
from pyhudi.table.table import Table
from tests.support.workload import hudi_rs_read

pytest.importorskip("hudi")
pytestmark = pytest.mark.spark

N = 600


def _input() -> pa.Table:
    n = N
    return pa.table({
        "k": pa.array([f"key-{i:04d}" for i in range(n)]),
        "id": pa.array(range(n), pa.int64()),
        "region": pa.array([["eu", "us", None, ""][i % 4] for i in range(n)]),
        "day": pa.array([f"2026/11/{1 + i % 3:02d}" for i in range(n)]),
        "k2": pa.array([[None, "", "x"][i % 3] for i in range(n)]),  # a complex key's field may be null or empty
        "fare": pa.array([[0.0, -0.0, 1.5, float("nan")][i % 4] for i in range(n)]),
        "ts": pa.array([i % 5 for i in range(n)], pa.int64()),
        "_hoodie_is_deleted": pa.array([i % 10 == 3 for i in range(n)]),
    })


KEYGENS = {
    "simple": {"hoodie.datasource.write.recordkey.field": "k", "hoodie.datasource.write.partitionpath.field": "day"},
    "complex": {"hoodie.datasource.write.recordkey.field": "k2,k",
                "hoodie.datasource.write.partitionpath.field": "region,day",
                "hoodie.datasource.write.hive_style_partitioning": "true"},
    "integer": {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "region",
                "hoodie.datasource.write.partitionpath.urlencode": "true"},
    # Spark groups -0.0 with 0.0, whose partition paths differ: such a partition column takes the general path
    "float": {"hoodie.datasource.write.recordkey.field": "k", "hoodie.datasource.write.partitionpath.field": "fare"},
    "unpartitioned": {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": ""},
}


@pytest.mark.parametrize("keys", list(KEYGENS))
def test_keys_and_partitions_are_the_key_generators(spark, tmp_path: Path, keys: str) -> None:  # type: ignore[no-untyped-def]
    src = _input()
    opts = {"hoodie.table.ordering.fields": "ts", "hoodie.metadata.record.index.enable": "true",
            "hoodie.index.type": "RECORD_INDEX", **KEYGENS[keys]}
    kg = KeyGenerator.from_options(opts)
    live = src.filter(pc.invert(src.column("_hoodie_is_deleted")))
    want = sorted(zip(kg.record_keys(live).to_pylist(), kg.partition_paths(live).to_pylist(),
                      live.column("id").to_pylist(), strict=True))
    got_by = {}
    for combine in ("false", "true"):
        path = str(tmp_path / f"t-{combine}")
        w = {**opts, "hoodie.combine.before.insert": combine}
        res = Table.create(path, src.schema, w).write(spark.createDataFrame(src), "bulk_insert", w)
        assert res.inserted == live.num_rows
        t = hudi_rs_read(path)
        got = sorted(zip(t.column("_hoodie_record_key").to_pylist(), t.column("_hoodie_partition_path").to_pylist(),
                         t.column("id").to_pylist(), strict=True))
        assert got == want, combine
        # every file holds its partition's records, sorted by key
        for f in Table.open(path).view().latest_base_files():
            data = pq.read_table(f"{path}/{f.relative_path}", columns=["_hoodie_record_key", "_hoodie_partition_path"])
            assert set(data.column("_hoodie_partition_path").to_pylist()) == {f.partition}
            file_keys = data.column("_hoodie_record_key").to_pylist()
            assert file_keys == sorted(file_keys)
        got_by[combine] = got
        rep = validate_table(Table.open(path))
        assert rep.ok, rep.to_dict()
    assert got_by["false"] == got_by["true"]


def test_avro_record_name_of_any_table_name() -> None:
    """A table named after a folder such as ``my-table`` gets a legal Avro record name, as Hudi sanitizes it
    (hudi-rs refuses to read a schema whose name is not legal Avro)."""
    from pyhudi.table.schema import record_name

    assert record_name("trips") == ("trips_record", "hoodie.trips")
    assert record_name("my-table") == ("my__table_record", "hoodie.my__table")
    assert record_name("2026.sales") == ("__026__sales_record", "hoodie.__026__sales")


def test_empty_input(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = _input().slice(0, 0)
    opts = {"hoodie.table.ordering.fields": "ts", **KEYGENS["simple"]}
    path = str(tmp_path / "t")
    res = Table.create(path, src.schema, opts).write(spark.createDataFrame(src, schema="k string, id long, "
                                                     "region string, day string, k2 string, fare double, ts long, "
                                                     "_hoodie_is_deleted boolean"), "bulk_insert", opts)
    assert (res.inserted, res.files_written) == (0, 0)


def test_an_input_that_changes_between_its_reads_is_not_committed(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """bulk_insert reads its input twice (planning counts, then the write): records the second read gives that
    the first did not, or lacks, fail the write before its commit instead of being dropped or misplaced."""
    import random

    from pyspark.sql import functions as F

    from pyhudi.errors import InvalidInputError

    src = _input().drop_columns(["_hoodie_is_deleted"])
    opts = {"hoodie.table.ordering.fields": "ts", **KEYGENS["simple"]}
    path = str(tmp_path / "t")
    table = Table.create(path, src.schema, opts)
    coin = F.udf(lambda: random.random() < 0.5, "boolean").asNondeterministic()
    with pytest.raises(InvalidInputError, match="nothing was committed"):
        table.write(spark.createDataFrame(src).filter(coin()), "bulk_insert", opts)
    assert not [i for i in Table.open(path).timeline() if i.is_completed]
    assert hudi_rs_read(path).num_rows == 0


def test_records_of_a_partition_the_first_read_did_not_give_are_not_dropped(spark, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A source whose second read adds records of a partition its first read did not have, every other partition
    unchanged: the per-partition counts agree, and those records have no bucket; the write fails, naming the
    partition, instead of committing without them."""
    from pyspark.sql import functions as F

    from pyhudi.errors import InvalidInputError
    from pyhudi.write.producer import BulkInsertProducer

    src = _input().drop_columns(["_hoodie_is_deleted"])
    late = pa.table({c: src.column(c).slice(0, 2) for c in src.column_names})
    late = late.set_column(late.schema.get_field_index("k"), "k", pa.array(["late-0", "late-1"]))
    late = late.set_column(late.schema.get_field_index("day"), "day", pa.array(["2026/12/31"] * 2))
    opts = {"hoodie.table.ordering.fields": "ts", **KEYGENS["simple"]}
    path = str(tmp_path / "t")
    table = Table.create(path, src.schema, opts)
    flag = tmp_path / "planned"
    count = BulkInsertProducer.count

    def count_then_flag(self, tagged):  # type: ignore[no-untyped-def]
        out = count(self, tagged)
        flag.touch()
        return out

    monkeypatch.setattr(BulkInsertProducer, "count", count_then_flag)
    seen = F.udf(lambda day: day != "2026/12/31" or flag.exists(), "boolean").asNondeterministic()
    df = spark.createDataFrame(pa.concat_tables([src, late])).filter(seen(F.col("day")))
    with pytest.raises(InvalidInputError, match=r"2 records of partition '2026/12/31'.*nothing was committed"):
        table.write(df, "bulk_insert", opts)
    assert flag.exists()
    assert not [i for i in Table.open(path).timeline() if i.is_completed]
    assert hudi_rs_read(path).num_rows == 0


def test_a_key_column_of_a_type_keys_cannot_have_is_refused_before_writing(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from pyhudi.errors import InvalidInputError
    from tests.support.tree import snapshot

    src = pa.table({"s": pa.array([{"a": 1}, {"a": 2}]), "day": ["d1", "d2"], "ts": pa.array([1, 2], pa.int64())})
    opts = {"hoodie.table.ordering.fields": "ts", "hoodie.datasource.write.recordkey.field": "s",
            "hoodie.datasource.write.partitionpath.field": "day"}
    path = str(tmp_path / "t")
    table = Table.create(path, src.schema, opts)
    before = snapshot(tmp_path)
    with pytest.raises(InvalidInputError, match="cannot be used in a record key"):
        table.write(spark.createDataFrame(src), "bulk_insert", opts)
    assert snapshot(tmp_path) == before


def test_write_tasks_follow_the_records() -> None:
    """One write task per core, more when a task would take more than 250k records (its Spark side holds
    memory in proportion to what it wrote until it ends, and sorts them), never more than the buckets."""
    from pyhudi.write.producer import ROWS_PER_WRITE_TASK, write_tasks

    assert ROWS_PER_WRITE_TASK == 250_000
    assert write_tasks(730, 2, 400_000) == 2
    assert write_tasks(730, 2, 2_000_000) == 8
    assert write_tasks(730, 2, 20_000_000) == 80
    assert write_tasks(730, 2, 20_000_000 + 1) == 81
    assert write_tasks(5, 2, 20_000_000) == 5
    assert write_tasks(1, 8, 0) == 1 and write_tasks(0, 2, 0) == 1
    assert write_tasks(730, 2, 3 * ROWS_PER_WRITE_TASK) == 3

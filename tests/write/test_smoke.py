"""A quick end-to-end run on Spark that the default test tier keeps: create, insert, upsert (with a partition
change under the record index), delete; hudi-rs reads what the model predicts, lookups name the files hudi-rs
reads the rows from, and the metadata table validates."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hudi import HudiTableBuilder

from pyhudi import Table
from pyhudi.metadata.validate import validate_table

pytestmark = pytest.mark.spark

OPTS = {
    "hoodie.table.name": "smoke",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "dt",
    "hoodie.table.ordering.fields": "ts",
    "hoodie.index.type": "RECORD_INDEX",
}


def _t(ids: list[str], ts: list[int], dt: list[str], v: list[float]) -> pa.Table:
    return pa.table({"id": ids, "ts": pa.array(ts, pa.int64()), "dt": dt, "v": v})


@pytest.mark.parametrize("in_place", ["8", "0"], ids=["lookups_in_place", "shuffled_by_file_group"])
def test_insert_upsert_delete_with_record_index(spark, tmp_path: Path, in_place: str) -> None:  # type: ignore[no-untyped-def]
    opts = {**OPTS, "pyhudi.record.index.lookup.in.place.max.partitions": in_place}
    base = str(tmp_path / "t")
    first = _t([f"k{i}" for i in range(6)], list(range(6)), ["2026/11/21"] * 3 + ["2026/11/22"] * 3,
               [float(i) for i in range(6)])
    table = Table.create(base, first.schema, opts)
    table.write(spark.createDataFrame(first), "insert", opts)
    # k1 updated, k4 arrives with a new partition (updated where it is), k0 has an older event time, n1 new
    up = _t(["k1", "k4", "k0", "n1"], [100, 100, -1, 1], ["2026/11/21", "2026/11/23", "2026/11/21", "2026/11/23"],
            [-1.0, -4.0, -9.0, 10.0])
    r = table.write(spark.createDataFrame(up), "upsert", opts)
    assert (r.inserted, r.updated) == (1, 2)  # k0 keeps its stored (newer) version: not an update
    table.write(spark.createDataFrame(_t(["k2"], [0], ["2026/11/21"], [0.0])), "delete", opts)

    expected = {"k0": 0.0, "k1": -1.0, "k3": 3.0, "k4": -4.0, "k5": 5.0, "n1": 10.0}
    theirs = pa.Table.from_batches(HudiTableBuilder.from_base_uri(base).build().read())
    assert dict(zip(theirs.column("id").to_pylist(), theirs.column("v").to_pylist(), strict=True)) == expected
    where = {
        k: (p, f.split("_")[0])
        for k, p, f in zip(theirs.column("id").to_pylist(), theirs.column("_hoodie_partition_path").to_pylist(),
                           theirs.column("_hoodie_file_name").to_pylist(), strict=True)
    }
    assert where["k4"][0] == "2026/11/22"
    table = Table.open(base)
    found = table.lookup([*expected, "k2", "nope"]).to_pylist()
    for row in found:
        if row["key"] in expected:
            assert row["found"] and (row["partition"], row["file_id"]) == where[row["key"]], row
        else:
            assert not row["found"], row
    rep = validate_table(table)
    assert rep.ok, rep.to_dict()
    assert rep.record_index is not None and rep.record_index["entries"] == len(expected)
    # point reads through the record index, with Spark and without
    got = table.read(spark, keys=["k1", "k4", "k2", "nope"]).select("id", "v").collect()
    assert sorted((r["id"], r["v"]) for r in got) == [("k1", -1.0), ("k4", -4.0)]
    arrow = table.read_keys(["k1", "k4", "k2", "nope"])
    assert sorted(zip(arrow.column("id").to_pylist(), arrow.column("v").to_pylist(), strict=True)) == [
        ("k1", -1.0), ("k4", -4.0)]


def test_footer_bloom_filter_options_reach_the_files(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """hoodie.bloom.index.filter.type / hoodie.index.bloom.num_entries shape the footer filter of written files;
    a bad value is an error before anything is written."""
    from pyhudi.errors import ConfigError
    from pyhudi.table import base_file

    base = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.index.type": "BLOOM", "hoodie.bloom.index.filter.type": "SIMPLE",
            "hoodie.index.bloom.num_entries": "1000"}
    first = _t(["a", "b"], [1, 2], ["2026/11/21"] * 2, [1.0, 2.0])
    table = Table.create(base, first.schema, opts)
    with pytest.raises(ConfigError, match=r"hoodie\.bloom\.index\.filter\.type"):
        table.write(spark.createDataFrame(first), "insert", {**opts, "hoodie.bloom.index.filter.type": "NOPE"})
    assert not Table.open(base).timeline().instants
    table.write(spark.createDataFrame(first), "insert", opts)
    files = Table.open(base).view().latest_base_files()
    assert files
    for f in files:
        footer = base_file.read_footer(table.storage, f"{base}/{f.relative_path}")
        bf = footer.bloom()
        # Hudi writes the type code only for dynamic filters: none means SIMPLE (the default is DYNAMIC_V0)
        assert footer.bloom_type_code is None and bf is not None and bf.might_contain("a")


def test_parquet_options_reach_the_base_files(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import pyarrow.parquet as pq

    opts = {
        **OPTS,
        "hoodie.index.type": "SIMPLE",
        "hoodie.parquet.compression.codec": "zstd",
        "pyhudi.parquet.compression.level": "7",
        "hoodie.parquet.block.size": "4096",
        "hoodie.parquet.page.size": "1024",
        "hoodie.parquet.dictionary.enabled": "false",
    }
    n = 5000
    data = _t([f"k{i:05d}" for i in range(n)], list(range(n)), ["2026/11/21"] * n, [float(i) for i in range(n)])
    base = tmp_path / "t"
    table = Table.create(str(base), data.schema, opts)
    table.write(spark.createDataFrame(data), "insert", opts)
    files = list((base / "2026/11/21").glob("*.parquet"))
    assert files
    for f in files:
        md = pq.ParquetFile(f).metadata
        assert md.num_row_groups > 1, f  # 4 KiB row groups, not one of 120 MiB
        col = md.row_group(0).column(md.schema.names.index("v"))
        assert col.compression == "ZSTD"
        assert not col.has_dictionary_page


def test_reads_that_find_nothing_keep_a_timestamp_column(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A point read of keys the table does not hold, and a snapshot of an empty table, are empty DataFrames with
    the table's schema, timestamps included."""
    import datetime as dt

    base = str(tmp_path / "t")
    when = dt.datetime(2026, 11, 26, 9, 0, tzinfo=dt.UTC)
    rows = pa.table({"id": ["k1"], "ts": pa.array([1], pa.int64()), "dt": ["2026/11/26"],
                     "at": pa.array([when], pa.timestamp("us", tz="UTC"))})
    table = Table.create(base, rows.schema, OPTS)
    empty = table.read(spark)
    assert empty.collect() == [] and "at" in empty.columns
    table.write(spark.createDataFrame(rows), "insert", OPTS)
    table = Table.open(base)
    assert table.read(spark, keys=["nope"]).select("id", "at").collect() == []
    got = table.read(spark, keys=["k1"]).select("id", "at").collect()
    assert [(r["id"], r["at"].replace(tzinfo=dt.UTC)) for r in got] == [("k1", when)]

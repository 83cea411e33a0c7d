"""INT96 timestamps (Spark's, Hive's and Hudi's row writer's legacy encoding) read as microseconds: as pyarrow's
default nanoseconds, a time before 1677 wraps silently (1500-01-01 read as 2084-07-20)."""

from __future__ import annotations

import datetime as dt
import glob
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hudi import HudiReadOptions, HudiTableBuilder

from pyhudi import Table
from pyhudi.io.parquet import parquet_file, read_parquet

OLD = dt.datetime(1500, 1, 1, 12, tzinfo=dt.UTC)
NEW = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)


def test_int96_read_as_microseconds(tmp_path: Path) -> None:
    path = str(tmp_path / "f.parquet")
    pq.write_table(pa.table({"t": pa.array([OLD, NEW], pa.timestamp("us", "UTC"))}), path,
                   use_deprecated_int96_timestamps=True)
    assert pq.ParquetFile(path).read().column("t")[0].as_py().year == 2084  # pyarrow's default: wrapped
    for t in (parquet_file(path).read(), read_parquet(path)):
        assert t.column("t").cast(pa.timestamp("us", "UTC")).to_pylist() == [OLD, NEW]


@pytest.mark.spark
def test_a_base_file_of_int96_timestamps_reads_and_rewrites_as_written(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A base file whose timestamps a Spark-based writer stored as INT96: pyhudi's reader returns them as written,
    and an upsert that rewrites the file keeps them."""
    base = str(tmp_path / "t")
    opts = {"hoodie.table.name": "i96", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "", "hoodie.table.ordering.fields": "ts"}
    t = pa.table({"id": ["a", "b"], "ts": pa.array([1, 1], pa.int64()),
                  "at": pa.array([OLD, NEW], pa.timestamp("us", "UTC"))})
    Table.create(base, t.schema, opts).write(spark.createDataFrame(t), "insert", opts)
    (path,) = glob.glob(os.path.join(base, "*.parquet"))
    pq.write_table(pq.read_table(path), path, use_deprecated_int96_timestamps=True)
    read = {"pyhudi.read.spark.parquet": "false", "hoodie.enable.data.skipping": "false"}
    df = spark.read.format("hudi").options(**read).load(base)
    assert sorted((r["id"], r["at"].year) for r in df.collect()) == [("a", 1500), ("b", 2020)]
    Table.open(base).write(spark.createDataFrame(pa.table({"id": ["b"], "ts": pa.array([2], pa.int64()),
                                                           "at": pa.array([NEW], pa.timestamp("us", "UTC"))})),
                           "upsert", opts)
    df = spark.read.format("hudi").options(**read).load(base)
    assert sorted((r["id"], r["at"].year) for r in df.collect()) == [("a", 1500), ("b", 2020)]
    theirs = pa.Table.from_batches(HudiTableBuilder.from_base_uri(base).build().read(HudiReadOptions()))
    assert sorted(zip(theirs["id"].to_pylist(), theirs["at"].to_pylist(), strict=True)) == [("a", OLD), ("b", NEW)]

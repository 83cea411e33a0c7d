"""RECORD_INDEX tagging: the prepare stage routes records by record-index file group, each tag task holds whole
file groups, and tagging in place is right however the records arrive."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from pyhudi import config as C
from pyhudi.index.base import LOC_FILE_ID_COL, LOC_PARTITION_COL
from pyhudi.index.record import FileGroupRouting, RecordLevelIndex
from pyhudi.metadata.record_index import file_groups_of
from pyhudi.spark.partitioning import route
from pyhudi.table.schema import RECORD_KEY_COL
from pyhudi.table.table import Table
from pyhudi.txn.transaction import resolve_options
from pyhudi.write.context import WriteJob
from pyhudi.write.producer import PRODUCERS

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.string()), ("dt", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])
OPTS = {
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "dt",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.index.type": "RECORD_INDEX",
    "hoodie.metadata.record.index.min.filegroup.count": "5",
}


def rows(lo: int, hi: int, ts: int) -> pa.Table:
    ids = [f"key-{i:05d}" for i in range(lo, hi)]
    return pa.table({"id": ids, "dt": [f"2024/01/{1 + i % 3:02d}" for i in range(lo, hi)],
                     "ts": [ts] * len(ids), "v": list(range(lo, hi))}, schema=SCHEMA)


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory: pytest.TempPathFactory) -> Table:  # type: ignore[no-untyped-def]
    base = str(Path(tmp_path_factory.mktemp("rli_tag")) / "t")
    t = Table.create(base, SCHEMA, OPTS)
    t.write(spark.createDataFrame(rows(0, 400, 1)), "bulk_insert", OPTS)
    return Table.open(base)


def upsert_job(spark, table: Table, extra: dict[str, str]) -> tuple[WriteJob, object]:  # type: ignore[no-untyped-def]
    opts = resolve_options(table.config, {**OPTS, **extra}, table.timeline())
    opts[C.OPERATION] = "upsert"
    tl = table.timeline()
    job = WriteJob(spark=spark, storage=table.storage, base_path=table.base_path, table_name=table.name,
                   config=C.WriteConfig.from_options(opts), instant="(not written)", timeline=tl,
                   view=table.view(tl), data_schema=table.schema())
    return job, PRODUCERS["upsert"](job)


@pytest.mark.parametrize("combine", ["true", "false"])
@pytest.mark.parametrize("parallelism", ["1", "2", "3", "8"])
def test_prepare_routes_whole_file_groups(spark, table: Table, combine: str, parallelism: str) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    job, producer = upsert_job(spark, table, {C.UPSERT_PARALLELISM: parallelism,
                                              "hoodie.combine.before.upsert": combine})
    batch = pa.concat_tables([rows(300, 500, 2), rows(350, 360, 3)])  # updates, inserts, in-batch duplicates
    prepared = producer.prepare(spark.createDataFrame(batch))
    n = job.record_index_lookup().num_file_groups
    assert n == 5
    p = min(n, int(parallelism))
    assert job.routing == FileGroupRouting(n, p)
    assert prepared.rdd.getNumPartitions() == p
    got = prepared.select(RECORD_KEY_COL, F.spark_partition_id().alias("pid")).toArrow()
    fgs = file_groups_of(got.column(RECORD_KEY_COL), n)
    assert (fgs % p == got.column("pid").to_numpy()).all()
    assert got.num_rows == (200 if combine == "true" else 210)


def test_routed_combine_keeps_the_later_of_tied_duplicates(spark, table: Table) -> None:  # type: ignore[no-untyped-def]
    job, producer = upsert_job(spark, table, {C.UPSERT_PARALLELISM: "2"})
    later = rows(350, 360, 2).set_column(3, "v", pa.array(range(1350, 1360), pa.int64()))
    batch = pa.concat_tables([rows(300, 500, 2), later])  # same ordering value: the batch's later record wins
    prepared = producer.prepare(spark.createDataFrame(batch))
    assert job.routing is not None
    got = {r["id"]: r["v"] for r in prepared.select("id", "v").toArrow().to_pylist()}
    assert len(got) == 200
    assert all(got[f"key-{i:05d}"] == 1000 + i for i in range(350, 360))


def test_tag_in_place_whatever_the_partitioning(spark, table: Table) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    job, producer = upsert_job(spark, table, {})
    prepared = producer.prepare(spark.createDataFrame(rows(300, 500, 2)))
    job.prepared = prepared
    index = RecordLevelIndex()
    stored = {r["_hoodie_record_key"]: (r["_hoodie_partition_path"], r["_hoodie_file_name"].split("_")[0])
              for r in table.read().toArrow().to_pylist()}

    def tagged(df) -> dict[str, tuple[str | None, str | None]]:  # type: ignore[no-untyped-def]
        t = df.select(RECORD_KEY_COL, LOC_PARTITION_COL, LOC_FILE_ID_COL).toArrow()
        return {k: (p, f) for k, p, f in zip(*(t.column(i).to_pylist() for i in range(3)), strict=True)}

    want = {f"key-{i:05d}": stored.get(f"key-{i:05d}", (None, None)) for i in range(300, 500)}
    assert sum(v != (None, None) for v in want.values()) == 100
    import pyhudi.index.record as record_mod

    def no_route(*_: object) -> None:
        raise AssertionError("records the prepare stage routed were routed again")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(record_mod, "route", no_route)
        assert tagged(index.tag(job, prepared)) == want  # routed by prepare: tagged where they are
    scattered = prepared.repartition(7, F.rand(seed=1))  # every task holds keys of every file group
    assert tagged(index.tag(job, scattered)) == want  # not the prepared records: routed first
    routing = index.routing(job)
    assert routing is not None
    assert route(scattered, routing, RECORD_KEY_COL).rdd.getNumPartitions() == routing.partitions


def test_tag_in_place_keeps_every_record_with_its_location(spark, table: Table) -> None:  # type: ignore[no-untyped-def]
    """The locations come back from Python by position: with many small Arrow batches per task and empty tasks,
    every record keeps its own columns and gets its own key's location."""
    from pyspark.sql import functions as F

    job, producer = upsert_job(spark, table, {})
    job.prepared = producer.prepare(spark.createDataFrame(rows(250, 450, 2)))
    stored = {r["_hoodie_record_key"]: (r["_hoodie_partition_path"], r["_hoodie_file_name"].split("_")[0])
              for r in table.read().toArrow().to_pylist()}
    # 12 partitions, at least 6 of them empty; one of them holds 50 records of several file groups
    spread = job.prepared.repartition(12, F.when(F.col("v") < 300, 0).otherwise(F.col("v") % 5 + 1))
    conf = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(conf)
    spark.conf.set(conf, "7")
    try:
        t = RecordLevelIndex().tag(job, spread).toArrow()
    finally:
        spark.conf.set(conf, before)
    got = t.select(["id", "v", RECORD_KEY_COL, LOC_PARTITION_COL, LOC_FILE_ID_COL]).to_pylist()
    assert sorted(r["id"] for r in got) == [f"key-{i:05d}" for i in range(250, 450)]
    for r in got:
        assert r["v"] == int(r["id"][4:]) and r[RECORD_KEY_COL] == r["id"]
        assert (r[LOC_PARTITION_COL], r[LOC_FILE_ID_COL]) == stored.get(r["id"], (None, None)), r["id"]


def task_of_each_file_group(base: str, instant: str | None) -> dict[int, int]:
    """record-index file group -> the Spark task (partition id of the write token) that wrote its log file for
    ``instant`` (None: its base HFile)."""
    from pyhudi.table.filenames import LogFileName, WriteToken, parse_data_file_name

    out = {}
    for f in (Path(base) / ".hoodie" / "metadata" / "record_index").iterdir():
        name = parse_data_file_name(f.name)
        is_log = isinstance(name, LogFileName)
        if name is not None and (name.instant == instant if instant else not is_log and name.extension == "hfile"):
            assert name.write_token is not None
            out[int(name.file_id.split("-")[2])] = WriteToken.parse(name.write_token).partition_id
    return out


def test_index_build_and_updates_spread_file_groups_evenly(spark, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A large commit's record-index updates (a small commit's are written from the driver) are written by one
    task per file group, task g for file group g; an index build's base files by task g mod min(N,
    parallelism). Not by a hash of g, which piles several groups into one task."""
    from pyhudi.metadata import record_index

    monkeypatch.setattr(record_index, "DRIVER_UPDATE_MAX_KEYS", 0)
    par = max(2, spark.sparkContext.defaultParallelism)  # a write's and an index build's default parallelism
    with_index = str(tmp_path / "with_index")
    Table.create(with_index, SCHEMA, OPTS)
    Table.open(with_index).write(spark.createDataFrame(rows(0, 400, 1)), "bulk_insert", OPTS)
    commit = Table.open(with_index).timeline().completed_commits().last()
    assert commit is not None
    logs = task_of_each_file_group(with_index, commit.requested_time)  # the commit's record-index log blocks
    assert sorted(logs) == [0, 1, 2, 3, 4] and all(p == g for g, p in logs.items()), logs

    plain = {**OPTS, "hoodie.index.type": "SIMPLE", "hoodie.metadata.record.index.enable": "false"}
    built = str(tmp_path / "built")
    Table.create(built, SCHEMA, plain)
    Table.open(built).write(spark.createDataFrame(rows(0, 400, 1)), "bulk_insert", plain)
    assert Table.open(built).build_record_index(num_file_groups=6) == 6
    base_files = task_of_each_file_group(built, None)
    assert sorted(base_files) == [0, 1, 2, 3, 4, 5], base_files
    assert all(p == g % min(6, par) for g, p in base_files.items()), base_files

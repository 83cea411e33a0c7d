"""``spark.read.format("hudi")`` returns exactly what hudi-rs returns -- the Java-written fixtures, a table pyhudi
writes, a merge-on-read table with log records -- for each query type, with filters and projections, and from
SQL; and its pruning is visible: the files a one-partition query, a key query and a column-stats query plan to
open, the row groups a range query reads."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import posixpath
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder

from pyhudi import Table
from pyhudi.read.filters import EQ, GE, IN, LT, Pred
from pyhudi.read.slice_reader import FileSliceReader
from pyhudi.spark.source import plan_query
from tests.paths import TABLE_ZIPS_DIR
from tests.support.fixtures import unzip_table
from tests.support.mor_tables import MorTable, data

pytestmark = pytest.mark.spark

ALL = sorted(p.name for p in TABLE_ZIPS_DIR.glob("*.zip"))
QT = "hoodie.datasource.query.type"


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("source_fixtures")
    return {z: str(unzip_table(z, root)) for z in ALL}


def hudi_rs(base: str, opts: HudiReadOptions | None = None) -> pa.Table:
    batches = HudiTableBuilder.from_base_uri(base).build().read(opts or HudiReadOptions())
    return pa.Table.from_batches(batches) if batches else pa.table({})


def rows(t: pa.Table, cols: list[str]) -> list[tuple[Any, ...]]:
    if t.num_rows == 0:
        return []
    return sorted((tuple(r.values()) for r in t.select(cols).to_pylist()), key=repr)


def same(df: Any, theirs: pa.Table, cols: list[str] | None = None) -> None:
    ours = df.toArrow()
    cols = cols or ours.column_names
    if theirs.num_rows:
        ours = ours.select(cols).cast(pa.schema([f.with_nullable(True) for f in theirs.select(cols).schema]))
    assert rows(ours, cols) == rows(theirs, cols)


def load(spark: Any, base: str, **opts: str) -> Any:
    r = spark.read.format("hudi")
    for k, v in opts.items():
        r = r.option(k.replace("__", "."), v)
    return r.load(base)


# -- every fixture, every query type ----------------------------------------------------------------------------
@pytest.mark.parametrize("zip_name", ALL)
def test_query_types_match_hudi_rs(spark, reader, zip_name: str, tables: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    base = tables[zip_name]
    same(load(spark, base), hudi_rs(base))
    ro = HudiReadOptions().with_hudi_option("hoodie.read.use.read_optimized.mode", "true")
    same(spark.read.format("hudi").option(QT, "read_optimized").load(base), hudi_rs(base, ro))
    commits = [i.requested_time for i in Table.open(base).timeline().completed_commits()]
    first = commits[len(commits) // 2]
    same(spark.read.format("hudi").option("as.of.instant", first).load(base),
         hudi_rs(base, HudiReadOptions().with_as_of_timestamp(first)))
    tl = Table.open(base).timeline().completed()
    ends = sorted(i.completion_time or "" for i in tl)
    start = ends[len(ends) // 3]
    inc = (spark.read.format("hudi").option(QT, "incremental")
           .option("hoodie.datasource.read.begin.instanttime", start).load(base))
    theirs = hudi_rs(base, HudiReadOptions().with_query_type(HudiQueryType.Incremental).with_start_timestamp(start))
    same(inc, theirs)


@pytest.mark.parametrize("zip_name", ["cow_v9_txns_simple_meta.zip", "mor_v9_txns_simple_meta.zip",
                                      "cow_v9_txns_complex_meta.zip"])
def test_filters_and_projections_match_hudi_rs(spark, reader, zip_name: str, tables: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    base = tables[zip_name]
    theirs = hudi_rs(base)
    df = load(spark, base)
    same(df.where("region = 'us'"), theirs.filter(pc.equal(theirs["region"], "us")))
    keys = ["TXN-001", "TXN-005", "TXN-404"]
    same(df.where(df.txn_id.isin(keys)), theirs.filter(pc.is_in(theirs["txn_id"], pa.array(keys))))
    ts = sorted(theirs["txn_ts"].to_pylist())[theirs.num_rows // 2]
    same(df.where(f"txn_ts >= {ts} and currency = 'USD'"),
         theirs.filter(pc.and_(pc.greater_equal(theirs["txn_ts"], ts), pc.equal(theirs["currency"], "USD"))))
    same(df.where("merchant_name is null"), theirs.filter(pc.is_null(theirs["merchant_name"])))
    # dates, decimals and timestamps (column statistics of these types are decoded by the column's type)
    day = sorted(theirs["txn_date"].to_pylist())[theirs.num_rows // 2]
    same(df.where(f"txn_date > date'{day.isoformat()}'"), theirs.filter(pc.greater(theirs["txn_date"], day)))
    amt = sorted(theirs["amount"].to_pylist())[theirs.num_rows // 3]
    same(df.where(f"amount <= {amt}"), theirs.filter(pc.less_equal(theirs["amount"], pa.scalar(amt, theirs["amount"].type))))
    when = sorted(theirs["txn_datetime"].to_pylist())[theirs.num_rows // 2]
    same(df.where(f"txn_datetime >= timestamp'{when.strftime('%Y-%m-%d %H:%M:%S')}'"),
         theirs.filter(pc.greater_equal(theirs["txn_datetime"], pa.scalar(when, theirs["txn_datetime"].type))))
    # every record-key field pinned (the composite key of the complex fixture is encoded as its generator does)
    acc = theirs.filter(pc.equal(theirs["txn_id"], "TXN-001"))["account_id"][0].as_py()
    same(df.where(f"txn_id = 'TXN-001' and account_id = '{acc}'"),
         theirs.filter(pc.and_(pc.equal(theirs["txn_id"], "TXN-001"), pc.equal(theirs["account_id"], acc))))
    _, rep = plan_query({"path": base}, (Pred("txn_id", EQ, "TXN-001"), Pred("account_id", EQ, acc)))
    assert rep.keys == 1 and rep.slices_after_keys == 1
    # a user schema reads only its columns
    proj = spark.read.format("hudi").schema("txn_id string, amount decimal(15,2), region string").load(base)
    same(proj.where("region != 'eu'"), theirs.filter(pc.not_equal(theirs["region"], "eu")),
         ["txn_id", "amount", "region"])


# -- pruning, counted ---------------------------------------------------------------------------------------------
def test_column_stats_prune_files(tables: dict[str, str]) -> None:
    """The fixture's column_stats: no file but the EUR/GBP ones has currency 'EUR' in range."""
    base = tables["cow_v9_txns_simple_meta.zip"]
    opts = {"path": base}
    _, rep0 = plan_query(opts)
    plan, rep = plan_query(opts, (Pred("currency", EQ, "EUR"),))
    assert "column_stats" in rep.steps
    assert rep.files_read < rep0.files_read == rep.files_total
    got = plan.to_arrow()
    want = hudi_rs(base)
    assert sorted(got.filter(pc.equal(got["currency"], "EUR"))["txn_id"].to_pylist()) == \
        sorted(want.filter(pc.equal(want["currency"], "EUR"))["txn_id"].to_pylist())
    # a date and a decimal range: statistics decoded by the column's type prune files, and keep every match
    cases = [(Pred("txn_date", GE, dt.date(2024, 1, 20)), pc.greater_equal),
             (Pred("amount", LT, decimal.Decimal("100")), pc.less)]
    for pred, fn in cases:
        plan, rep = plan_query(opts, (pred,))
        assert "column_stats" in rep.steps, pred
        got = plan.to_arrow()

        def ids(t: pa.Table, pred: Pred = pred, fn: Any = fn) -> list[str]:
            col = t[pred.column]
            return sorted(t.filter(fn(col, pa.scalar(pred.value, col.type)))["txn_id"].to_pylist())

        assert ids(got) == ids(want) != []
    # data skipping off: every file of the snapshot
    _, rep_off = plan_query({**opts, "hoodie.enable.data.skipping": "false"}, (Pred("currency", EQ, "EUR"),))
    assert rep_off.files_read == rep0.files_read


OPTS = {
    "hoodie.table.name": "src",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "dt",
    "hoodie.table.ordering.fields": "ts",
    "hoodie.index.type": "RECORD_INDEX",
    "hoodie.metadata.record.index.enable": "true",
}
DAYS = ["2026/06/01", "2026/06/02", "2026/06/03", "2026/06/04"]


def _batch(n: int, ts: int, start: int = 0) -> pa.Table:
    return pa.table({
        "id": [f"k{i:05d}" for i in range(start, start + n)],
        "ts": pa.array([ts] * n, pa.int64()),
        "dt": [DAYS[i % 4] for i in range(start, start + n)],
        "n": pa.array(range(start, start + n), pa.int64()),
    })


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory: pytest.TempPathFactory) -> str:  # type: ignore[no-untyped-def]
    base = str(tmp_path_factory.mktemp("written") / "t")
    first = _batch(400, 1)
    table = Table.create(base, first.schema, OPTS)
    table.write(spark.createDataFrame(first), "insert", OPTS)
    return base


def test_written_table_pruning_and_results(spark, reader, written: str) -> None:  # type: ignore[no-untyped-def]
    base = written
    theirs = hudi_rs(base)
    assert theirs.num_rows == 400
    _, full = plan_query({"path": base})
    assert full.slices_total == 4 and full.files_read == 4
    # one partition of four: one file opened
    _, rep = plan_query({"path": base}, (Pred("dt", EQ, DAYS[2]),))
    assert rep.partitions_kept == 1 and rep.files_read == 1 and rep.steps == ["partitions"]
    df = load(spark, base)
    q = df.where(f"dt = '{DAYS[2]}'")
    assert q.rdd.getNumPartitions() == 1
    same(q, theirs.filter(pc.equal(theirs["dt"], DAYS[2])))
    # a key: the record index names its one file group
    _, rep = plan_query({"path": base}, (Pred("id", EQ, "k00390"),))
    assert rep.keys == 1 and rep.files_read == 1 and "record_index" in rep.steps
    q = df.where("id = 'k00390'")
    assert q.rdd.getNumPartitions() == 1
    same(q, theirs.filter(pc.equal(theirs["id"], "k00390")))
    # keys of two partitions, one absent key
    _, rep = plan_query({"path": base}, (Pred("id", IN, ("k00001", "k00002", "nope")),))
    assert rep.keys == 3 and rep.files_read == 2
    same(df.where(df.id.isin("k00001", "k00002", "nope")), theirs.filter(pc.is_in(theirs["id"],
                                                                                pa.array(["k00001", "k00002"]))))
    # a range query over the whole table, and SQL through a temporary view
    same(df.where("n >= 100 and n < 110"), theirs.filter(pc.and_(pc.greater_equal(theirs["n"], 100),
                                                                  pc.less(theirs["n"], 110))))
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW src_t USING hudi OPTIONS (path '{base}')")
    try:
        got = spark.sql("SELECT dt, count(*) AS c, max(ts) AS m FROM src_t WHERE n < 400 GROUP BY dt").collect()
    finally:
        spark.catalog.dropTempView("src_t")  # other tests count the session's views
    assert sorted((r.dt, r.c, r.m) for r in got) == [(d, 100, 1) for d in DAYS]
    # the other name, a time-travel read with a filter
    first = Table.open(base).timeline().completed_commits().first()
    assert first is not None
    old = spark.read.format("pyhudi").option("as.of.instant", first.requested_time).load(base)
    assert [r.n for r in old.where("id = 'k00390'").collect()] == [390]


def test_column_stats_of_files_of_one_name_in_two_partitions(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A file id is unique within its partition only (Hudi's bucket index names the file groups of every partition
    alike): files of one name in two partitions are judged by their own statistics, never by the other's."""
    import os

    base = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("p", pa.string()), ("i", pa.int32())])
    opts = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p", "hoodie.table.ordering.fields": "ts"}
    no_mdt = {**opts, "hoodie.metadata.enable": "false"}

    def write(batch: list[dict[str, Any]], o: dict[str, str]) -> None:
        Table.open(base).write(spark.createDataFrame(pa.Table.from_pylist(batch, schema)), "insert", o)

    Table.create(base, schema, no_mdt)
    write([{"id": 1, "ts": 1, "p": "a", "i": 1}, {"id": 2, "ts": 1, "p": "b", "i": 100}], no_mdt)
    (fa,) = [f for f in os.listdir(f"{base}/a") if f.endswith(".parquet")]
    (fb,) = [f for f in os.listdir(f"{base}/b") if f.endswith(".parquet")]
    os.rename(f"{base}/b/{fb}", f"{base}/b/{fa}")  # b's file group takes a's file id
    write([{"id": 3, "ts": 1, "p": "c", "i": 5}], {**opts, "hoodie.metadata.index.column.stats.enable": "true"})
    for cond, want in (("i = 1", [(1, "a")]), ("i > 50", [(2, "b")]), ("i < 50", [(1, "a"), (3, "c")])):
        for native in ("true", "false"):
            got = (spark.read.format("hudi").option("pyhudi.read.spark.parquet", native).load(base).where(cond)
                   .select("id", "p").collect())
            assert sorted(tuple(r) for r in got) == want, (cond, native)
    _, rep = plan_query({"path": base}, (Pred("i", EQ, 1),))
    assert "column_stats" in rep.steps and rep.files_read == 1


def test_row_groups_skipped_by_statistics(tmp_path: Path) -> None:
    """A base file of 10 row groups, sorted by ts: a range query reads one of them; a file slice with log
    records reads them all (a log record may replace a base row)."""
    m = MorTable(tmp_path / "t")
    m.commit(base={"fg1": [{"id": f"k{i:03d}", "ts": i} for i in range(100)]},
             logs={"fg2": [data({"id": "x1", "ts": 5})]})
    name = next(n for n in (p.name for p in (tmp_path / "t").iterdir()) if n.endswith(".parquet"))
    path = posixpath.join(m.base, name)
    pq.write_table(pq.read_table(path), path, row_group_size=10)
    plan, rep = plan_query({"path": m.base}, (Pred("ts", GE, 40), Pred("ts", LT, 50)))
    assert rep.files_read == 2
    by_fg = {s.file_id: s for s in plan.slices}
    r = FileSliceReader(plan.read, by_fg["fg1"])
    got = r.read()
    assert r.row_groups_total == 10 and r.row_groups_read == 1
    assert sorted(got["ts"].to_pylist()) == list(range(40, 50))
    # the base-file slice with log records
    m.commit(logs={"fg1": [data({"id": "k045", "ts": 500}), data({"id": "k001", "ts": 44})]})
    plan, _ = plan_query({"path": m.base}, (Pred("ts", GE, 40), Pred("ts", LT, 50)))
    r = FileSliceReader(plan.read, {s.file_id: s for s in plan.slices}["fg1"])
    got = r.read()
    assert r.row_groups_read == 10
    kept = got.filter(pc.and_(pc.greater_equal(got["ts"], 40), pc.less(got["ts"], 50)))
    assert sorted(kept["id"].to_pylist()) == sorted([f"k{i:03d}" for i in range(40, 50) if i != 45] + ["k001"])


def test_merge_on_read_filters_match_hudi_rs(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Log records that move a record into and out of a filter's range: the merged record is what is filtered."""
    m = MorTable(tmp_path / "t")
    m.commit(base={"fg1": [{"id": f"k{i:03d}", "ts": i} for i in range(50)]})
    m.commit(logs={"fg1": [data({"id": "k010", "ts": 90}), data({"id": "k060", "ts": 20})]})
    theirs = hudi_rs(m.base)
    df = load(spark, m.base)
    for cond, mask in [("ts < 15", pc.less(theirs["ts"], 15)), ("ts >= 80", pc.greater_equal(theirs["ts"], 80)),
                       ("id = 'k010'", pc.equal(theirs["id"], "k010")), ("ts = 20", pc.equal(theirs["ts"], 20))]:
        same(df.where(cond), theirs.filter(mask))
    ro = df.sparkSession.read.format("hudi").option(QT, "read_optimized").load(m.base)
    assert ro.where("id = 'k010'").collect()[0]["ts"] == 10


# -- SQL, names, errors -------------------------------------------------------------------------------------------
def test_registration_and_errors(spark, tables: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    from pyhudi.spark import register
    from pyhudi.spark.source import jvm_source

    assert jvm_source(spark, "hudi") is None
    assert register(spark) == ["hudi", "pyhudi"]
    base = tables["cow_v9_txns_nonpart_meta.zip"]
    with pytest.raises(Exception, match="expected snapshot, read_optimized or incremental"):
        spark.read.format("hudi").option(QT, "cdc").load(base).collect()
    with pytest.raises(Exception, match=r"begin\.instanttime"):
        spark.read.format("hudi").option(QT, "incremental").load(base).collect()
    spark.sql(f"CREATE TABLE IF NOT EXISTS src_cat USING hudi LOCATION '{base}'")
    try:
        with pytest.raises(Exception, match="CREATE TEMPORARY VIEW"):
            spark.sql("SELECT * FROM src_cat").collect()
    finally:
        spark.sql("DROP TABLE IF EXISTS src_cat")


def test_a_key_written_twice(spark, reader, tables: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    """The fixture's second ``insert`` wrote TXN-002 again, in another file group, and the record index names that
    one (Hudi's record index assumes unique keys; ``pyhudi validate`` names the key): a snapshot returns both
    copies, ``key = x`` the copy the index names, as Apache Hudi's reader does; without data skipping, both."""
    base = tables["mor_v9_nonpartitioned_rollback.zip"]
    df = load(spark, base)
    files = sorted(r["_hoodie_file_name"] for r in df.where("txn_id >= 'TXN-002' AND txn_id < 'TXN-003'").collect())
    assert len(files) == 2 and len(set(files)) == 2
    plan, rep = plan_query({"path": base}, (Pred("txn_id", EQ, "TXN-002"),))
    assert "record_index" in rep.steps and len(plan.slices) == 1
    named = plan.slices[0].file_id
    assert [r["_hoodie_file_name"].startswith(named) for r in df.where("txn_id = 'TXN-002'").collect()] == [True]
    every = load(spark, base, hoodie__enable__data__skipping="false").where("txn_id = 'TXN-002'")
    assert sorted(r["_hoodie_file_name"] for r in every.collect()) == files


def test_a_key_no_record_can_have_prunes_only_itself(spark, reader, tables: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    """An empty key, which the key generator refuses, is held by no record: ``key IN (k, '')`` returns k's row
    (it returned nothing: the whole list was taken for keys no record has)."""
    base = tables["mor_v9_nonpartitioned_rollback.zip"]
    got = load(spark, base).where("txn_id IN ('TXN-001', '')").select("txn_id").collect()
    assert [r["txn_id"] for r in got] == ["TXN-001"]
    assert load(spark, base).where("txn_id = ''").count() == 0


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_zero_key_finds_both_signed_zeros(spark, reader, table_type: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Spark holds 0.0 = -0.0, but the key generator spells the keys of a double key field "0.0" and "-0.0": a key
    predicate on zero looks up both (it looked up "0.0" alone, and the row keyed -0.0 was lost, with data
    skipping on or off). Spark holds NaN = NaN too: two predicates that both admit NaN find the NaN key (their
    values' intersection was empty, and the query returned nothing). Merge-on-read: the slice has a log file."""
    base = str(tmp_path / "t")
    opts = {"hoodie.table.name": "zeros", "hoodie.datasource.write.recordkey.field": "k",
            "hoodie.datasource.write.partitionpath.field": "p", "hoodie.table.ordering.fields": "ts",
            "hoodie.datasource.write.table.type": table_type}
    t = pa.table({"k": pa.array([-0.0, 1.0, 2.0, math.nan]), "ts": pa.array([1, 1, 1, 1], pa.int64()), "p": ["a"] * 4,
                  "v": ["neg", "one", "two", "nan"]})
    Table.create(base, t.schema, opts).write(spark.createDataFrame(t), "bulk_insert", opts)
    up = pa.table({"k": pa.array([1.0]), "ts": pa.array([2], pa.int64()), "p": ["a"], "v": ["ONE"]})
    Table.open(base).write(spark.createDataFrame(up), "upsert", opts)
    for skipping in ("true", "false"):
        df = load(spark, base, hoodie__enable__data__skipping=skipping)
        for q in ("k = 0.0", "k = -0.0", "k = 0", "k IN (0.0, 5.0)", "k <=> 0.0", "k IN (-0.0, 1.0)"):
            got = sorted(r["v"] for r in df.where(q).select("v").collect())
            assert got == (["ONE", "neg"] if "1.0" in q else ["neg"]), (q, skipping)
        assert [str(r["k"]) for r in df.where("k = 0.0").collect()] == ["-0.0"]
        nan = "CAST('NaN' AS DOUBLE)"
        for q in (f"k = {nan}", f"k = {nan} AND k IN ({nan}, 1D)", f"k IN ({nan}, 1D) AND k IN ({nan}, 2D)"):
            assert [r["v"] for r in df.where(q).select("v").collect()] == ["nan"], (q, skipping)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_queries_of_one_dataframe_are_planned_each_anew(spark, table_type: str,  # type: ignore[no-untyped-def]
                                                        tmp_path: Path) -> None:
    """The queries of one DataFrame each get their own plan, through the Python source alone and through the
    default reading (Spark's parquet reader for the slices it reads, the Python source for the rest): PySpark
    keeps a Python source's planned partitions on the DataFrame's source object, and a query without filters
    reused those a filtered query had pruned (a count after a partition's count returned the partition's rows).
    (Not run with the ``reader`` fixture: its Python-only run would read both DataFrames as the first one is.)"""
    base = str(tmp_path / "t")
    opts = {"hoodie.table.name": "anew", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "dt", "hoodie.table.ordering.fields": "ts",
            "hoodie.datasource.write.table.type": table_type, "hoodie.parquet.small.file.limit": "0"}
    n = 400
    t = pa.table({"id": [f"k{i:05d}" for i in range(n)], "ts": pa.array([1] * n, pa.int64()),
                  "dt": [f"d{i // 100}" for i in range(n)], "v": pa.array(range(n), pa.int64())})
    table = Table.create(base, t.schema, opts)
    table.write(spark.createDataFrame(t), "insert", opts)
    up = pa.table({"id": ["k00001"], "ts": pa.array([2], pa.int64()), "dt": ["d0"], "v": pa.array([-1], pa.int64())})
    table.write(spark.createDataFrame(up), "upsert", opts)  # a log file in d0's slice (merge-on-read)
    from pyspark.sql import functions as F

    for df in (spark.read.format("hudi").option("pyhudi.read.spark.parquet", "false").load(base),
               spark.read.format("hudi").load(base)):
        assert df.where("dt = 'd1'").count() == 100
        assert df.count() == 400
        assert df.where("v > 350").count() == 49
        assert df.groupBy().sum("v").collect()[0][0] == sum(range(400)) - 1 - 1
        assert df.where("id = 'k00001'").collect()[0]["v"] == -1
        assert sorted(r["dt"] for r in df.select("dt").distinct().collect()) == ["d0", "d1", "d2", "d3"]
        # one DataFrame twice in a query, each scan filtered its own way
        assert df.where("dt = 'd0'").union(df).count() == 500
        assert df.where("dt = 'd0'").union(df.where("dt = 'd2'")).count() == 200
        a, b = df.where("dt = 'd0'").alias("a"), df.where("dt = 'd3'").alias("b")
        assert a.join(b, F.col("a.v") + 300 == F.col("b.v")).count() == 99  # k00001 (v -1) has no partner
        # a plan with a string literal that is not UTF-8 (no scan handed to Spark's reader)
        odd = "length(concat(id, cast(unhex('FF') as string))) > 0"
        assert df.where("dt = 'd0'").where(odd).count() == 100
        assert df.where(odd).count() == 400

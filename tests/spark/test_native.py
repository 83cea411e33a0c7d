"""Spark's parquet reader for the scans it reads exactly (pyhudi's rule, ``pyhudi.spark.native``): which scans it
takes, that they read only the base files pyhudi's planner prunes to (counted) and only the columns the query
uses, and that the query's filters reach the planner as the predicates pyhudi prunes by."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from pyhudi import Table
from pyhudi.read.filters import EQ, GE, GT, IN, IS_NULL, LE, LT, NOT_NULL, STARTS_WITH, Pred
from pyhudi.spark.native import Planner, planner_of, predicates, refusal
from pyhudi.spark.source import plan_query
from tests.paths import TABLE_ZIPS_DIR
from tests.support.fixtures import unzip_table
from tests.support.mor_tables import MorTable, data

pytestmark = pytest.mark.spark

QT = "hoodie.datasource.query.type"
OPTS = {
    "hoodie.table.name": "nat",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "dt",
    "hoodie.table.ordering.fields": "ts",
    "hoodie.index.type": "RECORD_INDEX",
    "hoodie.metadata.record.index.enable": "true",
    "hoodie.metadata.index.column.stats.enable": "true",
}
DAYS = ["2026-06-01", "2026-06-02", "2026-06-03", "2026-06-04"]


@pytest.fixture(scope="module")
def cow(spark, tmp_path_factory: pytest.TempPathFactory) -> str:  # type: ignore[no-untyped-def]
    base = str(tmp_path_factory.mktemp("native") / "t")
    n = 400
    t = pa.table({
        "id": [f"k{i:05d}" for i in range(n)],
        "ts": pa.array([1] * n, pa.int64()),
        "dt": [DAYS[i // 100] for i in range(n)],  # each day one file of 100 consecutive n
        "n": pa.array(range(n), pa.int64()),
        "v": pa.array([float(i) for i in range(n)], pa.float64()),
    })
    Table.create(base, t.schema, OPTS).write(spark.createDataFrame(t), "insert", OPTS)
    return base


def plan_text(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def uses_spark_reader(df: Any) -> bool:
    return "HudiFileIndex" in plan_text(df)


def test_which_scans_spark_reads(spark, cow: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = spark.read.format("hudi")
    first = Table.open(cow).timeline().completed_commits().first()
    assert first is not None
    assert uses_spark_reader(r.load(cow))
    assert uses_spark_reader(spark.read.format("pyhudi").load(cow))
    assert uses_spark_reader(spark.read.format("hudi").option(QT, "read_optimized").load(cow))
    assert uses_spark_reader(spark.read.format("hudi").option("as.of.instant", first.requested_time).load(cow))
    inc = (spark.read.format("hudi").option(QT, "incremental")
           .option("hoodie.datasource.read.begin.instanttime", "0").load(cow))
    assert not uses_spark_reader(inc) and inc.count() == 400
    off = spark.read.format("hudi").option("pyhudi.read.spark.parquet", "false").load(cow)
    assert not uses_spark_reader(off) and off.count() == 400
    # merge-on-read: a snapshot whose every slice has log files is merged by the Python source; a read-optimized
    # query reads base files (Spark)
    m = MorTable(tmp_path / "m")
    m.commit(base={"fg1": [{"id": f"k{i:03d}", "ts": i} for i in range(20)]})
    m.commit(logs={"fg1": [data({"id": "k010", "ts": 90})]})
    snap = spark.read.format("hudi").load(m.base)
    assert not uses_spark_reader(snap) and snap.where("id = 'k010'").collect()[0]["ts"] == 90
    ro = spark.read.format("hudi").option(QT, "read_optimized").load(m.base)
    assert uses_spark_reader(ro) and ro.where("id = 'k010'").collect()[0]["ts"] == 10
    why, _ = refusal({"path": m.base}, StructType([StructField("id", StringType())]))
    assert why == "a merge-on-read snapshot whose every file slice has log files to merge"
    why, how = refusal({"path": cow}, StructType([StructField("id", StringType()), StructField("n", LongType())]))
    assert why is None and how is not None and how.root == Path(cow).as_uri() and how.python is None
    # a user schema asking a column as another type: the Python source converts it
    why, _ = refusal({"path": cow}, StructType([StructField("n", DoubleType())]))
    assert why == "column 'n' asked as double, stored as int64"
    as_double = spark.read.format("hudi").schema("id string, n double").load(cow)
    assert not uses_spark_reader(as_double)
    assert as_double.where("id = 'k00007'").collect()[0]["n"] == 7.0


def test_only_used_columns_are_read(spark, cow: str) -> None:  # type: ignore[no-untyped-def]
    df = spark.read.format("hudi").load(cow)
    text = plan_text(df.groupBy().sum("v"))
    assert "ReadSchema: struct<v:double>" in text, text
    assert df.groupBy().sum("v").collect()[0][0] == sum(range(400))
    assert df.count() == 400


@pytest.mark.parametrize(("cond", "preds", "files"), [
    ("dt = '2026-06-02'", [Pred("dt", EQ, "2026-06-02")], 1),
    ("id = 'k00250'", [Pred("id", EQ, "k00250")], 1),
    ("id in ('k00001', 'k00399', 'nope')", [Pred("id", IN, ("k00001", "k00399", "nope"))], 2),
    ("n >= 120 and n < 130", [Pred("n", GE, 120), Pred("n", LT, 130)], 1),
    ("130 > n", [Pred("n", LT, 130)], 2),
    ("v is null", [Pred("v", IS_NULL)], 0),
    ("n > 1000 or n < 3", [], 4),  # a disjunction prunes nothing here; Spark filters the rows
])
def test_listing_is_pruned_by_the_planner(spark, cow: str, cond: str, preds: list[Pred],  # type: ignore[no-untyped-def]
                                          files: int) -> None:
    planner = planner_of(spark)
    assert planner is not None
    df = spark.read.format("hudi").load(cow).where(cond)
    got = sorted(r["id"] for r in df.collect())
    assert planner.planned == files
    _, rep = plan_query({"path": cow}, tuple(preds))
    assert rep.files_read == files
    full = spark.read.format("hudi").option("pyhudi.read.spark.parquet", "false").load(cow).where(cond)
    assert got == sorted(r["id"] for r in full.collect())


def test_typed_filters_reach_the_planner(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Dates, decimals and timestamps in SQL become the predicates pyhudi prunes by: the files Spark lists are
    those pyhudi plans for the same predicates (the fixture has column statistics of these types)."""
    base = str(unzip_table("cow_v9_txns_simple_meta.zip", tmp_path))
    planner = planner_of(spark)
    assert planner is not None
    df = spark.read.format("hudi").load(base)
    when = dt.datetime(2024, 1, 20, tzinfo=dt.UTC)
    cases = [
        ("txn_date >= date'2024-01-20'", (Pred("txn_date", GE, dt.date(2024, 1, 20)),)),
        ("amount < 100", (Pred("amount", LT, decimal.Decimal("100")),)),
        ("txn_datetime <= timestamp'2024-01-20 00:00:00'", (Pred("txn_datetime", LE, when),)),
        ("currency = 'EUR'", (Pred("currency", EQ, "EUR"),)),
    ]
    for cond, preds in cases:
        n = df.where(cond).count()
        _, rep = plan_query({"path": base}, preds)
        assert planner.planned == rep.files_read < rep.files_total, cond
        off = spark.read.format("hudi").option("pyhudi.read.spark.parquet", "false").load(base)
        assert n == off.where(cond).count(), cond


def test_predicates_json() -> None:
    text = json.dumps([
        ["a", "=", {"t": "str", "v": "x"}], ["b", ">", {"t": "int", "v": 5}], ["c", "in", [{"t": "date", "v": 1},
                                                                                          {"t": "null"}]],
        ["d", "<=", {"t": "ts", "v": 1_500_000}], ["e", "=", {"t": "dec", "v": "1.50"}], ["f", "is_null"],
        ["g", "not_null"], ["h", "starts_with", {"t": "str", "v": "ab"}], ["i", "<=>", {"t": "bool", "v": True}],
    ])
    assert predicates(text) == (
        Pred("a", EQ, "x"), Pred("b", GT, 5), Pred("c", IN, (dt.date(1970, 1, 2), None)),
        Pred("d", LE, dt.datetime(1970, 1, 1, 0, 0, 1, 500_000, tzinfo=dt.UTC)),
        Pred("e", EQ, decimal.Decimal("1.50")), Pred("f", IS_NULL), Pred("g", NOT_NULL),
        Pred("h", STARTS_WITH, "ab"), Pred("i", "<=>", True))


def test_planner_declines_what_it_cannot_read(tmp_path: Path) -> None:
    p = Planner()

    def schema(name: str) -> str:
        return StructType([StructField(name, StringType())]).json()

    assert json.loads(p.describe(json.dumps({"path": str(tmp_path / "none")}), schema("a")))["use"] is False
    base = str(unzip_table("cow_v9_txns_simple_meta.zip", tmp_path))
    ok = json.loads(p.describe(json.dumps({"path": base}), schema("txn_id")))
    assert ok == {"use": True, "root": Path(base).as_uri(), "native": {}, "push": True}
    off = json.loads(p.describe(json.dumps({"path": base, "hoodie.enable.data.skipping": "false"}), schema("txn_id")))
    assert off["use"] is True and off["push"] is False
    no = json.loads(p.describe(json.dumps({"path": base}), schema("nope")))
    assert no["use"] is False and "nope" in no["why"]
    assert len(json.loads(p.files(json.dumps({"path": base}), "[]"))) == p.planned > 0
    assert TABLE_ZIPS_DIR.is_dir()


def test_old_dates_and_times_as_written(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Dates before the Gregorian switch and times before 1900 read back as written (base files are not
    Spark-written: nothing is rebased from Spark 2's hybrid calendar, nothing refused)."""
    base = str(tmp_path / "old")
    t = pa.table({
        "id": ["a", "b"], "ts": pa.array([1, 1], pa.int64()), "dt": ["p", "p"],
        "d": pa.array([dt.date(1500, 3, 1), dt.date(2020, 1, 1)], pa.date32()),
        "at": pa.array([dt.datetime(1850, 1, 1, 12, tzinfo=dt.UTC), dt.datetime(2020, 1, 1, tzinfo=dt.UTC)],
                       pa.timestamp("us", "UTC")),
    })
    Table.create(base, t.schema, {**OPTS, "hoodie.table.name": "old"}).write(spark.createDataFrame(t), "insert",
                                                                             {**OPTS, "hoodie.table.name": "old"})
    df = spark.read.format("hudi").load(base)
    assert uses_spark_reader(df)
    got = sorted((r["id"], r["d"], r["at"]) for r in df.collect())
    assert got[0][1] == dt.date(1500, 3, 1) and got[1][1] == dt.date(2020, 1, 1)
    off = spark.read.format("hudi").option("pyhudi.read.spark.parquet", "false").load(base)
    assert got == sorted((r["id"], r["d"], r["at"]) for r in off.collect())
    assert df.where("d < date'1600-01-01'").count() == 1


def test_extension_runs_the_rule_before_push_down(spark) -> None:  # type: ignore[no-untyped-def]
    """pyhudi's session has the rule from its extensions (before Spark pushes filters into scans), not in the
    optimizer's last batch."""
    jvm = spark.sparkContext._jvm
    assert jvm.org.pyhudi.spark.HudiExtensions.appliedTo(spark._jsparkSession)
    rules = [str(r.getClass().getName()) for r in
             jvm.scala.jdk.javaapi.CollectionConverters.asJava(spark._jsparkSession.experimental().extraOptimizations())]
    assert "org.pyhudi.spark.HudiScanRule" not in rules


# the suite's driver JVM options (the client compiler) and the class-data archive, as any JVM options a user's
# session may have: they leave Spark's optimizer and the data source as they are
_OWN_SESSION = r"""
import os, sys
from pyspark.sql import SparkSession
from pyhudi.spark import register
from pyhudi.spark.cds import driver_java_options
from pyhudi.spark.java import check_java, java_version
from pyhudi.spark.native import jar_path
java = check_java()
jvm_options = f"{os.environ.get('PYHUDI_SPARK_DRIVER_JAVA_OPTIONS', '')} {driver_java_options(java, java_version(java))}"
spark = (SparkSession.builder.master("local[1]").config("spark.jars", jar_path())
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.driver.extraJavaOptions", jvm_options.strip())
         .config("spark.ui.enabled", "false").getOrCreate())
register(spark)
jvm = spark.sparkContext._jvm
assert not jvm.org.pyhudi.spark.HudiExtensions.appliedTo(spark._jsparkSession)
df = spark.read.format("hudi").load(sys.argv[1])
q = df.where("dt = '2026-06-03'")
assert "HudiFileIndex" in str(q._jdf.queryExecution().executedPlan().toString())
print(q.count(), df.count())
"""


@pytest.mark.slow
def test_a_session_of_ones_own_gets_the_rule_last(cow: str, tmp_path: Path) -> None:
    """A session built without pyhudi's extensions, with its jar: ``register`` adds the rule to the optimizer's
    last batch (after the Python source's filter push-down), and Spark's reader reads the scan."""
    import os
    import subprocess
    import sys

    script = tmp_path / "own.py"
    script.write_text(_OWN_SESSION)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    r = subprocess.run([sys.executable, str(script), cow], capture_output=True, text=True, timeout=300, env=env,
                       cwd=str(Path(__file__).resolve().parents[2]))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split()[-2:] == ["100", "400"]


def test_promoted_columns_stay_with_the_python_source(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A column some commit stored with another type (long, then double) is read by the Python source, which
    converts each file's values as Avro does; Spark's parquet reader refuses a long column read as double."""
    base = str(tmp_path / "promo")
    opts = {**OPTS, "hoodie.table.name": "promo"}
    first = pa.table({"id": ["a", "b"], "ts": pa.array([1, 1], pa.int64()), "dt": [DAYS[0], DAYS[0]],
                      "n": pa.array([2**53 + 1, 5], pa.int64())})
    Table.create(base, first.schema, opts).write(spark.createDataFrame(first), "insert", opts)
    second = pa.table({"id": ["c"], "ts": pa.array([2], pa.int64()), "dt": [DAYS[1]],
                       "n": pa.array([1.5], pa.float64())})
    Table.open(base).write(spark.createDataFrame(second), "upsert", opts)
    why, _ = refusal({"path": base}, StructType([StructField("n", DoubleType())]))
    assert why == "column 'n' was stored as int64 by an earlier commit"
    df = spark.read.format("hudi").load(base)
    assert not uses_spark_reader(df)
    assert sorted(r["n"] for r in df.collect()) == [1.5, 5.0, 9007199254740992.0]
    # the rule judges the table's columns, not the query's: the whole table stays with the Python source
    assert not uses_spark_reader(df.select("id", "dt"))
    assert refusal({"path": base}, StructType([StructField("id", StringType())]))[0] is None


def test_a_missing_base_file_fails_the_query(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A base file the plan names but storage lacks fails the query, even in a session that skips missing
    files: a snapshot never silently loses its rows."""
    base = str(tmp_path / "gone")
    opts = {**OPTS, "hoodie.table.name": "gone"}
    t = pa.table({"id": ["a", "b"], "ts": pa.array([1, 1], pa.int64()), "dt": [DAYS[0], DAYS[1]],
                  "n": pa.array([1, 2], pa.int64())})
    Table.create(base, t.schema, opts).write(spark.createDataFrame(t), "insert", opts)
    victim = next(p for p in Path(base, DAYS[0]).iterdir() if p.suffix == ".parquet")
    victim.unlink()
    spark.conf.set("spark.sql.files.ignoreMissingFiles", "true")
    try:
        df = spark.read.format("hudi").load(base)
        assert uses_spark_reader(df)
        with pytest.raises(Exception, match=victim.name):
            df.collect()
    finally:
        spark.conf.unset("spark.sql.files.ignoreMissingFiles")


def test_a_string_literal_that_is_not_utf8_prunes_nothing(spark, reader, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``s < cast(unhex('FF') as string)`` holds for every string (Spark compares bytes): no file may be pruned
    by a literal whose bytes are not known (not valid UTF-8), through either reader."""
    base = str(tmp_path / "utf")
    opts = {**OPTS, "hoodie.table.name": "utf", "hoodie.datasource.write.partitionpath.field": "dt"}
    t = pa.table({"id": ["a", "b", "c"], "ts": pa.array([1, 1, 1], pa.int64()), "dt": DAYS[:3],
                  "s": ["abc", "\U0001F600", "zzz"]})
    Table.create(base, t.schema, opts).write(spark.createDataFrame(t), "insert", opts)
    df = spark.read.format("hudi").load(base)
    cond = "s < cast(unhex('FF') as string)"
    # Spark's own parquet reader would skip the row group of '😀' (it pushes the literal into parquet's
    # filters as a Java string, U+FFFD): such a query stays with the Python source
    assert not uses_spark_reader(df.where(cond))
    assert df.where(cond).count() == 3
    assert df.where(cond.replace("<", ">=")).count() == 0
    assert uses_spark_reader(df.where("s < 'zz'")) == (reader == "spark_parquet")


def test_a_failed_build_leaves_the_python_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pyhudi.spark import native

    fake = tmp_path / "jdk" / "bin"
    fake.mkdir(parents=True)
    (fake / "javac").write_text("#!/bin/sh\necho 'error: invalid target release: 17' >&2\nexit 2\n")
    (fake / "javac").chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    monkeypatch.setenv(native.ENV_JAR_CACHE, str(tmp_path / "cache"))
    native.jar_path.cache_clear()
    try:
        assert native.jar_path() is None
    finally:
        native.jar_path.cache_clear()


def test_nan_and_negative_zero_are_never_skipped(spark, reader, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Spark orders NaN above every number and holds ``-0.0 = 0.0``; parquet's statistics leave NaN out of a
    column chunk's min and max and its dictionaries tell the two zeros apart. A filter on a floating-point column
    is evaluated by Spark on every row read, never pushed into parquet's row-group filters: through either
    reader, each query returns what Spark returns for the same rows in memory."""
    base = str(tmp_path / "nan")
    opts = {**OPTS, "hoodie.table.name": "nan"}
    t = pa.table({"id": ["a", "b", "c", "d", "e"], "ts": pa.array([1] * 5, pa.int64()),
                  "dt": [DAYS[0], DAYS[0], DAYS[1], DAYS[1], DAYS[2]],
                  "f": pa.array([1.0, float("nan"), -0.0, 1.5, None], pa.float64())})
    Table.create(base, t.schema, opts).write(spark.createDataFrame(t), "insert", opts)
    df = spark.read.format("hudi").load(base)
    mem = spark.createDataFrame(t)
    for cond in ["f > 2.0", "f >= 'NaN'", "f = 0.0", "f IN (0.0, 7.0)", "f <= 0.0", "f = 'NaN'", "f != 1.0",
                 "f > 1.2 AND dt = '2026-06-01'", "NOT (f < 2.0)"]:
        got = sorted(r["id"] for r in df.where(cond).collect())
        assert got == sorted(r["id"] for r in mem.where(cond).collect()), cond
        assert uses_spark_reader(df.where(cond)) == (reader == "spark_parquet")


def test_millisecond_timestamps_are_never_skipped(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A timestamp column stored in milliseconds (``timestamp-millis``, as Flink and Avro schemas write it, or
    Hudi's row writer with ``hoodie.parquet.outputtimestamptype=TIMESTAMP_MILLIS`` under a microsecond schema):
    Spark's parquet filters would round ``t < 00:00:00.0005`` to ``t < 00:00:00.000`` and skip the row group of
    two matching rows. A filter with a timestamp literal finer than a millisecond stays out of parquet's
    row-group filters."""
    m = MorTable(tmp_path / "t", extra_fields=[("t", {"type": "long", "logicalType": "timestamp-millis"})])
    stored = m.arrow_schema()  # the base file holds milliseconds, as the schema says
    stored = stored.set(stored.get_field_index("t"), pa.field("t", pa.timestamp("ms", "UTC")))
    m.arrow_schema = lambda: stored  # type: ignore[method-assign]
    when = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
    m.commit(base={"fg1": [{"id": "a", "ts": 1, "t": when}, {"id": "b", "ts": 1, "t": when}]})
    ro = spark.read.format("hudi").option(QT, "read_optimized").load(m.base)
    lit = "TIMESTAMP'2026-06-01 00:00:00.0005+00:00'"
    for cond in [f"t < {lit}", f"t != {lit}", f"t NOT IN ({lit})", f"t <= {lit} AND t > TIMESTAMP'2026-05-31'",
                 "t < TIMESTAMP'2026-06-01 00:00:00.001+00:00'", "t = TIMESTAMP'2026-06-01 00:00:00+00:00'"]:
        q = ro.where(cond)
        assert uses_spark_reader(q)
        assert sorted(r["id"] for r in q.collect()) == ["a", "b"], cond


def test_which_filters_reach_parquet(spark) -> None:  # type: ignore[no-untyped-def]
    """Only filters on top-level columns of exactly judged types reach parquet's row-group filters: not those on a
    floating-point or nested column or a name with a dot, nor one with a timestamp finer than a millisecond, nor
    a disjunction or negation involving one."""
    jvm = spark._jvm
    src = jvm.org.apache.spark.sql.sources
    schema = StructType.fromDDL("a int, f double, s struct<x: int>, `a.b` int, t timestamp, d decimal(5,2)")
    jschema = jvm.org.apache.spark.sql.types.DataType.fromJson(schema.json())

    def kept(*filters: Any) -> list[str]:
        seq = jvm.scala.jdk.javaapi.CollectionConverters.asScala(jvm.java.util.ArrayList(list(filters))).toList()
        out = jvm.org.pyhudi.spark.HudiParquetFormat.judgedExactly(seq, jschema)
        return [str(x.toString()) for x in jvm.scala.jdk.javaapi.CollectionConverters.asJava(out)]

    def at(nanos: int) -> Any:
        t = jvm.java.sql.Timestamp(1_780_272_000_000)
        t.setNanos(nanos)
        return t

    def is_in(column: str, *values: Any) -> Any:
        arr = spark.sparkContext._gateway.new_array(jvm.java.lang.Object, len(values))
        for i, v in enumerate(values):
            arr[i] = v
        return src.In(column, arr)

    a, f = src.GreaterThan("a", 1), src.GreaterThan("f", 2.0)
    ms, finer, whole = src.LessThan("t", at(1_000_000)), src.LessThan("t", at(500_000)), is_in("t", at(0), at(2_000_000))
    assert kept(a, f, src.GreaterThan("s.x", 1), src.EqualTo("`a.b`", 1), src.EqualTo("a.b", 1),
                src.Or(a, f), src.Not(src.EqualTo("f", 0.0)), src.Not(a), src.IsNotNull("d"), src.IsNull("t"),
                ms, finer, src.Not(finer), src.Or(a, finer), is_in("t", at(0), at(500_000)), whole) == [
        "GreaterThan(a,1)", "Not(GreaterThan(a,1))", "IsNotNull(d)", "IsNull(t)", str(ms.toString()),
        str(whole.toString())]


def test_dates_of_the_julian_gap(spark, reader, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """PySpark hands a data source the dates 1582-10-05 to 10-14 (which the hybrid Julian calendar lacks) as
    1582-10-15, and Spark hands parquet's filters dates through that calendar (``d > DATE'1582-10-10'`` became
    ``d > 1582-10-20``): through either reader, no file or row group holding a match is skipped."""
    from pyhudi.spark.frames import arrow_frame

    base = str(tmp_path / "gap")
    opts = {**OPTS, "hoodie.table.name": "gap"}
    days = [dt.date(1582, 10, 4), dt.date(1582, 10, 15), dt.date(1582, 10, 20), dt.date(2026, 6, 1)]
    t = pa.table({"id": ["a", "b", "c", "e"], "ts": pa.array([1] * 4, pa.int64()), "dt": DAYS,
                  "d": pa.array(days, pa.date32()),
                  "at": pa.array([dt.datetime.combine(d, dt.time(12), dt.UTC) for d in days],
                                 pa.timestamp("us", "UTC"))})
    Table.create(base, t.schema, opts).write(spark.createDataFrame(t), "insert", opts)
    df, mem = spark.read.format("hudi").load(base), arrow_frame(spark, t)
    for cond in ["d > DATE'1582-10-10'", "d >= DATE'1582-10-05'", "d = DATE'1582-10-15'", "d < DATE'1582-10-12'",
                 "d IN (DATE'1582-10-14', DATE'1582-10-15')", "d <= DATE'1582-10-14'",
                 "at > TIMESTAMP'1582-10-10 00:00:00+00:00'", "at < TIMESTAMP'1582-10-14 00:00:00+00:00'"]:
        assert sorted(r["id"] for r in df.where(cond).collect()) == sorted(r["id"] for r in mem.where(cond).collect()), cond


def _mor_half_logged(spark: Any, base: str) -> list[str]:  # type: ignore[no-untyped-def]
    """A merge-on-read table of 4 day partitions (one file group each, 100 rows), whose first two days got an
    upsert (log files) after the insert; its commits' instants."""
    opts = {**OPTS, "hoodie.table.name": "split", "hoodie.datasource.write.table.type": "MERGE_ON_READ",
            "hoodie.parquet.small.file.limit": "0"}
    n = 400
    t = pa.table({"id": [f"k{i:05d}" for i in range(n)], "ts": pa.array([1] * n, pa.int64()),
                  "dt": [DAYS[i // 100] for i in range(n)], "n": pa.array(range(n), pa.int64()),
                  "v": pa.array([float(i) for i in range(n)], pa.float64())})
    table = Table.create(base, t.schema, opts)
    table.write(spark.createDataFrame(t), "insert", opts)
    up = pa.table({"id": ["k00005", "k00150"], "ts": pa.array([2, 2], pa.int64()), "dt": [DAYS[0], DAYS[1]],
                   "n": pa.array([5, 150], pa.int64()), "v": pa.array([-1.0, -2.0], pa.float64())})
    table.write(spark.createDataFrame(up), "upsert", opts)
    return [i.requested_time for i in Table.open(base).timeline().completed_commits()]


def _rows(rows: Any) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["dt"], r["n"], r["v"]) for r in rows)


def test_a_merge_on_read_snapshot_is_split(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A merge-on-read snapshot: Spark's parquet reader reads the slices without log files, the Python source
    those with log files, each half pruned by the query's filters; the rows are hudi-rs's."""
    from tests.support.workload import hudi_rs_read

    base = str(tmp_path / "split")
    instants = _mor_half_logged(spark, base)
    planner = planner_of(spark)
    assert planner is not None
    df = spark.read.format("hudi").load(base)
    text = plan_text(df)
    assert "HudiFileIndex" in text and "Union" in text and "BatchScan hudi" in text, text
    want = _rows(hudi_rs_read(base).to_pylist())
    assert _rows(df.collect()) == want and len(want) == 400
    assert sorted(r["v"] for r in df.where("v < 0").collect()) == [-2.0, -1.0]
    # one partition: Spark lists its file only when it has no log file; the Python half plans only its slices
    for day, listed in ((DAYS[0], 0), (DAYS[2], 1)):
        q = df.where(f"dt = '{day}'")
        assert _rows(q.collect()) == [r for r in want if r[1] == day]
        assert planner.planned == listed, day
    assert df.where("dt = 'x'").count() == 0
    # the columns a query uses, through both halves
    assert df.groupBy().sum("n").collect()[0][0] == sum(range(400))
    assert "ReadSchema: struct<n:bigint>" in plan_text(df.groupBy().sum("n"))
    # keys through both halves (the record index prunes each)
    got = df.where("id in ('k00005', 'k00300')").select("id", "v").collect()
    assert sorted((r["id"], r["v"]) for r in got) == [("k00005", -1.0), ("k00300", 300.0)]
    # as of the insert no slice had log files: Spark's reader alone
    old = spark.read.format("hudi").option("as.of.instant", instants[0]).load(base)
    assert uses_spark_reader(old) and "Union" not in plan_text(old)
    assert _rows(old.collect()) == _rows(hudi_rs_read(base, as_of=instants[0]).to_pylist())
    # off: the Python source reads it all, the same rows
    off = spark.read.format("hudi").option("pyhudi.read.spark.parquet", "false").load(base)
    assert not uses_spark_reader(off) and _rows(off.collect()) == want


def test_split_halves_see_the_table_the_rule_planned(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The two halves of a split scan plan the table as the rule saw it: a commit completing in between (here
    a log file added to a slice that had none) is left out of both, so the slice is read once, by Spark's
    reader; halves planned from other slices than the rule's fail the query instead of reading a slice twice or
    not at all."""
    from pyhudi.errors import PyHudiError
    from pyhudi.spark.source import DIGEST_OPTION

    base = str(tmp_path / "split")
    _mor_half_logged(spark, base)
    why, how = refusal({"path": base}, StructType([StructField("id", StringType())]))
    assert why is None and how is not None and how.python is not None
    native, python = {"path": base, **how.native}, {"path": base, **how.python}

    def planned(opts: dict[str, str]) -> list[tuple[str, int]]:
        plan, _ = plan_query(opts)
        return sorted((s.partition, len(s.log_files)) for s in plan.slices)

    assert planned(native) == [(DAYS[2], 0), (DAYS[3], 0)]
    assert planned(python) == [(DAYS[0], 1), (DAYS[1], 1)]
    opts = {**OPTS, "hoodie.table.name": "split", "hoodie.datasource.write.table.type": "MERGE_ON_READ",
            "hoodie.parquet.small.file.limit": "0"}
    up = pa.table({"id": ["k00250"], "ts": pa.array([3], pa.int64()), "dt": [DAYS[2]],
                   "n": pa.array([250], pa.int64()), "v": pa.array([-3.0], pa.float64())})
    Table.open(base).write(spark.createDataFrame(up), "upsert", opts)
    assert planned(native) == [(DAYS[2], 0), (DAYS[3], 0)]
    assert planned(python) == [(DAYS[0], 1), (DAYS[1], 1)]
    assert planned({"path": base}) == [(DAYS[0], 1), (DAYS[1], 1), (DAYS[2], 1), (DAYS[3], 0)]
    with pytest.raises(PyHudiError, match="changed while the query was planned"):
        plan_query({**python, DIGEST_OPTION: "0" * 64})


def test_after_uninstall_the_python_source_plans_every_scan_whole(spark, cow: str) -> None:  # type: ignore[no-untyped-def]
    """Without the rule, pushed filters do not prune the Python source (its scans share a source object, on which
    PySpark keeps the partitions planned last): every query of one DataFrame still reads the right rows, a
    DataFrame loaded while the rule was installed too."""
    from pyhudi.spark import register
    from pyhudi.spark.native import uninstall

    before = spark.read.format("hudi").option("pyhudi.read.spark.parquet", "false").load(cow)
    assert before.where("dt = '2026-06-02'").count() == 100
    uninstall(spark)
    try:
        for df in (spark.read.format("hudi").load(cow), before):
            assert not uses_spark_reader(df)
            assert df.where("dt = '2026-06-02'").count() == 100
            assert df.count() == 400
            assert df.where("dt = '2026-06-02'").union(df).count() == 500
    finally:
        register(spark)
    assert uses_spark_reader(spark.read.format("hudi").load(cow))


def test_pushed_filters_prune_only_the_scans_the_rule_marked() -> None:
    """The Python source prunes by pushed filters only in a scan whose read option ``pyhudi.internal.read.own``
    holds the JVM's token the source got at registration: not in a scan a user marked himself, nor without the
    rule."""
    from pyspark.sql.datasource import EqualTo

    from pyhudi.spark.source import OWN_OPTION, HudiReader

    schema = StructType([StructField("dt", StringType()), StructField("n", LongType())])
    pushed = [EqualTo(("dt",), "2026-06-02")]
    for options, token, prunes in [
        ({OWN_OPTION: "t0k3n"}, "t0k3n", True),
        ({OWN_OPTION: "true"}, "t0k3n", False),  # a user's option
        ({OWN_OPTION: "t0k3n"}, None, False),  # registered without the rule
        ({}, "t0k3n", False),  # a scan the rule did not give a source object of its own
    ]:
        r = HudiReader({"path": "/nowhere", **options}, schema, 2, token)
        assert list(r.pushFilters(pushed)) == pushed  # Spark evaluates every filter in any case
        assert bool(r.preds) == prunes, (options, token)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_every_query_of_a_dataframe_reads_the_latest_commit(spark, table_type: str,  # type: ignore[no-untyped-def]
                                                            tmp_path: Path) -> None:
    """With the rule, each query of one DataFrame plans the table anew: a commit between two queries is read by
    the second, filtered or not, and by both scans of a union (merge-on-read: the commit also updates a key of
    the first partition, a log file there); through the default reading and the Python source alone (not run
    with the ``reader`` fixture, whose Python-only run would read both DataFrames as the second one is)."""
    base = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.table.name": "latest", "hoodie.parquet.small.file.limit": "0",
            "hoodie.datasource.write.table.type": table_type}

    def batch(lo: int, hi: int) -> pa.Table:
        return pa.table({"id": [f"k{i:05d}" for i in range(lo, hi)], "ts": pa.array([1] * (hi - lo), pa.int64()),
                         "dt": [DAYS[i // 100] for i in range(lo, hi)], "n": pa.array(range(lo, hi), pa.int64()),
                         "v": pa.array([float(i) for i in range(lo, hi)], pa.float64())})

    Table.create(base, batch(0, 1).schema, opts).write(spark.createDataFrame(batch(0, 200)), "insert", opts)
    for df in (spark.read.format("hudi").load(base),
               spark.read.format("hudi").option("pyhudi.read.spark.parquet", "false").load(base)):
        n = df.count()
        assert df.where(f"dt = '{DAYS[1]}'").count() == 100
        Table.open(base).write(spark.createDataFrame(pa.concat_tables([batch(n, n + 100), batch(0, 1)])), "upsert",
                               opts)
        assert df.count() == n + 100
        assert df.where(f"dt = '{DAYS[n // 100]}'").count() == 100
        assert df.where(f"dt = '{DAYS[1]}'").union(df).count() == 100 + n + 100


def test_a_scan_the_plan_holds_twice_is_taken_at_each_place(spark, cow: str) -> None:  # type: ignore[no-untyped-def]
    """A common table expression referenced twice: the rule takes the scan at each place (each its own source
    object, both handed to Spark's reader; it takes a relation object the plan holds at two places at each too)."""
    spark.read.format("hudi").load(cow).createOrReplaceTempView("twice")
    q = spark.sql(f"WITH t AS (SELECT * FROM twice) SELECT count(*) AS c FROM "
                  f"(SELECT id FROM t WHERE dt = '{DAYS[1]}' UNION ALL SELECT id FROM t)")
    text = plan_text(q)
    assert text.count("HudiFileIndex") == 2 and "BatchScan" not in text, text
    assert q.collect()[0]["c"] == 500

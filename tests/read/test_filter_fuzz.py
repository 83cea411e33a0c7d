"""Random filters, through both readers of ``spark.read.format("hudi")``, return exactly the rows Spark's own
evaluation of the same filter returns over what hudi-rs reads (no file, row group or record pruned wrongly).

The written tables hold edge values in every column (nulls, NaN and both zeros, the integer extremes, empty,
accented and 4-byte strings, strings with ``%``, ``_`` and quotes, dates before 1582 and in 9999, timestamps before
1900 and a microsecond apart, decimals at their precision), in several file groups per partition and partition
paths with a slash, a space and a non-ASCII letter (one table hive-style and URL-encoded on two fields), with
column statistics and the record index; each is queried as a snapshot, as of an earlier commit, incrementally and
(merge-on-read, with updates and deletes in log files) read-optimized. Every fixture table is queried too, its
conditions drawn from its own values, and two tables whose second commit added columns (and promoted one).

``PYHUDI_FUZZ_SEED`` and ``PYHUDI_FUZZ_QUERIES`` choose other and more conditions.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder

from pyhudi import Table
from pyhudi.spark.frames import arrow_frame
from tests.paths import TABLE_ZIPS_DIR
from tests.support.filter_fuzz import Conditions, comparable_rows
from tests.support.fixtures import unzip_table

pytestmark = pytest.mark.spark

SEED = int(os.environ.get("PYHUDI_FUZZ_SEED", "20261127"))
QUERIES = int(os.environ.get("PYHUDI_FUZZ_QUERIES", "10"))
QT = "hoodie.datasource.query.type"
U = dt.UTC
SCHEMA = pa.schema([
    ("key", pa.string()), ("ts", pa.int64()), ("part", pa.string()),
    ("i", pa.int32()), ("l", pa.int64()), ("sh", pa.int16()), ("s", pa.string()), ("d", pa.date32()),
    ("t", pa.timestamp("us", "UTC")), ("dec", pa.decimal128(12, 3)), ("b", pa.bool_()), ("f", pa.float64()),
])
VALUES: dict[str, list[Any]] = {
    "part": ["a", "b/c", "\u00fc", "x y", "7"],
    "i": [-5, -1, 0, 1, 2, 5, -2**31, 2**31 - 1, None],
    "l": [-2**63, 2**63 - 1, 0, 1, -1, 10**12, None],
    "sh": [-2**15, 0, 3, 2**15 - 1, None],
    "s": ["", "a", "ab", "abc", "b", "\u00e9", "\u00e91", "z", "\u4e2d", "\U0001f600", "a%b", "a_b", "it's", None],
    "d": [dt.date(1500, 1, 1), dt.date(1582, 10, 15), dt.date(1970, 1, 1), dt.date(2026, 6, 1),
          dt.date(9999, 12, 31), None],
    "t": [dt.datetime(1850, 1, 1, 12, tzinfo=U), dt.datetime(1970, 1, 1, tzinfo=U),
          dt.datetime(2026, 6, 1, 0, 0, 0, 1, tzinfo=U), dt.datetime(2026, 6, 1, tzinfo=U), None],
    "dec": [decimal.Decimal(x) for x in ("-999999999.999", "-1.500", "0.000", "0.001", "1.500", "123456789.123")]
    + [None],
    "b": [True, False, None],
    "f": [math.nan, -0.0, 0.0, math.inf, -math.inf, 1.5, None],
}
# literals the table never holds (beside each held value's neighbours)
EXTRA: dict[str, list[Any]] = {
    "part": ["", "b", "8"], "i": [3_000_000_000], "sh": [40000], "s": ["\u00e0", "A", "zz"],
    "d": [dt.date(1499, 12, 31)], "dec": [decimal.Decimal("0.0005")], "f": [2.0, 0.0, -0.0, math.nan],
}


def _row(rng: random.Random, key: str, ts: int, *partition: Any) -> dict[str, Any]:
    """A row of random values; an update keeps its record's ``part`` and ``sh`` (``partition``), the fields the
    tables are partitioned by."""
    r: dict[str, Any] = {"key": key, "ts": ts}
    for c in SCHEMA.names[2:]:
        r[c] = rng.choice(VALUES[c])
    if partition:
        r["part"], r["sh"] = partition
    return r


# the options of every table written here (column statistics and the record index; new keys in new file groups,
# several per partition)
OPTS = {
    "hoodie.table.name": "fuzz", "hoodie.datasource.write.recordkey.field": "key",
    "hoodie.datasource.write.partitionpath.field": "part", "hoodie.table.ordering.fields": "ts",
    "hoodie.index.type": "RECORD_INDEX", "hoodie.metadata.record.index.enable": "true",
    "hoodie.metadata.index.column.stats.enable": "true", "hoodie.parquet.small.file.limit": "0",
}
# the tables written: (table type, options beside the common ones)
TABLES: dict[str, tuple[str, dict[str, str]]] = {
    "COPY_ON_WRITE": ("COPY_ON_WRITE", {}),
    "MERGE_ON_READ": ("MERGE_ON_READ", {}),
    # two partition fields, hive-style and URL-encoded paths ("part=b%2Fc/sh=-32768", the default partition for
    # a null): partitions pruned by each field's value
    "hive-style on two fields": ("COPY_ON_WRITE", {
        "hoodie.datasource.write.partitionpath.field": "part,sh",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.partitionpath.urlencode": "true",
    }),
}


def _write(spark: Any, base: str, table_type: str, extra: dict[str, str],
           seed: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Inserts, then three rounds of an upsert (updates and new keys) and a delete, drawn from ``seed``: the rows
    held at the end and each commit's instant."""
    opts = {
        **OPTS,
        "hoodie.parquet.block.size": "4096",  # several row groups per base file
        "hoodie.table.type": table_type,
        **extra,
    }
    rng = random.Random(seed)
    held: dict[str, dict[str, Any]] = {}
    made = 0

    def new(n: int, ts: int) -> list[dict[str, Any]]:
        nonlocal made
        made += n
        return [_row(rng, f"k{made - n + j:04d}", ts) for j in range(n)]

    def frame(rows: list[dict[str, Any]]) -> Any:
        return spark.createDataFrame(pa.Table.from_pylist(rows, SCHEMA))

    table = Table.create(base, SCHEMA, opts)
    first = new(150, 1)
    table.write(frame(first), "insert", opts)
    held.update((r["key"], r) for r in first)
    for ts in (2, 3, 4):
        batch = [_row(rng, k, ts, held[k]["part"], held[k]["sh"]) for k in rng.sample(sorted(held), 30)] + new(20, ts)
        table.write(frame(batch), "upsert", opts)
        held.update((r["key"], r) for r in batch)
        gone = rng.sample(sorted(held), 10)
        table.write(frame([held[k] for k in gone]), "delete", opts)
        for k in gone:
            del held[k]
    instants = [i.requested_time for i in Table.open(base).timeline().completed_commits()]
    return list(held.values()), instants


def _hudi_rs(base: str, opts: HudiReadOptions) -> pa.Table:
    batches = HudiTableBuilder.from_base_uri(base).build().read(opts)
    return pa.Table.from_batches(batches)


def _views(base: str, instants: list[str], mor: bool) -> list[tuple[str, dict[str, str], pa.Table]]:
    """(name, read options, what hudi-rs reads) of each way the table is queried."""
    views = [
        ("snapshot", {}, _hudi_rs(base, HudiReadOptions())),
        ("as of the first upsert", {"as.of.instant": instants[1]},
         _hudi_rs(base, HudiReadOptions().with_as_of_timestamp(instants[1]))),
        ("incremental after the first delete", {QT: "incremental", "hoodie.datasource.read.begin.instanttime":
                                                instants[2]},
         _hudi_rs(base, HudiReadOptions().with_query_type(HudiQueryType.Incremental)
                  .with_start_timestamp(instants[2]))),
    ]
    if mor:
        views.append(_read_optimized(base))
    return views


def _read_optimized(base: str) -> tuple[str, dict[str, str], pa.Table]:
    return ("read-optimized", {QT: "read_optimized"}, _hudi_rs(
        base, HudiReadOptions().with_hudi_option("hoodie.read.use.read_optimized.mode", "true")))


_EXPECTED: dict[tuple[str, str, str, str], list[tuple[Any, ...]]] = {}  # shared by the two readers' runs


def _check(spark: Any, base: str, label: str, views: list[tuple[str, dict[str, str], pa.Table]],
           conditions: Conditions, schema: pa.Schema) -> None:
    from pyspark.sql import functions as F

    key = conditions.key
    drawn = [(conditions.condition(), conditions.column()) for _ in range(QUERIES)]
    for name, _, theirs in views:
        # Spark's own verdict on every condition over what hudi-rs read, in one job per view: each condition
        # evaluated as a column (a row is kept where it is true, as WHERE keeps it)
        todo = [(cond, col) for cond, col in drawn if (label, name, cond, col) not in _EXPECTED]
        if not todo:
            continue
        frame = arrow_frame(spark, theirs.select(schema.names).cast(schema))
        verdicts = frame.select(*schema.names, *(F.expr(c).alias(f"_fuzz_{i}") for i, (c, _) in enumerate(todo)))
        collected = verdicts.collect()
        for i, (cond, col) in enumerate(todo):
            kept = [r for r in collected if r[f"_fuzz_{i}"] is True]
            _EXPECTED[(label, name, cond, col)] = comparable_rows(kept, list(dict.fromkeys([key, col])))
    for cond, col in drawn:
        cols = list(dict.fromkeys([key, col]))
        for name, opts, _ in views:
            want = _EXPECTED[(label, name, cond, col)]
            r = spark.read.format("hudi")
            for k, v in opts.items():
                r = r.option(k, v)
            got = comparable_rows(r.load(base).where(cond).select(*cols).collect(), cols)
            assert got == want, f"{label}, {name}: WHERE {cond} (column {col})"


@pytest.fixture(scope="module")
def fuzz_tables(spark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, list[str]]]:  # type: ignore[no-untyped-def]
    out = {}
    for label, (table_type, extra) in TABLES.items():
        base = str(tmp_path_factory.mktemp("fuzz") / "t")
        held, instants = _write(spark, base, table_type, extra, f"{SEED}/{label}")
        # the rows written are the rows hudi-rs reads back: it is the reference of every query below
        theirs = _hudi_rs(base, HudiReadOptions()).select(SCHEMA.names).cast(SCHEMA)
        assert comparable_rows(theirs.to_pylist(), SCHEMA.names) == comparable_rows(held, SCHEMA.names)
        out[label] = (base, instants)
    return out


@pytest.mark.parametrize("label", list(TABLES))
def test_random_filters_on_written_tables(spark, reader, fuzz_tables, label: str) -> None:  # type: ignore[no-untyped-def]
    base, instants = fuzz_tables[label]
    views = _views(base, instants, TABLES[label][0] == "MERGE_ON_READ")
    conditions = Conditions(views[0][2].select(SCHEMA.names).cast(SCHEMA), "key", random.Random(f"{SEED}/{label}"),
                            extra=EXTRA)
    if TABLES[label][0] == "MERGE_ON_READ":  # slices with and without log files: a split snapshot
        plan = spark.read.format("hudi").load(base)._jdf.queryExecution().optimizedPlan().toString()
        assert ("Union" in plan) == (reader == "spark_parquet"), plan
    _check(spark, base, label, views, conditions, SCHEMA)


@pytest.mark.parametrize("zip_name", sorted(p.name for p in TABLE_ZIPS_DIR.glob("*.zip")))
def test_random_filters_on_fixtures(spark, reader, zip_name: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(unzip_table(zip_name, tmp_path))
    table = Table.open(base)
    key = table.config.record_key_fields[0]
    views = [("snapshot", {}, _hudi_rs(base, HudiReadOptions()))]
    if table.config.table_type == "MERGE_ON_READ":
        views.append(_read_optimized(base))
    data = views[0][2]
    schema = pa.schema([f for f in data.schema if not f.name.startswith("_hoodie_")])
    conditions = Conditions(data.select(schema.names), key, random.Random(f"{SEED}/{zip_name}"))
    _check(spark, base, zip_name, views, conditions, schema)


# -- schemas that evolve ----------------------------------------------------------------------------------------
OLD = pa.schema([("key", pa.string()), ("ts", pa.int64()), ("part", pa.string()), ("n", pa.int32()),
                 ("s", pa.string())])
EVOLUTIONS = {
    # columns added by the second commit: older files lack them (null there), their statistics too
    "added columns": pa.schema([*OLD, ("e", pa.string()), ("g", pa.date32())]),
    # and one promoted from int to long: older files hold ints (the Python source reads that table)
    "added and promoted columns": pa.schema([*OLD.remove(OLD.get_field_index("n")), ("n", pa.int64()),
                                             ("e", pa.string()), ("g", pa.date32())]),
}


@pytest.mark.parametrize("label", list(EVOLUTIONS))
def test_random_filters_on_an_evolved_table(spark, reader, label: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Rows written before a commit added columns (and promoted one) read with nulls there; no file is pruned by
    statistics it lacks. The reference is the rows written, in the latest schema."""
    new = EVOLUTIONS[label]
    rng = random.Random(f"{SEED}/{label}")
    opts = {**OPTS, "hoodie.table.name": "evolved"}

    def row(key: str, ts: int, part: str, schema: pa.Schema) -> dict[str, Any]:
        r = {"key": key, "ts": ts, "part": part, "n": rng.choice([-2**31, -1, 0, 7, 2**31 - 1, None]),
             "s": rng.choice(VALUES["s"])}
        if "e" in schema.names:
            r["e"] = rng.choice(["", "x", "\u00e9", None])
            r["g"] = rng.choice([d for d in VALUES["d"] if d is None or d.year < 9999])
        return r

    base = str(tmp_path / "t")
    first = [row(f"k{i:03d}", 1, rng.choice(VALUES["part"]), OLD) for i in range(120)]
    Table.create(base, OLD, opts).write(spark.createDataFrame(pa.Table.from_pylist(first, OLD)), "insert", opts)
    held = {r["key"]: {**dict.fromkeys(new.names), **r} for r in first}
    batch = [row(k, 2, held[k]["part"], new) for k in rng.sample(sorted(held), 30)]
    batch += [row(f"k{i:03d}", 2, rng.choice(VALUES["part"]), new) for i in range(120, 150)]
    Table.open(base).write(spark.createDataFrame(pa.Table.from_pylist(batch, new)), "upsert", opts)
    held.update((r["key"], r) for r in batch)
    gone = rng.sample(sorted(held), 10)
    Table.open(base).write(spark.createDataFrame(pa.Table.from_pylist([held[k] for k in gone], new)), "delete",
                           opts)
    for k in gone:
        del held[k]
    rows = pa.Table.from_pylist(list(held.values()), new)
    plan = str(spark.read.format("hudi").load(base)._jdf.queryExecution().executedPlan().toString())
    assert ("HudiFileIndex" in plan) == (reader == "spark_parquet" and label == "added columns")
    conditions = Conditions(rows, "key", rng)
    _check(spark, base, label, [("snapshot", {}, rows)], conditions, new)

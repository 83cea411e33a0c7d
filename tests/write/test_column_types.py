"""Column types beyond the flat ones, written by every path (copy-on-write merges, merge-on-read log blocks, which
encode nested records through Avro, and compaction) and read back exactly by hudi-rs, pyhudi and
``spark.read.format("hudi")``: structs, lists of structs, maps, binary, ``tinyint``, ``float``, decimals of 38
digits, with their edge values (NaN, -0.0, empty lists and maps, null elements, values at their type's limits).
``timestamp_ntz`` (Avro ``local-timestamp-micros``), which hudi-rs does not read, is checked through pyhudi and
Spark. A map holding a key twice, which an Avro map cannot, is refused by a merge-on-read write, which then leaves
the table as it was."""

from __future__ import annotations

import datetime as dt
import decimal
import random
from typing import Any

import pyarrow as pa
import pytest

from pyhudi.errors import PyHudiError
from pyhudi.metadata.validate import validate_table
from pyhudi.table.table import Table

hudi = pytest.importorskip("hudi")
pytestmark = pytest.mark.spark

SCHEMA = pa.schema([
    ("key", pa.string()), ("ts", pa.int64()), ("part", pa.string()),
    ("i8", pa.int8()), ("f32", pa.float32()), ("bin", pa.binary()),
    ("dec38", pa.decimal128(38, 18)), ("dec5", pa.decimal128(5, 0)),
    ("st", pa.struct([("a", pa.int32()), ("b", pa.string()), ("c", pa.list_(pa.int64()))])),
    ("arr", pa.list_(pa.string())),
    ("arrs", pa.list_(pa.struct([("x", pa.float64()), ("y", pa.date32())]))),
    ("m", pa.map_(pa.string(), pa.int32())),
])
NTZ = pa.schema([*SCHEMA, ("ntz", pa.timestamp("us"))])
VALUES: dict[str, list[Any]] = {
    "part": ["p1", "p2"],
    "i8": [-128, 127, 0, None],
    "f32": [float("nan"), -0.0, 1.5, float("inf"), 3.4028234663852886e38, 1e-45, None],
    "bin": [b"", b"\x00\xff", bytes(range(256)), None],
    "dec38": [decimal.Decimal("99999999999999999999.999999999999999999"),
              decimal.Decimal("-0.000000000000000001"), decimal.Decimal(0), None],
    "dec5": [decimal.Decimal(99999), decimal.Decimal(-99999), None],
    "st": [None, {"a": None, "b": None, "c": None}, {"a": 1, "b": "\U0001f600", "c": []},
           {"a": -2**31, "b": "", "c": [1, None, 2**63 - 1]}],
    "arr": [None, [], [None], ["a", "", "\u00e9"]],
    "arrs": [None, [], [None], [{"x": float("nan"), "y": dt.date(1500, 1, 1)}, {"x": None, "y": None}]],
    "m": [None, [], [("k", None)], [("a", 1), ("b", -1)]],
    "ntz": [dt.datetime(1500, 1, 1), dt.datetime(2026, 6, 1, 12, 0, 0, 1), dt.datetime(9999, 12, 31, 23, 59, 59,
                                                                                        999999), None],
}
OPTS = {
    "hoodie.table.name": "types", "hoodie.datasource.write.recordkey.field": "key",
    "hoodie.datasource.write.partitionpath.field": "part", "hoodie.table.ordering.fields": "ts",
    "hoodie.index.type": "RECORD_INDEX", "hoodie.metadata.record.index.enable": "true",
    "hoodie.metadata.index.column.stats.enable": "true", "hoodie.parquet.small.file.limit": "0",
    "hoodie.compact.inline.max.delta.commits": "3",
}


def _canon(v: Any) -> Any:
    """A value comparable across readers: floats by ``repr`` (NaN equal to NaN, -0.0 apart from 0.0), maps as
    sorted pairs whichever form a reader gives them."""
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, dict):
        return tuple(sorted((k, _canon(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        items = [_canon(x) for x in v]
        if v and all(isinstance(x, tuple) and len(x) == 2 for x in v) and all(isinstance(x[0], str) for x in v):
            return tuple(sorted(items))  # a map's (key, value) pairs
        return tuple(items)
    return v


def _rows(t: pa.Table | list[dict[str, Any]], schema: pa.Schema) -> list[tuple[Any, ...]]:
    if not isinstance(t, pa.Table):  # the model's rows in the column types (a float's 32-bit value)
        t = pa.Table.from_pylist(t, schema)
    rows = t.select(schema.names).to_pylist()
    return sorted((tuple(_canon(r[c]) for c in schema.names) for r in rows), key=repr)


def _frame(spark: Any, rows: list[dict[str, Any]], schema: pa.Schema) -> Any:
    df = spark.createDataFrame(pa.Table.from_pylist(rows, schema))
    return df.withColumn("ntz", df["ntz"].cast("timestamp_ntz")) if "ntz" in schema.names else df


def _rs_read(base: str) -> pa.Table:
    return pa.Table.from_batches(list(hudi.HudiTableBuilder.from_base_uri(base).build().read(hudi.HudiReadOptions())))


@pytest.mark.parametrize("schema", [SCHEMA, NTZ], ids=["nested", "timestamp_ntz"])
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_types_round_trip(spark, tmp_path, table_type: str, schema: pa.Schema) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(f"{table_type}/{schema.names[-1]}")
    opts = {**OPTS, "hoodie.table.type": table_type}
    base = str(tmp_path / "t")

    def row(key: str, ts: int, part: str | None = None) -> dict[str, Any]:
        r = {"key": key, "ts": ts, **{c: rng.choice(VALUES[c]) for c in schema.names[2:]}}
        return {**r, "part": part} if part else r

    held = {r["key"]: r for r in (row(f"k{i:03d}", 1) for i in range(40))}
    Table.create(base, schema, opts).write(_frame(spark, list(held.values()), schema), "insert", opts)
    made = len(held)
    for ts in range(2, 6):  # upserts and deletes: log blocks on MOR, compacted after every third deltacommit
        batch = [row(k, ts, held[k]["part"]) for k in rng.sample(sorted(held), 15)]
        batch += [row(f"k{made + j:03d}", ts) for j in range(8)]
        made += 8
        Table.open(base).write(_frame(spark, batch, schema), "upsert", opts)
        held.update((r["key"], r) for r in batch)
        gone = rng.sample(sorted(held), 4)
        Table.open(base).write(_frame(spark, [held[k] for k in gone], schema), "delete", opts)
        for k in gone:
            del held[k]
        want = _rows(list(held.values()), schema)
        assert _rows(Table.open(base).to_arrow(), schema) == want, f"pyhudi, upsert {ts}"
        assert _rows(spark.read.format("hudi").load(base).toArrow(), schema) == want, f"Spark, upsert {ts}"
        if schema is SCHEMA:
            assert _rows(_rs_read(base), schema) == want, f"hudi-rs, upsert {ts}"
    actions = [i.action for i in Table.open(base).timeline().completed_commits()]
    if table_type == "MERGE_ON_READ":
        assert "commit" in actions and "deltacommit" in actions  # log blocks written and compacted
    report = validate_table(Table.open(base))
    assert report.ok, report.to_dict()


def test_a_map_with_a_key_twice_is_refused_by_a_log_write(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Spark keeps a map's duplicate keys (as Arrow handed them); an Avro map cannot hold them, so a merge-on-read
    update fails, naming the column, the record key and the map key: no reader sees it, nothing completes, and the next write rolls it back."""
    schema = pa.schema([("key", pa.string()), ("ts", pa.int64()), ("part", pa.string()),
                        ("m", pa.map_(pa.string(), pa.int32()))])
    opts = {**OPTS, "hoodie.table.type": "MERGE_ON_READ"}
    base = str(tmp_path / "t")
    first = [{"key": "a", "ts": 1, "part": "p1", "m": [("x", 1)]}]
    Table.create(base, schema, opts).write(spark.createDataFrame(pa.Table.from_pylist(first, schema)), "insert", opts)
    before = _rows(_rs_read(base), schema)
    completed = [i.requested_time for i in Table.open(base).timeline().completed_commits()]
    dup = [{"key": "a", "ts": 2, "part": "p1", "m": [("x", 1), ("x", 2)]}]
    with pytest.raises(PyHudiError, match=r"column 'm' of record key 'a': a map value holds a key twice.*'x'"):
        Table.open(base).write(spark.createDataFrame(pa.Table.from_pylist(dup, schema)), "upsert", opts)
    assert _rows(_rs_read(base), schema) == before == _rows(Table.open(base).to_arrow(), schema)
    assert [i.requested_time for i in Table.open(base).timeline().completed_commits()] == completed
    fixed = [{"key": "a", "ts": 3, "part": "p1", "m": [("x", 2)]}]
    Table.open(base).write(spark.createDataFrame(pa.Table.from_pylist(fixed, schema)), "upsert", opts)
    assert _rows(_rs_read(base), schema) == _rows(fixed, schema) == _rows(Table.open(base).to_arrow(), schema)
    assert all(i.is_completed for i in Table.open(base).timeline())  # the failed write rolled back
    report = validate_table(Table.open(base))
    assert report.ok, report.to_dict()


def test_a_floating_point_ordering_field_orders_as_java_does(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Hudi compares ordering values as Java's ``Double.compareTo``: NaN above every number, -0.0 below 0.0, so
    a stored NaN outranks an update's 1.0 and a stored 0.0 an update's -0.0. The copy-on-write merge decides as
    a merge-on-read table's readers (pyhudi's and hudi-rs) do, and so does the combining of one batch's records
    of a key (Spark alone holds -0.0 equal to 0.0, and would keep the later)."""
    schema = pa.schema([("key", pa.string()), ("ts", pa.float64()), ("part", pa.string()), ("v", pa.string())])
    nan = float("nan")
    stored = {"a": nan, "b": 0.0, "c": -0.0, "d": 1.0, "e": nan}
    update = {"a": 1.0, "b": -0.0, "c": 0.0, "d": nan, "e": nan}
    kept = {"a", "b"}  # the stored record is greater; a tie (e) goes to the update
    got = {}
    for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
        opts = {**OPTS, "hoodie.table.type": table_type}
        base = str(tmp_path / table_type)

        def frame(ts: dict[str, float] | list[tuple[str, float]], v: str) -> Any:
            rows = [{"key": k, "ts": x, "part": "p1", "v": v} for k, x in (ts.items() if isinstance(ts, dict) else ts)]
            return spark.createDataFrame(pa.Table.from_pylist(rows, schema))

        Table.create(base, schema, opts).write(frame(stored, "old"), "insert", opts)
        Table.open(base).write(frame(update, "new"), "upsert", opts)
        # one batch, two records of a key each: the greater in Java's order wins, whichever comes last
        Table.open(base).write(frame([("f", 0.0), ("f", -0.0), ("g", 1.0), ("g", nan)], "batch"), "upsert", opts)
        for reader, t in (("pyhudi", Table.open(base).to_arrow()), ("hudi-rs", _rs_read(base))):
            got[table_type, reader] = sorted((r["key"], repr(r["ts"]), r["v"]) for r in t.to_pylist())
    want = sorted([(k, repr(stored[k]), "old") if k in kept else (k, repr(update[k]), "new") for k in stored]
                  + [("f", "0.0", "batch"), ("g", "nan", "batch")])
    assert all(g == want for g in got.values()), got

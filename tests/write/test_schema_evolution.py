"""Schema evolution (issue 22): writes that add columns, promote types and reconcile inputs lacking columns, on a
copy-on-write table, checked against a plain Python model; old files read through the latest schema by every read
path; incompatible changes refused with nothing written.

The model keeps each stored record as the dict it was written with (a column the input did not carry is absent)
and an expected schema, evolved by the rules Hudi documents (independently of pyhudi's code): new columns come
after the table's, in the input's order, nullable; int -> long/double, long -> double promote a column; an input narrower than the table is promoted (bytes into a string column are converted to strings, as
Hudi's canonicalization does); a column the input lacks is null (reconcile). A value read
through a schema is the stored value converted to that schema's type (int -> float, str -> UTF-8 bytes), None when
the record has no such column.

hudi-rs reads the latest snapshot exactly as the model after every write; for time travel it reads with the
latest schema (pyhudi, as Hudi's Spark reader, with the schema of the instant), so its rows are compared on the
instant's columns with the latest types.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pyhudi.errors import ConfigError, InvalidInputError, UnsupportedTableError
from pyhudi.table.schema import avro_to_arrow, commit_schema_json
from pyhudi.table.table import Table
from tests.support.model import Model, Spec
from tests.support.tree import snapshot as tree
from tests.support.workload import hudi_rs_read as hudi_rs

hudi = pytest.importorskip("hudi")

pytestmark = [pytest.mark.spark]

SPEC = Spec(("id",), ("dt",), global_index=True, update_partition_path=False)
OPTS = {**SPEC.options("evo"), "hoodie.index.type": "RECORD_INDEX",
        "hoodie.record.index.update.partition.path": "false"}
DATES = ["2026/11/21", "2026/11/22"]
S0 = [("id", pa.string()), ("ts", pa.int64()), ("dt", pa.string()), ("a", pa.int32()), ("b", pa.string())]


def convert(v: Any, t: pa.DataType) -> Any:
    """A stored value as read through type ``t``."""
    if v is None:
        return None
    if pa.types.is_floating(t) and isinstance(v, int):
        return float(v)
    if pa.types.is_binary(t) and isinstance(v, str):
        return v.encode()
    if pa.types.is_string(t) and isinstance(v, bytes):
        return v.decode()
    return v


def expected(rows: dict[tuple[str, str], tuple[dict[str, Any], str]], schema: list[tuple[str, pa.DataType]],
             types: dict[str, pa.DataType] | None = None, only: set[str] | None = None) -> list[tuple[Any, ...]]:
    types = types or dict(schema)
    out = [
        (rk, pp, *(convert(r.get(c), types[c]) for c, _ in schema))
        for (pp, rk), (r, t) in rows.items() if only is None or t in only
    ]
    return sorted(out, key=repr)


def got(t: pa.Table, schema: list[tuple[str, pa.DataType]]) -> list[tuple[Any, ...]]:
    if not t.num_columns or not t.num_rows:
        return []
    cols = ["_hoodie_record_key", "_hoodie_partition_path", *(c for c, _ in schema)]
    return sorted(zip(*(t.column(c).to_pylist() for c in cols), strict=True), key=repr)


class Workload:
    """Batches of upserts, inserts and deletes whose input schema evolves as the step says."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.next_id = 0

    def value(self, t: pa.DataType, step: int) -> Any:
        rng = self.rng
        if rng.random() < 0.1:
            return None
        if pa.types.is_integer(t):
            return rng.randrange(-(2**31), 2**31 - 1)
        if pa.types.is_floating(t):
            return round(rng.uniform(-1e6, 1e6), 3)
        if pa.types.is_binary(t):
            return f"b{step}-{rng.randrange(1000)}".encode()
        return f"s{step}-{rng.randrange(10**6)}"

    def row(self, schema: list[tuple[str, pa.DataType]], step: int, key: dict[str, Any] | None = None) -> dict:
        if key is None:
            self.next_id += 1
            key = {"id": f"k{self.next_id:04d}", "dt": self.rng.choice(DATES)}
        r: dict[str, Any] = {"id": key["id"], "dt": key["dt"], "ts": step * 1000 + self.rng.randrange(900)}
        for c, t in schema:
            if c not in r:
                r[c] = self.value(t, step)
        return r


# step -> (operation, evolution): "add:<name>:<type>", "promote:<col>:<type>", "narrow:<col>" (input sends the
# column's original narrower type), "asbytes:<col>" (input sends a string column as bytes), "drop:<col>" (input
# lacks it; reconcile), "" (none)
TYPES = {"int32": pa.int32(), "int64": pa.int64(), "float64": pa.float64(), "string": pa.string(),
         "binary": pa.binary()}
STEPS = [
    ("insert", ""),
    ("upsert", "add:c1:string,promote:a:int64"),
    ("delete", ""),
    ("upsert", "add:c2:float64,narrow:a,drop:c1"),
    ("upsert", "promote:a:float64,asbytes:b"),
    ("insert", "add:c3:int32"),
]

@pytest.mark.slow
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_evolving_writes_read_back_by_every_reader(spark, tmp_path: Path, table_type: str) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "evo")
    work = Workload(22)
    rng = work.rng
    schema = list(S0)  # the expected table schema
    base_opts = {**OPTS, "hoodie.datasource.write.table.type": table_type}
    mor = table_type == "MERGE_ON_READ"
    # hudi-rs 0.5 refuses a merge-on-read log block whose column type was promoted since: it is compared until then
    promoted = False
    table = Table.create(path, pa.schema(schema), base_opts)
    model = Model(SPEC, ())
    schemas: dict[str, list[tuple[str, pa.DataType]]] = {}
    instants: list[str] = []
    for step, (op, evolution) in enumerate(STEPS):
        input_schema = list(schema)
        opts = dict(base_opts)
        for ev in filter(None, evolution.split(",")):
            kind, col, *rest = ev.split(":")
            if kind == "add":
                schema.append((col, TYPES[rest[0]]))
                input_schema.append((col, TYPES[rest[0]]))
            elif kind == "promote":
                promoted = True
                schema = [(c, TYPES[rest[0]] if c == col else t) for c, t in schema]
                input_schema = [(c, TYPES[rest[0]] if c == col else t) for c, t in input_schema]
            elif kind == "asbytes":  # bytes into a string column: converted to the table's type (Hudi's)
                input_schema = [(c, pa.binary() if c == col else t) for c, t in input_schema]
            elif kind == "narrow":
                input_schema = [(c, pa.int32() if c == col else t) for c, t in input_schema]
            elif kind == "drop":
                input_schema = [(c, t) for c, t in input_schema if c != col]
                opts["hoodie.datasource.write.reconcile.schema"] = "true"
        stored = model.stored_rows()
        if op == "insert":
            batch = [work.row(input_schema, step) for _ in range(rng.randint(20, 50))]
        elif op == "delete":
            batch = [work.row(input_schema, step, r) for r in rng.sample(stored, min(len(stored), 8))]
        else:
            batch = [work.row(input_schema, step, r) for r in rng.sample(stored, min(len(stored), 25))]
            batch += [work.row(input_schema, step) for _ in range(rng.randint(5, 15))]
        cols = [c for c, _ in input_schema]
        rng.shuffle(cols)  # the input's column order does not place the table's columns
        arrow = pa.Table.from_pylist(batch, schema=pa.schema([(c, dict(input_schema)[c]) for c in cols]))
        res = table.write(spark.createDataFrame(arrow), op, opts)
        model.apply(op, batch, res.instant)
        instants.append(res.instant)
        schemas[res.instant] = list(schema)
        where = f"step {step} ({op}, {evolution or 'same schema'}, {res.instant})"

        assert [(f.name, f.type) for f in table.schema()] == schema, where
        want = expected(model.rows, schema)
        if not (mor and promoted):
            assert got(hudi_rs(path), schema) == want, f"{where}: hudi-rs"
        assert got(table.to_arrow(), schema) == want, f"{where}: to_arrow"
        keys = [rk for (_, rk) in list(model.rows)[:5]] + ["nope"]
        assert got(table.read_keys(keys), schema) == [w for w in want if w[0] in keys], f"{where}: read_keys"
    # the record index follows every key, whatever the schema did
    found = table.lookup([rk for _, rk in model.rows])
    assert all(found.column("found").to_pylist())
    assert dict(zip(found.column("key").to_pylist(), found.column("partition").to_pylist(), strict=True)) == {
        rk: pp for pp, rk in model.rows}

    # the Spark reader, time travel with each instant's schema, incremental reads with the latest
    assert got(table.read(spark).toArrow(), schema) == expected(model.rows, schema)
    history = dict(model.history)
    latest = dict(schema)
    for inst in instants:
        s = schemas[inst]
        at = table.to_arrow(as_of=inst)
        assert [(f.name, f.type) for f in at.schema][5:] == s, inst
        assert got(at, s) == expected(history[inst], s), f"to_arrow as of {inst}"
        if not mor:
            assert got(hudi_rs(path, as_of=inst), s) == expected(history[inst], s, latest), f"hudi-rs as of {inst}"
    mid = instants[len(instants) // 2]
    assert got(table.read(spark, as_of=mid).toArrow(), schemas[mid]) == expected(history[mid], schemas[mid])
    commits = list(table.timeline().completed_commits())
    # the writes' own commits (a merge-on-read table's inline compaction commits too, and reads of a window that
    # holds only a compaction are empty, as Hudi's)
    bounds = ["00000000000000000"] + [c.completion_time or "" for c in commits if c.requested_time in instants]
    for i, inst in enumerate(instants):
        want = expected(history[inst], schema, only={inst})
        assert got(table.incremental_arrow(bounds[i], bounds[i + 1]), schema) == want, f"incremental {inst}"
        if not mor:
            assert got(hudi_rs(path, start=bounds[i], end=bounds[i + 1]), schema) == want, f"hudi-rs incr {inst}"
    if mor:  # the deltacommits appended log files, and the inline compaction ran (5 deltacommits)
        assert any(".log." in p.name for p in Path(path).rglob(".*") if ".hoodie" not in p.parts)
        assert any(c.action == "commit" for c in commits)


# -- refusals -------------------------------------------------------------------------------------------------
REFUSAL_SCHEMA = pa.schema([pa.field("id", pa.string()), pa.field("ts", pa.int64()), pa.field("dt", pa.string()),
                            pa.field("d", pa.float64()), pa.field("req", pa.int32(), nullable=False),
                            pa.field("st", pa.struct([("x", pa.int32())]))])


def _rows(n: int) -> list[dict[str, Any]]:
    return [{"id": f"r{i}", "ts": i, "dt": DATES[0], "d": i / 2, "req": i, "st": {"x": i}} for i in range(n)]


@pytest.fixture(scope="module")
def refusal_table(spark, tmp_path_factory) -> str:  # type: ignore[no-untyped-def]
    base = str(tmp_path_factory.mktemp("evo_refuse") / "t")
    t = Table.create(base, REFUSAL_SCHEMA, OPTS)
    t.write(spark.createDataFrame(pa.Table.from_pylist(_rows(4), schema=REFUSAL_SCHEMA)), "insert", OPTS)
    return base


def _change(col: str, field: pa.Field | None, values: pa.Array | None = None) -> pa.Table:
    """Two rows of the table's schema with column ``col`` removed (``field`` None) or replaced by ``field`` (its
    values cast, or ``values``)."""
    t = pa.Table.from_pylist(_rows(2), schema=REFUSAL_SCHEMA)
    i = t.schema.get_field_index(col)
    if field is None:
        return t.remove_column(i)
    return t.set_column(i, field, values if values is not None else t.column(col).cast(field.type))


REFUSALS = {
    "unresolvable_bool": (lambda: _change("d", pa.field("d", pa.bool_()), pa.array([True, False])), {},
                          r"column 'd' is bool in the input but double in the table: Avro schema resolution cannot"),
    "unresolvable_type": (lambda: _change("ts", pa.field("ts", pa.string())), {},
                          r"column 'ts' is string in the input but int64 in the table"),
    "struct_to_scalar": (lambda: _change("st", pa.field("st", pa.string()), pa.array(["a", "b"])), {},
                         r"column 'st' is string in the input but struct<x: int32> in the table"),
    "dropped_column": (lambda: _change("d", None), {}, r"input lacks table column\(s\) d \(a column cannot be "
                                                       r"dropped without schema-on-read"),
    "dropped_non_nullable_reconciled": (lambda: _change("req", None),
                                        {"hoodie.datasource.write.reconcile.schema": "true"},
                                        r"column 'req' is missing from the input and is not nullable"),
    # Spark resolves names ignoring case: a column beside one that differs only in case could not be queried
    "column_differing_in_case": (lambda: _change("d", pa.field("D", pa.float64())),
                                 {"hoodie.datasource.write.reconcile.schema": "true"},
                                 r"columns 'd' and 'D' differ only in case"),
    "nested_field_differing_in_case": (lambda: _change("st", pa.field("st", pa.struct([("x", pa.int32()),
                                                                                    ("X", pa.int32())]))), {},
                                       r"columns 'st\.x' and 'st\.X' differ only in case"),
    "schema_on_read_option": (lambda: _change("d", None), {"hoodie.schema.on.read.enable": "true"},
                              r"hoodie\.schema\.on\.read\.enable='true' is not supported: schema-on-read"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_incompatible_change_refused_nothing_written(spark, refusal_table: str, case: str) -> None:  # type: ignore[no-untyped-def]
    make, extra, pattern = REFUSALS[case]
    before = tree(Path(refusal_table))
    schema_before = Table.open(refusal_table).schema()
    with pytest.raises((InvalidInputError, ConfigError)) as info:
        Table.open(refusal_table).write(spark.createDataFrame(make()), "upsert", {**OPTS, **extra})
    assert re.search(pattern, str(info.value)), str(info.value)
    assert tree(Path(refusal_table)) == before
    assert Table.open(refusal_table).schema() == schema_before


def test_a_table_of_columns_differing_in_case_is_not_created(tmp_path: Path) -> None:
    schema = pa.schema([*S0, ("B", pa.string())])
    with pytest.raises(InvalidInputError, match=r"columns 'b' and 'B' differ only in case"):
        Table.create(str(tmp_path / "t"), schema, OPTS)
    assert not (tmp_path / "t").exists()


def test_nested_field_added_and_promoted(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A struct field added (after the struct's fields) and one promoted: old rows read with null / cast."""
    base = str(tmp_path / "nested")
    t = Table.create(base, REFUSAL_SCHEMA, OPTS)
    t.write(spark.createDataFrame(pa.Table.from_pylist(_rows(4), schema=REFUSAL_SCHEMA)), "insert", OPTS)
    st2 = pa.struct([("y", pa.string()), ("x", pa.int64())])
    schema2 = pa.schema([f if f.name != "st" else pa.field("st", st2) for f in REFUSAL_SCHEMA])
    rows2 = [{"id": "r1", "ts": 9, "dt": DATES[1], "d": 0.5, "req": 1, "st": {"y": "Y", "x": 2**40}},
             {"id": "n1", "ts": 9, "dt": DATES[1], "d": None, "req": 7, "st": None}]
    t.write(spark.createDataFrame(pa.Table.from_pylist(rows2, schema=schema2)), "upsert", OPTS)
    want_st = pa.struct([("x", pa.int64()), ("y", pa.string())])
    assert t.schema().field("st").type == want_st
    want = {"r0": {"x": 0, "y": None}, "r1": {"x": 2**40, "y": "Y"}, "r2": {"x": 2, "y": None},
            "r3": {"x": 3, "y": None}, "n1": None}
    for reader in (t.to_arrow(), hudi_rs(base)):
        assert dict(zip(reader.column("id").to_pylist(), reader.column("st").to_pylist(), strict=True)) == want
    # a narrower nested field (int16, an Avro int) is promoted to the table's long; a field the input lacks is an
    # error naming it
    st3 = pa.struct([("x", pa.int16()), ("y", pa.string())])
    rows3 = [{"id": "r2", "ts": 10, "dt": DATES[0], "d": 1.0, "req": 2, "st": {"x": 5, "y": "z"}}]
    schema3 = pa.schema([f if f.name != "st" else pa.field("st", st3) for f in REFUSAL_SCHEMA])
    t.write(spark.createDataFrame(pa.Table.from_pylist(rows3, schema=schema3)), "upsert", OPTS)
    assert t.schema().field("st").type == want_st
    assert {r["id"]: r["st"] for r in hudi_rs(base).select(["id", "st"]).to_pylist()}["r2"] == {"x": 5, "y": "z"}
    before = tree(Path(base))
    with pytest.raises(InvalidInputError, match=r"input lacks table column\(s\) st\.y "):
        t.write(spark.createDataFrame(pa.Table.from_pylist(_rows(1), schema=REFUSAL_SCHEMA)), "upsert", OPTS)
    assert tree(Path(base)) == before


def test_commit_schema_is_written_as_hudi_writes_it(mdt_tables: dict[str, Path]) -> None:
    """The txns fixture (Hudi 1.1.1): its commits' schema, rebuilt from its create schema, byte for byte."""
    base = mdt_tables["cow_v9_txns_simple_meta.zip"]
    t = Table.open(str(base))
    tl = t.timeline()
    inst = list(tl.completed_commits())[-1]
    theirs = tl.read_commit_metadata(inst)["extraMetadata"]["schema"]
    ours = commit_schema_json(avro_to_arrow(t.config.create_schema), t.name)
    assert json.loads(ours) == json.loads(theirs)
    assert ours == theirs


def test_schema_on_read_table_refused(mdt_tables: dict[str, Path], tmp_path: Path) -> None:
    """A table whose .hoodie/.schema holds the history of a completed commit while its commits record no
    InternalSchema is refused by reads (which files hold renamed columns is unknown) and writes, naming the table
    and the feature; the fixtures' empty .schema folders are not."""
    import shutil

    src = mdt_tables["cow_v9_txns_simple_meta.zip"]
    assert (src / ".hoodie" / ".schema").is_dir() and not any((src / ".hoodie" / ".schema").iterdir())
    base = tmp_path / "sor"
    shutil.copytree(src, base)
    (base / ".hoodie" / ".schema" / "20260307162456179.schemacommit").write_text('{"schemas":[]}')
    t = Table.open(str(base))
    for attempt in (t.to_arrow, t.schema, lambda: t.read_keys(["TXN-001"]),
                    lambda: t.check_writable("a write (upsert)")):
        with pytest.raises(UnsupportedTableError, match=rf"{re.escape(str(base))} uses schema-on-read evolution"):
            attempt()


# -- concurrent writers ---------------------------------------------------------------------------------------
OCC_OPTS = {**OPTS, "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"}
CC_SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("dt", pa.string()), ("v", pa.float64())])


def _cc_rows(ids: list[int], dt: str, ts: int, **extra: str) -> pa.Table:
    t = pa.Table.from_pylist([{"id": f"k{i}", "ts": ts, "dt": dt, "v": float(i)} for i in ids], schema=CC_SCHEMA)
    for name, val in extra.items():
        t = t.append_column(name, pa.array([val] * len(ids), pa.string()))
    return t


@pytest.mark.parametrize("a_evolves", [False, True], ids=["other_keeps_schema", "both_evolve"])
def test_concurrent_schema_change(spark, tmp_path: Path, a_evolves: bool) -> None:  # type: ignore[no-untyped-def]
    """Writer B adds column c and commits while writer A (another partition, so no file-group conflict) is between
    its data files and its commit. A that kept the schema commits with B's schema (c stays in the table); A that
    evolved it too is rolled back, nothing of it visible."""
    from pyhudi import faults
    from pyhudi.errors import ConcurrentSchemaConflict

    base = str(tmp_path / "cc")
    t = Table.create(base, CC_SCHEMA, OCC_OPTS)
    t.write(spark.createDataFrame(pa.concat_tables([_cc_rows([1, 2], DATES[0], 1), _cc_rows([3, 4], DATES[1], 1)])),
            "insert", OCC_OPTS)
    ran: list[str] = []

    def b_commits(point: str) -> None:
        if ran:
            return
        ran.append(point)
        Table.open(base).write(spark.createDataFrame(_cc_rows([3], DATES[1], 2, c="B")), "upsert", OCC_OPTS)

    a_input = _cc_rows([1], DATES[0], 2, **({"d": "A"} if a_evolves else {}))
    with faults.inject("before_commit", b_commits):
        if a_evolves:
            with pytest.raises(ConcurrentSchemaConflict, match="changed it too"):
                Table.open(base).write(spark.createDataFrame(a_input), "upsert", OCC_OPTS)
        else:
            Table.open(base).write(spark.createDataFrame(a_input), "upsert", OCC_OPTS)
    assert ran
    t = Table.open(base)
    assert t.schema().names == ["id", "ts", "dt", "v", "c"]
    want = {"k1": (2 if not a_evolves else 1, None), "k2": (1, None), "k3": (2, "B"), "k4": (1, None)}
    for r in (t.to_arrow(), hudi_rs(base)):
        assert {x["id"]: (x["ts"], x["c"]) for x in r.select(["id", "ts", "c"]).to_pylist()} == want
    assert all(i.is_completed for i in t.timeline())


@pytest.mark.parametrize("meanwhile", ["later_writer", "compaction"])
def test_a_column_added_while_a_later_instant_completes_is_retried(spark, tmp_path: Path, meanwhile: str) -> None:  # type: ignore[no-untyped-def]
    """Writer A adds column d and, between its data files and its commit, a commit with a later instant completes
    with the old schema: a writer B that began after A, or a compaction of a merge-on-read table. Readers (pyhudi,
    hudi-rs, Hudi's) take the schema of the latest instant, so committed A's column would be read by none (it was:
    d vanished from the table). A fails with ConcurrentSchemaConflict and is rolled back; retried, it commits d."""
    from pyhudi import faults
    from pyhudi.errors import ConcurrentSchemaConflict

    mor = meanwhile == "compaction"
    opts = {**OCC_OPTS, **({"hoodie.table.type": "MERGE_ON_READ", "hoodie.compact.inline": "false"} if mor else {})}
    base = str(tmp_path / "cc")
    t = Table.create(base, CC_SCHEMA, opts)
    t.write(spark.createDataFrame(pa.concat_tables([_cc_rows([1, 2], DATES[0], 1), _cc_rows([3, 4], DATES[1], 1)])),
            "insert", opts)
    if mor:  # a log file in the other partition, for the compaction
        Table.open(base).write(spark.createDataFrame(_cc_rows([3], DATES[1], 2)), "upsert", opts)
    ran: list[str] = []

    def other_completes(point: str) -> None:
        if ran:
            return
        ran.append(point)
        if mor:
            assert Table.open(base).compact(opts, spark=spark)
        else:
            Table.open(base).write(spark.createDataFrame(_cc_rows([3], DATES[1], 2)), "upsert", opts)

    a_input = spark.createDataFrame(_cc_rows([1], DATES[0], 2, d="A"))
    with faults.inject("before_commit", other_completes), pytest.raises(
            ConcurrentSchemaConflict, match="a commit with a later instant, completed meanwhile"):
        Table.open(base).write(a_input, "upsert", opts)
    assert ran
    assert Table.open(base).schema().names == ["id", "ts", "dt", "v"]
    assert all(i.is_completed for i in Table.open(base).timeline())
    Table.open(base).write(a_input, "upsert", opts)  # the retry
    t = Table.open(base)
    assert t.schema().names == ["id", "ts", "dt", "v", "d"]
    want = {"k1": (2, "A"), "k2": (1, None), "k3": (2, None), "k4": (1, None)}
    for r in (t.to_arrow(), hudi_rs(base)):
        assert {x["id"]: (x["ts"], x["d"]) for x in r.select(["id", "ts", "d"]).to_pylist()} == want


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_key_or_partition_column_of_another_type_is_refused(spark, tmp_path: Path, table_type: str) -> None:  # type: ignore[no-untyped-def]
    """A record key is the text of its values: a key column given as double (``1.0``) where the table holds ints
    (``1``) would make an upsert store the key twice and a delete find nothing, silently; a partition column so
    changed would move records to other paths. Such writes, deletes too, are refused before anything is written;
    int -> long writes the same text and is taken (the record is updated in place)."""
    s = pa.schema([("id", pa.int32()), ("p", pa.int32()), ("ts", pa.int64()), ("v", pa.string())])
    opts = {"hoodie.table.name": "keys", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p", "hoodie.table.ordering.fields": "ts",
            "hoodie.table.type": table_type}
    base = str(tmp_path / "t")
    Table.create(base, s, opts).write(spark.createDataFrame(pa.Table.from_pylist(
        [{"id": i, "p": i % 2, "ts": 1, "v": f"v{i}"} for i in (1, 2, 3)], s)), "insert", opts)
    before = tree(base)

    def batch(column: str, t: pa.DataType) -> Any:
        schema = s.set(s.get_field_index(column), pa.field(column, t))
        return spark.createDataFrame(pa.Table.from_pylist([{"id": 1, "p": 1, "ts": 2, "v": "new"}], schema))

    for column in ("id", "p"):
        for op in ("upsert", "delete"):
            with pytest.raises(InvalidInputError, match=rf"column '{column}' is a record key or partition field, "
                                                        r"double in the input but int32 in the table"):
                Table.open(base).write(batch(column, pa.float64()), op, opts)
            assert tree(base) == before
    Table.open(base).write(batch("id", pa.int64()), "upsert", opts)
    got = {r["_hoodie_record_key"]: r["v"] for r in hudi_rs(base).to_pylist()}
    assert got == {"1": "new", "2": "v2", "3": "v3"}

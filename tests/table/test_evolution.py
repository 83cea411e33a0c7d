"""The writer-schema rules of pyhudi.table.evolution (Hudi's default schema evolution) and the conversion of data
to a schema, without Spark."""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pytest

from pyhudi.errors import InvalidInputError
from pyhudi.table.evolution import (
    check_schema_names,
    check_unique_names,
    conform_array,
    conform_table,
    writer_schema,
)
from pyhudi.table.schema import avro_schema_json, commit_schema_json

TABLE = pa.schema([pa.field("id", pa.string(), nullable=False), pa.field("n", pa.int32()), pa.field("f", pa.float32()),
                   pa.field("s", pa.string()), pa.field("st", pa.struct([("x", pa.int32()), ("y", pa.string())]))])


def evolve(incoming: pa.Schema, reconcile: bool = False) -> pa.Schema:
    return writer_schema(TABLE, incoming, reconcile=reconcile, where="w")


def test_same_schema_in_any_order_is_the_table_schema() -> None:
    shuffled = pa.schema([TABLE.field(i) for i in (4, 2, 0, 3, 1)])
    assert evolve(shuffled) == TABLE


def test_new_columns_after_the_tables_in_input_order_nullable() -> None:
    incoming = pa.schema([pa.field("z", pa.int64(), nullable=False), *TABLE, pa.field("a", pa.string())])
    out = evolve(incoming)
    assert out.names == [*TABLE.names, "z", "a"]
    assert out.field("z").nullable and out.field("z").type == pa.int64()


def test_promotions_widen_the_table_narrower_inputs_are_promoted() -> None:
    incoming = pa.schema([TABLE.field("id"), pa.field("n", pa.float64()), pa.field("f", pa.float64()),
                          pa.field("s", pa.binary()), pa.field("st", pa.struct([("x", pa.int16()), ("y", pa.string())]))])
    out = evolve(incoming)
    assert out.field("n").type == pa.float64() and out.field("f").type == pa.float64()
    assert out.field("s").type == pa.string()  # bytes into a string column: the table's type stays
    assert out.field("st").type == TABLE.field("st").type  # int16 is an Avro int
    narrower = evolve(pa.schema([*(f for f in TABLE if f.name != "f"), pa.field("f", pa.float32())]))
    assert narrower == TABLE


def test_non_nullable_becomes_nullable_never_the_reverse() -> None:
    loose = pa.schema([pa.field("id", pa.string(), nullable=True), *list(TABLE)[1:]])
    assert evolve(loose).field("id").nullable
    strict = pa.schema([*(f.with_nullable(False) if f.name == "n" else f for f in TABLE)])
    assert evolve(strict).field("n").nullable


def test_nested_fields_added_after_existing_ones() -> None:
    st = pa.struct([("new", pa.string()), ("y", pa.string()), ("x", pa.int64())])
    out = evolve(pa.schema([*(pa.field("st", st) if f.name == "st" else f for f in TABLE)]))
    assert out.field("st").type == pa.struct([("x", pa.int64()), ("y", pa.string()), ("new", pa.string())])


@pytest.mark.parametrize(("incoming", "pattern"), [
    (pa.schema(list(TABLE)[:-1]), r"input lacks table column\(s\) st \("),
    (pa.schema([*(pa.field("n", pa.string()) if f.name == "n" else f for f in TABLE)]),
     r"column 'n' is string in the input but int32 in the table: Avro schema resolution cannot"),
    (pa.schema([*(pa.field("st", pa.struct([("x", pa.int32())])) if f.name == "st" else f for f in TABLE)]),
     r"input lacks table column\(s\) st\.y "),
    (pa.schema([*(pa.field("st", pa.struct([("x", pa.bool_()), ("y", pa.string())])) if f.name == "st" else f
                  for f in TABLE)]), r"column 'st\.x' is bool in the input but int32"),
    (pa.schema([*(pa.field("s", pa.list_(pa.string())) if f.name == "s" else f for f in TABLE)]),
     r"column 's' is list<item: string> in the input but string in the table"),
    (pa.schema([*(pa.field("n", pa.date32()) if f.name == "n" else f for f in TABLE)]),
     r"column 'n' is date32\[day\] in the input but int32"),
])
def test_incompatible_inputs_name_the_column(incoming: pa.Schema, pattern: str) -> None:
    with pytest.raises(InvalidInputError, match=pattern):
        evolve(incoming)


def test_reconcile_keeps_missing_nullable_columns() -> None:
    without_s = pa.schema([f for f in TABLE if f.name != "s"] + [pa.field("new", pa.int64())])
    out = evolve(without_s, reconcile=True)
    assert out.names == [*TABLE.names, "new"]  # table order, new column last: nothing dropped
    with pytest.raises(InvalidInputError, match=r"column 'id' is missing from the input and is not nullable"):
        evolve(pa.schema(list(TABLE)[1:]), reconcile=True)
    # no missing column: Hudi's reconciliation keeps the incoming order
    shuffled = pa.schema([TABLE.field(i) for i in (4, 2, 0, 3, 1)])
    assert evolve(shuffled, reconcile=True).names == shuffled.names


def test_conform_fills_missing_and_converts_as_avro() -> None:
    old = pa.table({"id": ["a", None], "n": pa.array([2**31 - 1, None], pa.int32()),
                    "st": pa.array([{"x": 1}, None], pa.struct([("x", pa.int32())])),
                    "l": pa.array([[1, 2], None], pa.list_(pa.int32()))})
    target = pa.schema([("id", pa.string()), ("n", pa.float32()), ("gone", pa.string()),
                        ("st", pa.struct([("x", pa.int64()), ("y", pa.string())])), ("l", pa.list_(pa.float64()))])
    out = conform_table(old.slice(0, 2), target, "w")
    assert out.schema == target
    assert out.to_pylist() == [
        {"id": "a", "n": 2147483648.0, "gone": None, "st": {"x": 1, "y": None}, "l": [1.0, 2.0]},  # rounds as Java
        {"id": None, "n": None, "gone": None, "st": None, "l": None},
    ]
    with pytest.raises(InvalidInputError, match=r"column 'b' is binary, cannot be read as string"):
        conform_array(pa.array([b"\xff"]), pa.string(), "w", "b")


def test_commit_schema_is_null_first_with_defaults() -> None:
    s = pa.schema([pa.field("id", pa.string(), nullable=False), pa.field("l", pa.list_(pa.int32())),
                   pa.field("st", pa.struct([("x", pa.int64())]))])
    assert json.loads(avro_schema_json(s, "t"))["fields"][1] == {
        "name": "l", "type": [{"type": "array", "items": ["int", "null"]}, "null"]}
    assert json.loads(commit_schema_json(s, "t"))["fields"] == [
        {"name": "id", "type": "string"},
        {"name": "l", "type": ["null", {"type": "array", "items": ["null", "int"]}], "default": None},
        {"name": "st", "type": ["null", {"type": "record", "name": "st", "namespace": "hoodie.t.t_record",
                                         "fields": [{"name": "x", "type": ["null", "long"], "default": None}]}],
         "default": None},
    ]


def test_names_differing_only_in_case() -> None:
    """A write may not introduce a name that differs only in case from another (at any depth, new columns'
    fields too); a table that already holds such a pair (written by Hudi) stays writable."""
    table = pa.schema([("id", pa.string()), ("val", pa.int32()), ("Val", pa.int32())])
    assert writer_schema(table, table, reconcile=False, where="w") == table
    for added in [pa.field("VAL", pa.int32()), pa.field("st", pa.struct([("x", pa.int32()), ("X", pa.int32())])),
                  pa.field("ls", pa.list_(pa.struct([("y", pa.int32()), ("Y", pa.int32())])))]:
        with pytest.raises(InvalidInputError, match="differ only in case"):
            writer_schema(table, pa.schema([*table, added]), reconcile=False, where="w")


@pytest.mark.parametrize(("schema", "name"), [
    (pa.schema([("id", pa.string()), ("v", pa.int32()), ("v", pa.int64())]), "v"),
    (pa.schema([("st", pa.struct([("x", pa.int32()), ("x", pa.int32())]))]), "st.x"),
    (pa.schema([("ls", pa.list_(pa.struct([("y", pa.int32()), ("y", pa.int32())])))]), "ls.element.y"),
    (pa.schema([("m", pa.map_(pa.string(), pa.struct([("z", pa.int32()), ("z", pa.int32())])))]), "m.value.z"),
])
def test_a_name_held_twice_is_refused(schema: pa.Schema, name: str) -> None:
    """A record holding one name twice (a Spark DataFrame may) is refused at any depth, naming it, for a new table
    too; names that differ only in case are :func:`check_distinct_names`'s concern."""
    for check in (check_unique_names, check_schema_names):
        with pytest.raises(InvalidInputError, match=rf"w: column '{re.escape(name)}' appears twice.*nothing was written"):
            check(schema, "w")
    check_unique_names(pa.schema([("v", pa.int32()), ("V", pa.int32())]), "w")


@pytest.mark.parametrize("added", [
    pa.field("a-b", pa.int32()), pa.field("with space", pa.int32()), pa.field("1x", pa.int32()),
    pa.field("st2", pa.struct([("ok", pa.int32()), ("not.ok", pa.int32())])),
    pa.field("ls", pa.list_(pa.struct([("y-z", pa.int32())]))),
])
def test_names_avro_cannot_parse_are_refused(added: pa.Field) -> None:
    """A table's schema is Avro: a name Avro's parser refuses (Hudi's Spark writer does, and hudi-rs cannot read
    the table after) is refused when the write introduces it, at any depth; letters of any script are names."""
    with pytest.raises(InvalidInputError, match=r"not a legal Avro name.*nothing was written"):
        evolve(pa.schema([*TABLE, added]))
    fine = pa.schema([*TABLE, pa.field("größe_2", pa.int32()), pa.field("_x", pa.int32())])
    assert evolve(fine).names[-2:] == ["größe_2", "_x"]


def test_maps_with_keys_other_than_strings_are_refused() -> None:
    """Avro maps have string keys: a map of int or date keys is refused (new column, new field, and an input
    whose existing map column changed its key type), never stored with its keys turned into strings."""
    for added in [pa.field("mi", pa.map_(pa.int32(), pa.string())),
                  pa.field("st2", pa.struct([("md", pa.map_(pa.date32(), pa.int32()))]))]:
        with pytest.raises(InvalidInputError, match=r"map with .* keys.*nothing was written"):
            evolve(pa.schema([*TABLE, added]))
    table = pa.schema([*TABLE, pa.field("m", pa.map_(pa.string(), pa.int32()))])
    assert writer_schema(table, table, reconcile=False, where="w") == table
    with pytest.raises(InvalidInputError, match="column 'm' is a map with int64 keys"):
        writer_schema(table, pa.schema([*TABLE, pa.field("m", pa.map_(pa.int64(), pa.int32()))]),
                      reconcile=False, where="w")

"""Schema evolution as Hudi does it by default: the writer schema of a write, and data brought to a schema.

**Writer schema** (:func:`writer_schema`; Hudi: ``HoodieSchemaUtils.deduceWriterSchema``). The input's schema is
reconciled with the table's latest schema:

- columns (and struct fields, at any depth) the table has keep the table's order; new ones are appended after
  them in the input's order (Hudi orders the incoming schema by the table's field positions, new fields last) and
  are always nullable (rows written before they existed read as null);
- a column is nullable when the table or the input says so (non-nullable -> nullable is an evolution);
- types: the same Avro type keeps the table's type; an input narrower than the table by an Avro promotion
  (int -> long, float, double; long -> float, double; float -> double) is promoted to the table's type; an input
  wider than the table by one of them evolves the column to the input's type (old files are read through it);
  string and bytes resolve both ways, so the input is converted to the table's type (Hudi's canonicalization
  promotes the incoming type to the table's whenever it may); anything else is an error naming the column;
- a table column the input lacks is an error, unless ``hoodie.datasource.write.reconcile.schema=true``: then the
  table's column stays in the writer schema and the input's records carry null there (Hudi's reconciliation
  injects nulls for missing columns; a non-nullable column cannot be filled and stays an error). With
  reconciliation and no missing column the input's own column order is kept, as Hudi's (legacy) reconciliation
  picks the incoming schema then.

A column is never dropped: dropping or renaming needs schema-on-read evolution (``hoodie.schema.on.read.enable``),
which pyhudi does not write.

**Conforming data** (:func:`conform_array`, :func:`conform_table`): an array of one type brought to another by
name, recursively -- struct fields the data lacks are nulls, fields the target lacks are left out, promoted
types are cast as Avro's schema resolution (and Java) converts them (an int or long to a float or double rounds
to nearest; a string read as bytes is its UTF-8; bytes read as string must be valid UTF-8).

**Schema-on-read files** (:class:`FileMapping`): a base file or log block of a table that uses schema-on-read
evolution, its columns matched to the query's by InternalSchema field id rather than by name (see
:mod:`pyhudi.table.internal_schema`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from pyhudi.errors import InvalidInputError, UnsupportedTableError
from pyhudi.table.internal_schema import Array, InternalSchema, IType, Map, Record, SchemaOnRead
from pyhudi.table.schema import INPUT_META_COLUMNS, arrow_to_avro, avro_primitive

#: Avro's schema-resolution promotions: writer type -> reader types that can read it
PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}

_ALLOWED = ("allowed: new nullable columns, int -> long/float/double, long -> float/double, float -> double, "
            "string <-> bytes, non-nullable -> nullable")


_CANONICAL = {"int": pa.int32(), "long": pa.int64(), "float": pa.float32(), "double": pa.float64(),
              "string": pa.string(), "bytes": pa.binary(), "boolean": pa.bool_()}


def same_type(a: pa.DataType, b: pa.DataType) -> bool:
    """Whether two (non-nested) Arrow types are the same Avro type (int8/16/32 are all Avro ints; a timestamp
    with any time zone is ``timestamp-micros``, without one ``local-timestamp-micros``)."""
    if a == b:
        return True
    pa_, pb = avro_primitive(a), avro_primitive(b)
    if pa_ is not None or pb is not None:
        return pa_ == pb
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        return bool(a.tz) == bool(b.tz)
    return False


def _nested(t: pa.DataType) -> bool:
    return (pa.types.is_struct(t) or pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t))


class _Evolver:
    def __init__(self, reconcile: bool, where: str) -> None:
        self.reconcile = reconcile
        self.where = where

    def fail(self, path: str, what: str) -> InvalidInputError:
        return InvalidInputError(f"{self.where}: column {path!r} {what}; nothing was written")

    def fields(self, table: list[pa.Field], incoming: list[pa.Field], prefix: str) -> list[pa.Field]:
        have = {f.name: f for f in incoming}
        names = {f.name for f in table}
        missing = [f for f in table if f.name not in have]
        if missing and not self.reconcile:
            raise InvalidInputError(
                f"{self.where}: input lacks table column(s) {', '.join(prefix + f.name for f in missing)} (a column "
                "cannot be dropped without schema-on-read evolution; hoodie.datasource.write.reconcile.schema=true "
                "writes null there); nothing was written")
        for f in missing:
            path = prefix + f.name
            if not f.nullable:
                raise self.fail(path, "is missing from the input and is not nullable in the table, so "
                                      "hoodie.datasource.write.reconcile.schema cannot fill it with nulls")
        merged = {f.name: (self.field(f, have[f.name], prefix + f.name) if f.name in have else f) for f in table}
        added = [self.new_field(f, prefix) for f in incoming if f.name not in names]
        if self.reconcile and not missing:
            # Hudi's reconciliation keeps the incoming schema's order when the input is not a projection
            out = [merged[f.name] if f.name in merged else self.new_field(f, prefix) for f in incoming]
        else:
            out = [merged[f.name] for f in table] + added
        # a name the write introduces may not differ only in case from another (a Hudi-written table that already
        # holds such a pair stays writable)
        known = {f.name.lower(): f.name for f in table}
        for f in out:
            if f.name not in names:
                check_distinct_names([known.get(f.name.lower(), f.name), f.name], self.where, prefix)
                known.setdefault(f.name.lower(), f.name)
        return out

    def new_field(self, f: pa.Field, prefix: str = "") -> pa.Field:
        check_avro_name(f.name, self.where, prefix)
        check_schema_names(f.type, self.where, prefix + f.name + ".")
        return pa.field(f.name, normalize(f.type), nullable=True)

    def field(self, table: pa.Field, incoming: pa.Field, path: str) -> pa.Field:
        return pa.field(table.name, self.type(table.type, incoming.type, path),
                        nullable=table.nullable or incoming.nullable)

    def type(self, table: pa.DataType, incoming: pa.DataType, path: str) -> pa.DataType:
        if pa.types.is_struct(table) and pa.types.is_struct(incoming):
            tf = [table.field(i) for i in range(table.num_fields)]
            inf = [incoming.field(i) for i in range(incoming.num_fields)]
            return pa.struct(self.fields(tf, inf, path + "."))
        if (pa.types.is_list(table) or pa.types.is_large_list(table)) and (
                pa.types.is_list(incoming) or pa.types.is_large_list(incoming)):
            tv, iv = table.value_field, incoming.value_field
            t = self.type(tv.type, iv.type, path + ".element")
            return pa.list_(pa.field(tv.name, t, nullable=tv.nullable or iv.nullable))
        if pa.types.is_map(table) and pa.types.is_map(incoming):
            check_map_keys(incoming, self.where, path)
            tv, iv = table.item_field, incoming.item_field
            t = self.type(tv.type, iv.type, path + ".value")
            return pa.map_(table.key_type, pa.field(tv.name, t, nullable=tv.nullable or iv.nullable))
        if _nested(table) or _nested(incoming):
            raise self.fail(path, f"is {incoming} in the input but {table} in the table ({_ALLOWED})")
        if same_type(table, incoming):
            return table
        a, b = avro_primitive(incoming), avro_primitive(table)
        if a is not None and b is not None:
            if b in PROMOTIONS.get(a, ()):
                return table  # the input is promoted to the table's type
            if a in PROMOTIONS.get(b, ()):
                return _CANONICAL[a]  # the column evolves; old files are read through the wider type
        raise self.fail(path, f"is {incoming} in the input but {table} in the table: Avro schema resolution cannot "
                              f"change one into the other ({_ALLOWED})")


def _check_unique(names: list[str], where: str, prefix: str) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise InvalidInputError(
                f"{where}: column {prefix + n!r} appears twice, and a table's schema holds a name once: rename or drop "
                "one; nothing was written")
        seen.add(n)


def check_unique_names(t: pa.Schema | pa.DataType, where: str, prefix: str = "") -> None:
    """InvalidInputError when a record of ``t`` (a nested one too) holds two fields of one name: a Spark DataFrame
    may, a table's schema cannot (and no query could tell the two apart)."""
    if isinstance(t, pa.Schema) or pa.types.is_struct(t):
        fields = list(t) if isinstance(t, pa.Schema) else [t.field(i) for i in range(t.num_fields)]
        _check_unique([f.name for f in fields], where, prefix)
        for f in fields:
            check_unique_names(f.type, where, prefix + f.name + ".")
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        check_unique_names(t.value_type, where, prefix + "element.")
    elif pa.types.is_map(t):
        check_unique_names(t.item_type, where, prefix + "value.")


def check_distinct_names(names: list[str], where: str, prefix: str = "") -> None:
    """InvalidInputError when two of a record's field ``names`` differ only in case: Spark resolves column names
    ignoring case (``spark.sql.caseSensitive=false``, its default, as Hive does), so a table holding both could not
    be queried by either name."""
    seen: dict[str, str] = {}
    for n in names:
        first = seen.setdefault(n.lower(), n)
        if first != n:
            raise InvalidInputError(
                f"{where}: columns {prefix + first!r} and {prefix + n!r} differ only in case, which Spark and Hive "
                "do not tell apart when they resolve a name, so a table cannot hold both; nothing was written")


def check_avro_name(name: str, where: str, prefix: str = "") -> None:
    """InvalidInputError when a column (or struct field) ``name`` is not a legal Avro name: a table's schema is
    Avro, and Avro's parser refuses the schema of a table holding one. The rule is Avro Java's (Apache Hudi's): a
    letter or ``_``, then letters, digits and ``_``, letters of any script (hudi-rs's parser takes ASCII ones
    only)."""
    if name and (name[0].isalpha() or name[0] == "_") and all(c.isalpha() or c.isdecimal() or c == "_" for c in name):
        return
    raise InvalidInputError(
        f"{where}: column {prefix + name!r} is not a legal Avro name (a letter or '_', then letters, digits and "
        "'_'), and a Hudi table's schema is Avro: rename it (e.g. withColumnRenamed); nothing was written")


def check_map_keys(t: pa.DataType, where: str, path: str) -> None:
    """InvalidInputError when map ``t`` (column ``path``) has keys other than strings: Avro maps, and so a Hudi
    table's, have string keys only (Hudi's Spark writer refuses other keys rather than change them)."""
    if not (pa.types.is_string(t.key_type) or pa.types.is_large_string(t.key_type)):
        raise InvalidInputError(
            f"{where}: column {path!r} is a map with {t.key_type} keys, but Avro maps, and so a Hudi table's, have "
            "string keys: cast the keys to string, or store the entries as a list of structs; nothing was written")


def check_schema_names(t: pa.Schema | pa.DataType, where: str, prefix: str = "") -> None:
    """:func:`check_distinct_names` (and no name twice, :func:`check_unique_names`) and :func:`check_avro_name` for
    every record of a schema, nested ones too, and :func:`check_map_keys` for its maps."""
    if isinstance(t, pa.Schema) or pa.types.is_struct(t):
        fields = list(t) if isinstance(t, pa.Schema) else [t.field(i) for i in range(t.num_fields)]
        _check_unique([f.name for f in fields], where, prefix)
        check_distinct_names([f.name for f in fields], where, prefix)
        for f in fields:
            check_avro_name(f.name, where, prefix)
            check_schema_names(f.type, where, prefix + f.name + ".")
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        check_schema_names(t.value_type, where, prefix + "element.")
    elif pa.types.is_map(t):
        check_map_keys(t, where, prefix.rstrip("."))
        check_schema_names(t.item_type, where, prefix + "value.")


def normalize(t: pa.DataType) -> pa.DataType:
    """``t`` as pyhudi stores it (large string/binary/list as their plain forms, recursively)."""
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, normalize(f.type), nullable=f.nullable)
                          for f in (t.field(i) for i in range(t.num_fields))])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        v = t.value_field
        return pa.list_(pa.field(v.name, normalize(v.type), nullable=v.nullable))
    if pa.types.is_map(t):
        v = t.item_field
        return pa.map_(t.key_type, pa.field(v.name, normalize(v.type), nullable=v.nullable))
    return t


def writer_schema(table: pa.Schema, incoming: pa.Schema, *, reconcile: bool, where: str) -> pa.Schema:
    """The data schema (no meta columns) a write of ``incoming`` into a table of schema ``table`` writes and
    records (see the module docstring); InvalidInputError naming the column when Hudi's evolution cannot take
    it."""
    tf = [f for f in table if f.name not in INPUT_META_COLUMNS]
    inf = [f for f in incoming if f.name not in INPUT_META_COLUMNS]
    out = pa.schema(_Evolver(reconcile, where).fields(tf, inf, ""))
    try:  # a column Avro cannot hold (Spark's NullType, intervals) is refused before the write begins
        arrow_to_avro(out, "record", "hoodie")
    except InvalidInputError as e:
        raise InvalidInputError(f"{where}: {e}; nothing was written") from None
    return out


def check_key_types(table: pa.Schema, incoming: pa.Schema, fields: Sequence[str], where: str) -> None:
    """InvalidInputError naming a record key or partition column (``fields``) whose type in the input is not the
    table's, unless the two write the same text (Avro int and long): a key is the text of its values, and a
    double's ``1.0`` is not an int's ``1`` (nor a float's 0.1 a double's), so the write would not find the records
    it updates or deletes and would store their keys twice, or move them to other partition paths."""
    for name in dict.fromkeys(fields):
        if name not in table.names or name not in incoming.names:
            continue
        t, i = table.field(name).type, incoming.field(name).type
        if same_type(t, i) or {avro_primitive(t), avro_primitive(i)} <= {"int", "long"}:
            continue
        raise InvalidInputError(
            f"{where}: column {name!r} is a record key or partition field, {i} in the input but {t} in the table: "
            f"its values would make other keys or partition paths (the text of 1.0 is not that of 1), so the write "
            f"would not find the records it updates or deletes; cast it to {t}; nothing was written")


def evolved_columns(old: pa.Schema, new: pa.Schema) -> dict[str, str]:
    """Top-level columns that differ between two data schemas: name -> "added" or "changed" (for messages and
    tests)."""
    before = {f.name: f for f in old}
    out: dict[str, str] = {}
    for f in new:
        if f.name not in before:
            out[f.name] = "added"
        elif before[f.name] != f:
            out[f.name] = "changed"
    return out


# -- data ---------------------------------------------------------------------------------------------------------
def conform_array(arr: pa.Array | pa.ChunkedArray, target: pa.DataType, where: str, path: str) -> Any:
    """``arr`` as ``target`` (see the module docstring); InvalidInputError naming ``path`` when a value cannot be
    converted."""
    if isinstance(arr, pa.ChunkedArray):
        if arr.type == target:
            return arr
        return pa.chunked_array([conform_array(c, target, where, path) for c in arr.chunks], type=target)
    t = arr.type
    if t == target:
        return arr
    mask = arr.is_null() if arr.null_count else None
    if pa.types.is_struct(target) and pa.types.is_struct(t):
        children = []
        names = [t.field(i).name for i in range(t.num_fields)]
        flat = arr.flatten()
        for i in range(target.num_fields):
            f = target.field(i)
            if f.name in names:
                j = names.index(f.name)
                children.append(conform_array(flat[j], f.type, where, f"{path}.{f.name}"))
            else:
                children.append(pa.nulls(len(arr), f.type))
        return pa.StructArray.from_arrays(children, fields=[target.field(i) for i in range(target.num_fields)],
                                          mask=mask)
    if (pa.types.is_list(target) or pa.types.is_large_list(target)) and (
            pa.types.is_list(t) or pa.types.is_large_list(t)):
        offsets, values = list_parts(arr)
        values = conform_array(values, target.value_type, where, f"{path}.element")
        if pa.types.is_large_list(target) != pa.types.is_large_list(t):
            offsets = offsets.cast(pa.int64() if pa.types.is_large_list(target) else pa.int32())
        cls = pa.LargeListArray if pa.types.is_large_list(target) else pa.ListArray
        return cls.from_arrays(offsets, values, type=target, mask=mask)
    if pa.types.is_map(target) and pa.types.is_map(t):
        offsets, keys, items = map_parts(arr)
        keys = conform_array(keys, target.key_type, where, f"{path}.key")
        items = conform_array(items, target.item_type, where, f"{path}.value")
        return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=mask)
    a, b = avro_primitive(t), avro_primitive(target)
    try:
        if a in ("int", "long") and b in ("float", "double"):
            return arr.cast(target, safe=False)  # rounds to nearest, as Java's int/long -> float/double
        return arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise InvalidInputError(f"{where}: column {path!r} is {t}, cannot be read as {target}: {e}") from None


def _offsets(arr: Any) -> tuple[pa.Array, int, int]:
    """(offsets rebased to 0, first value, end value) of a possibly sliced list or map array."""
    import pyarrow.compute as pc

    off = arr.offsets
    start, end = off[0].as_py(), off[-1].as_py()
    return pc.subtract(off, pa.scalar(start, off.type)), start, end


def list_parts(arr: Any) -> tuple[pa.Array, Any]:
    """(offsets rebased to 0, the values they index) of a possibly sliced list array."""
    offsets, start, end = _offsets(arr)
    return offsets, arr.values.slice(start, end - start)


def map_parts(arr: Any) -> tuple[pa.Array, Any, Any]:
    """(offsets rebased to 0, keys, items) of a possibly sliced map array."""
    offsets, start, end = _offsets(arr)
    return offsets, arr.keys.slice(start, end - start), arr.items.slice(start, end - start)


def conform_table(t: pa.Table | pa.RecordBatch, schema: pa.Schema, where: str) -> pa.Table:
    """``t`` with exactly ``schema``'s columns, by name, in its order: missing columns (and struct fields) are
    nulls, other types converted by :func:`conform_array`."""
    if isinstance(t, pa.RecordBatch):
        t = pa.Table.from_batches([t])
    cols = []
    names = t.column_names
    for f in schema:
        if f.name in names:
            cols.append(conform_array(t.column(f.name), f.type, where, f.name))
        else:
            cols.append(pa.nulls(t.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=schema)


# -- schema-on-read: files read by field id -----------------------------------------------------------------------
#: type changes whose conversion is exact and the same as Hudi's (Java's widening and ``String.valueOf``)
_CASTS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double", "string"}),
    "long": frozenset({"float", "double", "string"}),
}


class FileMapping:
    """How one file's (or log block's) columns become the query's: for every query column (by name), the file's
    column of the same id (None: null) and the conversions on the way. ``path`` names the file in errors."""

    def __init__(self, sor: SchemaOnRead, file_schema: InternalSchema, path: str) -> None:
        self.sor = sor
        self.file = file_schema
        self.path = path
        self.query_fields = {f.name: f for f in sor.query.fields}
        self.file_fields = file_schema.record.by_id()

    def source_column(self, name: str) -> str | None:
        """The file's name of query column ``name`` (None: the file has no column of that id)."""
        q = self.query_fields.get(name)
        if q is None:
            return name  # a meta column missing from the InternalSchema: read by name
        f = self.file_fields.get(q.id)
        return f.name if f is not None else None

    def apply(self, t: pa.Table | pa.RecordBatch, out: pa.Schema) -> pa.Table:
        """``t`` (the file's columns) as the query's ``out`` columns."""
        if isinstance(t, pa.RecordBatch):
            t = pa.Table.from_batches([t])
        cols = []
        for f in out:
            src = self.source_column(f.name)
            if src is None or src not in t.column_names:
                cols.append(pa.nulls(t.num_rows, f.type))
                continue
            arr = t.column(src).combine_chunks()
            q = self.query_fields.get(f.name)
            if q is None:
                cols.append(conform_array(arr, f.type, self.path, f.name))
            else:
                cols.append(self._convert(arr, self.file_fields[q.id].type, q.type, f.type, f.name))
        return pa.Table.from_arrays(cols, schema=out)

    def _refuse(self, column: str, what: str) -> UnsupportedTableError:
        return UnsupportedTableError(
            f"{self.sor.table}: {self.path}: column {column!r} {what}; pyhudi refuses to read the table rather "
            "than convert it differently from Hudi")

    def _convert(self, arr: Any, ftype: IType, qtype: IType, target: pa.DataType, column: str) -> Any:
        mask = arr.is_null() if arr.null_count else None
        if isinstance(qtype, Record):
            if not isinstance(ftype, Record) or not pa.types.is_struct(arr.type):
                raise self._refuse(column, f"is a struct in the query schema but {ftype} in the file")
            by_id = ftype.by_id()
            names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
            children = []
            for i, qf in enumerate(qtype.fields):
                tf = target.field(i)
                ff = by_id.get(qf.id)
                if ff is None or ff.name not in names:
                    children.append(pa.nulls(len(arr), tf.type))
                    continue
                child = arr.field(names.index(ff.name))
                children.append(self._convert(child, ff.type, qf.type, tf.type, f"{column}.{qf.name}"))
            return pa.StructArray.from_arrays(children, fields=[target.field(i) for i in range(target.num_fields)],
                                              mask=mask)
        if isinstance(qtype, Array):
            if not isinstance(ftype, Array) or not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
                raise self._refuse(column, f"is an array in the query schema but {ftype} in the file")
            offsets, values = list_parts(arr)
            vals = self._convert(values, ftype.element, qtype.element, target.value_type, f"{column}.element")
            return pa.ListArray.from_arrays(offsets, vals, type=target, mask=mask)
        if isinstance(qtype, Map):
            if not isinstance(ftype, Map) or not pa.types.is_map(arr.type):
                raise self._refuse(column, f"is a map in the query schema but {ftype} in the file")
            offsets, keys, items = map_parts(arr)
            keys = conform_array(keys, target.key_type, self.path, f"{column}.key")
            items = self._convert(items, ftype.value, qtype.value, target.item_type, f"{column}.value")
            return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=mask)
        if not isinstance(ftype, str):
            raise self._refuse(column, f"is {qtype} in the query schema but {ftype} in the file")
        if ftype != qtype and qtype not in _CASTS.get(ftype, ()):
            raise self._refuse(column, f"changed type from {ftype} (in the file) to {qtype}, a change pyhudi does "
                                       "not convert (it converts int -> long/float/double/string and "
                                       "long -> float/double/string)")
        if ftype != qtype and qtype == "string":
            return arr.cast(pa.string())
        return conform_array(arr, target, self.path, column)

"""Table schemas: Arrow <-> Avro (as Hudi's Spark writer spells them) and the five Hudi meta columns.

Hudi records the writer schema as Avro JSON (``hoodie.table.create.schema`` and the ``schema`` entry of every
commit's extra metadata). Spark's converter names the record ``<table>_record`` in namespace ``hoodie.<table>``,
makes nullable fields ``[type, "null"]`` and encodes decimals as named fixed types.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pyhudi.errors import InvalidInputError, PyHudiError, UnsupportedTableError
from pyhudi.table.internal_schema import (
    LATEST_SCHEMA_KEY,
    can_update_schema,
    load_history,
    parse_internal_schema,
    refusal,
    schema_folder,
    to_arrow,
    valid_history_files,
)
from pyhudi.table.lsm_timeline import ArchivedTimeline, LsmHistory

if TYPE_CHECKING:
    from pyhudi.io.storage import Storage
    from pyhudi.table.internal_schema import SchemaOnRead
    from pyhudi.table.properties import TableConfig
    from pyhudi.table.timeline import ActiveTimeline

COMMIT_TIME_COL = "_hoodie_commit_time"
COMMIT_SEQNO_COL = "_hoodie_commit_seqno"
RECORD_KEY_COL = "_hoodie_record_key"
PARTITION_PATH_COL = "_hoodie_partition_path"
FILE_NAME_COL = "_hoodie_file_name"
META_COLUMNS = (COMMIT_TIME_COL, COMMIT_SEQNO_COL, RECORD_KEY_COL, PARTITION_PATH_COL, FILE_NAME_COL)
#: a record's change type (``I``, ``U``, ``-U``, ``D``) in log blocks of writers that keep it: a reader takes ``D``
#: and ``-U`` for deletes
OPERATION_COL = "_hoodie_operation"
#: the meta fields a writer takes out of its input and of a data schema (Hudi's ``HOODIE_META_COLUMNS_WITH_OPERATION``):
#: never data, whatever an input holds in them
INPUT_META_COLUMNS = (*META_COLUMNS, OPERATION_COL)
IS_DELETED_COL = "_hoodie_is_deleted"
META_SCHEMA = pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS])


def record_name(table_name: str) -> tuple[str, str]:
    """(record name, namespace) of a table's Avro schema, as Hudi's Spark writer derives them: from the table name
    made a legal Avro name (``HoodieAvroUtils.sanitizeName``: an illegal first character, then every character
    other than ``[A-Za-z0-9_]``, becomes ``__``), so ``my-table`` gives ``my__table_record``."""
    name = table_name
    if name and re.match(r"[^A-Za-z_]", name[0]):
        name = "__" + name[1:]
    name = re.sub(r"[^A-Za-z0-9_]", "__", name)
    return f"{name}_record", f"hoodie.{name}"


def without_meta(schema: pa.Schema) -> pa.Schema:
    """``schema`` without its meta fields (:data:`INPUT_META_COLUMNS`)."""
    return pa.schema([f for f in schema if f.name not in INPUT_META_COLUMNS])


def with_meta(schema: pa.Schema) -> pa.Schema:
    return pa.schema(list(META_SCHEMA) + list(without_meta(schema)))


def _decimal_fixed_size(precision: int) -> int:
    # smallest byte count whose signed range holds 10**precision - 1
    return max(1, math.ceil((precision * math.log2(10) + 1) / 8))


def arrow_to_avro(schema: pa.Schema, name: str, namespace: str) -> dict[str, Any]:
    """The Avro record schema (as a JSON-able dict) for an Arrow schema."""
    return _record(list(schema), name, namespace)


def _record(fields: list[pa.Field], name: str, namespace: str) -> dict[str, Any]:
    out = []
    for f in fields:
        t = _avro_type(f.type, f.name, f"{namespace}.{name}")
        if f.nullable:
            out.append({"name": f.name, "type": [t, "null"]})
        else:
            out.append({"name": f.name, "type": t})
    return {"type": "record", "name": name, "namespace": namespace, "fields": out}


def avro_primitive(t: pa.DataType) -> str | None:
    """The plain Avro primitive an Arrow type is written as (None for logical, nested and other types)."""
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        return "int"
    if pa.types.is_int64(t):
        return "long"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "bytes"
    if pa.types.is_boolean(t):
        return "boolean"
    return None


def _avro_type(t: pa.DataType, field_name: str, ns: str) -> Any:
    primitive = avro_primitive(t)
    if primitive is not None:
        return primitive
    if pa.types.is_date32(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        return {"type": "long", "logicalType": "timestamp-micros" if t.tz else "local-timestamp-micros"}
    if pa.types.is_decimal(t):
        return {
            "type": "fixed",
            "name": "fixed",
            "namespace": f"{ns}.{field_name}",
            "size": _decimal_fixed_size(t.precision),
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        }
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = t.value_field
        it = _avro_type(item.type, "element", f"{ns}.{field_name}")
        return {"type": "array", "items": [it, "null"] if item.nullable else it}
    if pa.types.is_map(t):
        item = t.item_field
        it = _avro_type(item.type, "value", f"{ns}.{field_name}")
        return {"type": "map", "values": [it, "null"] if item.nullable else it}
    if pa.types.is_struct(t):
        return _record([t.field(i) for i in range(t.num_fields)], field_name, ns)
    raise InvalidInputError(f"column {field_name!r} has type {t}, which Hudi tables cannot store")


def avro_schema_json(schema: pa.Schema, table_name: str) -> str:
    name, ns = record_name(table_name)
    return json.dumps(arrow_to_avro(without_meta(schema), name, ns), separators=(",", ":"))


def commit_schema_json(schema: pa.Schema, table_name: str) -> str:
    """The writer schema as Hudi 1.1 records it in a commit's ``extraMetadata.schema``: Spark's converter's schema
    with ``null`` first in every union and ``"default": null`` on nullable fields (Hudi passes the schema through
    its InternalSchema converter, ``fixNullOrdering``); ``hoodie.table.create.schema`` keeps the converter's own
    form (:func:`avro_schema_json`)."""
    name, ns = record_name(table_name)
    return json.dumps(_null_first(arrow_to_avro(without_meta(schema), name, ns)), separators=(",", ":"))


def _null_first(node: Any) -> Any:
    if isinstance(node, list):
        branches = [_null_first(b) for b in node]
        return [b for b in branches if b == "null"] + [b for b in branches if b != "null"]
    if not isinstance(node, dict):
        return node
    t = node.get("type")
    if t == "record":
        fields = []
        for f in node["fields"]:
            ft = _null_first(f["type"])
            out = {"name": f["name"], "type": ft}
            if isinstance(ft, list) and "null" in ft:
                out["default"] = None
            fields.append(out)
        return {**node, "fields": fields}
    if t == "array":
        return {**node, "items": _null_first(node["items"])}
    if t == "map":
        return {**node, "values": _null_first(node["values"])}
    return node


def avro_to_arrow(avro: dict[str, Any] | str) -> pa.Schema:
    """The Arrow schema of an Avro record schema (JSON text or dict), as Hudi's Spark writer maps types."""
    node = json.loads(avro) if isinstance(avro, str) else avro
    if node.get("type") != "record":
        raise InvalidInputError("table schema must be an Avro record")
    return pa.schema([_arrow_field(f["name"], f["type"]) for f in node["fields"]])


def _arrow_field(name: str, t: Any) -> pa.Field:
    nullable = False
    if isinstance(t, list):
        branches = [b for b in t if b != "null"]
        nullable = len(branches) != len(t)
        if len(branches) != 1:
            raise InvalidInputError(f"column {name!r}: Avro union {t} is not supported")
        t = branches[0]
    return pa.field(name, _arrow_type(name, t), nullable=nullable)


_PRIMITIVES = {
    "string": pa.string(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
}


def _arrow_type(name: str, t: Any) -> pa.DataType:
    if isinstance(t, str):
        if t in _PRIMITIVES:
            return _PRIMITIVES[t]
        raise InvalidInputError(f"column {name!r}: Avro type {t!r} is not supported")
    logical = t.get("logicalType")
    base = t.get("type")
    if logical == "decimal":
        return pa.decimal128(int(t["precision"]), int(t.get("scale", 0)))
    if logical == "date":
        return pa.date32()
    if logical in ("timestamp-micros", "timestamp-millis"):
        return pa.timestamp("us", tz="UTC")
    if logical in ("local-timestamp-micros", "local-timestamp-millis"):
        return pa.timestamp("us")
    if base == "record":
        return pa.struct([_arrow_field(f["name"], f["type"]) for f in t["fields"]])
    if base == "array":
        item = _arrow_field("element", t["items"])
        return pa.list_(item)
    if base == "map":
        val = _arrow_field("value", t["values"])
        return pa.map_(pa.string(), val.type)
    if base == "enum":
        return pa.string()
    if isinstance(base, str):
        return _arrow_type(name, base)
    raise InvalidInputError(f"column {name!r}: Avro type {t} is not supported")


def table_schema(
    storage: Storage, base_path: str, config: TableConfig, timeline: ActiveTimeline, as_of: str | None = None
) -> pa.Schema:
    """The data schema (without meta columns): the latest commit's writer schema (an archived commit's when no
    active one carries one), else the create schema. ``as_of``: the schema of the latest commit requested at or
    before that instant (time travel). A schema-on-read table's is its InternalSchema's (:func:`resolve_schema`)."""
    return resolve_schema(storage, base_path, config, timeline, as_of)[0]


def resolve_schema(
    storage: Storage, base_path: str, config: TableConfig, timeline: ActiveTimeline, as_of: str | None = None
) -> tuple[pa.Schema, SchemaOnRead | None]:
    """(:func:`table_schema`, the schema-on-read history files are read through, None for other tables). The
    latest commit (at or before ``as_of``) that records a schema decides: its ``extraMetadata.latestSchema`` (an
    InternalSchema: a schema-on-read table, see :mod:`pyhudi.table.internal_schema`), else its Avro ``schema``. A
    table whose ``.hoodie/.schema`` holds the history of a completed commit but whose deciding commit records no
    InternalSchema is refused: which of its files hold renamed columns would be a guess. A commit whose operation
    cannot change the schema (``WriteOperationType.canUpdateSchema``: a compaction, clustering) does not decide
    (``TableSchemaResolver.getLastCommitMetadataWithValidSchema``)."""
    history = valid_history_files(storage, base_path, timeline)

    def archived() -> Iterator[ActiveTimeline | ArchivedTimeline]:
        # read only when no active commit carries a schema: loading the archived timeline reads every file of
        # the LSM timeline, which a commit (this runs for every write) must not pay
        if LsmHistory.for_table(storage, base_path, config).latest_version() > 0:
            yield ArchivedTimeline.load(storage, base_path, config)

    def refuse(where: str) -> UnsupportedTableError:
        return refusal(base_path, f"{schema_folder(base_path)} holds {history[0]}", "to read it",
                       f"{where} records no InternalSchema (extraMetadata.{LATEST_SCHEMA_KEY}), so which files hold "
                       "renamed or dropped columns is unknown")

    for tl in itertools.chain([timeline], archived()):
        # the latest instant decides, as Hudi's and hudi-rs's readers take it (a write that evolves the schema is
        # refused at commit when a later instant completed meanwhile: WriteTransaction._check_later_instants)
        for inst in reversed(list(tl.completed_commits())):
            if as_of is not None and inst.requested_time > as_of:
                continue
            md = tl.read_commit_metadata(inst)
            if not can_update_schema(md):
                # a compaction's or clustering's, planned with the schema of its time: a write that completed
                # meanwhile may have evolved the table's (TableSchemaResolver skips them too)
                continue
            extra = md.get("extraMetadata") or {}
            latest = extra.get(LATEST_SCHEMA_KEY)
            if latest:
                where = f"{base_path}: commit {inst.requested_time} (extraMetadata.{LATEST_SCHEMA_KEY})"
                query = parse_internal_schema(latest, where)
                sor = load_history(storage, base_path, timeline, query)
                return without_meta(to_arrow(query, base_path)), sor
            s = extra.get("schema")
            if s:
                if history:
                    raise refuse(f"its commit {inst.requested_time}, the latest"
                                 + (f" at or before {as_of}," if as_of is not None else "") + " with a schema,")
                return avro_to_arrow(s), None
    if history:
        raise refuse("none of its commits" + (f" at or before {as_of}" if as_of is not None else ""))
    if config.create_schema:
        return avro_to_arrow(config.create_schema), None
    raise PyHudiError(f"{base_path}: table has no schema yet")

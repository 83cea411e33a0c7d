"""Hand-built schema-on-read tables (table version 9), in the on-disk form Hudi 1.1 gives them.

What Hudi writes, and where (class names of Apache Hudi):

- every InternalSchema as ``SerDeHelper.toJson`` writes it with Jackson's generator (compact JSON, keys in this
  order): ``{"max_column_id", "version-id", "type": "record", "fields": [{"id", "name", "optional", "type"[,
  "doc"]}]}``; arrays ``{"type": "array", "element-id", "element", "element_optional"}``; maps ``{"type": "map",
  "key-id", "key", "value-id", "value", "value_optional"}``; primitives by name. The schemas hold the five meta
  columns (ids 0-4: ``HoodieAvroUtils.createHoodieWriteSchema`` adds them before ``AvroInternalSchemaConverter``
  numbers the fields, each record's fields first, then their nested fields);
- ``ALTER TABLE`` (``BaseHoodieWriteClient.commitTableChange``, Spark's ``AlterTableCommand``) commits an
  instant without files (``operationType`` ``ALTER_SCHEMA``) whose ``extraMetadata.latestSchema`` is the new
  version (``version-id`` = the instant), and writes the history ``SerDeHelper.inheritSchemas(new, old)`` --
  newest first; a table altered for the first time starts it with the schema derived from its Avro schema,
  ``version-id`` 0 -- through ``FileBasedInternalSchemaStorageManager.persistHistorySchemaStr``:
  ``.hoodie/.schema/<t>.schemacommit.requested``, ``<t>.schemacommit.inflight`` and, completed (timeline layout
  2, ``InstantFileNameGeneratorV2``), ``<t>_<completion>.schemacommit`` holding the history;
- a data write with schema-on-read on (``BaseHoodieWriteClient.saveInternalSchema``) that keeps the schema
  records the current version (its old ``version-id``) in ``latestSchema`` and writes the unchanged history under
  its own instant; its parquet files carry the current names.

A :class:`SorTable` is a copy-on-write (or merge-on-read) table built commit by commit: each commit writes
parquet base files, or log files of Avro data and delete blocks, under the column names and types of the version
it writes with. No metadata table.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pyhudi.io.logfile import DeleteRecord, avro_data_block, delete_block
from pyhudi.table.properties import COPY_ON_WRITE, TableConfig, create_table_config, meta_path
from pyhudi.table.schema import META_COLUMNS, arrow_to_avro, commit_schema_json
from pyhudi.table.timeline import ActiveTimeline, format_instant_time
from tests.support.storage import LOCAL

TOKEN = "0-1-0"


# -- InternalSchema, as Hudi's types ------------------------------------------------------------------------------
@dataclass(frozen=True)
class F:
    """A field: id, name, type (a primitive's name, or :class:`Rec`, :class:`Arr`), optional."""

    id: int
    name: str
    type: Any
    optional: bool = True


@dataclass(frozen=True)
class Rec:
    fields: tuple[F, ...]


@dataclass(frozen=True)
class Arr:
    element_id: int
    element: Any
    element_optional: bool = True


@dataclass(frozen=True)
class MapT:
    key_id: int
    value_id: int
    value: Any
    value_optional: bool = True


META_FIELDS = tuple(F(i, c, "string") for i, c in enumerate(META_COLUMNS))


def _type_json(t: Any) -> Any:
    if isinstance(t, Rec):
        return {"type": "record", "fields": [_field_json(f) for f in t.fields]}
    if isinstance(t, Arr):
        return {"type": "array", "element-id": t.element_id, "element": _type_json(t.element),
                "element_optional": t.element_optional}
    if isinstance(t, MapT):
        return {"type": "map", "key-id": t.key_id, "key": "string", "value-id": t.value_id,
                "value": _type_json(t.value), "value_optional": t.value_optional}
    return t


def _field_json(f: F) -> dict[str, Any]:
    return {"id": f.id, "name": f.name, "optional": f.optional, "type": _type_json(f.type)}


def _max_id(fields: tuple[F, ...]) -> int:
    out = 0
    for f in fields:
        out = max(out, f.id)
        t = f.type
        while True:
            if isinstance(t, Rec):
                out = max(out, _max_id(t.fields))
                break
            if isinstance(t, Arr):
                out = max(out, t.element_id)
                t = t.element
                continue
            if isinstance(t, MapT):
                out = max(out, t.key_id, t.value_id)
                t = t.value
                continue
            break
    return out


def internal_schema_json(version: int, fields: tuple[F, ...], max_column_id: int | None = None) -> str:
    """``SerDeHelper.toJson(InternalSchema)``: Jackson's compact output, keys in the generator's order."""
    node = {"max_column_id": max_column_id if max_column_id is not None else _max_id(fields),
            "version-id": version, "type": "record", "fields": [_field_json(f) for f in fields]}
    return json.dumps(node, separators=(",", ":"))


def history_json(versions: list[str]) -> str:
    """``SerDeHelper.toJson(List<InternalSchema>)`` of schema JSONs given newest first (what ``inheritSchemas``
    builds one version at a time)."""
    return '{"schemas":[' + ",".join(versions) + "]}"


_ARROW = {"string": pa.string(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
          "double": pa.float64(), "boolean": pa.bool_(), "date": pa.date32(), "binary": pa.binary()}


def arrow_type(t: Any) -> pa.DataType:
    if isinstance(t, Rec):
        return pa.struct([arrow_field(f) for f in t.fields])
    if isinstance(t, Arr):
        return pa.list_(pa.field("element", arrow_type(t.element), nullable=t.element_optional))
    if isinstance(t, MapT):
        return pa.map_(pa.string(), arrow_type(t.value))
    return _ARROW[t]


def arrow_field(f: F) -> pa.Field:
    return pa.field(f.name, arrow_type(f.type), nullable=f.optional)


def arrow_schema(fields: tuple[F, ...]) -> pa.Schema:
    return pa.schema([arrow_field(f) for f in fields])


# -- the table ----------------------------------------------------------------------------------------------------
class SorTable:
    """A schema-on-read table built commit by commit (see the module docstring). ``fields``: the data fields of
    the first schema (meta columns are added with ids 0-4)."""

    def __init__(self, base: Path, fields: tuple[F, ...], *, table_type: str = COPY_ON_WRITE,
                 start_ms: int = 1_767_225_600_000) -> None:
        self.base = str(base)
        self.ms = start_ms
        self.seq = 0
        self.fields = META_FIELDS + fields  # the current version's fields
        self.version = 0  # its version id
        self.history: list[str] = []  # schema JSONs, newest first
        self.table_type = table_type
        self.log_versions: dict[tuple[str, str], int] = {}  # (file id, base instant) -> the last log version
        extra = {
            "hoodie.table.create.schema": self.avro_schema(),
            "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
            "hoodie.datasource.write.hive_style_partitioning": "false",
            "hoodie.table.base.file.format": "PARQUET",
        }
        cfg = TableConfig.create("t", table_type=table_type, record_key_fields=["id"], ordering_fields=["ts"],
                                 extra=extra)
        create_table_config(LOCAL, meta_path(self.base), cfg)
        LOCAL.makedirs(ActiveTimeline.timeline_dir_for(self.base, cfg))
        LOCAL.makedirs(posixpath.join(self.base, ".hoodie", ".schema"))  # Hudi creates it empty in every table
        LOCAL.write_bytes(posixpath.join(self.base, ".hoodie_partition_metadata"),
                          b"#partition metadata\ncommitTime=0\npartitionDepth=0\n")

    # -- time and schema ------------------------------------------------------------------------------------------
    def tick(self) -> str:
        self.ms += 1000
        return format_instant_time(self.ms)

    def timeline(self) -> ActiveTimeline:
        return ActiveTimeline.load(LOCAL, self.base)

    def data_fields(self) -> tuple[F, ...]:
        return tuple(f for f in self.fields if f.name not in META_COLUMNS)

    def avro_schema(self) -> str:
        return commit_schema_json(arrow_schema(self.data_fields()), "t")

    def current_json(self) -> str:
        return internal_schema_json(self.version, self.fields)

    def _persist_history(self, instant: str) -> None:
        """``FileBasedInternalSchemaStorageManager.persistHistorySchemaStr``: requested, inflight, completed."""
        folder = posixpath.join(self.base, ".hoodie", ".schema")
        LOCAL.write_bytes(posixpath.join(folder, f"{instant}.schemacommit.requested"), b"")
        LOCAL.write_bytes(posixpath.join(folder, f"{instant}.schemacommit.inflight"), b"")
        LOCAL.write_bytes(posixpath.join(folder, f"{instant}_{self.tick()}.schemacommit"),
                          history_json(self.history).encode())

    # -- commits ------------------------------------------------------------------------------------------------
    def _commit(self, instant: str, stats: list[dict[str, Any]], operation: str, *, internal: bool) -> str:
        tl = self.timeline()
        infl = next(i for i in tl.pending() if i.requested_time == instant)
        extra = {"schema": self.avro_schema()}
        if internal:
            extra["latestSchema"] = self.current_json()
        meta = {"partitionToWriteStats": {"": stats} if stats else {}, "compacted": False, "extraMetadata": extra,
                "version": 1, "operationType": operation}
        return tl.complete(infl, meta, self.tick()).completion_time or ""

    def _begin(self, action: str) -> str:
        tl = self.timeline()
        t = self.tick()
        req = tl.create_requested(action, t)
        tl.transition_to_inflight(req, None)
        return t

    @property
    def commit_action(self) -> str:
        return "commit" if self.table_type == COPY_ON_WRITE else "deltacommit"

    def write(self, files: dict[str, list[dict[str, Any]]], *, schema_on_read: bool = True,
              operation: str = "UPSERT", history: bool = True) -> str:
        """A data commit writing one base file per file group ({fid: rows under the current names}); with
        ``schema_on_read`` it records the current version and (``history``) writes the unchanged history, as
        ``saveInternalSchema`` does. Returns the instant."""
        t = self._begin(self.commit_action)
        stats = [self._write_base(fid, t, rows) for fid, rows in files.items()]
        if schema_on_read and history:
            if not self.history:
                self.history = [self.current_json()]
            self._persist_history(t)
        self._commit(t, stats, operation, internal=schema_on_read)
        return t

    def compact(self, files: dict[str, list[dict[str, Any]]]) -> str:
        """A compaction (requested ``compaction``, completed ``commit``, ``operationType`` COMPACT) writing one base
        file per file group under the current names (rows keep their ``_hoodie_commit_time``). Its
        ``latestSchema`` is the current version, as Hudi records the schema of the last commit completed before
        the compaction was planned (``getInternalSchemaAndAvroSchemaForClusteringAndCompaction``); it writes no
        history. Returns the instant."""
        t = self._begin("compaction")
        stats = [self._write_base(fid, t, rows) for fid, rows in files.items()]
        self._commit(t, stats, "COMPACT", internal=True)
        return t

    def alter(self, fields: tuple[F, ...], *, first_history: bool = True, during: Any = None) -> str:
        """``ALTER TABLE``: the data ``fields`` become the table's (a new version, id = the instant). A table
        without history starts it with its current schema as version 0 (``first_history``). ``during()`` runs
        once the ALTER's instant is requested, before it changes anything else (a racing commit)."""
        t = self._begin(self.commit_action)
        if during is not None:
            during()
        if not self.history and first_history:
            self.history = [internal_schema_json(0, self.fields)]
        self.fields = META_FIELDS + fields
        self.version = int(t)
        self.history = [self.current_json(), *self.history]
        self._persist_history(t)
        self._commit(t, [], "ALTER_SCHEMA", internal=True)
        return t

    def write_logs(self, logs: dict[str, tuple[str, list[dict[str, Any]], list[tuple[str, int]]]]) -> str:
        """A deltacommit writing a new log file (the next version) per file group: ``{fid: (base instant, rows
        under the current names, deleted (key, ordering value))}`` -- an Avro data block (header SCHEMA: the
        current version's Avro schema with the meta columns, INSTANT_TIME) then a delete block; the history and
        ``latestSchema`` as :meth:`write` records them. Returns the instant."""
        t = self._begin("deltacommit")
        stats = []
        for fid, (base_instant, rows, dels) in logs.items():
            version = self.log_versions.get((fid, base_instant), 0) + 1
            self.log_versions[(fid, base_instant)] = version
            name = f".{fid}_{base_instant}.log.{version}_{TOKEN}"
            block_schema = json.dumps(arrow_to_avro(arrow_schema(self.fields), "t_record", "hoodie.t"),
                                      separators=(",", ":"))
            data = b""
            if rows:
                table = pa.Table.from_pylist(self._full(rows, t, fid), schema=arrow_schema(self.fields))
                data += avro_data_block(table, t, block_schema)
            if dels:
                data += delete_block([DeleteRecord(k, "", v) for k, v in dels], t, schema_json=block_schema)
            path = posixpath.join(self.base, name)
            LOCAL.write_bytes(path, data)
            size = LOCAL.status(path).size
            stats.append({"fileId": fid, "path": name, "prevCommit": t, "numWrites": len(rows),
                          "numDeletes": len(dels), "numUpdateWrites": len(rows), "numInserts": 0,
                          "totalWriteBytes": size, "totalWriteErrors": 0, "partitionPath": "",
                          "fileSizeInBytes": size, "baseFile": "", "logFiles": [name], "logVersion": version,
                          "logOffset": 0})
        if not self.history:
            self.history = [self.current_json()]
        self._persist_history(t)
        self._commit(t, stats, "UPSERT", internal=True)
        return t

    def _full(self, rows: list[dict[str, Any]], instant: str, file_field: str) -> list[dict[str, Any]]:
        out = []
        for r in rows:
            self.seq += 1
            out.append({"_hoodie_commit_time": r.get("_hoodie_commit_time", instant),
                        "_hoodie_commit_seqno": f"{instant}_0_{self.seq}", "_hoodie_record_key": r["id"],
                        "_hoodie_partition_path": "", "_hoodie_file_name": file_field,
                        **{k: v for k, v in r.items() if k != "_hoodie_commit_time"}})
        return out

    def _write_base(self, fid: str, instant: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
        name = f"{fid}_{TOKEN}_{instant}.parquet"
        table = pa.Table.from_pylist(self._full(rows, instant, name), schema=arrow_schema(self.fields))
        path = posixpath.join(self.base, name)
        pq.write_table(table, path)
        size = LOCAL.status(path).size
        return {"fileId": fid, "path": name, "prevCommit": "null", "numWrites": len(rows), "numDeletes": 0,
                "numUpdateWrites": 0, "numInserts": len(rows), "totalWriteBytes": size, "totalWriteErrors": 0,
                "partitionPath": "", "fileSizeInBytes": size}

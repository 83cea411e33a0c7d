"""Schema-on-read evolution (``hoodie.schema.on.read.enable``): Hudi's InternalSchema, its history, and base
files read through it by field id.

**Format** (Hudi's ``InternalSchema`` and ``SerDeHelper``). An InternalSchema is a record of fields, each with an
id unique in the schema (nested fields, array elements, map keys and values included), a name, ``optional`` and a
type; renames keep the id, a dropped column's id is never reused, an added column takes ``max_column_id + 1``.
Its JSON::

    {"max_column_id": 7, "version-id": 20261121093000000, "type": "record", "fields": [
        {"id": 0, "name": "_hoodie_commit_time", "optional": true, "type": "string"}, ...,
        {"id": 6, "name": "st", "optional": true, "type": {"type": "record", "fields": [...]}},
        {"id": 7, "name": "tags", "optional": true,
         "type": {"type": "array", "element-id": 8, "element": "string", "element_optional": true}}]}

``doc`` is written when a field has one; a map is ``{"type": "map", "key-id", "key", "value-id", "value",
"value_optional"}``; primitive types are their names (``boolean``, ``int``, ``long``, ``float``, ``double``,
``date``, ``timestamp`` (micros, UTC), ``string``, ``binary``, ``decimal(p, s)``, ...). ``version-id`` is the
instant of the commit that made the version (0 for the version Hudi derives from a table's Avro schema when a
table without history is first altered). The schemas Hudi records hold the five meta columns too.

**Where Hudi keeps it.** Every commit of a schema-on-read write records the table's InternalSchema after it in
``extraMetadata.latestSchema`` (a commit that does not change the schema records the previous version, with its
``version-id``; an ``ALTER TABLE`` is a commit without files, ``operationType`` ``ALTER_SCHEMA``). Alongside,
``FileBasedInternalSchemaStorageManager`` writes the whole history, ``{"schemas": [newest, ..., oldest]}``
(``SerDeHelper.inheritSchemas``), as ``.hoodie/.schema/<instant>.schemacommit`` (timeline layout 2: the completed
file is ``<instant>_<completion>.schemacommit``, next to its ``.schemacommit.requested`` and
``.schemacommit.inflight``). The current history is the last, by name, of the completed ``.schemacommit`` files
that are not the residue of a failed write: Hudi keeps those whose instant is a completed commit
(``getHistorySchemaStrByGivenValidCommits``); pyhudi ignores those whose instant lies in the active timeline's
range without being a completed commit there, and keeps those older than the active timeline (their commits were
archived).

**Reading** (``InternalSchemaCache.searchSchemaAndCache`` and ``getInternalSchemaByVersionId``,
``InternalSchemaMerger``). The query schema is the ``latestSchema`` of the latest commit that can change the schema
(not a compaction, clustering, log compaction or indexing; time travel: the latest at or before the instant). A
base file's schema is that of its instant (the instant in its name): first the ``latestSchema`` of that instant's
own commit metadata (step 1: the schema the write used, even when a version of a smaller id completed during the
write), else the history's version with that id, else the greatest version below it (step 2). Hudi's step 1
reads the active timeline only; pyhudi reads an archived commit's metadata from the archived timeline. Its
columns are matched to the query's by id at every depth: a column renamed since
reads under the query's name, a column the file lacks (added later, or dropped and added again under the same
name, which gets a new id) is null, a column the query lacks (dropped) is not read, a type changed since is cast.
A log data block is mapped the same way by the version of its ``INSTANT_TIME`` header
(``composeEvolvedSchemaTransformer`` of Hudi's log reader). The mapping itself is
:class:`pyhudi.table.evolution.FileMapping`.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Union

import pyarrow as pa

from pyhudi.errors import CorruptFileError, UnsupportedTableError
from pyhudi.table.lsm_timeline import ArchivedTimeline, LsmHistory

if TYPE_CHECKING:
    from pyhudi.io.storage import Storage
    from pyhudi.table.properties import TableConfig
    from pyhudi.table.timeline import ActiveTimeline

#: extraMetadata key of the InternalSchema a schema-on-read commit records (``SerDeHelper.LATEST_SCHEMA``)
LATEST_SCHEMA_KEY = "latestSchema"
#: folder of the schema history under ``.hoodie`` (``FileBasedInternalSchemaStorageManager.SCHEMA_NAME``)
SCHEMA_FOLDER = ".schema"
#: action of the history files (``HoodieTimeline.SCHEMA_COMMIT_ACTION``)
SCHEMA_COMMIT_ACTION = "schemacommit"


@dataclass(frozen=True)
class Field:
    id: int
    name: str
    optional: bool
    type: IType
    doc: str | None = None


@dataclass(frozen=True)
class Record:
    fields: tuple[Field, ...]

    def by_id(self) -> dict[int, Field]:
        return {f.id: f for f in self.fields}


@dataclass(frozen=True)
class Array:
    element_id: int
    element: IType
    element_optional: bool


@dataclass(frozen=True)
class Map:
    key_id: int
    key: IType
    value_id: int
    value: IType
    value_optional: bool


#: a type: a primitive's name (``"int"``, ``"decimal(10, 2)"``, ...), or a nested type
IType = Union[str, Record, Array, Map]  # noqa: UP007 (a runtime alias)


@dataclass(frozen=True)
class InternalSchema:
    version_id: int
    max_column_id: int | None
    record: Record

    @property
    def fields(self) -> tuple[Field, ...]:
        return self.record.fields


# -- JSON (SerDeHelper) -------------------------------------------------------------------------------------------
def _type(node: Any, where: str) -> IType:
    if isinstance(node, str):
        return node.strip().lower()
    if isinstance(node, dict):
        kind = node.get("type")
        if kind == "record":
            return Record(tuple(
                Field(int(f["id"]), str(f["name"]), bool(f["optional"]), _type(f["type"], where), f.get("doc"))
                for f in node["fields"]))
        if kind == "array":
            return Array(int(node["element-id"]), _type(node["element"], where), bool(node["element_optional"]))
        if kind == "map":
            return Map(int(node["key-id"]), _type(node["key"], where), int(node["value-id"]),
                       _type(node["value"], where), bool(node["value_optional"]))
    raise CorruptFileError(where, f"not an InternalSchema type: {json.dumps(node)[:200]}")


def parse_internal_schema(node: dict[str, Any] | str, where: str) -> InternalSchema:
    """An InternalSchema from its JSON (``SerDeHelper.toJson``); ``where`` names the file for errors."""
    try:
        obj = json.loads(node) if isinstance(node, str) else node
        rec = _type({**obj, "type": "record"}, where)
        assert isinstance(rec, Record)
        mc = obj.get("max_column_id")
        return InternalSchema(int(obj.get("version-id", 0)), int(mc) if mc is not None else None, rec)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CorruptFileError(where, f"cannot parse an InternalSchema: {e!r}") from None


def parse_history(text: str, where: str) -> dict[int, InternalSchema]:
    """The versions of a history file (``{"schemas": [...]}``), by version id."""
    try:
        obj = json.loads(text)
        schemas = obj["schemas"]
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptFileError(where, f"not a schema history (SerDeHelper.toJson of a list): {e!r}") from None
    out: dict[int, InternalSchema] = {}
    for s in schemas:
        sch = parse_internal_schema(s, where)
        out[sch.version_id] = sch
    return out


# -- Arrow ----------------------------------------------------------------------------------------------------------
_DECIMAL = re.compile(r"decimal(?:_bytes|_fixed)?\((\d+),\s*(\d+)\)")
_PRIMITIVES = {
    "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(), "double": pa.float64(),
    "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"), "string": pa.string(), "binary": pa.binary(),
    "local-timestamp-micros": pa.timestamp("us"), "local_timestamp_micros": pa.timestamp("us"),
}


def arrow_type(t: IType, table: str, column: str) -> pa.DataType:
    """The Arrow type of an InternalSchema type, as pyhudi reads the Avro type Hudi converts it to. Every field
    is nullable, whatever its ``optional``: Hudi's ``InternalSchemaMerger`` reads with
    ``ignoreRequiredAttribute``."""
    if isinstance(t, Record):
        return pa.struct([arrow_field(f, table, f"{column}.{f.name}") for f in t.fields])
    if isinstance(t, Array):
        return pa.list_(pa.field("element", arrow_type(t.element, table, f"{column}.element"),
                                 nullable=True))
    if isinstance(t, Map):
        if t.key != "string":
            raise UnsupportedTableError(f"{table}: column {column!r} is a map with {t.key} keys in the table's "
                                        "InternalSchema; pyhudi reads maps with string keys only")
        return pa.map_(pa.string(), arrow_type(t.value, table, f"{column}.value"))
    if t in _PRIMITIVES:
        return _PRIMITIVES[t]
    m = _DECIMAL.fullmatch(t)
    if m:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    raise UnsupportedTableError(f"{table}: column {column!r} has InternalSchema type {t!r}, which pyhudi does not "
                                "read")


def arrow_field(f: Field, table: str, column: str | None = None) -> pa.Field:
    return pa.field(f.name, arrow_type(f.type, table, column or f.name), nullable=True)


def to_arrow(schema: InternalSchema, table: str) -> pa.Schema:
    """The columns of an InternalSchema (meta columns included when it has them), in its order, under its
    names."""
    return pa.schema([arrow_field(f, table) for f in schema.fields])


# -- history ----------------------------------------------------------------------------------------------------
def schema_folder(base_path: str) -> str:
    return posixpath.join(base_path, ".hoodie", SCHEMA_FOLDER)


def history_files(storage: Storage, base_path: str) -> list[str]:
    """Names of the files in ``.hoodie/.schema`` (Hudi creates the folder empty in every table)."""
    return sorted(e.name for e in storage.list(schema_folder(base_path)) if not e.is_dir)


def _instant_of(name: str) -> str:
    # <instant>.schemacommit or <instant>_<completion>.schemacommit (InstantFileNameParser.extractTimestamp)
    return name.split(".", 1)[0].split("_", 1)[0]


def refusal(table: str, why: str, what: str, consequence: str) -> UnsupportedTableError:
    """The refusal of ``what`` ("to read it", "an upsert", ...) on a schema-on-read table; ``why`` says what
    makes it one, ``consequence`` why pyhudi refuses."""
    return UnsupportedTableError(f"{table} uses schema-on-read evolution (hoodie.schema.on.read.enable: {why}); "
                                 f"pyhudi refuses {what}: {consequence}")


def can_update_schema(metadata: dict[str, Any]) -> bool:
    """Whether a commit's operation can change the table's schema (``WriteOperationType.canUpdateSchema``: not a
    compaction, clustering, log compaction or indexing)."""
    return str(metadata.get("operationType") or "").upper() not in ("COMPACT", "CLUSTER", "LOG_COMPACT", "INDEX")


@dataclass(frozen=True)
class SchemaOnRead:
    """A read of a schema-on-read table: the query's InternalSchema and what maps each file's columns to it
    (picklable: it travels to Spark tasks inside the read's description, so everything a task needs is resolved
    on the driver)."""

    table: str  # the base path, for messages
    query: InternalSchema
    versions: tuple[InternalSchema, ...]  # by version id, ascending
    history_file: str
    #: the ``latestSchema`` of completed commits, by instant (step 1): those of the active timeline, and the
    #: archived ones once :func:`with_archived` has read them
    committed: Mapping[str, InternalSchema] = field(default_factory=dict, hash=False)
    #: the first instant of the active timeline: a file of an earlier instant has an archived commit
    active_start: str | None = None
    archived_read: bool = False

    def version_for(self, instant: str, path: str) -> InternalSchema:
        """The schema a file (or log block) written by ``instant`` holds: its commit's ``latestSchema``, else the
        history's version of that id, else the greatest below it (``InternalSchemaUtils.searchSchema``)."""
        own = self.committed.get(instant)
        if own is not None:
            return own
        if not self.archived_read and self.active_start is not None and instant < self.active_start:
            raise refusal(self.table, f"history {self.history_file}", f"to read {path}",
                          f"its instant {instant} is archived and its commit metadata, which names the schema it "
                          "was written with, was not read")
        try:
            v = int(instant)
        except ValueError:
            raise CorruptFileError(path, f"its instant {instant!r} is not an instant time: its InternalSchema "
                                         "version is unknown") from None
        found = [s for s in self.versions if s.version_id <= v]
        if not found:
            raise refusal(self.table, f"history {self.history_file}", f"to read {path}",
                          f"it was written at {instant}, before the oldest InternalSchema version in the history "
                          f"({self.versions[0].version_id}): its field ids are unknown")
        return found[-1]


def _active_start(timeline: ActiveTimeline) -> str | None:
    """The first instant of the active timeline, in any state: earlier ones were archived."""
    files = timeline.all_instant_files
    return files[0].requested_time if files else None


def valid_history_files(storage: Storage, base_path: str, timeline: ActiveTimeline) -> list[str]:
    """The completed history files, in name order (the last is the current history), less the residues of
    failed writes: those whose instant lies in the active timeline's range but is no completed commit there.
    Older ones belong to archived commits."""
    names = [n for n in history_files(storage, base_path) if n.endswith("." + SCHEMA_COMMIT_ACTION)]
    if not names:
        return names
    valid = {i.requested_time for i in timeline.completed_commits()}
    first = _active_start(timeline)
    return [n for n in names if _instant_of(n) in valid or (first is not None and _instant_of(n) < first)]


def committed_schemas(timeline: ActiveTimeline | ArchivedTimeline, out: dict[str, InternalSchema],
                      since: str | None = None) -> None:
    """Add to ``out`` the ``latestSchema`` of every completed commit of ``timeline`` (requested at or after
    ``since``), by instant; versions equal in JSON are shared."""
    seen: dict[str, InternalSchema] = {}
    for inst in timeline.completed_commits():
        if since is not None and inst.requested_time < since:
            continue
        latest = (timeline.read_commit_metadata(inst).get("extraMetadata") or {}).get(LATEST_SCHEMA_KEY)
        if latest:
            if latest not in seen:
                seen[latest] = parse_internal_schema(latest, f"commit {inst.requested_time} "
                                                             f"(extraMetadata.{LATEST_SCHEMA_KEY})")
            out[inst.requested_time] = seen[latest]


def load_history(storage: Storage, base_path: str, timeline: ActiveTimeline, query: InternalSchema) -> SchemaOnRead:
    """The current history (see the module docstring) with ``query`` and the ``latestSchema`` of the active
    timeline's commits; UnsupportedTableError when the table has no history."""
    names = valid_history_files(storage, base_path, timeline)
    if not names:
        raise refusal(base_path, f"its commits record an InternalSchema under extraMetadata.{LATEST_SCHEMA_KEY}",
                      "to read it", f"{schema_folder(base_path)} holds no history of a completed commit, so its "
                                    "files' columns cannot be mapped")
    path = posixpath.join(schema_folder(base_path), names[-1])
    with storage.open_input(path) as f:
        text = f.read().decode("utf-8")
    versions = parse_history(text, path)
    if not versions:
        raise CorruptFileError(path, "the schema history holds no schema")
    committed: dict[str, InternalSchema] = {}
    committed_schemas(timeline, committed)
    return SchemaOnRead(base_path, query, tuple(versions[k] for k in sorted(versions)), path, committed,
                        _active_start(timeline))


def with_archived(sor: SchemaOnRead, storage: Storage, config: TableConfig, instants: Iterable[str]) -> SchemaOnRead:
    """``sor`` able to map files of ``instants`` (the base instants of the file slices a read plans; log blocks
    come after them): when one is older than the active timeline, the archived commits' ``latestSchema`` from it
    on are read from the archived timeline (on the driver)."""
    if sor.archived_read or sor.active_start is None:
        return sor
    oldest = min((i for i in instants if i < sor.active_start), default=None)
    if oldest is None:
        return sor
    committed = dict(sor.committed)
    if LsmHistory.for_table(storage, sor.table, config).latest_version() > 0:
        committed_schemas(ArchivedTimeline.load(storage, sor.table, config), committed, since=oldest)
    return replace(sor, committed=committed, archived_read=True)

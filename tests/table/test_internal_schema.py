"""Hudi's InternalSchema JSON (``SerDeHelper``), its history and version search, and its Arrow types."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pytest

from pyhudi.errors import CorruptFileError, UnsupportedTableError
from pyhudi.table.internal_schema import (
    Array,
    Map,
    Record,
    SchemaOnRead,
    parse_history,
    parse_internal_schema,
    to_arrow,
    valid_history_files,
    with_archived,
)
from pyhudi.table.properties import meta_path, read_table_config
from tests.support.sor_tables import LOCAL, Arr, F, MapT, Rec, SorTable, history_json, internal_schema_json

FIELDS = (F(0, "id", "string", optional=False), F(1, "n", "int"), F(2, "d", "decimal(10, 2)"), F(3, "day", "date"),
          F(4, "at", "timestamp"), F(5, "raw", "binary"), F(6, "ok", "boolean"), F(7, "x", "double"),
          F(8, "st", Rec((F(11, "a", "long"), F(12, "b", "float")))), F(9, "tags", Arr(13, "string", False)),
          F(10, "m", MapT(14, 15, "int")))


def test_parse_every_json_node() -> None:
    text = internal_schema_json(20260101000000000, FIELDS)
    assert text.startswith('{"max_column_id":15,"version-id":20260101000000000,"type":"record","fields":[{"id":0,')
    s = parse_internal_schema(text, "<test>")
    assert (s.version_id, s.max_column_id) == (20260101000000000, 15)
    assert [f.id for f in s.fields] == list(range(11))
    assert s.fields[0].optional is False and s.fields[1].optional is True
    st = s.fields[8].type
    assert isinstance(st, Record) and [(f.id, f.name, f.type) for f in st.fields] == [(11, "a", "long"),
                                                                                   (12, "b", "float")]
    tags = s.fields[9].type
    assert isinstance(tags, Array) and (tags.element_id, tags.element, tags.element_optional) == (13, "string", False)
    m = s.fields[10].type
    assert isinstance(m, Map) and (m.key_id, m.key, m.value_id, m.value) == (14, "string", 15, "int")
    # every field nullable, optional or not: Hudi's InternalSchemaMerger reads with ignoreRequiredAttribute
    assert to_arrow(s, "t") == pa.schema([
        ("id", pa.string()), ("n", pa.int32()), ("d", pa.decimal128(10, 2)),
        ("day", pa.date32()), ("at", pa.timestamp("us", tz="UTC")), ("raw", pa.binary()), ("ok", pa.bool_()),
        ("x", pa.float64()), ("st", pa.struct([("a", pa.int64()), ("b", pa.float32())])),
        ("tags", pa.list_(pa.field("element", pa.string()))), ("m", pa.map_(pa.string(), pa.int32())),
    ])


def test_doc_and_missing_version() -> None:
    """``doc`` is optional; a schema without ``version-id`` is version 0 (``InternalSchema(fields)``)."""
    node = {"type": "record", "fields": [{"id": 0, "name": "a", "optional": True, "type": "int", "doc": "the a"}]}
    s = parse_internal_schema(json.dumps(node), "<test>")
    assert s.version_id == 0 and s.max_column_id is None and s.fields[0].doc == "the a"


def test_unsupported_types_refused() -> None:
    for t in ("time", "uuid", "fixed[4]", "timestamp-millis"):
        s = parse_internal_schema(internal_schema_json(1, (F(0, "c", t),)), "<test>")
        with pytest.raises(UnsupportedTableError, match=rf"t: column 'c' has InternalSchema type '{re.escape(t)}'"):
            to_arrow(s, "t")


def test_corrupt_json() -> None:
    with pytest.raises(CorruptFileError, match="cannot parse an InternalSchema"):
        parse_internal_schema('{"type": "record", "fields": [{"name": "a"}]}', "f.schemacommit")
    with pytest.raises(CorruptFileError, match="not a schema history"):
        parse_history("[]", "f.schemacommit")


def test_history_and_version_search() -> None:
    """Versions by id; a file takes the version of its instant, else the greatest below it
    (``InternalSchemaUtils.searchSchema``); before the oldest it is refused."""
    v = [internal_schema_json(i, (F(0, f"c{i}", "int"),)) for i in (30, 20)]
    versions = parse_history(history_json(v), "<h>")
    assert sorted(versions) == [20, 30]
    sor = SchemaOnRead("t", versions[30], (versions[20], versions[30]), "<h>")
    assert sor.version_for("20", "f").fields[0].name == "c20"
    assert sor.version_for("29", "f").fields[0].name == "c20"
    assert sor.version_for("30", "f").fields[0].name == "c30"
    assert sor.version_for("99", "f").fields[0].name == "c30"
    with pytest.raises(UnsupportedTableError, match=r"t uses schema-on-read evolution .*history <h>\); pyhudi "
                                                    r"refuses to read f: it was written at 19, before the oldest "
                                                    r"InternalSchema version in the history \(20\)"):
        sor.version_for("19", "f")


def test_current_history_file(tmp_path: Path) -> None:
    """Completed history files of completed commits, either name form, in name order; requested and inflight
    files, and files of instants not completed on the timeline, are not history."""
    m = SorTable(tmp_path / "t", (F(5, "id", "string"), F(6, "ts", "long")))
    c1 = m.write({"f0": [{"id": "k", "ts": 1}]})
    folder = Path(m.base) / ".hoodie" / ".schema"
    (folder / f"{c1}.schemacommit").write_text("{}")  # the layout-1 name of the same instant
    (folder / "20990101000000000.schemacommit").write_text("{}")  # no such commit
    names = valid_history_files(LOCAL, m.base, m.timeline())
    assert names[0] == f"{c1}.schemacommit" and len(names) == 2 and names[1].startswith(f"{c1}_")
    # a completed history file older than the active timeline belongs to an archived commit: it stays
    (folder / "20000101000000000_20000101000000001.schemacommit").write_text("{}")
    (folder / "20000101000000002.schemacommit.inflight").write_text("")
    names = valid_history_files(LOCAL, m.base, m.timeline())
    assert names[0] == "20000101000000000_20000101000000001.schemacommit" and len(names) == 3


def test_commit_latest_schema_before_the_history() -> None:
    """A file's schema is its instant's commit latestSchema when known (step 1 of
    InternalSchemaCache.searchSchemaAndCache), else the history's search (step 2); a file older than the active
    timeline whose archived commit was not read is refused, naming it; a malformed instant names the file."""
    v = [internal_schema_json(i, (F(0, f"c{i}", "int"),)) for i in (30, 20)]
    versions = parse_history(history_json(v), "<h>")
    sor = SchemaOnRead("t", versions[30], (versions[20], versions[30]), "<h>", {"35": versions[20]}, "25")
    assert sor.version_for("35", "f").fields[0].name == "c20"  # its commit's, though 30 <= 35
    assert sor.version_for("36", "f").fields[0].name == "c30"
    with pytest.raises(UnsupportedTableError, match=r"refuses to read old/f: its instant 24 is archived and its "
                                                    r"commit metadata, .* was not read"):
        sor.version_for("24", "old/f")
    with pytest.raises(CorruptFileError, match=r"f: its instant 'x3' is not an instant time"):
        sor.version_for("x3", "f")


def test_archived_commits_read_on_the_driver(tmp_path: Path) -> None:
    """with_archived reads the archived commits' schemas when a planned file is older than the active timeline;
    a table without an archived timeline falls back to the history search, as Hudi does."""
    m = SorTable(tmp_path / "t", (F(5, "id", "string"), F(6, "ts", "long")))
    m.write({"f0": [{"id": "k", "ts": 1}]})
    v = [internal_schema_json(i, (F(0, f"c{i}", "int"),)) for i in (30, 20)]
    versions = parse_history(history_json(v), "<h>")
    sor = SchemaOnRead(m.base, versions[30], (versions[20], versions[30]), "<h>", {}, "25")
    cfg = read_table_config(LOCAL, meta_path(m.base))
    assert with_archived(sor, LOCAL, cfg, ["25", "40"]) is sor  # nothing older than the active timeline
    old = with_archived(sor, LOCAL, cfg, ["24"])
    assert old.archived_read and old.version_for("24", "f").fields[0].name == "c20"

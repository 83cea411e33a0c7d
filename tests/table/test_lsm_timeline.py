"""The LSM timeline's on-disk format (``_version_``, ``manifest_N``, ``<min>_<max>_<layer>.parquet``) as Hudi 1.x
writes and reads it, and the archived / full timeline views."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pyhudi.errors import CorruptFileError, PyHudiError
from pyhudi.io import avro
from pyhudi.table.lsm_timeline import (
    ARROW_SCHEMA,
    ArchivedTimeline,
    FullTimeline,
    LsmEntry,
    LsmFile,
    LsmHistory,
    Manifest,
    ManifestEntry,
    compacted_name,
    decode_file,
    encode_file,
    history_dir_for,
)
from pyhudi.table.properties import read_table_config
from pyhudi.table.timeline import COMMIT, ActiveTimeline, Instant, State
from tests.support.fabricate import make_table
from tests.support.storage import LOCAL

T1, T2, T3 = "20260101000000000", "20260101000001000", "20260101000002000"


# -- manifest -----------------------------------------------------------------------------------------------------
def test_manifest_json_is_jacksons_pretty_print() -> None:
    # the exact text of apache/hudi TestHoodieLSMTimelineManifest
    m = Manifest((ManifestEntry("file1", 1024), ManifestEntry("file2", 2048)))
    expected = (
        "{\n"
        '  "files" : [ {\n'
        '    "fileName" : "file1",\n'
        '    "fileLen" : 1024\n'
        "  }, {\n"
        '    "fileName" : "file2",\n'
        '    "fileLen" : 2048\n'
        "  } ]\n"
        "}"
    )
    assert m.to_json() == expected
    assert json.loads(m.to_json()) == {"files": [{"fileName": "file1", "fileLen": 1024}, {"fileName": "file2", "fileLen": 2048}]}
    assert Manifest().to_json() == '{\n  "files" : [ ]\n}'


def test_manifest_reads_what_hudi_writes() -> None:
    text = Manifest((ManifestEntry(f"{T1}_{T2}_0.parquet", 10), ManifestEntry(f"{T1}_{T3}_1.parquet", 20))).to_json()
    m = Manifest.from_json(text)
    assert m.file_names == [f"{T1}_{T2}_0.parquet", f"{T1}_{T3}_1.parquet"]
    assert Manifest.from_json("") == Manifest()  # Hudi reads an empty manifest as no files
    assert Manifest.from_json('{"files":[],"other":1}') == Manifest()  # unknown properties are ignored
    with pytest.raises(CorruptFileError, match="not an LSM timeline manifest"):
        Manifest.from_json("{not json")
    with pytest.raises(CorruptFileError, match="not an LSM timeline file name"):
        Manifest.from_json('{"files":[{"fileName":"x.parquet","fileLen":1}]}')


def test_manifest_changes_keep_order() -> None:
    a, b, c = (ManifestEntry(f"{t}_{t}_0.parquet", 1) for t in (T1, T2, T3))
    m = Manifest((a, b)).with_changes(add=c)
    assert m.files == (a, b, c)
    assert m.with_changes(remove=[a.file_name, b.file_name], add=ManifestEntry("x", 2)).file_names == [c.file_name, "x"]
    assert a.file_name in m and "nope" not in m


# -- file names ---------------------------------------------------------------------------------------------------
def test_file_names() -> None:
    f = LsmFile.parse(f"{T1}_{T2}_0.parquet")
    assert f == LsmFile(T1, T2, 0) and f.name == f"{T1}_{T2}_0.parquet"
    for bad in (f"{T1}_{T2}_10.parquet", f"{T1}_{T2}.parquet", f"{T1}_{T2}_0.parquet.tmp", "manifest_1"):
        assert LsmFile.parse(bad) is None, bad
    assert compacted_name([f"{T2}_{T3}_0.parquet", f"{T1}_{T2}_0.parquet"]) == f"{T1}_{T3}_1.parquet"
    with pytest.raises(PyHudiError, match="layer 9"):
        compacted_name([f"{T1}_{T2}_9.parquet"])
    assert LsmFile(T1, T2, 0).overlaps(T2, None) and not LsmFile(T1, T2, 0).overlaps(T3, None)


# -- parquet ------------------------------------------------------------------------------------------------------
def _entries() -> list[LsmEntry]:
    return [
        LsmEntry(T1, T2, COMMIT, b"commit-bytes", None),
        LsmEntry(T2, T3, "clean", b"clean-meta", b"clean-plan"),
        LsmEntry(T3, None, "rollback", None, None),
    ]


def test_parquet_schema_is_parquet_avros() -> None:
    """What parquet-avro's AvroSchemaConverter makes of HoodieLSMTimelineInstant: optional UTF-8 binaries for the
    nullable strings, optional binaries for the nullable bytes, a required int32 version; the footer holds the
    compiled Avro schema and the writer model, and no Arrow schema."""
    data = encode_file(_entries())
    pf = pq.ParquetFile(pa.BufferReader(data))
    cols = {pf.schema.column(i).name: pf.schema.column(i) for i in range(len(pf.schema))}
    assert list(cols) == ["instantTime", "completionTime", "action", "metadata", "plan", "version"]
    for name in ("instantTime", "completionTime", "action"):
        c = cols[name]
        assert (c.physical_type, str(c.logical_type), c.max_definition_level, c.max_repetition_level) == (
            "BYTE_ARRAY", "String", 1, 0), name
    for name in ("metadata", "plan"):
        c = cols[name]
        assert (c.physical_type, str(c.logical_type), c.max_definition_level) == ("BYTE_ARRAY", "None", 1), name
    v = cols["version"]
    assert (v.physical_type, v.max_definition_level, v.max_repetition_level) == ("INT32", 0, 0)
    kv = pf.metadata.metadata
    assert set(kv) == {b"parquet.avro.schema", b"writer.model.name"}
    assert kv[b"writer.model.name"] == b"avro"
    schema = json.loads(kv[b"parquet.avro.schema"])
    assert schema["name"] == "HoodieLSMTimelineInstant" and schema["namespace"] == "org.apache.hudi.avro.model"
    assert kv[b"parquet.avro.schema"].decode() == avro.java_schema_json(avro.schema_json("HoodieLSMTimelineInstant"))
    assert schema["fields"][0] == {"name": "instantTime", "type": ["null", {"type": "string", "avro.java.string": "String"}], "default": None}
    assert schema["fields"][5] == {"name": "version", "type": "int", "default": 1}
    assert pf.metadata.num_row_groups == 1 and pf.metadata.num_rows == 3
    assert pf.metadata.row_group(0).column(0).compression == "GZIP"
    assert pq.ParquetFile(pa.BufferReader(encode_file(_entries(), compression="snappy"))).metadata.row_group(0).column(0).compression == "SNAPPY"


def test_parquet_round_trip() -> None:
    t = decode_file(encode_file(_entries()), "x")
    assert t.schema == ARROW_SCHEMA.remove_metadata()
    assert t.to_pylist() == [
        {"instantTime": T1, "completionTime": T2, "action": COMMIT, "metadata": b"commit-bytes", "plan": None, "version": 1},
        {"instantTime": T2, "completionTime": T3, "action": "clean", "metadata": b"clean-meta", "plan": b"clean-plan", "version": 1},
        {"instantTime": T3, "completionTime": None, "action": "rollback", "metadata": None, "plan": None, "version": 1},
    ]
    assert decode_file(encode_file(_entries()), "x", ["instantTime"]).column_names == ["instantTime"]
    with pytest.raises(CorruptFileError):
        decode_file(b"not parquet at all", "bad.parquet")
    with pytest.raises(CorruptFileError, match="lacks column"):
        decode_file(encode_file(_entries()), "x", ["nope"])


def test_entry_without_completion_time_completes_at_its_requested_time() -> None:
    assert LsmEntry(T3, None, "rollback").instant == Instant(T3, "rollback", State.COMPLETED, T3)


# -- the history folder and the archived timeline -----------------------------------------------------------------
def _history(tmp_path: Path) -> tuple[str, LsmHistory]:
    base = make_table(tmp_path / "t")
    h = LsmHistory.for_table(LOCAL, base)
    assert h.dir == f"{base}/.hoodie/timeline/history"
    assert history_dir_for(base, read_table_config(LOCAL, f"{base}/.hoodie")) == h.dir
    return base, h


def _put(h: LsmHistory, name: str, entries: list[LsmEntry], version: int, manifest: Manifest) -> Manifest:
    data = encode_file(entries)
    LOCAL.write_bytes(h.path(name), data)
    m = manifest.with_changes(add=ManifestEntry(name, len(data)))
    LOCAL.write_bytes(h.manifest_path(version), m.to_json().encode())
    LOCAL.write_bytes(h.version_path, str(version).encode())
    return m


def test_version_file_and_fallback(tmp_path: Path) -> None:
    _, h = _history(tmp_path)
    assert h.latest_version() == 0 and h.latest() == (0, Manifest())
    m1 = _put(h, f"{T1}_{T1}_0.parquet", _entries()[:1], 1, Manifest())
    _put(h, f"{T2}_{T3}_0.parquet", _entries()[1:], 2, m1)
    assert Path(h.version_path).read_bytes() == b"2"
    assert h.latest_version() == 2 and len(h.latest()[1].files) == 2
    Path(h.version_path).write_bytes(b"garbage")  # unreadable: the greatest manifest_N present
    assert h.latest_version() == 2
    Path(h.version_path).unlink()
    assert h.latest_version() == 2
    Path(h.version_path).write_bytes(b"1")  # _version_ wins over a newer manifest (one not committed yet)
    assert h.latest_version() == 1 and h.latest()[1].file_names == [f"{T1}_{T1}_0.parquet"]
    Path(h.version_path).write_bytes(b"7")
    with pytest.raises(CorruptFileError, match="missing"):
        h.latest()


def test_archived_timeline_reads_only_listed_files(tmp_path: Path) -> None:
    base, h = _history(tmp_path)
    m1 = _put(h, f"{T1}_{T1}_0.parquet", _entries()[:1], 1, Manifest())
    # a file no manifest lists (an archival that stopped before its manifest) is not read
    LOCAL.write_bytes(h.path(f"{T2}_{T3}_0.parquet"), encode_file(_entries()[1:]))
    at = ArchivedTimeline.load(LOCAL, base)
    assert [i.requested_time for i in at] == [T1] and at.version == 1
    _put(h, f"{T2}_{T3}_0.parquet", _entries()[1:], 2, m1)
    at = ArchivedTimeline.load(LOCAL, base)
    assert [(i.requested_time, i.action, i.completion_time) for i in at] == [
        (T1, COMMIT, T2), (T2, "clean", T3), (T3, "rollback", T3)]
    assert at.read_bytes(at.instants[0]) == b"commit-bytes"
    assert at.read_plan_bytes(at.instants[1]) == b"clean-plan"
    assert at.read_bytes(at.instants[2]) == b"" and at.read_content(at.instants[2]) is None
    with pytest.raises(CorruptFileError, match="no metadata"):
        at.read_completed(at.instants[2])
    with pytest.raises(PyHudiError, match="not in the archived timeline"):
        at.read_entry("20990101000000000")


def test_archived_content_decodes_avro(tmp_path: Path) -> None:
    base, h = _history(tmp_path)
    meta = {"partitionToWriteStats": {}, "compacted": False, "extraMetadata": {"schema": "s"}, "version": 1,
            "operationType": "UPSERT"}
    data = avro.write_container(meta, "HoodieCommitMetadata")
    _put(h, f"{T1}_{T1}_0.parquet", [LsmEntry(T1, T2, COMMIT, data)], 1, Manifest())
    at = ArchivedTimeline.load(LOCAL, base)
    assert at.read_commit_metadata(at.instants[0])["extraMetadata"] == {"schema": "s"}


def test_full_timeline_prefers_the_active_copy(tmp_path: Path) -> None:
    """An instant archived and still active (an archival that stopped before deleting the active files) is one
    instant, read from the active timeline."""
    base, h = _history(tmp_path)
    tl = ActiveTimeline.load(LOCAL, base)
    req = tl.create_requested(COMMIT, T2)
    tl.complete(tl.transition_to_inflight(req, None), b"active-bytes", T3)
    _put(h, f"{T1}_{T2}_0.parquet", [LsmEntry(T1, T2, COMMIT, b"a1"), LsmEntry(T2, T3, COMMIT, b"archived")], 1, Manifest())
    full = FullTimeline.load(LOCAL, base)
    assert full.requested_times() == [T1, T2]
    assert full.is_archived(T1) and not full.is_archived(T2)
    assert [i.requested_time for i in full.completed_commits()] == [T1, T2]
    assert full.archived.read_bytes(full.instants[1]) == b"archived"
    assert tl.reload().read_bytes(full.instants[1]) == b"active-bytes"

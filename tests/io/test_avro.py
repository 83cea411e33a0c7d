from __future__ import annotations

import json
import zipfile

import fastavro
import pytest

from pyhudi.errors import CorruptFileError
from pyhudi.io import avro
from tests.paths import TABLE_ZIPS_DIR as FIXTURES


def _fixture_avro_files() -> list[tuple[str, bytes]]:
    out = []
    for z in sorted(FIXTURES.glob("*.zip")):
        with zipfile.ZipFile(z) as zf:
            for name in zf.namelist():
                if (
                    "/.hoodie/" in name
                    and "/timeline/" in name
                    and not name.endswith("/")
                    and "__MACOSX" not in name
                ):
                    data = zf.read(name)
                    if data:
                        out.append((f"{z.name}:{name}", data))
    return out


def test_all_schemas_load() -> None:
    for name in avro.SCHEMA_NAMES:
        s = avro.load_schema(name)
        assert isinstance(s, dict) and s["name"] == f"org.apache.hudi.avro.model.{name}"


def test_fixture_timeline_files_reencode_byte_identical() -> None:
    """Every Avro file Hudi wrote in the fixtures: our shipped schema, printed as Java prints it, equals the
    header's schema, and re-encoding the record (with the file's sync marker) gives back the same bytes."""
    files = _fixture_avro_files()
    if not files:
        pytest.skip("fixtures not available")
    seen = set()
    for where, data in files:
        name = avro.container_schema_name(data, where)
        seen.add(name)
        assert avro.container_schema_json(data, where) == avro.java_schema_json(avro.schema_json(name)), where
        rec = avro.read_single(data, where, reader_schema=name)
        assert avro.write_container(rec, name, sync_marker=data[-16:]) == data, where
    assert seen >= {
        "HoodieCommitMetadata",
        "HoodieReplaceCommitMetadata",
        "HoodieRequestedReplaceMetadata",
        "HoodieCompactionPlan",
        "HoodieRollbackMetadata",
        "HoodieRollbackPlan",
        "HoodieIndexPlan",
        "HoodieIndexCommitMetadata",
    }


def test_container_round_trip_and_fastavro_compat() -> None:
    rec = {
        "startCleanTime": "20260101000000000",
        "timeTakenInMillis": 12,
        "totalFilesDeleted": 1,
        "earliestCommitToRetain": "20250101000000000",
        "partitionMetadata": {
            "p": {
                "partitionPath": "p",
                "policy": "KEEP_LATEST_COMMITS",
                "deletePathPatterns": ["a"],
                "successDeleteFiles": ["a"],
                "failedDeleteFiles": [],
                "isPartitionDeleted": False,
            }
        },
        "version": 2,
        "extraMetadata": {"savepointed_timestamps": ""},
    }
    data = avro.write_container(rec, "HoodieCleanMetadata")
    assert data[:4] == b"Obj\x01"
    got = avro.read_single(data)
    assert got["partitionMetadata"]["p"]["successDeleteFiles"] == ["a"]
    assert got["lastCompletedCommitTimestamp"] == "" and got["bootstrapPartitionMetadata"] is None
    # a generic Avro reader agrees, and the header has only avro.schema (like Java with no codec)
    import io

    r = fastavro.reader(io.BytesIO(data))
    assert list(r.metadata) == ["avro.schema"]
    assert json.loads(r.metadata["avro.schema"])["namespace"] == "org.apache.hudi.avro.model"
    assert list(r) == [got]
    assert avro.write_container([], "HoodieCleanerPlan")[:4] == b"Obj\x01"
    assert avro.read_container(avro.write_container([], "HoodieCleanerPlan")) == []


def test_datum_round_trip() -> None:
    plan = {
        "version": 1,
        "indexPartitionInfos": [
            {
                "version": 1,
                "metadataPartitionPath": "record_index",
                "indexUptoInstant": "20260101000000000",
                "extraMetadata": None,
            }
        ],
    }
    b = avro.encode_datum(plan, "HoodieIndexPlan")
    assert avro.decode_datum(b, "HoodieIndexPlan") == plan
    assert (
        avro.decode_datum(avro.encode_datum({}, "HoodieCommitMetadata"), "HoodieCommitMetadata")["version"]
        == 1
    )


def test_corrupt_inputs() -> None:
    with pytest.raises(CorruptFileError):
        avro.read_single(b"PAR1....", "x")
    good = avro.write_container({"policy": "KEEP_LATEST_COMMITS"}, "HoodieCleanerPlan")
    with pytest.raises(CorruptFileError):
        avro.read_single(good[:-20], "x")

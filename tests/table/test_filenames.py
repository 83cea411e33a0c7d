"""Hudi file naming: round trips, parsing of every data file name in the fixtures, partition metafiles."""

from __future__ import annotations

import os
import posixpath
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pyhudi.io.storage import Storage
from pyhudi.table.filenames import (
    PARTITION_METAFILE,
    PARTITION_METAFILE_PARQUET,
    BaseFileName,
    FileId,
    FileNameError,
    LogFileName,
    PartitionMetadata,
    WriteToken,
    is_base_file,
    is_log_file,
    make_base_file_name,
    make_file_id,
    make_log_file_name,
    make_write_token,
    parse_data_file_name,
    partition_depth,
    read_partition_metadata,
    write_partition_metadata,
)


def test_base_file_round_trip() -> None:
    name = "5a226868-2934-4f84-a16f-55124630c68d-0_0-27-52_20260307162434124.parquet"
    bf = BaseFileName.parse(name)
    assert bf == BaseFileName(
        "5a226868-2934-4f84-a16f-55124630c68d-0", "0-27-52", "20260307162434124", "parquet"
    )
    assert bf.name == name == make_base_file_name(bf.file_id, bf.write_token, bf.instant)
    assert WriteToken.parse(bf.write_token) == WriteToken(0, 27, 52)
    fid = FileId.parse(bf.file_id)
    assert fid == FileId("5a226868-2934-4f84-a16f-55124630c68d", 0) and fid.is_uuid
    hf = BaseFileName.parse("files-0000-0_0-5-4_00000000000000000.hfile")
    assert hf.file_id == "files-0000-0" and hf.extension == "hfile"
    assert FileId.parse(hf.file_id) == FileId("files-0000", 0) and not FileId.parse(hf.file_id).is_uuid


def test_log_file_round_trip() -> None:
    name = ".c923cb31-a2d3-49c6-8f47-4be96502c239-0_20260307162607806.log.1_0-104-236"
    lf = LogFileName.parse(name)
    assert lf == LogFileName("c923cb31-a2d3-49c6-8f47-4be96502c239-0", "20260307162607806", 1, "0-104-236")
    assert lf.name == name == make_log_file_name(lf.file_id, lf.instant, 1, "0-104-236")
    cdc = LogFileName.parse(".abc-0_20260307162607806.log.12_1-2-3.cdc")
    assert cdc.cdc and cdc.version == 12 and cdc.name == ".abc-0_20260307162607806.log.12_1-2-3.cdc"
    assert LogFileName.parse(".abc-0_001.log.2").write_token is None


def test_make_helpers() -> None:
    fid = make_file_id()
    assert FileId.parse(fid).index == 0 and FileId.parse(fid).is_uuid
    assert make_file_id("abc", 3) == "abc-3"
    assert make_write_token(2, 26, 56) == "2-26-56"
    with pytest.raises(ValueError):
        make_base_file_name("a_b", "0-0-0", "1")
    with pytest.raises(ValueError):
        make_base_file_name("a-0", "0-0", "1")
    with pytest.raises(ValueError):
        make_log_file_name("a-0", "1", 0)


@pytest.mark.parametrize(
    "bad",
    [
        ".hoodie_partition_metadata",
        "x.parquet",
        "a_b.parquet",
        ".a-0_1.parquet",
        "a-0_1-2-3_4.txt",
        ".a-0_1.log.x_1-2-3",
    ],
)
def test_not_data_files(bad: str) -> None:
    assert parse_data_file_name(bad) is None
    assert not is_base_file(bad) and not is_log_file(bad)


def test_parse_errors() -> None:
    with pytest.raises(FileNameError):
        BaseFileName.parse(".x")
    with pytest.raises(FileNameError):
        LogFileName.parse("x.log.1")
    with pytest.raises(FileNameError):
        WriteToken.parse("1-2")


def test_every_fixture_data_file_parses(fixture_tables: dict[str, Path]) -> None:
    n_base = n_log = 0
    for base in fixture_tables.values():
        for root, _dirs, files in os.walk(base):
            r = root + "/"
            in_meta_table = "/.hoodie/metadata/" in r and "/.hoodie/metadata/.hoodie/" not in r
            if "/.hoodie/" in r and not in_meta_table:
                continue  # timeline, properties, index definitions
            for name in files:
                if name.startswith(PARTITION_METAFILE):
                    continue
                parsed = parse_data_file_name(name)
                assert parsed is not None, posixpath.join(root, name)
                assert parsed.name == name
                WriteToken.parse(parsed.write_token or "0-0-0")
                FileId.parse(parsed.file_id)
                if isinstance(parsed, BaseFileName):
                    n_base += 1
                    assert parsed.extension in ("parquet", "hfile")
                else:
                    n_log += 1
                    assert parsed.version >= 1
    assert n_base > 50 and n_log > 50


def test_partition_metadata_of_fixtures(fixture_tables: dict[str, Path]) -> None:
    seen = 0
    for base in fixture_tables.values():
        for root, _dirs, files in os.walk(base):
            if PARTITION_METAFILE not in files:
                continue
            storage, path = Storage.from_uri(root)
            meta = read_partition_metadata(storage, path)
            rel = os.path.relpath(root, base)
            if "/.hoodie/metadata" not in root:
                assert meta.partition_depth == partition_depth("" if rel == "." else rel)
            assert len(meta.commit_time) == 17 and meta.commit_time.isdigit()
            text = Path(root, PARTITION_METAFILE).read_text()
            assert text.startswith("#partition metadata\n#")
            seen += 1
    assert seen > 10


def test_partition_metadata_text_format() -> None:
    now = datetime(2026, 3, 7, 8, 24, 37, tzinfo=UTC)
    text = PartitionMetadata("20260307162434124", 1).to_text(now)
    assert text == (
        "#partition metadata\n#Sat Mar 07 08:24:37 UTC 2026\ncommitTime=20260307162434124\npartitionDepth=1\n"
    )
    assert PartitionMetadata.parse_text(text) == PartitionMetadata("20260307162434124", 1)


def test_write_partition_metadata(tmp_path: Path) -> None:
    storage, base = Storage.from_uri(str(tmp_path))
    assert write_partition_metadata(storage, base, "2026/11/21", "20260101000000000")
    assert not write_partition_metadata(storage, base, "2026/11/21", "20260101000000001")  # exists: kept
    meta = read_partition_metadata(storage, posixpath.join(base, "2026/11/21"))
    assert meta == PartitionMetadata("20260101000000000", 3)
    assert sorted(os.listdir(tmp_path / "2026/11/21")) == [PARTITION_METAFILE]  # no temp file left
    assert write_partition_metadata(storage, base, "", "20260101000000000")
    assert read_partition_metadata(storage, base).partition_depth == 0
    assert write_partition_metadata(storage, base, "region=eu", "20260101000000002", base_format=True)
    pdir = posixpath.join(base, "region=eu")
    assert read_partition_metadata(storage, pdir) == PartitionMetadata("20260101000000002", 1)
    md = pq.read_metadata(posixpath.join(pdir, PARTITION_METAFILE_PARQUET)).metadata
    assert md[b"commitTime"] == b"20260101000000002" and md[b"partitionDepth"] == b"1"

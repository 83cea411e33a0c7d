from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from pyhudi.errors import ConfigError, CorruptFileError, StorageError
from pyhudi.io.storage import Storage
from pyhudi.table import properties as P
from pyhudi.table.properties import TableConfig

EXPECTED_CHECKSUMS = {
    "cow_v9_txns_complex_meta.zip": 2097361480,
    "cow_v9_txns_nonpart_meta.zip": 1176895311,
    "cow_v9_txns_simple_meta.zip": 2985977913,
    "cow_v9_txns_simple_overwrite.zip": 4067225530,
    "mor_v8_trips_8i3u1d.zip": 1197752875,
    "mor_v9_nonpartitioned_rollback.zip": 169463277,
    "mor_v9_txns_simple_meta.zip": 1101448031,
}


def _props_files(base: Path) -> list[Path]:
    return [
        base / ".hoodie" / "hoodie.properties",
        base / ".hoodie" / "metadata" / ".hoodie" / "hoodie.properties",
    ]


def test_fixture_properties_parse_and_checksum(fixture_tables: dict[str, Path]) -> None:
    assert set(fixture_tables) == set(EXPECTED_CHECKSUMS)
    storage = Storage.from_uri("/")[0]
    for zip_name, base in fixture_tables.items():
        cfg = P.read_table_config(storage, str(base / ".hoodie"))
        assert cfg.checksum == EXPECTED_CHECKSUMS[zip_name]
        assert cfg.computed_checksum() == EXPECTED_CHECKSUMS[zip_name]
        assert P.table_checksum(cfg.table_name, cfg.database_name or "") == EXPECTED_CHECKSUMS[zip_name]
        assert cfg.has_valid_checksum()
        assert cfg.timeline_layout_version == 2
        assert cfg.timeline_path == "timeline"
        assert cfg.timeline_history_path == "history"
        assert cfg.record_key_fields
        assert cfg.ordering_fields in (["txn_ts"], ["ts"])
        assert "files" in cfg.metadata_partitions and "record_index" in cfg.metadata_partitions
        assert cfg.metadata_partitions_inflight == []
        assert cfg.base_file_format == "PARQUET"
        assert cfg.populate_meta_fields
        assert cfg.create_schema is not None and cfg.create_schema.startswith('{"type":"record"')
        if zip_name.startswith("mor_v8"):
            assert cfg.table_version == 8 and cfg.initial_version == 8
            assert cfg.partition_fields == ["city"]
        else:
            assert cfg.table_version == 9 and cfg.initial_version == 9
            assert cfg.table_format == "native"
            assert cfg.index_defs_path == ".hoodie/.index_defs/index.json"
        assert cfg.table_type == (P.MERGE_ON_READ if zip_name.startswith("mor") else P.COPY_ON_WRITE)
        if "complex" in zip_name:
            assert cfg.record_key_fields == ["txn_id", "account_id"]
            assert cfg.key_generator_type == "COMPLEX"
        if "nonpart" in zip_name:
            assert cfg.partition_fields == []
            assert cfg.key_generator_type == "NON_PARTITION"
        assert cfg.hive_style_partitioning == ("overwrite" not in zip_name)
        # metadata table config
        mcfg = P.read_table_config(storage, str(base / ".hoodie" / "metadata" / ".hoodie"))
        assert mcfg.table_name == cfg.table_name + "_metadata"
        assert mcfg.has_valid_checksum() and mcfg.database_name is None
        assert mcfg.base_file_format == "HFILE" and not mcfg.populate_meta_fields
        assert mcfg.record_key_fields == ["key"] and mcfg.is_mor


def test_fixture_properties_reformat_identically(fixture_tables: dict[str, Path]) -> None:
    """Everything after the two comment lines is reproduced byte for byte (order, ':' and '=' escapes)."""
    for base in fixture_tables.values():
        for path in _props_files(base):
            raw = path.read_bytes().decode("latin-1")
            cfg = TableConfig.from_properties_text(raw)
            out = cfg.to_properties_text()
            assert out.splitlines()[2:] == raw.splitlines()[2:]
            assert out.startswith("#Updated at ")  # checksum valid -> Hudi's "Updated at" comment


def test_escaping_round_trip() -> None:
    props = {
        "a key": "v",
        "k:1": "x=y:z#!\\ end",
        "lead": " leading space",
        "ctl": "tab\there\nnew\rcr\fff",
        "uni": "caf\u00e9 \u2603 \U0001f600",
        "empty": "",
    }
    text = P.format_properties(props, "comment")
    assert "k\\:1=x\\=y\\:z\\#\\!\\\\ end" in text
    assert "a\\ key=v" in text
    assert "lead=\\ leading space" in text
    assert "uni=caf\\u00E9 \\u2603 \\uD83D\\uDE00" in text
    text.encode("ascii")
    back = P.parse_properties(text)
    assert back["a key"] == "v" and back["k:1"] == props["k:1"] and back["lead"] == props["lead"]
    assert back["ctl"] == props["ctl"] and back["empty"] == ""
    assert back["uni"] == props["uni"]


def test_java_parse_variants() -> None:
    text = "# c\n! c2\n  k1 = v1\nk2:v2\nk3 v3\nk4=multi\\\n   line\nk5\n"
    assert P.parse_properties(text) == {"k1": "v1", "k2": "v2", "k3": "v3", "k4": "multiline", "k5": ""}


def test_comment_lines_format() -> None:
    now = datetime(2026, 3, 7, 22, 25, 28, 693750, tzinfo=UTC)
    cfg = TableConfig.create("t1", record_key_fields=["id"], ordering_fields=["ts"])
    lines = cfg.to_properties_text(now).splitlines()
    assert lines[0] == "#Updated at 2026-03-07T22:25:28.693750Z"
    assert lines[1] == "#Sat Mar 07 22:25:28 UTC 2026"
    fresh = cfg.without([P.TABLE_CHECKSUM]).to_properties_text(now).splitlines()
    assert fresh[0] == "#Properties saved on 2026-03-07T22:25:28.693750Z"
    assert fresh[-1] == f"hoodie.table.checksum={P.table_checksum('t1', 'default')}"


def test_create_defaults_and_updates() -> None:
    cfg = TableConfig.create(
        "trips",
        table_type=P.MERGE_ON_READ,
        record_key_fields=["uuid"],
        partition_fields=["city"],
        ordering_fields=["ts"],
    )
    assert cfg.table_version == 9 and cfg.initial_version == 9 and cfg.timeline_layout_version == 2
    assert cfg.timeline_path == "timeline" and cfg.timeline_history_path == "history"
    assert cfg.key_generator_type == "SIMPLE" and cfg.is_mor
    assert cfg.record_merge_mode == "EVENT_TIME_ORDERING" and cfg.table_format == "native"
    assert cfg.has_valid_checksum()
    upd = cfg.with_updates({P.METADATA_PARTITIONS: "files,record_index"})
    assert upd.metadata_partitions == ["files", "record_index"] and cfg.metadata_partitions == []
    renamed = cfg.with_updates({P.TABLE_NAME: "other"})
    assert renamed.has_valid_checksum() and renamed.checksum != cfg.checksum
    with pytest.raises(TypeError):
        cfg["x"] = "y"  # type: ignore[index]
    assert TableConfig.create("np").key_generator_type == "NON_PARTITION"
    assert TableConfig.create("np").record_merge_mode == "COMMIT_TIME_ORDERING"


def test_storage_create_update_and_backup_protocol(tmp_path: Path) -> None:
    storage = Storage.from_uri(str(tmp_path))[0]
    meta = str(tmp_path / "t" / ".hoodie")
    cfg = TableConfig.create("t", record_key_fields=["id"], partition_fields=["p"], ordering_fields=["ts"])
    P.create_table_config(storage, meta, cfg)
    with pytest.raises(StorageError):
        P.create_table_config(storage, meta, cfg)
    assert P.read_table_config(storage, meta) == cfg
    text = (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text()
    assert text.startswith("#Properties saved on ")

    new = P.update_table_config(
        storage, meta, {P.METADATA_PARTITIONS: "files"}, deletes=[P.ARCHIVELOG_FOLDER]
    )
    assert new.metadata_partitions == ["files"] and P.ARCHIVELOG_FOLDER not in new
    assert P.read_table_config(storage, meta) == new
    assert not (tmp_path / "t" / ".hoodie" / "hoodie.properties.backup").exists()
    assert (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text().startswith("#Updated at ")

    # An update interrupted after deleting hoodie.properties: readers use the backup, the next update recovers.
    live = tmp_path / "t" / ".hoodie" / "hoodie.properties"
    backup = tmp_path / "t" / ".hoodie" / "hoodie.properties.backup"
    backup.write_bytes(live.read_bytes())
    live.unlink()
    assert P.read_table_config(storage, meta) == new
    again = P.update_table_config(storage, meta, {P.METADATA_PARTITIONS_INFLIGHT: "record_index"})
    assert again.metadata_partitions == ["files"] and again.metadata_partitions_inflight == ["record_index"]
    assert live.exists() and not backup.exists()

    # A stale backup next to a live file is simply dropped by recovery.
    backup.write_text("garbage")
    P.recover_table_config(storage, meta)
    assert not backup.exists() and P.read_table_config(storage, meta) == again


def test_timeline_zone() -> None:
    assert TableConfig.create("t").timeline_zone is UTC  # pyhudi's tables say their instant times are UTC
    assert TableConfig.create("t").to_dict()[P.TIMELINE_TIMEZONE] == "UTC"
    assert TableConfig({P.TABLE_NAME: "t"}).timeline_zone is UTC  # not said: UTC, as pyhudi always wrote
    assert TableConfig({P.TIMELINE_TIMEZONE: "LOCAL"}).timeline_zone is None
    with pytest.raises(ConfigError, match=r"hoodie.table.timeline.timezone='Asia/Shanghai'.*LOCAL or UTC"):
        TableConfig({P.TIMELINE_TIMEZONE: "Asia/Shanghai"}).timeline_zone  # noqa: B018


def test_an_incomplete_file_is_never_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """hoodie.properties cut anywhere (a torn write), emptied, damaged or without the keys Hudi always writes is
    refused naming the file, or the backup is used if there is one: never read with keys missing (a write would
    then store the config without them: the ordering fields, the metadata partitions). pyhudi writes the checksum
    last, so every cut of its own files lacks it or holds it cut."""
    monkeypatch.setattr(P, "_READ_RETRY_S", 0.0)  # no other process updates the file here
    storage = Storage.from_uri(str(tmp_path))[0]
    meta = str(tmp_path / "t" / ".hoodie")
    cfg = TableConfig.create("t", record_key_fields=["id"], partition_fields=["p"], ordering_fields=["ts"])
    P.create_table_config(storage, meta, cfg)
    good = P.update_table_config(storage, meta, {P.METADATA_PARTITIONS: "files,record_index"})
    live = tmp_path / "t" / ".hoodie" / "hoodie.properties"
    whole = live.read_bytes()
    assert whole.decode().splitlines()[-1].startswith(f"{P.TABLE_CHECKSUM}=")  # kept last through updates
    for cut in range(len(whole)):
        live.write_bytes(whole[:cut])
        with pytest.raises(CorruptFileError, match=rf"{live}: .*the table is neither read nor written until"):
            P.read_table_config(storage, meta)
    backup = tmp_path / "t" / ".hoodie" / "hoodie.properties.backup"
    backup.write_bytes(whole)
    live.write_bytes(whole[: len(whole) // 2])
    assert P.read_table_config(storage, meta) == good  # the backup, as during an update
    backup.unlink()
    damaged = {
        "": r"the file does not end with a line break",
        "garbage\n": r"hoodie\.table\.name is missing",
        whole.decode().replace(f"{P.TABLE_CHECKSUM}=", f"{P.TABLE_CHECKSUM}=9"): r"hoodie\.table\.checksum '9\d+' does not match",
        "".join(ln for ln in whole.decode().splitlines(True) if not ln.startswith(P.TABLE_TYPE)):
            r"hoodie\.table\.type is missing",
    }
    for text, pattern in damaged.items():
        live.write_text(text)
        with pytest.raises(CorruptFileError, match=rf"{live}: {pattern}"):
            P.read_table_config(storage, meta)
    live.unlink()
    with pytest.raises(StorageError, match=r"cannot read table config from .*hoodie\.properties: .*not found"):
        P.read_table_config(storage, meta)


def test_an_update_after_a_torn_live_file_restores_it_from_the_backup(tmp_path: Path) -> None:
    """A live file cut short beside a whole backup (an update cut while writing it): readers use the backup, and
    the next update restores the live file from it before changing it; it never deletes the whole backup and
    leaves the torn file."""
    storage = Storage.from_uri(str(tmp_path))[0]
    meta = str(tmp_path / "t" / ".hoodie")
    cfg = TableConfig.create("t", record_key_fields=["id"], partition_fields=["p"], ordering_fields=["ts"])
    P.create_table_config(storage, meta, cfg)
    live = tmp_path / "t" / ".hoodie" / "hoodie.properties"
    backup = tmp_path / "t" / ".hoodie" / "hoodie.properties.backup"
    whole = live.read_bytes()
    backup.write_bytes(whole)
    live.write_bytes(whole[: len(whole) // 2])
    assert P.read_table_config(storage, meta) == cfg
    new = P.update_table_config(storage, meta, {P.METADATA_PARTITIONS: "files"})
    assert new.metadata_partitions == ["files"] and new.ordering_fields == cfg.ordering_fields
    assert P.read_table_config(storage, meta) == new and not backup.exists()
    # a torn backup beside a whole live file is simply dropped
    backup.write_bytes(live.read_bytes()[:10])
    P.recover_table_config(storage, meta)
    assert not backup.exists() and P.read_table_config(storage, meta) == new


def test_a_reader_reads_again_while_another_process_writes_the_file(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Where writes are not atomic, a reader may find the live file half written and its backup already gone:
    it reads again after a moment, as Hudi's readers retry, before it calls the file damaged."""
    storage = Storage.from_uri(str(tmp_path))[0]
    meta = str(tmp_path / "t" / ".hoodie")
    cfg = TableConfig.create("t", record_key_fields=["id"])
    P.create_table_config(storage, meta, cfg)
    live = tmp_path / "t" / ".hoodie" / "hoodie.properties"
    whole = live.read_bytes()
    live.write_bytes(whole[:20])
    real_sleep = P.time.sleep

    def finish_writing(s: float) -> None:  # the other process completes its write while the reader waits
        live.write_bytes(whole)
        real_sleep(0)

    monkeypatch.setattr(P.time, "sleep", finish_writing)
    assert P.read_table_config(storage, meta) == cfg

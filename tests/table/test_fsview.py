"""File-system view: fixture tables agree with hudi-rs; visibility, replace, MOR log attachment rules."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from pyhudi.errors import PyHudiError
from pyhudi.io.storage import Storage
from pyhudi.table.fsview import FileEntry, FileSystemView, StaticListing, StorageListing
from pyhudi.table.timeline import Instant, State, Timeline

hudi = pytest.importorskip("hudi")


def _rs_slices(base: Path) -> list[tuple[str, str, str, str, tuple[str, ...]]]:
    t = hudi.HudiTableBuilder.from_base_uri(str(base)).build()
    return sorted(
        (s.partition_path, s.file_id, s.creation_instant_time, s.base_file_name, tuple(s.log_file_names))
        for s in t.get_file_slices()
    )


def _our_slices(view: FileSystemView) -> list[tuple[str, str, str, str, tuple[str, ...]]]:
    return sorted(
        (
            s.partition,
            s.file_id,
            s.base_instant,
            s.base_file.file_name if s.base_file else "",
            tuple(lf.file_name for lf in s.log_files),
        )
        for s in view.latest_file_slices()
    )


def test_fixture_views_agree_with_hudi_rs(fixture_tables: dict[str, Path]) -> None:
    for zip_name, base in fixture_tables.items():
        storage, bp = Storage.from_uri(str(base))
        view = FileSystemView.load(storage, bp)
        assert _our_slices(view) == _rs_slices(base), zip_name
        assert view.latest_file_slices(), zip_name


def test_fixture_partitions(fixture_tables: dict[str, Path]) -> None:
    parts = {}
    for zip_name, base in fixture_tables.items():
        storage, bp = Storage.from_uri(str(base))
        parts[zip_name] = sorted(StorageListing(storage, bp).list_partition_files())
    assert parts["cow_v9_txns_simple_meta.zip"] == ["region=apac", "region=eu", "region=us"]
    assert parts["cow_v9_txns_simple_overwrite.zip"] == ["apac", "eu", "us"]
    assert parts["cow_v9_txns_nonpart_meta.zip"] == [""]
    assert parts["mor_v8_trips_8i3u1d.zip"] == ["city=chennai", "city=san_francisco", "city=sao_paulo"]


def test_mor_v8_log_attached_by_completion_time(fixture_tables: dict[str, Path]) -> None:
    base = fixture_tables["mor_v8_trips_8i3u1d.zip"]
    storage, bp = Storage.from_uri(str(base))
    view = FileSystemView.load(storage, bp)
    g = view.file_group("city=sao_paulo", "8aa68f7e-afd6-4c94-b86c-8a886552e08d-0")
    assert g is not None
    assert [s.base_instant for s in g.slices] == ["20251220210108078", "20251220210129235"]
    old, new = g.slices
    # the delta commit 125441 precedes the compaction 129235; 130911 follows it
    assert [lf.instant for lf in old.log_files] == ["20251220210125441"]
    assert [lf.instant for lf in new.log_files] == ["20251220210130911"]
    # time travel to before the compaction: the old slice is the latest
    tt = FileSystemView.load(storage, bp, as_of="20251220210128625")
    s = tt.file_group("city=sao_paulo", "8aa68f7e-afd6-4c94-b86c-8a886552e08d-0")
    assert s is not None and s.latest_slice() is not None
    assert s.latest_slice().base_instant == "20251220210108078"  # type: ignore[union-attr]


def test_replaced_file_groups_are_excluded(fixture_tables: dict[str, Path]) -> None:
    base = fixture_tables["cow_v9_txns_simple_meta.zip"]
    storage, bp = Storage.from_uri(str(base))
    ids = {g.file_id for g in FileSystemView.load(storage, bp).file_groups("region=eu")}
    assert "2578f9c2-93be-4911-bb29-cda3106b5623-0" not in ids  # insert overwrite
    assert "d28b4196-9d69-4bce-953f-848063c813b9-0" not in ids  # clustering
    before = FileSystemView.load(storage, bp, as_of="20260307162449244")
    ids = {g.file_id for g in before.file_groups("region=eu")}
    assert "2578f9c2-93be-4911-bb29-cda3106b5623-0" in ids


# -- synthetic listings ---------------------------------------------------------------------------------------
FA = "11111111-1111-1111-1111-111111111111-0"


def done(t: str, c: str, action: str = "deltacommit") -> Instant:
    return Instant(t, action, State.COMPLETED, c)


def test_uncommitted_files_are_invisible() -> None:
    files = {
        "p": [
            FileEntry(f"{FA}_0-1-1_100.parquet", 10),
            FileEntry(f"{FA}_0-1-1_200.parquet", 10),  # inflight
            FileEntry(f".{FA}_150.log.1_0-1-1", 5),
            FileEntry(f".{FA}_160.log.1_0-1-1", 5),  # inflight delta commit
            FileEntry(".hoodie_partition_metadata"),
            FileEntry(f".{FA}_0-1-1_100.parquet.abc.tmp"),
        ]
    }
    tl = Timeline(
        [
            done("100", "101", "commit"),
            done("150", "151"),
            Instant("160", "deltacommit", State.INFLIGHT),
            Instant("200", "commit", State.REQUESTED),
        ]
    )
    view = FileSystemView.build(files, tl)
    (g,) = view.file_groups()
    (s,) = g.slices
    assert s.base_instant == "100" and s.base_file is not None and s.base_file.size == 10
    assert [lf.instant for lf in s.log_files] == ["150"]
    assert s.relative_paths == (f"p/{FA}_0-1-1_100.parquet", f"p/.{FA}_150.log.1_0-1-1")
    assert s.total_size == 15


def test_archived_instants_count_as_completed() -> None:
    files = {"": [FileEntry(f"{FA}_0-1-1_050.parquet")]}
    view = FileSystemView.build(files, Timeline([done("100", "101", "commit")]))
    assert [s.base_instant for s in view.latest_file_slices()] == ["050"]


def test_log_only_file_group_and_v6_rule() -> None:
    files = {
        "": [
            FileEntry(f".{FA}_100.log.1_0-1-1"),
            FileEntry(f".{FA}_100.log.2_0-1-1"),
            FileEntry(f".{FA}_200.log.1_0-1-1"),
        ]
    }
    tl = Timeline([done("100", "110"), done("200", "210")])
    (s,) = FileSystemView.build(files, tl).latest_file_slices()
    assert s.base_file is None and s.base_instant == "100"
    assert [lf.file_name for lf in s.log_files] == [
        f".{FA}_100.log.1_0-1-1",
        f".{FA}_100.log.2_0-1-1",
        f".{FA}_200.log.1_0-1-1",
    ]
    # before table version 8 a log file names its base instant: 200 starts its own slice
    v6 = FileSystemView.build(files, tl, table_version=6)
    assert [x.base_instant for x in v6.file_groups()[0].slices] == ["100", "200"]


def test_pending_compaction_log_goes_to_previous_slice() -> None:
    files = {
        "": [
            FileEntry(f"{FA}_0-1-1_100.parquet"),
            FileEntry(f"{FA}_0-1-1_300.parquet"),
            FileEntry(f".{FA}_250.log.1_0-1-1"),
        ]
    }
    tl = Timeline(
        [done("100", "101", "commit"), done("250", "320"), Instant("300", "compaction", State.INFLIGHT)]
    )
    (s,) = FileSystemView.build(files, tl).latest_file_slices()
    assert s.base_instant == "100" and [lf.instant for lf in s.log_files] == ["250"]
    tl2 = Timeline([done("100", "101", "commit"), done("250", "320"), done("300", "310", "commit")])
    (s2,) = FileSystemView.build(files, tl2).latest_file_slices()
    assert s2.base_instant == "300" and [lf.instant for lf in s2.log_files] == ["250"]


def test_archived_log_is_placed_by_its_archived_completion_time() -> None:
    """Deltacommits older than the active timeline (archived): the one requested before the compaction 300 but
    completed after it (305) belongs to the compacted slice, the one completed before it (260) to the old slice;
    their completion times come from the archive, asked once and only for the logs a newer base file makes
    undecided."""
    FB = "22222222-2222-2222-2222-222222222222-0"
    files = {
        "": [
            FileEntry(f"{FA}_0-1-1_100.parquet"),
            FileEntry(f"{FA}_0-1-1_300.parquet"),
            FileEntry(f".{FA}_200.log.1_0-1-1"),
            FileEntry(f".{FA}_250.log.1_0-1-1"),
            FileEntry(f".{FA}_400.log.1_0-1-1"),
            FileEntry(f"{FB}_0-1-1_100.parquet"),
            FileEntry(f".{FB}_150.log.1_0-1-1"),  # archived, but no newer base: the slice is 100 whatever it says
        ]
    }
    tl = Timeline([done("300", "310", "commit"), done("400", "410")])  # 100..250 were archived
    asked: list[set[str]] = []

    def archived(instants: Iterable[str]) -> dict[str, str]:
        asked.append(set(instants))
        return {t: c for t, c in {"200": "305", "250": "260", "150": "160"}.items() if t in asked[-1]}

    view = FileSystemView.build(files, tl, archived=archived)
    assert asked == [{"200", "250"}]
    g = view.file_group("", FA)
    assert g is not None
    old, new = g.slices
    assert (old.base_instant, [lf.instant for lf in old.log_files]) == ("100", ["250"])
    assert (new.base_instant, [lf.instant for lf in new.log_files]) == ("300", ["200", "400"])
    assert [lf.completion_time for lf in new.log_files] == ["305", "410"]
    gb = view.file_group("", FB)
    assert gb is not None and [lf.instant for s in gb.slices for lf in s.log_files] == ["150"]
    # an incremental view ending before 305 does not see the deltacommit that completed then
    early = FileSystemView.build(files, tl, archived=archived, completed_by="300")
    g = early.file_group("", FA)
    assert g is not None and [lf.instant for s in g.slices for lf in s.log_files] == ["250"]
    # unknown completion times are refused, naming the log file, never guessed
    with pytest.raises(PyHudiError, match=rf"log file \.{FA}_200\.log\.1_0-1-1 .*archived"):
        FileSystemView.build(files, tl, table="/t")
    with pytest.raises(PyHudiError, match=r"/t: log file .*_250\.log.* not in the archived timeline"):
        FileSystemView.build(files, tl, archived=lambda ts: {"200": "305"}, table="/t")
    # without a newer base file nothing is asked
    only_old = {"": [e for e in files[""] if not e.name.startswith(f"{FA}_0-1-1_300")]}
    asked.clear()
    FileSystemView.build(only_old, tl, archived=archived)
    assert asked == []


def test_static_listing_and_replaced() -> None:
    listing = StaticListing({"a/b": [FileEntry(f"{FA}_0-1-1_100.parquet")]})
    tl = Timeline([done("100", "101", "commit")])
    view = FileSystemView.build(listing.list_partition_files(), tl)
    assert view.partitions() == ["a/b"] and len(view.latest_base_files("a/b")) == 1
    assert (
        FileSystemView.build(listing.list_partition_files(), tl, replaced={"a/b": [FA]}).file_groups() == []
    )


def test_storage_listing_nested_partitions(tmp_path: Path) -> None:
    for d in ("2026/11/21", "2026/11/22"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / ".hoodie_partition_metadata").write_text("partitionDepth=3\n")
        (tmp_path / d / f"{FA}_0-1-1_100.parquet").write_bytes(b"x")
    (tmp_path / "not_a_partition").mkdir()
    (tmp_path / "not_a_partition" / "f").write_bytes(b"")
    (tmp_path / ".hoodie").mkdir()
    storage, bp = Storage.from_uri(str(tmp_path))
    got = StorageListing(storage, bp).list_partition_files()
    assert sorted(got) == ["2026/11/21", "2026/11/22"]
    view = FileSystemView.build(got, Timeline([done("100", "101", "commit")]))
    assert [b.relative_path for b in view.latest_base_files()] == [
        f"2026/11/21/{FA}_0-1-1_100.parquet",
        f"2026/11/22/{FA}_0-1-1_100.parquet",
    ]


def test_as_of_on_a_loaded_view(fixture_tables: dict[str, Path]) -> None:
    base = fixture_tables["cow_v9_txns_simple_meta.zip"]
    storage, bp = Storage.from_uri(str(base))
    view = FileSystemView.from_listing(storage, bp)
    early = "20260307162440672"
    a = sorted(s.base_file_path or "" for s in view.latest_file_slices(None, as_of=early))
    b = sorted(
        s.base_file_path or "" for s in FileSystemView.load(storage, bp, as_of=early).latest_file_slices()
    )
    assert a == b and all(p.split("_")[-1] <= early + ".parquet" for p in a)
    assert len(a) == 3
    assert view.at(None) is view


def test_a_table_inside_a_partition_folder_is_not_part_of_the_outer_table(tmp_path: Path) -> None:
    """Another table's folder below a table (made by another tool: pyhudi refuses to create one there) holds none
    of the outer table's partitions: its partition folders, files and ``.hoodie`` are left out of the listing (its
    metadata folder was taken for a partition, and the outer table's services failed)."""
    import pyarrow as pa

    from pyhudi.errors import ConfigError
    from pyhudi.table.table import Table
    from tests.support.fabricate import Clock, commit, make_table
    from tests.support.storage import LOCAL

    base = make_table(tmp_path / "outer")
    clock = Clock()
    commit(base, clock, {"region=eu": [("aaaa-0", [("k1", 1)])]})
    before = StorageListing(LOCAL, base).list_partition_files()
    inner = make_table(tmp_path / "outer" / "region=eu" / "inner")
    commit(inner, clock, {"region=us": [("bbbb-0", [("k2", 1)])]})
    (Path(inner) / ".hoodie" / "metadata" / "files").mkdir(parents=True)
    (Path(inner) / ".hoodie" / "metadata" / "files" / ".hoodie_partition_metadata").write_text("x")
    assert StorageListing(LOCAL, base).list_partition_files() == before
    # a .hoodie right in one of this table's partition folders: the partition keeps its files, as in Hudi
    (Path(base) / "region=eu" / ".hoodie" / "timeline").mkdir(parents=True)
    (Path(base) / "region=eu" / ".hoodie" / "hoodie.properties").write_text("x")
    assert StorageListing(LOCAL, base).list_partition_files() == before
    with pytest.raises(ConfigError, match=r"lies inside the Hudi table at .*outer"):
        Table.create(str(tmp_path / "outer" / "region=eu" / "x"), pa.schema([("id", pa.string())]),
                     {"hoodie.datasource.write.recordkey.field": "id"})
    assert not (tmp_path / "outer" / "region=eu" / "x").exists()


def test_a_metadata_table_inside_its_data_tables_hoodie_is_listed(tmp_path: Path) -> None:
    """The metadata table lives in its data table's ``.hoodie``: the nested-table rule looks below the listed
    table's own folder only (a check on the whole path left the metadata table with no partitions)."""
    from tests.support.fixtures import unzip_table
    from tests.support.storage import LOCAL

    base = unzip_table("cow_v9_txns_simple_meta.zip", tmp_path)
    mdt = StorageListing(LOCAL, f"{base}/.hoodie/metadata").list_partition_files()
    assert mdt.get("files")

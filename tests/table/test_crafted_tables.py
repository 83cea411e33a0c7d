"""A crafted table cannot make pyhudi delete, write or read outside itself: rollback plans, markers, clean
plans, hoodie.properties and symbolic links that lead out are refused with an error naming the file that
carried the bad name, and a full listing (with hashes) of the folder around the table shows nothing outside it
changed. The storages the tests hand in are not rooted: the table code roots them itself."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pyhudi.errors import ConfigError, CorruptFileError, UnsafePathError
from pyhudi.services import clean as clean_mod
from pyhudi.services import rollback as rollback_mod
from pyhudi.services.clean import clean
from pyhudi.services.rollback import rollback_failed_writes
from pyhudi.table.properties import update_table_config
from pyhudi.table.table import Table
from pyhudi.table.timeline import CLEAN, ROLLBACK, ActiveTimeline
from tests.support.fabricate import Clock, commit, make_table
from tests.support.storage import LOCAL
from tests.support.tree import snapshot


def outside(snap: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in snap.items() if not k.startswith("around/t/")}


class Layout:
    """<tmp>/around/t: a table with two commits on file group f1-0 (region=eu) and one pending commit; beside it
    <tmp>/around/victim holding files named like the table's data files, and <tmp>/secret.txt."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path
        self.parent = tmp_path / "around"
        self.base = make_table(self.parent / "t")
        self.clock = Clock()
        self.c1 = commit(self.base, self.clock, {"region=eu": [("f1-0", [("k1", 1)])]})
        self.c2 = commit(self.base, self.clock, {"region=eu": [("f1-0", [("k1", 2)])]})
        self.pending = commit(self.base, self.clock, {"region=eu": [("f2-0", [("k2", 3)])]}, complete=False,
                              with_markers=False)
        self.victim = self.parent / "victim"
        self.victim.mkdir()
        for t in (self.c1, self.pending):
            pq.write_table(pa.table({"x": [1]}), self.victim / self.name("f1-0", t))
        (tmp_path / "secret.txt").write_text("keep")

    @staticmethod
    def name(fid: str, t: str) -> str:
        return f"{fid}_0-1-0_{t}.parquet"

    def timeline(self) -> ActiveTimeline:
        return ActiveTimeline.load(LOCAL, self.base)


@pytest.fixture
def lay(tmp_path: Path) -> Layout:
    return Layout(tmp_path)


def _rollback_plan(lay: Layout, partition: str, recorded: str) -> dict:
    return {
        "instantToRollback": {"commitTime": lay.pending, "action": "commit"},
        "RollbackRequests": [{"partitionPath": partition, "fileId": "", "latestBaseInstant": "",
                              "filesToBeDeleted": [recorded], "logBlocksToBeDeleted": {}}],
        "version": 1,
    }


# -- rollback ---------------------------------------------------------------------------------------------------
ROLLBACK_CASES = {
    # partition leading out of the table (relative, absolute)
    "partition_dotdot": (lambda lay: ("../victim", f"/x/{Layout.name('f1-0', lay.pending)}"),
                         r"rollback partition '\.\./victim' has a '\.\.' segment"),
    "partition_absolute": (lambda lay: (str(lay.victim), Layout.name("f1-0", lay.pending)), "is absolute"),
    # an empty name would have deleted the partition folder, a committed file of an older instant the data
    "partition_folder": (lambda lay: ("region=eu", "/w/t/region=eu/"), r"file to delete '' is empty"),
    "committed_file": (lambda lay: ("region=eu", Layout.name("f1-0", lay.c1)), "was written by instant"),
    "not_a_data_file": (lambda lay: ("", "/etc/passwd"), "does not name a Hudi data file"),
}


@pytest.mark.parametrize("case", list(ROLLBACK_CASES))
def test_crafted_rollback_plan_is_refused(lay: Layout, case: str) -> None:
    make, pattern = ROLLBACK_CASES[case]
    partition, recorded = make(lay)
    r = lay.clock()
    tl = lay.timeline()
    tl.create_requested(ROLLBACK, r, _rollback_plan(lay, partition, recorded))
    before = snapshot(lay.root)
    with pytest.raises(CorruptFileError, match=rf"{r}\.rollback\.requested: .*{pattern}"):
        rollback_failed_writes(LOCAL, lay.base, None, lay.clock)
    assert snapshot(lay.root) == before  # refused whole: not even the rollback's inflight file


def test_rollback_storage_refuses_even_unchecked_plans(lay: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    """Defense in depth: with the plan checks bypassed, the rooted storage still refuses the delete (an error,
    not a "failed delete" the rollback would record and move past)."""
    monkeypatch.setattr(rollback_mod, "rollback_targets", lambda plan, source: [
        (req["partitionPath"], [os.path.basename(f) for f in req["filesToBeDeleted"]])
        for req in plan["RollbackRequests"]
    ])
    lay.timeline().create_requested(ROLLBACK, lay.clock(), _rollback_plan(
        lay, "../victim", Layout.name("f1-0", lay.pending)))
    before = snapshot(lay.root)
    with pytest.raises(UnsafePathError, match=r"refusing to delete .*victim.*: it has a '\.\.' segment"):
        rollback_failed_writes(LOCAL, lay.base, None, lay.clock)
    assert outside(snapshot(lay.root)) == outside(before)


def test_crafted_timeline_server_markers_are_refused(lay: Layout) -> None:
    folder = Path(lay.base, ".hoodie", ".temp", lay.pending)
    folder.mkdir(parents=True)
    (folder / "MARKERS.type").write_text("TIMELINE_SERVER_BASED")
    (folder / "MARKERS0").write_text(f"region=eu/ok_0-1-0_{lay.pending}.parquet.marker.CREATE\n"
                                     f"../victim/{Layout.name('f1-0', lay.pending)}.marker.CREATE\n")
    before = snapshot(lay.root)
    with pytest.raises(CorruptFileError, match=r"MARKERS0: marker '\.\./victim/.*' names the partition "
                                               r"'\.\./victim' that has a '\.\.' segment"):
        rollback_failed_writes(LOCAL, lay.base, None, lay.clock)
    assert snapshot(lay.root) == before


def _marker(lay: Layout, partition: str, name: str) -> None:
    folder = Path(lay.base, ".hoodie", ".temp", lay.pending, partition)
    folder.mkdir(parents=True)
    (folder / f"{name}.marker.MERGE").write_bytes(b"")


def test_a_marker_naming_a_committed_file_is_refused_before_the_rollback_plan_is_written(lay: Layout) -> None:
    """The plan a rollback makes from markers passes the checks a written plan passes before it is written: a
    marker naming a file of another instant leaves no plan behind (which every later write would stop at)."""
    _marker(lay, "region=eu", Layout.name("f1-0", lay.c1))
    before = snapshot(lay.root)
    for _ in range(2):  # refused the same way again: nothing was left to finish
        with pytest.raises(CorruptFileError, match=rf"\.temp/{lay.pending}: file to delete .* was written by "
                                                   rf"instant {lay.c1}, not by the instant {lay.pending}"):
            rollback_failed_writes(LOCAL, lay.base, None, lay.clock)
        assert snapshot(lay.root) == before
    assert not list(lay.timeline().by_action(ROLLBACK))


def test_a_marker_under_a_symlinked_partition_is_refused_before_the_rollback_plan_is_written(lay: Layout) -> None:
    """A partition folder that is a link to a folder outside the table: the rollback refuses the plan that would
    delete through it before writing the plan, so nothing is left on the timeline and nothing outside changes."""
    Path(lay.base, "region=us").symlink_to(lay.victim, target_is_directory=True)
    _marker(lay, "region=us", Layout.name("f1-0", lay.pending))
    before = snapshot(lay.root)
    with pytest.raises(UnsafePathError, match=r"refusing to delete .*region=us.*symbolic link"):
        rollback_failed_writes(LOCAL, lay.base, None, lay.clock)
    assert snapshot(lay.root) == before
    assert (lay.victim / Layout.name("f1-0", lay.pending)).is_file()


# -- clean ------------------------------------------------------------------------------------------------------
def _clean_plan(lay: Layout, partition: str, recorded: str) -> dict:
    return {
        "earliestInstantToRetain": {"timestamp": lay.c2, "action": "commit", "state": "COMPLETED"},
        "lastCompletedCommitTimestamp": lay.c2,
        "policy": "KEEP_LATEST_COMMITS",
        "filesToBeDeletedPerPartition": {},
        "version": 2,
        "filePathsToBeDeletedPerPartition": {partition: [{"filePath": recorded, "isBootstrapBaseFile": False}]},
        "partitionsToBeDeleted": [],
        "extraMetadata": {},
    }


CLEAN_CASES = {
    "partition_dotdot": (lambda lay: ("../victim", Layout.name("f1-0", lay.c1)), r"clean partition '\.\./victim'"),
    "partition_absolute": (lambda lay: (str(lay.victim), Layout.name("f1-0", lay.c1)), "is absolute"),
    "folder": (lambda lay: ("", "/w/t/region=eu"), "does not name a Hudi data file"),
    "empty_name": (lambda lay: ("region=eu", "/w/t/region=eu/"), "is empty"),
}


@pytest.mark.parametrize("case", list(CLEAN_CASES))
def test_crafted_clean_plan_is_refused(lay: Layout, case: str) -> None:
    make, pattern = CLEAN_CASES[case]
    partition, recorded = make(lay)
    shutil.rmtree(Path(lay.base, "region=eu"))  # the pending commit must not hold the clean back: drop it
    rollback_failed_writes(LOCAL, lay.base, None, lay.clock)
    c = lay.clock()
    lay.timeline().create_requested(CLEAN, c, _clean_plan(lay, partition, recorded))
    seen: list = []
    before = snapshot(lay.root)
    with pytest.raises(CorruptFileError, match=rf"{c}\.clean\.requested: .*{pattern}"):
        clean(LOCAL, lay.base, None, 1, lay.clock, on_delete=lambda t, files: seen.append(files))
    assert snapshot(lay.root) == before
    assert seen == []  # the metadata table is not told of deletions that will not happen


def test_clean_storage_refuses_even_unchecked_plans(lay: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clean_mod, "clean_targets", lambda plan, source: {
        p: [os.path.basename(i["filePath"]) for i in infos]
        for p, infos in plan["filePathsToBeDeletedPerPartition"].items()
    })
    lay.timeline().create_requested(CLEAN, lay.clock(), _clean_plan(lay, "../victim", Layout.name("f1-0", lay.c1)))
    before = snapshot(lay.root)
    with pytest.raises(UnsafePathError):
        clean(LOCAL, lay.base, None, 1, lay.clock)
    assert outside(snapshot(lay.root)) == outside(before)


# -- symbolic links -------------------------------------------------------------------------------------------
def test_symlinked_partition_is_neither_read_nor_cleaned(lay: Layout) -> None:
    """A partition folder replaced by a link to a folder outside the table: reads and cleaning refuse it."""
    shutil.rmtree(Path(lay.base, ".hoodie", "timeline", f"{lay.pending}.commit.requested"), ignore_errors=True)
    for f in Path(lay.base, ".hoodie", "timeline").glob(f"{lay.pending}*"):
        f.unlink()
    eu = Path(lay.base, "region=eu")
    moved = lay.parent / "moved_eu"
    shutil.move(str(eu), moved)
    eu.symlink_to(moved, target_is_directory=True)
    before = snapshot(lay.root)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        Table.open(lay.base).to_arrow()
    with pytest.raises(UnsafePathError, match="symbolic link"):
        clean(LOCAL, lay.base, None, 1, lay.clock)  # c1's file would be cleanable
    assert snapshot(lay.root) == before
    assert (moved / Layout.name("f1-0", lay.c1)).is_file()


# -- hoodie.properties ------------------------------------------------------------------------------------------
def test_timeline_path_leading_out_is_refused(lay: Layout) -> None:
    update_table_config(LOCAL, os.path.join(lay.base, ".hoodie"), {"hoodie.timeline.path": "../../victim"})
    before = snapshot(lay.root)
    with pytest.raises(ConfigError, match=r"hoodie\.timeline\.path='\.\./\.\./victim' in hoodie\.properties has a "
                                          r"'\.\.' segment"):
        Table.open(lay.base).timeline()
    with pytest.raises(ConfigError):
        rollback_failed_writes(LOCAL, lay.base, None, lay.clock)
    assert snapshot(lay.root) == before


def test_metadata_partition_names_leading_out_are_refused(lay: Layout) -> None:
    from pyhudi.metadata.writer import MetadataWriter

    table = Table.open(lay.base)
    writer = MetadataWriter(LOCAL, lay.base, table.config)
    before = snapshot(lay.root)
    for bad in ["../timeline", "../../../victim", "..", "", "files/../../timeline", str(lay.victim)]:
        with pytest.raises(ConfigError, match=r"hoodie\.properties names the metadata partition"):
            writer.drop_partition(bad)
    assert snapshot(lay.root) == before


@pytest.mark.parametrize("key", ["hoodie.table.metadata.partitions", "hoodie.table.metadata.partitions.inflight"])
def test_a_write_refuses_a_bad_metadata_partition_name_before_changing_hoodie_properties(lay: Layout, key: str) -> None:
    """A write brings the metadata partitions in line with its options before it starts: a name in
    hoodie.properties that is not a folder name is refused before hoodie.properties is rewritten without it
    (else the next write would go on as if the table had never named it)."""
    from pyhudi.metadata.writer import MetadataWriter

    update_table_config(LOCAL, os.path.join(lay.base, ".hoodie"), {key: "files,../../victim"})
    table = Table.open(lay.base)
    before = snapshot(lay.root)
    with pytest.raises(ConfigError, match=r"hoodie\.properties names the metadata partition '\.\./\.\./victim'"):
        MetadataWriter(LOCAL, lay.base, table.config).reconcile({}, table.timeline())
    assert snapshot(lay.root) == before


# -- who holds a rooted storage ---------------------------------------------------------------------------------
def test_tables_and_their_parts_hold_rooted_storages(lay: Layout) -> None:
    """Whatever storage the caller hands in, the table code works through one rooted at the table, and the root
    travels with it into Spark tasks (cloudpickle, as Spark ships closures)."""
    from pyspark import cloudpickle

    from pyhudi.metadata.writer import MetadataWriter
    from pyhudi.table.fsview import StorageListing

    table = Table.open(lay.base)
    assert LOCAL.root is None
    assert table.storage.root == lay.base
    assert Table(LOCAL, lay.base, table.config).storage.root == lay.base
    assert ActiveTimeline.load(LOCAL, lay.base).storage.root == lay.base
    assert StorageListing(LOCAL, lay.base).storage.root == lay.base
    assert MetadataWriter(LOCAL, lay.base, table.config).storage.root == lay.base
    mdt = os.path.join(lay.base, ".hoodie", "metadata")
    mdt_timeline_storage = ActiveTimeline.load(table.storage, mdt, table.config)  # narrowed to the metadata table
    assert mdt_timeline_storage.storage.root == mdt

    def task() -> str | None:
        return table.storage.root

    assert cloudpickle.loads(cloudpickle.dumps(task))() == lay.base
    shipped = cloudpickle.loads(cloudpickle.dumps(table.storage))
    with pytest.raises(UnsafePathError):
        shipped.write_bytes(str(lay.victim / "x"), b"x")
    assert not (lay.victim / "x").exists()

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from pyhudi import faults
from pyhudi.io import avro
from pyhudi.services.clean import clean, earliest_commit_to_retain, read_clean_metadata, read_clean_plan
from pyhudi.table.timeline import ActiveTimeline, InstantTimeGenerator
from tests.support.fabricate import Clock, commit, make_table
from tests.support.storage import LOCAL

P = "region=eu"



def _versions(base: str, fid: str = "aaaa-0", partition: str = P) -> list[str]:
    return sorted(p.name.rsplit("_", 1)[1].split(".")[0] for p in (Path(base) / partition).glob(f"{fid}_*.parquet"))


def _table_with_commits(tmp_path: Path, n: int) -> tuple[str, Clock, list[str]]:
    base = make_table(tmp_path / "t")
    clock = Clock()
    ts = [commit(base, clock, {P: [("aaaa-0", [("k1", i), ("k2", i)])]}) for i in range(n)]
    return base, clock, ts


def test_nothing_to_clean(tmp_path: Path) -> None:
    base, clock, _ts = _table_with_commits(tmp_path, 10)
    assert clean(LOCAL, base, None, 10, clock) is None
    assert not [i for i in ActiveTimeline.load(LOCAL, base) if i.action == "clean"]


def test_keep_latest_commits(tmp_path: Path) -> None:
    base, clock, ts = _table_with_commits(tmp_path, 14)
    # a file group written once, long ago: its only version must stay
    commit(base, clock, {P: [("bbbb-0", [("k9", 9)])]})
    ts.append(commit(base, clock, {P: [("aaaa-0", [("k1", 99), ("k2", 99)])]}))
    tl = ActiveTimeline.load(LOCAL, base)
    earliest = earliest_commit_to_retain(tl, 10)
    assert earliest is not None
    done = clean(LOCAL, base, tl, 10, clock)
    assert done is not None and done.is_completed and done.action == "clean"
    e = earliest.requested_time
    kept = _versions(base)
    # the latest version before the earliest retained commit plus all later versions
    assert kept == sorted([max(t for t in ts if t < e)] + [t for t in ts if t >= e])
    assert len(list((Path(base) / P).glob("bbbb-0_*.parquet"))) == 1
    tl = ActiveTimeline.load(LOCAL, base)
    meta = read_clean_metadata(tl, done)
    deleted = sorted(f"aaaa-0_0-1-0_{t}.parquet" for t in ts if t < kept[0])
    assert meta["totalFilesDeleted"] == len(deleted)
    assert meta["earliestCommitToRetain"] == e
    assert meta["version"] == 2
    pm = meta["partitionMetadata"][P]
    assert sorted(pm["successDeleteFiles"]) == deleted and pm["failedDeleteFiles"] == []
    assert pm["policy"] == "KEEP_LATEST_COMMITS" and sorted(pm["deletePathPatterns"]) == deleted
    plan = read_clean_plan(tl, done.requested_time)
    assert plan["earliestInstantToRetain"] == {"timestamp": e, "action": "commit", "state": "COMPLETED"}
    assert plan["lastCompletedCommitTimestamp"] == ts[-1]
    assert plan["version"] == 2 and plan["filesToBeDeletedPerPartition"] == {}
    assert sorted(Path(f["filePath"]).name for f in plan["filePathsToBeDeletedPerPartition"][P]) == deleted
    raw = (Path(base) / ".hoodie/timeline" / done.file_name).read_bytes()
    assert avro.container_schema_name(raw) == "HoodieCleanMetadata"
    assert (Path(base) / ".hoodie/timeline" / f"{done.requested_time}.clean.inflight").read_bytes() == b""
    # a second clean right away has nothing to do
    assert clean(LOCAL, base, None, 10, clock) is None


def test_replaced_file_groups_are_cleaned(tmp_path: Path) -> None:
    base, clock, _ts = _table_with_commits(tmp_path, 1)
    commit(base, clock, {P: [("cccc-0", [("k1", 5)])]}, replaced={P: ["aaaa-0"]})
    for i in range(11):
        commit(base, clock, {P: [("cccc-0", [("k1", i)])]})
    done = clean(LOCAL, base, None, 10, clock)
    assert done is not None
    assert _versions(base, "aaaa-0") == []


def test_a_delete_the_storage_refuses_fails_the_clean_and_leaves_it_pending(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A file the storage will not delete (permissions, an object store's policy or outage) fails the clean, as in
    Hudi, instead of completing it with the file listed as failed: a completed clean lets archival pass the
    replacecommit, and a replaced file group left behind would then be read again. The next clean finishes it."""
    from pyhudi.errors import StorageError
    from pyhudi.io.storage import Storage

    base, clock, _ts = _table_with_commits(tmp_path, 1)
    commit(base, clock, {P: [("cccc-0", [("k1", 5)])]}, replaced={P: ["aaaa-0"]})
    for i in range(11):
        commit(base, clock, {P: [("cccc-0", [("k1", i)])]})
    delete = Storage.delete

    def refusing(self: Storage, path: str, missing_ok: bool = True, *, dirs: bool = True) -> None:
        if "aaaa-0_" in path:
            raise PermissionError(13, "Permission denied", path)
        delete(self, path, missing_ok, dirs=dirs)

    monkeypatch.setattr(Storage, "delete", refusing)
    with pytest.raises(StorageError, match=r"clean \d+ could not delete .*aaaa-0_.*the clean stays pending"):
        clean(LOCAL, base, None, 10, clock)
    cleans = list(ActiveTimeline.load(LOCAL, base).by_action("clean"))
    assert len(cleans) == 1 and not cleans[0].is_completed
    assert len(_versions(base, "aaaa-0")) == 1
    monkeypatch.setattr(Storage, "delete", delete)
    done = clean(LOCAL, base, None, 10, clock)
    assert done is not None and done.is_completed and done.requested_time == cleans[0].requested_time
    assert _versions(base, "aaaa-0") == []


def test_pending_commit_limits_earliest_retained(tmp_path: Path) -> None:
    base, clock, ts = _table_with_commits(tmp_path, 3)
    pending = commit(base, clock, {P: [("aaaa-0", [("k1", 0)])]}, complete=False)
    for i in range(12):
        ts.append(commit(base, clock, {P: [("aaaa-0", [("k1", i)])]}))
    tl = ActiveTimeline.load(LOCAL, base)
    e = earliest_commit_to_retain(tl, 10)
    assert e is not None and e.requested_time == ts[2] and e.requested_time < pending
    clean(LOCAL, base, tl, 10, clock)
    assert pending in _versions(base)  # files of pending instants are never touched


@pytest.mark.parametrize("step", ["planned", "inflight", "files_deleted"])
def test_crash_mid_clean_is_completed_by_next_call(tmp_path: Path, step: str) -> None:
    base, clock, ts = _table_with_commits(tmp_path, 13)

    with faults.inject(f"clean.{step}"), pytest.raises(faults.InjectedFault):
        clean(LOCAL, base, None, 10, clock)
    done = clean(LOCAL, base, None, 10, clock)
    assert done is not None and done.is_completed
    tl = ActiveTimeline.load(LOCAL, base)
    cleans = list(tl.by_action("clean"))
    assert cleans == [done]
    assert _versions(base) == ts[2:]
    meta = read_clean_metadata(tl, done)
    assert meta["earliestCommitToRetain"] == ts[3]
    # files deleted before the crash are reported as failed, as Hudi does on a re-run
    n = len(meta["partitionMetadata"][P]["successDeleteFiles"]) + len(
        meta["partitionMetadata"][P]["failedDeleteFiles"]
    )
    assert n == 2


def test_hudi_rs_reads_table_after_clean(tmp_path: Path) -> None:
    hudi = pytest.importorskip("hudi")
    base, clock, ts = _table_with_commits(tmp_path, 13)
    assert clean(LOCAL, base, None, 10, clock) is not None
    t = pa.Table.from_batches(hudi.HudiTableBuilder.from_base_uri(base).build().read())
    assert sorted(t.column("v").to_pylist()) == [12, 12]
    assert set(t.column("_hoodie_commit_time").to_pylist()) == {ts[-1]}


@pytest.mark.parametrize("policy", ["KEEP_LATEST_BY_HOURS", "KEEP_LATEST_FILE_VERSIONS"])
def test_a_cleaning_policy_pyhudi_does_not_run_is_refused(tmp_path: Path, policy: str) -> None:
    """``Table.clean`` (and ``pyhudi clean``) with a policy other than KEEP_LATEST_COMMITS: a ConfigError naming
    the option, nothing deleted (it cleaned by KEEP_LATEST_COMMITS, deleting versions the policy asked to keep);
    the other services refuse it too."""
    from pyhudi.errors import ConfigError
    from pyhudi.table.table import Table

    base, _clock, ts = _table_with_commits(tmp_path, 14)
    before = _versions(base)
    opts = {"hoodie.cleaner.policy": policy, "hoodie.cleaner.hours.retained": "24"}
    t = Table.open(base)
    for service in (t.clean, t.archive, lambda o: t.rollback(ts[-1], o)):
        with pytest.raises(ConfigError, match=f"hoodie.cleaner.policy='{policy}'"):
            service(opts)
    assert _versions(base) == before


@pytest.mark.spark
def test_validate_names_a_clean_that_stopped_after_deleting_files(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A clean that died after deleting file versions leaves them listed in the metadata table until it completes:
    ``validate`` reports them and names the pending clean; the next clean completes it, and validate is ok."""
    from pyhudi.metadata.validate import validate_table
    from pyhudi.table.table import Table
    from tests.support.robust import OPTS, rows, to_arrow

    base = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.clean.automatic": "false"}
    for ts in range(1, 4):  # three versions of every file group
        batch = spark.createDataFrame(to_arrow(rows(range(10), ts=ts, v=float(ts))))
        Table.for_dataframe(base, batch, opts).write(batch, "upsert", opts)
    retain = {"hoodie.cleaner.commits.retained": "1"}
    with faults.inject("clean.files_deleted"), pytest.raises(faults.InjectedFault):
        Table.open(base).clean(retain)
    (pending,) = [i.requested_time for i in Table.open(base).timeline().pending()]
    rep = validate_table(Table.open(base))
    assert not rep.ok and rep.extra, rep.to_dict()
    assert any(f"the clean {pending} is not complete" in p for p in rep.problems), rep.problems
    done = Table.open(base).clean(retain)
    assert done is not None and done.requested_time == pending
    rep = validate_table(Table.open(base))
    assert rep.ok, rep.to_dict()


def _pending_clean_opts() -> dict[str, str]:
    from tests.support.robust import OPTS

    return {**OPTS, "hoodie.clean.automatic": "false", "hoodie.metadata.compact.max.delta.commits": "2"}


@pytest.fixture(scope="module")
def clean_died(spark, tmp_path_factory) -> tuple[str, str, dict]:  # type: ignore[no-untyped-def]
    """A table of three versions of every file group whose clean died after its metadata deltacommit and its
    deletes (pending), then three more upserts (cleaning off, the metadata table due for compaction every two
    deltacommits): (base, the pending clean, the model). Each test takes a copy."""
    from pyhudi.table.table import Table
    from tests.support.robust import apply, rows, to_arrow

    opts = _pending_clean_opts()
    base, model = str(tmp_path_factory.mktemp("clean_died") / "t"), {}
    for ts in range(1, 7):
        batch = rows(range(10), ts=ts, v=float(ts))
        df = spark.createDataFrame(to_arrow(batch))
        Table.for_dataframe(base, df, opts).write(df, "upsert", opts)
        apply(model, "upsert", batch)
        if ts == 3:
            with faults.inject("clean.files_deleted"), pytest.raises(faults.InjectedFault):
                Table.open(base).clean({"hoodie.cleaner.commits.retained": "1"})
            (pending,) = [i.requested_time for i in Table.open(base).timeline().pending()]
    return base, pending, model


def _copy_of(table: tuple[str, str, dict], tmp_path: Path) -> tuple[str, str, dict]:
    import copy
    import shutil

    base, pending, model = table
    shutil.copytree(base, tmp_path / "t")
    return str(tmp_path / "t"), pending, copy.deepcopy(model)


def _finish_clean_and_check(base: str, pending: str, model: dict) -> None:
    """Run the clean again (it finishes the pending one, then cleans), then the metadata table's listing and record
    index agree with storage and hudi-rs reads the model."""
    from pyhudi.metadata.validate import validate_table
    from pyhudi.table.table import Table
    from tests.support.robust import expected, hudi_rs_read, table_rows

    Table.open(base).clean({"hoodie.cleaner.commits.retained": "1"})
    finished = Table.open(base).timeline().get(pending)
    assert finished is not None and finished.is_completed
    rep = validate_table(Table.open(base))
    assert rep.ok, rep.to_dict()
    assert table_rows(hudi_rs_read(base)) == expected(model)


@pytest.mark.spark
def test_the_metadata_table_is_not_compacted_past_a_pending_clean(spark, clean_died, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Writes go on while a clean that died after deleting files is pending (cleaning is a job of its own): the
    metadata table's compaction waits for it, as Hudi's does for any pending data instant up to its latest
    deltacommit. Compacted then, its new base file left out the clean's block (not valid while the clean was
    pending) for good: once the clean completed, the metadata table still listed the files it deleted, and when
    archival took the replacecommit of such a file away, readers opened a file that was gone."""
    from pyhudi.metadata.partitions import metadata_base_path
    from pyhudi.table.table import Table

    opts = _pending_clean_opts()
    base, pending, model = _copy_of(clean_died, tmp_path)
    mdt = ActiveTimeline.load(LOCAL, metadata_base_path(base))
    assert not [i for i in mdt.completed() if i.action == "commit" and i.requested_time > pending]
    _finish_clean_and_check(base, pending, model)
    # held back too long: the write fails after its commit, naming the pending clean
    from pyhudi.errors import PostCommitError
    from tests.support.robust import rows, to_arrow

    df = spark.createDataFrame(to_arrow(rows(range(3), ts=9, v=9.0)))
    Table.open(base).write(df, "upsert", opts)  # a version to clean
    with faults.inject("clean.files_deleted"), pytest.raises(faults.InjectedFault):
        Table.open(base).clean({"hoodie.cleaner.commits.retained": "1"})
    (again,) = [i.requested_time for i in Table.open(base).timeline().pending()]
    limited = {**opts, "hoodie.metadata.max.deltacommits.when_pending": "1"}
    with pytest.raises(PostCommitError, match=rf"hoodie.metadata.max.deltacommits.when_pending.*{again} clean"):
        Table.open(base).write(df, "upsert", limited)


@pytest.mark.spark
def test_a_retried_clean_redoes_its_metadata_deltacommit(clean_died, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The clean's metadata deltacommit completed but not the clean, and the metadata table was compacted meanwhile
    (by a writer that did not wait for the clean, such as pyhudi before it did): finishing the clean redoes its
    deltacommit, as Hudi's writer redoes a completed deltacommit it applies again, so the listing loses the
    files the clean deleted. Taking the completed deltacommit for done left them listed."""
    from pyhudi.metadata.partitions import metadata_base_path
    from pyhudi.metadata.writer import MetadataWriter
    from pyhudi.table.table import Table

    base, pending, model = _copy_of(clean_died, tmp_path)
    t = Table.open(base)
    at = InstantTimeGenerator.for_table(t.config).next(floor=t.timeline().latest_time())
    MetadataWriter(LOCAL, base, t.config).compact(t.timeline(), at)
    mdt = ActiveTimeline.load(LOCAL, metadata_base_path(base))
    assert [i.requested_time for i in mdt.completed() if i.action == "commit"][-1] == at
    _finish_clean_and_check(base, pending, model)


def test_a_rolled_back_writers_leftover_older_than_the_active_timeline_is_no_file_version(tmp_path: Path) -> None:
    """A writer stalled past its heartbeat, was rolled back, then its task wrote a base file named with its
    instant, and archival has passed that instant since (the file's writer was killed before it could delete it):
    the file is not a committed version. Taken for the latest version of its file group, it made the clean
    delete the committed base file before it, which the latest snapshot reads."""
    from pyhudi.services.archive import archive
    from pyhudi.table.lsm_timeline import ArchivedCompletionTimes

    base = make_table(tmp_path / "t")
    clock = Clock()
    first = commit(base, clock, {P: [("aaaa-0", [("k1", 1), ("k2", 1)])]})
    stalled = clock()  # its instant, rolled back: on no timeline
    for i in range(8):  # other file groups: archival passes the stalled instant
        commit(base, clock, {P: [("bbbb-0", [("k9", i)])]})
    archive(LOCAL, base, None, {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3"})
    tl = ActiveTimeline.load(LOCAL, base)
    assert min(i.requested_time for i in tl.commits()) > stalled
    assert ArchivedCompletionTimes(LOCAL, base)([first, stalled]).keys() == {first}
    leftover = Path(base) / P / f"aaaa-0_0-1-0_{stalled}.parquet"
    leftover.write_bytes((Path(base) / P / f"aaaa-0_0-1-0_{first}.parquet").read_bytes())
    # a version older than all the archived timeline covers (history from before it, e.g. an upgraded table's):
    # nothing shows it was not committed, so it is an old version as before, and cleaned
    ancient = Path(base) / P / "bbbb-0_0-1-0_19990101000000000.parquet"
    ancient.write_bytes(leftover.read_bytes())
    clean(LOCAL, base, None, 1, clock)
    assert _versions(base) == sorted([first, stalled])  # the committed version stays (nothing decides on the leftover)
    assert not ancient.exists()
    assert _versions(base, "bbbb-0")[-1] == max(i.requested_time for i in tl.commits())


def test_an_incremental_range_before_a_late_replace_the_clean_removed_is_refused(tmp_path: Path) -> None:
    """A replacecommit requested before the clean's earliest commit to retain but completed after a range's end:
    the range is read as the table was at its end, from the file group the replace made obsolete and the clean
    then removed. The read is refused, naming the replace; it returned the range without those records. Ranges
    that read no file group the replace wrote or replaced are answered."""
    from pyhudi import Table
    from pyhudi.errors import InvalidInputError
    from pyhudi.table.timeline import ActiveTimeline as TL

    base = make_table(tmp_path / "t")
    clock = Clock()
    commit(base, clock, {P: [("aaaa-0", [("k1", 1), ("k2", 1)])]})
    later: list[str] = []

    def meanwhile(_t: str, _meta: dict[str, object]) -> None:  # three commits complete while the replace runs
        later.extend(commit(base, clock, {P: [("bbbb-0", [("k9", i)])]}) for i in range(3))

    replace = commit(base, clock, {P: [("cccc-0", [("k1", 5)])]}, replaced={P: ["aaaa-0"]},
                     before_complete=meanwhile)
    commit(base, clock, {P: [("bbbb-0", [("k9", 9)])]})
    tl = TL.load(LOCAL, base)
    ends = {i.requested_time: i.completion_time for i in tl.completed()}
    end = ends[later[2]]
    assert ends[replace] > end  # the replace completed after the third commit

    def keys(start: str, stop: str | None) -> list[str]:
        return sorted(Table.open(base).incremental_arrow(start, stop).column("id").to_pylist())

    assert keys("0", end) == ["k1", "k2", "k9"]
    done = clean(LOCAL, base, None, 2, clock)  # keeps the last two commits: the earliest to retain is later[2]
    assert done is not None and read_clean_metadata(TL.load(LOCAL, base), done)["earliestCommitToRetain"] == later[2]
    assert _versions(base, "aaaa-0") == []
    with pytest.raises(InvalidInputError, match=rf"before the replacecommit {replace} completed") as e:
        keys("0", end)
    assert f"end the range at {ends[replace]} or later" in str(e.value)
    assert keys(later[1], None) == ["k1", "k9"]  # a range ending now reads the latest files
    assert keys("0", ends[replace]) == ["k1", "k9"]
    # a range of commits the replace shares no file group with reads kept files; an empty range reads nothing
    assert keys(ends[later[1]], end) == ["k9"]
    assert keys(ends[later[0]], later[1]) == []


def test_a_savepoints_files_are_never_cleaned(tmp_path: Path) -> None:
    """A savepoint (a Java writer's, at the requested time of the commit it saves) keeps every file it names,
    as Hudi's ``CleanPlanner`` does: the other old versions go; the plan records the savepoint; a restore to it
    still finds its files. Then a replaced file group the savepoint names keeps its files too."""
    from tests.support.fabricate import savepoint

    base, clock, ts = _table_with_commits(tmp_path, 4)
    named = savepoint(base, clock, ts[1])
    assert named == {P: [f"aaaa-0_0-1-0_{ts[1]}.parquet"]}
    ts += [commit(base, clock, {P: [("aaaa-0", [("k1", i), ("k2", i)])]}) for i in range(4, 14)]
    done = clean(LOCAL, base, None, 10, clock)
    assert done is not None
    e = earliest_commit_to_retain(ActiveTimeline.load(LOCAL, base), 10)
    assert e is not None
    before = max(t for t in ts if t < e.requested_time)
    assert _versions(base) == sorted({ts[1], before, *(t for t in ts if t >= e.requested_time)})
    plan = read_clean_plan(ActiveTimeline.load(LOCAL, base), done.requested_time)
    assert plan["extraMetadata"] == {"savepointed_timestamps": ts[1]}
    assert read_clean_metadata(ActiveTimeline.load(LOCAL, base), done)["extraMetadata"] == plan["extraMetadata"]

    commit(base, clock, {P: [("cccc-0", [("k1", 50)])]}, replaced={P: ["aaaa-0"]})
    for i in range(11):
        commit(base, clock, {P: [("cccc-0", [("k1", i)])]})
    assert clean(LOCAL, base, None, 10, clock) is not None
    assert _versions(base) == [ts[1]]  # the replaced file group's other versions went, the savepointed one stays


def test_a_non_partitioned_tables_clean_records_its_savepoints_for_archival(tmp_path: Path) -> None:
    """A savepoint kept a replaced file group's files through a clean of a non-partitioned table, then was deleted
    (Java's ``deleteSavepoint``), and archival ran before the next clean: the clean's plan records the savepoint on
    this table too, so archival keeps the replacecommit and readers still skip the replaced group. Hudi records it
    for partitioned tables only; without it the replacecommit was archived and every read (hudi-rs's too) returned
    the replaced records again."""
    from pyhudi.services.archive import archive
    from pyhudi.table.table import Table
    from pyhudi.table.timeline import SAVEPOINT
    from tests.support.fabricate import savepoint

    base, clock = make_table(tmp_path / "t", partitioned=False), Clock()
    ts = [commit(base, clock, {"": [("aaaa-0", [("k1", i), ("k2", i)])]}) for i in range(3)]
    savepoint(base, clock, ts[1])
    replace = commit(base, clock, {"": [("cccc-0", [("k9", 0)])]}, replaced={"": ["aaaa-0"]})
    for i in range(1, 6):
        commit(base, clock, {"": [("cccc-0", [("k9", i)])]})
    done = clean(LOCAL, base, None, 1, clock)
    assert done is not None
    assert read_clean_plan(ActiveTimeline.load(LOCAL, base), done.requested_time)["extraMetadata"] == {
        "savepointed_timestamps": ts[1]}
    assert _versions(base, partition="") == [ts[1]]  # the replaced group's savepointed version stays
    tl = ActiveTimeline.load(LOCAL, base)
    for f in tl.all_instant_files:
        if f.action == SAVEPOINT:
            LOCAL.delete(tl.path_of(f))
    archive(LOCAL, base, None, {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3"})
    tl = ActiveTimeline.load(LOCAL, base)
    assert min(i.requested_time for i in tl.commits()) > ts[0]  # archival ran
    assert tl.get(replace) is not None
    assert Table.open(base).to_arrow().column("id").to_pylist() == ["k9"]
    hudi = pytest.importorskip("hudi")
    t = pa.Table.from_batches(hudi.HudiTableBuilder.from_base_uri(base).build().read())
    assert t.column("id").to_pylist() == ["k9"]


def test_a_savepoint_without_its_file_list_stops_the_clean(tmp_path: Path) -> None:
    """A completed savepoint whose file is empty names no files: cleaning would not know what it must keep, so
    it fails, naming the file, and deletes nothing."""
    from pyhudi.errors import CorruptFileError
    from pyhudi.table.timeline import SAVEPOINT, Instant, State

    base, clock, ts = _table_with_commits(tmp_path, 13)
    tl = ActiveTimeline.load(LOCAL, base)
    LOCAL.write_bytes(tl.path_of(Instant(ts[1], SAVEPOINT, State.COMPLETED, clock())), b"")
    before = _versions(base)
    with pytest.raises(CorruptFileError, match=rf"{ts[1]}_\d+\.savepoint"):
        clean(LOCAL, base, None, 10, clock)
    assert _versions(base) == before


def test_a_savepointed_commit_stays_on_the_timeline_for_reads(tmp_path: Path) -> None:
    """The savepoint's files sort after its commit's in some listings and before it in others: either way the
    table reads the savepointed commit's rows (the savepoint used to stand in for the commit, whose rows then
    went missing from every read)."""
    from pyhudi.table.table import Table
    from tests.support.fabricate import savepoint

    base, clock, ts = _table_with_commits(tmp_path, 3)
    savepoint(base, clock, ts[2])
    t = Table.open(base).to_arrow()
    assert sorted(t.column("v").to_pylist()) == [2, 2]
    assert set(t.column("_hoodie_commit_time").to_pylist()) == {ts[2]}
    assert Table.open(base).to_arrow(as_of=ts[2]).num_rows == 2

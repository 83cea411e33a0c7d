"""Compaction of a merge-on-read table carries out only plans whose every name stays in its file group: a crafted
or corrupt plan is refused before anything is written; an incremental range before a late compaction whose old slice
was cleaned is refused."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from pyhudi import Table
from pyhudi.errors import CorruptFileError
from pyhudi.io import avro
from pyhudi.table.timeline import ActiveTimeline
from tests.support.robust import tree

OPTIONS = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "p",
           "hoodie.table.ordering.fields": "ts", "hoodie.datasource.write.table.type": "MERGE_ON_READ"}


@pytest.mark.parametrize("partition", [".hoodie/metadata/files", ".hoodie", "../outside"])
def test_a_crafted_compaction_plan_is_refused_before_anything_is_written(spark, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                         partition: str) -> None:
    base = str(tmp_path / "t")
    df = spark.createDataFrame(pa.table({"id": ["k0", "k1"], "p": ["a", "a"], "ts": [1, 1], "v": [1, 1]}).to_pandas())
    Table.for_dataframe(base, df, OPTIONS).write(df, "upsert", OPTIONS)
    tl = ActiveTimeline.load(Table.open(base).storage, base)
    t = str(int(tl.latest_time() or "0") + 5)
    op = {"baseInstantTime": tl.latest_time(), "deltaFilePaths": [], "dataFilePath": None, "fileId": "files-0000-0",
          "partitionPath": partition, "bootstrapFilePath": None,
          "metrics": {"TOTAL_LOG_FILES": 0.0, "TOTAL_IO_MB": 0.0, "TOTAL_IO_READ_MB": 0.0,
                      "TOTAL_LOG_FILES_SIZE": 0.0, "TOTAL_IO_WRITE_MB": 0.0}}
    plan = {"operations": [op], "extraMetadata": {}, "version": 2, "strategy": None, "preserveHoodieMetadata": False,
            "missingSchedulePartitions": []}
    (Path(tl.timeline_dir) / f"{t}.compaction.requested").write_bytes(avro.write_container(plan, "HoodieCompactionPlan"))
    before = tree(base)
    with pytest.raises(CorruptFileError, match=f"{t}.compaction.requested: compaction partition"):
        Table.open(base).compact(spark=spark)
    assert tree(base) == before
    assert Table.open(base).to_arrow().num_rows == 2


def test_an_incremental_range_before_a_late_compaction_the_clean_removed_is_refused(  # type: ignore[no-untyped-def]
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction left pending (as Hudi's async scheduler leaves it) completes after a later deltacommit D.
    Once a clean keeps the commits from D on, the range ending at D's completion needs the file slice before the
    compaction, which the clean removed: the range is refused (it returned the range without those records),
    while a range ending after the compaction and the snapshot read the kept files."""
    from pyhudi import faults
    from pyhudi.errors import InvalidInputError
    from pyhudi.txn.transaction import WriteTransaction
    from tests.support.robust import hudi_rs_read

    opts = {**OPTIONS, "hoodie.compact.inline": "false", "hoodie.clean.automatic": "false",
            "hoodie.archive.automatic": "false"}
    base = str(tmp_path / "t")

    def write(ids: list[int], ts: int, op: str = "upsert") -> str:
        t = pa.table({"id": [f"k{i}" for i in ids], "p": ["a" if i % 2 == 0 else "b" for i in ids],
                      "ts": [ts] * len(ids), "v": [float(i + ts) for i in ids]})
        df = spark.createDataFrame(t.to_pandas())
        return Table.for_dataframe(base, df, opts).write(df, op, opts).instant

    write(list(range(8)), 1, "insert")
    write([1, 3, 5, 7], 2)  # log files in partition b's file group

    def stop(_point: str) -> None:
        raise RuntimeError("the plan is left pending")

    with faults.inject("compaction.planned", stop), pytest.raises(RuntimeError, match="left pending"):
        Table.open(base).compact(opts, spark=spark)
    for hb in (Path(base) / ".hoodie" / ".heartbeat").glob("*"):  # Hudi keeps no heartbeat of a planned compaction
        hb.unlink()
    with monkeypatch.context() as m:  # a writer that leaves the pending compaction to its scheduler, as Hudi's does
        m.setattr(WriteTransaction, "resume_compactions", lambda self, spark, tl, parallelism=0: [])
        d = write([0], 3)
    assert Table.open(base).compact(opts, spark=spark)  # the pending compaction completes now, after D
    write([2], 4)
    tl = ActiveTimeline.load(Table.open(base).storage, base)
    done = {i.requested_time: i for i in tl.completed_commits()}
    (late,) = [i for i in done.values() if i.requested_time < d and (i.completion_time or "") > done[d].completion_time]
    end = done[d].completion_time
    assert end is not None

    def keys(start: str, stop: str | None) -> list[str]:
        return sorted(Table.open(base).incremental_arrow(start, stop).column("id").to_pylist())

    assert keys("0", end) == [f"k{i}" for i in range(8)]
    retained = sum(1 for t in done if t >= d)
    assert Table.open(base).clean({**opts, "hoodie.cleaner.commits.retained": str(retained)}) is not None
    with pytest.raises(InvalidInputError, match=rf"before the commit {late.requested_time} completed"):
        keys("0", end)
    assert keys(end, None) == ["k2"]  # the last upsert's key (the compaction wrote no new record)
    snapshot = Table.open(base).to_arrow()
    assert sorted(snapshot.column("id").to_pylist()) == sorted(hudi_rs_read(base).column("id").to_pylist())


def test_a_compaction_plan_leaves_out_file_groups_a_pending_plan_works_on(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """As Hudi's compaction planner: file groups a pending clustering (a Java writer's) or a pending compaction
    works on are left out of a new plan; the others are compacted."""
    from pyhudi.metadata.reader import table_view
    from pyhudi.services.compact import schedule_compaction
    from pyhudi.table.timeline import CLUSTERING, InstantTimeGenerator

    opts = {**OPTIONS, "hoodie.compact.inline": "false"}
    base = str(tmp_path / "t")
    for ts, ids, op in ((1, range(4), "insert"), (2, range(4), "upsert")):  # log files in a's and b's file groups
        t = pa.table({"id": [f"k{i}" for i in ids], "p": ["a" if i % 2 == 0 else "b" for i in ids],
                      "ts": [ts] * len(ids), "v": [float(i + ts) for i in ids]})
        df = spark.createDataFrame(t.to_pandas())
        Table.for_dataframe(base, df, opts).write(df, op, opts)
    table = Table.open(base)
    tl = table.timeline()
    groups = {fs.partition: fs.file_id for fs in table.view().latest_file_slices()}
    gen = InstantTimeGenerator.for_table(table.config)
    clustering = gen.next(floor=tl.latest_time())
    tl.create_requested(CLUSTERING, clustering, {"operationType": "CLUSTER", "extraMetadata": {}, "version": 1,
                                                 "clusteringPlan": {"inputGroups": [{
                                                     "slices": [{"dataFilePath": "", "deltaFilePaths": [],
                                                                 "fileId": groups["a"], "partitionPath": "a",
                                                                 "bootstrapFilePath": "", "version": 1}],
                                                     "metrics": {}, "numOutputFileGroups": 1, "extraMetadata": {},
                                                     "version": 1}],
                                                     "strategy": None, "extraMetadata": {}, "version": 1,
                                                     "preserveHoodieMetadata": True, "missingSchedulePartitions": []}})
    tl = tl.reload()
    first = schedule_compaction(tl, table_view(table.storage, base, table.config, tl), gen.next(floor=clustering))
    assert first is not None
    tl = tl.reload()
    ops = tl.read_plan("compaction", first.requested_time)["operations"]
    assert [(op["partitionPath"], op["fileId"]) for op in ops] == [("b", groups["b"])]
    # b's group is the pending compaction's now, a's the clustering's: nothing is left to plan
    assert schedule_compaction(tl, table_view(table.storage, base, table.config, tl),
                               gen.next(floor=first.requested_time)) is None

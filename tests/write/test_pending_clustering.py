"""Writes into a copy-on-write table while a clustering a Java writer planned is pending: the clustering rewrites
the file slices its plan names and replaces their file groups when it completes, so a write that changed one of
them meanwhile would lose its records there. As Apache Hudi's writers (``SparkRejectUpdateStrategy``, the
default), pyhudi refuses to update, delete from or overwrite those file groups, before writing anything, and
leaves them out of the small files that take inserts; a clustering planned while a write runs fails that write
at its commit."""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pyhudi import faults
from pyhudi.errors import ClusteringConflict
from pyhudi.table.table import Table
from pyhudi.table.timeline import CLUSTERING, ActiveTimeline, State, format_instant_time
from tests.support.robust import OPTS, SCHEMA, apply, expected, rows, table_rows, to_arrow, tree
from tests.support.storage import LOCAL

hudi = pytest.importorskip("hudi")


def _plan_clustering(base: str, partition: str) -> str:
    """A pending clustering of every file group of ``partition``, as Hudi 1.x plans it: ``<t>.clustering.requested``
    (HoodieRequestedReplaceMetadata, operation CLUSTER) and an empty ``<t>.clustering.inflight``."""
    tl = ActiveTimeline.load(LOCAL, base)
    t = format_instant_time(_ms_after(tl))
    view = Table.open(base).view()
    slices: list[dict[str, Any]] = [
        {"dataFilePath": posixpath.join(base, partition, fs.base_file.file_name), "deltaFilePaths": [],
         "fileId": fs.file_id, "partitionPath": partition, "bootstrapFilePath": "", "version": 1}
        for fs in view.latest_file_slices(partition) if fs.base_file is not None
    ]
    plan = {"operationType": "CLUSTER", "extraMetadata": {}, "version": 1, "clusteringPlan": {
        "inputGroups": [{"slices": slices, "metrics": {}, "numOutputFileGroups": 1, "extraMetadata": {},
                         "version": 1}],
        "strategy": {"strategyClassName": "org.apache.hudi.client.clustering.run.strategy."
                                          "SparkSortAndSizeExecutionStrategy", "strategyParams": {}, "version": 1},
        "extraMetadata": {}, "version": 1, "preserveHoodieMetadata": True, "missingSchedulePartitions": []}}
    req = tl.create_requested(CLUSTERING, t, plan)
    tl.transition_to_inflight(req, None)
    assert tl.reload().get(t).state == State.INFLIGHT  # type: ignore[union-attr]
    return t


def _ms_after(tl: ActiveTimeline) -> int:
    from pyhudi.table.timeline import parse_instant_time

    return parse_instant_time(tl.latest_time() or "20260101000000000") + 1


def _df(spark, batch: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
    return spark.createDataFrame(to_arrow(batch).to_pandas(), schema="id string, p string, ts long, v double")


def test_file_groups_of_a_pending_clustering_are_left_alone(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    model: dict[str, dict[str, Any]] = {}
    first = rows(range(10))
    Table.create(base, SCHEMA, OPTS).write(_df(spark, first), "insert", OPTS)
    apply(model, "insert", first)
    clustering = _plan_clustering(base, "a")
    clustered = {fs.file_id for fs in Table.open(base).view().latest_file_slices("a")}

    before = tree(base)
    for op, batch in [("upsert", rows([0, 1], ts=2, v=100)), ("delete", rows([2])),
                      ("insert_overwrite", rows([4], ts=2))]:
        with pytest.raises(ClusteringConflict, match=rf"pending clustering {clustering}.*nothing was written") as e:
            Table.open(base).write(_df(spark, batch), op, OPTS)
        assert {f for _, f in e.value.file_groups} <= clustered and e.value.file_groups, op
        assert tree(base) == before, op  # refused before anything was written: no instant, no file

    # updates of the other partition and inserts go on; the inserts into "a" take a new file group, not the small
    # file the clustering rewrites
    batch = [*rows([1, 3], ts=3, v=300), *rows([20], p="a")]
    Table.open(base).write(_df(spark, batch), "upsert", OPTS)
    apply(model, "upsert", batch)
    got = Table.open(base).to_arrow()
    assert table_rows(got) == expected(model)
    a_groups = {fs.file_id for fs in Table.open(base).view().latest_file_slices("a")}
    assert clustered < a_groups
    rs = pa.Table.from_batches(list(hudi.HudiTableBuilder.from_base_uri(base).build().read(hudi.HudiReadOptions())))
    assert table_rows(rs) == expected(model)

    # a clustering planned while a write runs: the write fails at its commit and is rolled back
    planned: list[str] = []
    with (faults.inject("before_commit", lambda _p: planned.append(_plan_clustering(base, "b"))),
          pytest.raises(ClusteringConflict, match=r"was rolled back") as e):
        Table.open(base).write(_df(spark, rows([1], ts=4, v=400)), "upsert", OPTS)
    assert e.value.other == planned[0]
    assert table_rows(Table.open(base).to_arrow()) == expected(model)

"""A small self-contained write flow (create, insert, upsert, delete, insert after a failed write) checked after
every step with hudi-rs, ``Table.to_arrow`` and ``Table.read`` on Spark. Runs on any master: ``test_cluster.py``
runs it on ``local-cluster[2,1,1024]`` (separate executor JVMs and Python workers, task retries)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyhudi.table.table import Table
from pyhudi.write.producer import FAULT_OPTION
from tests.support.robust import (
    OPTS,
    SCHEMA,
    apply,
    data_files_with_instant,
    expected,
    files_with_instant,
    hudi_rs_read,
    rows,
    table_rows,
    to_arrow,
)

pytest.importorskip("hudi")
pytestmark = [pytest.mark.spark, pytest.mark.slow]  # Spark-heavy: make test runs it, make test-quick does not


def test_small_flow(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    model: dict = {}
    t = Table.create(base, SCHEMA, OPTS)

    def check(step: str) -> None:
        want = expected(model)
        assert table_rows(hudi_rs_read(base)) == want, step
        tt = Table.open(base)
        assert table_rows(tt.to_arrow()) == want, step
        assert table_rows(to_pa(tt.read(spark))) == want, step

    def to_pa(df):  # type: ignore[no-untyped-def]
        return df.toArrow()

    steps = [
        ("insert", rows(range(40))),
        ("upsert", rows(range(30, 60), ts=2, v=0.5)),  # 10 updates, 20 new keys
        ("delete", rows(range(0, 60, 7))),
        ("upsert", rows(range(50, 70), ts=1, v=0.25)),  # k050..k059 have ts 2: stored rows win
    ]
    for op, batch in steps:
        res = t.write(spark.createDataFrame(to_arrow(batch)), op, OPTS)
        apply(model, op, batch)
        check(f"{op} {res.instant}")

    # a task failure after writing (retried by the cluster, then the job fails) is rolled back by the next write
    with pytest.raises(Exception, match="injected fault"):
        t.write(spark.createDataFrame(to_arrow(rows(range(70, 80)))), "insert", {**OPTS, FAULT_OPTION: "after_write"})
    failed = [i.requested_time for i in Table.open(base).timeline() if not i.is_completed]
    assert len(failed) == 1
    check("after the failed write")
    batch = rows(range(80, 90), ts=3)
    t.write(spark.createDataFrame(to_arrow(batch)), "insert", OPTS)
    apply(model, "insert", batch)
    assert files_with_instant(base, failed[0]) == []
    check("after the rollback")

    # a task that fails once after writing its file and succeeds when retried (the cluster retries tasks; a local
    # master does not): the commit keeps the retry's files and deletes the failed attempt's, on both table types
    if not _retries_tasks(spark):
        return
    batch = rows(range(0, 90, 9), ts=4, v=0.125)
    res = t.write(spark.createDataFrame(to_arrow(batch)), "upsert", {**OPTS, FAULT_OPTION: "retry_after_write"})
    apply(model, "upsert", batch)
    assert data_files_with_instant(base, res.instant) == {s.path for s in res.stats}
    check("after a retried task")
    mor = str(tmp_path / "mor")
    mor_opts = {**OPTS, "hoodie.table.type": "MERGE_ON_READ"}
    mor_model: dict = {}
    m = Table.create(mor, SCHEMA, mor_opts)
    for op, batch, fault in [("insert", rows(range(30)), "retry_after_write"),
                             ("upsert", rows(range(0, 40, 3), ts=2, v=0.5), "retry_after_write")]:
        res = m.write(spark.createDataFrame(to_arrow(batch)), op, {**mor_opts, FAULT_OPTION: fault})
        apply(mor_model, op, batch)
        assert data_files_with_instant(mor, res.instant) == {s.path for s in res.stats}
        assert table_rows(hudi_rs_read(mor)) == expected(mor_model), op
        assert table_rows(Table.open(mor).to_arrow()) == expected(mor_model), op


def _retries_tasks(spark) -> bool:  # type: ignore[no-untyped-def]
    """Whether the master retries a failed task: a cluster does (spark.task.maxFailures), ``local[N]`` does not."""
    master = spark.sparkContext.master
    return master.startswith("local-cluster") or not master.startswith("local") or master.count(",") == 1

"""``pyhudi rollback TABLE INSTANT`` and ``pyhudi clean TABLE``: the table services as commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyhudi.table.table import Table
from pyhudi.write.producer import FAULT_OPTION
from tests.support.robust import (
    OPTS,
    apply,
    expected,
    files_with_instant,
    hudi_rs_read,
    rows,
    run_cli,
    table_rows,
    to_arrow,
)

pytest.importorskip("hudi")
pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _table(spark, base: str) -> dict:  # type: ignore[no-untyped-def]
    model: dict = {}
    for ts in range(1, 4):  # three versions of every file group
        batch = rows(range(10), ts=ts, v=float(ts))
        t = Table.for_dataframe(base, spark.createDataFrame(to_arrow(batch)), OPTS)
        t.write(spark.createDataFrame(to_arrow(batch)), "upsert", {**OPTS, "hoodie.clean.automatic": "false"})
        apply(model, "upsert", batch)
    return model


def test_rollback_command(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    model = _table(spark, base)
    with pytest.raises(Exception, match="injected fault"):
        Table.open(base).write(spark.createDataFrame(to_arrow(rows(range(5), ts=9))), "upsert",
                               {**OPTS, FAULT_OPTION: "before_commit"})
    (failed,) = [i.requested_time for i in Table.open(base).timeline().pending()]
    assert files_with_instant(base, failed)
    r = run_cli("rollback", base, "20200101000000000", "--json")
    assert r.returncode == 1 and "no instant 20200101000000000" in r.stderr
    done = [i.requested_time for i in Table.open(base).timeline().completed_commits()]
    r = run_cli("rollback", base, done[-1])
    assert r.returncode == 1 and "is completed" in r.stderr
    r = run_cli("rollback", base, failed, "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["rolled_back"] == failed and out["files_deleted"] >= 1
    assert files_with_instant(base, failed) == []
    assert Table.open(base).timeline().get(failed) is None
    assert table_rows(hudi_rs_read(base)) == expected(model)


def test_clean_command(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    model = _table(spark, base)
    before = len(list(Path(base).rglob("*.parquet")))
    r = run_cli("clean", base, "--option", "hoodie.cleaner.commits.retained=1", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["clean_instant"] is not None and out["files_deleted"] > 0
    assert len(list(Path(base).rglob("*.parquet"))) == before - out["files_deleted"]
    assert table_rows(hudi_rs_read(base)) == expected(model)
    r = run_cli("clean", base, "--option", "hoodie.cleaner.commits.retained=1")
    assert r.returncode == 0 and "nothing to clean" in r.stdout

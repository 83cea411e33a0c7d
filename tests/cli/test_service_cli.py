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


def test_a_running_compaction_is_not_run_again_by_another_process(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A compaction runs under a heartbeat, as a write does: a second ``pyhudi compact`` while the first one is
    still running refuses to take over its instant (it deleted the running compaction's files and ran it again,
    and the first then rewrote files of a completed instant). The first completes; the table reads as written."""
    import subprocess
    import time

    from pyhudi.faults import ENV as FAULT_ENV
    from pyhudi.faults import RELEASE_ENV
    from tests.support.robust import PYHUDI, cli_env

    base = str(tmp_path / "t")
    mor = {**OPTS, "hoodie.table.type": "MERGE_ON_READ", "hoodie.parquet.small.file.limit": "0",
           "hoodie.compact.inline": "false"}
    model: dict = {}
    for ts in (1, 2):  # the second upsert's updates go to log files
        batch = rows(range(10), ts=ts, v=float(ts))
        Table.for_dataframe(base, spark.createDataFrame(to_arrow(batch)), mor).write(
            spark.createDataFrame(to_arrow(batch)), "upsert", mor)
        apply(model, "upsert", batch)
    release = tmp_path / "release"
    env = cli_env(**{FAULT_ENV: "wait_compaction.before_complete", RELEASE_ENV: str(release)})
    with (tmp_path / "first.log").open("w") as log:
        first = subprocess.Popen([PYHUDI, "compact", base, "--json"], stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + 300
            while not Path(f"{release}.waiting").exists():
                assert first.poll() is None and time.monotonic() < deadline, (tmp_path / "first.log").read_text()
                time.sleep(0.2)
            second = run_cli("compact", base, "--json")
        finally:
            release.touch()
            first.wait(timeout=600)
    assert second.returncode == 1 and "compaction" in second.stderr and "running" in second.stderr, second.stderr[-2000:]
    assert first.returncode == 0, (tmp_path / "first.log").read_text()[-3000:]
    (t,) = json.loads((tmp_path / "first.log").read_text().strip().splitlines()[-1])["compaction_instants"]
    done = Table.open(base).timeline().get(t)
    assert done is not None and done.is_completed  # completed as a commit, as Hudi completes compactions
    assert table_rows(hudi_rs_read(base)) == expected(model)
    v = run_cli("validate", base, "--json")
    assert v.returncode == 0, v.stdout[-2000:]

"""``pyhudi write`` / ``read`` / ``timeline`` as a user runs them: the console script in a subprocess.

Each ``write`` starts its own Spark, so the tables are shared between assertions: three tables are created
(from parquet input by the console script, from CSV and JSON input by the same command in the test's process,
which reads the input alike), the parquet one then gets an upsert from a directory of JSON part files by the
console script; ``read`` and ``timeline`` do not start Spark."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from pyhudi.faults import ENV as FAULT_ENV
from pyhudi.faults import RELEASE_ENV
from pyhudi.table.table import Table
from tests.support.robust import (
    CLI_KEYS,
    OPTS,
    PYHUDI,
    SCHEMA,
    apply,
    cli_env,
    expected,
    hudi_rs_read,
    rows,
    run_cli,
    run_cli_here,
    table_rows,
    to_arrow,
)

pytest.importorskip("hudi")
pytestmark = [pytest.mark.spark, pytest.mark.slow]  # Spark-heavy: make test runs it, make test-quick does not

FIRST = rows(range(8), v=0.5)
CSV_ROWS = rows(range(100, 106), v=0.25)
JSON_ROWS = rows(range(200, 205), v=0.75)
UPSERT = rows(range(4, 12), ts=2, v=0.125)  # k004..k007 updated, k008..k011 inserted


def _last_json(stdout: str) -> Any:
    return json.loads(stdout.strip().splitlines()[-1])


def _write_jsonl(path: Path, batch: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in batch))


@pytest.fixture(scope="module")
def tables(tmp_path_factory, spark) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    d = tmp_path_factory.mktemp("cli")
    pq.write_table(to_arrow(FIRST), d / "first.parquet")
    pcsv.write_csv(to_arrow(CSV_ROWS), d / "rows.csv")
    _write_jsonl(d / "rows.json", JSON_ROWS)
    parts = d / "upsert"  # a directory as a Spark job leaves it
    parts.mkdir()
    _write_jsonl(parts / "part-00000.json", UPSERT[:3])
    _write_jsonl(parts / "part-00001.json", UPSERT[3:])
    (parts / "_SUCCESS").write_text("")
    t = {k: str(d / k) for k in ("from_parquet", "from_csv", "from_json")}
    created = {
        "from_parquet": run_cli("write", t["from_parquet"], "--input", str(d / "first.parquet"), "--operation",
                                "insert", *CLI_KEYS, "--json"),
        "from_csv": run_cli_here("write", t["from_csv"], "--input", str(d / "rows.csv"), "--operation", "insert",
                                 *CLI_KEYS, "--table-name", "csv_table", "--json"),
        "from_json": run_cli_here("write", t["from_json"], "--input", str(d / "rows.json"), "--operation", "upsert",
                                  *CLI_KEYS, "--json"),
    }
    for name, r in created.items():
        assert r.returncode == 0, (name, r.stderr[-3000:])
    upsert = run_cli("write", t["from_parquet"], "--input", str(parts), "--operation", "upsert",
                     *CLI_KEYS, "--json")
    assert upsert.returncode == 0, upsert.stderr[-3000:]
    return {"dir": d, "paths": t, "created": created, "upsert": upsert}


def _check_summary(summary: dict[str, Any], inserted: int, updated: int) -> None:
    assert summary["instant"].isdigit() and len(summary["instant"]) == 17
    assert (summary["inserted"], summary["updated"], summary["deleted"]) == (inserted, updated, 0)
    assert {"tag", "write", "commit", "total"} <= set(summary["timings_s"])
    assert all(v >= 0 for v in summary["timings_s"].values())
    assert summary["timings_s"]["total"] >= summary["timings_s"]["write"]


def test_write_creates_tables_from_parquet_csv_json(tables: dict[str, Any]) -> None:
    for name, batch in (("from_parquet", FIRST), ("from_csv", CSV_ROWS), ("from_json", JSON_ROWS)):
        _check_summary(_last_json(tables["created"][name].stdout), len(batch), 0)
        if name != "from_parquet":  # the parquet table got an upsert since
            model: dict = {}
            apply(model, "insert", batch)
            assert table_rows(hudi_rs_read(tables["paths"][name])) == expected(model), name
    props = (Path(tables["paths"]["from_csv"]) / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.name=csv_table" in props


def test_upsert_summary_and_result(tables: dict[str, Any]) -> None:
    s = _last_json(tables["upsert"].stdout)
    _check_summary(s, inserted=4, updated=4)
    assert s["instant"] > _last_json(tables["created"]["from_parquet"].stdout)["instant"]
    model: dict = {}
    apply(model, "insert", FIRST)
    apply(model, "upsert", UPSERT)
    assert table_rows(hudi_rs_read(tables["paths"]["from_parquet"])) == expected(model)


def test_read_limit_output_and_as_of(tables: dict[str, Any]) -> None:
    base, d = tables["paths"]["from_parquet"], tables["dir"]
    first_instant = _last_json(tables["created"]["from_parquet"].stdout)["instant"]

    r = run_cli("read", base, "--limit", "3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "(3 rows)"
    assert "_hoodie_record_key" in r.stdout.splitlines()[0]

    r = run_cli("read", base, "--limit", "2", "--json")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.strip().splitlines()]
    assert len(lines) == 2 and all({"id", "p", "ts", "v", "_hoodie_commit_time"} <= set(x) for x in lines)

    out = d / "snapshot.parquet"
    r = run_cli("read", base, "--output", str(out))
    assert r.returncode == 0, r.stderr
    model: dict = {}
    apply(model, "insert", FIRST)
    first_model = dict(model)
    apply(model, "upsert", UPSERT)
    assert table_rows(pq.read_table(out)) == expected(model)
    assert f"wrote {len(model)} rows to {out}" in r.stdout

    out = d / "as_of.parquet"
    r = run_cli("read", base, "--as-of", first_instant, "--output", str(out), "--json")
    assert r.returncode == 0, r.stderr
    assert _last_json(r.stdout) == {"rows": len(first_model), "output": str(out)}
    as_of = pq.read_table(out)
    assert table_rows(as_of) == expected(first_model)
    assert set(as_of.column("_hoodie_commit_time").to_pylist()) == {first_instant}

    # an output inside the table is refused (it replaced a base file, and the table lost rows): none is written
    target = next(Path(base).glob("*/*.parquet"))
    before = target.read_bytes()
    for inside in (target, Path(base) / "a" / "new.parquet"):
        r = run_cli("read", base, "--limit", "1", "--output", str(inside))
        assert r.returncode == 1 and "lies inside the table" in r.stderr, r.stderr
    assert target.read_bytes() == before and not (Path(base) / "a" / "new.parquet").exists()



def test_timeline_text_and_json(tables: dict[str, Any]) -> None:
    base = tables["paths"]["from_parquet"]
    instants = [_last_json(tables["created"]["from_parquet"].stdout)["instant"], _last_json(tables["upsert"].stdout)["instant"]]

    r = run_cli("timeline", base, "--json")
    assert r.returncode == 0, r.stderr
    tl = _last_json(r.stdout)
    commits = [e for e in tl if e["action"] == "commit"]
    assert [e["instant"] for e in commits] == instants
    assert all(e["state"] == "COMPLETED" and e["completed"] > e["instant"] for e in commits)

    r = run_cli("timeline", base)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].split() == ["instant", "action", "state", "completed"]
    body = [x.split() for x in lines[1:]]
    for e in commits:
        assert [e["instant"], "commit", "COMPLETED", e["completed"]] in body

    r = run_cli("timeline", str(tables["dir"] / "no_such_table"))
    assert r.returncode == 1
    assert "no Hudi table" in r.stderr


def test_index_build_async_while_a_write_runs(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``pyhudi index build --async`` on a table without a record index while a ``pyhudi write`` upsert runs in
    another process; afterwards ``index stats``, ``lookup`` and ``validate`` agree with the data."""
    base = str(tmp_path / "t")
    first = rows(range(40))
    up = rows(range(30, 60), ts=2, v=0.5)
    pq.write_table(to_arrow(up), tmp_path / "up.parquet")
    no_index = {**OPTS, "hoodie.metadata.record.index.enable": "false"}  # the table as this process makes it
    Table.create(base, SCHEMA, no_index).write(spark.createDataFrame(to_arrow(first)), "insert", no_index)
    assert "record_index" not in (Path(base) / ".hoodie" / "hoodie.properties").read_text()
    # the write stops before its commit (its instant inflight) until the index build is under way: they overlap
    release = tmp_path / "release"
    env = cli_env(**{FAULT_ENV: "wait_before_commit", RELEASE_ENV: str(release)})
    with (tmp_path / "write.log").open("w") as wlog, (tmp_path / "index.log").open("w") as ilog:
        writer = subprocess.Popen([PYHUDI, "write", base, "--input", str(tmp_path / "up.parquet"), "--operation",
                                   "upsert", *CLI_KEYS, "--json"], stdout=wlog, stderr=subprocess.STDOUT, env=env)
        try:
            _wait_for(lambda: Path(f"{release}.waiting").exists(), writer, "the write to reach its commit")
            indexer = subprocess.Popen([PYHUDI, "index", "build", base, "--async", "--file-groups", "2", "--json"],
                                       stdout=ilog, stderr=subprocess.STDOUT, env=cli_env())
            try:
                _wait_for(lambda: any(p.name.endswith(".indexing.inflight")
                                      for p in (Path(base) / ".hoodie" / "timeline").iterdir()),
                          indexer, "the index build to schedule")
            finally:
                release.touch()
                indexer.wait(timeout=900)
        finally:
            release.touch()
            writer.wait(timeout=900)
    outs = {"write": (tmp_path / "write.log").read_text(), "index": (tmp_path / "index.log").read_text()}
    assert writer.returncode == 0 and indexer.returncode == 0, outs
    both = {name: subprocess.CompletedProcess([], 0, out, "") for name, out in outs.items()}
    tl = Table.open(base).timeline()
    (idx,) = tl.by_action("indexing").completed()
    wrote = tl.get(_last_json(outs["write"])["instant"])
    assert wrote is not None and wrote.completion_time is not None and idx.completion_time is not None
    assert idx.requested_time < wrote.completion_time and wrote.requested_time < idx.completion_time  # overlapped
    built = _last_json(both["index"].stdout)
    assert built["file_groups"] == 2 and built["async"] is True
    model: dict = {}
    apply(model, "insert", first)
    apply(model, "upsert", up)
    assert table_rows(hudi_rs_read(base)) == expected(model)
    # the checks afterwards are commands of this process: what they report is the subject, not their start
    stats = run_cli_here("index", "stats", base, "--json")
    assert stats.returncode == 0, stats.stderr[-3000:]
    assert _last_json(stats.stdout)["entries"] == 60
    found = _last_json(run_cli_here("lookup", base, "k059", "k000", "nope", "--json").stdout)
    assert [f["found"] for f in found] == [True, True, False]
    v = run_cli_here("validate", base, "--json")
    assert v.returncode == 0 and _last_json(v.stdout)["ok"], v.stdout[-3000:]
    in_spark = run_cli_here("validate", base, "--spark", "--json")  # the record index checked in Spark tasks
    assert in_spark.returncode == 0, in_spark.stderr[-3000:]
    assert _last_json(in_spark.stdout) == _last_json(v.stdout)


def _wait_for(cond, proc: subprocess.Popen, what: str, timeout: float = 300) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, f"the process ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)

"""The ``pyhudi`` commands on S3, as a user runs them: each one a process against a moto server on 127.0.0.1,
each exiting by itself (a process still running after ``EXIT_TIMEOUT_S`` fails the test). The table goes through
bulk_insert, upsert and delete (SIMPLE index), a record-index build, an upsert through the record index and a
delete; after each step it is read, looked up and validated against a plain Python model, and at the end hudi-rs
reads it from the same server."""

from __future__ import annotations

import io
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.robust import CLI_KEYS, PYHUDI, apply, cli_env, expected, rows, table_rows, to_arrow
from tests.support.s3 import S3Server

pytest.importorskip("moto")
pytest.importorskip("hudi")
pytestmark = [pytest.mark.spark, pytest.mark.slow]

# a write starts its own Spark (a minute or more on a loaded two-core machine); a hang at exit never ends
EXIT_TIMEOUT_S = 600


def _run(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    try:
        res = subprocess.run([PYHUDI, *args], capture_output=True, text=True, timeout=EXIT_TIMEOUT_S, env=cli_env())
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"pyhudi {' '.join(args[:2])} did not exit within {EXIT_TIMEOUT_S} s; stderr: "
                    f"{(e.stderr or b'')[-3000:]!r}")
    return res, time.monotonic() - start


def _ok(*args: str) -> str:
    res, _ = _run(*args)
    assert res.returncode == 0, (args[:2], res.stdout[-2000:], res.stderr[-4000:])
    return res.stdout


def _last_json(stdout: str) -> Any:
    return json.loads(stdout.strip().splitlines()[-1])


def _read_rows(uri: str, *extra: str) -> list[tuple[Any, ...]]:
    out = _ok("read", uri, "--json", *extra)
    recs = [json.loads(line) for line in out.strip().splitlines() if line.startswith("{")]
    return table_rows(pa.Table.from_pylist(recs)) if recs else []


def test_cli_flow_on_s3(s3_server: S3Server, tmp_path: Path) -> None:
    uri = s3_server.uri("tables/flow")
    fs = s3_server.filesystem()
    model: dict[str, dict[str, Any]] = {}
    times: dict[str, float] = {}

    def write(step: str, operation: str, batch: list[dict[str, Any]], *extra: str, on_s3: bool = False) -> None:
        if on_s3:  # the input itself on S3
            src = s3_server.uri(f"inputs/{step}.parquet")
            buf = io.BytesIO()
            pq.write_table(to_arrow(batch), buf)
            with fs.open_output_stream(f"{s3_server.bucket}/inputs/{step}.parquet") as f:
                f.write(buf.getvalue())
        else:
            src = str(tmp_path / f"{step}.parquet")
            pq.write_table(to_arrow(batch), src)
        res, secs = _run("write", uri, "--input", src, "--operation", operation, *CLI_KEYS, *extra, "--json")
        assert res.returncode == 0, (step, res.stderr[-4000:])
        summary = _last_json(res.stdout)
        times[step] = secs
        apply(model, operation, batch)
        if operation == "delete":
            assert summary["deleted"] == len(batch), (step, summary)
        assert _read_rows(uri) == expected(model), step

    simple = ("--index-type", "SIMPLE")
    # every Spark command is a process of its own (JVM and session start): four of them, the delete tagged
    # through the record index the build made
    write("bulk_insert", "bulk_insert", rows(range(12)), *simple)
    write("upsert", "upsert", rows(range(8, 20), ts=2, v=0.5), *simple, on_s3=True)

    start = time.monotonic()
    built = _last_json(_ok("index", "build", uri, "--file-groups", "2", "--json"))
    times["index build"] = time.monotonic() - start
    assert built["file_groups"] == 2 and built["entries"] == len(model)

    write("delete_rli", "delete", rows([0, 1, 2, 3, 15]))

    start = time.monotonic()
    found = {r["key"]: r for r in _last_json(_ok("lookup", uri, "k000", "k004", "k015", "k019", "--json"))}
    times["lookup"] = time.monotonic() - start
    assert not found["k000"]["found"] and not found["k015"]["found"]
    assert found["k004"]["found"] and found["k004"]["partition"] == "a"
    assert found["k019"]["found"] and found["k019"]["partition"] == "b"

    start = time.monotonic()
    report = _last_json(_ok("validate", uri, "--json"))
    times["validate"] = time.monotonic() - start
    assert report["ok"], report
    assert report["record_index"]["entries"] == len(model) and report["record_index"]["missing_count"] == 0

    # point reads through the record index, and a read written to a parquet file on S3
    assert _read_rows(uri, "--key", "k004", "--key", "k019", "--key", "k000") == [
        row for row in expected(model) if row[0] in ("k004", "k019")
    ]
    out = s3_server.uri("outputs/snapshot.parquet")
    assert _last_json(_ok("read", uri, "--output", out, "--json"))["rows"] == len(model)
    with fs.open_input_file(f"{s3_server.bucket}/outputs/snapshot.parquet") as f:
        assert table_rows(pq.read_table(f)) == expected(model)

    timeline = _last_json(_ok("timeline", uri, "--json"))
    assert [i["state"] for i in timeline] == ["COMPLETED"] * len(timeline)

    # hudi-rs reads the same table from the same server
    from hudi import HudiTableBuilder

    table = HudiTableBuilder.from_base_uri(f"s3://{s3_server.bucket}/tables/flow").with_storage_options(
        s3_server.hudi_rs_options()
    ).build()
    batches = table.read()
    assert table_rows(pa.Table.from_batches(batches)) == expected(model)
    print("seconds per command:", json.dumps({k: round(v, 1) for k, v in times.items()}))

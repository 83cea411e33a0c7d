"""Exactly-once streaming writes: batch ids recorded as Hudi's streaming sink records them, replayed batches
skipped (deletes never), commit-metadata options copied; and a real Structured Streaming query killed with SIGKILL
twice (right after a commit, before Spark recorded the batch; then at a random moment once it has committed a batch
of its own) ends with exactly the source's records, checked with hudi-rs."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pyhudi import config as C
from pyhudi.errors import ConfigError, CorruptFileError, StreamingCheckpointError
from pyhudi.faults import ENV as FAULT_ENV
from pyhudi.spark.streaming import foreach_batch
from pyhudi.table.commit_metadata import STREAMING_CHECKPOINT_KEY
from pyhudi.table.table import Table
from tests.support.robust import (
    OPTS,
    SCHEMA,
    apply,
    cli_env,
    expected,
    hudi_rs_read,
    rows,
    table_rows,
    to_arrow,
)
from tests.support.tree import snapshot

pytest.importorskip("hudi")
pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
SKIP_OLDER = C.STREAMING_SKIP_OLDER_BATCHES.key


def _extra(base: str) -> list[dict]:
    tl = Table.open(base).timeline()
    return [tl.read_commit_metadata(i).get("extraMetadata") or {} for i in tl.completed_commits()]


def test_batch_ids_recorded_and_replays_skipped(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    model: dict = {}
    write = foreach_batch(base, {**OPTS, "_app.run": "r1"}, "insert")
    b0, b1 = rows(range(10)), rows(range(10, 20))
    assert write(spark.createDataFrame(to_arrow(b0)), 0).skipped is None
    apply(model, "insert", b0)
    replay = write(spark.createDataFrame(to_arrow(b0)), 0)  # Spark replays batch 0 after a crash
    assert replay is not None and replay.skipped and "batch 0" in replay.skipped
    assert write(spark.createDataFrame(to_arrow(b1)), 1).skipped is None
    apply(model, "insert", b1)
    assert write(spark.createDataFrame(to_arrow(b0)), 1).skipped  # at or below the last committed batch
    assert table_rows(hudi_rs_read(base)) == expected(model)
    extra = _extra(base)
    assert [json.loads(e[STREAMING_CHECKPOINT_KEY]) for e in extra] == [{"default_single_writer": "0"},
                                                                       {"default_single_writer": "1"}]
    assert all(e["_app.run"] == "r1" for e in extra)  # options with the commit-metadata key prefix
    # another stream (its own identifier) is not skipped; deletes never are
    other = foreach_batch(base, {**OPTS, "hoodie.datasource.write.streaming.checkpoint.identifier": "s2"}, "insert")
    b2 = rows(range(20, 25))
    assert other(spark.createDataFrame(to_arrow(b2)), 0).skipped is None
    apply(model, "insert", b2)
    gone = rows(range(0, 5))
    deleter = foreach_batch(base, OPTS, "delete")
    assert deleter(spark.createDataFrame(to_arrow(gone)), 1).skipped is None  # batch 1 again: a delete still runs
    apply(model, "delete", gone)
    assert table_rows(hudi_rs_read(base)) == expected(model)
    # Table.write takes the batch id too
    assert Table.open(base).write(spark.createDataFrame(to_arrow(b1)), "insert", OPTS, batch_id=1).skipped
    assert Table.open(base).write(spark.createDataFrame(to_arrow(rows([30]))), "insert", OPTS, batch_id=2).skipped is None


def test_a_batch_older_than_the_streams_last_is_refused(spark, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """A query restarted with a new checkpoint location numbers its batches from 0 again: skipped as replays, its
    records would be dropped. Such a batch fails (not retried) and nothing is written, unless the query asks to
    skip the batches committed before (restarted from an older copy of its own checkpoint)."""
    base = str(tmp_path / "t")
    model: dict = {}
    write = foreach_batch(base, OPTS, "insert")
    for b in range(3):
        batch = rows(range(10 * b, 10 * b + 5))
        write(spark.createDataFrame(to_arrow(batch)), b)
        apply(model, "insert", batch)
    before = snapshot(Path(base))
    fresh = rows(range(100, 105))
    with pytest.raises(StreamingCheckpointError) as e:
        write(spark.createDataFrame(to_arrow(fresh)), 0)
    msg = str(e.value)
    assert "micro-batch 0" in msg and "batch 2" in msg and "default_single_writer" in msg
    assert "hoodie.datasource.write.streaming.checkpoint.identifier" in msg and SKIP_OLDER in msg
    assert snapshot(Path(base)) == before
    assert table_rows(hudi_rs_read(base)) == expected(model)
    # the replay of the last batch is still skipped, and a later batch written
    assert write(spark.createDataFrame(to_arrow(rows(range(20, 25)))), 2).skipped
    skipping = foreach_batch(base, {**OPTS, SKIP_OLDER: "true"}, "insert")
    with caplog.at_level("WARNING", logger="pyhudi.txn.transaction"):
        res = skipping(spark.createDataFrame(to_arrow(fresh)), 1)
    assert res is not None and res.skipped and "older than batch 2" in caplog.text
    assert snapshot(Path(base)) == before
    # a delete of an older batch too (committed, it would record the older id as the stream's last, and the
    # upserts of that batch, as a CDC query writes them after its deletes, would be skipped as replays)
    with pytest.raises(StreamingCheckpointError):
        foreach_batch(base, OPTS, "delete")(spark.createDataFrame(to_arrow(rows([0]))), 0)
    assert snapshot(Path(base)) == before
    # a replayed delete of the last batch runs again, as in Hudi
    assert foreach_batch(base, OPTS, "delete")(spark.createDataFrame(to_arrow(rows([0]))), 2).skipped is None
    apply(model, "delete", rows([0]))
    assert table_rows(hudi_rs_read(base)) == expected(model)


def test_batch_ids_are_checked(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A batch id is an integer from 0; a recorded one that cannot be read is refused, naming the commit (taken
    for none, an older commit's batch would be taken for the stream's last and a replay written twice)."""
    import numpy as np

    base = str(tmp_path / "t")
    first = rows(range(5))
    Table.create(base, SCHEMA, OPTS).write(spark.createDataFrame(to_arrow(first)), "insert", OPTS, batch_id=42)
    df = spark.createDataFrame(to_arrow(first))
    before = snapshot(Path(base))
    for bad in ("42", -1, True, 4.0):
        with pytest.raises(ConfigError, match="batch_id must be a micro-batch id"):
            Table.open(base).write(df, "insert", OPTS, batch_id=bad)  # type: ignore[arg-type]
    assert snapshot(Path(base)) == before
    assert Table.open(base).write(df, "insert", OPTS, batch_id=np.int64(42)).skipped
    # a commit (options with the commit-metadata prefix "_" are recorded) whose checkpoint holds no batch id
    broken = Table.open(base).write(spark.createDataFrame(to_arrow(rows([7]))), "insert",
                                    {**OPTS, STREAMING_CHECKPOINT_KEY: json.dumps({"default_single_writer": "x"})})
    with pytest.raises(CorruptFileError, match=f"{broken.instant}.*no batch id of stream 'default_single_writer'"):
        Table.open(base).write(df, "insert", OPTS, batch_id=43)
    # a stream fails on it at once, even one that skips failed batches: skipped, every later batch would be too
    ignoring = foreach_batch(base, {**OPTS, "hoodie.datasource.write.streaming.ignore.failed.batch": "true",
                                    "hoodie.datasource.write.streaming.retry.interval.ms": "60000"}, "insert")
    with pytest.raises(CorruptFileError):
        ignoring(df, 43)


def _source(tmp: Path, n_files: int, per_file: int) -> tuple[Path, list[dict]]:
    src = tmp / "source"
    src.mkdir()
    everything = []
    for f in range(n_files):
        batch = [{"id": f"s{f:03d}-{i:03d}", "p": "ab"[i % 2], "ts": f, "v": float(i)} for i in range(per_file)]
        pq.write_table(pa.Table.from_pylist(batch, schema=to_arrow(rows([0])).schema), src / f"part-{f:03d}.parquet")
        everything += batch
    return src, everything


def _run(src: Path, base: str, ckpt: Path, tmp: Path, **env: str) -> subprocess.Popen:
    log = (tmp / "stream.log").open("a")
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.stream_job", str(src), base, str(ckpt), "insert"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=cli_env(**env), start_new_session=True,
    )


@pytest.mark.slow
def test_streaming_query_killed_and_restarted_writes_every_record_once(tmp_path: Path) -> None:
    rng = random.Random(11)
    src, everything = _source(tmp_path, 10, 40)
    base, ckpt = str(tmp_path / "t"), tmp_path / "ckpt"
    # 1. killed right after pyhudi committed the first batch, before Spark recorded it: the restart replays it
    p = _run(src, base, ckpt, tmp_path, **{FAULT_ENV: "kill_after_data_commit"})
    p.wait(timeout=600)
    assert p.returncode != 0
    assert len(Table.open(base).timeline().completed_commits()) == 1
    # 2. killed at a random moment once it has committed a batch of its own, restarted from its checkpoint
    p = _run(src, base, ckpt, tmp_path)
    deadline = time.monotonic() + 600
    while p.poll() is None and time.monotonic() < deadline and \
            len(Table.open(base).timeline().completed_commits()) < 2:
        time.sleep(0.3)
    time.sleep(rng.uniform(0, 4))
    assert p.poll() is None, "the query finished before it could be killed"
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(timeout=120)
    # 3. to the end
    p = _run(src, base, ckpt, tmp_path)
    assert p.wait(timeout=1200) == 0, (tmp_path / "stream.log").read_text()[-3000:]
    got = hudi_rs_read(base)
    keys = got.column("_hoodie_record_key").to_pylist()
    assert len(keys) == len(set(keys)), "a record was written twice"
    model: dict = {}
    apply(model, "insert", everything)
    assert table_rows(got) == expected(model)
    batches = sorted(int(json.loads(e[STREAMING_CHECKPOINT_KEY])["default_single_writer"]) for e in _extra(base))
    assert batches == sorted(set(batches))  # every batch committed once


def test_a_batch_whose_commit_was_archived_is_still_skipped(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A stream's last commit archived because other writers committed many times since (the stream was down): the
    replay of that batch is found in the archived timeline and skipped, not inserted twice."""
    base = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
            "hoodie.cleaner.commits.retained": "1"}
    first = rows(range(5))
    Table.create(base, SCHEMA, opts).write(spark.createDataFrame(to_arrow(first)), "insert", opts, batch_id=7)
    for i in range(6):  # another writer, no stream
        Table.open(base).write(spark.createDataFrame(to_arrow(rows([100 + i]))), "upsert", opts)
    t = Table.open(base)
    assert t.has_archived_instants()
    assert not any(STREAMING_CHECKPOINT_KEY in (t.timeline().read_commit_metadata(i).get("extraMetadata") or {})
                   for i in t.timeline().completed_commits())
    assert Table.open(base).write(spark.createDataFrame(to_arrow(first)), "insert", opts, batch_id=7).skipped
    assert len(hudi_rs_read(base)) == 11

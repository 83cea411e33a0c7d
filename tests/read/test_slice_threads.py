"""A small file slice is read in the calling thread, its consecutive Avro data blocks of one schema decoded as one
block; a large one with the process's read threads, block by block. The same rows either way, the model's and
hudi-rs's, after upserts (some with older ordering values than what they update) and deletes across several
deltacommits of a merge-on-read table."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyhudi.read import slice_reader
from pyhudi.table.table import Table
from tests.support.robust import OPTS, apply, expected, hudi_rs_read, rows, table_rows, to_arrow

pytestmark = pytest.mark.spark

MOR = {**OPTS, "hoodie.table.type": "MERGE_ON_READ", "hoodie.compact.inline": "false",
       "hoodie.parquet.small.file.limit": "0"}


def test_small_and_large_slices_read_alike(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    model: dict = {}
    steps = [("insert", rows(range(40))), ("upsert", rows(range(0, 40, 3), ts=2, v=0.5)),
             ("upsert", rows(range(0, 40, 2), ts=1, v=0.25)),  # older than some of what it updates
             ("delete", rows(range(5, 15), ts=3)), ("upsert", rows(range(10, 50, 4), ts=4, v=0.75)),
             ("upsert", rows(range(0, 12), ts=5, v=0.125))]
    Table.create(base, to_arrow(steps[0][1]).schema, MOR)
    for op, batch in steps:
        Table.open(base).write(spark.createDataFrame(to_arrow(batch)), op, MOR)
        apply(model, op, batch)
    logs = [p for p in Path(base).rglob("*.log.*") if ".hoodie" not in p.parts]
    assert len(logs) >= 8  # slices with several log files, and blocks to decode as one
    runs: list[int] = []
    decode_run = slice_reader.FileSliceReader._decode_run

    def counted(self, run):  # type: ignore[no-untyped-def]
        runs.append(len(run))
        return decode_run(self, run)

    monkeypatch.setattr(slice_reader.FileSliceReader, "_decode_run", counted)
    alone = table_rows(Table.open(base).to_arrow())
    assert max(runs) > 1  # some slice's data blocks were decoded as one
    monkeypatch.setattr(slice_reader, "THREADED_SLICE_MIN_BYTES", 1)
    threaded = table_rows(Table.open(base).to_arrow())
    assert alone == threaded == expected(model) == table_rows(hudi_rs_read(base))

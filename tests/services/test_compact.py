"""Compaction of a merge-on-read table carries out only plans whose every name stays in its file group: a crafted
or corrupt plan is refused before anything is written."""

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

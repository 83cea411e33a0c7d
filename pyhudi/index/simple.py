"""SIMPLE and GLOBAL_SIMPLE: join incoming keys with the keys read from the latest base files."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from pyhudi.index.base import LOC_FILE_ID_COL, LOC_PARTITION_COL, Index
from pyhudi.io.storage import Storage
from pyhudi.spark.frames import local_frame
from pyhudi.table import base_file
from pyhudi.table.schema import PARTITION_PATH_COL, RECORD_KEY_COL

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from pyhudi.write.context import WriteJob

_FILES_SCHEMA = "partition string, file_id string, path string"
_KEYS_SCHEMA = f"__key string, {LOC_PARTITION_COL} string, {LOC_FILE_ID_COL} string"


def read_keys_task(storage: Storage, base_path: str):
    """A mapInArrow function: (partition, file_id, path) rows -> the record keys stored in each base file."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for part, fid, path in zip(*(b.column(i).to_pylist() for i in range(3)), strict=True):
                keys = base_file.read_base_file(
                    storage, posixpath.join(base_path, path), columns=[RECORD_KEY_COL]
                ).column(RECORD_KEY_COL)
                n = len(keys)
                yield pa.record_batch(
                    [keys.combine_chunks(), pa.array([part] * n, pa.string()), pa.array([fid] * n, pa.string())],
                    names=["__key", LOC_PARTITION_COL, LOC_FILE_ID_COL],
                )

    return run


class SimpleIndex(Index):
    def __init__(self, is_global: bool) -> None:
        self.is_global = is_global
        self.name = "GLOBAL_SIMPLE" if is_global else "SIMPLE"

    def existing_keys(self, job: WriteJob, partitions: list[str] | None) -> DataFrame:
        """(key, partition, file id) of every record in the latest base files of ``partitions`` (None: all)."""
        files = job.latest_base_files(partitions)
        spark = job.spark
        df = local_frame(spark, files, _FILES_SCHEMA)
        n = max(1, min(len(files), job.parallelism))
        return df.repartition(n).mapInArrow(read_keys_task(job.storage, job.base_path), _KEYS_SCHEMA)

    def tag(self, job: WriteJob, records: DataFrame) -> DataFrame:
        partitions = None if self.is_global else job.incoming_partitions()
        existing = self.existing_keys(job, partitions)
        cond = records[RECORD_KEY_COL] == existing["__key"]
        if not self.is_global:
            cond = cond & (records[PARTITION_PATH_COL] == existing[LOC_PARTITION_COL])
        # the stored keys come from a tiny list of files, so Spark's size estimate would broadcast them (all keys
        # of the table through the driver); a sort-merge join keeps them distributed
        existing = existing.hint("merge")
        return records.join(existing, cond, "left").drop("__key")

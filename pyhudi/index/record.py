"""RECORD_INDEX: tag incoming records from the metadata table's record index (global: a key is unique across
partitions). The write's prepare stage routes the incoming records by record-index file group in the shuffle it
already makes (combining duplicate keys), file group g to Spark partition g mod P with P = min(N file groups,
the write's parallelism); each tag task then looks its keys up in one sorted batch per file group, so every
block of the index is inflated once, and appends the locations to the records in place (nothing joined back).
Without a record index yet, Hudi falls back to GLOBAL_SIMPLE; so do we."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from pyhudi.index.base import LOC_FILE_ID_COL, LOC_PARTITION_COL, Index
from pyhudi.index.simple import SimpleIndex
from pyhudi.metadata.record_index import (
    file_group_partitions,
    file_group_tasks,
    file_groups_of,
    tag_in_place,
)
from pyhudi.spark.partitioning import KeyRouting, route
from pyhudi.table.schema import RECORD_KEY_COL

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from pyhudi.write.context import WriteJob


@dataclass(frozen=True)
class FileGroupRouting(KeyRouting):
    """Records routed by record-index file group: group g to partition g mod ``partitions`` (Hudi tags one file
    group per task; with fewer partitions than groups a task holds several, looked up in threads)."""

    num_file_groups: int
    partitions: int

    def partition_of(self, keys: pa.Array) -> np.ndarray:
        return file_group_partitions(file_groups_of(keys, self.num_file_groups), self.partitions)


class RecordLevelIndex(Index):
    name = "RECORD_INDEX"
    is_global = True

    def routing(self, job: WriteJob) -> FileGroupRouting | None:
        lookup = job.record_index_lookup()
        if lookup is None or not lookup.num_file_groups:
            return None
        n = lookup.num_file_groups
        return FileGroupRouting(n, file_group_tasks(n, job.parallelism))

    def tag(self, job: WriteJob, records: DataFrame) -> DataFrame:
        lookup = job.record_index_lookup()
        if lookup is None:
            return SimpleIndex(is_global=True).tag(job, records)
        routing = self.routing(job)
        if routing is not None and not (records is job.prepared and job.routing == routing):
            records = route(records, routing, RECORD_KEY_COL)
        return tag_in_place(records, lookup, RECORD_KEY_COL, LOC_PARTITION_COL, LOC_FILE_ID_COL)

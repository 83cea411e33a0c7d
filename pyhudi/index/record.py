"""RECORD_INDEX: tag incoming records from the metadata table's record index (global: a key is unique across
partitions). Only the incoming keys are looked up, one sorted batch per record-index file group: in a single
Spark task for a batch of at most ``pyhudi.record.index.lookup.single.task.max.keys`` keys against an index of
at most ``pyhudi.record.index.lookup.single.task.max.bytes``, else routed to one task per file group (or a few);
the locations found are joined back to the records. Without a record index yet, Hudi falls back to
GLOBAL_SIMPLE; so do we."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyhudi import config as C
from pyhudi.index.base import LOC_FILE_ID_COL, LOC_PARTITION_COL, Index
from pyhudi.index.simple import SimpleIndex
from pyhudi.metadata.reader import RECORD_INDEX, MetadataTableReader
from pyhudi.metadata.record_index import RecordIndexLookup, tag_records
from pyhudi.table.schema import RECORD_KEY_COL

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from pyhudi.io.storage import Storage
    from pyhudi.table.properties import TableConfig
    from pyhudi.table.timeline import ActiveTimeline
    from pyhudi.write.context import WriteJob


class RecordLevelIndex(Index):
    name = "RECORD_INDEX"
    is_global = True

    def tag(self, job: WriteJob, records: DataFrame) -> DataFrame:
        lookup = job.record_index_lookup()
        if lookup is None:
            return SimpleIndex(is_global=True).tag(job, records)
        max_keys = C.int_option(job.config.options, C.RECORD_INDEX_SINGLE_TASK_MAX_KEYS)
        max_bytes = C.int_option(job.config.options, C.RECORD_INDEX_SINGLE_TASK_MAX_BYTES)
        n = job.prepared_count if records is job.prepared else None
        single = n is not None and n <= max_keys and lookup.file_bytes <= max_bytes
        return tag_records(records, lookup, RECORD_KEY_COL, LOC_PARTITION_COL, LOC_FILE_ID_COL, job.parallelism, single)


def record_index_lookup(
    storage: Storage, base_path: str, timeline: ActiveTimeline, config: TableConfig
) -> RecordIndexLookup | None:
    """The record index of a table as of its timeline, or None when the table has none."""
    if RECORD_INDEX not in config.metadata_partitions:
        return None
    reader = MetadataTableReader(storage, base_path, data_timeline=timeline, data_config=config)
    if RECORD_INDEX not in reader.partitions():
        return None
    return RecordIndexLookup.from_reader(reader)

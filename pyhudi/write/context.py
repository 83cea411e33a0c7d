"""Driver-side state of one write: the table, the options, the instant, the file-system view, the timers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyhudi.config import WriteConfig
from pyhudi.io.storage import Storage
from pyhudi.table.schema import PARTITION_PATH_COL

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from pyhudi.metadata.record_index import RecordIndexLookup
    from pyhudi.spark.partitioning import KeyRouting
    from pyhudi.spark.progress import Progress
    from pyhudi.table.fsview import FileSystemView
    from pyhudi.table.timeline import ActiveTimeline


@dataclass
class WriteJob:
    spark: SparkSession
    storage: Storage
    base_path: str
    table_name: str
    config: WriteConfig
    instant: str
    timeline: ActiveTimeline
    view: FileSystemView
    data_schema: pa.Schema  # the writer schema (the table's, evolved by this write's input)
    base_schema: pa.Schema | None = None  # the table's schema when the write began
    merge_on_read: bool = False  # a MERGE_ON_READ table: updates and deletes of stored records go to log files
    timings: dict[str, float] = field(default_factory=dict)
    progress: Progress | None = None
    prepared: DataFrame | None = None
    routing: KeyRouting | None = None  # how the prepared records were partitioned for the index's tag
    stats_columns: tuple[str, ...] | None = None  # the table keeps column_stats of these columns (set at start)
    held: list[DataFrame] = field(default_factory=list)  # persisted for this write (producer, index), released at its end
    _partitions: list[str] | None = None
    _record_index: tuple[RecordIndexLookup | None] | None = None

    @property
    def parallelism(self) -> int:
        if self.config.parallelism:
            return self.config.parallelism
        return max(2, self.spark.sparkContext.defaultParallelism)

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            if self.progress is not None:
                with self.progress.stage(stage):
                    yield
            else:
                yield
        finally:
            self.timings[stage] = self.timings.get(stage, 0.0) + time.perf_counter() - t0

    def record_index_lookup(self) -> RecordIndexLookup | None:
        """The table's record index as of this write's timeline (None: not built); opened once per write."""
        from pyhudi.metadata.record_index import record_index_lookup
        from pyhudi.table.properties import METAFOLDER, read_table_config

        if self._record_index is None:
            cfg = read_table_config(self.storage, f"{self.base_path}/{METAFOLDER}")
            self._record_index = (record_index_lookup(self.storage, self.base_path, self.timeline, cfg),)
        return self._record_index[0]

    def incoming_partitions(self) -> list[str]:
        """Distinct partition paths of the prepared records (computed once)."""
        if self._partitions is None:
            assert self.prepared is not None
            rows = self.prepared.select(PARTITION_PATH_COL).distinct().collect()
            self._partitions = sorted(r[0] for r in rows)
        return self._partitions

    def latest_base_files(self, partitions: list[str] | None) -> list[tuple[str, str, str]]:
        """(partition, file id, relative path) of the latest base file of every file group."""
        wanted = None if partitions is None else set(partitions)
        return [
            (f.partition, f.file_id, f.relative_path)
            for f in self.view.latest_base_files()
            if wanted is None or f.partition in wanted
        ]

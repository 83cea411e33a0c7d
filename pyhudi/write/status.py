"""WriteStatus: what one task wrote to one file group, including the record keys it inserted, updated, deleted.

Statuses travel from Spark tasks to the driver as Arrow rows; the key lists stay on the executors' side of
the pipeline (the record index consumes them there); the driver collects only the counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

NULL_COMMIT = "null"  # prevCommit of a newly created file group, as Hudi writes it
KEY_LISTS = ("inserted_keys", "updated_keys", "deleted_keys")

WRITE_STATUS_SCHEMA = pa.schema(
    [
        ("partition", pa.string()),
        ("file_id", pa.string()),
        ("path", pa.string()),  # relative to the table's base path
        ("prev_commit", pa.string()),
        ("prev_base_file", pa.string()),
        ("num_writes", pa.int64()),
        ("num_inserts", pa.int64()),
        ("num_updates", pa.int64()),
        ("num_deletes", pa.int64()),
        ("file_size", pa.int64()),
        ("min_key", pa.string()),
        ("max_key", pa.string()),
        ("runtime_ms", pa.int64()),
        ("inserted_keys", pa.list_(pa.string())),
        ("updated_keys", pa.list_(pa.string())),
        ("deleted_keys", pa.list_(pa.string())),
    ]
)
STAT_COLUMNS = [f.name for f in WRITE_STATUS_SCHEMA if f.name not in KEY_LISTS]


@dataclass(frozen=True)
class WriteStat:
    """The counts of one WriteStatus, as the driver sees them."""

    partition: str
    file_id: str
    path: str
    prev_commit: str
    prev_base_file: str | None
    num_writes: int
    num_inserts: int
    num_updates: int
    num_deletes: int
    file_size: int
    min_key: str | None
    max_key: str | None
    runtime_ms: int

    @staticmethod
    def from_row(row: Any) -> WriteStat:
        d = row.asDict() if hasattr(row, "asDict") else dict(row)
        return WriteStat(**{k: d[k] for k in STAT_COLUMNS})

    def to_hudi(self) -> dict[str, Any]:
        """This stat as a ``HoodieWriteStat`` record of the commit metadata."""
        created = self.prev_commit == NULL_COMMIT
        return {
            "fileId": self.file_id,
            "path": self.path,
            "prevCommit": self.prev_commit,
            "numWrites": self.num_writes,
            "numDeletes": self.num_deletes,
            "numUpdateWrites": self.num_updates,
            "totalWriteBytes": self.file_size,
            "totalWriteErrors": 0,
            "partitionPath": self.partition,
            "totalLogRecords": 0,
            "totalLogFiles": None,
            "totalUpdatedRecordsCompacted": 0,
            "numInserts": self.num_inserts,
            "totalLogBlocks": 0,
            "totalCorruptLogBlock": 0,
            "totalRollbackBlocks": 0,
            "fileSizeInBytes": self.file_size,
            "logVersion": None,
            "logOffset": None,
            "baseFile": None,
            "logFiles": None,
            "cdcStats": None,
            "prevBaseFile": self.prev_base_file,
            "minEventTime": None,
            "maxEventTime": None,
            "runtimeStats": {
                "totalScanTime": 0,
                "totalCreateTime": self.runtime_ms if created else 0,
                "totalUpsertTime": 0 if created else self.runtime_ms,
            },
            "totalLogFilesCompacted": 0,
            "totalLogReadTimeMs": 0,
            "totalLogSizeCompacted": 0,
            "tempPath": None,
            "numUpdates": 0,
        }


def status_row(**values: Any) -> pa.Table:
    """One WriteStatus as a one-row Arrow table."""
    return pa.Table.from_pylist([values], schema=WRITE_STATUS_SCHEMA)

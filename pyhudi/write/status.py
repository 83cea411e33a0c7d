"""WriteStatus: what one task wrote to one file group, including the record keys it inserted, updated, deleted.

Statuses travel from Spark tasks to the driver as Arrow rows; the keys stay on the executors' side of the
pipeline (the record index consumes them there); the driver collects only the counts. The inserted keys, which
are all of a bulk load's records, are packed into one binary value per status (:func:`pyhudi.io.arrow.pack_strings`):
the JVM keeps and moves a few thousand values for a 20M-row load instead of converting 20M strings each way;
their number is ``num_inserts``.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pyhudi.io.arrow import pack_strings
from pyhudi.table.commit_metadata import NULL_COMMIT, write_stat
from pyhudi.table.filenames import LogFileName

#: the inserted keys, packed (:func:`pyhudi.io.arrow.pack_strings`; null when none)
INSERTED_KEYS = "inserted_keys"
#: key columns that are lists of strings
KEY_LISTS = ("updated_keys", "deleted_keys")

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
        (INSERTED_KEYS, pa.binary()),
        ("updated_keys", pa.list_(pa.string())),
        ("deleted_keys", pa.list_(pa.string())),
        # the file's column_stats cells (pyhudi.metadata.column_stats), when the table keeps them
        ("column_stats", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    ]
)
STAT_COLUMNS = [f.name for f in WRITE_STATUS_SCHEMA if f.name not in (INSERTED_KEYS, *KEY_LISTS)]


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
    column_stats: tuple[tuple[str, bytes], ...] = ()  # (key, value) cells of the file's column_stats records

    @staticmethod
    def from_row(row: Any) -> WriteStat:
        d = row.asDict() if hasattr(row, "asDict") else dict(row)
        values = {k: d[k] for k in STAT_COLUMNS}
        cells = []
        for c in values.pop("column_stats") or ():
            c = c.asDict() if hasattr(c, "asDict") else c
            cells.append((str(c["key"]), bytes(c["value"])))
        return WriteStat(**values, column_stats=tuple(cells))

    def to_hudi(self) -> dict[str, Any]:
        """This stat as a ``HoodieWriteStat`` record of the commit metadata (a log file's, table version 8+: the
        file's version, offset 0, ``baseFile`` empty, ``logFiles`` = [the file])."""
        name = posixpath.basename(self.path)
        if name.startswith("."):
            stat = write_stat(
                file_id=self.file_id, path=self.path, partition=self.partition, prev_commit=self.prev_commit,
                num_writes=self.num_writes, num_inserts=self.num_inserts, num_update_writes=self.num_updates,
                num_deletes=self.num_deletes, size=self.file_size, log_version=LogFileName.parse(name).version,
                log_offset=0, base_file="", log_files=[name],
                runtime={"totalScanTime": 0, "totalCreateTime": 0, "totalUpsertTime": self.runtime_ms},
            )
            return stat
        created = self.prev_commit == NULL_COMMIT
        return write_stat(
            file_id=self.file_id, path=self.path, partition=self.partition, prev_commit=self.prev_commit,
            num_writes=self.num_writes, num_inserts=self.num_inserts, num_update_writes=self.num_updates,
            num_deletes=self.num_deletes, size=self.file_size, prev_base_file=self.prev_base_file,
            runtime={"totalScanTime": 0, "totalCreateTime": self.runtime_ms if created else 0,
                     "totalUpsertTime": 0 if created else self.runtime_ms},
        )


def status_row(**values: Any) -> pa.Table:
    """One WriteStatus as a one-row Arrow table (``column_stats`` may be left out; the keys may be given as an
    Arrow string array, which is used as it is, never converted to Python objects)."""
    values.setdefault("column_stats", None)
    ins = values.get(INSERTED_KEYS)
    if len(ins or ()) != values["num_inserts"]:  # the record index counts inserted keys by num_inserts
        raise ValueError(f"WriteStatus of {values.get('path')!r}: {len(ins or ())} inserted keys, "
                         f"num_inserts {values['num_inserts']}")
    values[INSERTED_KEYS] = None if ins is None or len(ins) == 0 else pack_strings(
        ins if isinstance(ins, (pa.Array, pa.ChunkedArray)) else pa.array(list(ins), pa.string()))
    arrays = {k: values.pop(k) for k in KEY_LISTS if isinstance(values.get(k), (pa.Array, pa.ChunkedArray))}
    row = pa.Table.from_pylist([{**values, **{k: [] for k in arrays}}], schema=WRITE_STATUS_SCHEMA)
    for k, keys in arrays.items():
        keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
        keys = keys.cast(pa.string())
        lists = pa.ListArray.from_arrays(pa.array([0, len(keys)], pa.int32()), keys)
        row = row.set_column(row.schema.get_field_index(k), WRITE_STATUS_SCHEMA.field(k), lists)
    return row

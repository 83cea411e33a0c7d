"""Fabricated Hudi tables for rollback/clean tests: real parquet base files with the five meta columns and
commit metadata listing them, so hudi-rs can read them."""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pyhudi.table import markers
from pyhudi.table.properties import TableConfig, create_table_config, meta_path
from pyhudi.table.timeline import COMMIT, ActiveTimeline, Instant
from tests.support.storage import LOCAL

AVRO_SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "t_record",
        "namespace": "hoodie.t",
        "fields": [
            {"name": "id", "type": ["null", "string"], "default": None},
            {"name": "v", "type": ["null", "long"], "default": None},
            {"name": "region", "type": ["null", "string"], "default": None},
        ],
    }
)


class Clock:
    """Deterministic strictly increasing instant times."""

    def __init__(self) -> None:
        self.ms = 1_767_225_600_000  # 2026-01-01

    def __call__(self) -> str:
        from pyhudi.table.timeline import format_instant_time

        self.ms += 1000
        return format_instant_time(self.ms)


def make_table(base: Path, name: str = "t", partitioned: bool = True) -> str:
    cfg = TableConfig.create(
        name,
        record_key_fields=["id"],
        partition_fields=["region"] if partitioned else [],
        ordering_fields=["v"],
        extra={
            "hoodie.datasource.write.hive_style_partitioning": "true",
            "hoodie.table.create.schema": AVRO_SCHEMA,
        },
    )
    create_table_config(LOCAL, meta_path(str(base)), cfg)
    return str(base)


def write_partition_meta(base: str, partition: str, t: str) -> None:
    folder = posixpath.join(base, partition) if partition else base
    path = posixpath.join(folder, ".hoodie_partition_metadata")
    if not LOCAL.exists(path):
        depth = len(partition.split("/")) if partition else 0
        LOCAL.write_bytes(path, f"#partition metadata\ncommitTime={t}\npartitionDepth={depth}\n".encode())


def write_base_file(
    base: str, partition: str, file_id: str, t: str, rows: list[tuple[str, int]]
) -> tuple[str, int]:
    name = f"{file_id}_0-1-0_{t}.parquet"
    region = partition.split("=", 1)[1] if "=" in partition else ""
    table = pa.table(
        {
            "_hoodie_commit_time": [t] * len(rows),
            "_hoodie_commit_seqno": [f"{t}_0_{i}" for i in range(len(rows))],
            "_hoodie_record_key": [k for k, _ in rows],
            "_hoodie_partition_path": [partition] * len(rows),
            "_hoodie_file_name": [name] * len(rows),
            "id": [k for k, _ in rows],
            "v": pa.array([v for _, v in rows], pa.int64()),
            "region": [region] * len(rows),
        }
    )
    folder = posixpath.join(base, partition) if partition else base
    LOCAL.makedirs(folder)
    path = posixpath.join(folder, name)
    pq.write_table(table, path)
    return name, LOCAL.status(path).size


def commit(
    base: str,
    clock: Clock,
    files: dict[str, list[tuple[str, list[tuple[str, int]]]]],
    *,
    complete: bool = True,
    with_markers: bool = True,
    replaced: dict[str, list[str]] | None = None,
    before_complete: Callable[[str, dict[str, object]], None] | None = None,
) -> str:
    """One commit writing ``files`` = {partition: [(fileId, rows)]}. Returns its instant time.

    ``before_complete(instant, commit metadata)`` runs between writing the files and completing the instant
    (e.g. the metadata table's deltacommit)."""
    tl = ActiveTimeline.load(LOCAL, base)
    action = "replacecommit" if replaced else COMMIT
    t = clock()
    req = tl.create_requested(action, t)
    infl = tl.transition_to_inflight(req, None)
    stats: dict[str, list[dict[str, object]]] = {}
    for partition, groups in files.items():
        write_partition_meta(base, partition, t)
        for fid, rows in groups:
            name = f"{fid}_0-1-0_{t}.parquet"
            if with_markers:
                markers.create_marker(LOCAL, base, t, partition, name, "CREATE")
            name, size = write_base_file(base, partition, fid, t, rows)
            stats.setdefault(partition, []).append(
                {
                    "fileId": fid,
                    "path": posixpath.join(partition, name) if partition else name,
                    "prevCommit": "null",
                    "numWrites": len(rows),
                    "numDeletes": 0,
                    "numUpdateWrites": 0,
                    "numInserts": len(rows),
                    "totalWriteBytes": size,
                    "totalWriteErrors": 0,
                    "partitionPath": partition,
                    "fileSizeInBytes": size,
                }
            )
    if not complete:
        return t
    meta: dict[str, object] = {
        "partitionToWriteStats": stats,
        "compacted": False,
        "extraMetadata": {"schema": AVRO_SCHEMA},
        "version": 1,
        "operationType": "INSERT_OVERWRITE" if replaced else "UPSERT",
    }
    schema = None
    if replaced:
        meta["partitionToReplaceFileIds"] = replaced
        schema = "HoodieReplaceCommitMetadata"
    if before_complete is not None:
        before_complete(t, meta)
    tl.complete(infl, meta, clock(), schema=schema)
    markers.delete_markers(LOCAL, base, t)
    return t


def timeline_names(base: str) -> list[str]:
    return sorted(p.name for p in Path(base, ".hoodie", "timeline").iterdir() if p.is_file())


def instant_of(base: str, t: str) -> Instant | None:
    return ActiveTimeline.load(LOCAL, base).get(t)


def savepoint(base: str, clock: Clock, t: str) -> dict[str, list[str]]:
    """Savepoint commit ``t`` as Apache Hudi's ``SavepointActionExecutor`` does: ``<t>.savepoint.inflight``, then
    ``<t>_<c>.savepoint`` (the commit's own requested time) naming every file of the latest file slices as of
    ``t``. Returns {partition: file names}."""
    from pyhudi.io import avro
    from pyhudi.table.fsview import FileSystemView, StorageListing
    from pyhudi.table.timeline import SAVEPOINT, State

    tl = ActiveTimeline.load(LOCAL, base)
    files = StorageListing(LOCAL.rooted(base), base).list_partition_files()
    view = FileSystemView.build(files, tl.commits().filter(lambda i: i.requested_time <= t))
    named = {p: sorted(posixpath.basename(r) for fg in view.file_groups(p) if fg.slices
                       for r in fg.slices[-1].relative_paths)
             for p in view.partitions()}
    meta = {"savepointedBy": "hudi", "savepointedAt": 1, "comments": "",
            "partitionMetadata": {p: {"partitionPath": p, "savepointDataFile": n} for p, n in named.items()},
            "version": 1}
    LOCAL.write_bytes(tl.path_of(Instant(t, SAVEPOINT, State.INFLIGHT)), b"")
    LOCAL.write_bytes(tl.path_of(Instant(t, SAVEPOINT, State.COMPLETED, clock())),
                      avro.write_container(meta, "HoodieSavepointMetadata"))
    return named

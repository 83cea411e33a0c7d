"""Hand-built merge-on-read tables (table version 9) for the file-slice reader's tests.

A :class:`MorTable` writes what a Hudi 1.1 writer leaves: ``hoodie.properties`` (MERGE_ON_READ, merge mode,
ordering fields), parquet base files with the five meta columns, log files ``.<fileId>_<instant>.log.1_0-1-0``
of Avro data blocks (the project's block writer), delete blocks (Java's ordering-value union), parquet data
blocks, rollback command blocks and torn bytes, and the timeline (deltacommit requested -> inflight -> completed
with commit metadata holding the schema). No metadata table: readers (pyhudi, hudi-rs) list storage.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pyhudi.io.logfile import (
    DeleteRecord,
    OrderingType,
    avro_data_block,
    delete_block,
    parquet_data_block,
    rollback_block,
)
from pyhudi.table.properties import MERGE_ON_READ, TableConfig, create_table_config, meta_path
from pyhudi.table.schema import META_COLUMNS
from pyhudi.table.timeline import ActiveTimeline, Instant, format_instant_time
from tests.support.storage import LOCAL

TOKEN = "0-1-0"


def data_schema(is_deleted: bool = False, extra: Sequence[tuple[str, Any]] = ()) -> dict[str, Any]:
    fields: list[dict[str, Any]] = [
        {"name": "id", "type": ["null", "string"], "default": None},
        {"name": "ts", "type": ["null", "long"], "default": None},
        {"name": "v", "type": ["null", "double"], "default": None},
        {"name": "p", "type": ["null", "string"], "default": None},
    ]
    fields += [{"name": n, "type": ["null", t], "default": None} for n, t in extra]
    if is_deleted:
        fields.append({"name": "_hoodie_is_deleted", "type": ["null", "boolean"], "default": None})
    return {"type": "record", "name": "t_record", "namespace": "hoodie.t", "fields": fields}


def with_meta_fields(schema: dict[str, Any]) -> dict[str, Any]:
    meta = [{"name": c, "type": ["null", "string"], "doc": "", "default": None} for c in META_COLUMNS]
    return {**schema, "fields": meta + list(schema["fields"])}


@dataclass
class Block:
    """One block of a log file to write: kind data | parquet | delete | rollback | torn | corrupt."""

    kind: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    deletes: list[DeleteRecord] = field(default_factory=list)
    instant: str | None = None  # the INSTANT_TIME header (default: the commit's)
    target: str | None = None  # rollback target
    raw: bytes = b""


def data(*rows: dict[str, Any], instant: str | None = None) -> Block:
    return Block("data", list(rows), instant=instant)


def parquet(*rows: dict[str, Any]) -> Block:
    return Block("parquet", list(rows))


def deletes(*keys: str | tuple[str, Any] | tuple[str, Any, OrderingType], instant: str | None = None) -> Block:
    recs = []
    for k in keys:
        if isinstance(k, str):
            recs.append(DeleteRecord(k, None, 0))  # Hudi's default ordering value: Integer 0
        elif len(k) == 2:
            recs.append(DeleteRecord(k[0], None, k[1]))
        else:
            recs.append(DeleteRecord(k[0], None, k[1], k[2]))
    return Block("delete", deletes=recs, instant=instant)


def rollback(target: str) -> Block:
    return Block("rollback", target=target)


def torn(nbytes: int = 40) -> Block:
    """The first ``nbytes`` of a valid block: a writer that died mid-block."""
    return Block("torn", raw=b"x" * nbytes)


class MorTable:
    """A merge-on-read table built file by file (see the module docstring)."""

    def __init__(
        self,
        base: Path,
        *,
        merge_mode: str = "EVENT_TIME_ORDERING",
        ordering: Sequence[str] = ("ts",),
        is_deleted: bool = False,
        extra_fields: Sequence[tuple[str, Any]] = (),
        partition: str = "",
        start_ms: int = 1_767_225_600_000,
    ) -> None:
        self.base = str(base)
        self.partition = partition
        self.schema = data_schema(is_deleted, extra_fields)
        self.block_schema = json.dumps(with_meta_fields(self.schema), separators=(",", ":"))
        self.ms = start_ms
        self.seq = 0
        self.ordering = tuple(ordering)
        extra = {
            "hoodie.table.create.schema": json.dumps(self.schema, separators=(",", ":")),
            "hoodie.record.merge.mode": merge_mode,
            "hoodie.datasource.write.hive_style_partitioning": "false",
            "hoodie.table.base.file.format": "PARQUET",
        }
        cfg = TableConfig.create("t", table_type=MERGE_ON_READ, record_key_fields=["id"],
                                 partition_fields=["p"] if partition else [], ordering_fields=list(ordering),
                                 extra=extra)
        create_table_config(LOCAL, meta_path(self.base), cfg)
        LOCAL.makedirs(ActiveTimeline.timeline_dir_for(self.base, cfg))
        folder = posixpath.join(self.base, partition) if partition else self.base
        LOCAL.makedirs(folder)
        depth = len(partition.split("/")) if partition else 0
        LOCAL.write_bytes(posixpath.join(folder, ".hoodie_partition_metadata"),
                          f"#partition metadata\ncommitTime=0\npartitionDepth={depth}\n".encode())
        self.folder = folder

    # -- time -------------------------------------------------------------------------------------------------
    def tick(self) -> str:
        self.ms += 1000
        return format_instant_time(self.ms)

    def timeline(self) -> ActiveTimeline:
        return ActiveTimeline.load(LOCAL, self.base)

    # -- records ------------------------------------------------------------------------------------------------
    def arrow_schema(self) -> pa.Schema:
        from pyhudi.table.schema import avro_to_arrow, with_meta

        return with_meta(avro_to_arrow(self.schema))

    def _full(self, rows: Sequence[dict[str, Any]], instant: str, file_field: str) -> list[dict[str, Any]]:
        out = []
        for r in rows:
            self.seq += 1
            rec = {c: None for c in [f["name"] for f in self.schema["fields"]]}
            rec.update({"p": self.partition.split("=", 1)[-1] if self.partition else None})
            rec.update(r)
            out.append({
                "_hoodie_commit_time": instant,
                "_hoodie_commit_seqno": f"{instant}_0_{self.seq}",
                "_hoodie_record_key": r["id"],
                "_hoodie_partition_path": self.partition,
                "_hoodie_file_name": file_field,
                **rec,
            })
        return out

    # -- files --------------------------------------------------------------------------------------------------
    def write_base(self, fid: str, instant: str, rows: Sequence[dict[str, Any]]) -> str:
        name = f"{fid}_{TOKEN}_{instant}.parquet"
        table = pa.Table.from_pylist(self._full(rows, instant, name), schema=self.arrow_schema())
        pq.write_table(table, posixpath.join(self.folder, name), row_group_size=max(1, min(1 << 17, table.num_rows)))
        return name

    def log_bytes(self, instant: str, blocks: Sequence[Block], fid: str) -> bytes:
        out = b""
        for b in blocks:
            t = b.instant or instant
            if b.kind == "data":
                out += avro_data_block(self._full(b.rows, t, fid), t, self.block_schema)
            elif b.kind == "parquet":
                table = pa.Table.from_pylist(self._full(b.rows, t, fid), schema=self.arrow_schema())
                out += parquet_data_block(table, t, self.block_schema)
            elif b.kind == "delete":
                recs = [DeleteRecord(d.record_key, self.partition, d.ordering_value, d.ordering_type)
                        for d in b.deletes]
                out += delete_block(recs, t, schema_json=self.block_schema)
            elif b.kind == "rollback":
                out += rollback_block(t, b.target or "")
            elif b.kind == "torn":
                whole = avro_data_block(self._full([{"id": "torn"}], t, fid), t, self.block_schema)
                out += whole[: len(b.raw)]
            elif b.kind == "corrupt":
                out += b.raw
        return out

    def write_log(self, fid: str, instant: str, blocks: Sequence[Block], version: int = 1) -> str:
        name = f".{fid}_{instant}.log.{version}_{TOKEN}"
        LOCAL.write_bytes(posixpath.join(self.folder, name), self.log_bytes(instant, blocks, fid))
        return name

    # -- commits ------------------------------------------------------------------------------------------------
    def commit(
        self,
        *,
        base: dict[str, list[dict[str, Any]]] | None = None,
        logs: dict[str, list[Block]] | None = None,
        complete: bool = True,
        action: str = "deltacommit",
        instant: str | None = None,
    ) -> str:
        """One commit writing base files ({fid: rows}) and log files ({fid: blocks}); returns its instant."""
        tl = self.timeline()
        t = instant or self.tick()
        req = tl.create_requested(action, t)
        infl = tl.transition_to_inflight(req, None)
        stats: list[dict[str, Any]] = []
        for fid, rows in (base or {}).items():
            name = self.write_base(fid, t, rows)
            stats.append(self._stat(fid, name, len(rows)))
        for fid, blocks in (logs or {}).items():
            name = self.write_log(fid, t, blocks)
            stats.append(self._stat(fid, name, sum(len(b.rows) for b in blocks)))
        if complete:
            self.complete(infl, stats)
        return t

    def complete(self, inflight: Instant | str, stats: list[dict[str, Any]] | None = None) -> str:
        tl = self.timeline()
        if isinstance(inflight, str):
            inflight = next(i for i in tl.pending() if i.requested_time == inflight)
        meta = {
            "partitionToWriteStats": {self.partition: stats or []},
            "compacted": False,
            "extraMetadata": {"schema": json.dumps(self.schema, separators=(",", ":"))},
            "version": 1,
            "operationType": "UPSERT",
        }
        done = tl.complete(inflight, meta, self.tick())
        return done.completion_time or ""

    def _stat(self, fid: str, name: str, n: int) -> dict[str, Any]:
        path = posixpath.join(self.partition, name) if self.partition else name
        size = LOCAL.status(posixpath.join(self.folder, name)).size
        return {"fileId": fid, "path": path, "prevCommit": "null", "numWrites": n, "numDeletes": 0,
                "numUpdateWrites": 0, "numInserts": n, "totalWriteBytes": size, "totalWriteErrors": 0,
                "partitionPath": self.partition, "fileSizeInBytes": size}

    def schedule_compaction(self, fid: str, base_instant: str, logs: Sequence[str]) -> str:
        """A pending compaction of ``fid`` (its plan on the timeline, requested then inflight)."""
        tl = self.timeline()
        t = self.tick()
        plan = {"operations": [{"baseInstantTime": base_instant, "deltaFilePaths": list(logs),
                                "dataFilePath": f"{fid}_{TOKEN}_{base_instant}.parquet", "fileId": fid,
                                "partitionPath": self.partition, "metrics": {}, "bootstrapFilePath": None}],
                "extraMetadata": None, "version": 2}
        req = tl.create_requested("compaction", t, plan)
        tl.transition_to_inflight(req, None)
        return t

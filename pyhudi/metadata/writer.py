"""Writing the metadata table (``<base>/.hoodie/metadata``): creation, one deltacommit per data-table action,
rollback of a failed action's deltacommit, compaction, and cleaning of old file slices.

Protocol (as Hudi's): a data-table action at instant T (commit, clean) first applies its file changes to the
metadata table as a deltacommit with the same instant T: a new log file per touched file group holding one HFile
data block. Readers use a block only once T is completed on the data timeline, so a write that dies between the
two commits leaves nothing visible; the next write rolls the deltacommit back together with the data instant.
Every ``hoodie.metadata.compact.max.delta.commits`` deltacommits the file groups are compacted into new base
HFiles and older file slices are cleaned.
"""

from __future__ import annotations

import json
import posixpath
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pyarrow as pa

from pyhudi import config as C
from pyhudi import faults
from pyhudi.config import METADATA_ENABLE, RECORD_INDEX_ENABLE
from pyhudi.errors import ConfigError, CorruptFileError, PyHudiError, StorageError
from pyhudi.hfile import HFileWriter
from pyhudi.io import bloom
from pyhudi.io.compression import CODEC_GZ
from pyhudi.io.logfile import hfile_data_block
from pyhudi.io.storage import Storage
from pyhudi.metadata.partitions import (
    COLUMN_STATS,
    COLUMN_STATS_INIT_INSTANT,
    DRIVER_TOKEN,
    FILES,
    INIT_PREFIX,
    PARTITION_STATS,
    PARTITION_STATS_INIT_INSTANT,
    RECORD_INDEX,
    file_group_id,
    metadata_base_path,
    pending_indexing,
)
from pyhudi.metadata.reader import MetadataTableReader, has_metadata_table, table_view
from pyhudi.metadata.records import (
    ALL_PARTITIONS_KEY,
    MetadataRecord,
    encode_cells,
    files_record,
    partition_list_record,
    record_index_file_group,
    writer_schema_json,
)
from pyhudi.table import filenames
from pyhudi.table.commit_metadata import commit_metadata, log_write_stat, write_stat
from pyhudi.table.fsview import FileSystemView
from pyhudi.table.partition_path import partition_path_problem, shown
from pyhudi.table.properties import (
    METADATA_PARTITIONS,
    METADATA_PARTITIONS_INFLIGHT,
    METAFOLDER,
    TableConfig,
    create_table_config,
    read_table_config,
    update_table_config,
)
from pyhudi.table.timeline import (
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    INDEXING,
    ActiveTimeline,
    Instant,
    InstantTimeGenerator,
)

FILE_SLICES_RETAINED = 2  # file slices kept per metadata file group after a compaction
MDT_BLOOM_ENTRIES = 10000  # Hudi's metadata HFiles carry a 10000-entry DYNAMIC_V0 bloom filter of their keys

#: writes the files of other metadata partitions for a deltacommit (e.g. record-index log files from Spark
#: tasks) and returns, per partition, {"rel", "file_id", "size", "n"} of each file written
ExtraWriter = Callable[[], Mapping[str, list[dict[str, Any]]]]


def metadata_table_config(data: TableConfig) -> TableConfig:
    """``hoodie.properties`` of a data table's metadata table, as Hudi 1.1 writes it."""
    props = {
        "hoodie.table.name": f"{data.table_name}_metadata",
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.table.version": "9",
        "hoodie.table.initial.version": "9",
        "hoodie.timeline.layout.version": "2",
        "hoodie.timeline.path": "timeline",
        "hoodie.timeline.history.path": "history",
        "hoodie.archivelog.folder": "history",
        "hoodie.table.recordkey.fields": "key",
        "hoodie.table.keygenerator.type": "HOODIE_TABLE_METADATA",
        "hoodie.populate.meta.fields": "false",
        "hoodie.table.base.file.format": "HFILE",
        "hoodie.record.merge.mode": "CUSTOM",
        "hoodie.record.merge.strategy.id": "00000000-0000-0000-0000-000000000000",
        "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
        "hoodie.datasource.write.drop.partition.columns": "false",
    }
    return TableConfig(props).with_checksum()


def _write_stat(partition: str, file_id: str, rel_path: str, size: int, n: int, log: bool, prev: str) -> dict[str, Any]:
    if log:
        return log_write_stat(file_id=file_id, path=rel_path, partition=partition, instant=prev, num_writes=n, size=size)
    return write_stat(file_id=file_id, path=rel_path, partition=partition, prev_commit=prev, num_writes=n,
                      num_inserts=n, size=size, runtime={"totalScanTime": 0, "totalCreateTime": 0, "totalUpsertTime": 0})


def _commit_metadata(stats: Mapping[str, list[dict[str, Any]]], operation: str) -> dict[str, Any]:
    return commit_metadata(stats, operation, schema=writer_schema_json(), compacted=operation == "COMPACT")


class MetadataWriter:
    """Applies data-table changes to the metadata table of the table at ``base_path``."""

    def __init__(self, storage: Storage, base_path: str, data_config: TableConfig) -> None:
        self.base_path = base_path.rstrip("/")
        self.storage = storage.rooted(self.base_path)
        self.mdt_path = metadata_base_path(self.base_path)
        self.data_config = data_config
        #: the metadata partitions :meth:`reconcile` took out of the table (indexes pyhudi does not maintain)
        self.dropped: list[str] = []
        #: the columns ``column_stats`` indexes (None: the table keeps no column statistics), and whether
        #: ``partition_stats`` is kept too; decided by :meth:`reconcile`
        self.stats_columns: tuple[str, ...] | None = None
        self.partition_stats = False
        self.stats_schema: pa.Schema | None = None  # the table's columns with meta columns

    # -- state ----------------------------------------------------------------------------------------
    @property
    def exists(self) -> bool:
        return self.storage.exists(posixpath.join(self.mdt_path, METAFOLDER, "hoodie.properties"))

    def timeline(self) -> ActiveTimeline:
        cfg = read_table_config(self.storage, posixpath.join(self.mdt_path, METAFOLDER))
        return ActiveTimeline.load(self.storage, self.mdt_path, cfg)

    def reader(self, data_timeline: ActiveTimeline | None = None) -> MetadataTableReader:
        return MetadataTableReader(
            self.storage, self.base_path, data_timeline=data_timeline, data_config=self.data_config
        )

    def delete(self) -> None:
        """Remove the whole metadata table (``hoodie.metadata.enable=false``)."""
        if self.storage.exists(self.mdt_path):
            self.storage.delete(self.mdt_path)

    def check_partition_name(self, partition: str) -> None:
        """ConfigError unless ``partition``, a metadata partition ``hoodie.properties`` names, is a plain folder
        name of the metadata table."""
        if "/" in partition or partition_path_problem(partition) is not None:
            raise ConfigError(
                f"{METADATA_PARTITIONS} in {posixpath.join(self.base_path, METAFOLDER, 'hoodie.properties')} names "
                f"the metadata partition {shown(partition)}, which is not a folder name of the metadata table"
            )

    def drop_partition(self, partition: str) -> None:
        """Remove a metadata partition this writer does not maintain (after it left the table config).

        The name comes from ``hoodie.properties``: anything but a plain folder name is refused
        (:meth:`check_partition_name`)."""
        self.check_partition_name(partition)
        path = posixpath.join(self.mdt_path, partition)
        if self.storage.exists(path):
            self.storage.delete(path)

    def _keep_index_definitions(self, partitions: Iterable[str]) -> None:
        """Keep in the table's index definition file (``hoodie.table.index.defs.path``, Hudi's
        ``.hoodie/.index_defs/index.json``) only the definitions of metadata partitions the table has
        (``partitions``: completed or being built), as Hudi's DROP INDEX does: the table declares no index it does
        not have. An unreadable file is an error before anything changes."""
        rel = self.data_config.index_defs_path
        if not rel:
            return
        path = posixpath.join(self.base_path, rel)
        try:
            doc = json.loads(self.storage.read_bytes(path))
        except StorageError:
            return  # no definitions kept
        except ValueError as e:
            raise CorruptFileError(path, f"not an index definition file: {e}") from None
        defs = doc.get("indexDefinitions") if isinstance(doc, dict) else None
        if not isinstance(defs, dict):
            raise CorruptFileError(path, "not an index definition file: no indexDefinitions object")
        kept = set(partitions)
        if all(name in kept for name in defs):
            return
        doc["indexDefinitions"] = {k: v for k, v in defs.items() if k in kept}
        self.storage.write_bytes(path, json.dumps(doc, indent=2).encode(), overwrite=True)

    # -- bringing the metadata table in line with a write's options -----------------------------------------
    def reconcile(self, options: Mapping[str, str], data_timeline: ActiveTimeline,
                  data_schema: pa.Schema | None = None) -> TableConfig | None:
        """Before a write: create the metadata table (its ``files`` partition bootstrapped from a listing, once),
        drop the partitions pyhudi does not maintain (a stale index would mislead readers), or remove the whole
        metadata table when ``hoodie.metadata.enable`` is false. Returns the data table's config afterwards, or
        None when the metadata table is off. The record index is built by the caller
        (:func:`pyhudi.metadata.indexer.build_record_index`) when asked for and absent. ``column_stats`` (and on
        partitioned tables ``partition_stats``) are kept when asked for or present, and built here from the
        latest files when asked for and absent; ``data_schema``: the write's columns (without meta columns), else
        the table's."""
        pending_indexing(data_timeline)  # refuses while another indexer builds a partition, before any change
        meta = posixpath.join(self.base_path, METAFOLDER)
        cfg = self.data_config
        if not mdt_enabled(options):
            if cfg.metadata_partitions or self.exists:
                self.data_config = update_table_config(
                    self.storage, meta, deletes=[METADATA_PARTITIONS, METADATA_PARTITIONS_INFLIGHT]
                )
                self.delete()
            return None
        keep_rli = self._keeps_record_index(options, data_timeline)  # may re-read the config
        cfg = self.data_config
        maintained = {FILES, RECORD_INDEX} if keep_rli else {FILES}
        keep_stats = self._keeps_column_stats(options)
        if keep_stats:
            maintained.add(COLUMN_STATS)
            if cfg.partition_fields and C.bool_option(options, C.PARTITION_STATS_ENABLE):
                maintained.add(PARTITION_STATS)
        stale = [p for p in cfg.metadata_partitions if p not in maintained]
        stale += [p for p in cfg.metadata_partitions_inflight if p not in maintained]
        for p in stale:  # every name before hoodie.properties changes: a refused write leaves it as it was
            self.check_partition_name(p)
        keep = [p for p in cfg.metadata_partitions if p in maintained]
        # a record index the async indexer is building stays inflight
        building = [p for p in cfg.metadata_partitions_inflight if p == RECORD_INDEX and keep_rli]
        # the definitions first: hoodie.properties still lists a partition whose definition went, never the reverse
        self._keep_index_definitions([*keep, *building] if stale else
                                     [*cfg.metadata_partitions, *cfg.metadata_partitions_inflight])
        if stale:
            self.dropped = sorted(set(stale))
            self.data_config = update_table_config(self.storage, meta, {
                METADATA_PARTITIONS: ",".join(keep), METADATA_PARTITIONS_INFLIGHT: ",".join(building)
            })
            for p in stale:
                self.drop_partition(p)
        if not has_metadata_table(self.storage, self.base_path, self.data_config):
            self.create(data_timeline)
            self.data_config = read_table_config(self.storage, meta)
        if keep_stats:
            from pyhudi.metadata.column_stats import indexed_columns
            from pyhudi.table.schema import table_schema, with_meta

            if data_schema is None:
                data_schema = table_schema(self.storage, self.base_path, self.data_config, data_timeline)
            self.stats_schema = with_meta(data_schema)
            self.stats_columns = indexed_columns(
                self.stats_schema, str(C.COLUMN_STATS_COLUMNS.get(options) or ""),
                C.int_option(options, C.COLUMN_STATS_MAX_COLUMNS))
            self.partition_stats = PARTITION_STATS in maintained
            self._init_stats(data_timeline, options)
        return self.data_config

    def _keeps_column_stats(self, options: Mapping[str, str]) -> bool:
        """``hoodie.metadata.index.column.stats.enable`` when given, else whether the table has them."""
        if any(k in options for k in (C.COLUMN_STATS_ENABLE, *C.COLUMN_STATS_ENABLE.aliases)):
            return C.bool_option(options, C.COLUMN_STATS_ENABLE)
        return COLUMN_STATS in self.data_config.metadata_partitions

    def _init_stats(self, data_timeline: ActiveTimeline, options: Mapping[str, str]) -> None:
        """Build ``column_stats`` (and ``partition_stats``) from the latest file slices when the table lacks them,
        each as its initialisation deltacommit, then list them in ``hoodie.table.metadata.partitions``."""
        from pyhudi.metadata.column_stats import file_ranges, partition_records

        assert self.stats_columns is not None and self.stats_schema is not None
        have = self.data_config.metadata_partitions
        todo = [p for p in (COLUMN_STATS, PARTITION_STATS)
                if p not in have and (p == COLUMN_STATS or self.partition_stats)]
        if not todo:
            return
        view = table_view(self.storage, self.base_path, self.data_config, data_timeline)
        files: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        for fs in view.latest_file_slices():
            for rel in fs.relative_paths:
                name = posixpath.basename(rel)
                ranges = file_ranges(self.storage, posixpath.join(self.base_path, rel), self.stats_schema,
                                     self.stats_columns)
                files[fs.partition][name] = {r.column: r for r in ranges}
        if COLUMN_STATS in todo:
            recs = [r.to_record(part, name) for part, fm in files.items() for name, rs in fm.items()
                    for r in rs.values()]
            self._init_partition(COLUMN_STATS, COLUMN_STATS_INIT_INSTANT, recs,
                                 C.int_option(options, C.COLUMN_STATS_FILE_GROUPS, 1))
        if PARTITION_STATS in todo:
            recs = [r for part, fm in files.items() for r in partition_records(part, fm, self.stats_columns)]
            self._init_partition(PARTITION_STATS, PARTITION_STATS_INIT_INSTANT, recs,
                                 C.int_option(options, C.PARTITION_STATS_FILE_GROUPS, 1))

    def _init_partition(self, partition: str, instant: str, records: list[MetadataRecord], groups: int) -> None:
        """Initialise a keyed metadata partition of ``groups`` file groups with ``records`` as the deltacommit
        ``instant`` (a log file per file group, empty ones too), then list it as available."""
        existing = self.timeline().get(instant)
        if existing is not None:  # a partition dropped earlier, or an initialisation that died
            self.rollback(instant, completed=True)
        self._deltacommit(instant, [], operation="UPSERT_PREPPED", keyed={partition: records},
                          file_groups={partition: groups})
        meta = posixpath.join(self.base_path, METAFOLDER)
        parts = list(read_table_config(self.storage, meta).metadata_partitions)
        if partition not in parts:
            parts.append(partition)
        self.data_config = update_table_config(self.storage, meta, {METADATA_PARTITIONS: ",".join(parts)})

    def _keeps_record_index(self, options: Mapping[str, str], data_timeline: ActiveTimeline) -> bool:
        """The record index stays: asked for, available, or being built by the async indexer.

        ``data_timeline`` may be older than the config (a write's timeline is read when the write begins, before
        an indexer may have scheduled a build), so an inflight ``record_index`` without a pending indexing
        instant on it is not taken for a leftover on that evidence alone. The indexer requests its indexing
        instant before it lists the partition inflight, and lists the partition as available before it
        completes the instant: a timeline read now, the config read after it, and the timeline read once more
        tell a build in progress (or one that just finished, or one just scheduled) from an inflight mark left
        behind. Only the last is dropped."""
        cfg = self.data_config
        if rli_enabled(options) or RECORD_INDEX in cfg.metadata_partitions:
            return True
        if RECORD_INDEX not in cfg.metadata_partitions_inflight:
            return False
        if pending_indexing(data_timeline) is not None:
            return True
        now = data_timeline.reload()
        if pending_indexing(now) is not None:
            return True
        cfg = self.data_config = read_table_config(self.storage, posixpath.join(self.base_path, METAFOLDER))
        if RECORD_INDEX in cfg.metadata_partitions:
            return True
        return RECORD_INDEX in cfg.metadata_partitions_inflight and pending_indexing(now.reload()) is not None

    def needs_record_index(self, options: Mapping[str, str]) -> bool:
        """The write asks for a record index the table neither has nor is building (async)."""
        cfg = self.data_config
        return (rli_enabled(options) and RECORD_INDEX not in cfg.metadata_partitions
                and RECORD_INDEX not in cfg.metadata_partitions_inflight)

    # -- creation -------------------------------------------------------------------------------------
    def create(self, data_timeline: ActiveTimeline) -> None:
        """Create the metadata table with its ``files`` partition bootstrapped from a storage listing of the
        committed files (done once), then list it in the data table's ``hoodie.table.metadata.partitions``."""
        if self.exists:
            self.storage.delete(self.mdt_path)  # a creation that died before registering: start over
        create_table_config(
            self.storage, posixpath.join(self.mdt_path, METAFOLDER), metadata_table_config(self.data_config)
        )
        view = FileSystemView.from_listing(self.storage, self.base_path, data_timeline)
        files: dict[str, dict[str, int]] = defaultdict(dict)
        for fg in view.file_groups():
            for fs in fg.slices:
                if fs.base_file is not None:
                    files[fg.partition][fs.base_file.file_name] = fs.base_file.size
                for lf in fs.log_files:
                    files[fg.partition][lf.file_name] = lf.size
        for p in view.partitions():
            files.setdefault(p, {})
        init = f"{INIT_PREFIX}000"
        self._deltacommit(init, self._files_records(files, {}), operation="UPSERT_PREPPED")
        update_table_config(
            self.storage, posixpath.join(self.base_path, METAFOLDER), {METADATA_PARTITIONS: FILES}
        )

    def create_record_index(self, instant: str, write_files: ExtraWriter, num_file_groups: int) -> None:
        """Initialise the ``record_index`` partition as the deltacommit ``instant`` (``write_files`` writes the
        base HFiles of the file groups that have keys); file groups without keys get an empty base file. Then
        list it in the data table's ``hoodie.table.metadata.partitions``."""
        from pyhudi.metadata.record_index import empty_base_hfile
        from pyhudi.metadata.record_index import file_group_id as rli_group

        def write_all() -> Mapping[str, list[dict[str, Any]]]:
            filenames.write_partition_metadata(self.storage, self.mdt_path, RECORD_INDEX, instant)
            written = list(write_files().get(RECORD_INDEX, []))
            have = {w["file_id"] for w in written}
            for i in range(num_file_groups):
                fid = rli_group(i)
                if fid in have:
                    continue
                rel = posixpath.join(RECORD_INDEX, filenames.make_base_file_name(fid, DRIVER_TOKEN, instant, "hfile"))
                data = empty_base_hfile(rel)
                self.storage.write_bytes(posixpath.join(self.mdt_path, rel), data)
                written.append({"rel": rel, "file_id": fid, "size": len(data), "n": 0})
            return {RECORD_INDEX: written}

        self._deltacommit(instant, [], operation="BULK_INSERT", extra=write_all)
        parts = [p for p in read_table_config(self.storage, posixpath.join(self.base_path, METAFOLDER)).metadata_partitions]
        if RECORD_INDEX not in parts:
            parts.append(RECORD_INDEX)
        update_table_config(self.storage, posixpath.join(self.base_path, METAFOLDER), {METADATA_PARTITIONS: ",".join(parts)})

    # -- per data-table action ------------------------------------------------------------------------
    @staticmethod
    def _files_records(
        added: Mapping[str, Mapping[str, int]], deleted: Mapping[str, Iterable[str]]
    ) -> list[MetadataRecord]:
        parts = sorted(set(added) | set(deleted))
        records = [partition_list_record(parts)] if added else []
        for p in parts:
            files: dict[str, int | tuple[int, bool]] = dict(added.get(p, {}))
            for name in deleted.get(p, ()):
                files[name] = (0, True)
            if files or p in added:
                records.append(files_record(p, files))
        return records

    def apply_commit(
        self, instant: str, commit_metadata: Mapping[str, Any], extra: ExtraWriter | None = None,
        column_stats: Iterable[MetadataRecord] = (), data_timeline: ActiveTimeline | None = None,
    ) -> None:
        """Record the files a data commit wrote (and replaced) as the metadata deltacommit ``instant``.
        ``column_stats``: the ``column_stats`` records of the files written (those of files without any are read
        from the files); ``data_timeline``: the data table's timeline before the commit (for
        ``partition_stats``)."""
        added: dict[str, dict[str, int]] = defaultdict(dict)
        for part, stats in (commit_metadata.get("partitionToWriteStats") or {}).items():
            for s in stats:
                if s.get("path"):
                    added[part][posixpath.basename(s["path"])] = int(s.get("fileSizeInBytes") or 0)
        self.kept_stats_columns(data_timeline)
        keyed = self._stats_records(added, list(column_stats), data_timeline) if self.stats_columns else {}
        self._deltacommit(instant, self._files_records(added, {}), operation="UPSERT_PREPPED", extra=extra,
                          keyed=keyed)

    def _stats_records(self, added: Mapping[str, Mapping[str, int]], given: list[MetadataRecord],
                       data_timeline: ActiveTimeline | None) -> dict[str, list[MetadataRecord]]:
        """The ``column_stats`` records of the files a commit wrote, and the ``partition_stats`` records of the
        partitions it touched (their latest file slices before the commit, with the commit's files in place)."""
        from pyhudi.metadata.column_stats import (
            ColumnRange,
            column_stats_key,
            file_ranges,
            partition_records,
            partition_tombstone,
        )
        assert self.stats_columns is not None and self.stats_schema is not None
        cols = self.stats_columns
        new: dict[tuple[str, str], dict[str, ColumnRange]] = defaultdict(dict)
        by_key = {r.key: r for r in given}
        out: list[MetadataRecord] = []
        for part, names in added.items():
            for name in names:
                keys = [column_stats_key(c, part, name) for c in cols]
                recs = [by_key[k] for k in keys if k in by_key]
                if not recs:  # a file written without statistics (by a writer that did not compute them): read it
                    rel = posixpath.join(part, name) if part else name
                    recs = [r.to_record(part, name) for r in file_ranges(
                        self.storage, posixpath.join(self.base_path, rel), self.stats_schema, cols)]
                out.extend(recs)
                for r in recs:
                    cr = ColumnRange.from_fields(r.fields["ColumnStatsMetadata"])
                    new[(part, name)][cr.column] = cr
        keyed = {COLUMN_STATS: out}
        if not self.partition_stats or not added:
            return keyed
        if data_timeline is None:
            data_timeline = ActiveTimeline.load(self.storage, self.base_path, self.data_config)
        reader = self.reader(data_timeline)
        view = table_view(self.storage, self.base_path, self.data_config, data_timeline, reader=reader)
        completed = {i.requested_time: i.completion_time or i.requested_time for i in data_timeline.completed_commits()}
        slices: dict[str, dict[str, list[str]]] = {}  # partition -> file id -> file names
        for part in added:
            slices[part] = {fs.file_id: [posixpath.basename(r) for r in fs.relative_paths]
                            for fs in view.latest_file_slices(part)}
            for name in sorted(added[part], key=lambda n: n.startswith(".")):  # base files first
                parsed = filenames.parse_data_file_name(name)
                assert parsed is not None, name
                fid = parsed.file_id
                if name.startswith("."):
                    slices[part].setdefault(fid, []).append(name)
                else:
                    # a new base file starts the file group's new slice, which keeps the logs that completed
                    # after its instant was requested (appended while a compaction was pending)
                    later = [n for n in slices[part].get(fid, ()) if n.startswith(".")
                             and completed.get(filenames.LogFileName.parse(n).instant, "") > parsed.instant]
                    slices[part][fid] = [name, *later]
        wanted = [column_stats_key(c, part, name) for part, groups in slices.items() for group in groups.values()
                  for name in group if (part, name) not in new for c in cols]
        stored = reader.lookup(COLUMN_STATS, wanted) if wanted else {}
        others = [c for c in self._every_stats_column() if c not in cols]
        parts_out: list[MetadataRecord] = []
        for part, groups in slices.items():
            files: dict[str, dict[str, ColumnRange]] = {}
            for group in groups.values():
                for name in group:
                    if (part, name) in new:
                        files[name] = new[(part, name)]
                        continue
                    got = {}
                    for c in cols:
                        rec = stored.get(column_stats_key(c, part, name))
                        if rec is not None:
                            got[c] = ColumnRange.from_fields(rec.fields["ColumnStatsMetadata"])
                    files[name] = got
            parts_out.extend(partition_records(part, files, cols))
            # columns indexed before (another column list, or a writer that indexed every column) but not now:
            # their statistics of this partition would no longer cover its files
            parts_out.extend(partition_tombstone(c, part) for c in others)
        keyed[PARTITION_STATS] = parts_out
        return keyed

    def apply_clean(self, instant: str, deleted: Mapping[str, list[str]]) -> None:
        """Record files a data-table clean is about to delete, as the metadata deltacommit ``instant`` (with
        ``column_stats`` tombstones when the table keeps them)."""
        if not any(deleted.values()):
            return
        keyed: dict[str, list[MetadataRecord]] = {}
        if COLUMN_STATS in self.data_config.metadata_partitions:
            from pyhudi.metadata.column_stats import tombstones

            cols = self._every_stats_column()  # whichever columns a writer indexed
            keyed[COLUMN_STATS] = [t for part, names in deleted.items() for n in names
                                   for t in tombstones(part, n, cols)]
        self._deltacommit(instant, self._files_records({}, deleted), operation="UPSERT_PREPPED", keyed=keyed)

    def kept_stats_columns(self, data_timeline: ActiveTimeline | None = None) -> tuple[str, ...] | None:
        """The columns whose statistics the table keeps (None: it keeps none), for a writer of data files that
        did not :meth:`reconcile` (a table service)."""
        if self.stats_columns is None and COLUMN_STATS in self.data_config.metadata_partitions:
            self._stats_as_stored(data_timeline)
        return self.stats_columns

    def _stats_as_stored(self, data_timeline: ActiveTimeline | None) -> None:
        """Keep the table's ``column_stats`` (and ``partition_stats``) for the default columns of its schema."""
        from pyhudi.metadata.column_stats import indexed_columns

        self.stats_schema = self._table_schema(data_timeline)
        self.stats_columns = indexed_columns(self.stats_schema)
        self.partition_stats = PARTITION_STATS in self.data_config.metadata_partitions

    def _every_stats_column(self) -> tuple[str, ...]:
        """Every column of the table's schema that ``column_stats`` may hold (any column list, any writer)."""
        from pyhudi.metadata.column_stats import indexed_columns

        schema = self.stats_schema if self.stats_schema is not None else self._table_schema(None)
        return indexed_columns(schema, max_columns=len(schema))

    def _table_schema(self, data_timeline: ActiveTimeline | None) -> pa.Schema:
        """The data table's columns with meta columns."""
        from pyhudi.table.schema import table_schema, with_meta

        tl = data_timeline or ActiveTimeline.load(self.storage, self.base_path, self.data_config)
        return with_meta(table_schema(self.storage, self.base_path, self.data_config, tl))

    def _deltacommit(
        self, instant: str, records: list[MetadataRecord], operation: str, extra: ExtraWriter | None = None,
        keyed: Mapping[str, list[MetadataRecord]] | None = None, file_groups: Mapping[str, int] | None = None,
    ) -> None:
        """Write ``records`` (of ``files``) and ``keyed`` (partition -> records routed to file groups by key hash,
        as the record index routes its keys; ``file_groups``: the count of a partition being initialised, whose
        every file group gets a log file) as the deltacommit ``instant``."""
        tl = self.timeline()
        existing = tl.get(instant)
        if existing is not None and existing.action != DELTA_COMMIT:
            raise PyHudiError(f"{self.mdt_path}: instant {instant} is a {existing.action} of the metadata table, not "
                              "a deltacommit: it cannot take the data table's instant of that time")
        if existing is not None:
            # a retried instant (a clean that died after its deltacommit, or during it) is redone, as Hudi's
            # commitInternal redoes it: what the first attempt wrote may be gone from the latest file slices since
            self.rollback(instant, completed=existing.is_completed)
            tl = self.timeline()
        by_partition: dict[str, list[MetadataRecord]] = defaultdict(list)
        for r in records:
            by_partition[FILES].append(r)
        req = tl.create_requested(DELTA_COMMIT, instant)
        inflight = tl.transition_to_inflight(req, _commit_metadata({}, operation))
        stats: dict[str, list[dict[str, Any]]] = defaultdict(list)
        schema = writer_schema_json()
        groups: dict[tuple[str, str], list[MetadataRecord]] = {
            (part, file_group_id(part, 0)): recs for part, recs in by_partition.items()}
        for part, recs in (keyed or {}).items():
            n = (file_groups or {}).get(part) or self._file_group_count(part)
            for i in range((file_groups or {}).get(part, 0)):
                groups[(part, file_group_id(part, i))] = []
            for r in recs:
                groups.setdefault((part, file_group_id(part, record_index_file_group(r.key, n))), []).append(r)
        for (part, fg), recs in groups.items():
            filenames.write_partition_metadata(self.storage, self.mdt_path, part, instant)
            name = filenames.make_log_file_name(fg, instant, 1, DRIVER_TOKEN)
            block = hfile_data_block(encode_cells(recs), instant, schema)
            rel = posixpath.join(part, name)
            self.storage.write_bytes(posixpath.join(self.mdt_path, rel), block)
            stats[part].append(_write_stat(part, fg, rel, len(block), len(recs), True, instant))
        for part, written in (extra() if extra is not None else {}).items():
            for w in written:
                is_log = posixpath.basename(w["rel"]).startswith(".")
                stats[part].append(_write_stat(part, w["file_id"], w["rel"], w["size"], w["n"], is_log, instant))
        tl.complete(inflight, _commit_metadata(stats, operation), self._completion_time(tl, instant))

    def _file_group_count(self, partition: str) -> int:
        """The file groups of a metadata partition (``<prefix>-NNNN-0`` names listed in its folder)."""
        folder = posixpath.join(self.mdt_path, partition)
        prefix = file_group_id(partition, 0)[:-len("0000-0")]
        ids = set()
        for e in self.storage.list(folder):
            name = e.name.lstrip(".")
            if name.startswith(prefix):
                ids.add(name[: len(prefix) + len("0000-0")])
        if not ids:
            raise PyHudiError(f"{folder}: the metadata partition {partition} has no file groups")
        return len(ids)

    def _completion_time(self, tl: ActiveTimeline, instant: str) -> str:
        """A completion time after ``instant`` and every real (non-initialisation) time on the timeline."""
        times = [t for t in (instant, tl.latest_time()) if t and not t.startswith(INIT_PREFIX)]
        return InstantTimeGenerator.for_table(self.data_config).next(floor=max(times) if times else None)

    # -- rollback -------------------------------------------------------------------------------------
    def rollback(self, instant: str, *, completed: bool = False) -> None:
        """Roll back the metadata table's instant ``instant`` (a deltacommit that will be redone, the partial
        initialisation of a partition, a compaction that died): its files, then its timeline files, as a
        rollback instant of the metadata table. ``completed``: the instant may be completed."""
        from pyhudi.services.rollback import rollback_instant

        if self.exists:
            rollback_instant(self.storage, self.mdt_path, instant, InstantTimeGenerator.for_table(self.data_config),
                             allow_completed=completed, missing_ok=True)

    def recover_compactions(self) -> None:
        """Roll back compactions that died (pending): their base files go; the next compaction redoes them."""
        if self.exists:
            for inst in self.timeline().pending().by_action(COMPACTION):
                self.rollback(inst.requested_time)

    # -- compaction and cleaning ----------------------------------------------------------------------
    def maybe_compact(self, data_timeline: ActiveTimeline, max_delta_commits: int, new_time: str,
                      max_when_pending: int | None = None) -> Instant | None:
        """Compact the metadata table once it has ``max_delta_commits`` deltacommits since its last compaction.

        Not while a pending data-table instant has a deltacommit here (a clean or write that died after its
        deltacommit): its blocks are not valid yet, so the new base file would leave them out for good, and a clean
        that then finished would leave the files it deleted listed. Hudi 1.x compacts only up to before such an
        instant instead; its version-6 writer waits as here. A pending instant with no deltacommit here yet holds
        nothing back: its blocks will be written into the new file slice. More than ``max_when_pending``
        deltacommits held back fail the write, naming the pending instants."""
        if data_timeline.by_action(INDEXING).pending():
            return None  # an async index build is writing a partition: compaction waits for it
        self.recover_compactions()
        tl = self.timeline()
        done = list(tl.completed())
        last_compaction = max((i.requested_time for i in done if i.action == COMMIT), default="")
        deltas = [i for i in done if i.action == DELTA_COMMIT and i.requested_time > last_compaction]
        here = {i.requested_time for i in tl if i.action == DELTA_COMMIT}
        held = [i for i in data_timeline.pending() if i.requested_time in here]
        if held:
            if max_when_pending is not None and len(deltas) > max_when_pending:
                raise PyHudiError(
                    f"{self.base_path}: the metadata table has {len(deltas)} deltacommits since its last compaction, "
                    f"over {C.METADATA_MAX_DELTA_COMMITS_WHEN_PENDING} ({max_when_pending}): pending instants of the "
                    f"data table hold its compaction back ({', '.join(f'{i.requested_time} {i.action}' for i in held[:5])}"
                    f"{', ...' if len(held) > 5 else ''}); complete or roll them back")
            return None
        if len(deltas) < max_delta_commits:
            return None
        inst = self.compact(data_timeline, new_time)
        self.clean_file_slices()
        return inst

    def compact(self, data_timeline: ActiveTimeline, instant: str) -> Instant:
        """Merge every metadata file group's latest slice (valid blocks only) into a new base HFile."""
        tl = self.timeline()
        reader = self.reader(data_timeline)
        ops = []
        slices = []
        for part in reader.partitions():
            for fs in reader.file_slices(part):
                slices.append((part, fs))
                ops.append(
                    {
                        "baseInstantTime": fs.base_instant,
                        "deltaFilePaths": [lf.file_name for lf in fs.log_files],
                        "dataFilePath": fs.base_file.file_name if fs.base_file else None,
                        "fileId": fs.file_id,
                        "partitionPath": part,
                        "metrics": {"TOTAL_LOG_FILES": float(len(fs.log_files))},
                        "bootstrapFilePath": None,
                    }
                )
        plan = {"operations": ops, "extraMetadata": {}, "version": 2, "strategy": None, "preserveHoodieMetadata": None}
        req = tl.create_requested(COMPACTION, instant, plan)
        inflight = tl.transition_to_inflight(req, None)
        stats: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for part, fs in slices:
            name = filenames.make_base_file_name(fs.file_id, DRIVER_TOKEN, instant, extension="hfile")
            rel = posixpath.join(part, name)
            if part == RECORD_INDEX:  # vectorised: cells merged and copied without decoding every record
                from pyhudi.metadata.record_index import base_hfile, merged_cells

                keys, values = merged_cells(
                    self.storage,
                    posixpath.join(self.mdt_path, fs.base_file.relative_path) if fs.base_file else None,
                    [posixpath.join(self.mdt_path, lf.relative_path) for lf in fs.log_files],
                    reader.block_filter,
                )
                data, n = base_hfile(keys, values, rel), len(keys)
            else:
                live = [_live_record(r) for r in reader.merge_slice(fs).values() if not r.is_absent]
                data, n = self._base_hfile(live, rel), len(live)
            self.storage.write_bytes(posixpath.join(self.mdt_path, rel), data)
            stats[part].append(_write_stat(part, fs.file_id, rel, len(data), n, False, "null"))
        faults.at("metadata.compaction.before_complete")
        return tl.complete(inflight, _commit_metadata(stats, "COMPACT"), self._completion_time(tl, instant))

    @staticmethod
    def _base_hfile(records: list[MetadataRecord], name: str) -> bytes:
        cells = encode_cells(records)
        bf = bloom.BloomFilter.create(MDT_BLOOM_ENTRIES)
        if cells:
            bf.add_many([k for k, _ in cells])
        import pyarrow as pa

        out = pa.BufferOutputStream()
        w = HFileWriter(
            out,
            codec=CODEC_GZ,
            file_info={"schema": writer_schema_json().encode()},
            bloom_filter=bf,
            name=name,
        )
        w.append_batch([k for k, _ in cells], [v for _, v in cells])
        w.close()
        return bytes(out.getvalue().to_pybytes())

    def clean_file_slices(self, retained: int = FILE_SLICES_RETAINED) -> int:
        """Delete metadata file slices older than the ``retained`` latest of each file group."""
        tl = self.timeline()
        view = FileSystemView.load(self.storage, self.mdt_path, timeline=tl)
        removed = 0
        for fg in view.file_groups():
            for fs in fg.slices[:-retained] if len(fg.slices) > retained else ():
                for rel in fs.relative_paths:
                    self.storage.delete(posixpath.join(self.mdt_path, rel))
                    removed += 1
        return removed


def _live_record(r: MetadataRecord) -> MetadataRecord:
    """A record as it goes into a compacted base file: files maps without tombstones."""
    if r.key == ALL_PARTITIONS_KEY or r.type in (1, 2):
        live = r.live_files
        return (partition_list_record(live) if r.key == ALL_PARTITIONS_KEY else files_record_from(r.key, live))
    return r


def files_record_from(key: str, files: Mapping[str, int]) -> MetadataRecord:
    from pyhudi.metadata.records import partition_path

    return files_record(partition_path(key), dict(files))


def mdt_enabled(options: Mapping[str, str]) -> bool:
    """``hoodie.metadata.enable`` (default true)."""
    return C.bool_option(options, METADATA_ENABLE)


def rli_enabled(options: Mapping[str, str]) -> bool:
    """Keep a record index: ``hoodie.metadata.record.index.enable``, or implied by ``hoodie.index.type=RECORD_INDEX``."""
    return C.bool_option(options, RECORD_INDEX_ENABLE) or str(options.get(C.INDEX_TYPE, "")).strip().upper() == "RECORD_INDEX"


def mdt_max_delta_commits(options: Mapping[str, str]) -> int:
    return C.int_option(options, C.METADATA_COMPACT_MAX_DELTA_COMMITS, 1)


def mdt_max_delta_commits_when_pending(options: Mapping[str, str]) -> int:
    return C.int_option(options, C.METADATA_MAX_DELTA_COMMITS_WHEN_PENDING, 1)


__all__ = ["MetadataWriter"]

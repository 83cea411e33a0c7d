"""Reading a Hudi metadata table (``<base>/.hoodie/metadata``) without Spark.

Per metadata partition (``files``, ``record_index``, ...) and file group, the latest file slice (base HFile + log
files, built by :class:`~pyhudi.table.fsview.FileSystemView` on the metadata table's own timeline) is merged:
base records first, then the log blocks in log order. A log block is used only if its INSTANT_TIME is

- completed on the metadata timeline (or older than its active timeline: archived), and
- *valid* (Hudi's ``HoodieTableMetadataUtil.getValidInstantTimestamps``): completed on the data table's timeline;
  or an indexing instant of the data table; or a metadata deltacommit whose time starts with
  ``00000000000000`` (partition initialisation); or a metadata rollback/restore; or an instant rolled back by a
  completed data-table rollback newer than the earliest valid instant.

Within a file slice the blocks are chosen by the scan data tables use too (:mod:`pyhudi.read.logscan`): a
rollback COMMAND block drops the earlier collected blocks whose instant equals its TARGET_INSTANT_TIME (and any
corrupt block); corrupt blocks are skipped; a block listing COMPACTED_BLOCK_TIMES (log compaction) supersedes the
blocks of those instants. Records merge as in :mod:`pyhudi.metadata.records`.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pyhudi.errors import PyHudiError
from pyhudi.hfile import HFileReader
from pyhudi.io.logfile import BlockType, LogBlock
from pyhudi.io.storage import Storage
from pyhudi.metadata.partitions import (
    COLUMN_STATS,
    FILES,
    INIT_PREFIX,
    PARTITION_STATS,
    RECORD_INDEX,
    metadata_base_path,
)
from pyhudi.metadata.records import (
    ALL_PARTITIONS_KEY,
    TYPE_FILE_LIST,
    TYPE_PARTITION_LIST,
    MetadataRecord,
    combine,
    decode_value,
    delete_marker,
    partition_key,
    partition_path,
    record_index_file_group,
)
from pyhudi.read.logscan import scan_log_blocks
from pyhudi.table.fsview import FileEntry, FileSlice, FileSystemView
from pyhudi.table.partition_path import check_file_name, check_partition_path, shown
from pyhudi.table.properties import METAFOLDER, TableConfig, read_table_config
from pyhudi.table.timeline import INDEXING, RESTORE, ROLLBACK, ActiveTimeline, Timeline

SOLO_COMMIT_PREFIX = INIT_PREFIX
_FG_INDEX = re.compile(r"-(\d{4})-\d+$")


def valid_instants(data_timeline: ActiveTimeline, mdt_timeline: Timeline) -> set[str]:
    """Instants whose metadata log blocks readers may use (``getValidInstantTimestamps``)."""
    valid = {i.requested_time for i in data_timeline.completed()}
    indexing = {i.requested_time for i in data_timeline.by_action(INDEXING)}
    valid.update(i.requested_time for i in mdt_timeline.completed() if i.requested_time in indexing)
    earliest = min(valid) if valid else SOLO_COMMIT_PREFIX
    for inst in data_timeline.completed().by_action(ROLLBACK, RESTORE):
        if inst.requested_time <= earliest:
            continue
        try:
            meta = data_timeline.read_content(inst) or {}
        except PyHudiError:
            continue
        valid.update(meta.get("commitsRollback") or [])
        for infos in (meta.get("instantsToRollback") or []):
            if isinstance(infos, Mapping) and infos.get("commitTime"):
                valid.add(str(infos["commitTime"]))
    for inst in mdt_timeline.completed().by_action(ROLLBACK, RESTORE):
        valid.add(inst.requested_time)
    for inst in mdt_timeline.completed():
        if inst.action == "deltacommit" and inst.requested_time.startswith(SOLO_COMMIT_PREFIX):
            valid.add(inst.requested_time)
    return valid


@dataclass(frozen=True)
class BlockFilter:
    """Which log-block instants readers may use (picklable: Spark tasks apply it too)."""

    valid: frozenset[str]
    mdt_completed: frozenset[str]
    mdt_instants: frozenset[str]
    mdt_start: str | None

    def ok(self, instant: str | None) -> bool:
        if instant is None or instant not in self.valid:
            return False
        archived = self.mdt_start is not None and instant < self.mdt_start and instant not in self.mdt_instants
        return instant in self.mdt_completed or archived


def valid_log_blocks(storage: Storage, paths: Sequence[str], block_filter: BlockFilter) -> list[LogBlock]:
    """The log blocks of a file slice's log files that count, in log order, after rollbacks and log compaction
    (the data tables' scan, :func:`pyhudi.read.logscan.scan_log_blocks`, with the metadata table's filter)."""
    return scan_log_blocks(storage, paths, block_filter, load_content=True, on_compacted="drop")


class MetadataTableReader:
    """Merged, timeline-filtered reads of a table's metadata table."""

    def __init__(
        self,
        storage: Storage,
        base_path: str,
        *,
        data_timeline: ActiveTimeline | None = None,
        data_config: TableConfig | None = None,
    ) -> None:
        self.base_path = base_path.rstrip("/")
        self.storage = storage.rooted(self.base_path)
        storage = self.storage
        self.mdt_path = metadata_base_path(self.base_path)
        if data_config is None:
            data_config = read_table_config(storage, posixpath.join(self.base_path, METAFOLDER))
        if data_timeline is None:
            data_timeline = ActiveTimeline.load(storage, self.base_path, data_config)
        self.data_config = data_config
        self.data_timeline = data_timeline
        self.config = read_table_config(storage, posixpath.join(self.mdt_path, METAFOLDER))
        self.timeline = ActiveTimeline.load(storage, self.mdt_path, self.config)
        self.valid = valid_instants(data_timeline, self.timeline)
        self.view = FileSystemView.load(storage, self.mdt_path, timeline=self.timeline, config=self.config)
        first = self.timeline.commits().first()  # instants before it were archived (completed)
        self.block_filter = BlockFilter(
            frozenset(self.valid),
            frozenset(i.requested_time for i in self.timeline.completed()),
            frozenset(i.requested_time for i in self.timeline),
            first.requested_time if first is not None else None,
        )
        self._cache: dict[str, dict[str, MetadataRecord]] = {}

    # -- file slices ------------------------------------------------------------------------------------------
    def partitions(self) -> list[str]:
        """Metadata partitions present (``files``, ``record_index``, ...)."""
        return self.view.partitions()

    def file_slices(self, partition: str) -> list[FileSlice]:
        """Latest slice of each file group of a metadata partition, ordered by file group index."""
        slices = self.view.latest_file_slices(partition)
        return sorted(slices, key=lambda s: (_fg_index(s.file_id), s.file_id))

    def _block_ok(self, instant: str | None) -> bool:
        return self.block_filter.ok(instant)

    def valid_blocks(self, fs: FileSlice) -> list[LogBlock]:
        """The log blocks of a slice that count, in log order, after rollbacks and log compaction."""
        return valid_log_blocks(
            self.storage, [posixpath.join(self.mdt_path, lf.relative_path) for lf in fs.log_files], self.block_filter
        )

    # -- merged records ---------------------------------------------------------------------------------------
    def merge_slice(self, fs: FileSlice, keys: set[str] | None = None) -> dict[str, MetadataRecord]:
        merged: dict[str, MetadataRecord] = {}
        if fs.base_file is not None:
            path = posixpath.join(self.mdt_path, fs.base_file.relative_path)
            with HFileReader.open(self.storage, path) as h:
                sj = h.file_info.get("schema")
                schema = sj.decode("utf-8") if sj else None
                table = h.read_all() if keys is None else h.lookup(sorted(keys))
                for k, v in zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True):
                    if v is None:
                        continue
                    rec = decode_value(k, v, schema)
                    check_files_record(rec, path)
                    merged[rec.key] = rec
        for b in self.valid_blocks(fs):
            if b.block_type == BlockType.HFILE_DATA:
                for k, v in b.hfile_records():
                    ks = k.decode("utf-8")
                    if keys is not None and ks not in keys:
                        continue
                    rec = decode_value(ks, v, b.schema)
                    check_files_record(rec, b.path)
                    merged[ks] = combine(merged.get(ks), rec)
            elif b.block_type == BlockType.DELETE:
                for d in b.delete_records():
                    if d.record_key is None or (keys is not None and d.record_key not in keys):
                        continue
                    merged[d.record_key] = delete_marker(d.record_key)
            elif b.is_data_block:
                raise PyHudiError(f"{b.path}: metadata log block of type {b.block_type.name} is not supported")
        return merged

    def read_partition(self, partition: str) -> dict[str, MetadataRecord]:
        """Every live (merged, not deleted) record of a metadata partition."""
        if partition not in self._cache:
            out: dict[str, MetadataRecord] = {}
            for fs in self.file_slices(partition):
                for k, rec in self.merge_slice(fs).items():
                    if not rec.is_absent:
                        out[k] = rec
            self._cache[partition] = out
        return self._cache[partition]

    def lookup(self, partition: str, keys: Iterable[str]) -> dict[str, MetadataRecord]:
        """Records of ``keys`` in a keyed metadata partition (absent keys are left out).

        For ``record_index``, ``column_stats`` and ``partition_stats`` each key is routed to its file group by
        Hudi's hash; other partitions are probed in every file group.
        """
        wanted = set(keys)
        slices = self.file_slices(partition)
        if not slices or not wanted:
            return {}
        groups: list[tuple[FileSlice, set[str]]]
        if partition in (RECORD_INDEX, COLUMN_STATS, PARTITION_STATS):  # keys routed by their hash
            by_fg: dict[int, set[str]] = {}
            for k in wanted:
                by_fg.setdefault(record_index_file_group(k, len(slices)), set()).add(k)
            groups = [(slices[i], ks) for i, ks in sorted(by_fg.items())]
        else:
            groups = [(s, wanted) for s in slices]
        out: dict[str, MetadataRecord] = {}
        for fs, ks in groups:
            for k, rec in self.merge_slice(fs, ks).items():
                if not rec.is_absent:
                    out[k] = rec
        return out

    # -- the files partition ----------------------------------------------------------------------------------
    def list_partitions(self) -> list[str]:
        """Data partition paths (``""`` for a non-partitioned table), from ``__all_partitions__``."""
        rec = self.read_partition(FILES).get(ALL_PARTITIONS_KEY)
        if rec is None:
            return []
        return sorted(partition_path(p) for p in rec.live_files)

    def list_files(self, partition: str) -> dict[str, int]:
        """File name -> size of a data partition."""
        rec = self.read_partition(FILES).get(partition_key(partition))
        return dict(sorted(rec.live_files.items())) if rec is not None else {}

    def all_files(self) -> dict[str, dict[str, int]]:
        return {p: self.list_files(p) for p in self.list_partitions()}


def check_files_record(rec: MetadataRecord, source: str) -> None:
    """A ``files``-partition record names only safe partition paths (``__all_partitions__``, the key of a
    partition's record) and bare file names; CorruptFileError naming ``source`` (the file holding the record)
    otherwise, so a crafted metadata table cannot make readers or writers reach outside the table."""
    if rec.type == TYPE_PARTITION_LIST:
        for p in rec.files:
            check_partition_path(partition_path(p), source, "metadata partition list entry")
    elif rec.type == TYPE_FILE_LIST:
        check_partition_path(partition_path(rec.key), source, "metadata files record key")
        for name in rec.files:
            check_file_name(name, source, f"file of partition {shown(partition_path(rec.key))}")


def _fg_index(file_id: str) -> int:
    m = _FG_INDEX.search(file_id)
    return int(m.group(1)) if m else -1


class MetadataListing:
    """A :class:`~pyhudi.table.fsview.FileListing` served by the metadata table's ``files`` partition."""

    def __init__(self, reader: MetadataTableReader) -> None:
        self.reader = reader

    @classmethod
    def open(cls, storage: Storage, base_path: str, **kw: ActiveTimeline | TableConfig | None) -> MetadataListing:
        return cls(MetadataTableReader(storage, base_path, **kw))  # type: ignore[arg-type]

    def list_partition_files(self) -> dict[str, Sequence[FileEntry]]:
        return {
            p: [FileEntry(n, s) for n, s in files.items()] for p, files in self.reader.all_files().items()
        }


def has_metadata_table(storage: Storage, base_path: str, config: TableConfig) -> bool:
    """True when readers list the table through its metadata table's ``files`` partition."""
    return FILES in config.metadata_partitions and storage.exists(
        posixpath.join(metadata_base_path(base_path), METAFOLDER, "hoodie.properties")
    )


def table_view(
    storage: Storage,
    base_path: str,
    config: TableConfig,
    timeline: ActiveTimeline,
    *,
    use_metadata: bool | None = None,
    reader: MetadataTableReader | None = None,
) -> FileSystemView:
    """The latest file slices of a data table: listed by its metadata table when it has one (or
    ``use_metadata``; ``reader``: the caller's reader of it, as of ``timeline``), else by storage."""
    if use_metadata is None:
        use_metadata = reader is not None or has_metadata_table(storage, base_path, config)
    if use_metadata:
        if reader is None:
            reader = MetadataTableReader(storage, base_path, data_timeline=timeline, data_config=config)
        listing = MetadataListing(reader)
        return FileSystemView.load(storage, base_path, timeline=timeline, config=config, listing=listing)
    return FileSystemView.from_listing(storage, base_path, timeline, config=config)

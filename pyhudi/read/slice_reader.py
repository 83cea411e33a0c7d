"""The file-group reader: the records of one file slice -- base file plus log files, merged -- as Arrow batches.

1. The slice's log files (in Hudi's log order; ``.cdc`` change logs are not data) are scanned for the blocks that
   count (:mod:`pyhudi.read.logscan`: instants visible to the read, rollbacks applied, torn blocks skipped).
2. Their records are decoded one block at a time into Arrow and folded per key (:class:`LogRecords`): the result
   is one buffered record (or delete) per key of the log.
3. The base file is streamed in batches; each record whose key has a buffered log record is final-merged with it
   (kept, replaced or deleted), the others pass through.
4. The buffered log records no base record claimed (inserts into log files, log-only file groups) follow, deletes
   left out.

Memory holds the log's distinct keys (their buffered records, as Arrow) and one base batch; a log with many
versions per key is compacted as it is read. Every path is relative to the table and read through
:class:`~pyhudi.io.storage.Storage`, so a reader runs in any Spark task.
"""

from __future__ import annotations

import os
import posixpath
import queue
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pyhudi import config as C
from pyhudi.errors import CorruptFileError, StorageError
from pyhudi.io.logfile import BlockType, LogBlock, decode_avro_blocks_content
from pyhudi.io.parquet import parquet_file
from pyhudi.io.pools import shared_pool
from pyhudi.io.storage import Storage
from pyhudi.read.filters import Pred, Stats, all_may_match
from pyhudi.read.logscan import CommittedInstants, scan_log_blocks
from pyhudi.read.merge import LogRecords, MergeConfig, Winners, final_merge
from pyhudi.table.evolution import FileMapping, conform_table
from pyhudi.table.filenames import BaseFileName, parse_data_file_name
from pyhudi.table.fsview import FileSlice
from pyhudi.table.internal_schema import SchemaOnRead, to_arrow
from pyhudi.table.schema import COMMIT_TIME_COL, OPERATION_COL, RECORD_KEY_COL, with_meta, without_meta

DEFAULT_BATCH_ROWS = int(str(C.READ_BATCH_ROWS.default))
DEFAULT_LOG_COMPACT_ROWS = int(str(C.READ_LOG_COMPACT_ROWS.default))


@dataclass(frozen=True)
class SliceSpec:
    """One file slice to read: paths relative to the table's base path, logs in Hudi's log order."""

    partition: str
    file_id: str
    base_file: str | None
    log_files: tuple[str, ...] = ()
    size: int = 0  # the slice's bytes, base and log files
    base_size: int = 0  # the base file's bytes (0: no base file, or not known)

    @staticmethod
    def of(fs: FileSlice) -> SliceSpec:
        logs = tuple(lf.relative_path for lf in fs.log_files if not lf.name.cdc)
        return SliceSpec(fs.partition, fs.file_id, fs.base_file_path, logs, fs.total_size,
                         fs.base_file.size if fs.base_file else 0)


@dataclass(frozen=True)
class ReadSpec:
    """What a read returns and how slices merge; the same for every slice of one query (picklable)."""

    storage: Storage
    base_path: str
    schema: pa.Schema  # the output: meta columns, then the table's columns
    merge: MergeConfig
    instants: CommittedInstants  # whose log blocks count
    commit_times: frozenset[str] | None = None  # incremental: only records written by these commits
    keys: tuple[str, ...] | None = None  # point read: only these record keys
    read_optimized: bool = False  # base files only
    predicates: tuple[Pred, ...] = ()  # the query's conjuncts: row groups they rule out are skipped (base-only reads)
    batch_rows: int = DEFAULT_BATCH_ROWS
    log_compact_rows: int = DEFAULT_LOG_COMPACT_ROWS
    schema_on_read: SchemaOnRead | None = None  # a schema-on-read table: base files are read by field id


def conform(t: pa.Table | pa.RecordBatch, schema: pa.Schema, where: str) -> pa.Table:
    """``t`` with exactly ``schema``'s columns: by name, promoted types converted; a column (or struct field) ``t``
    lacks is all nulls (a column added to the table after ``t`` was written); see
    :func:`pyhudi.table.evolution.conform_table`."""
    return conform_table(t, schema, where)


_WORKERS = max(1, min(4, os.cpu_count() or 1))


#: the process's pool of read threads (:func:`pyhudi.io.pools.shared_pool`): block decoders and a base file's reader
_READ_POOL = "pyhudi-read"


def prefetch(items: Iterator[Any], depth: int = _WORKERS, *, call: bool = True) -> Iterator[Any]:
    """The results of ``items`` (callables when ``call``, else an iterator's values) computed by the process's
    read threads at most ``depth`` ahead of the consumer, in order. Errors surface at their item; a consumer that
    stops early stops the producers (and waits for those running)."""
    pool = shared_pool(_READ_POOL, _WORKERS + 1)  # decoders, and the producer of one base file
    if call:
        pending: deque[Future[Any]] = deque()
        try:
            for f in items:
                pending.append(pool.submit(f))
                if len(pending) > depth:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for fut in pending:
                fut.cancel()
            wait(pending)
        return
    q: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for v in items:
                while not stop.is_set():
                    try:
                        q.put((True, v), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put((False, None))
        except BaseException as e:  # handed to the consumer
            q.put((False, e))

    producer = pool.submit(produce)
    try:
        while True:
            ok, v = q.get()
            if not ok:
                if v is not None:
                    raise v
                return
            yield v
    finally:
        stop.set()
        while not producer.done():
            try:
                q.get_nowait()
            except queue.Empty:
                wait([producer], timeout=0.05)


def _runs(blocks: Iterable[LogBlock], join: bool) -> Iterator[list[LogBlock]]:
    """``blocks`` in order, each alone, or (``join``) consecutive Avro data blocks with the same SCHEMA header
    together: the merge takes their records in the same order either way."""
    run: list[LogBlock] = []
    for b in blocks:
        joins = join and b.block_type == BlockType.AVRO_DATA
        if run and not (joins and b.schema == run[0].schema):
            yield run
            run = []
        if joins:
            run.append(b)
        else:
            yield [b]
    if run:
        yield run


#: file slices (base and log files) of at least this many bytes are read with the process's read threads (log
#: blocks decoded, base batches read ahead of the merge); smaller ones in the calling thread alone. Handing a small
#: slice's work to threads costs more than it overlaps: a 2M-row merge-on-read table of 2,190 slices of about
#: 0.2 MB (1,809 with 1-5 small log files), read whole in one process, 6.2 s in the calling thread against 7.5-7.9 s
#: with the read threads
THREADED_SLICE_MIN_BYTES = 8 << 20


class FileSliceReader:
    """Reads one file slice merged (see the module docstring)."""

    def __init__(self, spec: ReadSpec, sl: SliceSpec) -> None:
        self.spec = spec
        self.slice = sl
        self.where = f"{spec.base_path}: file group {sl.file_id}" + (f" in {sl.partition!r}" if sl.partition else "")
        self._wanted = pa.array(list(dict.fromkeys(spec.keys)), pa.string()) if spec.keys is not None else None
        self.row_groups_total = 0  # of the base file
        self.row_groups_read = 0
        self._query: pa.Schema | None = None  # a schema-on-read table's query columns, as mapped log blocks hold them
        # a small slice is read in the calling thread alone (see THREADED_SLICE_MIN_BYTES); one of unknown size not
        self._threaded = not sl.size or sl.size >= THREADED_SLICE_MIN_BYTES

    def _abs(self, rel: str) -> str:
        return posixpath.join(self.spec.base_path, rel)

    # -- log records -------------------------------------------------------------------------------------------
    def log_records(self) -> Winners:
        """The buffered log record of every key of the slice's logs (after all valid blocks). A large slice's
        blocks are decoded by the read threads (the decoders release the GIL), at most a few ahead of the fold,
        which takes them in order; a small slice's in this thread, consecutive data blocks of one schema as one."""
        spec = self.spec
        recs = LogRecords(spec.schema, spec.merge, self.where, spec.log_compact_rows)
        paths = [self._abs(p) for p in self.slice.log_files]
        # a small slice's block contents are read while each log file is open; a large slice's are read when
        # decoded (at most a few blocks' contents held at a time), each by opening its file again
        blocks = scan_log_blocks(spec.storage, paths, spec.instants, load_content=not self._threaded,
                                 on_compacted="refuse")
        if self._threaded:
            decoded = prefetch((lambda blk=blk: self._decode(blk)) for blk in blocks)
        else:
            decoded = (self._decode_run(run) for run in _runs(blocks, spec.schema_on_read is None))
        for kind, a, b in decoded:
            if kind == "delete":
                recs.add_deletes(a)
            else:
                recs.add_data(a, b)
        return recs.resolve()

    def _decode_run(self, run: list[LogBlock]) -> tuple[str, Any, Any]:
        """:meth:`_decode` of one block, or of consecutive Avro data blocks of one schema (:func:`_runs`) decoded
        as one block."""
        if len(run) == 1:
            return self._decode(run[0])
        spec = self.spec
        wheres = [f"{b.path} (block at offset {b.offset})" for b in run]
        try:
            block = decode_avro_blocks_content([b.fetch(spec.storage) for b in run], run[0].schema, wheres)
        finally:
            for b in run:
                b.release()
        block = self._wanted_rows(block)
        return "data", block, conform(block, spec.schema, f"{wheres[0]} and the {len(run) - 1} data blocks after it")

    def _wanted_rows(self, block: pa.Table) -> pa.Table:
        """A decoded data block's records of the wanted keys (a point read), or all."""
        if self._wanted is None:
            return block
        return block.filter(pc.is_in(block.column(RECORD_KEY_COL), value_set=self._wanted))

    def _decode(self, b: LogBlock) -> tuple[str, Any, Any]:
        spec = self.spec
        try:
            if b.block_type == BlockType.DELETE:
                entries = b.delete_columns(spec.storage)
                if self._wanted is not None:
                    entries = entries.filter(pc.is_in(entries.keys, value_set=self._wanted))
                return "delete", entries, None
            block = self._wanted_rows(b.records(spec.storage))
            where = f"{b.path} (block at offset {b.offset})"
            sor = spec.schema_on_read
            if sor is None:
                return "data", block, conform(block, spec.schema, where)
            return ("data", *self._mapped_block(sor, block, b.instant_time, where))
        finally:
            b.release()

    def _mapped_block(self, sor: SchemaOnRead, block: pa.Table, instant: str | None,
                      where: str) -> tuple[pa.Table, pa.Table]:
        """A schema-on-read table's log block, mapped by the InternalSchema of its INSTANT_TIME header's instant as
        Hudi's log reader does (``composeEvolvedSchemaTransformer``): (every query column, for the delete markers;
        the output columns)."""
        if not instant:
            raise CorruptFileError(where, "a data block without an INSTANT_TIME header: its schema version is unknown")
        mapping = FileMapping(sor, sor.version_for(instant, where), where)
        if self._query is None:
            self._query = with_meta(without_meta(to_arrow(sor.query, sor.table)))
        full = mapping.apply(block, self._query)
        if OPERATION_COL in block.column_names and OPERATION_COL not in full.column_names:
            full = full.append_column(OPERATION_COL, block.column(OPERATION_COL))
        return full, full.select(self.spec.schema.names)

    # -- base file ---------------------------------------------------------------------------------------------
    def _base_batches(self) -> Iterator[pa.Table]:
        rel = self.slice.base_file
        if rel is None:
            return
        path = self._abs(rel)
        spec = self.spec
        mapping = self._mapping(rel, path)

        def out(b: pa.Table | pa.RecordBatch) -> pa.Table:
            return mapping.apply(b, spec.schema) if mapping is not None else conform(b, spec.schema, path)

        try:
            if self._wanted is not None:
                from pyhudi.table import base_file

                t = base_file.read_base_file(spec.storage, path, filter_keys=self._wanted)
                for b in t.to_batches(spec.batch_rows):
                    yield out(b)
                return
            with spec.storage.open_input(path) as f:
                pf = parquet_file(f)
                present = set(pf.schema_arrow.names)
                wanted = spec.schema.names if mapping is None else [mapping.source_column(n) for n in spec.schema.names]
                cols = [n for n in dict.fromkeys(wanted) if n is not None and n in present]
                groups = self._row_groups(pf)
                if not groups:
                    return
                for b in pf.iter_batches(batch_size=spec.batch_rows, columns=cols, row_groups=groups):
                    yield out(b)
        except FileNotFoundError as e:
            raise StorageError(f"file not found: {path}") from e
        except (pa.ArrowInvalid, pa.ArrowException) as e:
            raise CorruptFileError(path, f"cannot read parquet: {e}") from None

    def _mapping(self, rel: str, path: str) -> FileMapping | None:
        """A schema-on-read table's base file: its columns mapped to the query's by the InternalSchema of the
        instant in its name (:meth:`SchemaOnRead.version_for`)."""
        sor = self.spec.schema_on_read
        if sor is None:
            return None
        name = parse_data_file_name(posixpath.basename(rel))
        if not isinstance(name, BaseFileName):
            raise CorruptFileError(path, "not a base file name: its instant, which names its schema version, is "
                                         "unknown")
        return FileMapping(sor, sor.version_for(name.instant, path), path)

    def _row_groups(self, pf: pq.ParquetFile) -> list[int]:
        """The base file's row groups to read: all, or -- when no log record merges into this read (a
        read-optimized read or a slice without log files) -- those whose statistics do not rule out one of the
        query's predicates."""
        md = pf.metadata
        n = md.num_row_groups
        self.row_groups_total = n
        preds = self.spec.predicates
        # a schema-on-read file's column names may be another column's in the query: its statistics are not used
        if not preds or not (self.spec.read_optimized or not self.slice.log_files) or self.spec.schema_on_read:
            self.row_groups_read = n
            return list(range(n))
        wanted = {p.column for p in preds}
        at = {md.schema.column(j).path: j for j in range(md.num_columns)}
        cols = {c: at[c] for c in wanted if c in at}
        keep = []
        for i in range(n):
            rg = md.row_group(i)
            stats: dict[str, Stats] = {}
            for c, j in cols.items():
                st = rg.column(j).statistics
                if st is None:
                    continue
                has = st.has_min_max
                stats[c] = Stats.of(st.min if has else None, st.max if has else None,
                                    st.null_count if st.has_null_count else None, rg.num_rows)
            if all_may_match(preds, stats):
                keep.append(i)
        self.row_groups_read = len(keep)
        return keep

    # -- merged ------------------------------------------------------------------------------------------------
    def batches(self) -> Iterator[pa.RecordBatch]:
        """The slice's current records, in batches of the output schema."""
        for t in self._merged():
            t = self._select(t)
            if t.num_rows:
                yield from t.to_batches()

    def read(self) -> pa.Table:
        return pa.Table.from_batches(list(self.batches()), schema=self.spec.schema)

    def _select(self, t: pa.Table) -> pa.Table:
        ct = self.spec.commit_times
        if ct is not None and t.num_rows:
            t = t.filter(pc.is_in(t.column(COMMIT_TIME_COL), value_set=pa.array(sorted(ct), pa.string())))
        return t

    def _merged(self) -> Iterator[pa.Table]:
        spec = self.spec
        if spec.read_optimized or not self.slice.log_files:
            yield from self._base_batches()
            return
        winners = self.log_records()
        if not len(winners):
            yield from self._base_batches()
            return
        table = winners.key_table
        assert table is not None
        claimed = np.zeros(len(winners), np.bool_)
        emitted: list[np.ndarray] = []  # winners whose log row replaces a base row
        fields = spec.merge.ordering_fields
        bases = self._base_batches()
        for base in (prefetch(bases, depth=1, call=False) if self._threaded else bases):
            keys = base.column(RECORD_KEY_COL)
            at = table.probe(keys)
            hit = at >= 0
            if not hit.any():
                yield base
                continue
            rows = np.flatnonzero(hit)
            matched = at[rows]
            claimed[matched] = True
            ordering = [base.column(f).combine_chunks().take(pa.array(rows)) for f in fields]
            log_wins = final_merge(spec.merge, winners, matched, ordering, self.where,
                                   keys.combine_chunks().take(pa.array(rows)))
            keep = ~hit
            keep[rows[~log_wins]] = True
            yield base.filter(pa.array(keep))
            emitted.append(matched[log_wins])
        # the log rows follow, in log order: those that replace a base row, then the keys no base row has
        take = np.concatenate([*emitted, np.flatnonzero(~claimed)])
        take = take[~winners.is_delete[take]]
        yield from winners.emit(winners.row[take])


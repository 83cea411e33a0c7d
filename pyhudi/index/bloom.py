"""BLOOM and GLOBAL_BLOOM: find incoming keys through the key ranges and bloom filters in base-file footers.

For the latest base file of every file group in the candidate partitions (BLOOM: the partitions of the incoming
records, a key being unique per partition; GLOBAL_BLOOM: all partitions, a key being unique in the table):

1. key ranges (``hoodie.bloom.index.prune.by.ranges``, default true): Spark tasks read the footers'
   ``hoodie_min_record_key`` / ``hoodie_max_record_key``; the driver collects one small row per file. A file
   without both has no range and is compared with every key of its partition (every key, for GLOBAL_BLOOM).
2. comparisons: in Spark tasks over the incoming records, each key is paired with the files whose range holds
   it (inclusive), by binary search of the files' bounds in the batch's sorted keys (compiled, no per-row
   Python). A file no key falls into is pruned by range; its bloom filter is never read.
3. bloom filter: the pairs are grouped per file (one Spark task holds all pairs of a file); the task reads the
   file's footer filter (``SIMPLE`` or ``DYNAMIC_V0``, as Java Hudi writes them) and tests the keys in one
   vectorised call. A file whose footer has no filter keeps all its candidates.
4. check: the candidates left are confirmed against the record keys read from the file (once per file); only
   keys the file holds are tagged with its location.

Key order: Java Hudi computes the footer min/max with ``String.compareTo`` (UTF-16 code units), UTF-8 bytes order
code points. The two orders agree whenever one side of a comparison has no character at or above U+E000; an
incoming key with such a character (a UTF-8 byte >= 0xEE) is compared with every file of its group instead of
being range-pruned, so ranges written in either order prune correctly.

After each :meth:`BloomIndex.tag` the counts of files and keys pruned at every step are in
:attr:`BloomIndex.stats` (a :class:`BloomIndexStats`), also logged on ``pyhudi.index.bloom`` at INFO level.
"""

from __future__ import annotations

import itertools
import logging
import posixpath
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numba as nb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.index.base import LOC_FILE_ID_COL, LOC_PARTITION_COL, Index
from pyhudi.io.arrow import binary_buffers, to_binary_array
from pyhudi.io.storage import Storage
from pyhudi.spark.frames import local_frame
from pyhudi.table import base_file
from pyhudi.table.schema import PARTITION_PATH_COL, RECORD_KEY_COL

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from pyhudi.write.context import WriteJob

log = logging.getLogger(__name__)

_KEY = "__bloom_key"
_FILE = "__bloom_file"
_CANDS = "__bloom_candidates"
_POS = "__bloom_positives"
_FOUND = "__bloom_found"
_TYPE = "__bloom_type"
NO_FILTER = ""  # the _TYPE of a file whose footer has no bloom filter

_FILES_SCHEMA = "idx int, path string"
_RANGES = pa.schema([("idx", pa.int32()), ("min_key", pa.string()), ("max_key", pa.string())])
_PAIRS = pa.schema([(_KEY, pa.string()), (_FILE, pa.int32())])
_CHECKED = pa.schema(
    [
        (_KEY, pa.string()),
        (LOC_PARTITION_COL, pa.string()),
        (LOC_FILE_ID_COL, pa.string()),
        (_FILE, pa.int32()),
        (_CANDS, pa.int64()),
        (_POS, pa.int64()),
        (_FOUND, pa.int64()),
        (_TYPE, pa.string()),
    ]
)
_MAX_PAIRS = 1 << 20  # candidate pairs per output batch
_HIGH_BYTE = 0xEE  # lead byte of U+E000 and above in UTF-8: Java's UTF-16 order may differ from byte order


@dataclass
class BloomIndexStats:
    """What one tagging did. Files are the latest base files of the candidate partitions; a *pair* is one
    (incoming key, file) comparison."""

    index: str
    files: int = 0
    files_without_range: int = 0  # no min/max record key in the footer (or range pruning off)
    files_pruned_by_range: int = 0  # no incoming key in the file's key range: footer filter not read
    files_compared: int = 0  # at least one key left after range pruning: footer filter read
    files_pruned_by_bloom: int = 0  # every candidate ruled out by the footer filter: record keys not read
    files_without_bloom: int = 0  # compared, but the footer has no bloom filter: every candidate checked
    files_checked: int = 0  # record keys read to confirm candidates
    bloom_filter_types: dict[str, int] = field(default_factory=dict)  # filters read, by type code
    candidate_pairs: int = 0  # pairs left after range pruning
    bloom_positives: int = 0  # pairs the footer filter did not rule out (all pairs of a file without one)
    false_positives: int = 0  # bloom positives the file does not hold
    matches: int = 0  # pairs confirmed by the file's record keys

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- compiled search ------------------------------------------------------------------------------------------
_jit = nb.njit(cache=True, nogil=True)


@_jit
def _compare(a, a0, a1, b, b0, b1):  # pragma: no cover - compiled
    """Unsigned byte-wise comparison of a[a0:a1] and b[b0:b1]: -1, 0 or 1 (a prefix sorts first)."""
    n = min(a1 - a0, b1 - b0)
    for i in range(n):
        x = a[a0 + i]
        y = b[b0 + i]
        if x != y:
            return -1 if x < y else 1
    la = a1 - a0
    lb = b1 - b0
    if la == lb:
        return 0
    return -1 if la < lb else 1


@_jit
def _search_sorted(keys, koffs, queries, qoffs, right, out):  # pragma: no cover - compiled
    """out[j] = how many sorted keys are < query j (right: <= query j)."""
    n = len(koffs) - 1
    for j in range(len(qoffs) - 1):
        lo = 0
        hi = n
        q0 = qoffs[j]
        q1 = qoffs[j + 1]
        while lo < hi:
            mid = (lo + hi) >> 1
            c = _compare(keys, koffs[mid], koffs[mid + 1], queries, q0, q1)
            if c < 0 or (right and c == 0):
                lo = mid + 1
            else:
                hi = mid
        out[j] = lo


def _bytes_of(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    return binary_buffers(to_binary_array(arr, "record key"))


# -- comparisons: (key, file) pairs after range pruning --------------------------------------------------------
@dataclass(frozen=True)
class FileRanges:
    """The files one key may be compared with (one partition's, or all for a global index)."""

    ranged: np.ndarray  # file indexes with a key range
    min_bytes: tuple[np.ndarray, np.ndarray]  # their min keys (data, offsets)
    max_bytes: tuple[np.ndarray, np.ndarray]
    unranged: np.ndarray  # file indexes without a range


def file_groups(files: pa.Table, is_global: bool) -> dict[str | None, FileRanges]:
    """The files of ``files`` (columns ``idx``, ``partition``, ``min_key``, ``max_key``) grouped by partition
    (one group, key None, for a global index)."""
    idx = files.column("idx").to_numpy()
    has_range = pc.and_(pc.is_valid(files.column("min_key")), pc.is_valid(files.column("max_key")))
    has = np.asarray(has_range.to_numpy(zero_copy_only=False), dtype=bool)
    if is_global:
        parts: dict[str | None, np.ndarray] = {None: np.arange(files.num_rows)}
    else:
        parts = dict(_split_by_value(files.column("partition").combine_chunks()))
    out: dict[str | None, FileRanges] = {}
    for p, rows in parts.items():
        r = rows[has[rows]]
        take = pa.array(r, pa.int64())
        out[p] = FileRanges(
            ranged=idx[r].astype(np.int32),
            min_bytes=_bytes_of(files.column("min_key").take(take).combine_chunks()),
            max_bytes=_bytes_of(files.column("max_key").take(take).combine_chunks()),
            unranged=idx[rows[~has[rows]]].astype(np.int32),
        )
    return out


def _split_by_value(values: pa.Array) -> Iterator[tuple[Any, np.ndarray]]:
    """(value, the positions holding it) for each distinct value of ``values``, in one sort."""
    enc = pc.dictionary_encode(values)
    if not len(enc.dictionary):
        return
    codes = enc.indices.to_numpy(zero_copy_only=False)
    order = np.argsort(codes, kind="stable")
    cuts = np.cumsum(np.bincount(codes, minlength=len(enc.dictionary)))
    yield from zip(enc.dictionary.to_pylist(), np.split(order, cuts[:-1]), strict=True)


def _spans(
    starts: np.ndarray, lengths: np.ndarray, files: np.ndarray
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(positions, file of each position) of the spans [start_f, start_f + length_f), in chunks of about
    _MAX_PAIRS positions (whole files per chunk)."""
    lengths = np.maximum(lengths, 0)
    keep = lengths > 0
    starts, lengths, files = starts[keep], lengths[keep], files[keep]
    if not len(files):
        return
    ends = np.cumsum(lengths)
    a = 0
    while a < len(files):
        base = ends[a - 1] if a else 0
        b = max(a + 1, int(np.searchsorted(ends, base + _MAX_PAIRS, side="right")))
        ln = lengths[a:b]
        total = int(ln.sum())
        first = np.cumsum(ln) - ln
        pos = np.arange(total, dtype=np.int64) + np.repeat(starts[a:b] - first, ln)
        yield pos, np.repeat(files[a:b], ln)
        a = b


def candidate_pairs(keys: pa.Array, group: FileRanges) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """For keys of one group: (key positions in ``keys``, file indexes) of every comparison left after range
    pruning, in chunks. Inclusive ranges, byte order; keys with a character >= U+E000 are never range-pruned."""
    n = len(keys)
    if n == 0:
        return
    all_keys = np.arange(n, dtype=np.int64)
    if len(group.unranged):  # no range: every key
        for pos, f in _spans(
            np.zeros(len(group.unranged), np.int64), np.full(len(group.unranged), n, np.int64), group.unranged
        ):
            yield all_keys[pos], f
    if not len(group.ranged):
        return
    data, offs = _bytes_of(keys)
    data, offs = data[offs[0] : offs[-1]], offs - offs[0]
    high = np.concatenate(([0], np.cumsum(data >= _HIGH_BYTE, dtype=np.int64)))
    exotic = (high[offs[1:]] - high[offs[:-1]]) > 0
    plain = np.flatnonzero(~exotic)
    odd = np.flatnonzero(exotic)
    nf = len(group.ranged)
    if len(odd):
        for pos, f in _spans(np.zeros(nf, np.int64), np.full(nf, len(odd), np.int64), group.ranged):
            yield odd[pos], f
    if not len(plain):
        return
    sub = keys.take(pa.array(plain)) if len(odd) else keys
    order = pc.sort_indices(sub).to_numpy()
    sorted_keys = sub.take(pa.array(order))
    kd, ko = _bytes_of(sorted_keys)
    lo = np.empty(nf, np.int64)
    hi = np.empty(nf, np.int64)
    _search_sorted(kd, ko, group.min_bytes[0], group.min_bytes[1], False, lo)
    _search_sorted(kd, ko, group.max_bytes[0], group.max_bytes[1], True, hi)
    back = plain[order]  # sorted position -> position in keys
    for pos, f in _spans(lo, hi - lo, group.ranged):
        yield back[pos], f


def _pairs_task(files: pa.Table, is_global: bool):
    """A mapInArrow function: (record key, partition path) batches -> (key, file index) comparison pairs."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        groups = file_groups(files, is_global)
        for b in batches:
            keys = b.column(0)
            if is_global:
                parts: list[tuple[FileRanges, pa.Array]] = [(groups[None], keys)] if None in groups else []
            else:
                parts = [
                    (groups[p], keys.take(pa.array(rows)))
                    for p, rows in _split_by_value(b.column(1))
                    if p in groups
                ]
            for group, k in parts:
                for pos, f in candidate_pairs(k, group):
                    yield pa.record_batch([k.take(pa.array(pos)), pa.array(f, pa.int32())], schema=_PAIRS)

    return run


# -- footers, bloom filters, file checks (Spark tasks) ----------------------------------------------------------
def _ranges_task(storage: Storage, base_path: str):
    """A mapInArrow function: (file index, path) rows -> the footer's min/max record keys (null when absent)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            mins: list[str | None] = []
            maxs: list[str | None] = []
            for rel in b.column(1).to_pylist():  # one footer read per file
                footer = base_file.read_footer(storage, posixpath.join(base_path, rel))
                ok = footer.min_key is not None and footer.max_key is not None
                mins.append(footer.min_key if ok else None)
                maxs.append(footer.max_key if ok else None)
            yield pa.record_batch(
                [b.column(0).cast(pa.int32()), pa.array(mins, pa.string()), pa.array(maxs, pa.string())],
                schema=_RANGES,
            )

    return run


class _FileCheck:
    """The comparisons of one file within a check task: bloom filter first, then the file's record keys."""

    def __init__(self, storage: Storage, base_path: str, files: pa.Table, f: int) -> None:
        self.f = f
        self.row = files.slice(f, 1).to_pylist()[0]
        self.path = posixpath.join(base_path, self.row["path"])
        self.storage = storage
        footer = base_file.read_footer(storage, self.path)
        self.bloom = footer.bloom(source=self.path)
        self.candidates = 0
        self.positives: list[pa.Array] = []

    def add(self, keys: pa.Array) -> None:
        self.candidates += len(keys)
        if self.bloom is not None:
            keys = keys.filter(pa.array(self.bloom.might_contain_many(keys)))
        if len(keys):
            self.positives.append(keys)

    def finish(self) -> Iterator[pa.RecordBatch]:
        n_pos = 0
        found = pa.array([], pa.string())
        if self.positives:
            cand = pc.unique(pa.concat_arrays(self.positives).cast(pa.string()))
            n_pos = len(cand)
            stored = (
                base_file.read_base_file(self.storage, self.path, columns=[RECORD_KEY_COL])
                .column(RECORD_KEY_COL)
                .combine_chunks()
                .cast(pa.string())
            )
            found = cand.filter(pc.is_in(cand, value_set=stored))
        n = len(found)
        typ = self.bloom.type_code if self.bloom is not None else NO_FILTER
        if n:
            at = pa.array(np.zeros(n, np.int64))
            yield pa.record_batch(
                [
                    found,
                    pa.array([self.row["partition"]], pa.string()).take(at),
                    pa.array([self.row["file_id"]], pa.string()).take(at),
                    pa.array(np.full(n, self.f, np.int32)),
                    pa.nulls(n, pa.int64()),
                    pa.nulls(n, pa.int64()),
                    pa.nulls(n, pa.int64()),
                    pa.nulls(n, pa.string()),
                ],
                schema=_CHECKED,
            )
        yield pa.RecordBatch.from_pylist(
            [{_FILE: self.f, _CANDS: self.candidates, _POS: n_pos, _FOUND: n, _TYPE: typ}], schema=_CHECKED
        )


def _check_task(storage: Storage, base_path: str, files: pa.Table):
    """A mapInArrow function over (key, file index) pairs sorted by file: the keys each file holds, with its
    location, then one statistics row per file (null key)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        cur: _FileCheck | None = None
        for b in batches:
            if not b.num_rows:
                continue
            fidx = b.column(1).to_numpy()
            cuts = np.concatenate(([0], np.flatnonzero(np.diff(fidx)) + 1, [b.num_rows]))
            keys = b.column(0)
            for s, e in itertools.pairwise(cuts):  # one run per file
                f = int(fidx[s])
                if cur is None or cur.f != f:
                    if cur is not None:
                        yield from cur.finish()
                    cur = _FileCheck(storage, base_path, files, f)
                cur.add(keys.slice(int(s), int(e - s)))
        if cur is not None:
            yield from cur.finish()

    return run


# -- the index ----------------------------------------------------------------------------------------------
class BloomIndex(Index):
    """``BLOOM`` (a key is unique per partition) or ``GLOBAL_BLOOM`` (unique in the table)."""

    def __init__(self, is_global: bool) -> None:
        self.is_global = is_global
        self.name = "GLOBAL_BLOOM" if is_global else "BLOOM"
        self.stats: BloomIndexStats | None = None

    def tag(self, job: WriteJob, records: DataFrame) -> DataFrame:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import from_arrow_schema

        cfg = job.config
        stats = BloomIndexStats(self.name)
        self.stats = stats
        parallelism = cfg.bloom_parallelism or job.parallelism
        partitions = None if self.is_global else job.incoming_partitions()
        listed = job.latest_base_files(partitions)
        stats.files = len(listed)
        if not listed:
            self._log(stats)
            return records.withColumn(LOC_PARTITION_COL, F.lit(None).cast("string")).withColumn(
                LOC_FILE_ID_COL, F.lit(None).cast("string")
            )
        spark = job.spark
        n = len(listed)
        files = pa.table(
            {
                "idx": pa.array(np.arange(n, dtype=np.int32)),
                "partition": pa.array([p for p, _, _ in listed], pa.string()),
                "file_id": pa.array([f for _, f, _ in listed], pa.string()),
                "path": pa.array([r for _, _, r in listed], pa.string()),
            }
        )
        if cfg.bloom_prune_by_ranges:
            ranges = (
                local_frame(spark, [(i, r) for i, (_, _, r) in enumerate(listed)], _FILES_SCHEMA)
                .repartition(max(1, min(n, parallelism)))
                .mapInArrow(_ranges_task(job.storage, job.base_path), from_arrow_schema(_RANGES))
                .toArrow()
                .sort_by("idx")
            )
            if ranges.num_rows != n or ranges.column("idx").to_pylist() != list(range(n)):
                raise AssertionError(f"footer key ranges of {ranges.num_rows} files read, {n} expected")
            files = files.append_column("min_key", ranges.column("min_key")).append_column(
                "max_key", ranges.column("max_key")
            )
            stats.files_without_range = int(
                pc.sum(pc.or_(pc.is_null(files.column("min_key")), pc.is_null(files.column("max_key")))).as_py()
                or 0
            )
        else:
            files = files.append_column("min_key", pa.nulls(n, pa.string())).append_column(
                "max_key", pa.nulls(n, pa.string())
            )
            stats.files_without_range = n

        pairs = records.select(RECORD_KEY_COL, PARTITION_PATH_COL).mapInArrow(
            _pairs_task(files, self.is_global), from_arrow_schema(_PAIRS)
        )
        # computed once, by the statistics' job below, and read again by the write: held until the write ends
        checked = (
            pairs.repartition(max(1, min(n, parallelism)), _FILE)
            .sortWithinPartitions(_FILE)
            .mapInArrow(_check_task(job.storage, job.base_path, files), from_arrow_schema(_CHECKED))
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        job.held.append(checked)
        self._fill(stats, checked.filter(F.col(_KEY).isNull()).select(_FILE, _CANDS, _POS, _FOUND, _TYPE).toArrow())
        self._log(stats)

        found = checked.filter(F.col(_KEY).isNotNull()).select(_KEY, LOC_PARTITION_COL, LOC_FILE_ID_COL)
        cond = records[RECORD_KEY_COL] == found[_KEY]
        if not self.is_global:
            cond = cond & (records[PARTITION_PATH_COL] == found[LOC_PARTITION_COL])
        return records.join(found, cond, "left").drop(_KEY)

    @staticmethod
    def _fill(stats: BloomIndexStats, per_file: pa.Table) -> None:
        typ = per_file.column(_TYPE).to_pylist()
        cands = per_file.column(_CANDS).to_numpy()
        pos = per_file.column(_POS).to_numpy()
        found = per_file.column(_FOUND).to_numpy()
        has = np.array([t != NO_FILTER for t in typ], dtype=bool)  # one entry per compared file
        stats.files_compared = per_file.num_rows
        stats.files_pruned_by_range = stats.files - stats.files_compared
        stats.files_without_bloom = int((~has).sum())
        stats.files_checked = int((pos > 0).sum())
        stats.files_pruned_by_bloom = int((has & (pos == 0)).sum())
        stats.bloom_filter_types = {t: typ.count(t) for t in sorted(set(typ)) if t != NO_FILTER}
        stats.candidate_pairs = int(cands.sum())
        stats.bloom_positives = int(pos.sum())
        stats.false_positives = int((pos - found)[has].sum())
        stats.matches = int(found.sum())

    @staticmethod
    def _log(stats: BloomIndexStats) -> None:
        log.info(
            "%s: %d files, %d without key range, %d pruned by range, %d pruned by bloom filter, %d checked "
            "(%d without bloom filter); %d candidate pairs, %d bloom positives, %d false positives, %d matches",
            stats.index, stats.files, stats.files_without_range, stats.files_pruned_by_range,
            stats.files_pruned_by_bloom, stats.files_checked, stats.files_without_bloom, stats.candidate_pairs,
            stats.bloom_positives, stats.false_positives, stats.matches,
            extra={"bloom_index_stats": stats},
        )  # fmt: skip

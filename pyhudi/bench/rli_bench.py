"""Record-index benchmark: tagging with RECORD_INDEX versus GLOBAL_SIMPLE, the index's size, and the lookup cost
model ``T(M, N) ~ K + (M/N) * c`` of one file-group task.

The table: R rows (random UUID keys, ``YYYY/MM/DD`` partitions over one year, about 150 bytes a row) written by
one ``bulk_insert`` with the metadata table, then its record index built by ``Table.build_record_index`` (one
sorted base HFile per file group). Hard-linked clones of that table (data files are immutable; ``.hoodie`` is
copied) give every measured write and every file-group count the same starting state.

(a) Tagging: an upsert of U rows (half updates of random live keys in their partition, half new keys) is written
    once per run into a fresh clone, alternating RECORD_INDEX and GLOBAL_SIMPLE; ``timings_s.tag`` of each
    write is reported (median of the runs) with the write's total. Every run starts from the same table state,
    so neither index sees the other's commits. ``profile``: the same stage run without writing, with no index
    at all (the part of ``tag`` no index can remove), with each index, and the record index's driver-side parts.
(b) Size: ``record_index_stats()`` and where the bytes go (keys, values, cell framing, compression, block
    headers, index blocks, the bloom-filter meta block; the key and value streams gzip-compressed alone; how
    often a value recurs within deflate's 32 KiB window), then the same cells re-encoded with other block sizes
    and gzip settings, and with one value for every key (the floor no value encoding can go below).
(c) Lookup model: clones indexed with N file groups; ``RecordIndexLookup.lookup_group`` timed per file group
    for M present keys; K and c fitted by least squares over the mean per-task times, with residuals; and a
    second fit with the number of data blocks a task decompresses as another term.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pyhudi.bench.hfile_bench import random_uuid_keys

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pyhudi.table.table import Table

DEFAULT_ROWS = 2_000_000
QUICK_ROWS = 200_000
UPSERT_ROWS = 100_000
LOOKUP_KEYS = (1_000, 10_000, 100_000)
LOOKUP_FILE_GROUPS = (2, 4, 8, 16)
INDEXES = ("RECORD_INDEX", "GLOBAL_SIMPLE")
BASE_OPTIONS = {
    "hoodie.table.name": "rli_bench",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "dt",
    "hoodie.table.ordering.fields": "ts",
    "hoodie.metadata.enable": "true",
}
# the bulk_insert creating the table: no record index yet (it is built afterwards, in one step)
CREATE_OPTIONS = {**BASE_OPTIONS, "hoodie.index.type": "SIMPLE", "hoodie.metadata.record.index.enable": "false"}
_DAY0 = np.datetime64("2025-01-01")


# -- data ------------------------------------------------------------------------------------------------------
def _fixed_width_strings(prefix: str, numbers: np.ndarray, width: int) -> pa.Array:
    """``prefix`` + zero-padded ``numbers`` (all the same length) as an Arrow string array, without Python loops."""
    n = len(numbers)
    digits = np.empty((n, width), np.uint8)
    v = numbers.astype(np.int64).copy()
    for j in range(width - 1, -1, -1):
        digits[:, j] = ord("0") + v % 10
        v //= 10
    pre = np.frombuffer(prefix.encode(), np.uint8)
    out = np.concatenate([np.broadcast_to(pre, (n, len(pre))), digits], axis=1)
    w = out.shape[1]
    offsets = np.arange(0, w * (n + 1), w, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(out).tobytes())])


def day_partitions(days: np.ndarray) -> pa.Array:
    """``YYYY/MM/DD`` partition paths of day offsets from 2025-01-01."""
    dates = (_DAY0 + days.astype("timedelta64[D]")).astype("datetime64[D]")
    return pc.strftime(pa.array(dates).cast(pa.timestamp("s")), format="%Y/%m/%d")


def rows_table(keys: pa.Array, dts: pa.Array, ts: int, rng: np.random.Generator) -> pa.Table:
    """Rows of about 150 bytes: id (36), ts (8), dt (10), rider/driver (12 each), fare/lat/lon (24), city (10),
    memo (36)."""
    n = len(keys)
    return pa.table({
        "id": keys,
        "ts": pa.array(np.full(n, ts, np.int64)),
        "dt": dts,
        "rider": _fixed_width_strings("rider-", rng.integers(0, 10**6, n), 6),
        "driver": _fixed_width_strings("driver", rng.integers(0, 10**6, n), 6),
        "fare": pa.array(rng.uniform(3, 120, n).round(2)),
        "lat": pa.array(rng.uniform(-90, 90, n)),
        "lon": pa.array(rng.uniform(-180, 180, n)),
        "city": _fixed_width_strings("city-", rng.integers(0, 10**5, n), 5),
        "memo": random_uuid_keys(n, rng),
    })


def write_input(t: pa.Table, path: str, files: int = 8) -> None:
    os.makedirs(path, exist_ok=True)
    per = max(1, -(-t.num_rows // files))
    for i in range(0, t.num_rows, per):
        pq.write_table(t.slice(i, per), os.path.join(path, f"part-{i // per:04d}.parquet"))


def upsert_rows(keys: pa.Array, dts: pa.Array, n: int, rng: np.random.Generator) -> pa.Table:
    """``n`` rows: n/2 updates of distinct random live keys (in their partition), n/2 new keys."""
    n_upd = n // 2
    pick = pa.array(rng.choice(len(keys), size=n_upd, replace=False))
    new_keys = random_uuid_keys(n - n_upd, rng)
    new_dts = day_partitions(rng.integers(0, 365, n - n_upd))
    return rows_table(pa.concat_arrays([keys.take(pick), new_keys]), pa.concat_arrays([dts.take(pick), new_dts]), 2, rng)


# -- tables ----------------------------------------------------------------------------------------------------
def clone_table(src: str, dst: str) -> None:
    """A copy of a local table: ``.hoodie`` (timeline, properties, metadata table) copied, data files hard-linked
    (written once, never modified in place)."""
    for root, _dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        out = os.path.join(dst, rel)
        os.makedirs(out, exist_ok=True)
        in_meta = rel == ".hoodie" or rel.startswith(".hoodie" + os.sep)
        for f in files:
            s, d = os.path.join(root, f), os.path.join(out, f)
            if in_meta or f.startswith(".hoodie"):
                shutil.copy2(s, d)
            else:
                os.link(s, d)


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


# -- (a) tagging -----------------------------------------------------------------------------------------------
def tag_runs(spark: SparkSession, source: str, work: str, upsert_path: str, repeat: int) -> dict[str, Any]:
    """Upsert the same input into fresh clones of ``source``, alternating the two indexes (ABBA order, so
    neither always runs first), after one unmeasured warm-up upsert per index; per index the ``timings_s`` of
    every write."""
    from pyhudi.table.table import Table

    order = [INDEXES[(i + (i // 2)) % 2] for i in range(2 * repeat)]  # RI, GS, GS, RI, RI, GS, ...
    runs: dict[str, list[dict[str, Any]]] = {ix: [] for ix in INDEXES}
    warm_up: dict[str, float] = {}
    for ix in INDEXES:  # not measured: the process's first writes pay Python workers, JIT and cache loading
        dst = os.path.join(work, f"warm-up-{ix.lower()}")
        clone_table(source, dst)
        t0 = time.perf_counter()
        Table.open(dst).write(spark.read.parquet(upsert_path), "upsert", {**BASE_OPTIONS, "hoodie.index.type": ix})
        warm_up[ix] = round(time.perf_counter() - t0, 3)
        shutil.rmtree(dst)
    for i, ix in enumerate(order):
        dst = os.path.join(work, f"upsert-{i}-{ix.lower()}")
        clone_table(source, dst)
        table = Table.open(dst)
        opts = {**BASE_OPTIONS, "hoodie.index.type": ix}
        res = table.write(spark.read.parquet(upsert_path), "upsert", opts)
        d = res.to_dict()
        runs[ix].append({"order": i, "inserted": d["inserted"], "updated": d["updated"], "timings_s": d["timings_s"]})
        shutil.rmtree(dst)
    out: dict[str, Any] = {"order": order, "warm_up_upsert_s": warm_up}
    for ix in INDEXES:
        tags = [r["timings_s"]["tag"] for r in runs[ix]]
        totals = [r["timings_s"]["total"] for r in runs[ix]]
        out[ix] = {
            "tag_s_median": round(statistics.median(tags), 3),
            "tag_s_runs": tags,
            "total_s_median": round(statistics.median(totals), 3),
            "inserted_updated": sorted({(r["inserted"], r["updated"]) for r in runs[ix]}),
            "runs": runs[ix],
        }
    ri, gs = out["RECORD_INDEX"], out["GLOBAL_SIMPLE"]
    if ri["inserted_updated"] != gs["inserted_updated"] or len(ri["inserted_updated"]) != 1:
        raise AssertionError(f"the indexes tagged differently: {ri['inserted_updated']} vs {gs['inserted_updated']}")
    out["tag_ratio_global_simple_over_record_index"] = round(gs["tag_s_median"] / ri["tag_s_median"], 2)
    out["total_ratio_global_simple_over_record_index"] = round(gs["total_s_median"] / ri["total_s_median"], 2)
    return out


def tag_profile(spark: SparkSession, source: str, upsert_path: str, repeat: int) -> dict[str, Any]:
    """The tag stage taken apart, without writing anything (no instant is created): the producer's own tag
    region (the prepared records materialised first, untimed; then tag, persist, per-file-group counts) run
    against ``source`` with no index at all (every record new: the stage's floor), with RECORD_INDEX and with
    GLOBAL_SIMPLE, alternating, ``repeat`` times; plus the driver-side parts of RECORD_INDEX: opening the
    index (table config, metadata timeline, file slices) and looking all the input keys up in one process."""
    from pyspark import StorageLevel

    from pyhudi import config as C
    from pyhudi.spark import cached
    from pyhudi.table.table import Table
    from pyhudi.txn.transaction import resolve_options
    from pyhudi.write.context import WriteJob
    from pyhudi.write.producer import PRODUCERS

    variants = ("none", *INDEXES)
    runs: dict[str, list[float]] = {v: [] for v in variants}
    found: dict[str, set[int]] = {v: set() for v in variants}
    open_s: list[float] = []
    lookup_s: list[float] = []
    for r in range(repeat):
        for v in variants if r % 2 == 0 else tuple(reversed(variants)):
            table = Table.open(source)
            tl = table.timeline()
            opts = resolve_options(table.config, {**BASE_OPTIONS, C.INDEX_TYPE: "RECORD_INDEX" if v == "none" else v},
                                   tl)
            opts[C.OPERATION] = "upsert"
            job = WriteJob(spark=spark, storage=table.storage, base_path=table.base_path, table_name=table.name,
                           config=C.WriteConfig.from_options(opts), instant="(not written)", timeline=tl,
                           view=table.view(tl), data_schema=table.schema())
            producer = PRODUCERS["upsert"](job)
            producer.uses_index = v != "none"
            prepared = producer.prepare(spark.read.parquet(upsert_path)).persist(StorageLevel.MEMORY_AND_DISK)
            cached.count(prepared)
            job.prepared = prepared
            t0 = time.perf_counter()
            tagged = producer.tag(prepared).persist(StorageLevel.MEMORY_AND_DISK)
            counts = producer.count(tagged)
            runs[v].append(round(time.perf_counter() - t0, 3))
            found[v].add(sum(n for _p, f, n in counts if f is not None))
            cached.release(tagged)
            cached.release(prepared)
            if v == "RECORD_INDEX":
                t0 = time.perf_counter()
                lk = job.record_index_lookup()
                open_s.append(time.perf_counter() - t0)
                assert lk is not None
                keys = pq.read_table(upsert_path, columns=["id"]).column("id").combine_chunks()
                t0 = time.perf_counter()
                lk.lookup(keys)
                lookup_s.append(time.perf_counter() - t0)
    if len(found["RECORD_INDEX"]) != 1 or found["RECORD_INDEX"] != found["GLOBAL_SIMPLE"] or found["none"] != {0}:
        raise AssertionError(f"records tagged as stored: {found}")
    out: dict[str, Any] = {
        v: {"s_median": round(statistics.median(runs[v]), 3), "s_runs": runs[v]} for v in variants
    }
    out["tagged_as_stored"] = next(iter(found["RECORD_INDEX"]))
    out["RECORD_INDEX"]["open_index_on_driver_s"] = round(statistics.median(open_s), 3)
    out["RECORD_INDEX"]["all_keys_looked_up_in_one_process_s"] = round(statistics.median(lookup_s), 3)
    ri, gs, none = (out[v]["s_median"] for v in ("RECORD_INDEX", "GLOBAL_SIMPLE", "none"))
    out["ratio_global_simple_over_record_index"] = round(gs / ri, 2)
    out["ratio_above_floor"] = round((gs - none) / (ri - none), 2) if ri > none else None
    return out


# -- (b) size --------------------------------------------------------------------------------------------------
GZIP_WINDOW = 32 << 10  # deflate's window: a value repeats cheaply only if it occurred within the last 32 KiB


def _gzip_chunks(data: bytes, chunk: int = 1 << 20) -> int:
    """Bytes of ``data`` gzip-compressed (our block codec and level) in 1 MiB pieces, as data blocks are."""
    from pyhudi.io.compression import CODEC_GZ, compress

    return sum(len(compress(CODEC_GZ, data[i : i + chunk])) for i in range(0, len(data), chunk))


def _repeats_within_window(values: pa.Array, cell_bytes: float) -> int:
    """Cells whose value already occurred among the previous ``GZIP_WINDOW / cell_bytes`` cells."""
    idx = pc.dictionary_encode(values).indices.to_numpy(zero_copy_only=False).astype(np.int64)
    n = len(idx)
    if n < 2:
        return 0
    order = np.lexsort((np.arange(n), idx))  # by value, then position
    same = idx[order][1:] == idx[order][:-1]
    gap = order[1:] - order[:-1]
    window = max(1, int(GZIP_WINDOW / cell_bytes))
    return int(((gap <= window) & same).sum())


def size_profile(table: Table) -> dict[str, Any]:
    """Where the bytes of the record index's base HFiles go: file sections, the uncompressed cells (key, value,
    KeyValue framing), and what each of the key and value streams costs gzip-compressed on its own."""
    from pyhudi.hfile import HFileReader
    from pyhudi.hfile.block import parse_header
    from pyhudi.hfile.format import BLOCK_HEADER_SIZE
    from pyhudi.metadata.record_index import record_index_lookup

    lk = record_index_lookup(table.storage, table.base_path, table.timeline(), table.config)
    assert lk is not None
    names = ("files", "entries", "file_bytes", "data_blocks_on_disk", "data_blocks", "meta_blocks_on_disk",
             "bloom_filter_payload", "load_on_open_and_trailer", "uncompressed_data", "key_bytes", "value_bytes",
             "keys_alone_gzip", "values_alone_gzip", "distinct_values", "value_repeats_within_gzip_window",
             "log_files")
    acc: dict[str, Any] = dict.fromkeys(names, 0)
    for base, logs in lk.slices:
        acc["log_files"] += len(logs)
        if base is None:
            continue
        with HFileReader.open(table.storage, base) as h:
            acc["files"] += 1
            acc["entries"] += h.entry_count
            acc["file_bytes"] += h.file_size
            acc["data_blocks"] += h.num_blocks
            acc["data_blocks_on_disk"] += sum(e.size for e in h.block_index)
            acc["meta_blocks_on_disk"] += sum(e.size for e in h.meta_index)
            bf = h.meta_block("bloomFilter")
            acc["bloom_filter_payload"] += len(bf) if bf else 0
            acc["load_on_open_and_trailer"] += h.file_size - h.trailer.load_on_open_data_offset
            uncompressed = 0
            for e in h.block_index:
                hdr = parse_header(h._read(e.offset, BLOCK_HEADER_SIZE), 0, base, e.offset)
                uncompressed += hdr.uncompressed_size_without_header
            acc["uncompressed_data"] += uncompressed
            cells = h.read_all()
        keys = cells.column("key").combine_chunks()
        values = cells.column("value").combine_chunks()
        acc["key_bytes"] += int(pc.sum(pc.binary_length(keys)).as_py() or 0)
        acc["value_bytes"] += int(pc.sum(pc.binary_length(values)).as_py() or 0)
        acc["keys_alone_gzip"] += _gzip_chunks(b"".join(x for x in keys.to_pylist()))
        acc["values_alone_gzip"] += _gzip_chunks(b"".join(x for x in values.to_pylist()))
        acc["distinct_values"] += len(pc.unique(values))
        acc["value_repeats_within_gzip_window"] += _repeats_within_window(values, uncompressed / max(1, len(values)))
    e = max(1, acc["entries"])
    per = {k: round(acc[k] / e, 2) for k in ("file_bytes", "data_blocks_on_disk", "meta_blocks_on_disk",
                                              "load_on_open_and_trailer", "uncompressed_data", "key_bytes",
                                              "value_bytes", "keys_alone_gzip", "values_alone_gzip")}
    per["cell_framing"] = round((acc["uncompressed_data"] - acc["key_bytes"] - acc["value_bytes"]) / e, 2)
    acc["per_entry"] = per
    acc["data_compression_ratio"] = round(acc["uncompressed_data"] / max(1, acc["data_blocks_on_disk"]), 2)
    acc["share_of_values_repeating_within_gzip_window"] = round(acc["value_repeats_within_gzip_window"] / e, 3)
    return acc


def size_tradeoffs(table: Table, probe_keys: pa.Array) -> list[dict[str, Any]]:
    """The index's cells re-encoded as base HFiles with other settings: bytes per entry, encode time (all file
    groups), and the time of one batch lookup, in file group 0, of the ``probe_keys`` routed there (best of 3).
    The first setting is what :func:`pyhudi.metadata.record_index.base_hfile` writes."""
    import zlib

    from pyhudi.hfile import HFileReader, hfile_bytes
    from pyhudi.io import bloom, compression
    from pyhudi.io.compression import CODEC_GZ
    from pyhudi.metadata.record_index import BASE_GZIP_LEVEL, file_groups_of, record_index_lookup
    from pyhudi.metadata.records import writer_schema_json

    lk = record_index_lookup(table.storage, table.base_path, table.timeline(), table.config)
    assert lk is not None
    groups = []
    on_storage = 0
    for base, _ in lk.slices:
        if base is None:
            continue
        with HFileReader.open(table.storage, base) as h:
            cells = h.read_all()
            on_storage += h.file_size
        groups.append((cells.column("key").combine_chunks(), cells.column("value").combine_chunks()))
    entries = sum(len(k) for k, _ in groups)
    schema = writer_schema_json().encode()
    probe = probe_keys.cast(pa.string())

    def encode(keys: pa.Array, values: pa.Array, block_size: int, level: int, with_bloom: bool = True) -> bytes:
        bf = bloom.BloomFilter.create(10000)
        if with_bloom and len(keys):
            bf.add_many(keys.cast(pa.string()))
        data, _ = hfile_bytes(keys, values, codec=CODEC_GZ, file_info={"schema": schema},
                              bloom_filter=bf if with_bloom else None, block_size=block_size, gzip_level=level)
        return data

    sample = probe.filter(pa.array(file_groups_of(probe, lk.num_file_groups) == 0))  # the keys a tag sends to group 0

    def lookup_ms(data: bytes) -> float:
        h = HFileReader.from_bytes(data)
        best = []
        for _ in range(3):
            t0 = time.perf_counter()
            h.lookup(sample)
            best.append(time.perf_counter() - t0)
        return round(min(best) * 1000, 1)

    mib = 1 << 20
    cur = BASE_GZIP_LEVEL
    settings: list[tuple[str, int, int, str | None, bool]] = [  # label, block size, ISA-L level, zlib, bloom
        (f"written: GZ at ISA-L level {cur}, 1 MiB blocks", mib, cur, None, True),
        ("ISA-L level 0", mib, 0, None, True),
        ("ISA-L level 1 (the default of other HFiles)", mib, 1, None, True),
        ("ISA-L level 2", mib, 2, None, True),
        ("ISA-L level 3", mib, 3, None, True),
        ("zlib level 6 (Java's default deflater level)", mib, cur, "6", True),
        ("zlib level 9", mib, cur, "9", True),
        ("64 KiB blocks", 64 << 10, cur, None, True),
        ("256 KiB blocks", 256 << 10, cur, None, True),
        ("4 MiB blocks", 4 << 20, cur, None, True),
        ("without the bloomFilter meta block (not Hudi's layout; for scale only)", mib, cur, None, False),
    ]
    saved_compress = compression.compress
    out: list[dict[str, Any]] = []
    try:
        for label, block_size, level, zl, with_bloom in settings:
            if zl is not None:

                def zcompress(codec: int, data: Any, level: int | None = None, _zl: int = int(zl)) -> bytes:
                    if codec != CODEC_GZ:
                        return saved_compress(codec, data, level)
                    c = zlib.compressobj(_zl, zlib.DEFLATED, 31)
                    return c.compress(bytes(data)) + c.flush()

                _patch_block_compress(zcompress)
            else:
                _patch_block_compress(saved_compress)
            t0 = time.perf_counter()
            sizes = [len(encode(k, v, block_size, level, with_bloom)) for k, v in groups]
            write_s = time.perf_counter() - t0
            first = encode(groups[0][0], groups[0][1], block_size, level, with_bloom)
            out.append({
                "setting": label,
                "bytes": sum(sizes),
                "bytes_per_entry": round(sum(sizes) / max(1, entries), 2),
                "encode_s": round(write_s, 2),
                "lookup_ms_one_group": lookup_ms(first),
            })
    finally:
        _patch_block_compress(saved_compress)
    # (a few bytes apart at most: the file-info block holds the creation time and is compressed too)
    out[0]["minus_files_on_storage"] = out[0]["bytes"] - on_storage
    # the floor under any value encoding: every key given the same value (keys + framing + overheads only)
    t0 = time.perf_counter()
    sizes = [len(encode(k, pa.array([v[0].as_py()] * len(v), pa.binary()) if len(v) else v, mib, cur))
             for k, v in groups]
    out.append({
        "setting": "floor: every value identical (keys, framing, bloom and index only; not a usable index)",
        "bytes": sum(sizes),
        "bytes_per_entry": round(sum(sizes) / max(1, entries), 2),
        "encode_s": round(time.perf_counter() - t0, 2),
        "lookup_ms_one_group": None,
    })
    return out


def _patch_block_compress(fn: Callable[..., bytes]) -> None:
    from pyhudi.hfile import block

    block.compress = fn


# -- (c) lookup model ------------------------------------------------------------------------------------------
def lookup_model(tables: dict[int, Table], keys: pa.Array, ms: Sequence[int], repeat: int,
                 rng: np.random.Generator) -> dict[str, Any]:
    """Per-file-group task times of ``RecordIndexLookup.lookup_group`` for M present keys over N file groups;
    least-squares fit of ``t = K + c * keys_in_task`` over the mean task time of every (M, N)."""
    from pyhudi.metadata.record_index import file_groups_of, record_index_lookup

    points = []
    for n, table in sorted(tables.items()):
        lk = record_index_lookup(table.storage, table.base_path, table.timeline(), table.config)
        if lk is None or lk.num_file_groups != n:
            raise AssertionError(f"{table.base_path}: expected a record index of {n} file groups, found "
                                 f"{None if lk is None else lk.num_file_groups}")
        for m in ms:
            probe = keys.take(pa.array(rng.choice(len(keys), size=min(m, len(keys)), replace=False)))
            fgs = file_groups_of(probe, n)
            per_group = [(g, probe.filter(pa.array(fgs == g))) for g in range(n)]
            blocks = _blocks_touched(lk, per_group)
            task_runs = []  # per repeat: the time of each group's task
            found = 0
            for _ in range(repeat):
                times = []
                found = 0
                for g, ks in per_group:
                    t0 = time.perf_counter()
                    res = lk.lookup_group(g, ks)
                    times.append(time.perf_counter() - t0)
                    found += res.num_rows
                task_runs.append(times)
            if found != len(probe):
                raise AssertionError(f"N={n}, M={m}: found {found} of {len(probe)} present keys")
            # per group: the median over the repeats; then the mean and the slowest over the groups
            med = np.median(np.array(task_runs), axis=0)
            points.append({
                "N": n, "M": m, "keys_per_task": round(m / n, 1),
                "task_ms_mean": round(float(med.mean()) * 1000, 2),
                "task_ms_max": round(float(med.max()) * 1000, 2),
                "sequential_ms": round(float(med.sum()) * 1000, 1),
                "entries_per_file_group": round(len(keys) / n),
                "blocks_per_task": round(float(np.mean(blocks)), 1),
            })
    x = np.array([p["keys_per_task"] for p in points], float)
    y = np.array([p["task_ms_mean"] for p in points], float)
    a = np.vstack([np.ones_like(x), x]).T
    (k, c), *_ = np.linalg.lstsq(a, y, rcond=None)
    pred = k + c * x
    for p, yhat in zip(points, pred, strict=True):
        p["fit_ms"] = round(float(yhat), 2)
        p["residual_ms"] = round(float(p["task_ms_mean"] - yhat), 2)
    ss_res = float(((y - pred) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    # the same times with the data blocks a task decompresses as a second term
    b = np.array([p["blocks_per_task"] for p in points], float)
    a2 = np.vstack([np.ones_like(x), x, b]).T
    (k2, c2, cb), *_ = np.linalg.lstsq(a2, y, rcond=None)
    pred2 = a2 @ np.array([k2, c2, cb])
    for p, yhat in zip(points, pred2, strict=True):
        p["fit2_ms"] = round(float(yhat), 2)
        p["residual2_ms"] = round(float(p["task_ms_mean"] - yhat), 2)
    ss_res2 = float(((y - pred2) ** 2).sum())
    return {
        "model": "task_ms = K + c * (M/N)",
        "K_ms": round(float(k), 2),
        "c_ms_per_key": round(float(c), 5),
        "c_us_per_key": round(float(c) * 1000, 2),
        "r2": round(1 - ss_res / ss_tot, 4) if ss_tot else None,
        "rmse_ms": round((ss_res / len(points)) ** 0.5, 2),
        "block_model": {
            "model": "task_ms = K + c * (M/N) + d * blocks_decompressed",
            "K_ms": round(float(k2), 2),
            "c_us_per_key": round(float(c2) * 1000, 2),
            "d_ms_per_block": round(float(cb), 3),
            "r2": round(1 - ss_res2 / ss_tot, 4) if ss_tot else None,
            "rmse_ms": round((ss_res2 / len(points)) ** 0.5, 2),
        },
        "points": points,
    }


def _blocks_touched(lk: Any, per_group: list[tuple[int, pa.Array]]) -> list[int]:
    """Per file group: how many data blocks of its base HFile the given keys fall into."""
    import bisect

    from pyhudi.hfile import HFileReader

    out: list[int] = []
    for g, ks in per_group:
        base = lk.slices[g][0]
        if base is None or not len(ks):
            out.append(0)
            continue
        with HFileReader.open(lk.storage, base) as h:
            firsts = [e.key for e in h.block_index]
        hit = {bisect.bisect_right(firsts, k.encode()) - 1 for k in ks.to_pylist()}
        out.append(len(hit - {-1}))
    return out


# -- the run ---------------------------------------------------------------------------------------------------
def run(rows: int = DEFAULT_ROWS, *, upsert_rows_n: int = UPSERT_ROWS, repeat: int = 3,
        lookup_keys: Sequence[int] = LOOKUP_KEYS, file_groups: Sequence[int] = LOOKUP_FILE_GROUPS,
        lookup_repeat: int = 3, seed: int = 7, work_dir: str | None = None,
        log: Callable[[str], None] | None = None) -> dict[str, Any]:
    from pyhudi.spark.session import get_spark
    from pyhudi.table.table import Table

    say = log or (lambda _m: None)
    rng = np.random.default_rng(seed)
    spark = get_spark()
    res: dict[str, Any] = {"rows": rows, "upsert_rows": upsert_rows_n, "repeat": repeat,
                           "spark_master": spark.sparkContext.master,
                           "spark_default_parallelism": spark.sparkContext.defaultParallelism, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="pyhudi-rli-bench-", dir=work_dir) as d:
        say(f"generating {rows} rows")
        keys = random_uuid_keys(rows, rng)
        dts = day_partitions(rng.integers(0, 365, rows))
        data = rows_table(keys, dts, 1, rng)
        res["row_bytes_in_arrow"] = round(data.nbytes / rows, 1)
        write_input(data, os.path.join(d, "input"))
        del data
        write_input(upsert_rows(keys, dts, upsert_rows_n, rng), os.path.join(d, "upsert"), files=2)

        plain = os.path.join(d, "plain")
        say("bulk_insert")
        t0 = time.perf_counter()
        table = Table.create(plain, rows_table(keys[:1], dts[:1], 0, rng).schema, CREATE_OPTIONS)
        r = table.write(spark.read.parquet(os.path.join(d, "input")), "bulk_insert", CREATE_OPTIONS)
        if "record_index" in Table.open(plain).config.metadata_partitions:
            raise AssertionError("the bulk_insert should not have created a record index")
        res["bulk_insert"] = {"s": round(time.perf_counter() - t0, 2), "timings_s": r.to_dict()["timings_s"],
                              "files": r.files_written, "partitions": r.partitions}
        base_bytes = sum(f.size for f in Table.open(plain).view().latest_base_files())
        res["bulk_insert"]["base_file_bytes"] = base_bytes

        indexed = os.path.join(d, "indexed")
        clone_table(plain, indexed)
        say("building the record index (estimated N)")
        build_s, n = _timed(lambda: Table.open(indexed).build_record_index())
        res["build_record_index"] = {"file_groups": n, "s": round(build_s, 2)}

        say("tagging runs")
        load_before = os.getloadavg()  # the machine's other jobs share its cores: say how busy it was
        res["tag"] = tag_runs(spark, indexed, d, os.path.join(d, "upsert"), repeat)
        res["tag"]["load_average_1_5_15_min"] = {"before": [round(x, 2) for x in load_before],
                                                 "after": [round(x, 2) for x in os.getloadavg()]}
        say("tag stage profile")
        res["tag"]["profile"] = tag_profile(spark, indexed, os.path.join(d, "upsert"), repeat)

        say("index size")
        itable = Table.open(indexed)
        stats = itable.record_index_stats()
        res["index_size"] = {**stats, "target_bytes_per_entry": 32,
                             "profile": size_profile(itable)}
        probe = pq.read_table(os.path.join(d, "upsert")).column("id").combine_chunks()
        res["index_size"]["tradeoffs"] = size_tradeoffs(itable, probe)

        say("lookup model")
        tables = {n: itable}
        for fg in file_groups:
            if fg == n:
                continue
            dst = os.path.join(d, f"n{fg}")
            clone_table(plain, dst)
            t0 = time.perf_counter()
            Table.open(dst).build_record_index(num_file_groups=fg)
            bs = time.perf_counter() - t0
            res["build_record_index"].setdefault("by_file_groups_s", {})[str(fg)] = round(bs, 2)
            tables[fg] = Table.open(dst)
        res["lookup_model"] = lookup_model(tables, keys, lookup_keys, lookup_repeat, rng)
        res["lookup_model"]["note"] = (
            "RecordIndexLookup.lookup_group per file group on the driver (one process, files in the page "
            "cache), median of the repeats per group; keys present in the index"
        )
    ri = res["tag"]["RECORD_INDEX"]["tag_s_median"]
    gs = res["tag"]["GLOBAL_SIMPLE"]["tag_s_median"]
    res["summary"] = {
        "tag_s_record_index": ri,
        "tag_s_global_simple": gs,
        "tag_ratio": res["tag"]["tag_ratio_global_simple_over_record_index"],
        "record_index_5x_faster": gs >= 5 * ri,
        "tag_dry_run_s": {v: res["tag"]["profile"][v]["s_median"] for v in ("none", *INDEXES)},
        "tag_ratio_above_no_index_floor": res["tag"]["profile"]["ratio_above_floor"],
        "bytes_per_entry": res["index_size"]["bytes_per_entry"],
        "bytes_per_entry_within_32": (res["index_size"]["bytes_per_entry"] or 0) <= 32,
        "lookup_K_ms": res["lookup_model"]["K_ms"],
        "lookup_c_us_per_key": res["lookup_model"]["c_us_per_key"],
    }
    return res

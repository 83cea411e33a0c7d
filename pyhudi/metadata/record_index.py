"""The record index (``record_index`` metadata partition): record key -> (partition, file id, instant).

N file groups ``record-index-0000-0`` ...; a key lives in file group ``abs(abs(String.hashCode(key)) % N)``.
Cell values are ``HoodieMetadataRecord`` datums (type 5) with the key blanked, so every key written to the same
file by the same commit has the same value bytes: encoding and decoding work on the distinct values only.

Lookups are vectorised per file group: one batch lookup in the base HFile, one per valid log block (HFile data
blocks and delete blocks, in log order, later wins), and the found values decoded once per distinct value.
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.errors import ConfigError
from pyhudi.hfile import HFileReader, hfile_bytes
from pyhudi.io.arrow import to_binary_array
from pyhudi.io.compression import CODEC_GZ
from pyhudi.io.logfile import BlockType, DeleteRecord, HeaderKey, delete_block, encode_block
from pyhudi.io.storage import Storage
from pyhudi.metadata.reader import RECORD_INDEX, BlockFilter, MetadataTableReader, valid_log_blocks
from pyhudi.metadata.records import (
    decode_value,
    encode_value,
    record_index_file_group,
    record_index_record,
    writer_schema_json,
)

ENABLE = "hoodie.metadata.record.index.enable"
MIN_FILE_GROUPS = "hoodie.metadata.record.index.min.filegroup.count"
MAX_FILE_GROUPS = "hoodie.metadata.record.index.max.filegroup.count"
MAX_FILE_GROUP_SIZE = "hoodie.metadata.record.index.max.filegroup.size"
GROWTH_FACTOR = "hoodie.metadata.record.index.growth.factor"
DEFAULTS = {MIN_FILE_GROUPS: "10", MAX_FILE_GROUPS: "10000", MAX_FILE_GROUP_SIZE: str(1 << 30), GROWTH_FACTOR: "2.0"}
ASSUMED_BYTES_PER_ENTRY = 48  # Hudi's estimate when sizing the partition

LOCATION_SCHEMA = pa.schema(
    [("key", pa.string()), ("partition", pa.string()), ("file_id", pa.string()), ("instant_ms", pa.int64())]
)


def estimate_file_groups(num_records: int, options: Mapping[str, str] | None = None) -> int:
    """Hudi's estimate of the record index's file group count for ``num_records`` keys."""
    o = {**DEFAULTS, **{k: str(v) for k, v in (options or {}).items() if k in DEFAULTS}}
    try:
        lo, hi = int(o[MIN_FILE_GROUPS]), int(o[MAX_FILE_GROUPS])
        max_size, growth = int(o[MAX_FILE_GROUP_SIZE]), float(o[GROWTH_FACTOR])
    except ValueError as e:
        raise ConfigError(f"record index sizing option: {e}") from None
    if lo < 1 or hi < lo or max_size < ASSUMED_BYTES_PER_ENTRY or growth <= 0:
        raise ConfigError(f"record index sizing options out of range: {MIN_FILE_GROUPS}={lo}, {MAX_FILE_GROUPS}={hi}")
    if lo == hi:
        return lo
    n = math.ceil(num_records * growth / (max_size / ASSUMED_BYTES_PER_ENTRY))
    return max(lo, min(hi, n))


def file_group_id(index: int) -> str:
    return f"record-index-{index:04d}-0"


def instant_to_ms(instant: str) -> int:
    """Epoch milliseconds of an instant time (``yyyyMMddHHmmssSSS``, UTC)."""
    dt = datetime.strptime(instant[:14], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    return int(dt.timestamp()) * 1000 + int(instant[14:17] or 0)


# -- key -> file group ---------------------------------------------------------------------------------------
def file_groups_of(keys: pa.Array | pa.ChunkedArray, n: int) -> np.ndarray:
    """Java ``String.hashCode`` routing of every key, vectorised for ASCII keys (by key length)."""
    arr = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    if pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type):
        arr = arr.cast(pa.string())
    out = np.empty(len(arr), np.int64)
    if len(arr) == 0:
        return out
    ascii_mask = pc.fill_null(pc.string_is_ascii(arr), False).to_numpy(zero_copy_only=False)
    if not ascii_mask.all():
        for i in np.flatnonzero(~ascii_mask):
            out[i] = record_index_file_group(arr[int(i)].as_py(), n)
    idx = np.flatnonzero(ascii_mask)
    if len(idx):
        sub = arr.take(pa.array(idx))
        data, offsets = _buffers(sub)
        lens = np.diff(offsets)
        for ln in np.unique(lens):
            rows = np.flatnonzero(lens == ln)
            starts = offsets[rows]
            h = np.zeros(len(rows), np.uint32)
            for j in range(int(ln)):
                h = h * np.uint32(31) + data[starts + j].astype(np.uint32)
            hs = h.view(np.int32).astype(np.int64)
            a = np.abs(hs)  # Math.abs(Integer.MIN_VALUE) stays negative in Java
            a = np.where(hs == -(1 << 31), hs, a)
            r = np.fmod(a, n)  # Java remainder keeps the dividend's sign
            out[idx[rows]] = np.abs(r)
    return out


def _buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    from pyhudi.io.arrow import binary_buffers

    return binary_buffers(to_binary_array(arr))


# -- values --------------------------------------------------------------------------------------------------
def encode_locations(partitions: pa.Array, file_ids: pa.Array, instants_ms: pa.Array) -> pa.Array:
    """Cell values for parallel (partition, file id, instant ms) arrays: each distinct location encoded once."""
    n = len(partitions)
    if n == 0:
        return pa.array([], pa.binary())
    combo = pa.table({"p": partitions, "f": file_ids, "t": instants_ms})
    uniq = combo.group_by(["p", "f", "t"]).aggregate([])
    values = [
        encode_value(record_index_record("", p or "", f, int(t)))
        for p, f, t in zip(uniq.column("p").to_pylist(), uniq.column("f").to_pylist(), uniq.column("t").to_pylist(), strict=True)
    ]
    keyed = pa.table({"p": uniq.column("p"), "f": uniq.column("f"), "t": uniq.column("t"), "__i": pa.array(range(len(values)))})
    joined = combo.append_column("__row", pa.array(np.arange(n))).join(keyed, ["p", "f", "t"]).sort_by("__row")
    return pa.array(values, pa.binary()).take(joined.column("__i"))


def decode_locations(values: pa.Array, schema_json: str | None = None) -> pa.Table:
    """(partition, file_id, instant_ms) of record-index cell values, decoding each distinct value once."""
    if len(values) == 0:
        return pa.table({"partition": pa.array([], pa.string()), "file_id": pa.array([], pa.string()),
                         "instant_ms": pa.array([], pa.int64())})
    enc = pc.dictionary_encode(values).combine_chunks() if isinstance(values, pa.ChunkedArray) else pc.dictionary_encode(values)
    parts, fids, times = [], [], []
    for v in enc.dictionary.to_pylist():
        info = decode_value("", v, schema_json).record_index
        assert info is not None
        parts.append(info.partition)
        fids.append(info.file_id)
        times.append(info.instant_time_ms)
    idx = enc.indices
    return pa.table(
        {
            "partition": pa.array(parts, pa.string()).take(idx),
            "file_id": pa.array(fids, pa.string()).take(idx),
            "instant_ms": pa.array(times, pa.int64()).take(idx),
        }
    )


def sorted_cells(keys: pa.Array, values: pa.Array) -> tuple[pa.Array, pa.Array]:
    order = pc.sort_indices(to_binary_array(keys))
    return to_binary_array(keys).take(order), values.take(order)


def log_block_bytes(instant: str, keys: pa.Array, values: pa.Array, deleted: Sequence[str] = ()) -> bytes:
    """The log file content a commit appends to one record-index file group: an HFile data block of new
    mappings and, if any, a delete block of removed keys."""
    out = b""
    schema = writer_schema_json()
    if len(keys):
        k, v = sorted_cells(keys, values)
        content, _ = hfile_bytes(k, v, codec=CODEC_GZ, file_info={"schema": schema.encode()})
        header = [(HeaderKey.INSTANT_TIME, instant), (HeaderKey.SCHEMA, schema)]
        out += encode_block(BlockType.HFILE_DATA, header, content)
    if deleted:
        out += delete_block([DeleteRecord(k, RECORD_INDEX, 0) for k in sorted(deleted)], instant)
    return out


# -- lookups -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RecordIndexLookup:
    """Everything needed to look keys up in the record index, picklable into Spark tasks."""

    storage: Storage
    mdt_path: str
    slices: tuple[tuple[str | None, tuple[str, ...]], ...]  # per file group: base file path, log file paths
    block_filter: BlockFilter

    @staticmethod
    def from_reader(reader: MetadataTableReader) -> RecordIndexLookup:
        slices = []
        for fs in reader.file_slices(RECORD_INDEX):
            base = posixpath.join(reader.mdt_path, fs.base_file.relative_path) if fs.base_file else None
            logs = tuple(posixpath.join(reader.mdt_path, lf.relative_path) for lf in fs.log_files)
            slices.append((base, logs))
        return RecordIndexLookup(reader.storage, reader.mdt_path, tuple(slices), reader.block_filter)

    @property
    def num_file_groups(self) -> int:
        return len(self.slices)

    def lookup_group(self, fg: int, keys: pa.Array) -> pa.Table:
        """Locations of the ``keys`` (all routed to file group ``fg``) that the index holds."""
        keys = to_binary_array(keys)
        n = len(keys)
        values: pa.Array = pa.nulls(n, pa.binary())
        schema: str | None = None
        base, logs = self.slices[fg]
        if base is not None and n:
            with HFileReader.open(self.storage, base) as h:
                values = h.lookup(keys).column("value").combine_chunks()
                sj = h.file_info.get("schema")
                schema = sj.decode() if sj else None
        for b in valid_log_blocks(self.storage, list(logs), self.block_filter) if n else []:
            if b.block_type == BlockType.HFILE_DATA:
                found = b.hfile().lookup(keys).column("value").combine_chunks()
                values = pc.if_else(pc.is_valid(found), found, values)
                schema = schema or b.schema
            elif b.block_type == BlockType.DELETE:
                gone = pa.array([d.record_key for d in b.delete_records() if d.record_key is not None], pa.string())
                if len(gone):
                    hit = pc.is_in(keys.cast(pa.string()), value_set=gone)
                    values = pc.if_else(hit, pa.scalar(None, pa.binary()), values)
        present = pc.is_valid(values)
        found_keys = keys.filter(present).cast(pa.string())
        locs = decode_locations(values.filter(present), schema)
        return pa.table([found_keys, *locs.columns], schema=LOCATION_SCHEMA)

    def lookup(self, keys: Sequence[str] | pa.Array) -> pa.Table:
        """Driver-side lookup of any keys: routes them to their file groups, one batch per group."""
        arr = to_binary_array(keys).cast(pa.string())
        if not self.slices or len(arr) == 0:
            return LOCATION_SCHEMA.empty_table()
        fgs = file_groups_of(arr, self.num_file_groups)
        parts = [self.lookup_group(int(g), arr.filter(pa.array(fgs == g))) for g in np.unique(fgs)]
        return pa.concat_tables(parts)

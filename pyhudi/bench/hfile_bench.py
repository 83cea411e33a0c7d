"""HFile benchmark: write N record-index-like entries, batch-look-up M present keys, full scan."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.hfile import HFileReader, write_hfile
from pyhudi.io.compression import CODEC_GZ
from pyhudi.io.storage import Storage

# The shape of a record-index payload: the fields Hudi stores per key (partition, fileId as two longs and a
# file index, instant as epoch millis, encoding). Only a few hundred distinct values exist in a real index:
# every key of one file shares one.
_PAYLOAD_SCHEMA = fastavro.parse_schema(
    {
        "type": "record",
        "name": "RecordIndexLike",
        "fields": [
            {"name": "key", "type": "string"},
            {"name": "type", "type": "int"},
            {"name": "unused", "type": ["null", "string"]},
            {"name": "partitionName", "type": "string"},
            {"name": "fileIdHighBits", "type": "long"},
            {"name": "fileIdLowBits", "type": "long"},
            {"name": "fileIndex", "type": "int"},
            {"name": "instantTime", "type": "long"},
            {"name": "fileIdEncoding", "type": "int"},
            {"name": "fileId", "type": ["null", "string"]},
            {"name": "position", "type": ["null", "long"]},
        ],
    }
)


def random_uuid_keys(n: int, rng: np.random.Generator) -> pa.Array:
    """n random version-4 UUID strings, as an Arrow string array."""
    raw = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40
    raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80
    hexd = np.frombuffer(b"0123456789abcdef", np.uint8)
    nib = np.empty((n, 32), np.uint8)
    nib[:, 0::2] = hexd[raw >> 4]
    nib[:, 1::2] = hexd[raw & 0x0F]
    out = np.full((n, 36), ord("-"), np.uint8)
    for dst, src in ((0, 0), (9, 8), (14, 12), (19, 16), (24, 20)):
        width = {0: 8, 9: 4, 14: 4, 19: 4, 24: 12}[dst]
        out[:, dst : dst + width] = nib[:, src : src + width]
    offsets = np.arange(0, 36 * (n + 1), 36, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(out.tobytes())])


def record_index_like_values(n: int, rng: np.random.Generator, distinct: int = 200) -> pa.Array:
    import io

    pool = []
    for i in range(distinct):
        buf = io.BytesIO()
        hi, lo = (int(x) for x in rng.integers(-(2**63), 2**63 - 1, size=2))
        day = 1 + i % 28
        fastavro.schemaless_writer(
            buf,
            _PAYLOAD_SCHEMA,
            {
                "key": "",
                "type": 5,
                "unused": None,
                "partitionName": f"2026/{1 + i % 12:02d}/{day:02d}",
                "fileIdHighBits": hi,
                "fileIdLowBits": lo,
                "fileIndex": 0,
                "instantTime": 1_790_000_000_000 + i * 1000,
                "fileIdEncoding": 0,
                "fileId": None,
                "position": None,
            },
        )
        pool.append(buf.getvalue())
    return pa.array(pool, pa.binary()).take(pa.array(rng.integers(0, distinct, size=n)))


def run(entries: int, lookups: int, *, block_size: int | None = None, seed: int = 42, repeat: int = 5) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    keys = random_uuid_keys(entries, rng)
    keys = keys.take(pc.sort_indices(keys))
    values = record_index_like_values(entries, rng)
    kw: dict[str, Any] = {"codec": CODEC_GZ}
    if block_size:
        kw["block_size"] = block_size
    storage = Storage.from_uri(tempfile.gettempdir())[0]
    with tempfile.TemporaryDirectory(prefix="pyhudi-bench-") as d:
        path = os.path.join(d, "bench.hfile")
        # warm the compiled loops so that compilation is not measured
        write_hfile(storage, os.path.join(d, "warm.hfile"), keys[:10], values[:10], **kw)
        HFileReader.open(storage, os.path.join(d, "warm.hfile")).lookup(keys[:3])
        t0 = time.perf_counter()
        write_hfile(storage, path, keys, values, **kw)
        write_s = time.perf_counter() - t0
        file_bytes = storage.status(path).size
        probe = keys.take(pa.array(rng.integers(0, entries, size=lookups))) if entries else keys
        t0 = time.perf_counter()
        reader = HFileReader.open(storage, path)
        open_ms = (time.perf_counter() - t0) * 1000
        runs = []
        found = 0
        for _ in range(max(1, repeat)):
            t0 = time.perf_counter()
            res = reader.lookup(probe)
            runs.append((time.perf_counter() - t0) * 1000)
            found = len(res) - res.column("value").null_count
        t0 = time.perf_counter()
        scanned = sum(b.num_rows for b in reader.scan())
        scan_s = time.perf_counter() - t0
        reader.close()
    if found != len(probe):
        raise AssertionError(f"lookup found {found} of {len(probe)} present keys")
    if scanned != entries:
        raise AssertionError(f"scan returned {scanned} entries, wrote {entries}")
    return {
        "entries": entries,
        "lookups": lookups,
        "write_s": round(write_s, 3),
        "open_ms": round(open_ms, 2),
        "lookup_ms": round(statistics.median(runs), 1),
        "lookup_ms_runs": [round(r, 1) for r in runs],
        "scan_entries_per_s": round(entries / scan_s) if scan_s > 0 else None,
        "file_bytes": file_bytes,
        "bytes_per_entry": round(file_bytes / entries, 2) if entries else None,
        "codec": "gz",
        "block_size": kw.get("block_size", 1 << 20),
        "cpus": os.cpu_count(),
    }

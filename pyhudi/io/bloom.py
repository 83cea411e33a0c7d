"""Hudi's bloom filters of record keys, bit-compatible with Java Hudi (``org.apache.hudi.common.bloom``).

Hudi keeps a bloom filter of the record keys of every base file: in a parquet file's footer key-value metadata
(:data:`PARQUET_BLOOM_FILTER_KEY`, type in :data:`PARQUET_BLOOM_FILTER_TYPE_CODE_KEY`) and in the ``bloomFilter``
meta block of a metadata-table HFile (type in the file-info entry ``bloomFilterTypeCode``). The filter is
Hadoop's ``org.apache.hadoop.util.bloom.BloomFilter`` (ported into Hudi as ``InternalBloomFilter``):

* a key is the UTF-8 bytes of the record key (empty keys are rejected, as in Java);
* its ``nbHash`` bit positions are ``abs(h_i % vectorSize)`` with ``h_i = murmur2(key, seed=h_{i-1})``,
  ``h_{-1} = 0``, all in Java ``int`` arithmetic (Hadoop's MurmurHash 2: little-endian 4-byte words, the 1-3
  tail bytes *sign-extended*);
* the serialized form is standard Base64 (with padding) of the big-endian Writable form. ``SIMPLE``:
  ``int32 version (-1) | int32 nbHash | int8 hashType (1 = murmur) | int32 vectorSize | ceil(vectorSize/8)
  bytes``, bit ``i`` being ``byte[i >> 3] & (1 << (i & 7))`` (little-endian bit order, unused high bits of the
  last byte zero). ``DYNAMIC_V0`` (``InternalDynamicBloomFilter``): the same 13-byte header, then ``int32 nr``
  (the rows' capacity, = num_entries) ``| int32 currentNbRecord | int32 rows``, then each row as a full
  ``SIMPLE`` body (header and bits).

A ``DYNAMIC_V0`` filter starts with one row and appends a row whenever the current one holds ``nr`` keys, while
``rows * nr < max_entries``; after that, keys go to row 0 (twice) and then round-robin over the rows. The bound
``max_entries`` is not serialized: a deserialized dynamic filter never grows (Java leaves it 0), and neither does
this one. A key might be contained when every one of its bits is set in at least one row.

Sizing (``BloomFilterUtils``): ``bits = ceil(n * -ln(fpp) / ln(2)^2)``, ``hashes = ceil(ln(2) * bits / n)``;
with Hudi's defaults (60000 entries, fpp 1e-9) that is 2587966 bits and 30 hashes.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import math
import os
import struct
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import ClassVar, TypeAlias

import numba as nb
import numpy as np
import pyarrow as pa

from pyhudi.config import BLOOM_DYNAMIC_MAX_ENTRIES, BLOOM_FILTER_TYPE, BLOOM_FPP, BLOOM_NUM_ENTRIES
from pyhudi.errors import ConfigError, CorruptFileError, InvalidInputError, UnsupportedFormatError
from pyhudi.io.arrow import binary_buffers, to_binary_array

# -- names and defaults -------------------------------------------------------------------------------------------
DEFAULT_NUM_ENTRIES = int(str(BLOOM_NUM_ENTRIES.default))
DEFAULT_FPP = float(str(BLOOM_FPP.default))
DEFAULT_DYNAMIC_MAX_ENTRIES = int(str(BLOOM_DYNAMIC_MAX_ENTRIES.default))

TYPE_SIMPLE = "SIMPLE"
TYPE_DYNAMIC_V0 = "DYNAMIC_V0"
DEFAULT_FILTER_TYPE = TYPE_DYNAMIC_V0

PARQUET_BLOOM_FILTER_KEY = "org.apache.hudi.bloomfilter"
PARQUET_LEGACY_BLOOM_FILTER_KEY = "com.uber.hoodie.bloomfilter"
PARQUET_BLOOM_FILTER_TYPE_CODE_KEY = "hoodie_bloom_filter_type_code"
PARQUET_MIN_RECORD_KEY = "hoodie_min_record_key"
PARQUET_MAX_RECORD_KEY = "hoodie_max_record_key"
HFILE_BLOOM_META_BLOCK = "bloomFilter"
HFILE_BLOOM_TYPE_CODE_KEY = "bloomFilterTypeCode"

JENKINS_HASH = 0
MURMUR_HASH = 1
_VERSION = -1
_HEADER = struct.Struct(">iibi")  # version, nbHash, hashType, vectorSize
_DYN_HEADER = struct.Struct(">iii")  # nr, currentNbRecord, number of rows
_INT_MAX = 2**31 - 1
_PARALLEL_MIN = 262144  # keys per call above which membership tests are split over threads
_LN2 = math.log(2)


def bit_size(num_entries: int, fpp: float) -> int:
    """Bits of one filter row for ``num_entries`` keys at false-positive rate ``fpp`` (Hudi's formula)."""
    if num_entries <= 0:
        raise ConfigError(f"{BLOOM_NUM_ENTRIES} must be > 0, got {num_entries}")
    if not 0.0 < fpp < 1.0:
        raise ConfigError(f"{BLOOM_FPP} must be in (0, 1), got {fpp}")
    bits = math.ceil(num_entries * (-math.log(fpp) / (_LN2 * _LN2)))
    if bits > _INT_MAX:
        raise ConfigError(
            f"bloom filter of {num_entries} entries at fpp {fpp} needs {bits} bits, over 2^31-1"
        )
    return bits


def num_hashes(bits: int, num_entries: int) -> int:
    """Number of hash functions for a row of ``bits`` bits holding ``num_entries`` keys (Hudi's formula)."""
    return math.ceil(_LN2 * bits / num_entries)


# -- compiled kernels -----------------------------------------------------------------------------------------------
_jit = nb.njit(cache=True, nogil=True)
_M32 = 0xFFFFFFFF
_MUL = 0x5BD1E995


@_jit
def _sext(b):  # pragma: no cover - compiled
    """A byte as Java's sign-extended int, as an unsigned 32-bit pattern."""
    v = np.int64(b)
    return v | 0xFFFFFF00 if v >= 128 else v


@_jit
def _mix_words(data, start, length, ks):  # pragma: no cover - compiled
    """The seed-independent part of Hadoop's MurmurHash 2 of data[start:start+length]: each 4-byte word mixed
    (into ``ks``) and the tail bytes' xor. A key's chained hashes differ only in their seed, so a filter mixes
    its words once and runs :func:`_murmur_mixed` per hash."""
    n = length >> 2
    for i in range(n):
        p = start + (i << 2)
        k = np.int64(data[p]) | (np.int64(data[p + 1]) << 8) | (np.int64(data[p + 2]) << 16)
        k |= np.int64(data[p + 3]) << 24
        k = (k * _MUL) & _M32
        k ^= k >> 24
        ks[i] = (k * _MUL) & _M32
    left = length & 3
    tail = np.int64(0)
    if left != 0:
        end = start + length
        if left >= 3:
            tail ^= (_sext(data[end - 3]) << 16) & _M32
        if left >= 2:
            tail ^= (_sext(data[end - 2]) << 8) & _M32
        tail ^= _sext(data[end - 1])
    return n, tail


@_jit
def _words_buffer(offs):  # pragma: no cover - compiled
    """Room for the mixed words (:func:`_mix_words`) of the longest of the keys ``offs`` delimits."""
    longest = 0
    for i in range(len(offs) - 1):
        longest = max(longest, offs[i + 1] - offs[i])
    return np.empty((longest >> 2) + 1, np.int64)


@_jit
def _murmur_mixed(ks, n, tail, length, seed):  # pragma: no cover - compiled
    """Hadoop's MurmurHash 2 (Hudi's ``MurmurHash.hash``) with ``seed``, from the words :func:`_mix_words` mixed;
    seed and result are 32-bit patterns in int64."""
    h = (seed ^ length) & _M32
    for i in range(n):
        h = ((h * _MUL) & _M32) ^ ks[i]
    if length & 3 != 0:
        h ^= tail
        h = (h * _MUL) & _M32
    h ^= h >> 13
    h = (h * _MUL) & _M32
    h ^= h >> 15
    return h


@_jit
def _position(h, vector_size):  # pragma: no cover - compiled
    """Java's ``Math.abs(h % vectorSize)`` for the int whose bit pattern is h."""
    if h >= 0x80000000:
        h -= 0x100000000
    return abs(h) % vector_size


@_jit
def _set_bit(bits, r, h, vector_size):  # pragma: no cover - compiled
    p = _position(h, vector_size)
    bits[r, p >> 3] |= np.uint8(1 << (p & 7))


@_jit
def _add_keys(data, offs, rows, bits, nb_hash, vector_size):  # pragma: no cover - compiled
    """Set the bits of key i in row rows[i] (row 0 for every key when rows is empty). A key's hashes form one
    chain (each seeded with the one before), a chain of dependent multiplications; four keys' chains are run
    side by side, so that the processor overlaps them (2M keys: 0.96 CPU-s one key at a time)."""
    m = len(offs) - 1
    ks = _words_buffer(offs)
    ka, kb, kc = ks.copy(), ks.copy(), ks.copy()
    has_rows = len(rows) > 0
    i = 0
    while i + 4 <= m:
        s0, s1, s2, s3 = offs[i], offs[i + 1], offs[i + 2], offs[i + 3]
        l0, l1, l2, l3 = s1 - s0, s2 - s1, s3 - s2, offs[i + 4] - s3
        n0, t0 = _mix_words(data, s0, l0, ks)
        n1, t1 = _mix_words(data, s1, l1, ka)
        n2, t2 = _mix_words(data, s2, l2, kb)
        n3, t3 = _mix_words(data, s3, l3, kc)
        r0 = rows[i] if has_rows else 0
        r1 = rows[i + 1] if has_rows else 0
        r2 = rows[i + 2] if has_rows else 0
        r3 = rows[i + 3] if has_rows else 0
        h0 = h1 = h2 = h3 = np.int64(0)
        for _ in range(nb_hash):
            h0 = _murmur_mixed(ks, n0, t0, l0, h0)
            h1 = _murmur_mixed(ka, n1, t1, l1, h1)
            h2 = _murmur_mixed(kb, n2, t2, l2, h2)
            h3 = _murmur_mixed(kc, n3, t3, l3, h3)
            _set_bit(bits, r0, h0, vector_size)
            _set_bit(bits, r1, h1, vector_size)
            _set_bit(bits, r2, h2, vector_size)
            _set_bit(bits, r3, h3, vector_size)
        i += 4
    for j in range(i, m):
        start = offs[j]
        length = offs[j + 1] - start
        r = rows[j] if has_rows else 0
        n, tail = _mix_words(data, start, length, ks)
        h = np.int64(0)
        for _ in range(nb_hash):
            h = _murmur_mixed(ks, n, tail, length, h)
            _set_bit(bits, r, h, vector_size)


@_jit
def _test_keys(data, offs, bits, nb_hash, vector_size, out):  # pragma: no cover - compiled
    """out[i] = whether some row has every bit of key i; hashes are computed lazily and reused across rows."""
    pos = np.empty(nb_hash, np.int64)
    n_rows = bits.shape[0]
    ks = _words_buffer(offs)
    for i in range(len(offs) - 1):
        start = offs[i]
        length = offs[i + 1] - start
        n, tail = _mix_words(data, start, length, ks)
        done = 0
        h = np.int64(0)
        found = False
        for r in range(n_rows):
            hit = True
            for j in range(nb_hash):
                if j == done:
                    h = _murmur_mixed(ks, n, tail, length, h)
                    pos[j] = _position(h, vector_size)
                    done += 1
                p = pos[j]
                if bits[r, p >> 3] & (1 << (p & 7)) == 0:
                    hit = False
                    break
            if hit:
                found = True
                break
        out[i] = found


@_jit
def _assign_rows(n, nr, max_nr, n_rows, cur, reached, idx, out):  # pragma: no cover - compiled
    """Java InternalDynamicBloomFilter.add's choice of row for n keys: returns the new (rows, cur, reached, idx)."""
    for i in range(n):
        if reached:
            out[i] = idx % n_rows
            idx += 1
        elif cur >= nr and n_rows * nr < max_nr:
            n_rows += 1
            cur = 0
            out[i] = n_rows - 1
        elif cur >= nr:
            reached = True
            out[i] = 0
        else:
            out[i] = n_rows - 1
        cur += 1
    return n_rows, cur, reached, idx


# -- the filters ----------------------------------------------------------------------------------------------------
Keys: TypeAlias = Iterable[str | bytes] | pa.Array | pa.ChunkedArray


def _key_buffers(keys: Keys) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(keys, pa.Array | pa.ChunkedArray):
        items = keys if isinstance(keys, list) else list(keys)
        # bytes need not be UTF-8: when not all keys are str, encode the str ones ourselves
        if not all(isinstance(k, str) for k in items):
            keys = pa.array([k.encode("utf-8") if isinstance(k, str) else k for k in items], pa.binary())
        else:
            keys = items
    arr = to_binary_array(keys, "record key")
    data, offs = binary_buffers(arr)
    if len(arr) and bool((offs[1:] == offs[:-1]).any()):
        raise InvalidInputError(f"empty record key at position {int(np.argmax(offs[1:] == offs[:-1]))}")
    return data, offs


class BloomFilter(ABC):
    """A Hudi bloom filter: one or more Hadoop bloom filter rows of ``vector_size`` bits and ``nb_hash`` hashes."""

    type_code: ClassVar[str]

    def __init__(self, vector_size: int, nb_hash: int, hash_type: int = MURMUR_HASH, rows: int = 1) -> None:
        if hash_type != MURMUR_HASH:
            raise UnsupportedFormatError(
                f"bloom filter hash type {hash_type}: only murmur ({MURMUR_HASH}) is supported"
            )
        if not 0 < vector_size <= _INT_MAX or not 0 < nb_hash <= _INT_MAX:
            raise ConfigError(
                f"bloom filter needs vector size and hash count > 0, got {vector_size}, {nb_hash}"
            )
        self.vector_size = vector_size
        self.nb_hash = nb_hash
        self.hash_type = hash_type
        self._bits = np.zeros((rows, (vector_size + 7) // 8), np.uint8)

    # -- construction -----------------------------------------------------------------------------------------------
    @staticmethod
    def create(
        num_entries: int = DEFAULT_NUM_ENTRIES,
        fpp: float = DEFAULT_FPP,
        max_entries: int = DEFAULT_DYNAMIC_MAX_ENTRIES,
        type_code: str = DEFAULT_FILTER_TYPE,
    ) -> BloomFilter:
        """An empty filter sized as Hudi's ``BloomFilterFactory.createBloomFilter`` does."""
        bits = bit_size(num_entries, fpp)
        hashes = num_hashes(bits, num_entries)
        code = type_code.upper()
        if code == TYPE_SIMPLE:
            return SimpleBloomFilter(bits, hashes)
        if code == TYPE_DYNAMIC_V0:
            return DynamicBoundedBloomFilter(bits, hashes, num_entries=num_entries, max_entries=max_entries)
        raise ConfigError(f"{BLOOM_FILTER_TYPE}: unknown bloom filter type {type_code!r}")

    @staticmethod
    def from_config(props: Mapping[str, str]) -> BloomFilter:
        """An empty filter sized from Hudi write options (missing ones take Hudi's defaults)."""
        try:
            return BloomFilter.create(
                int(props.get(BLOOM_NUM_ENTRIES, DEFAULT_NUM_ENTRIES)),
                float(props.get(BLOOM_FPP, DEFAULT_FPP)),
                int(props.get(BLOOM_DYNAMIC_MAX_ENTRIES, DEFAULT_DYNAMIC_MAX_ENTRIES)),
                str(props.get(BLOOM_FILTER_TYPE, DEFAULT_FILTER_TYPE)),
            )
        except ValueError as e:
            raise ConfigError(f"invalid bloom filter option: {e}") from None

    @staticmethod
    def deserialize(
        text: str | bytes, type_code: str | bytes | None = None, *, source: str = "<bloom filter>"
    ) -> BloomFilter:
        """A filter from its serialized (Base64) form; ``type_code`` None means ``SIMPLE``, as in Hudi's readers.

        ``text`` may be the UTF-8 bytes of an HFile meta block. Malformed input raises CorruptFileError naming
        ``source``.
        """
        if isinstance(type_code, bytes):
            type_code = type_code.decode("utf-8", "replace")
        code = (type_code or TYPE_SIMPLE).upper()
        if code not in (TYPE_SIMPLE, TYPE_DYNAMIC_V0):
            raise UnsupportedFormatError(f"{source}: unknown bloom filter type code {code!r}")
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as e:
            raise CorruptFileError(source, f"bloom filter is not valid Base64: {e}") from None
        try:
            if code == TYPE_SIMPLE:
                vsize, nb_hash, hash_type, pos = _read_header(raw, 0)
                f: BloomFilter = SimpleBloomFilter(vsize, nb_hash, hash_type)
                pos = f._read_row(raw, pos, 0)
            else:
                vsize, nb_hash, hash_type, pos = _read_header(raw, 0)
                nr, cur, n_rows = _DYN_HEADER.unpack_from(raw, pos)
                pos += _DYN_HEADER.size
                if n_rows <= 0 or nr <= 0 or cur < 0:
                    raise ValueError(f"bad dynamic filter fields nr={nr}, records={cur}, rows={n_rows}")
                d = DynamicBoundedBloomFilter(
                    vsize, nb_hash, hash_type, num_entries=nr, max_entries=0, rows=n_rows
                )
                d.current_nb_record = cur
                for r in range(n_rows):
                    rv, rh, rt, pos = _read_header(raw, pos)
                    if (rv, rh, rt) != (vsize, nb_hash, hash_type):
                        raise ValueError(
                            f"row {r} has parameters {(rv, rh, rt)}, filter {(vsize, nb_hash, hash_type)}"
                        )
                    pos = d._read_row(raw, pos, r)
                f = d
        except (struct.error, ValueError) as e:
            raise CorruptFileError(source, f"malformed {code} bloom filter: {e}") from None
        except ConfigError as e:
            raise CorruptFileError(source, str(e)) from None
        if pos != len(raw):
            raise CorruptFileError(source, f"{len(raw) - pos} trailing bytes after the {code} bloom filter")
        return f

    @staticmethod
    def from_parquet_metadata(
        metadata: Mapping[bytes, bytes] | None, *, source: str = "<parquet footer>"
    ) -> BloomFilter | None:
        """The filter in a parquet footer's key-value metadata (``pq.read_metadata(p).metadata``), or None."""
        if not metadata:
            return None
        text = metadata.get(PARQUET_BLOOM_FILTER_KEY.encode()) or metadata.get(
            PARQUET_LEGACY_BLOOM_FILTER_KEY.encode()
        )
        if text is None:
            return None
        return BloomFilter.deserialize(
            text, metadata.get(PARQUET_BLOOM_FILTER_TYPE_CODE_KEY.encode()), source=source
        )

    # -- use --------------------------------------------------------------------------------------------------------
    def add(self, key: str | bytes) -> None:
        """Add one record key (str keys are UTF-8 encoded)."""
        self.add_many([key])

    def add_many(self, keys: Keys) -> None:
        """Add record keys in order (strings, bytes, or an Arrow string/binary array); the order matters only for a
        dynamic filter that outgrows its first row."""
        data, offs = _key_buffers(keys)
        rows = self._rows_for(len(offs) - 1)
        _add_keys(data, offs, rows, self._bits, self.nb_hash, self.vector_size)

    def might_contain(self, key: str | bytes) -> bool:
        """False when the key is certainly not in the filter."""
        return bool(self.might_contain_many([key])[0])

    def might_contain_many(self, keys: Keys) -> np.ndarray:
        """A boolean array: for each key, False when it is certainly not in the filter. Compiled, GIL released."""
        data, offs = _key_buffers(keys)
        n = len(offs) - 1
        out = np.zeros(n, np.bool_)
        workers = min(4, os.cpu_count() or 1)
        if n < _PARALLEL_MIN or workers == 1:
            _test_keys(data, offs, self._bits, self.nb_hash, self.vector_size, out)
            return out
        cuts = np.linspace(0, n, workers + 1, dtype=np.int64)
        with ThreadPoolExecutor(workers) as pool:
            jobs = [
                pool.submit(
                    _test_keys, data, offs[a : b + 1], self._bits, self.nb_hash, self.vector_size, out[a:b]
                )
                for a, b in itertools.pairwise(cuts)
            ]
            for j in jobs:
                j.result()
        return out

    def serialize(self) -> str:
        """The Base64 string Hudi stores (parquet footer value; UTF-8 encoded, the HFile meta block)."""
        return base64.b64encode(self._to_bytes()).decode("ascii")

    def parquet_footer_metadata(
        self, min_key: str | None = None, max_key: str | None = None
    ) -> dict[str, str]:
        """The footer entries Hudi's writers add for this filter (type code only for dynamic filters, like Java)."""
        md = {PARQUET_BLOOM_FILTER_KEY: self.serialize()}
        if self.type_code.startswith("DYNAMIC"):
            md[PARQUET_BLOOM_FILTER_TYPE_CODE_KEY] = self.type_code
        if min_key is not None and max_key is not None:
            md[PARQUET_MIN_RECORD_KEY] = min_key
            md[PARQUET_MAX_RECORD_KEY] = max_key
        return md

    @property
    def num_rows(self) -> int:
        return int(self._bits.shape[0])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vector_size={self.vector_size}, nb_hash={self.nb_hash}, rows={self.num_rows})"

    # -- internals --------------------------------------------------------------------------------------------------
    @abstractmethod
    def _rows_for(self, n: int) -> np.ndarray:
        """The row each of the next n keys goes to (empty: row 0 for all), growing the matrix if needed."""

    @abstractmethod
    def _to_bytes(self) -> bytes: ...

    def _row_bytes(self, r: int) -> bytes:
        return (
            _HEADER.pack(_VERSION, self.nb_hash, self.hash_type, self.vector_size) + self._bits[r].tobytes()
        )

    def _read_row(self, raw: bytes, pos: int, r: int) -> int:
        nbytes = self._bits.shape[1]
        if pos + nbytes > len(raw):
            raise ValueError(f"bit vector of row {r} truncated: {len(raw) - pos} of {nbytes} bytes")
        self._bits[r] = np.frombuffer(raw, np.uint8, nbytes, pos)
        if self.vector_size & 7:  # Java ignores (and writes as zero) the bits past vector_size
            self._bits[r, -1] &= (1 << (self.vector_size & 7)) - 1
        return pos + nbytes


def _read_header(raw: bytes, pos: int) -> tuple[int, int, int, int]:
    version, nb_hash, hash_type, vsize = _HEADER.unpack_from(raw, pos)
    if version != _VERSION:
        if version > 0:  # Hadoop's pre-versioned layout: no hash type byte, Jenkins hash
            raise UnsupportedFormatError("unversioned (Jenkins-hash) Hadoop bloom filter is not supported")
        raise ValueError(f"unsupported bloom filter version {version}")
    return vsize, nb_hash, hash_type, pos + _HEADER.size


class SimpleBloomFilter(BloomFilter):
    """Hudi's ``SIMPLE`` filter: one Hadoop bloom filter row."""

    type_code: ClassVar[str] = TYPE_SIMPLE

    def _rows_for(self, n: int) -> np.ndarray:
        return np.empty(0, np.int64)

    def _to_bytes(self) -> bytes:
        return self._row_bytes(0)


class DynamicBoundedBloomFilter(BloomFilter):
    """Hudi's ``DYNAMIC_V0`` filter (``HoodieDynamicBoundedBloomFilter``): rows of ``num_entries`` keys each, added
    until ``rows * num_entries >= max_entries``, then filled round-robin."""

    type_code: ClassVar[str] = TYPE_DYNAMIC_V0

    def __init__(
        self,
        vector_size: int,
        nb_hash: int,
        hash_type: int = MURMUR_HASH,
        *,
        num_entries: int,
        max_entries: int,
        rows: int = 1,
    ) -> None:
        super().__init__(vector_size, nb_hash, hash_type, rows)
        self.num_entries = num_entries  # Java's nr
        self.max_entries = max_entries  # Java's maxNr, not serialized
        self.current_nb_record = 0
        self._reached_max = False
        self._cur_row = 0

    def _rows_for(self, n: int) -> np.ndarray:
        out = np.empty(n, np.int64)
        n_rows, self.current_nb_record, self._reached_max, self._cur_row = _assign_rows(
            n, self.num_entries, self.max_entries, self.num_rows, self.current_nb_record, self._reached_max,
            self._cur_row, out,
        )  # fmt: skip
        if n_rows > self.num_rows:
            grown = np.zeros((n_rows, self._bits.shape[1]), np.uint8)
            grown[: self.num_rows] = self._bits
            self._bits = grown
        return out

    def _to_bytes(self) -> bytes:
        head = _HEADER.pack(_VERSION, self.nb_hash, self.hash_type, self.vector_size)
        dyn = _DYN_HEADER.pack(self.num_entries, self.current_nb_record, self.num_rows)
        return head + dyn + b"".join(self._row_bytes(r) for r in range(self.num_rows))


HoodieDynamicBoundedBloomFilter = DynamicBoundedBloomFilter

__all__ = [
    "DEFAULT_DYNAMIC_MAX_ENTRIES",
    "DEFAULT_FILTER_TYPE",
    "DEFAULT_FPP",
    "DEFAULT_NUM_ENTRIES",
    "HFILE_BLOOM_META_BLOCK",
    "HFILE_BLOOM_TYPE_CODE_KEY",
    "MURMUR_HASH",
    "PARQUET_BLOOM_FILTER_KEY",
    "PARQUET_BLOOM_FILTER_TYPE_CODE_KEY",
    "PARQUET_LEGACY_BLOOM_FILTER_KEY",
    "PARQUET_MAX_RECORD_KEY",
    "PARQUET_MIN_RECORD_KEY",
    "TYPE_DYNAMIC_V0",
    "TYPE_SIMPLE",
    "BloomFilter",
    "DynamicBoundedBloomFilter",
    "HoodieDynamicBoundedBloomFilter",
    "SimpleBloomFilter",
    "bit_size",
    "num_hashes",
]

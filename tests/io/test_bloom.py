"""Hudi bloom filters: bit-for-bit against filters written by Java Hudi, and against a reference model of the Java
code (MurmurHash with Java int semantics, InternalDynamicBloomFilter's row choice)."""

from __future__ import annotations

import base64
import itertools
import os
import struct
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyhudi.config import BLOOM_DYNAMIC_MAX_ENTRIES, BLOOM_FILTER_TYPE, BLOOM_FPP, BLOOM_NUM_ENTRIES
from pyhudi.errors import ConfigError, CorruptFileError, InvalidInputError, UnsupportedFormatError
from pyhudi.io.bloom import (
    HFILE_BLOOM_META_BLOCK,
    HFILE_BLOOM_TYPE_CODE_KEY,
    PARQUET_BLOOM_FILTER_KEY,
    PARQUET_BLOOM_FILTER_TYPE_CODE_KEY,
    BloomFilter,
    DynamicBoundedBloomFilter,
    SimpleBloomFilter,
    bit_size,
    num_hashes,
)
from tests.paths import SHARED_FIXTURES as FIXTURES

TABLE_ZIPS = sorted((FIXTURES / "tables").glob("*.zip"))
HFILES = sorted((FIXTURES / "hfile").glob("*.hfile"))
needs_fixtures = pytest.mark.skipif(not TABLE_ZIPS, reason="fixture tables not available")


# -- a reference model of the Java code, written for clarity, not speed ---------------------------------------------
def _i32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def _java_murmur(data: bytes, seed: int) -> int:
    """org.apache.hudi.common.util.hash.MurmurHash.hash with Java int/byte semantics (signed bytes, wrapping)."""
    m = 0x5BD1E995
    jb = [b - 256 if b > 127 else b for b in data]  # Java bytes are signed
    length = len(jb)
    h = _i32(seed ^ length)
    for i in range(length >> 2):
        k = jb[4 * i + 3]
        k = _i32(k << 8) | (jb[4 * i + 2] & 0xFF)
        k = _i32(k << 8) | (jb[4 * i + 1] & 0xFF)
        k = _i32(k << 8) | (jb[4 * i] & 0xFF)
        k = _i32(k * m)
        k = _i32(k ^ ((k & 0xFFFFFFFF) >> 24))
        k = _i32(k * m)
        h = _i32(h * m)
        h = _i32(h ^ k)
    left = length & 3
    if left:
        if left >= 3:
            h = _i32(h ^ (jb[length - 3] << 16))
        if left >= 2:
            h = _i32(h ^ (jb[length - 2] << 8))
        h = _i32(h ^ jb[length - 1])
        h = _i32(h * m)
    h = _i32(h ^ ((h & 0xFFFFFFFF) >> 13))
    h = _i32(h * m)
    return _i32(h ^ ((h & 0xFFFFFFFF) >> 15))


def _java_positions(key: bytes, nb_hash: int, vector_size: int) -> list[int]:
    out, initval = [], 0
    for _ in range(nb_hash):
        initval = _java_murmur(key, initval)
        rem = abs(initval) % vector_size * (1 if initval >= 0 else -1)  # Java's truncating %
        out.append(abs(rem))
    return out


def _set_bits(serialized: str, header_at: int, vector_size: int) -> set[int]:
    """Bit positions set in a serialized row whose 13-byte header starts at header_at (documented layout)."""
    raw = base64.b64decode(serialized)
    vec = raw[header_at + 13 : header_at + 13 + (vector_size + 7) // 8]
    return {i for i in range(vector_size) if vec[i >> 3] >> (i & 7) & 1}


class _RefDynamic:
    """InternalDynamicBloomFilter of the Java code: rows of SimpleBloomFilter, Java's getActiveStandardBF."""

    def __init__(self, vsize: int, nb_hash: int, nr: int, max_nr: int) -> None:
        self.vsize, self.nb_hash, self.nr, self.max_nr = vsize, nb_hash, nr, max_nr
        self.rows: list[BloomFilter] = [SimpleBloomFilter(vsize, nb_hash)]
        self.cur, self.reached, self.idx = 0, False, 0

    def add(self, key: bytes) -> None:
        if self.reached:
            bf = self.rows[self.idx % len(self.rows)]
            self.idx += 1
        elif self.cur >= self.nr and len(self.rows) * self.nr < self.max_nr:
            bf = None
        elif self.cur >= self.nr:
            self.reached = True
            bf = self.rows[0]
        else:
            bf = self.rows[-1]
        if bf is None:
            self.rows.append(SimpleBloomFilter(self.vsize, self.nb_hash))
            bf = self.rows[-1]
            self.cur = 0
        bf.add(key)
        self.cur += 1

    def serialize(self) -> str:
        head = struct.pack(">iibi", -1, self.nb_hash, 1, self.vsize) + struct.pack(
            ">iii", self.nr, self.cur, len(self.rows)
        )
        return base64.b64encode(head + b"".join(base64.b64decode(r.serialize()) for r in self.rows)).decode()


# -- fixtures written by Java Hudi ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bloom_tables")
    out = {}
    for z in TABLE_ZIPS:
        with zipfile.ZipFile(z) as zf:
            zf.extractall(root / z.stem)
        out[z.stem] = root / z.stem
    return out


def _walk(root: Path, metadata: bool, suffix: str) -> list[Path]:
    found = []
    for d, _, files in os.walk(root):
        if "__MACOSX" in d or ("/.hoodie/metadata" in d) != metadata or (not metadata and "/.hoodie" in d):
            continue
        found += [Path(d) / f for f in files if f.endswith(suffix) and not f.startswith(".")]
    return sorted(found)


@needs_fixtures
@pytest.mark.parametrize("table", [z.stem for z in TABLE_ZIPS])
def test_parquet_footer_filters_match_java(tables: dict[str, Path], table: str) -> None:
    files = _walk(tables[table], metadata=False, suffix=".parquet")
    assert files
    for path in files:
        md = pq.read_metadata(path).metadata
        text = md[PARQUET_BLOOM_FILTER_KEY.encode()].decode()
        bf = BloomFilter.from_parquet_metadata(md, source=str(path))
        assert bf is not None and bf.type_code == md[PARQUET_BLOOM_FILTER_TYPE_CODE_KEY.encode()].decode()
        keys = pq.read_table(path, columns=["_hoodie_record_key"]).column(0)
        assert bf.might_contain_many(keys).all(), path
        assert bf.serialize() == text, path  # re-serialization is the identical string
        # the tables were written with Hudi's default bloom options: our own filter must be the same, bit for bit
        ours = BloomFilter.create()
        ours.add_many(keys)
        assert ours.serialize() == text, path
        assert ours.parquet_footer_metadata()[PARQUET_BLOOM_FILTER_TYPE_CODE_KEY] == "DYNAMIC_V0"
        assert not bf.might_contain("certainly-not-a-key-" + path.name)  # fpp 1e-9


@needs_fixtures
@pytest.mark.parametrize("table", [z.stem for z in TABLE_ZIPS])
def test_metadata_table_hfile_filters_match_java(tables: dict[str, Path], table: str) -> None:
    from pyhudi.hfile import HFileReader

    files = _walk(tables[table], metadata=True, suffix=".hfile")
    assert files
    entries_for_bits = {bit_size(10000, 1e-9): 10000, bit_size(60000, 1e-9): 60000}
    for path in files:
        with HFileReader.from_uri(str(path)) as r:
            block = r.meta_block(HFILE_BLOOM_META_BLOCK)
            code = r.file_info.get(HFILE_BLOOM_TYPE_CODE_KEY)
            keys = r.read_all().column("key")
        assert block is not None and code == b"DYNAMIC_V0"
        bf = BloomFilter.deserialize(block, code, source=str(path))
        assert isinstance(bf, DynamicBoundedBloomFilter)
        assert bf.serialize().encode() == block
        assert bf.current_nb_record == len(keys)  # the writer adds every cell's key
        if len(keys):
            assert bf.might_contain_many(keys).all(), path
        ours = BloomFilter.create(entries_for_bits[bf.vector_size])
        ours.add_many(keys)
        assert ours.serialize().encode() == block, path


@pytest.mark.skipif(not HFILES, reason="HFile fixtures not available")
@pytest.mark.parametrize("path", HFILES, ids=lambda p: p.name)
def test_standalone_hfile_filters_round_trip(path: Path) -> None:
    from pyhudi.hfile import HFileReader

    with HFileReader.from_uri(str(path)) as r:
        block = r.meta_block(HFILE_BLOOM_META_BLOCK)
        code = r.file_info.get(HFILE_BLOOM_TYPE_CODE_KEY)
    assert block is not None
    bf = BloomFilter.deserialize(block, code)
    assert bf.serialize().encode() == block
    # Hudi's test writer stores a dummy SIMPLE filter (10 entries at fpp 1e-6), not one of the file's keys
    if code is None:
        assert isinstance(bf, SimpleBloomFilter) and (bf.vector_size, bf.nb_hash) == (288, 20)
    else:  # the empty file carries an empty filter with the defaults
        assert block.decode() == BloomFilter.create().serialize()


# -- sizing and configuration -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("entries", "fpp", "bits", "hashes"),
    [(60000, 1e-9, 2587966, 30), (10000, 1e-9, 431328, 30), (10, 1e-6, 288, 20), (1, 0.5, 2, 2)],
)
def test_sizing_matches_hudi(entries: int, fpp: float, bits: int, hashes: int) -> None:
    assert bit_size(entries, fpp) == bits
    assert num_hashes(bits, entries) == hashes


def test_from_config() -> None:
    bf = BloomFilter.from_config(
        {
            BLOOM_NUM_ENTRIES: "100",
            BLOOM_FPP: "0.01",
            BLOOM_DYNAMIC_MAX_ENTRIES: "300",
            BLOOM_FILTER_TYPE: "dynamic_v0",
        }
    )
    assert isinstance(bf, DynamicBoundedBloomFilter)
    assert (bf.vector_size, bf.nb_hash, bf.num_entries, bf.max_entries) == (bit_size(100, 0.01), 7, 100, 300)
    assert isinstance(BloomFilter.from_config({BLOOM_FILTER_TYPE: "SIMPLE"}), SimpleBloomFilter)
    assert BloomFilter.from_config({}).serialize() == BloomFilter.create().serialize()
    for bad in (
        {BLOOM_FILTER_TYPE: "DYNAMIC"},
        {BLOOM_FPP: "1.5"},
        {BLOOM_NUM_ENTRIES: "0"},
        {BLOOM_FPP: "x"},
    ):
        with pytest.raises(ConfigError):
            BloomFilter.from_config(bad)


def test_footer_metadata() -> None:
    s = BloomFilter.create(type_code="SIMPLE")
    s.add("a")
    assert s.parquet_footer_metadata("a", "a") == {
        PARQUET_BLOOM_FILTER_KEY: s.serialize(),
        "hoodie_min_record_key": "a",
        "hoodie_max_record_key": "a",
    }
    md = {k.encode(): v.encode() for k, v in s.parquet_footer_metadata().items()}
    again = BloomFilter.from_parquet_metadata(md)
    assert isinstance(again, SimpleBloomFilter) and again.might_contain("a")
    assert BloomFilter.from_parquet_metadata({b"other": b"x"}) is None
    assert BloomFilter.from_parquet_metadata(None) is None


# -- hashing and layout against the reference model -------------------------------------------------------------------
@given(st.binary(min_size=1, max_size=40), st.integers(1, 12), st.integers(1, 5000))
@settings(max_examples=300, deadline=None)
def test_bit_positions_match_java_murmur(key: bytes, nb_hash: int, vector_size: int) -> None:
    bf = SimpleBloomFilter(vector_size, nb_hash)
    bf.add(key)
    assert _set_bits(bf.serialize(), 0, vector_size) == set(_java_positions(key, nb_hash, vector_size))
    assert bf.might_contain(key)


@given(st.lists(st.binary(min_size=0, max_size=70), min_size=1, max_size=8), st.integers(0, 2**32 - 1))
@settings(max_examples=200, deadline=None)
def test_mixed_words_hash_as_murmur(keys: list[bytes], seed: int) -> None:
    """A key's words mixed once, then hashed per seed, give Java's MurmurHash of the key (every length, keys of
    several lengths in one buffer)."""
    from pyhudi.io.bloom import _mix_words, _murmur_mixed

    data = np.frombuffer(b"".join(keys) or b"\0", np.uint8)
    ks = np.empty(max(len(k) for k in keys) // 4 + 1, np.int64)
    start = 0
    for k in keys:
        n, tail = _mix_words(data, start, len(k), ks)
        java = _java_murmur(k, _i32(seed)) & 0xFFFFFFFF
        assert _murmur_mixed(ks, n, tail, len(k), seed) == java
        start += len(k)


@given(st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=13), st.integers(1, 12),
       st.integers(1, 5000))
@settings(max_examples=200, deadline=None)
def test_keys_hashed_side_by_side_set_java_bits(keys: list[bytes], nb_hash: int, vector_size: int) -> None:
    """add_many hashes four keys at a time (then the rest one by one): the bits of keys of any lengths, in any
    count, are Java's."""
    bf = SimpleBloomFilter(vector_size, nb_hash)
    bf.add_many(keys)
    want = set().union(*(_java_positions(k, nb_hash, vector_size) for k in keys))
    assert _set_bits(bf.serialize(), 0, vector_size) == want


def test_str_keys_are_utf8() -> None:
    a, b = SimpleBloomFilter(997, 5), SimpleBloomFilter(997, 5)
    a.add("ключ-é")
    b.add("ключ-é".encode())
    assert a.serialize() == b.serialize()
    assert a.might_contain("ключ-é".encode()) and b.might_contain("ключ-é")


@given(
    st.lists(st.binary(min_size=1, max_size=12), max_size=60),
    st.integers(1, 6),
    st.integers(0, 25),
    st.lists(st.integers(0, 60), max_size=4),
)
@settings(max_examples=150, deadline=None)
def test_dynamic_growth_matches_java(keys: list[bytes], nr: int, max_nr: int, cuts: list[int]) -> None:
    vsize, nb_hash = 101, 3
    ref = _RefDynamic(vsize, nb_hash, nr, max_nr)
    for k in keys:
        ref.add(k)
    ours = DynamicBoundedBloomFilter(vsize, nb_hash, num_entries=nr, max_entries=max_nr)
    bounds = [0, *sorted(c for c in cuts if c <= len(keys)), len(keys)]
    for a, b in itertools.pairwise(bounds):  # state carries across add_many calls
        ours.add_many(keys[a:b])
    assert ours.serialize() == ref.serialize()
    assert ours.might_contain_many(keys).all() if keys else True

    # a deserialized filter forgets max_entries (Java leaves it 0): it never grows, it fills row 0, then round-robin
    back = BloomFilter.deserialize(ours.serialize(), "DYNAMIC_V0")
    ref.rows = [BloomFilter.deserialize(r.serialize()) for r in ref.rows]
    ref.max_nr, ref.reached, ref.idx = 0, False, 0
    for i in range(7):
        ref.add(b"extra-%d" % i)
        back.add(b"extra-%d" % i)
    assert back.serialize() == ref.serialize()


# -- properties -------------------------------------------------------------------------------------------------------
_keys = st.lists(st.text(min_size=1, max_size=20) | st.binary(min_size=1, max_size=20), max_size=200)


@given(_keys, st.sampled_from(["SIMPLE", "DYNAMIC_V0"]), st.integers(1, 50), st.floats(1e-6, 0.5))
@settings(max_examples=150, deadline=None)
def test_no_false_negatives_and_round_trip(
    keys: list[str | bytes], code: str, entries: int, fpp: float
) -> None:
    bf = BloomFilter.create(entries, fpp, max_entries=3 * entries, type_code=code)
    bf.add_many(keys)
    if keys:
        assert bf.might_contain_many(keys).all()
        assert all(bf.might_contain(k) for k in keys[:5])
    text = bf.serialize()
    back = BloomFilter.deserialize(text, code)
    assert type(back) is type(bf) and back.serialize() == text
    if keys:
        assert back.might_contain_many(keys).all()


def test_input_kinds_agree() -> None:
    words = [f"key-{i}" for i in range(300)]
    bf = BloomFilter.create(100, 0.01, 1000)
    bf.add_many(words[::2])
    want = bf.might_contain_many(words)
    assert want[::2].all() and not want[1::2].all()
    arr = pa.array(words)
    for variant in (
        [w.encode() for w in words],
        [w if i % 2 else w.encode() for i, w in enumerate(words)],
        arr,
        arr.cast(pa.large_string()),
        arr.cast(pa.binary()),
        pa.chunked_array([arr[:100], arr[100:]]),
    ):
        assert (bf.might_contain_many(variant) == want).all()
    assert (bf.might_contain_many(pa.array(["x", *words])[1:]) == want).all()  # sliced (non-zero offset)
    assert bf.might_contain_many([]).shape == (0,)


def test_bad_keys() -> None:
    bf = BloomFilter.create(10)
    for bad in ([""], ["a", b""], pa.array(["a", None])):
        with pytest.raises(InvalidInputError):
            bf.add_many(bad)
        with pytest.raises(InvalidInputError):
            bf.might_contain_many(bad)
    assert bf.serialize() == BloomFilter.create(10).serialize()  # nothing was added by the failed calls


def test_bad_serialized_forms() -> None:
    good = BloomFilter.create(10, type_code="SIMPLE").serialize()
    raw = base64.b64decode(good)
    for text in ("not base64!!", base64.b64encode(raw[:-1]).decode(), base64.b64encode(raw + b"\0").decode()):
        with pytest.raises(CorruptFileError, match=r"f\.parquet"):
            BloomFilter.deserialize(text, "SIMPLE", source="f.parquet")
    with pytest.raises(CorruptFileError):  # a SIMPLE body read as dynamic
        BloomFilter.deserialize(good, "DYNAMIC_V0")
    with pytest.raises(UnsupportedFormatError):
        BloomFilter.deserialize(good, "BLOCKED")
    jenkins = base64.b64encode(raw[:8] + b"\0" + raw[9:]).decode()
    with pytest.raises(UnsupportedFormatError):
        BloomFilter.deserialize(jenkins, "SIMPLE")
    # bits past vector_size are ignored on read and written as zero, as in Java
    odd = SimpleBloomFilter(13, 2)  # 13 bits: 3 unused bits in the last byte
    padded = bytearray(base64.b64decode(odd.serialize()))
    padded[-1] |= 0xE0
    assert BloomFilter.deserialize(base64.b64encode(bytes(padded))).serialize() == odd.serialize()


def test_one_million_keys() -> None:
    """A batch large enough to be split over threads: no false negatives, few false positives."""
    n = 1_000_000
    keys = pa.array([f"TXN-{i:012d}" for i in range(n)])
    bf = BloomFilter.create()
    bf.add_many(keys[:50000])
    hits = bf.might_contain_many(keys)
    assert hits[:50000].all() and hits.dtype == np.bool_
    assert hits.sum() < 50000 + 100

"""Read compatibility: every HFile test vector written by HBase 2.4 through Hudi 1.0 reads back exactly."""

from __future__ import annotations

import base64
import bisect

import pyarrow as pa
import pytest
from hfile_vectors import EMPTY_VECTOR, FAKE_FIRST_KEY, VECTOR_LIST, VECTORS, Vector, require_vectors

from pyhudi.hfile import KV_SCHEMA, HFileReader

pytestmark = pytest.mark.usefixtures("_vectors_present")


@pytest.fixture
def _vectors_present() -> None:
    require_vectors()


def _open(v: Vector) -> HFileReader:
    return HFileReader.from_uri(str(v.path))


def _first_values(v: Vector) -> dict[bytes, bytes]:
    """row -> value of its first cell (what lookup/get return)."""
    return {v.key(i): v.value(i) for i in range(v.n_keys)}


def _common_prefix(a: bytes, b: bytes) -> bytes:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _concat(batches: list[pa.RecordBatch]) -> tuple[list[bytes], list[bytes]]:
    t = pa.Table.from_batches(batches, schema=KV_SCHEMA)
    return t.column("key").to_pylist(), t.column("value").to_pylist()


def test_every_vector_is_listed() -> None:
    on_disk = {p.name for p in VECTORS.glob("*.hfile")}
    assert on_disk == {v.name for v in VECTOR_LIST} | {EMPTY_VECTOR.name}


# -- full content ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", VECTOR_LIST, ids=lambda v: v.name)
def test_full_scan_exact(v: Vector) -> None:
    keys, values = v.cells()
    with _open(v) as r:
        assert r.entry_count == len(keys) == r.trailer.entry_count
        t = r.read_all()
        assert t.schema == KV_SCHEMA
        assert t.column("key").to_pylist() == keys
        assert t.column("value").to_pylist() == values
        # scan() yields one batch per data block, and together they are the whole file
        batches = list(r.scan())
        assert all(b.schema == KV_SCHEMA for b in batches)
        assert len(batches) == r.num_blocks
        assert _concat(batches) == (keys, values)


@pytest.mark.parametrize("v", VECTOR_LIST, ids=lambda v: v.name)
def test_structure(v: Vector) -> None:
    with _open(v) as r:
        assert r.index_levels == v.levels == r.trailer.num_data_index_levels
        assert len(r.index_level_sizes) == v.levels
        assert r.index_level_sizes[-1] == r.num_blocks
        if v.blocks is not None:
            assert r.num_blocks == v.blocks
        assert r.trailer.major_version == 3
        assert r.trailer.minor_version == 3  # HBase 2.4
        assert r.last_key == v.key(v.n_keys - 1)
        assert r.file_info["hudi_hfile_testing.custom_key"] == b"hudi_custom_value"
        assert r.meta_block_names() == ["bloomFilter"]
        bloom = r.meta_block("bloomFilter")
        assert bloom is not None and len(bloom) > 0
        base64.b64decode(bloom, validate=True)  # Hudi's bloom filter is serialised as Base64 text
        assert r.meta_block("noSuchBlock") is None
        # index keys are ascending, and each block's index key is <= its real first row
        idx = [e.key for e in r.block_index]
        assert idx == sorted(idx)
        offsets = [e.offset for e in r.block_index]
        assert offsets == sorted(offsets) and offsets[0] == r.trailer.first_data_block_offset
        assert offsets[-1] == r.trailer.last_data_block_offset
        for entry, batch in zip(r.block_index, r.scan(), strict=True):
            assert entry.key <= batch.column("key")[0].as_py()


def test_deep_index_has_three_levels() -> None:
    with HFileReader.from_uri(
        str(VECTORS / "hudi_1_0_hbase_2_4_13_1KB_GZ_10000_large_keys_deep_index.hfile")
    ) as r:
        assert r.index_levels == 3
        assert r.index_level_sizes == [7, 103, 1429]


# -- lookups -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", VECTOR_LIST, ids=lambda v: v.name)
def test_batch_lookup_of_all_keys(v: Vector) -> None:
    expected = _first_values(v)
    keys = list(expected)[::-1]  # not in file order: results must come back in input order
    with _open(v) as r:
        t = r.lookup(keys)
        assert t.schema == KV_SCHEMA
        assert t.column("key").to_pylist() == keys
        assert t.column("value").to_pylist() == [expected[k] for k in keys]


@pytest.mark.parametrize("v", VECTOR_LIST, ids=lambda v: v.name)
def test_point_gets(v: Vector) -> None:
    expected = _first_values(v)
    sample = {0, 1, v.n_keys - 1, *range(0, v.n_keys, 97)}
    with _open(v) as r:
        # first and last row of every data block
        for b in list(r.scan())[::7]:
            rows = b.column("key")
            sample.add(v.index_of(rows[0].as_py()))
            sample.add(v.index_of(rows[len(rows) - 1].as_py()))
        for i in sorted(sample):
            assert r.get(v.key(i)) == expected[v.key(i)]
            assert r.get(v.key(i).decode()) == expected[v.key(i)]  # str keys are UTF-8


def _absent_probes(v: Vector) -> list[bytes]:
    first, last = v.key(0), v.key(v.n_keys - 1)
    probes = [b"", b"a", b"hudi", b"hudi-key-", first[:-1], b"\x00", b"\x00" + first]  # before the first row
    probes += [
        last + b"\x00",
        last + b"0",
        b"hudi-key-999999999",
        b"z",
        b"\xff",
        b"\xff" * 40,
    ]  # after the last
    for i in (0, 1, 7, v.n_keys // 2, v.n_keys - 2):  # between stored rows
        k = v.key(i)
        probes += [k + b"\x00", k + b"\xff", k[:-1] + b"\xff", k + b"-", k[:-1]]
    expected = _first_values(v)
    probes = [p for p in probes if p not in expected]
    assert len(probes) > 20
    return probes


@pytest.mark.parametrize("v", VECTOR_LIST, ids=lambda v: v.name)
def test_absent_keys_are_null(v: Vector) -> None:
    probes = _absent_probes(v)
    present = [v.key(3), v.key(v.n_keys - 1)]
    with _open(v) as r:
        t = r.lookup(probes + present)
        vals = t.column("value").to_pylist()
        assert vals[: len(probes)] == [None] * len(probes)
        assert vals[len(probes) :] == [v.value(3), v.value(v.n_keys - 1)]
        assert t.column("value").null_count == len(probes)
        for p in probes:  # one at a time too: every query may miss every block
            assert r.get(p) is None
        assert r.lookup([b"", b"\xff"]).column("value").to_pylist() == [None, None]


def test_lookup_duplicate_and_empty_query_lists() -> None:
    v = VECTOR_LIST[0]
    with _open(v) as r:
        k = v.key(5)
        t = r.lookup([k, b"nope", k, v.key(19999), k])
        assert t.column("value").to_pylist() == [v.value(5), None, v.value(5), v.value(19999), v.value(5)]
        empty = r.lookup([])
        assert empty.num_rows == 0 and empty.schema == KV_SCHEMA
        # arrow input, string typed
        t2 = r.lookup(pa.array([v.key(7).decode(), "x"], pa.string()))
        assert t2.column("value").to_pylist() == [v.value(7), None]
        chunked = pa.chunked_array(
            [pa.array([v.key(8)], pa.large_binary()), pa.array([b"x"], pa.large_binary())]
        )
        assert r.lookup(chunked).column("value").to_pylist() == [v.value(8), None]


def test_non_unique_cells_in_file_order() -> None:
    v = next(x for x in VECTOR_LIST if x.dup)
    with _open(v) as r:
        t = r.read_all()
        rows = t.column("key").to_pylist()
        vals = t.column("value").to_pylist()
        i = 42
        lo = rows.index(v.key(i))
        assert rows[lo : lo + 21] == [v.key(i)] * 21
        assert vals[lo : lo + 21] == [v.value(i)] + [v.value(i) + b"_%d" % j for j in range(20)]
        # a lookup returns the value of the first cell of the row
        assert r.get(v.key(i)) == v.value(i)
        # prefix scan returns all 21 cells of each of the 10 matching rows
        keys, values = _concat(list(r.scan(prefix=b"hudi-key-00000012")))
        assert keys == [v.key(j) for j in range(120, 130) for _ in range(21)]
        assert values == [
            x for j in range(120, 130) for x in [v.value(j)] + [v.value(j) + b"_%d" % q for q in range(20)]
        ]


# -- fake (shortened) first keys in HBase's index ------------------------------------------------------------
def test_fake_first_key_gaps() -> None:
    v = FAKE_FIRST_KEY
    all_keys = [v.key(i) for i in range(v.n_keys)]
    with _open(v) as r:
        batches = list(r.scan())
        fakes = []
        for i, (entry, batch) in enumerate(zip(r.block_index, batches, strict=True)):
            real_first = batch.column("key")[0].as_py()
            if i > 0:
                prev_last = batches[i - 1].column("key")[-1].as_py()
                assert prev_last < entry.key <= real_first
            if entry.key != real_first:
                fakes.append((entry.key, real_first))
        assert len(fakes) > 50  # most index keys of this vector are shortened
        assert (b"hudi-key-00000047", b"hudi-key-000000470-abcdefghij") in fakes
        probes: list[bytes] = []
        for fake, real in fakes:
            # inside [fake first key, real first key): absent
            probes += [fake, fake + b"\x00", real[:-1], real[:-3] + b"\x00"]
        probes = sorted({p for p in probes if fake_gap_ok(p, all_keys)})
        t = r.lookup(probes + [real for _, real in fakes])
        vals = t.column("value").to_pylist()
        assert vals[: len(probes)] == [None] * len(probes)
        assert vals[len(probes) :] == [_value_of(v, real) for _, real in fakes]
        for fake, real in fakes[:10]:
            assert r.get(fake) is None
            assert r.get(real) == _value_of(v, real)
        # a scan starting at a fake key starts at the block's real first row
        fake, real = fakes[5]
        keys, _ = _concat(list(r.scan(fake, real + b"\x00")))
        assert keys == [real]
        # prefix equal to a fake key: the 10 rows 470..479 start exactly at a block boundary
        keys, values = _concat(list(r.scan(prefix=b"hudi-key-00000047")))
        assert keys == [v.key(i) for i in range(470, 480)]
        assert values == [v.value(i) for i in range(470, 480)]


def fake_gap_ok(p: bytes, all_keys: list[bytes]) -> bool:
    i = bisect.bisect_left(all_keys, p)
    return i == len(all_keys) or all_keys[i] != p


def _value_of(v: Vector, key: bytes) -> bytes:
    return v.value(v.index_of(key))


# -- range and prefix scans ----------------------------------------------------------------------------------
@pytest.mark.parametrize("v", VECTOR_LIST, ids=lambda v: v.name)
def test_range_and_prefix_scans(v: Vector) -> None:
    keys, values = v.cells()
    n = len(keys)

    def model(lo: bytes | None, hi: bytes | None) -> tuple[list[bytes], list[bytes]]:
        a = 0 if lo is None else bisect.bisect_left(keys, lo)
        b = n if hi is None else bisect.bisect_left(keys, hi)
        b = max(a, b)
        return keys[a:b], values[a:b]

    with _open(v) as r:
        idx = [e.key for e in r.block_index]
        m = len(idx)
        bounds: list[tuple[bytes | None, bytes | None]] = [
            (None, None),
            (v.key(100), v.key(v.n_keys - 100)),  # across many blocks
            (v.key(100) + b"\x00", v.key(150) + b"\x00"),  # bounds that are not stored rows
            (None, v.key(10)),
            (v.key(v.n_keys - 10), None),
            (idx[1], idx[min(3, m - 1)]),  # starting exactly at a block's index key
            (idx[m // 2], idx[m // 2] + b"\x00"),
            (b"", b"\xff"),
            (v.key(50), v.key(50)),  # empty range
            (v.key(60), v.key(50)),  # reversed range: empty
            (b"zzz", None),  # after the last row
            (None, b"a"),  # before the first row
        ]
        for lo, hi in bounds:
            assert _concat(list(r.scan(lo, hi))) == model(lo, hi), (lo, hi)
        prefixes = [
            _common_prefix(v.key(120), v.key(129)),  # 10 rows
            _common_prefix(v.key(100), v.key(199)),  # 100 rows
            v.key(0)[:9],  # "hudi-key-": everything
            v.key(v.n_keys - 1),  # exactly one row
            b"nope",
            b"",
        ]
        for p in prefixes:
            want = [i for i, k in enumerate(keys) if k.startswith(p)]
            got = _concat(list(r.scan(prefix=p)))
            assert got == ([keys[i] for i in want], [values[i] for i in want]), p
        ten = _concat(list(r.scan(prefix=_common_prefix(v.key(120), v.key(129)))))[0]
        assert sorted(set(ten)) == [v.key(i) for i in range(120, 130)]
        with pytest.raises(ValueError):
            list(r.scan(b"a", prefix=b"b"))


def test_prefix_hudi_key_00000012_returns_ten_keys() -> None:
    v = VECTOR_LIST[0]
    with _open(v) as r:
        keys, values = _concat(list(r.scan(prefix="hudi-key-00000012")))
    assert keys == [b"hudi-key-%09d" % i for i in range(120, 130)]
    assert values == [b"hudi-value-%09d" % i for i in range(120, 130)]


# -- the empty vector ----------------------------------------------------------------------------------------
def test_empty_vector() -> None:
    with HFileReader.from_uri(str(EMPTY_VECTOR)) as r:
        assert r.entry_count == 0
        assert r.num_blocks == 0
        assert r.last_key is None
        t = r.read_all()
        assert t.num_rows == 0 and t.schema == KV_SCHEMA
        assert list(r.scan()) == []
        assert list(r.scan(prefix=b"hudi")) == []
        assert list(r.scan(b"a", b"z")) == []
        probes = [b"", b"hudi-key-000000000", b"\xff"]
        lk = r.lookup(probes)
        assert lk.column("key").to_pylist() == probes
        assert lk.column("value").to_pylist() == [None, None, None]
        assert r.get("hudi-key-000000000") is None
        assert r.file_info["bloomFilterTypeCode"] == b"DYNAMIC_V0"
        assert r.file_info["minRecordKey"] == b"" and r.file_info["maxRecordKey"] == b""
        assert b'"type":"record"' in r.file_info["schema"]
        bloom = r.meta_block("bloomFilter")
        assert bloom is not None and len(bloom) > 1000
        base64.b64decode(bloom, validate=True)

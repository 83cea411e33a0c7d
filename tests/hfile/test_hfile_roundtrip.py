"""Write-then-read round trips against a Python model (hypothesis), for both codecs and many block sizes."""

from __future__ import annotations

import bisect
import itertools
import os

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyhudi.hfile import KV_SCHEMA, HFileReader, HFileWriter, hfile_bytes
from pyhudi.io.compression import CODEC_GZ, CODEC_NONE

CODECS = [CODEC_NONE, CODEC_GZ]
BLOCK_SIZES = [64, 1024, 65536, 1 << 20]

# keys built from tokens share prefixes and hit the interesting bytes (0x00, 0xff, UTF-8), and may be empty
_token = st.sampled_from(
    [b"", b"a", b"b", b"ab", b"\x00", b"\xff", b"\x7f", b"\x80", "é".encode(), "€".encode()]
)
_key = st.one_of(
    st.binary(max_size=24),
    st.lists(_token, max_size=6).map(b"".join),
)
_keys = st.sets(_key, max_size=150).map(sorted)
_value = st.one_of(st.just(b""), st.binary(max_size=64), st.binary(min_size=200, max_size=3000))


@st.composite
def files(draw: st.DrawFn) -> tuple[list[bytes], list[bytes], int, int]:
    keys = draw(_keys)
    values = draw(st.lists(_value, min_size=len(keys), max_size=len(keys)))
    return keys, values, draw(st.sampled_from(CODECS)), draw(st.sampled_from(BLOCK_SIZES))


def _table(batches: list[pa.RecordBatch]) -> tuple[list[bytes], list[bytes]]:
    t = pa.Table.from_batches(batches, schema=KV_SCHEMA)
    return t.column("key").to_pylist(), t.column("value").to_pylist()


def _model_range(keys: list[bytes], lo: bytes | None, hi: bytes | None) -> slice:
    a = 0 if lo is None else bisect.bisect_left(keys, lo)
    b = len(keys) if hi is None else bisect.bisect_left(keys, hi)
    return slice(a, max(a, b))


def _absent_probes(keys: list[bytes], extra: list[bytes]) -> list[bytes]:
    present = set(keys)
    probes = list(extra)
    if keys:
        probes += [keys[-1] + b"\x00", keys[-1] + b"\xff", b"\xff" * (len(keys[-1]) + 1)]  # after the last
        if keys[0]:
            probes += [keys[0][:-1], b""]  # before the first
        for k in keys[:: max(1, len(keys) // 10)]:
            probes += [k + b"\x00", k + b"\x01", k[:-1] + b"\xff" if k else b"\x00"]  # between
    return [p for p in probes if p not in present]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    f=files(),
    extra=st.lists(_key, max_size=20),
    bounds=st.lists(st.one_of(st.none(), _key), min_size=2, max_size=2),
)
def test_roundtrip_matches_model(
    f: tuple[list[bytes], list[bytes], int, int], extra: list[bytes], bounds: list[bytes | None]
) -> None:
    keys, values, codec, block_size = f
    data, trailer = hfile_bytes(keys, values, codec=codec, block_size=block_size)
    assert trailer.entry_count == len(keys)
    r = HFileReader.from_bytes(data)
    assert r.entry_count == len(keys)
    assert r.last_key == (keys[-1] if keys else None)
    t = r.read_all()
    assert t.column("key").to_pylist() == keys
    assert t.column("value").to_pylist() == values
    model = dict(zip(keys, values, strict=True))
    # lookup of all keys (reversed input order) gives the values
    lk = r.lookup(keys[::-1])
    assert lk.column("key").to_pylist() == keys[::-1]
    assert lk.column("value").to_pylist() == values[::-1]
    # absent keys before, between and after; mixed with present keys
    probes = _absent_probes(keys, extra)
    mixed = probes + keys[::3]
    assert r.lookup(mixed).column("value").to_pylist() == [model.get(p) for p in mixed]
    for p in probes[:5]:
        assert r.get(p) is None
    for k in keys[:3]:
        assert r.get(k) == model[k]
    # range scans
    lo, hi = bounds
    s = _model_range(keys, lo, hi)
    assert _table(list(r.scan(lo, hi))) == (keys[s], values[s])
    for k in keys[:: max(1, len(keys) // 5)]:
        s = _model_range(keys, k, None)
        assert _table(list(r.scan(k))) == (keys[s], values[s])
        s = _model_range(keys, None, k)
        assert _table(list(r.scan(None, k))) == (keys[s], values[s])
    # prefix scans: prefixes of stored keys and random ones (including all-0xff and empty)
    prefixes = {
        b"",
        b"\xff",
        b"\xff\xff",
        b"\x00",
        *(k[: len(k) // 2] for k in keys[:10]),
        *(k for k in keys[-3:]),
    }
    prefixes |= set(extra[:3])
    for p in prefixes:
        want = [i for i, k in enumerate(keys) if k.startswith(p)]
        assert _table(list(r.scan(prefix=p))) == ([keys[i] for i in want], [values[i] for i in want]), p


@settings(max_examples=25, deadline=None)
@given(f=files(), cuts=st.lists(st.integers(0, 150), max_size=5))
def test_batched_appends_match_one_batch(
    f: tuple[list[bytes], list[bytes], int, int], cuts: list[int]
) -> None:
    keys, values, codec, block_size = f
    kw = {"codec": codec, "block_size": block_size, "creation_time_ms": 7}
    ref, _ = hfile_bytes(keys, values, **kw)
    out = pa.BufferOutputStream()
    w = HFileWriter(out, **kw)
    bounds = sorted({0, len(keys), *(min(c, len(keys)) for c in cuts)})
    for a, b in itertools.pairwise(bounds):
        w.append_batch(keys[a:b], values[a:b])
    w.close()
    assert out.getvalue().to_pybytes() == ref


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_empty_file_roundtrip(codec: int, block_size: int) -> None:
    data, _ = hfile_bytes([], [], codec=codec, block_size=block_size)
    r = HFileReader.from_bytes(data)
    assert r.entry_count == 0 and r.read_all().num_rows == 0
    assert list(r.scan(prefix=b"")) == []
    assert r.lookup([b"", b"a", b"\xff"]).column("value").to_pylist() == [None, None, None]


@pytest.mark.parametrize("codec", CODECS)
def test_empty_key_and_empty_values(codec: int) -> None:
    keys = [b"", b"\x00", b"\x00\x00", b"a", b"\xff"]
    values = [b"", b"x", b"", b"", b"last"]
    data, _ = hfile_bytes(keys, values, codec=codec, block_size=64)
    r = HFileReader.from_bytes(data)
    assert r.read_all().to_pydict() == {"key": keys, "value": values}
    assert r.lookup([*keys, b"\x01"]).column("value").to_pylist() == [*values, None]
    assert r.get(b"") == b""  # present with an empty value: not null
    assert _table(list(r.scan(prefix=b"\x00"))) == (keys[1:3], values[1:3])
    # a file whose only key is the empty row
    only, _ = hfile_bytes([b""], [b"v"], codec=codec)
    r = HFileReader.from_bytes(only)
    assert r.last_key == b""
    assert r.lookup([b"", b"\x00"]).column("value").to_pylist() == [b"v", None]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("block_size", [64, 1 << 20])
def test_very_large_keys_and_values(codec: int, block_size: int) -> None:
    big = os.urandom(32767)  # the largest row the format allows (a Java short)
    keys = [b"\x00" + big[:-1], b"a", big[:1] + b"\x00" * 32766, b"\xff" * 32767]
    keys = sorted(set(keys))
    values = [os.urandom(3 << 20), b"", b"m" * (5 << 20), os.urandom(1000)][: len(keys)]
    data, _ = hfile_bytes(keys, values, codec=codec, block_size=block_size)
    r = HFileReader.from_bytes(data)
    if block_size == 64:
        assert r.num_blocks == len(keys)  # every cell exceeds the block size: one block each
    assert r.read_all().to_pydict() == {"key": keys, "value": values}
    assert r.lookup(keys[::-1]).column("value").to_pylist() == values[::-1]
    absent = [k + b"\x00" for k in keys] + [k[:-1] for k in keys]
    assert r.lookup(absent).column("value").to_pylist() == [None] * len(absent)
    assert _table(list(r.scan(keys[1], keys[-1]))) == (keys[1:-1], values[1:-1])
    assert _table(list(r.scan(prefix=b"\xff" * 100))) == (keys[-1:], values[-1:])


def test_gzip_levels_roundtrip_and_shrink() -> None:
    """Every ISA-L level writes plain GZ blocks the reader decodes to the same cells; higher levels are not
    larger on repetitive cells; levels outside 0-3 are refused."""
    keys = [f"{i:08d}-{'k' * (i % 7)}".encode() for i in range(20_000)]
    values = [(b"partition=%d;file=%d" % (i % 13, i % 97)) * 2 for i in range(20_000)]
    sizes = {}
    for level in (0, 1, 2, 3):
        data, trailer = hfile_bytes(keys, values, codec=CODEC_GZ, block_size=4096, gzip_level=level)
        assert trailer.compression_codec == CODEC_GZ
        t = HFileReader.from_bytes(data).read_all()
        assert t.column("key").to_pylist() == keys and t.column("value").to_pylist() == values
        sizes[level] = len(data)
    assert sizes[3] <= sizes[1] < sizes[0]
    default, _ = hfile_bytes(keys, values, codec=CODEC_GZ, block_size=4096)
    from pyhudi.io.compression import GZIP_LEVEL

    assert len(default) == sizes[GZIP_LEVEL]
    for bad in (-1, 4):
        with pytest.raises(Exception, match="gzip level"):
            HFileWriter(pa.BufferOutputStream(), gzip_level=bad)

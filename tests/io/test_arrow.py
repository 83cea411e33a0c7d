"""Packing string arrays into one binary value (pyhudi.io.arrow.pack_strings), as WriteStatus rows carry keys."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pyhudi.io.arrow import constant_strings, numbered_strings, pack_strings, unpack_strings


@pytest.mark.parametrize("values", [[], ["a"], ["k1", "", "ключ-é", "x" * 10_000]])
def test_pack_round_trip(values: list[str]) -> None:
    packed = pack_strings(pa.array(values, pa.string()))
    assert isinstance(packed, bytes)
    assert unpack_strings(packed).to_pylist() == values
    assert unpack_strings(pa.scalar(packed, pa.binary())).to_pylist() == values


def test_pack_slices_chunks_and_binary() -> None:
    arr = pa.array([f"key-{i}" for i in range(100)])
    assert unpack_strings(pack_strings(arr.slice(10, 5))).to_pylist() == [f"key-{i}" for i in range(10, 15)]
    chunked = pa.chunked_array([arr.slice(0, 3), arr.slice(3, 2)])
    assert unpack_strings(pack_strings(chunked)).to_pylist() == [f"key-{i}" for i in range(5)]
    assert unpack_strings(pack_strings(pa.array([b"ab"], pa.binary()))).to_pylist() == ["ab"]


def test_unpack_null_is_empty() -> None:
    assert unpack_strings(None).to_pylist() == []
    assert unpack_strings(pa.scalar(None, pa.binary())).to_pylist() == []


@pytest.mark.parametrize("value", ["", "x", "20261126203922937", "é✓"])
@pytest.mark.parametrize("n", [0, 1, 7])
def test_constant_strings(value: str, n: int) -> None:
    a = constant_strings(value, n)
    a.validate(full=True)
    assert a.type == pa.string() and a.to_pylist() == [value] * n


def test_numbered_strings() -> None:
    a = numbered_strings("i_3_", 98, 4)
    a.validate(full=True)
    assert a.to_pylist() == ["i_3_98", "i_3_99", "i_3_100", "i_3_101"]
    assert numbered_strings("p", 0, 0).to_pylist() == []


def test_constant_strings_chunked_past_one_array(monkeypatch: pytest.MonkeyPatch) -> None:
    import pyhudi.io.arrow as arrow_mod

    monkeypatch.setattr(arrow_mod, "_MAX_STRING_BYTES", 10)  # 3 copies of a 3-byte value per chunk
    a = constant_strings("abc", 7)
    assert isinstance(a, pa.ChunkedArray) and [len(c) for c in a.chunks] == [3, 3, 1]
    assert a.to_pylist() == ["abc"] * 7
    assert constant_strings("", 5).to_pylist() == [""] * 5

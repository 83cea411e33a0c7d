"""The HFile fixture vectors and the exact content they hold (imported by the HFile tests)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.paths import HFILE_VECTORS as VECTORS


@dataclass(frozen=True)
class Vector:
    name: str
    n_keys: int
    key_fmt: str  # %-format of the i-th row
    dup: int = 0  # extra cells per key (non_unique file): values ..._0 .. ..._{dup-1}
    blocks: int | None = None  # number of data blocks (hfile-v3.md section 13)
    levels: int = 1

    @property
    def path(self) -> Path:
        return VECTORS / self.name

    def key(self, i: int) -> bytes:
        return (self.key_fmt % i).encode()

    @staticmethod
    def index_of(row: bytes) -> int:
        """i such that key(i) == row."""
        m = re.search(rb"\d{9}", row)
        assert m is not None, row
        return int(m.group())

    @staticmethod
    def value(i: int) -> bytes:
        return b"hudi-value-%09d" % i

    def cells(self) -> tuple[list[bytes], list[bytes]]:
        """Every (row, value) cell of the file, in file order."""
        keys: list[bytes] = []
        values: list[bytes] = []
        for i in range(self.n_keys):
            k, v = self.key(i), self.value(i)
            keys.append(k)
            values.append(v)
            for j in range(self.dup):
                keys.append(k)
                values.append(v + b"_%d" % j)
        return keys, values


# The fixtures README says 108 x "a"; the files hold 100 (rows are 119 bytes; hfile.AVG_KEY_LEN = 131 = 119 + 12).
LARGE = "hudi-key-" + "a" * 100 + "-%09d"
VECTOR_LIST = [
    Vector("hudi_1_0_hbase_2_4_9_16KB_GZ_20000.hfile", 20000, "hudi-key-%09d", blocks=72),
    Vector("hudi_1_0_hbase_2_4_9_512KB_GZ_20000.hfile", 20000, "hudi-key-%09d", blocks=3),
    Vector("hudi_1_0_hbase_2_4_9_16KB_NONE_5000.hfile", 5000, "hudi-key-%09d", blocks=18),
    Vector("hudi_1_0_hbase_2_4_9_64KB_NONE_5000.hfile", 5000, "hudi-key-%09d", blocks=5),
    Vector("hudi_1_0_hbase_2_4_9_16KB_GZ_200_20_non_unique.hfile", 200, "hudi-key-%09d", dup=20, blocks=16),
    Vector("hudi_1_0_hbase_2_4_13_1KB_GZ_20000_large_keys.hfile", 20000, LARGE, levels=2),
    Vector("hudi_1_0_hbase_2_4_13_1KB_GZ_10000_large_keys_deep_index.hfile", 10000, LARGE, levels=3),
    Vector(
        "hudi_1_0_hbase_2_4_13_16KB_GZ_20000_fake_first_key.hfile",
        20000,
        "hudi-key-%09d-abcdefghij",
        blocks=86,
    ),
]
VECTORS_BY_NAME = {v.name: v for v in VECTOR_LIST}
EMPTY_VECTOR = VECTORS / "hudi_1_0_hbase_2_4_9_no_entry.hfile"
GZ_20000 = VECTORS / "hudi_1_0_hbase_2_4_9_16KB_GZ_20000.hfile"
NONE_5000 = VECTORS / "hudi_1_0_hbase_2_4_9_16KB_NONE_5000.hfile"
FAKE_FIRST_KEY = VECTORS_BY_NAME["hudi_1_0_hbase_2_4_13_16KB_GZ_20000_fake_first_key.hfile"]


def require_vectors() -> None:
    if not VECTORS.is_dir():
        pytest.skip("HFile fixture vectors not available")

"""Choosing the Spark partition of a row from Python: values that ``DataFrame.repartition(n, col)`` sends to a
given partition.

Spark's hash partitioning puts a row with an ``int`` key ``v`` in partition ``pmod(murmur3_32(v, seed 42), n)``
(``HashPartitioning``, the same hash as ``F.hash``). A task that computes, per row, the partition it wants and
writes :func:`partition_keys` ``(n)[p]`` into an int column makes ``repartition(n, that column)`` a
pass-through (as Hudi's ``PartitionIdPassthrough``): rows land exactly where the task put them, with no hash
collisions piling several groups into one partition.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: transient int column holding the Spark partition key of a routed row (never written to a table)
ROUTE_COL = "_hoodie_route"
_M32 = 0xFFFFFFFF
_SEED = 42  # HashPartitioning's (and F.hash's) Murmur3 seed


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def spark_hash_int(v: int, seed: int = _SEED) -> int:
    """Spark's ``Murmur3_x86_32.hashInt(v, seed)`` (a signed 32-bit int), i.e. ``F.hash`` of an int column."""
    k1 = _rotl32((v & _M32) * 0xCC9E2D51 & _M32, 15) * 0x1B873593 & _M32
    h1 = (_rotl32(seed ^ k1, 13) * 5 + 0xE6546B64) & _M32
    h1 ^= 4  # the input's length in bytes
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _M32
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _M32
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


@lru_cache(maxsize=64)
def partition_keys(n: int) -> np.ndarray:
    """``keys[p]``, for p in 0..n-1: the smallest non-negative int that Spark's hash partitioning into ``n``
    partitions sends to partition ``p``."""
    if n < 1:
        raise ValueError(f"partition count must be positive, got {n}")
    keys = np.full(n, -1, np.int32)
    left, v = n, 0
    while left:
        p = spark_hash_int(v) % n  # Python's % of a positive n is Spark's pmod
        if keys[p] < 0:
            keys[p] = v
            left -= 1
        v += 1
    keys.setflags(write=False)
    return keys


def route_values(partition_ids: np.ndarray, n: int) -> pa.Array:
    """Values of :data:`ROUTE_COL` that ``repartition(n, ROUTE_COL)`` sends to ``partition_ids`` exactly."""
    return pa.array(partition_keys(n)[partition_ids], pa.int32())


def group_runs(ids: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """The stable order sorting the integer array ``ids`` by value, and (id, start, end) of each value's run in
    that order, ids ascending: one stable sort."""
    if not len(ids):
        return np.zeros(0, np.int64), []
    order = np.argsort(ids, kind="stable")
    ordered = ids[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]).tolist()
    ends = [*starts[1:], len(ordered)]
    return order, [(int(ordered[lo]), lo, hi) for lo, hi in zip(starts, ends, strict=True)]


def positions_by_group(ids: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(id, the positions holding it) for each distinct value of the integer array ``ids`` (the bucket or file
    group of each row a task received), ids ascending, positions in their order: one stable sort."""
    order, runs = group_runs(ids)
    for gid, lo, hi in runs:
        yield gid, order[lo:hi]


class KeyRouting(ABC):
    """How an index wants the incoming records partitioned for its tag: into ``partitions`` Spark partitions,
    a record's chosen from its key. The write's prepare stage routes the records in the shuffle it already makes
    (the combine of duplicate keys), so a tag task holds all the incoming keys of its part of the index."""

    partitions: int

    @abstractmethod
    def partition_of(self, keys: pa.Array) -> np.ndarray:
        """The partition (0 .. partitions-1) of every key."""

    def route_column(self, keys: pa.Array) -> pa.Array:
        """Values of :data:`ROUTE_COL` that ``repartition(partitions, ROUTE_COL)`` sends to
        :meth:`partition_of` exactly."""
        return route_values(self.partition_of(keys), self.partitions)


def route(records: DataFrame, routing: KeyRouting, key_col: str) -> DataFrame:
    """Spark: ``records`` repartitioned as ``routing`` says (one shuffle; records a prepare stage did not route)."""
    from pyspark.sql.types import IntegerType, StructField, StructType

    def add_route(batches):
        for b in batches:
            yield b.append_column(ROUTE_COL, routing.route_column(b.column(key_col)))

    schema = StructType([*records.schema.fields, StructField(ROUTE_COL, IntegerType())])
    return records.mapInArrow(add_route, schema).repartition(routing.partitions, ROUTE_COL).drop(ROUTE_COL)

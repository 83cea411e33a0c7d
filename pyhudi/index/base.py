"""The index interface: tag incoming records with the file group that currently holds their key."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from pyhudi.spark.partitioning import ROUTE_COL, route_values

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from pyhudi.write.context import WriteJob

LOC_PARTITION_COL = "_hoodie_loc_partition"
LOC_FILE_ID_COL = "_hoodie_loc_file_id"


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


class Index(ABC):
    """Adds ``_hoodie_loc_partition`` / ``_hoodie_loc_file_id`` to prepared records (null: a new key).

    A global index finds a key in any partition; what happens to a key that arrives with a new partition value
    is :func:`pyhudi.write.producer.apply_partition_moves`'s job, shared by every global index.
    """

    name: str = ""
    is_global: bool = False

    @abstractmethod
    def tag(self, job: WriteJob, records: DataFrame) -> DataFrame: ...

    def routing(self, job: WriteJob) -> KeyRouting | None:
        """How this index wants the write's prepared records partitioned (None: as Spark likes)."""
        return None

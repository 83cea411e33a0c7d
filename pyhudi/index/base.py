"""The index interface: tag incoming records with the file group that currently holds their key."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from pyhudi.spark.partitioning import KeyRouting

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from pyhudi.write.context import WriteJob

LOC_PARTITION_COL = "_hoodie_loc_partition"
LOC_FILE_ID_COL = "_hoodie_loc_file_id"


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

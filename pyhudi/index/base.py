"""The index interface: tag incoming records with the file group that currently holds their key."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from pyhudi.errors import ConfigError

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


def index_for(index_type: str) -> Index:
    from pyhudi.index.simple import SimpleIndex

    t = index_type.upper()
    if t == "RECORD_INDEX":
        from pyhudi.index.record import RecordLevelIndex

        return RecordLevelIndex()
    if t == "SIMPLE":
        return SimpleIndex(is_global=False)
    if t == "GLOBAL_SIMPLE":
        return SimpleIndex(is_global=True)
    if t in ("BLOOM", "GLOBAL_BLOOM"):
        from pyhudi.index.bloom import BloomIndex

        return BloomIndex(is_global=t == "GLOBAL_BLOOM")
    raise ConfigError(f"option hoodie.index.type: index {index_type!r} is not available")

"""The metadata table's layout on disk: where it lives, its partitions and their file groups, its
initialisation instants, and the record-index build in progress on the data timeline (an ``indexing`` instant)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from pyhudi.errors import UnsupportedTableError
from pyhudi.table.properties import METAFOLDER
from pyhudi.table.timeline import INDEXING, ActiveTimeline

METADATA_FOLDER = "metadata"
FILES = "files"
RECORD_INDEX = "record_index"
COLUMN_STATS = "column_stats"
PARTITION_STATS = "partition_stats"
#: partition initialisation instants: 14 zeros + a 3-digit partition offset (also "solo commits" to readers)
INIT_PREFIX = "00000000000000"
RLI_INIT_OFFSET = 2  # record_index initialises at 00000000000000002, as in Hudi 1.1 tables
RLI_INIT_INSTANT = f"{INIT_PREFIX}{RLI_INIT_OFFSET:03d}"
COLUMN_STATS_INIT_INSTANT = f"{INIT_PREFIX}001"
PARTITION_STATS_INIT_INSTANT = f"{INIT_PREFIX}003"
DRIVER_TOKEN = "0-0-0"  # write token of metadata files written on the driver
FILE_GROUP_COUNT_KEY = "recordIndexFileGroupCount"  # extraMetadata of the indexing plan's partition info

_FILE_GROUP_PREFIX = {FILES: "files", COLUMN_STATS: "col-stats"}


def metadata_base_path(base_path: str) -> str:
    """``<base>/.hoodie/metadata``."""
    return posixpath.join(base_path.rstrip("/"), METAFOLDER, METADATA_FOLDER)


def file_group_id(partition: str, index: int) -> str:
    """``files-0000-0``, ``record-index-0003-0``, ``col-stats-0001-0``, ...: the id of a metadata partition's file
    group."""
    prefix = _FILE_GROUP_PREFIX.get(partition, partition.replace("_", "-"))
    return f"{prefix}-{index:04d}-0"


@dataclass(frozen=True)
class IndexingPlan:
    instant: str  # the indexing instant on the data timeline
    up_to: str | None  # indexUptoInstant: latest completed instant at scheduling
    file_groups: int


def pending_indexing(timeline: ActiveTimeline) -> IndexingPlan | None:
    """The record-index build in progress on a data timeline (a pending ``indexing`` instant), if any: pyhudi's
    own. An index build of Apache Hudi's async indexer (its plan names no ``recordIndexFileGroupCount``, or another
    partition: ``ScheduleIndexActionExecutor``) runs in that indexer's process, which pyhudi's writes cannot take
    part in: :class:`UnsupportedTableError` naming it (a write would drop the partition it builds, or fail)."""
    found = None
    for inst in timeline.by_action(INDEXING).pending():
        plan = timeline.read_plan(INDEXING, inst.requested_time)
        for info in plan.get("indexPartitionInfos") or []:
            extra = info.get("extraMetadata") or {}
            partition = info.get("metadataPartitionPath")
            if partition != RECORD_INDEX or FILE_GROUP_COUNT_KEY not in extra:
                raise UnsupportedTableError(
                    f"{posixpath.dirname(posixpath.dirname(timeline.timeline_dir))}: the metadata partition "
                    f"{partition!r} is being built by another indexer (indexing {inst.requested_time}, whose plan "
                    f"names no {FILE_GROUP_COUNT_KEY}, as Apache Hudi's does not): pyhudi does not write into a "
                    "table while another process builds an index of it, and refuses until that build has completed"
                )
            found = found or IndexingPlan(inst.requested_time, info.get("indexUptoInstant"),
                                          int(extra[FILE_GROUP_COUNT_KEY]))
    return found

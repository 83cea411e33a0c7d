"""Reading a scan plan on Spark: one task per file slice, or per group of small slices.

The slices are packed into tasks by size (largest first, each into the task with the fewest bytes so far; a
slice is never split): as many tasks as slices when there are few, about ``pyhudi.read.split.bytes`` of files
per task otherwise, never fewer than the session's parallelism allows. Each row of the driver's tiny input is
one slice -- its description pickled (relative paths, sizes) -- routed to its task's partition exactly
(:mod:`pyhudi.spark.partitioning`); the read's common description (storage, base path, schema, merge mode and
ordering fields, the instants whose log blocks count, filters) travels in the task closure. Tasks read through
:class:`~pyhudi.io.storage.Storage` and return Arrow batches (``mapInArrow``).
"""

from __future__ import annotations

import heapq
import pickle
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from pyhudi.read.plan import ScanPlan
from pyhudi.read.slice_reader import FileSliceReader, ReadSpec
from pyhudi.spark.frames import local_frame
from pyhudi.spark.partitioning import ROUTE_COL, route_values

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def pack_tasks(sizes: list[int], split_bytes: int, min_tasks: int) -> list[int]:
    """The task of each slice: ``max(min_tasks, total / split_bytes)`` tasks (at most one per slice), slices
    assigned largest first to the least loaded task."""
    n = len(sizes)
    if n == 0:
        return []
    total = sum(max(s, 1) for s in sizes)
    tasks = max(1, min(n, max(min_tasks, -(-total // max(split_bytes, 1)))))
    heap = [(0, t) for t in range(tasks)]
    out = [0] * n
    for i in sorted(range(n), key=lambda i: -sizes[i]):
        load, t = heapq.heappop(heap)
        out[i] = t
        heapq.heappush(heap, (load + max(sizes[i], 1), t))
    return out


def _read_task(spec: ReadSpec):
    """mapInArrow function: the merged records of the slices in its input rows."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for raw in b.column(1).to_pylist():
                yield from FileSliceReader(spec, pickle.loads(raw)).batches()

    return run


def read_dataframe(spark: SparkSession, plan: ScanPlan, split_bytes: int) -> DataFrame:
    """The plan's records as a Spark DataFrame (lazy: the slices are read when an action runs)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = from_arrow_schema(plan.read.schema)
    if not plan.slices:
        return local_frame(spark, [], schema)
    task_of = pack_tasks([s.size for s in plan.slices], split_bytes, spark.sparkContext.defaultParallelism)
    n = max(task_of) + 1
    routes = route_values(np.array(task_of, np.int64), n).to_pylist()
    rows = [(r, pickle.dumps(s)) for r, s in zip(routes, plan.slices, strict=True)]
    src = local_frame(spark, rows, f"{ROUTE_COL} int, slice binary").repartition(n, ROUTE_COL)
    return src.mapInArrow(_read_task(plan.read), schema)

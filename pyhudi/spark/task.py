"""Identity of the running Spark task, for file names written from tasks."""

from __future__ import annotations


def task_ids() -> tuple[int, str]:
    """(task partition id, write token ``<partitionId>-<stageId>-<attemptId>``) of the running Spark task."""
    try:
        from pyspark import TaskContext

        tc = TaskContext.get()
    except ImportError:  # pragma: no cover - pyspark is a dependency
        tc = None
    if tc is None:
        return 0, "0-0-0"
    return tc.partitionId(), f"{tc.partitionId()}-{tc.stageId()}-{tc.taskAttemptId()}"

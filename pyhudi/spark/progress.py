"""Progress of a write on a terminal: the current stage and the share of its Spark tasks done."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class Progress:
    """Shows ``<stage> <pct>%`` on stderr while Spark jobs run; does nothing unless enabled on a terminal."""

    def __init__(self, spark: SparkSession | None, enabled: bool = True, interval_s: float = 0.5) -> None:
        self.spark = spark
        self.enabled = enabled and sys.stderr.isatty() and spark is not None
        self.interval_s = interval_s
        self._stage = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _pct(self) -> float | None:
        assert self.spark is not None
        tracker = self.spark.sparkContext.statusTracker()
        total = done = 0
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info is not None:
                total += info.numTasks
                done += info.numCompletedTasks
        return 100.0 * done / total if total else None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            pct = self._pct()
            text = f"{self._stage:<10}" + (f" {pct:5.1f}%" if pct is not None else "")
            sys.stderr.write("\r" + text.ljust(30))
            sys.stderr.flush()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self._stage = name
        yield
        if self.enabled:
            sys.stderr.write("\r" + f"{name:<10} 100.0%".ljust(30) + "\n")
            sys.stderr.flush()

    def __enter__(self) -> Progress:
        if self.enabled:
            self._thread = threading.Thread(target=self._loop, name="pyhudi-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

"""Fault points: named places in the commit path, the table services and the write tasks where crash tests make
pyhudi fail, hang or die, or run code of their own. One mechanism for every layer.

A point is reached with :func:`at`. What happens there comes from

- a *spec* string, from the write option ``pyhudi.test.fault`` or the environment variable ``PYHUDI_TEST_FAULT``
  (so a test can aim at a CLI process or a Spark task): comma-separated entries, each ``<point>`` (raise
  :class:`InjectedFault`), ``hang_<point>`` (sleep an hour: a process for the test to kill), ``kill_<point>``
  (SIGKILL the process itself: a real ``kill -9`` at an exact place) or ``wait_<point>`` (create the file
  ``$PYHUDI_TEST_FAULT_RELEASE.waiting``, then wait until ``$PYHUDI_TEST_FAULT_RELEASE`` exists: two processes
  interleaved exactly) or ``retry_<point>`` (raise in the first attempt of a Spark task only: a task that fails
  once and succeeds when the scheduler retries it, as on a cluster);
- handlers registered in this process with :func:`inject` (a callable run at the point, e.g. one that raises or
  that runs a concurrent write; ``"name.*"`` matches every point under ``name.``).

Points (see the callers): ``before_start`` (a write's instant time is reserved, nothing is on the timeline yet),
``after_write`` (a write task, after its data file), ``before_commit`` (the driver, after every data file), ``before_data_commit`` (after the metadata-table deltacommit, before the data instant
completes), ``after_data_commit``, ``rollback.<step>``, ``clean.<step>``, ``index.<phase>``,
``metadata.compaction.before_complete``.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pyhudi.config import FAULT

ENV = "PYHUDI_TEST_FAULT"
RELEASE_ENV = "PYHUDI_TEST_FAULT_RELEASE"

Handler = Callable[[str], None]
_handlers: list[tuple[str, Handler]] = []


class InjectedFault(RuntimeError):
    """Raised at a fault point a test aimed at."""


def spec(options: Mapping[str, Any] | None = None) -> str | None:
    """The fault spec of a write: its ``pyhudi.test.fault`` option, else ``PYHUDI_TEST_FAULT``."""
    v = (options or {}).get(FAULT) or os.environ.get(ENV)
    return str(v) if v else None


def _matches(pattern: str, point: str) -> bool:
    return pattern == point or (pattern.endswith(".*") and point.startswith(pattern[:-1]))


def at(point: str, fault_spec: str | None = None) -> None:
    """Reach ``point``: run the handlers injected for it, then act on ``fault_spec`` (default: the environment)."""
    for pattern, handler in list(_handlers):
        if _matches(pattern, point):
            handler(point)
    s = fault_spec if fault_spec is not None else os.environ.get(ENV)
    if not s:
        return
    for entry in (e.strip() for e in s.split(",")):
        if entry == point:
            raise InjectedFault(f"injected fault: {point}")
        if entry == f"hang_{point}":
            time.sleep(3600)
        if entry == f"kill_{point}":
            os.kill(os.getpid(), signal.SIGKILL)
        if entry == f"wait_{point}":
            _wait_for_release(point)
        if entry == f"retry_{point}" and _first_task_attempt():
            raise InjectedFault(f"injected fault: {point} (first attempt of the task)")


def _first_task_attempt() -> bool:
    """In a Spark task, and its first attempt (the scheduler retries it when the master allows)."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return False
    tc = TaskContext.get()
    return tc is not None and tc.attemptNumber() == 0


def _wait_for_release(point: str, timeout_s: float = 600) -> None:
    release = os.environ.get(RELEASE_ENV)
    if not release:
        raise InjectedFault(f"wait_{point} needs {RELEASE_ENV} (a file whose creation releases the wait)")
    with open(f"{release}.waiting", "w") as f:
        f.write(point)
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(release):
        if time.monotonic() > deadline:
            raise InjectedFault(f"wait_{point}: {release} did not appear in {timeout_s:.0f} s")
        time.sleep(0.05)


@contextmanager
def inject(point: str, handler: Handler | None = None) -> Iterator[None]:
    """Run ``handler`` (default: raise :class:`InjectedFault`) whenever this process reaches ``point``
    (``"name.*"``: any point under ``name.``) inside the ``with`` block."""

    def raise_(p: str) -> None:
        raise InjectedFault(f"injected fault: {p}")

    entry = (point, handler or raise_)
    _handlers.append(entry)
    try:
        yield
    finally:
        _handlers.remove(entry)

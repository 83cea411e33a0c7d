"""Thread pools a process shares, one per purpose: made on first use, and forgotten in a forked child (PySpark
forks its Python workers from a daemon; a child has none of its parent's threads and starts its own pool).

A pool per call instead starts its threads every time: reading a merge-on-read table's 2,190 file slices (5,398
log files) started a decoding pool and a prefetching thread per slice, about a tenth of the Python workers' time.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

_POOLS: dict[str, ThreadPoolExecutor] = {}
_LOCK = threading.Lock()


def shared_pool(name: str, workers: int) -> ThreadPoolExecutor:
    """This process's pool named ``name`` (its threads' name prefix), made with ``workers`` threads on first use."""
    with _LOCK:
        pool = _POOLS.get(name)
        if pool is None:
            pool = _POOLS[name] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        return pool


def _forget_in_child() -> None:
    global _LOCK
    _POOLS.clear()
    _LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)

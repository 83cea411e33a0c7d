"""Instruments for benchmarks: bytes read through the storage layer, OS read counters and peak memory of a
process tree, and the write stages they happened in.

Bytes read, two ways:

* table bytes (``CountingStorage``): every byte pyhudi reads from a table's files goes through
  :class:`~pyhudi.io.storage.Storage` (``open_input`` and ``fs``, which base-file reads hand to Arrow's dataset
  scanner). A ``CountingStorage`` wraps the local filesystem in a :class:`pyarrow.fs.PyFileSystem` whose input
  files count the bytes each ``read``/``read_at`` returns, by kind of file (record-index HFiles, the rest of the
  metadata table, the timeline, data files). Storages pickle into Spark tasks, so the Python workers count too;
  every process adds its running totals to a small file of its own in a shared directory (one ``pwrite`` per
  read), and :func:`table_bytes_read` sums them. This is what an object store would have served.
* OS reads (:func:`tree_rchar`): ``rchar`` of ``/proc/<pid>/io`` summed over a process tree (the bytes the
  processes got from ``read``/``pread`` system calls: files whether or not the page cache held them, Spark's
  shuffle files, pipes). A reaped child's counts stay in its parent's, so a delta over a run is whole.

Peak memory (:class:`PeakRSS`): a thread samples the resident set size of a process and all its descendants
(for a Spark write: the driver's Python, the JVM, the Python workers) every ``interval_s`` and keeps the
largest sum and its parts. Forked workers share some pages with their parent, so the sum can count a page twice;
a spike shorter than the interval can be missed.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from pyhudi.io.storage import Storage

KINDS = ("record_index", "metadata_other", "timeline", "data_files")
_FMT = "<" + "q" * len(KINDS)


def kind_of(path: str) -> int:
    """The index in :data:`KINDS` of a table file path."""
    p = path.replace("\\", "/")
    if "/.hoodie/metadata/record_index/" in p:
        return 0
    if "/.hoodie/metadata/" in p:
        return 1
    if "/.hoodie/" in p or p.endswith("/.hoodie"):
        return 2
    return 3


class _ProcessCounter:
    """This process's totals per kind, mirrored into ``<dir>/<pid>-<token>`` after every read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = -1
        self._fd: dict[str, int] = {}
        self._totals: dict[str, list[int]] = {}

    def add(self, counter_dir: str, kind: int, n: int) -> None:
        with self._lock:
            if self._pid != os.getpid():  # forked: start afresh under this pid
                self._pid = os.getpid()
                self._fd, self._totals = {}, {}
            fd = self._fd.get(counter_dir)
            if fd is None:
                name = posixpath.join(counter_dir, f"{self._pid}-{os.urandom(4).hex()}")
                fd = os.open(name, os.O_CREAT | os.O_WRONLY, 0o644)
                self._fd[counter_dir] = fd
                self._totals[counter_dir] = [0] * len(KINDS)
            tot = self._totals[counter_dir]
            tot[kind] += n
            os.pwrite(fd, struct.pack(_FMT, *tot), 0)


_COUNTER = _ProcessCounter()


class _CountingReader:
    """A file object over a pyarrow input file that counts the bytes it hands out."""

    def __init__(self, f: pa.NativeFile, counter_dir: str, kind: int) -> None:
        self._f = f
        self._dir = counter_dir
        self._kind = kind
        self.closed = False
        self.mode = "rb"

    def read(self, nbytes: int | None = None) -> Any:
        buf = self._f.read_buffer(nbytes) if nbytes is not None and nbytes >= 0 else self._f.read_buffer()
        if buf.size:
            _COUNTER.add(self._dir, self._kind, buf.size)
        return buf

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def size(self) -> int:
        return self._f.size()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        if not self.closed:
            self._f.close()
            self.closed = True


class CountingHandler(pafs.FileSystemHandler):
    """A local filesystem whose input files count the bytes read (see the module docstring)."""

    def __init__(self, counter_dir: str) -> None:
        self.counter_dir = counter_dir
        self.fs = pafs.LocalFileSystem()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CountingHandler) and other.counter_dir == self.counter_dir

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    def get_type_name(self) -> str:
        return "counting-local"

    def normalize_path(self, path: str) -> str:
        return self.fs.normalize_path(path)

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return self.fs.get_file_info(paths)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return self.fs.get_file_info(selector)

    def create_dir(self, path: str, recursive: bool) -> None:
        self.fs.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.fs.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise OSError("refusing to delete the root directory's contents")

    def delete_file(self, path: str) -> None:
        self.fs.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self.fs.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self.fs.copy_file(src, dest)

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return pa.PythonFile(_CountingReader(self.fs.open_input_stream(path), self.counter_dir, kind_of(path)), mode="r")

    def open_input_file(self, path: str) -> pa.NativeFile:
        return pa.PythonFile(_CountingReader(self.fs.open_input_file(path), self.counter_dir, kind_of(path)), mode="r")

    def open_output_stream(self, path: str, metadata: Any = None) -> pa.NativeFile:
        return self.fs.open_output_stream(path, metadata=metadata)

    def open_append_stream(self, path: str, metadata: Any = None) -> pa.NativeFile:
        return self.fs.open_append_stream(path, metadata=metadata)


class CountingStorage(Storage):
    """A local :class:`Storage` counting the bytes read from table files (pickles into Spark tasks as itself)."""

    def __init__(self, counter_dir: str) -> None:
        super().__init__(pafs.PyFileSystem(CountingHandler(counter_dir)))
        self.counter_dir = counter_dir

    @property
    def is_local(self) -> bool:
        return True

    def __reduce__(self) -> tuple[Any, ...]:
        return (CountingStorage, (self.counter_dir,), self._pickled_state())


@contextlib.contextmanager
def counting_storage(counter_dir: str) -> Iterator[str]:
    """While active, local tables opened by path (``Table.open``/``Table.create``) read through a
    :class:`CountingStorage` writing to ``counter_dir``."""
    os.makedirs(counter_dir, exist_ok=True)
    original = Storage.from_uri

    def from_uri(uri: str) -> tuple[Storage, str]:
        storage, path = original(uri)
        if isinstance(storage.fs, pafs.LocalFileSystem):
            return CountingStorage(counter_dir), path
        return storage, path

    Storage.from_uri = staticmethod(from_uri)  # type: ignore[method-assign]
    try:
        yield counter_dir
    finally:
        Storage.from_uri = staticmethod(original)  # type: ignore[method-assign]


def table_bytes_read(counter_dir: str) -> dict[str, int]:
    """Bytes read so far through counting storages writing to ``counter_dir``, per kind and in total."""
    tot = [0] * len(KINDS)
    size = struct.calcsize(_FMT)
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(counter_dir):
            with open(os.path.join(counter_dir, name), "rb") as f:
                data = f.read(size)
            if len(data) == size:
                for i, v in enumerate(struct.unpack(_FMT, data)):
                    tot[i] += v
    out = dict(zip(KINDS, tot, strict=True))
    out["total"] = sum(tot)
    return out


def diff_counts(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after.get(k, 0) - before.get(k, 0) for k in after}


# -- OS counters and memory -----------------------------------------------------------------------------------
INSTALL_HINT = "install the benchmark extras: pip install -e '.[bench]' (or make bench)"


def require_psutil() -> Any:
    try:
        import psutil
    except ImportError as e:
        raise ImportError(f"memory sampling needs psutil; {INSTALL_HINT}") from e
    return psutil


def _tree(pid: int) -> list[Any]:
    psutil = require_psutil()

    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def tree_rchar(pid: int | None = None) -> int | None:
    """``rchar`` summed over ``pid`` (default: this process) and its descendants; None where /proc has no io."""
    total = 0
    for p in _tree(pid or os.getpid()):
        try:
            with open(f"/proc/{p.pid}/io") as f:
                for line in f:
                    if line.startswith("rchar:"):
                        total += int(line.split()[1])
                        break
        except FileNotFoundError:
            continue
        except PermissionError:
            return None
    return total


def self_rchar() -> int | None:
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("rchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _role(p: Any, root_pid: int) -> str:
    if p.pid == root_pid:
        return "driver"
    try:
        name = p.name().lower()
    except Exception:
        return "other"
    if "java" in name:
        return "jvm"
    if "python" in name:
        return "python_workers"
    return "other"


#: :class:`PeakRSS` reads the tree's PSS when its RSS is at least this share of its peak so far ...
PSS_NEAR_PEAK = 0.9
#: ... at most this often (seconds) ...
PSS_MIN_INTERVAL_S = 0.25
#: ... and at least this often
PSS_MAX_INTERVAL_S = 2.0


@dataclass
class PeakRSS:
    """Samples the RSS of ``pid`` (default: this process) and its descendants every ``interval_s``; the largest
    sum seen (``peak``), its parts by role (driver, jvm, python_workers), and per-window peaks
    (:meth:`peak_between`) from the kept samples. RSS counts a page shared by several processes (Python workers
    forked from one daemon share its loaded modules) once per process; ``peak_pss`` is the largest sum of the
    proportional set sizes (each shared page divided among its sharers: what the tree holds of the machine's
    memory), with its parts ``peak_pss_parts``. RSS is read at every sample (``/proc/<pid>/statm``: cheap); PSS
    needs the kernel to walk every mapping (``smaps``: about 16 ms of CPU per GB of process), which every 50 ms
    took most of a core and slowed a 5M-row bulk load by a quarter, so it is read when the tree's RSS is within
    :data:`PSS_NEAR_PEAK` of its peak so far, at most every :data:`PSS_MIN_INTERVAL_S`, and at least every
    :data:`PSS_MAX_INTERVAL_S`."""

    pid: int | None = None
    interval_s: float = 0.05
    peak: int = 0
    peak_parts: dict[str, int] = field(default_factory=dict)
    peak_pss: int = 0
    peak_pss_parts: dict[str, int] = field(default_factory=dict)
    samples: list[tuple[float, int]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _pss_at: float = float("-inf")

    def sample(self) -> int:
        root = self.pid or os.getpid()
        now = time.perf_counter()
        procs = []
        parts: dict[str, int] = {}
        for p in _tree(root):
            try:
                rss = p.memory_info().rss
            except Exception:
                continue
            r = _role(p, root)
            procs.append((p, r, rss))
            parts[r] = parts.get(r, 0) + rss
        total = sum(parts.values())
        self.samples.append((now, total))
        if total > self.peak:
            self.peak, self.peak_parts = total, parts
        since = now - self._pss_at
        if since >= PSS_MAX_INTERVAL_S or (since >= PSS_MIN_INTERVAL_S and total >= PSS_NEAR_PEAK * self.peak):
            self._pss_at = now
            pss_parts: dict[str, int] = {}
            for p, r, rss in procs:
                try:
                    pss = getattr(p.memory_full_info(), "pss", rss)
                except Exception:
                    pss = rss
                pss_parts[r] = pss_parts.get(r, 0) + pss
            if sum(pss_parts.values()) > self.peak_pss:
                self.peak_pss, self.peak_pss_parts = sum(pss_parts.values()), pss_parts
        return total

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> PeakRSS:
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="bench-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()

    def peak_between(self, t0: float, t1: float) -> int | None:
        vals = [v for t, v in self.samples if t0 <= t <= t1]
        return max(vals) if vals else None


# -- write stages ---------------------------------------------------------------------------------------------
@dataclass
class StageProbe:
    """Wraps ``WriteJob.timed`` (the write's stage timer) so every stage also records its start/end time and the
    table bytes read during it. Measurement only: the stage runs unchanged."""

    counter_dir: str | None
    stages: list[dict[str, Any]] = field(default_factory=list)

    @contextlib.contextmanager
    def installed(self) -> Iterator[StageProbe]:
        from pyhudi.write.context import WriteJob

        original = WriteJob.timed
        probe = self

        @contextlib.contextmanager
        def timed(job: Any, stage: str) -> Iterator[None]:
            before = table_bytes_read(probe.counter_dir) if probe.counter_dir else None
            t0 = time.perf_counter()
            try:
                with original(job, stage):
                    yield
            finally:
                t1 = time.perf_counter()
                rec: dict[str, Any] = {"stage": stage, "t0": t0, "t1": t1}
                if before is not None and probe.counter_dir:
                    rec["bytes"] = diff_counts(table_bytes_read(probe.counter_dir), before)
                probe.stages.append(rec)

        WriteJob.timed = timed  # type: ignore[method-assign,assignment]
        try:
            yield self
        finally:
            WriteJob.timed = original  # type: ignore[method-assign]

    def window(self, stage: str) -> tuple[float, float] | None:
        recs = [s for s in self.stages if s["stage"] == stage]
        return (recs[0]["t0"], recs[-1]["t1"]) if recs else None

    def bytes_of(self, stage: str) -> dict[str, int] | None:
        recs = [s["bytes"] for s in self.stages if s["stage"] == stage and "bytes" in s]
        if not recs:
            return None
        out: dict[str, int] = {}
        for r in recs:
            for k, v in r.items():
                out[k] = out.get(k, 0) + v
        return out


def timed_call(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out

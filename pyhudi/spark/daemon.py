"""The Python daemon of pyhudi's Spark sessions (``spark.python.daemon.module``).

PySpark forks every Python worker of an executor from one daemon process. This daemon first loads what the
tasks' hot paths use -- pyarrow, the HFile writer and reader with their compiled kernels, the record-index
routing, the file-slice reader's Avro decoder and merge kernels -- and only then hands over to PySpark's own daemon, so a new worker inherits them instead of loading
the kernels on its first task (about 0.2 s per worker on a 2-core machine: a record-index lookup of 100k keys
took 0.40-0.55 s in a fresh process against 0.21-0.30 s in a warm one). What it loaded is then frozen for the
garbage collector (:func:`gc.freeze`): the full collection PySpark runs after each task of a reused worker
skips it. The warm-up is an optimisation only: if it fails the daemon starts anyway (the error goes to
stderr, the executor's log), and it writes nothing to stdout (PySpark reads the daemon's port there). Set for
local masters by :func:`pyhudi.spark.session.get_spark`.
"""

from __future__ import annotations

import gc
import os
import sys
import traceback
from importlib.machinery import PathFinder


def warm_up() -> None:
    """Run the HFile writer and reader and the record-index routing once on a tiny in-memory file, so their
    compiled kernels are loaded with the argument types the tasks use. Starts no Python threads (the daemon
    forks; the HFile reader's block pool is not created)."""
    import pyarrow as pa

    from pyhudi.hfile import HFileReader, hfile_bytes
    from pyhudi.io.compression import CODEC_GZ
    from pyhudi.metadata.record_index import file_groups_of

    keys = pa.array([b"k0", b"k1", b"k2"], pa.binary())
    data, _ = hfile_bytes(keys, keys, codec=CODEC_GZ)
    with HFileReader.from_bytes(data) as reader:  # one data block: read without the block thread pool
        reader.lookup(keys)
        reader.read_all()
    file_groups_of(keys.cast(pa.string()), 2)
    from pyhudi.read import warm_up as warm_up_reader

    warm_up_reader()
    import pyhudi.spark.source  # noqa: F401 - what the tasks of spark.read.format("hudi") unpickle


def unzipped_pyspark_path() -> None:
    """Take PySpark's own zip archives (``pyspark.zip`` and py4j's, which Spark puts first on the workers'
    ``PYTHONPATH``) off ``sys.path`` when the interpreter has the same PySpark installed, the one whose
    ``python/lib`` holds them (a pip-installed PySpark, what a local session runs). A module imported from a zip
    is compiled from source in every process, as zipimport keeps no bytecode cache, and PySpark's worker calls
    ``importlib.invalidate_caches()`` before every task, which reads each zip's directory again: about 0.55 s
    more for this daemon to start (the first Python task of a fresh process waits for it), and 20-40 ms per task."""
    rest = [p for p in sys.path if not p.endswith(".zip")]
    pyspark = PathFinder.find_spec("pyspark", rest)
    if pyspark is None or not pyspark.origin:
        return
    lib = os.path.join(os.path.dirname(pyspark.origin), "python", "lib") + os.sep
    py4j = PathFinder.find_spec("py4j", rest)
    py4j_zip = f"py4j-{_version_of(py4j.origin)}-src.zip" if py4j is not None and py4j.origin else None
    for p in [p for p in sys.path if os.path.abspath(p).startswith(lib)]:
        name = os.path.basename(p)
        # pyspark.zip is the installed PySpark's own; py4j's zip goes only when the installed py4j is that version
        if name == "pyspark.zip" or name == py4j_zip:
            sys.path.remove(p)
            sys.path_importer_cache.pop(p, None)


def _version_of(package_init: str) -> str | None:
    """``__version__`` of a package's ``version.py`` beside ``package_init``, read without importing it."""
    try:
        with open(os.path.join(os.path.dirname(package_init), "version.py"), encoding="utf-8") as f:
            for line in f:
                if line.startswith("__version__"):
                    return line.split("=", 1)[1].strip().strip("'\"")
    except OSError:
        return None
    return None


def main() -> None:
    unzipped_pyspark_path()
    try:
        warm_up()
    except Exception:  # a worker loads the kernels itself when this fails
        traceback.print_exc(file=sys.stderr)
    from pyspark import daemon

    # Everything loaded so far lives as long as the workers: out of the collector's sight. A reused worker runs
    # a full collection after every task, which otherwise walks these ~150k objects each time (30 ms of CPU per
    # task on a 2-core machine, 0.1 ms frozen; a record-index tag's Python workers: 0.33-0.36 CPU-s, not 0.42-0.45)
    gc.freeze()

    daemon.manager()


if __name__ == "__main__":
    main()

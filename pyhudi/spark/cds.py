"""A class-data-sharing archive of the local Spark driver's classes: a fresh process starts its session faster.

Every process that starts a local Spark session loads some 20,000 classes into a new JVM (Spark, Hadoop, Parquet,
Arrow, Janino) and verifies them before its first job runs. Java's application class-data sharing (CDS) maps
those classes, already parsed and verified, from an archive file instead. pyhudi builds that archive once, at
install time (``make venv`` runs ``python -m pyhudi.spark.cds``), by running a small write, read and lookup with
``-XX:ArchiveClassesAtExit``; :func:`pyhudi.spark.session.get_spark` then starts local drivers with
``-XX:SharedArchiveFile``. Measured on a 2-core machine: the session start went from 8.7-9.7 s to 5.3-5.5 s and
the first job from 3.3 s to 1.7 s.

The archive belongs to one JVM and one Spark: its file name carries PySpark's version and a digest of the ``java``
executable and its version, so another Java or another PySpark looks for (and does not find) another archive. A
JVM that cannot map an archive (a changed class path, say) starts without it, as it would have anyway
(``-Xshare:auto``, Java's default). ``PYHUDI_SPARK_CDS=0`` turns the archive off; a path in it chooses the file.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV_CDS = "PYHUDI_SPARK_CDS"
# the JVM's own messages about the archive (a class it skips, an archive it cannot map) stay out of the output
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def _cache_dir() -> Path:
    if sys.prefix != sys.base_prefix:  # a virtual environment: the archive goes (and is removed) with it
        return Path(sys.prefix) / "share" / "pyhudi"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pyhudi"


def archive_path(java: str, java_version: str) -> Path | None:
    """Where the archive for this ``java`` (its path and ``java -version`` output) and this PySpark lives; None
    when ``PYHUDI_SPARK_CDS=0``."""
    setting = os.environ.get(ENV_CDS, "")
    if setting == "0":
        return None
    if setting and setting != "1":
        return Path(setting)
    import pyspark

    digest = hashlib.sha256(f"{os.path.realpath(java)}\n{java_version}".encode()).hexdigest()[:12]
    return _cache_dir() / f"spark-{pyspark.__version__}-java-{digest}.jsa"


def driver_java_options(java: str, java_version: str) -> str:
    """The driver JVM options that map the archive, or "" when there is none."""
    path = archive_path(java, java_version)
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} {_QUIET}"


# what the archiving process runs: the classes of a write (bulk insert, upsert, delete with the record index and
# the metadata table), a snapshot read through Spark and on the driver, and a key lookup
_WORKLOAD = """
import os, sys
import pyarrow as pa
from pyhudi.spark.session import get_spark
from pyhudi.table.table import Table
spark = get_spark()
with open(sys.argv[1], "w") as f:
    f.write(str(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()))
base = os.path.join(os.getcwd(), "t")  # the build's temporary directory, removed after it
opts = {"hoodie.table.name": "cds", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p", "hoodie.table.ordering.fields": "ts"}
def rows(ids, ts):
    return pa.table({"id": [f"k{i:05d}" for i in ids], "p": [f"p{i % 3}" for i in ids],
                     "ts": pa.array([ts] * len(ids), pa.int64()), "v": [float(i) for i in ids]})
t = Table.create(base, rows(range(1), 0).schema, opts)
t.write(spark.createDataFrame(rows(range(300), 1)), "bulk_insert", opts)
Table.open(base).write(spark.createDataFrame(rows(range(250, 350), 2)), "upsert", opts)
Table.open(base).write(spark.createDataFrame(rows(range(0, 20), 3)), "delete", opts)
Table.open(base).read(spark).count()
Table.open(base).to_arrow()
Table.open(base).read(spark, keys=["k00100"]).collect()
spark.stop()
"""


def build(path: Path | None = None) -> Path:
    """Build the archive for the ``java`` Spark will use (replacing one that is there), and return its path."""
    from pyhudi.spark.java import ENV_DRIVER_JAVA_OPTIONS, check_java, java_version, local_driver_java_options

    java = check_java()
    target = path or archive_path(java, java_version(java))
    if target is None:
        raise SystemExit(f"{ENV_CDS}=0: no archive is built")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with tempfile.TemporaryDirectory(prefix="pyhudi-cds-") as work:
        pid_file = os.path.join(work, "jvm.pid")
        base_options = local_driver_java_options()
        env = {
            **os.environ,
            ENV_CDS: "0",
            ENV_DRIVER_JAVA_OPTIONS: f"{base_options} -XX:ArchiveClassesAtExit={tmp} {_QUIET}".strip(),
        }
        try:
            run = subprocess.run([sys.executable, "-c", _WORKLOAD, pid_file], env=env, cwd=work,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if run.returncode != 0:
                raise CdsBuildError(f"the archiving Spark workload failed (exit code {run.returncode}): "
                                    f"{_failure_summary(run.stderr)}")
            _wait_for_exit(int(Path(pid_file).read_text()))  # the JVM writes the archive as it exits
            if not tmp.is_file() or tmp.stat().st_size == 0:
                raise CdsBuildError(f"the JVM wrote no class-data archive at {tmp}")
            os.replace(tmp, target)
        except OSError as e:
            raise CdsBuildError(str(e)) from e
        finally:
            tmp.unlink(missing_ok=True)
    return target


def _failure_summary(stderr: str) -> str:
    """The lines of a failed process's output that say why: the launcher's and the JVM's ``Error`` lines, then the
    last line (a Python exception)."""
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    said = [ln for ln in lines if ln.lower().startswith("error")][:3]
    last = lines[-1:] if lines else ["(no output)"]
    return "; ".join(dict.fromkeys(said + last))


class CdsBuildError(RuntimeError):
    """The archive could not be built (Spark then starts without it)."""


def _wait_for_exit(pid: int, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:  # another user's process: not ours, ours is gone
            return
        time.sleep(0.2)
    raise CdsBuildError(f"the Spark driver JVM (pid {pid}) did not exit within {timeout:.0f} s")


def main() -> None:
    """Build the archive; a failure is reported in a few lines (not a traceback) and is not an error: Spark starts
    without an archive, only slower. No usable Java is an error (exit code 1): Spark cannot start at all."""
    from pyhudi.errors import ConfigError

    t0 = time.perf_counter()
    try:
        path = build()
    except ConfigError as e:
        raise SystemExit(f"error: {e}") from None
    except CdsBuildError as e:
        print(f"warning: no Spark class-data archive was built, so a new Spark session starts a few seconds slower "
              f"(everything else works): {e}", file=sys.stderr)
        return
    print(f"Spark class-data archive: {path} ({path.stat().st_size / 2**20:.0f} MiB, "
          f"built in {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()

"""Spark's own parquet reader for the scans it can read exactly, from the base files pyhudi plans.

PySpark's Python data sources get no column pruning and read through Python workers; for a copy-on-write snapshot
(or time travel) or a read-optimized query, Spark's vectorized parquet reader reads the same rows from the same
base files, reading only the columns the query uses. pyhudi's jar (Java sources in ``pyhudi/spark/jar_src``, built
here with the JDK's ``javac`` on first use) adds an optimizer rule to the session (from
``spark.sql.extensions`` in pyhudi's sessions, before Spark pushes filters into scans; else in the optimizer's
last batch): a scan of pyhudi's source (``hudi`` / ``pyhudi``) that :meth:`Planner.describe` accepts becomes a
scan of Spark's parquet file format over a file index whose listing asks :meth:`Planner.files` (this process,
through Py4J's callback server) for the base files, pruned by partition, record key and column statistics from
the metadata table, as the Python reader's plan is. The query's filters stay in the plan, so Spark evaluates every
one of them on the rows it reads; only those on top-level integer, string, boolean, date, timestamp and decimal
columns reach parquet's row-group filters (``HudiParquetFormat``: NaN and -0.0 make a floating-point column's
statistics and dictionaries skip matching rows; a timestamp literal finer than a millisecond would be rounded to
the unit of a file storing milliseconds), and none without data skipping; a planned file that is missing fails the
query.

A merge-on-read snapshot is split: Spark's parquet reader reads its file slices without log files, the Python
source those with log files to merge (a ``Union`` of the two scans). Each half plans the table as the rule saw it
(the instants completed by then) and checks it planned the same slices, so no slice is read twice or not at all.

A scan is handed over only when Spark reads its files as pyhudi does (:func:`refusal`): no log file is merged, the
files are on the local filesystem (which every JVM of a local session reaches), the table does not map columns by
field id (schema-on-read evolution), keeps its partition columns and meta columns in the files, every column is
asked with the type the table stores and no commit stored it with another (older files would hold that type), and
every column has a type Spark's parquet reader and pyhudi read alike; the rule itself keeps queries with a string
literal that is not UTF-8. Anything else is read by the Python source.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import functools
import hashlib
import json
import logging
import os
import posixpath
import shutil
import subprocess
import tempfile
import weakref
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa

from pyhudi import config as C
from pyhudi.read.filters import EPOCH, IN, Pred

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

RULE_CLASS = "org.pyhudi.spark.HudiScanRule"
#: ``spark.sql.extensions`` of pyhudi's sessions: the rule before Spark's push-down of filters into scans
EXTENSIONS_CLASS = "org.pyhudi.spark.HudiExtensions"
_SOURCES = Path(__file__).parent / "jar_src"
ENV_JAR_CACHE = "PYHUDI_JAR_CACHE"


def _java_sources() -> list[Path]:
    return sorted(_SOURCES.rglob("*.java"))


def _spark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _cache_dir() -> Path:
    given = os.environ.get(ENV_JAR_CACHE)
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pyhudi"


@functools.cache
def jar_path() -> str | None:
    """pyhudi's jar for this pyspark, compiled once (by the sources' digest) into ``~/.cache/pyhudi`` (or
    ``$PYHUDI_JAR_CACHE``); None, with a log line, when no ``javac`` is found or the build fails (then every scan
    is read by the Python source)."""
    import pyspark

    digest = hashlib.sha256(pyspark.__version__.encode())
    for src in _java_sources():
        digest.update(src.name.encode())
        digest.update(src.read_bytes())
    target = _cache_dir() / f"pyhudi-spark-{digest.hexdigest()[:16]}.jar"
    if target.exists():
        return str(target)
    home = os.environ.get("JAVA_HOME")
    javac = os.path.join(home, "bin", "javac") if home else shutil.which("javac")
    if not javac or not os.path.exists(javac):
        log.info("pyhudi: no javac (a JDK) found: spark.read.format('hudi') reads every scan in Python")
        return None
    try:
        _build(javac, target)
    except (OSError, subprocess.SubprocessError, zipfile.BadZipFile) as e:
        log.warning("pyhudi: building its Spark classes failed (%s): spark.read.format('hudi') reads every scan "
                    "in Python", e)
        return None
    return str(target)


def _build(javac: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        classes = os.path.join(tmp, "classes")
        cmd = [javac, "--release", "17", "-nowarn", "-cp", str(_spark_jars() / "*"), "-d", classes,
               *map(str, _java_sources())]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise subprocess.SubprocessError(f"{javac} exited with {r.returncode}: {r.stderr.strip()[-2000:]}")
        part = os.path.join(tmp, "out.jar")
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
            for root, _, names in os.walk(classes):
                for n in sorted(names):
                    full = os.path.join(root, n)
                    z.write(full, os.path.relpath(full, classes))
        os.replace(part, target)  # atomic: a concurrent build writes the same bytes


# -- what Spark's reader can read exactly -------------------------------------------------------------------------
def _type_ok(t: pa.DataType) -> bool:
    """Whether Spark's parquet reader returns a column of this (table) type as pyhudi's reader does."""
    if (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t) or pa.types.is_boolean(t) or pa.types.is_integer(t)
            or pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_date32(t)):
        return True
    if pa.types.is_timestamp(t):
        return t.tz is not None  # a local timestamp would be read as an instant in the session's time zone
    if pa.types.is_struct(t):
        return all(_type_ok(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _type_ok(t.value_type)
    if pa.types.is_map(t):
        return _type_ok(t.key_type) and _type_ok(t.item_type)
    return False


@dataclass(frozen=True)
class Handover:
    """How Spark's parquet reader takes a scan: the table's root URI for the JVM, the read options its file index
    plans with, and, for a merge-on-read snapshot whose slices with log files the Python source reads, the read
    options of that source's half of the scan (None: Spark's reader reads it all)."""

    root: str
    native: Mapping[str, str] = field(default_factory=dict)
    python: Mapping[str, str] | None = None


def refusal(options: Mapping[str, str], schema: StructType) -> tuple[str | None, Handover | None]:
    """(None, how) when Spark's parquet reader can read the scan of ``schema`` (the columns Spark asks of the
    source, its types), or its slices without log files, exactly; else (why not, None)."""
    from pyspark.sql.pandas.types import from_arrow_type

    from pyhudi.read import plan as read_plan
    from pyhudi.spark.source import INCREMENTAL, SNAPSHOT, _path, query_type
    from pyhudi.table.capabilities import READABLE_TABLE_VERSIONS
    from pyhudi.table.schema import resolve_schema, with_meta

    if not C.bool_option(options, C.READ_SPARK_PARQUET):
        return f"{C.READ_SPARK_PARQUET}=false", None
    qt = query_type(options)
    if qt == INCREMENTAL:
        return "an incremental query (records filtered by commit)", None
    table = read_plan.open_table(_path(options))
    cfg = table.config
    if not table.storage.is_local:
        return f"files on {table.storage.scheme} storage, which the JVM may not reach", None
    if not cfg.populate_meta_fields or cfg.drop_partition_columns:
        return "meta or partition columns not stored in the files", None
    if cfg.base_file_format.strip().upper() != "PARQUET":
        return f"base files in {cfg.base_file_format}", None
    if cfg.table_version not in READABLE_TABLE_VERSIONS:  # the Python source refuses it by name
        return f"table version {cfg.table_version}", None
    tl = table.timeline()
    as_of = read_plan.as_of_instant(table.base_path, C.AS_OF_INSTANT.get(options))
    data, sor = resolve_schema(table.storage, table.base_path, cfg, tl, as_of=as_of)
    if sor is not None:
        return "schema-on-read evolution (columns matched by field id)", None
    table_schema = with_meta(data)
    changed = _retyped_columns(table, tl, table_schema)
    for f in schema.fields:
        i = table_schema.get_field_index(f.name)
        if i < 0:
            return f"column {f.name!r} is not the table's", None
        t = table_schema.field(i).type
        if not _type_ok(t):
            return f"column {f.name!r} of type {t}", None
        if from_arrow_type(t) != f.dataType:  # a user schema's other type: the Python source converts it
            return f"column {f.name!r} asked as {f.dataType.simpleString()}, stored as {t}", None
        if f.name in changed:  # older files hold another type, which Spark's reader may not convert as Avro does
            return f"column {f.name!r} was stored as {changed[f.name]} by an earlier commit", None
    root = Path(table.base_path).as_uri()
    if qt == SNAPSHOT and not cfg.is_cow:
        return _split(table, tl, as_of, root)
    return None, Handover(root)


def _split(table: Any, tl: Any, as_of: str | None, root: str) -> tuple[str | None, Handover | None]:
    """A merge-on-read snapshot's halves: its slices without log files for Spark's reader, the others for the
    Python source, both planned without what completes after now and checked against this plan's slices."""
    from pyhudi.read import plan as read_plan
    from pyhudi.spark import source as S

    slices, tl = read_plan.planned(table, lambda t: (read_plan.snapshot(table, as_of=as_of, timeline=t).slices, t))
    with_logs = sum(1 for s in slices if s.log_files)
    if slices and with_logs == len(slices):
        return "a merge-on-read snapshot whose every file slice has log files to merge", None
    common = {S.COMPLETED_BY_OPTION: tl.latest_completion_time() or "", S.DIGEST_OPTION: S.slices_digest(slices)}
    return None, Handover(root, {**common, S.SLICES_OPTION: S.BASE_SLICES},
                          {**common, S.SLICES_OPTION: S.LOG_SLICES} if with_logs else None)


#: (base path, instant) -> the column types a completed commit's schema recorded; (base path, "archived", LSM
#: version) -> those of the archived commits. Commits never change once completed.
_COMMIT_TYPES: dict[tuple[str, ...], dict[str, str]] = {}


def _schema_types(md: Mapping[str, Any]) -> dict[str, str] | None:
    from pyhudi.table.schema import avro_to_arrow

    s = (md.get("extraMetadata") or {}).get("schema")
    if not s:
        return None
    return {f.name: str(f.type) for f in avro_to_arrow(s)}


def _retyped_columns(table: Any, tl: Any, current: pa.Schema) -> dict[str, str]:
    """The columns some commit of the table's history (active and archived) recorded with another type than
    ``current``'s: their base files may hold that type (a promotion: int to long, long to double, ...)."""
    from pyhudi.table.lsm_timeline import ArchivedTimeline, LsmHistory

    recorded: list[dict[str, str]] = []
    for inst in tl.completed_commits():
        key: tuple[str, ...] = (table.base_path, inst.requested_time)
        if key not in _COMMIT_TYPES:
            _COMMIT_TYPES[key] = _schema_types(tl.read_commit_metadata(inst)) or {}
        recorded.append(_COMMIT_TYPES[key])
    version = LsmHistory.for_table(table.storage, table.base_path, table.config).latest_version()
    if version > 0:
        key = (table.base_path, "archived", str(version))
        if key not in _COMMIT_TYPES:
            archived = ArchivedTimeline.load(table.storage, table.base_path, table.config)
            union: dict[str, str] = {}
            for inst in archived.completed_commits():
                for name, t in (_schema_types(archived.read_commit_metadata(inst)) or {}).items():
                    if union.setdefault(name, t) != t:
                        union[name] = "several types"
            _COMMIT_TYPES[key] = union
        recorded.append(_COMMIT_TYPES[key])
    now = {f.name: str(f.type) for f in current}
    return {name: t for types in recorded for name, t in types.items() if name in now and now[name] != t}


_DOMAINS: dict[str, Callable[[Any], Any]] = {
    "str": str, "int": int, "bool": bool, "dec": decimal.Decimal,
    "date": lambda days: EPOCH.date() + _dt.timedelta(days=int(days)),
    "ts": lambda micros: EPOCH + _dt.timedelta(microseconds=int(micros)),
}


def _value(node: dict[str, Any]) -> Any:
    t = node.get("t")
    return None if t == "null" else _DOMAINS[str(t)](node["v"])


def predicates(text: str) -> tuple[Pred, ...]:
    """The JSON predicates of the JVM's file index (``org.pyhudi.spark.Predicates``) as :class:`Pred`."""
    out = []
    for col, op, *rest in json.loads(text):
        value = None
        if rest:
            value = tuple(_value(v) for v in rest[0]) if op == IN else _value(rest[0])
        out.append(Pred(col, op, value))
    return tuple(out)


class Planner:
    """The planner the JVM's rule and file index call back (``org.pyhudi.spark.HudiPlanner``). ``planned``: the
    number of base files the latest listing returned (for tests and benchmarks); ``hand_over``: False keeps every
    scan with the Python source (the rule still gives each its own source object, so pushed filters prune)."""

    def __init__(self) -> None:
        self.planned: int | None = None
        self.hand_over = True

    def describe(self, options_json: str, schema_json: str) -> str:
        from pyspark.sql.datasource import CaseInsensitiveDict
        from pyspark.sql.types import StructType

        options = CaseInsensitiveDict(json.loads(options_json))
        if not self.hand_over:
            return json.dumps({"use": False, "why": "the session's planner hands no scan over"})
        try:
            why, how = refusal(options, StructType.fromJson(json.loads(schema_json)))
        except Exception as e:  # the Python source reads the scan and reports what is wrong
            why, how = f"{type(e).__name__}: {e}", None
        if why is not None or how is None:
            log.debug("pyhudi: %s is read by the Python source: %s", options.get("path"), why)
            return json.dumps({"use": False, "why": why})
        # without data skipping no filter reaches parquet's row-group filters either
        answer: dict[str, Any] = {"use": True, "root": how.root, "native": dict(how.native),
                                  "push": C.bool_option(options, C.READ_DATA_SKIPPING)}
        if how.python is not None:
            answer["python"] = dict(how.python)
        return json.dumps(answer)

    def files(self, options_json: str, predicates_json: str) -> str:
        from pyspark.sql.datasource import CaseInsensitiveDict

        from pyhudi.spark.source import plan_query

        options = CaseInsensitiveDict(json.loads(options_json))
        plan, _ = plan_query(options, predicates(predicates_json))
        storage, base = plan.read.storage, plan.read.base_path
        out = []
        for sl in plan.slices:
            if sl.log_files and not plan.read.read_optimized:
                raise AssertionError(f"{base}: a scan with log files ({sl.file_id}) was handed to Spark's reader")
            if sl.base_file is None:
                continue
            path = posixpath.join(base, sl.base_file)
            out.append([Path(path).as_uri(), sl.base_size or storage.status(path).size])
        self.planned = len(out)
        return json.dumps(out)

    class Java:
        implements: ClassVar[list[str]] = ["org.pyhudi.spark.HudiPlanner"]


_PLANNERS: weakref.WeakKeyDictionary[SparkSession, Planner] = weakref.WeakKeyDictionary()


def rule_available(spark: SparkSession) -> bool:
    """Whether the session's JVM has pyhudi's rule (its jar on the driver's class path)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(RULE_CLASS, True, loader)
    except Exception:
        return False
    return True


def install(spark: SparkSession, names: list[str]) -> Planner | None:
    """Add pyhudi's rule to ``spark``'s optimizer for the sources ``names``; the planner it calls back, or None
    when the session's JVM has no pyhudi jar."""
    from pyspark.java_gateway import ensure_callback_server_started

    try:
        sc = spark.sparkContext
    except Exception:  # Spark Connect: no JVM here
        return None
    if not rule_available(spark):
        return None
    gw = sc._gateway
    assert gw is not None and sc._jvm is not None
    ensure_callback_server_started(gw)
    planner = _PLANNERS.setdefault(spark, Planner())
    arr = gw.new_array(sc._jvm.java.lang.String, len(names))
    for i, n in enumerate(names):
        arr[i] = n
    sc._jvm.org.pyhudi.spark.HudiScanRule.install(spark._jsparkSession, planner, arr)
    return planner


def own_token(spark: SparkSession) -> str:
    """The value of :data:`pyhudi.spark.source.OWN_OPTION` on the scans the rule gives a source object of its own
    in ``spark``'s JVM (random per JVM)."""
    sc = spark.sparkContext
    assert sc._jvm is not None
    return str(sc._jvm.org.pyhudi.spark.HudiScanRule.ownToken())


def planner_of(spark: SparkSession) -> Planner | None:
    """The planner :func:`install` gave ``spark`` (None: the rule is not installed)."""
    return _PLANNERS.get(spark)


def uninstall(spark: SparkSession) -> None:
    """Take pyhudi's rule out of ``spark``'s optimizer: every scan is read by the Python source (planned whole:
    without the rule, the filters Spark pushes do not prune, :data:`pyhudi.spark.source.OWN_OPTION`)."""
    if _PLANNERS.pop(spark, None) is not None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        jvm.org.pyhudi.spark.HudiScanRule.uninstall(spark._jsparkSession)


if __name__ == "__main__":
    print(jar_path() or "no jar: no javac found, or its build failed (see the log)")

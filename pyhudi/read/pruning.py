"""Which file slices a filtered query must read, decided on the driver from the table's metadata, never by listing
or opening data files.

Given the query's predicates (:mod:`pyhudi.read.filters`, conjuncts on top-level columns), a scan plan's slices
are pruned in three steps; each keeps every slice that may hold a matching row, and Spark evaluates every filter
on the rows read, so a query's result never depends on pruning:

1. **partitions**: a slice whose partition path, parsed into the values of the table's partition fields
   (hive-style ``field=value`` or plain segments, one per field), contradicts a predicate on a partition column
   (string and integer columns of the SIMPLE and COMPLEX key generators, whose paths are the values);
2. **record key**: ``key = x`` / ``key IN (...)`` on every record-key field gives the record keys the query can
   return (encoded by the table's key generator); the latest snapshot then reads only the file groups the record
   index names, and every read keeps only rows with those keys;
3. **column statistics**: when the metadata table holds ``column_stats``, a slice whose every file (base and log
   files) has statistics for a predicate's column that rule the predicate out.

Row groups of base files read without log records are skipped by their parquet statistics in the tasks
(:class:`~pyhudi.read.slice_reader.FileSliceReader`). :class:`PruneReport` says what each step kept.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa

from pyhudi.errors import PyHudiError
from pyhudi.read.filters import EQ, EQ_NULL_SAFE, IN, Pred, Stats, all_may_match, value_matches
from pyhudi.read.plan import ScanPlan
from pyhudi.read.slice_reader import SliceSpec
from pyhudi.table.partition_path import DEFAULT_PARTITION_PATH

if TYPE_CHECKING:
    from pyhudi.read.plan import TableLike
    from pyhudi.table.timeline import ActiveTimeline

COLUMN_STATS = "column_stats"
MAX_KEYS = 10_000  # more key combinations than this: no key pruning
_INT = re.compile(r"-?\d{1,19}")


@dataclass
class PruneReport:
    """What pruning kept: slices (and their files) before and after each step."""

    slices_total: int = 0
    files_total: int = 0
    partitions_total: int = 0
    partitions_kept: int = 0
    slices_after_partitions: int = 0
    slices_after_keys: int = 0
    slices_after_stats: int = 0
    files_read: int = 0
    keys: int | None = None  # record keys the query can return, when its predicates name them all
    steps: list[str] = field(default_factory=list)  # the steps that pruned something

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _files(sl: SliceSpec) -> int:
    return (1 if sl.base_file else 0) + len(sl.log_files)


# -- partitions -------------------------------------------------------------------------------------------------
def _keygen(table: TableLike) -> Any:
    from pyhudi.table.keygen import KeyGenerator

    try:
        return KeyGenerator.from_options(table.config.to_dict())
    except PyHudiError:
        return None  # a key generator pyhudi does not model (timestamp-based, custom): no pruning by it


def partition_values(path: str, fields: Sequence[str], *, hive_style: bool, url_encode: bool) -> dict[str, str] | None:
    """The partition fields' values (as strings) a partition path holds; None when it does not parse. The
    default partition (a null or empty value) parses to no value for its field."""
    segs = path.split("/") if path else []
    if len(fields) == 1 and segs:  # one field: the whole path is its value, slashes and all ("2026/06/01")
        segs = [path]
    if len(segs) != len(fields):
        return None
    out: dict[str, str] = {}
    for f, s in zip(fields, segs, strict=True):
        if hive_style:
            name, eq, s = s.partition("=")
            if not eq or name != f:
                return None
        if url_encode:
            s = unquote(s)
        if s != DEFAULT_PARTITION_PATH:
            out[f] = s
    return out


def _typed(value: str, t: pa.DataType) -> Any:
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return value
    if pa.types.is_integer(t) and _INT.fullmatch(value):
        return int(value)
    return None


def prune_partitions(table: TableLike, schema: pa.Schema, slices: Sequence[SliceSpec], preds: Sequence[Pred],
                     report: PruneReport) -> list[SliceSpec]:
    kg = _keygen(table)
    fields = list(kg.partition_fields) if kg is not None else []
    parts = sorted({s.partition for s in slices})
    report.partitions_total = report.partitions_kept = len(parts)
    mine = [p for p in preds if p.column in fields and p.column in schema.names]
    if not mine or kg is None:
        return list(slices)
    keep: set[str] = set()
    for part in parts:
        vals = partition_values(part, fields, hive_style=kg.hive_style_partitioning,
                                url_encode=kg.url_encode_partition_path)
        ok = True
        if vals is not None:
            for p in mine:
                raw = vals.get(p.column)
                v = _typed(raw, schema.field(p.column).type) if raw is not None else None
                if v is not None and value_matches(p, v) is False:
                    ok = False
                    break
        if ok:
            keep.add(part)
    report.partitions_kept = len(keep)
    if len(keep) < len(parts):
        report.steps.append("partitions")
    return [s for s in slices if s.partition in keep]


# -- record keys ------------------------------------------------------------------------------------------------
def record_keys(table: TableLike, schema: pa.Schema, preds: Sequence[Pred]) -> list[str] | None:
    """The record keys a row must have to satisfy ``preds`` (equality or IN on every record-key field), encoded
    by the table's key generator; None when the predicates do not pin them."""
    kg = _keygen(table)
    if kg is None:
        return None
    choices: list[list[Any]] = []
    for f in kg.record_key_fields:
        if f not in schema.names:
            return None
        allowed: set[Any] | None = None
        for p in preds:
            if p.column != f:
                continue
            if p.op in (EQ, EQ_NULL_SAFE) and p.value is not None:
                vals = {_one_nan(p.value)}
            elif p.op == IN:
                vals = {_one_nan(v) for v in p.value if v is not None}
            else:
                continue
            allowed = vals if allowed is None else allowed & vals
        if allowed is None:
            return None
        chosen = sorted(allowed, key=repr)
        if pa.types.is_floating(schema.field(f).type):
            # Spark's equality holds 0.0 = -0.0, but the key generator spells them apart ("0.0", "-0.0"), and a
            # Python set keeps one of the two: a zero stands for both keys
            chosen = [z for v in chosen for z in ((0.0, -0.0) if v == 0 else (v,))]
        choices.append(chosen)
    n = 1
    for c in choices:
        n *= len(c)
    if n > MAX_KEYS:
        return None
    if n == 0:
        return []
    # a key the key generator refuses (an empty value; with the complex encoding, every value empty) is held by no
    # record: such combinations are dropped, never the others
    combos = [c for c in itertools.product(*choices) if any(v != "" for v in c)]
    if not combos:
        return []
    cols = {}
    for i, f in enumerate(kg.record_key_fields):
        try:
            cols[f] = pa.array([c[i] for c in combos], schema.field(f).type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
            return None
    try:
        # no length limit: a table without a record index may hold keys longer than pyhudi writes
        keys = kg.record_keys(pa.table(cols), check_length=False).to_pylist()
    except PyHudiError:
        return None  # a value the key generator cannot encode: nothing pruned
    return sorted(set(keys))


#: the one NaN the key values of :func:`record_keys` hold: Spark's equality holds NaN = NaN, and a Python set finds
#: a float NaN only by identity, so two predicates both admitting NaN would intersect to nothing
_NAN = float("nan")


def _one_nan(v: Any) -> Any:
    return _NAN if isinstance(v, float) and math.isnan(v) else v


# -- column statistics ------------------------------------------------------------------------------------------
_DOMAIN = {"StringWrapper": "str", "IntWrapper": "num", "LongWrapper": "num", "BooleanWrapper": "bool",
           "DateWrapper": "date", "TimestampMicrosWrapper": "ts", "DecimalWrapper": "num"}


def _wrapped(v: Any, t: pa.DataType | None = None, value_type: Any = None) -> tuple[str, Any] | None:
    """A column-stats min/max (``(wrapper record name, {'value': x})``) of a column of type ``t`` as a comparable
    value (None when it cannot be judged). Hudi 1.x stores a date column's values as ``IntWrapper`` days, a
    microsecond timestamp's as ``LongWrapper`` microseconds and a decimal's as ``BytesWrapper`` unscaled
    big-endian bytes (``valueType.additionalInfo`` = ``"precision,scale"``)."""
    import decimal

    from pyhudi.read.filters import comparable

    if not isinstance(v, tuple) or len(v) != 2 or not isinstance(v[1], dict):
        return None
    name = str(v[0]).rsplit(".", 1)[-1]
    x = v[1].get("value")
    if x is None:
        return None
    if t is not None:
        if pa.types.is_date32(t) and name == "IntWrapper" and isinstance(x, int):
            return ("date", x)
        if (pa.types.is_timestamp(t) and t.tz is not None and t.unit == "us" and name == "LongWrapper"
                and isinstance(x, int)):
            return ("ts", x)
        if pa.types.is_decimal(t) and name == "BytesWrapper" and isinstance(x, bytes) and x:
            info = str((value_type or {}).get("additionalInfo") or "")
            if info.replace(" ", "") != f"{t.precision},{t.scale}":
                return None
            # exact: the default context rounds to 28 digits, and a rounded bound could rule out a matching row
            return ("num", decimal.Decimal(int.from_bytes(x, "big", signed=True)).scaleb(
                -t.scale, context=decimal.Context(prec=100)))
        if pa.types.is_floating(t) or pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_decimal(t):
            return None
    domain = _DOMAIN.get(name)
    if domain is None:
        return None
    c = comparable(x)
    if c is not None and c[0] == domain:
        return c
    return None


def column_stats(table: TableLike, timeline: ActiveTimeline, columns: Sequence[str], files: Sequence[tuple[str, str]],
                 schema: pa.Schema | None = None) -> dict[tuple[str, str], dict[str, Stats]]:
    """(partition, file name) -> column -> statistics of ``files`` ((partition, file name), looked up by key) from
    the metadata table's ``column_stats`` partition (empty when the table has none). A file is named by its
    partition too: file ids are unique within a partition only, so two partitions may hold files of one name."""
    from pyhudi.metadata.column_stats import column_stats_key
    from pyhudi.metadata.reader import MetadataTableReader, has_metadata_table

    cfg = table.config
    if COLUMN_STATS not in cfg.metadata_partitions or not has_metadata_table(table.storage, table.base_path, cfg):
        return {}
    reader = MetadataTableReader(table.storage, table.base_path, data_timeline=timeline, data_config=cfg)
    if COLUMN_STATS not in reader.partitions():
        return {}
    wanted = set(columns)
    file_of = {column_stats_key(c, part, name): (part, name) for part, name in files for c in columns}
    out: dict[tuple[str, str], dict[str, Stats]] = {}
    for key, rec in reader.lookup(COLUMN_STATS, list(file_of)).items():
        cs = rec.fields.get("ColumnStatsMetadata")
        if not cs or cs.get("isDeleted") or cs.get("columnName") not in wanted:
            continue
        col = str(cs["columnName"])
        t = schema.field(col).type if schema is not None and col in schema.names else None
        vt = cs.get("valueType")
        out.setdefault(file_of[key], {})[col] = Stats(
            _wrapped(cs.get("minValue"), t, vt), _wrapped(cs.get("maxValue"), t, vt), cs.get("nullCount"),
            cs.get("valueCount"))
    return out


def prune_by_stats(table: TableLike, timeline: ActiveTimeline, slices: Sequence[SliceSpec], preds: Sequence[Pred],
                   report: PruneReport, schema: pa.Schema | None = None) -> list[SliceSpec]:
    cols = sorted({p.column for p in preds})
    if not cols or not slices:
        return list(slices)
    files = [(sl.partition, n.rsplit("/", 1)[-1]) for sl in slices
             for n in ((sl.base_file,) if sl.base_file else ()) + sl.log_files]
    stats = column_stats(table, timeline, cols, files, schema)
    if not stats:
        return list(slices)
    keep = []
    for sl in slices:
        names = [(sl.partition, n.rsplit("/", 1)[-1]) for n in ((sl.base_file,) if sl.base_file else ()) + sl.log_files]
        # pruned only when every file has statistics and none of them may hold a match
        if names and all(n in stats for n in names) and not any(all_may_match(preds, stats[n]) for n in names):
            continue
        keep.append(sl)
    if len(keep) < len(slices):
        report.steps.append("column_stats")
    return keep


# -- the whole --------------------------------------------------------------------------------------------------
def prune(
    table: TableLike,
    plan: ScanPlan,
    preds: Sequence[Pred],
    *,
    timeline: ActiveTimeline,
    use_record_index: bool,
    column_stats: bool = True,
) -> tuple[ScanPlan, PruneReport]:
    """``plan`` reading only the slices ``preds`` may need (see the module docstring); ``use_record_index``:
    the plan is the latest snapshot with log records merged, whose file groups the record index names;
    ``column_stats``: prune by the metadata table's column statistics."""
    report = PruneReport(slices_total=len(plan.slices), files_total=sum(_files(s) for s in plan.slices))
    if plan.read.schema_on_read is not None:
        # columns renamed or dropped since a file was written make names ambiguous (a partition field, a record
        # key or a statistics column may be another column now): nothing is pruned, Spark filters every row
        report.slices_after_partitions = report.slices_after_keys = report.slices_after_stats = len(plan.slices)
        report.files_read = report.files_total
        return ScanPlan(replace(plan.read, predicates=()), plan.slices), report
    schema = plan.read.schema  # the table's columns, meta columns first
    slices = prune_partitions(table, schema, plan.slices, preds, report)
    report.slices_after_partitions = len(slices)
    read = plan.read
    keys = record_keys(table, schema, preds) if preds else None
    if keys is not None:
        report.keys = len(keys)
        read = replace(read, keys=tuple(keys))
        before = len(slices)
        if not keys:
            slices = []
            report.steps.append("keys")
        elif use_record_index:
            from pyhudi.metadata.record_index import record_index_lookup

            lk = record_index_lookup(table.storage, table.base_path, timeline, table.config)
            if lk is not None:
                found = lk.lookup(pa.array(keys, pa.string()))
                named = set(zip(found.column("partition").to_pylist(), found.column("file_id").to_pylist(),
                                strict=True))
                slices = [s for s in slices if (s.partition, s.file_id) in named]
                if len(slices) < before:
                    report.steps.append("record_index")
    report.slices_after_keys = len(slices)
    if column_stats:
        slices = prune_by_stats(table, timeline, slices, preds, report, schema)
    report.slices_after_stats = len(slices)
    report.files_read = sum(_files(s) for s in slices)
    read = replace(read, predicates=tuple(preds))
    return ScanPlan(read, tuple(slices)), report

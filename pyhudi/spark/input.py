"""Reading the records of a write from files: a file, a directory of part files or a glob; parquet, CSV or JSON.

The records are read in Spark tasks, never on the driver:

* where Spark's Hadoop file systems reach the path (a local path, ``file:``, ``hdfs:``, ``s3a:`` when the S3A
  connector is on the JVM's class path, any scheme whose ``fs.<scheme>.impl`` loads), with Spark's own readers
  (``spark.read.parquet`` / ``csv`` / ``json``), which split large files between tasks;
* elsewhere (a URI only pyarrow understands, such as ``s3://bucket/dir?endpoint_override=...``), through pyhudi's
  :class:`~pyhudi.io.storage.Storage`: the driver lists the files, and each Spark task reads its files with
  pyarrow (``mapInArrow`` over a DataFrame of paths).

A directory is read as Spark reads one: files whose name starts with ``_`` or ``.`` (``_SUCCESS``, ``.crc``
files) are skipped. The format comes from ``fmt`` or from the files' extensions (``.parquet``; ``.csv``;
``.json``, ``.jsonl``, ``.ndjson``; CSV and JSON may be ``.gz`` or ``.bz2`` compressed); a single file without
a known extension is parquet if it starts with parquet's magic bytes.

CSV and JSON keep the semantics of pyarrow's readers, which read them before (one file, on the driver): the
column types are inferred by pyarrow from the first block (1 MiB) of the first file, in name order, and every
file is parsed with them. Spark's CSV reader then reads every column as text and the values are converted as
pyarrow converts them: in a string column an empty field is the empty string, never null; in any other column
pyarrow's null spellings (an empty field, ``NA``, ``NULL``, ``null``, ``NaN``, ``N/A``, ...) are null, and a
value that does not convert to the column's type is an error naming the file. JSON is newline-delimited, one
object per line, columns in the order of their first appearance; a field that the first file's first block
lacks is an error naming it (never dropped). A column inferred as double from integers a double cannot hold
exactly (past 2**53 in magnitude: ids beyond the int64 range) is an error naming it, not values rounded.
Parquet files are read with the schema of all their footers (a column of later files only reaches the write,
which names it); a timestamp without a time zone becomes a Spark ``timestamp`` (in the session time zone), as
``spark.createDataFrame`` made it.
"""

from __future__ import annotations

import bz2
import fnmatch
import gzip
import io
import posixpath
import re
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.csv as pcsv

from pyhudi.errors import InvalidInputError, PyHudiError
from pyhudi.spark.frames import local_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pyhudi.io.storage import Storage

FORMATS = ("parquet", "csv", "json")
_EXTENSIONS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}
_COMPRESSIONS = (".gz", ".bz2")  # read by Spark's Hadoop codecs and by pyarrow alike
_GLOB = re.compile(r"[*?\[{]")
_PARQUET_MAGIC = b"PAR1"
SAMPLE_BYTES = 1 << 20  # what pyarrow's CSV and JSON readers infer the types from: their first block
# pyarrow.csv.ConvertOptions().null_values: the spellings of null in a CSV column other than a string column
CSV_NULLS = tuple(pcsv.ConvertOptions().null_values)


@dataclass(frozen=True)
class InputFiles:
    """What ``--input`` names: the files to read and their format."""

    uri: str  # as given
    format: str
    path: str  # the same in the terms of the file system that lists it (an absolute path for a local one)
    files: tuple[str, ...]  # full paths (URIs when the input is one), in name order
    kind: str  # "file", "directory" or "glob"


def read_input(spark: SparkSession, uri: str, fmt: str | None = None, *, via_storage: bool | None = None) -> DataFrame:
    """The records in ``uri`` as a DataFrame read in Spark tasks (see the module doc).

    ``fmt`` is ``parquet``, ``csv`` or ``json`` (None: from the extensions). ``via_storage`` forces the way the
    files are read (None: Spark's readers where Spark reaches the path, else pyhudi's storage in tasks).
    Errors name the path: not found, no files, unknown or mixed formats, an unreadable file."""
    if fmt is not None and fmt not in FORMATS:
        raise InvalidInputError(f"unknown input format {fmt!r} (known: {', '.join(FORMATS)})")
    if via_storage is None:
        via_storage = not spark_reaches(spark, uri)
    if via_storage:
        from pyhudi.io.storage import Storage

        storage, path = Storage.from_uri(uri)
        lister: _Lister = _StorageLister(storage)
        # a URI's percent-escapes arrive decoded: a path naming an existing file or folder is that one, even when
        # its name holds pattern characters ("d%5B1%5D/x.parquet" is d[1]/x.parquet, never d1/x.parquet)
        literal = bool(_GLOB.search(path)) and lister.kind(path) is not None
        found = _find(lister, uri, path, fmt, glob=not literal)
        with read_errors():
            return _read_in_tasks(spark, storage, found)
    if "://" in uri:
        lister = _HadoopLister(spark)
        found = _find(lister, uri, uri, fmt)
    else:
        from pyhudi.io.storage import Storage

        storage, path = Storage.from_uri(uri)
        lister = _StorageLister(storage)
        found = _find(lister, uri, path, fmt)
    with read_errors():
        return _read_with_spark(spark, lister, found)


def input_bytes(uri: str, fmt: str | None = None) -> int | None:
    """The total size of the files ``uri`` names (as :func:`read_input` finds them), listed on the local file
    system before any Spark session exists; None for a URI (an object store: a second listing and a request per
    file, not worth a guess) or when the listing fails (:func:`read_input` then reports what is wrong). A local
    path (no scheme) that :func:`read_input` would refuse as it lists it -- not found, an empty directory or glob,
    unknown or mixed formats -- is refused here with the same :class:`~pyhudi.errors.InvalidInputError`, so the
    ``pyhudi write`` command reports it without starting Spark first."""
    from pyhudi.io.storage import Storage

    if "://" in uri and not uri.startswith("file://"):
        return None
    try:
        storage, path = Storage.from_uri(uri)
        found = _find(_StorageLister(storage), uri, path, fmt)
        return sum(int(i.size or 0) for i in storage.fs.get_file_info(list(found.files)))
    except InvalidInputError:
        if "://" not in uri:  # read_input lists a plain path the same way (file:// goes through Hadoop's lister)
            raise
        return None
    except Exception:
        return None


def spark_reaches(spark: SparkSession, uri: str) -> bool:
    """Whether Spark's Hadoop file systems read ``uri``: a local path, or a scheme whose file system class loads
    in the JVM (``s3a`` needs ``org.apache.hadoop.fs.s3a.S3AFileSystem``, absent from a plain pyspark). A URI with
    a query (``?endpoint_override=...``) is pyarrow's, never Hadoop's."""
    if "://" not in uri:
        return True
    scheme = uri.split("://", 1)[0].lower()
    if scheme == "file":
        return True
    if "?" in uri:
        return False
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, spark.sparkContext._jsc.hadoopConfiguration())
    except Exception:  # ClassNotFoundException, UnsupportedFileSystemException, wrapped by Py4J
        return False
    return True


# -- finding the files ------------------------------------------------------------------------------------------
class _Lister:
    """The few file system operations finding the input needs, over pyarrow (Storage) or Hadoop (the JVM)."""

    def kind(self, path: str) -> str | None:  # "file", "dir" or None
        raise NotImplementedError

    def children(self, path: str) -> list[tuple[str, bool]]:  # (path, is_dir), direct children
        raise NotImplementedError

    def glob(self, pattern: str) -> list[tuple[str, bool]]:
        raise NotImplementedError

    def head(self, path: str, n: int) -> bytes:
        raise NotImplementedError


class _StorageLister(_Lister):
    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def kind(self, path: str) -> str | None:
        import pyarrow.fs as pafs

        t = self.storage.fs.get_file_info(path).type
        return {pafs.FileType.File: "file", pafs.FileType.Directory: "dir"}.get(t)

    def children(self, path: str) -> list[tuple[str, bool]]:
        return [(st.path, st.is_dir) for st in self.storage.list(path)]

    def glob(self, pattern: str) -> list[tuple[str, bool]]:
        """Shell-style ``*``, ``?``, ``[...]`` within one path segment and ``{a,b}`` alternatives, as Hadoop's."""
        out: list[tuple[str, bool]] = []
        for alt in _braces(pattern):
            parts = alt.split("/")
            i = next((k for k, s in enumerate(parts) if _GLOB.search(s)), len(parts))
            base = "/".join(parts[:i]) or "/"
            candidates = [(base, self.kind(base) == "dir")]
            for seg in parts[i:]:
                nxt: list[tuple[str, bool]] = []
                for p, is_dir in candidates:
                    if not is_dir:
                        continue
                    if _GLOB.search(seg):
                        nxt += [(c, d) for c, d in self.children(p) if fnmatch.fnmatchcase(posixpath.basename(c), seg)]
                    else:
                        child = posixpath.join(p, seg)
                        k = self.kind(child)
                        if k is not None:
                            nxt.append((child, k == "dir"))
                candidates = nxt
            out += candidates
        return sorted(set(out))

    def head(self, path: str, n: int) -> bytes:
        with self.storage.open_input(path) as f:
            return bytes(f.read(n))


class _HadoopLister(_Lister):
    """Hadoop's FileSystem API in Spark's JVM: the file systems (and the glob syntax) Spark's readers use."""

    def __init__(self, spark: SparkSession) -> None:
        self.jvm: Any = spark.sparkContext._jvm
        self.conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _fs(self, path: str) -> tuple[Any, Any]:
        p = self.jvm.org.apache.hadoop.fs.Path(path)
        return p.getFileSystem(self.conf), p

    def kind(self, path: str) -> str | None:
        fs, p = self._fs(path)
        if not fs.exists(p):
            return None
        return "dir" if fs.getFileStatus(p).isDirectory() else "file"

    def children(self, path: str) -> list[tuple[str, bool]]:
        fs, p = self._fs(path)
        return [(s.getPath().toString(), s.isDirectory()) for s in fs.listStatus(p)]

    def glob(self, pattern: str) -> list[tuple[str, bool]]:
        fs, p = self._fs(pattern)
        found = fs.globStatus(p)
        return sorted((s.getPath().toString(), s.isDirectory()) for s in (found or []))

    def head(self, path: str, n: int) -> bytes:
        fs, p = self._fs(path)
        stream = fs.open(p)
        try:
            return bytes(stream.readNBytes(n))
        finally:
            stream.close()


def _braces(pattern: str) -> list[str]:
    """``a{b,c}d`` -> ``abd``, ``acd`` (nested alternatives too)."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [x for alt in m.group(1).split(",") for x in _braces(pattern[: m.start()] + alt + pattern[m.end():])]


def _hidden(name: str) -> bool:
    """Spark's rule for files and folders it does not read in a directory."""
    return name.startswith(("_", "."))


def _walk(lister: _Lister, path: str) -> list[str]:
    files: list[str] = []
    for child, is_dir in sorted(lister.children(path)):
        if _hidden(posixpath.basename(child.rstrip("/"))):
            continue
        files += _walk(lister, child) if is_dir else [child]
    return files


def _format_of(name: str) -> str | None:
    base = name.lower()
    for c in _COMPRESSIONS:
        if base.endswith(c):
            base = base[: -len(c)]
            break
    return _EXTENSIONS.get(posixpath.splitext(base)[1])


def _find(lister: _Lister, uri: str, path: str, fmt: str | None, *, glob: bool = True) -> InputFiles:
    """The files ``uri`` names (``path``: the same in the lister's terms; a pattern unless ``glob`` is false) and
    their format."""
    try:
        if glob and _GLOB.search(path):
            kind = "glob"
            files: list[str] = []
            for p, is_dir in lister.glob(path):
                if is_dir:
                    files += _walk(lister, p)
                elif not _hidden(posixpath.basename(p)):
                    files.append(p)
            if not files:
                raise InvalidInputError(f"input glob matches no files: {uri}")
        else:
            k = lister.kind(path)
            if k is None:
                raise InvalidInputError(f"input file not found: {uri}")
            if k == "file":
                kind, files = "file", [path]
            else:
                kind, files = "directory", _walk(lister, path)
                if not files:
                    raise InvalidInputError(f"input directory has no data files: {uri}")
    except PyHudiError:
        raise
    except Exception as e:
        raise InvalidInputError(f"cannot list input {uri}: {_first_line(e)}") from None
    files = sorted(set(files))
    if fmt is None:
        fmt = _detect(lister, uri, kind, files)
    return InputFiles(uri, fmt, path, tuple(files), kind)


def _detect(lister: _Lister, uri: str, kind: str, files: list[str]) -> str:
    found = {f: _format_of(posixpath.basename(f)) for f in files}
    if kind == "file" and found[files[0]] is None:
        try:
            magic = lister.head(files[0], 4)
        except Exception as e:
            raise InvalidInputError(f"cannot read input file {uri}: {_first_line(e)}") from None
        if magic == _PARQUET_MAGIC:
            return "parquet"
        raise InvalidInputError(
            f"cannot tell the format of input file {uri}: name it .parquet, .csv or .json, or give --input-format"
        )
    unknown = [f for f, x in found.items() if x is None]
    if unknown:
        raise InvalidInputError(
            f"cannot tell the format of {unknown[0]} in input {uri} ({len(unknown)} file(s) without a .parquet, "
            ".csv or .json extension): give --input-format"
        )
    formats = sorted({x for x in found.values() if x is not None})
    if len(formats) > 1:
        raise InvalidInputError(
            f"input {uri} mixes formats ({', '.join(formats)}): name one file format, or give --input-format "
            "with a glob that matches those files only"
        )
    return formats[0]


# -- reading -----------------------------------------------------------------------------------------------------
def _sample(lister: _Lister, path: str) -> bytes:
    """The first block of ``path`` (decompressed), cut after its last complete line unless it is the whole file."""
    data = lister.head(path, SAMPLE_BYTES + 1)
    low = path.lower()
    if low.endswith(".gz"):
        data = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, SAMPLE_BYTES + 1)
    elif low.endswith(".bz2"):
        data = bz2.BZ2Decompressor().decompress(data, SAMPLE_BYTES + 1)
    if len(data) > SAMPLE_BYTES:
        data = data[: data.rfind(b"\n", 0, SAMPLE_BYTES) + 1] or data[:SAMPLE_BYTES]
    return data


def _infer(lister: _Lister, found: InputFiles) -> pa.Schema:
    """The Arrow schema pyarrow's reader infers from the first file's first block (CSV, JSON)."""
    import pyarrow.json as pjson

    first = found.files[0]
    try:
        sample = _sample(lister, first)
        table = pcsv.read_csv(io.BytesIO(sample)) if found.format == "csv" else pjson.read_json(io.BytesIO(sample))
    except Exception as e:
        raise InvalidInputError(f"cannot read input file {first} as {found.format}: {_first_line(e)}") from None
    _check_column_names(table.schema, first)
    _check_exact_numbers(table.schema, sample, found.format, first)
    return table.schema


#: integers beyond this magnitude are not all exact as doubles
_EXACT_DOUBLE_INT = 2**53
_INTEGER_TEXT = re.compile(r"^\s*[+-]?\d+\s*$")


def _check_exact_numbers(schema: pa.Schema, sample: bytes, fmt: str, path: str) -> None:
    """InvalidInputError naming a column pyarrow inferred as double from integers it cannot hold exactly (beyond
    2**53 in magnitude, e.g. ids past the int64 range): read as doubles they would change, and distinct ids would
    become one key, silently."""
    doubles = [f.name for f in schema if pa.types.is_floating(f.type)]
    if not doubles:
        return
    integers: Iterator[tuple[str, int]]
    if fmt == "csv":
        text = pcsv.read_csv(io.BytesIO(sample), convert_options=pcsv.ConvertOptions(
            column_types={c: pa.string() for c in doubles}))
        integers = ((c, int(v)) for c in doubles for v in text.column(c).to_pylist()
                    if v is not None and _INTEGER_TEXT.match(v))
    else:
        integers = ((c, v) for rec in _json_records(sample) for c in doubles
                    if isinstance(v := rec.get(c), int) and not isinstance(v, bool))
    big = next(((c, v) for c, v in integers if abs(v) > _EXACT_DOUBLE_INT), None)
    if big is not None:
        raise InvalidInputError(
            f"input file {path}: column {big[0]!r} holds integers such as {big[1]} that are read as doubles (its "
            f"type as inferred from the first MiB), which cannot hold them exactly: their values would change "
            f"(distinct ids becoming one); give the input as parquet with a decimal or string column")


def _json_records(sample: bytes) -> Iterator[dict[str, Any]]:
    """The JSON objects of the lines of ``sample`` (a line that is not one is skipped: pyarrow read it)."""
    import json

    for line in sample.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            yield rec


def _check_column_names(schema: pa.Schema, path: str) -> None:
    """InvalidInputError naming two columns of input file ``path`` of one name, or of names that differ only in
    case: Spark, which reads the input, resolves a name ignoring case and cannot hold both."""
    from pyhudi.table.evolution import check_distinct_names, check_unique_names

    check_unique_names(schema, f"input file {path}")
    check_distinct_names(schema.names, f"input file {path}")


def _parquet_files(lister: _Lister, found: InputFiles) -> Iterator[tuple[str, Any]]:
    """Each parquet input file's ``pyarrow.parquet.ParquetFile`` (its footer, read when opened), where pyhudi's
    storage reads the files (for naming the file at fault in an error Spark's reader gave; a file whose footer
    cannot be read is passed over)."""
    if not isinstance(lister, _StorageLister):
        return
    import pyarrow.parquet as pq

    for path in found.files:
        try:
            with lister.storage.open_input(path) as f:
                pf = pq.ParquetFile(f)
        except Exception:
            continue
        yield path, pf


_REPEATED_COLUMN = re.compile(r"\[COLUMN_ALREADY_EXISTS\] The column `(.+?)` already exists")


def _repeated_column(e: BaseException, lister: _Lister, found: InputFiles) -> InvalidInputError | None:
    """The InvalidInputError for Spark's refusal of a parquet input holding a column name twice (or in two
    spellings that differ only in case): the file and both names when pyhudi's storage reads the files, else the
    input and the name Spark gives. None for any other error."""
    m = _REPEATED_COLUMN.search(str(e))
    if m is None:
        return None
    for path, pf in _parquet_files(lister, found):
        try:
            _check_column_names(pf.schema_arrow, path)
        except InvalidInputError as named:
            return named
    return InvalidInputError(
        f"input {found.uri}: column {m.group(1)!r} appears twice among its files' columns (names that differ only in "
        "case are one name to Spark): rename or drop one; nothing was written")


def _spark_schema(schema: pa.Schema) -> Any:
    """The Spark schema ``spark.createDataFrame`` gives an Arrow table of ``schema`` (timestamps with the session
    time zone, as before; a column of nulls only is a string column)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    fields = [pa.field(f.name, pa.string()) if pa.types.is_null(f.type) else f for f in schema]
    return from_arrow_schema(pa.schema(fields), prefer_timestamp_ntz=False)


def _path_part(p: str) -> str:
    """``p`` without its scheme and authority, normalised: Hadoop's listing spells the paths of ``file:///x`` as
    ``file:/x`` and adds the name node to ``hdfs:///x``."""
    m = re.match(r"[A-Za-z][A-Za-z0-9+.-]*:(//[^/]*)?", p)
    return posixpath.normpath("/" + (p[m.end():] if m else p).lstrip("/"))


def _nested_plain_folders(found: InputFiles) -> bool:
    """Whether a directory input holds data files in sub-folders that are not partition folders (``name=value``):
    Spark's listing of a directory skips those (their rows were silently not written), so they are read with
    ``recursiveFileLookup``. Partition folders mixed with other sub-folders are refused: read recursively, their
    ``name=value`` columns would be lost."""
    root = _path_part(found.path)
    segments = []
    for f in found.files:
        rel = posixpath.relpath(_path_part(posixpath.dirname(f)), root)
        if rel != "." and not rel.startswith(".."):
            segments += [seg for seg in rel.split("/") if seg]
    plain = [seg for seg in segments if "=" not in seg]
    if plain and len(plain) < len(segments):
        raise InvalidInputError(
            f"input directory {found.uri} mixes partition folders (name=value) with other sub-folders (e.g. "
            f"{plain[0]!r}): give the partitioned part, or the other files, as an input of its own")
    return bool(plain)


def _refuse_partition_folders(found: InputFiles, columns: list[str]) -> None:
    """A directory read through pyhudi's storage (not by Spark's readers) may not hold partition folders
    (``name=value``) of a column its files (``columns``) lack: Spark would add the column to the records, pyhudi's
    reader does not, and a column must not be lost silently."""
    root = _path_part(found.path)
    for f in found.files:
        rel = posixpath.relpath(_path_part(posixpath.dirname(f)), root)
        folder = next((seg for seg in rel.split("/") if "=" in seg and seg.split("=", 1)[0] not in columns),
                      None) if not rel.startswith(".") else None
        if folder is not None:
            raise InvalidInputError(
                f"input directory {found.uri} holds partition folders ({folder!r}), whose name=value columns Spark's "
                "readers add to the records; pyhudi reads this location without them: give the input where Spark "
                "reaches it (e.g. an s3a:// path with the S3A connector), or with those columns in the files")


_ILLEGAL_TYPE = re.compile(r"\[PARQUET_TYPE_ILLEGAL\] Illegal Parquet type: ([^.]+?)\. SQLSTATE|"
                           r"\[PARQUET_TYPE_ILLEGAL\] Illegal Parquet type: (.+)")


def _illegal_type(e: BaseException, lister: _Lister, found: InputFiles) -> InvalidInputError | None:
    """The InvalidInputError for Spark's refusal of a parquet column type it cannot read (nanosecond timestamps,
    as pandas writes them by default): the file and the column when pyhudi's storage reads the files, else the
    input and the type Spark gives. None for any other error."""
    m = _ILLEGAL_TYPE.search(str(e))
    if m is None:
        return None
    what = (m.group(1) or m.group(2)).strip()
    hint = ("Spark reads no parquet timestamps in nanoseconds: write them in microseconds (pyarrow: "
            "coerce_timestamps='us'; pandas: to_parquet(..., coerce_timestamps='us', allow_truncated_timestamps=False))"
            if "NANOS" in what else "cast it to a type Spark reads")
    for path, pf in _parquet_files(lister, found):
        for i in range(len(pf.schema) if "NANOS" in what else 0):
            col = pf.schema.column(i)  # by its parquet type: pyarrow reads INT96 timestamps, which Spark reads, as ns
            if col.physical_type == "INT64" and "timeUnit=nanoseconds" in str(col.logical_type):
                return InvalidInputError(
                    f"input file {path}: column {col.path!r} is a timestamp in nanoseconds, which Spark cannot read "
                    f"({what}); {hint}; nothing was written")
    return InvalidInputError(f"input {found.uri}: a column's parquet type is {what}, which Spark cannot read; {hint}; "
                             "nothing was written")


def _read_with_spark(spark: SparkSession, lister: _Lister, found: InputFiles) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType, TimestampNTZType, TimestampType

    # a file or a directory as it is (Spark lists a directory as it lists its jobs' output, partition folders
    # included); a glob as Hadoop's globs match it, or, for a local path, the files it matched
    paths = list(found.files) if found.kind == "glob" and "://" not in found.uri else [found.path]
    reader = spark.read
    if found.kind == "directory" and _nested_plain_folders(found):
        reader = reader.option("recursiveFileLookup", "true")  # every file listed, as the pyarrow path reads them
    if found.format == "parquet":
        # every file's footer, not only the first: a column only later files carry reaches the write (which
        # refuses columns the table lacks by name) instead of being dropped
        try:
            df = reader.option("mergeSchema", "true").parquet(*paths)
        except Exception as e:
            named = _repeated_column(e, lister, found) or _illegal_type(e, lister, found)
            if named is None:
                raise
            raise named from None
        return df.select(*[
            F.col(f"`{f.name}`").cast(TimestampType()).alias(f.name) if isinstance(f.dataType, TimestampNTZType)
            else F.col(f"`{f.name}`") for f in df.schema.fields
        ])
    schema = _spark_schema(_infer(lister, found))
    if found.format == "json":
        # the types come from the first MiB; a field that appears only later must not be dropped: Spark's own
        # inference over all records names every top-level field
        extra = [n for n in reader.options(mode="FAILFAST").json(paths).schema.fieldNames()
                 if n not in schema.fieldNames()]
        if extra:
            raise InvalidInputError(
                f"input {found.uri}: field(s) {', '.join(map(repr, extra))} appear only after the first MiB of "
                f"{found.files[0]}; put them in the first records or give the input as parquet"
            )
        return reader.schema(schema).options(mode="FAILFAST").json(paths)
    # CSV: every column as text, then pyarrow's conversions (the module doc)
    text = StructType([StructField(f.name, StringType()) for f in schema.fields])
    raw = reader.schema(text).options(
        header="true", enforceSchema="false", mode="FAILFAST", escape='"', nullValue="\u0000"
    ).csv(paths)
    cols = []
    for f in schema.fields:
        c = F.col(f"`{f.name}`")
        if isinstance(f.dataType, StringType):
            # an unquoted empty field: "" as pyarrow reads it (a CASE, not coalesce: the column stays nullable)
            cols.append(F.when(c.isNull(), F.lit("")).otherwise(c).alias(f.name))
            continue
        message = F.concat(
            F.lit("pyhudi.errors.InvalidInputError: cannot read input file "), F.input_file_name(),
            F.lit(f": column '{f.name}': value '"), c, F.lit(f"' is not {f.dataType.simpleString()}"),
        )
        converted = F.coalesce(c.try_cast(f.dataType), F.raise_error(message).cast(f.dataType))
        cols.append(F.when(c.isNull() | c.isin(*CSV_NULLS), F.lit(None).cast(f.dataType)).otherwise(converted)
                    .alias(f.name))
    return raw.select(*cols)


def _read_in_tasks(spark: SparkSession, storage: Storage, found: InputFiles) -> DataFrame:
    """Each task reads its files through ``storage`` with pyarrow; the driver reads the first file's schema."""
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    lister = _StorageLister(storage)
    if found.format == "parquet":
        first = found.files[0]
        try:
            with storage.open_input(first) as f:
                source = pq.read_schema(f)
        except Exception as e:
            raise InvalidInputError(f"cannot read input file {first} as parquet: {_first_line(e)}") from None
        _check_column_names(source, first)
    else:
        source = _infer(lister, found)
    if found.kind == "directory":
        _refuse_partition_folders(found, source.names)
    spark_schema = _spark_schema(source)
    tz = spark.conf.get("spark.sql.session.timeZone") or "UTC"
    target = to_arrow_schema(spark_schema, timezone=tz)
    fmt = found.format

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for path in b.column(0).to_pylist():
                yield from _read_file(storage, path, fmt, source, target)

    paths = local_frame(spark, [(p,) for p in found.files], "path string")
    n = min(len(found.files), max(1, spark.sparkContext.defaultParallelism))
    return paths.repartition(n).mapInArrow(read, spark_schema)


def _read_file(storage: Storage, path: str, fmt: str, source: pa.Schema, target: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The records of one file as batches of ``target`` (in a task)."""
    import pyarrow.json as pjson

    from pyhudi.io.parquet import parquet_file

    try:
        if fmt == "parquet":
            with storage.open_input(path) as f:
                pf = parquet_file(f)
                missing = [n for n in source.names if n not in pf.schema_arrow.names]
                if missing:
                    raise ValueError(f"it lacks column(s) {', '.join(missing)} of the first file")
                extra = [n for n in pf.schema_arrow.names if n not in source.names]
                if extra:
                    raise ValueError(f"it has column(s) {', '.join(extra)} the first file lacks")
                for batch in pf.iter_batches(columns=source.names):
                    yield from _conform(pa.Table.from_batches([batch]), target).to_batches()
            return
        raw = storage.read_bytes(path)
        low = path.lower()
        if low.endswith(".gz"):
            raw = gzip.decompress(raw)
        elif low.endswith(".bz2"):
            raw = bz2.decompress(raw)
        types = {f.name: (pa.string() if pa.types.is_null(f.type) else f.type) for f in source}
        if fmt == "csv":
            table = pcsv.read_csv(io.BytesIO(raw), convert_options=pcsv.ConvertOptions(column_types=types))
            if table.schema.names != source.names:
                raise ValueError(f"its header {table.schema.names} differs from the first file's {source.names}")
        else:
            table = pjson.read_json(
                io.BytesIO(raw),
                parse_options=pjson.ParseOptions(explicit_schema=pa.schema(types), unexpected_field_behavior="error"),
            )
        for batch in _conform(table, target).to_batches():
            yield batch
    except PyHudiError:
        raise
    except Exception as e:
        raise InvalidInputError(f"cannot read input file {path}: {_first_line(e)}") from None


def _conform(table: pa.Table, target: pa.Schema) -> Any:
    table = table.select(target.names)
    return table.cast(target) if table.schema != target else table


# -- errors ------------------------------------------------------------------------------------------------------
_FAILED_READ = re.compile(r"Encountered error while reading file (\S+?)\.?\s")
_USER_RAISED = re.compile(r"pyhudi\.errors\.InvalidInputError: (.+?)(?:\s+SQLSTATE: \w+)?$", re.M)


@contextmanager
def read_errors() -> Iterator[None]:
    """Spark's failures to read an input file (planning on the driver, or a task in a later job) as an
    InvalidInputError naming the file."""
    try:
        yield
    except PyHudiError:
        raise
    except Exception as e:
        err = input_error(e)
        if err is None:
            raise
        raise err from None


def input_error(e: BaseException) -> InvalidInputError | None:
    """The InvalidInputError for Spark's error ``e`` if it is a failure to read an input file, else None."""
    text = str(e)
    m = _USER_RAISED.search(text)
    if m:
        return InvalidInputError(m.group(1).strip())
    m = _FAILED_READ.search(text)
    if m:
        causes = [ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("Caused by:")]
        cause = causes[-1] if causes else _first_line(e)
        return InvalidInputError(f"cannot read input file {m.group(1)}: {cause}")
    m = re.search(r"\[(CANNOT_READ_FILE_FOOTER|PATH_NOT_FOUND|UNABLE_TO_INFER_SCHEMA|CANNOT_MERGE_SCHEMAS|"
                  r"CANNOT_MERGE_INCOMPATIBLE_DATA_TYPE)\][^\n]*", text)
    if m:
        hint = (" (the input's files disagree on a column's type: give files of one schema, or write them one "
                "at a time)" if "MERGE" in m.group(1) else "")
        return InvalidInputError(f"cannot read input: {m.group(0).rstrip(':')}{hint}")
    return None


def _first_line(e: BaseException) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__

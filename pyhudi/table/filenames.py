"""Hudi data-file naming, in one place: base files, log files, file ids, write tokens, partition metafiles.

Checked against Hudi 1.0/1.1 (table versions 8 and 9) tables, data table and metadata table alike:

- base file: ``<fileId>_<writeToken>_<instant>.<ext>`` with ext ``parquet`` (data) or ``hfile`` (metadata
  table), e.g. ``5a226868-2934-4f84-a16f-55124630c68d-0_0-27-52_20260307162434124.parquet``,
  ``files-0000-0_0-5-4_00000000000000000.hfile``. ``<instant>`` is the instant that wrote the file.
- log file: ``.<fileId>_<instant>.log.<version>_<writeToken>`` (optionally ``.cdc`` at the end), e.g.
  ``.c923cb31-a2d3-49c6-8f47-4be96502c239-0_20260307162607806.log.1_0-104-236``. From table version 8 on,
  ``<instant>`` is the **delta commit that wrote the log file** (not the base instant of its file slice);
  the file slice it belongs to is decided by completion time (see :mod:`pyhudi.table.fsview`). Versions
  start at 1.
- file id: ``<UUID>-<index>`` for data files; ``<prefix>-<NNNN>-<index>`` in the metadata table
  (``files-0000-0``, ``record-index-0003-0``).
- write token: ``<taskPartitionId>-<stageId>-<taskAttemptId>`` (``0-0-0`` when there is no Spark task).
- partition metafile: ``.hoodie_partition_metadata`` (a Java properties file: ``#partition metadata``,
  a ``#<java.util.Date>`` line, ``commitTime=<instant>``, ``partitionDepth=<n>``), or, when
  ``hoodie.partition.metafile.use.base.format`` is set, ``.hoodie_partition_metadata.parquet`` (``.orc``) whose
  footer key-value metadata holds the same two keys. Hudi writes it to ``.hoodie_partition_metadata_<task>``
  and renames it into place if no metafile exists yet.
"""

from __future__ import annotations

import io
import posixpath
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq

from pyhudi.errors import CorruptFileError, PyHudiError, StorageError
from pyhudi.io.storage import Storage
from pyhudi.table.properties import format_properties, parse_properties

PARTITION_METAFILE = ".hoodie_partition_metadata"
PARTITION_METAFILE_PARQUET = PARTITION_METAFILE + ".parquet"
PARTITION_METAFILE_ORC = PARTITION_METAFILE + ".orc"
COMMIT_TIME_KEY = "commitTime"
PARTITION_DEPTH_KEY = "partitionDepth"

BASE_FILE_EXTENSIONS = frozenset({"parquet", "hfile", "orc", "lance"})
LOG_FILE_EXTENSIONS = frozenset({"log", "archive"})

_TOKEN_RE = re.compile(r"^(\d+)-(\d+)-(\d+)$")
_BASE_RE = re.compile(r"^(?P<file_id>[^_/]+)_(?P<token>[^_/]+)_(?P<instant>[^_./]+)\.(?P<ext>[A-Za-z0-9]+)$")
_LOG_RE = re.compile(
    r"^\.(?P<file_id>[^_/]+)_(?P<instant>[^_./]*)\.(?P<ext>log|archive)\.(?P<version>\d+)"
    r"(?:_(?P<token>\d+-\d+-\d+))?(?P<cdc>\.cdc)?$"
)
_FILE_ID_RE = re.compile(r"^(?P<prefix>.+)-(?P<index>\d+)$")


class FileNameError(PyHudiError, ValueError):
    """A name is not a Hudi data file name of the expected kind."""


# -- write tokens and file ids -------------------------------------------------------------------------------
@dataclass(frozen=True)
class WriteToken:
    """``<taskPartitionId>-<stageId>-<taskAttemptId>``."""

    partition_id: int
    stage_id: int
    attempt_id: int

    def __str__(self) -> str:
        return f"{self.partition_id}-{self.stage_id}-{self.attempt_id}"

    @staticmethod
    def parse(text: str) -> WriteToken:
        m = _TOKEN_RE.match(text)
        if not m:
            raise FileNameError(f"not a write token: {text!r}")
        return WriteToken(int(m.group(1)), int(m.group(2)), int(m.group(3)))


def make_write_token(partition_id: int, stage_id: int = 0, attempt_id: int = 0) -> str:
    return str(WriteToken(partition_id, stage_id, attempt_id))


@dataclass(frozen=True)
class FileId:
    """``<prefix>-<index>``: the prefix is a UUID for data files, e.g. ``record-index-0003`` in the metadata table."""

    prefix: str
    index: int

    def __str__(self) -> str:
        return f"{self.prefix}-{self.index}"

    @property
    def is_uuid(self) -> bool:
        try:
            return str(uuid.UUID(self.prefix)) == self.prefix  # canonical lower case, as Hudi names file groups
        except ValueError:
            return False

    @staticmethod
    def parse(text: str) -> FileId:
        m = _FILE_ID_RE.match(text)
        if not m or "_" in text:
            raise FileNameError(f"not a file id: {text!r}")
        return FileId(m.group("prefix"), int(m.group("index")))


def new_file_id_prefix() -> str:
    """A random UUID, the prefix Hudi gives new file groups."""
    return str(uuid.uuid4())


def make_file_id(prefix: str | None = None, index: int = 0) -> str:
    return str(FileId(prefix or new_file_id_prefix(), index))


# -- base files ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BaseFileName:
    file_id: str
    write_token: str
    instant: str
    extension: str = "parquet"

    @property
    def name(self) -> str:
        return f"{self.file_id}_{self.write_token}_{self.instant}.{self.extension}"

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def parse(name: str) -> BaseFileName:
        m = _BASE_RE.match(name)
        if not m or m.group("ext") not in BASE_FILE_EXTENSIONS:
            raise FileNameError(f"not a base file name: {name!r}")
        return BaseFileName(m.group("file_id"), m.group("token"), m.group("instant"), m.group("ext"))


def make_base_file_name(file_id: str, write_token: str, instant: str, extension: str = "parquet") -> str:
    bf = BaseFileName(file_id, write_token, instant, extension)
    _check_parts(bf.file_id, bf.instant, bf.write_token)
    return bf.name


# -- log files ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LogFileName:
    file_id: str
    instant: str
    version: int
    write_token: str | None
    extension: str = "log"
    cdc: bool = False

    @property
    def name(self) -> str:
        token = f"_{self.write_token}" if self.write_token is not None else ""
        suffix = ".cdc" if self.cdc else ""
        return f".{self.file_id}_{self.instant}.{self.extension}.{self.version}{token}{suffix}"

    def __str__(self) -> str:
        return self.name

    @property
    def sort_key(self) -> tuple[str, int, str]:
        """Hudi's log file order within a file slice: instant, version, write token."""
        return (self.instant, self.version, self.write_token or "")

    @staticmethod
    def parse(name: str) -> LogFileName:
        m = _LOG_RE.match(name)
        if not m:
            raise FileNameError(f"not a log file name: {name!r}")
        return LogFileName(
            m.group("file_id"),
            m.group("instant"),
            int(m.group("version")),
            m.group("token"),
            m.group("ext"),
            m.group("cdc") is not None,
        )


def make_log_file_name(
    file_id: str, instant: str, version: int = 1, write_token: str = "0-0-0", extension: str = "log"
) -> str:
    if version < 1:
        raise ValueError(f"log file versions start at 1, got {version}")
    _check_parts(file_id, instant, write_token)
    return LogFileName(file_id, instant, version, write_token, extension).name


def _check_parts(file_id: str, instant: str, write_token: str) -> None:
    if not file_id or "_" in file_id or "/" in file_id:
        raise ValueError(f"invalid file id {file_id!r}")
    if not instant.isdigit():
        raise ValueError(f"invalid instant time {instant!r}")
    WriteToken.parse(write_token)


def is_base_file(name: str) -> bool:
    m = _BASE_RE.match(name)
    return bool(m) and m is not None and m.group("ext") in BASE_FILE_EXTENSIONS


def is_log_file(name: str) -> bool:
    return _LOG_RE.match(name) is not None


def is_partition_metafile(name: str) -> bool:
    return name in (PARTITION_METAFILE, PARTITION_METAFILE_PARQUET, PARTITION_METAFILE_ORC)


DataFileName = BaseFileName | LogFileName


def parse_data_file_name(name: str) -> DataFileName | None:
    """The parsed base or log file name, or None for any other file (metafiles, temp files, ...)."""
    if name.startswith("."):
        m = _LOG_RE.match(name)
        return LogFileName.parse(name) if m else None
    m = _BASE_RE.match(name)
    if m and m.group("ext") in BASE_FILE_EXTENSIONS:
        return BaseFileName(m.group("file_id"), m.group("token"), m.group("instant"), m.group("ext"))
    return None


# -- partition metafile ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PartitionMetadata:
    commit_time: str
    partition_depth: int

    def to_properties(self) -> dict[str, str]:
        return {COMMIT_TIME_KEY: self.commit_time, PARTITION_DEPTH_KEY: str(self.partition_depth)}

    def to_text(self, now: datetime | None = None) -> str:
        """The properties file text, as Java ``Properties.store(os, "partition metadata")`` writes it."""
        return format_properties(
            self.to_properties(), comment="partition metadata", now=now or datetime.now(UTC)
        )

    @staticmethod
    def from_properties(props: dict[str, str], source: str) -> PartitionMetadata:
        if PARTITION_DEPTH_KEY not in props:
            raise CorruptFileError(source, f"no {PARTITION_DEPTH_KEY} in partition metafile")
        try:
            depth = int(props[PARTITION_DEPTH_KEY])
        except ValueError:
            raise CorruptFileError(
                source, f"bad {PARTITION_DEPTH_KEY}: {props[PARTITION_DEPTH_KEY]!r}"
            ) from None
        return PartitionMetadata(props.get(COMMIT_TIME_KEY, ""), depth)

    @staticmethod
    def parse_text(text: str, source: str = "<partition metadata>") -> PartitionMetadata:
        return PartitionMetadata.from_properties(parse_properties(text), source)


def partition_depth(partition_path: str) -> int:
    """The number of path segments of a relative partition path ("" -> 0)."""
    return len([p for p in partition_path.split("/") if p])


def read_partition_metadata(storage: Storage, partition_dir: str) -> PartitionMetadata:
    """Read the text metafile of a partition folder, else its parquet variant."""
    text_path = posixpath.join(partition_dir, PARTITION_METAFILE)
    if storage.exists(text_path):
        data = storage.read_bytes(text_path)
        return PartitionMetadata.parse_text(data.decode("latin-1"), text_path)
    pq_path = posixpath.join(partition_dir, PARTITION_METAFILE_PARQUET)
    if storage.exists(pq_path):
        try:
            md = pq.read_metadata(io.BytesIO(storage.read_bytes(pq_path))).metadata or {}
        except (pa.ArrowInvalid, OSError) as e:
            raise CorruptFileError(pq_path, f"not a parquet file: {e}") from None
        props = {k.decode(): v.decode() for k, v in md.items()}
        return PartitionMetadata.from_properties(props, pq_path)
    raise StorageError(f"no partition metafile in {partition_dir}")


def write_partition_metadata(
    storage: Storage,
    base_path: str,
    partition_path: str,
    instant: str,
    *,
    base_format: bool = False,
    now: datetime | None = None,
) -> bool:
    """Write the partition metafile of ``partition_path`` unless one exists; True if this call wrote it.

    The file appears atomically (Storage writes a temp file and renames it on local storage; a single PUT on
    object stores). ``base_format`` writes ``.hoodie_partition_metadata.parquet`` instead of the properties file.
    """
    pdir = posixpath.join(base_path, partition_path) if partition_path else base_path
    meta = PartitionMetadata(instant, partition_depth(partition_path))
    for name in (PARTITION_METAFILE, PARTITION_METAFILE_PARQUET, PARTITION_METAFILE_ORC):
        if storage.exists(posixpath.join(pdir, name)):
            return False
    if base_format:
        path = posixpath.join(pdir, PARTITION_METAFILE_PARQUET)
        table = pa.table({"dummyint": pa.array([], pa.int64())})
        sink = pa.BufferOutputStream()
        with pq.ParquetWriter(sink, table.schema, compression="NONE", store_schema=False) as w:
            w.write_table(table)
            w.add_key_value_metadata(meta.to_properties())
        data = sink.getvalue().to_pybytes()
    else:
        path = posixpath.join(pdir, PARTITION_METAFILE)
        data = meta.to_text(now).encode("latin-1")
    try:
        storage.write_bytes(path, data, overwrite=False)
    except StorageError:
        if storage.exists(path):  # another writer won the race: fine, as in Hudi
            return False
        raise
    return True

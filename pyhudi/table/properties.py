"""``.hoodie/hoodie.properties``: the Java properties format, Hudi's table config keys, and safe updates.

Format facts (from apache/hudi ``HoodieTableConfig`` and ``java.util.Properties``):

- The file is ISO-8859-1 text; ``Properties.store`` writes ``#<comment>``, ``#<Date.toString()>``, then one
  ``key=value`` line per entry, escaping ``\\``, ``=``, ``:``, ``#``, ``!`` (and spaces in keys, a leading
  space in values, control characters and non-Latin-1 characters as ``\\uXXXX``).
- The comment is ``Properties saved on <Instant>`` when Hudi adds the checksum (table creation), or
  ``Updated at <Instant>`` when the properties already hold a valid checksum (every later update).
- ``hoodie.table.checksum`` = CRC32 of the UTF-8 bytes of ``"<hoodie.database.name or ''>.<hoodie.table.name>"``.
- Updates follow Hudi's backup protocol: recover a prior failed attempt, write ``hoodie.properties.backup``,
  delete ``hoodie.properties``, write the new file, re-read and verify the checksum, delete the backup. Readers
  that find no ``hoodie.properties`` read the backup.
"""

from __future__ import annotations

import posixpath
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime, tzinfo
from types import MappingProxyType
from typing import Any

from pyhudi.config import split_fields
from pyhudi.errors import ConfigError, CorruptFileError, StorageError
from pyhudi.io.storage import Storage

PROPERTIES_FILE = "hoodie.properties"
PROPERTIES_BACKUP_FILE = "hoodie.properties.backup"
METAFOLDER = ".hoodie"

# -- config keys -------------------------------------------------------------------------------------------
DATABASE_NAME = "hoodie.database.name"
TABLE_NAME = "hoodie.table.name"
TABLE_TYPE = "hoodie.table.type"
TABLE_VERSION = "hoodie.table.version"
TABLE_INITIAL_VERSION = "hoodie.table.initial.version"
TIMELINE_LAYOUT_VERSION = "hoodie.timeline.layout.version"
TIMELINE_PATH = "hoodie.timeline.path"
TIMELINE_HISTORY_PATH = "hoodie.timeline.history.path"
TIMELINE_TIMEZONE = "hoodie.table.timeline.timezone"
ARCHIVELOG_FOLDER = "hoodie.archivelog.folder"
RECORDKEY_FIELDS = "hoodie.table.recordkey.fields"
PARTITION_FIELDS = "hoodie.table.partition.fields"
ORDERING_FIELDS = "hoodie.table.ordering.fields"
PRECOMBINE_FIELD = "hoodie.table.precombine.field"  # table version <= 8 name of the ordering fields
KEYGENERATOR_TYPE = "hoodie.table.keygenerator.type"
KEYGENERATOR_CLASS = "hoodie.table.keygenerator.class"
HIVE_STYLE_PARTITIONING = "hoodie.datasource.write.hive_style_partitioning"
URL_ENCODE_PARTITIONING = "hoodie.datasource.write.partitionpath.urlencode"
DROP_PARTITION_COLUMNS = "hoodie.datasource.write.drop.partition.columns"
METADATA_PARTITIONS = "hoodie.table.metadata.partitions"
METADATA_PARTITIONS_INFLIGHT = "hoodie.table.metadata.partitions.inflight"
CREATE_SCHEMA = "hoodie.table.create.schema"
BASE_FILE_FORMAT = "hoodie.table.base.file.format"
LOG_FILE_FORMAT = "hoodie.table.log.file.format"
RECORD_MERGE_MODE = "hoodie.record.merge.mode"
RECORD_MERGE_STRATEGY_ID = "hoodie.record.merge.strategy.id"
PAYLOAD_CLASS = "hoodie.compaction.payload.class"
POPULATE_META_FIELDS = "hoodie.populate.meta.fields"
TABLE_FORMAT = "hoodie.table.format"
INDEX_DEFS_PATH = "hoodie.table.index.defs.path"
TABLE_CHECKSUM = "hoodie.table.checksum"
CDC_ENABLED = "hoodie.table.cdc.enabled"

COPY_ON_WRITE = "COPY_ON_WRITE"
MERGE_ON_READ = "MERGE_ON_READ"
TABLE_TYPES = (COPY_ON_WRITE, MERGE_ON_READ)
CURRENT_TABLE_VERSION = 9
CURRENT_TIMELINE_LAYOUT_VERSION = 2
DEFAULT_INDEX_DEFS_PATH = ".hoodie/.index_defs/index.json"

#: Defaults pyhudi writes into a new v9 table's hoodie.properties (what Hudi 1.1 writes).
DEFAULTS: Mapping[str, str] = MappingProxyType(
    {
        TABLE_TYPE: COPY_ON_WRITE,
        TABLE_VERSION: str(CURRENT_TABLE_VERSION),
        TABLE_INITIAL_VERSION: str(CURRENT_TABLE_VERSION),
        TIMELINE_LAYOUT_VERSION: str(CURRENT_TIMELINE_LAYOUT_VERSION),
        TIMELINE_PATH: "timeline",
        TIMELINE_HISTORY_PATH: "history",
        ARCHIVELOG_FOLDER: "archived",
        DROP_PARTITION_COLUMNS: "false",
        HIVE_STYLE_PARTITIONING: "false",
        URL_ENCODE_PARTITIONING: "false",
        METADATA_PARTITIONS_INFLIGHT: "",
        TABLE_FORMAT: "native",
        INDEX_DEFS_PATH: DEFAULT_INDEX_DEFS_PATH,
        RECORD_MERGE_MODE: "EVENT_TIME_ORDERING",
        DATABASE_NAME: "default",
        TIMELINE_TIMEZONE: "UTC",  # pyhudi's instant times are UTC; Java writers of the table honour it too
    }
)

#: Values assumed when a key is absent (Hudi's ConfigProperty defaults), used by the typed accessors.
_READ_DEFAULTS: Mapping[str, str] = MappingProxyType(
    {
        TABLE_TYPE: COPY_ON_WRITE,
        TIMELINE_PATH: "timeline",
        TIMELINE_HISTORY_PATH: "history",
        BASE_FILE_FORMAT: "PARQUET",
        LOG_FILE_FORMAT: "HOODIE_LOG",
        POPULATE_META_FIELDS: "true",
        TABLE_FORMAT: "native",
        HIVE_STYLE_PARTITIONING: "false",
        URL_ENCODE_PARTITIONING: "false",
        DROP_PARTITION_COLUMNS: "false",
        CDC_ENABLED: "false",
    }
)


def table_checksum(table_name: str, database_name: str = "") -> int:
    """Hudi's ``hoodie.table.checksum``: CRC32 of ``"<database>.<table>"`` (UTF-8)."""
    return zlib.crc32(f"{database_name}.{table_name}".encode())


# -- Java properties format --------------------------------------------------------------------------------
def _logical_lines(text: str) -> Iterator[str]:
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _ends_with_continuation(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        if _ends_with_continuation(line):
            line = line[:-1]
        yield line


def _ends_with_continuation(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _unescape(s: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= len(s):
            break
        c = s[i]
        if c == "u":
            hexdigits = s[i + 1 : i + 5]
            if len(hexdigits) != 4 or any(h not in "0123456789abcdefABCDEF" for h in hexdigits):
                raise ConfigError(f"malformed \\uxxxx escape in properties: {s!r}")
            out.append(chr(int(hexdigits, 16)))
            i += 5
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c))
        i += 1
    # \uXXXX escapes are UTF-16 code units: join surrogate pairs into code points
    return "".join(out).encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text (as ``Properties.load`` does); keeps the file's key order."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        i = 0
        escaped = False
        while i < len(line):
            c = line[i]
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c in "=: \t\f":
                break
            i += 1
        key, rest = line[:i], line[i:]
        # separator: whitespace, then at most one '=' or ':', then whitespace
        rest = rest.lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        props[_unescape(key)] = _unescape(rest)
    return props


def _escape(s: str, is_key: bool) -> str:
    out: list[str] = []
    for i, c in enumerate(s):
        o = ord(c)
        if c == " ":
            out.append("\\ " if (i == 0 or is_key) else " ")
        elif c == "\t":
            out.append("\\t")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\f":
            out.append("\\f")
        elif c in "=:#!\\":
            out.append("\\" + c)
        elif o < 0x20 or o > 0x7E:
            if o > 0xFFFF:  # Java strings are UTF-16: escape each surrogate
                hi, lo = divmod(o - 0x10000, 0x400)
                out.append(f"\\u{0xD800 + hi:04X}\\u{0xDC00 + lo:04X}")
            else:
                out.append(f"\\u{o:04X}")
        else:
            out.append(c)
    return "".join(out)


def _java_instant(ts: datetime) -> str:
    """``java.time.Instant.toString()``: ISO-8601 UTC with 0, 3 or 6 fraction digits."""
    base = ts.strftime("%Y-%m-%dT%H:%M:%S")
    us = ts.microsecond
    if us == 0:
        return base + "Z"
    if us % 1000 == 0:
        return f"{base}.{us // 1000:03d}Z"
    return f"{base}.{us:06d}Z"


def _java_date(ts: datetime) -> str:
    """``java.util.Date.toString()`` in UTC, e.g. ``Sat Mar 07 16:25:28 UTC 2026``."""
    return ts.strftime("%a %b %d %H:%M:%S UTC %Y")


def format_properties(
    props: Mapping[str, str], comment: str | None = None, now: datetime | None = None
) -> str:
    """Java ``Properties.store`` output: optional ``#comment``, the ``#date`` line, then ``key=value`` lines."""
    ts = now or datetime.now(UTC)
    lines: list[str] = []
    if comment is not None:
        lines.append("#" + comment.replace("\n", "\n#"))
    lines.append("#" + _java_date(ts))
    lines.extend(f"{_escape(k, True)}={_escape(v, False)}" for k, v in props.items())
    return "\n".join(lines) + "\n"


def _encode(text: str) -> bytes:
    return text.encode("latin-1")  # _escape leaves only ASCII


def _decode(data: bytes) -> str:
    return data.decode("latin-1")


# -- TableConfig -------------------------------------------------------------------------------------------
def _split_fields(value: str | None) -> list[str]:
    return list(split_fields(value))


def _bool(value: str) -> bool:
    return value.strip().lower() == "true"


class TableConfig(Mapping[str, str]):
    """Immutable view of a table's ``hoodie.properties`` with typed accessors.

    It is a read-only mapping of the raw string properties (file order kept). Use :meth:`with_updates` and
    :meth:`without` to derive modified copies.
    """

    __slots__ = ("_props",)

    def __init__(self, props: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        items = props.items() if isinstance(props, Mapping) else props
        d: dict[str, str] = {}
        for k, v in items:
            if not isinstance(k, str) or not isinstance(v, str):
                raise ConfigError(f"table config keys and values must be strings: {k!r}={v!r}")
            d[k] = v
        self._props: Mapping[str, str] = MappingProxyType(d)

    # -- mapping protocol
    def __getitem__(self, key: str) -> str:
        return self._props[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._props)

    def __len__(self) -> int:
        return len(self._props)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TableConfig):
            return dict(self._props) == dict(other._props)
        if isinstance(other, Mapping):
            return dict(self._props) == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self._props.items()))

    def __repr__(self) -> str:
        return f"TableConfig(name={self.get(TABLE_NAME)!r}, type={self.get(TABLE_TYPE)!r}, {len(self)} keys)"

    def to_dict(self) -> dict[str, str]:
        return dict(self._props)

    # -- construction
    @classmethod
    def create(
        cls,
        table_name: str,
        *,
        table_type: str = COPY_ON_WRITE,
        record_key_fields: Iterable[str] = (),
        partition_fields: Iterable[str] = (),
        ordering_fields: Iterable[str] = (),
        key_generator_type: str | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> TableConfig:
        """A new v9 table config with Hudi 1.1's defaults and the checksum filled in."""
        if table_type not in TABLE_TYPES:
            raise ConfigError(f"{TABLE_TYPE} must be one of {TABLE_TYPES}, not {table_type!r}")
        if not table_name:
            raise ConfigError(f"{TABLE_NAME} must not be empty")
        props: dict[str, str] = dict(DEFAULTS)
        props[TABLE_NAME] = table_name
        props[TABLE_TYPE] = table_type
        rk, pf, of = list(record_key_fields), list(partition_fields), list(ordering_fields)
        if rk:
            props[RECORDKEY_FIELDS] = ",".join(rk)
        if pf:
            props[PARTITION_FIELDS] = ",".join(pf)
        if of:
            props[ORDERING_FIELDS] = ",".join(of)
        else:
            props[RECORD_MERGE_MODE] = "COMMIT_TIME_ORDERING"
        if key_generator_type is None:
            key_generator_type = (
                "NON_PARTITION" if not pf else ("COMPLEX" if len(rk) > 1 or len(pf) > 1 else "SIMPLE")
            )
        props[KEYGENERATOR_TYPE] = key_generator_type
        if extra:
            props.update(extra)
        return cls(props).with_checksum()

    def with_updates(self, updates: Mapping[str, str] | None = None, **kw: str) -> TableConfig:
        """A copy with ``updates`` applied (checksum refreshed if the table or database name changed)."""
        d = dict(self._props)
        d.update(updates or {})
        d.update(kw)
        new = TableConfig(d)
        if TABLE_CHECKSUM in d and not new.has_valid_checksum():
            new = new.with_checksum()
        return new

    def without(self, keys: Iterable[str]) -> TableConfig:
        drop = set(keys)
        return TableConfig((k, v) for k, v in self._props.items() if k not in drop)

    def with_checksum(self) -> TableConfig:
        d = dict(self._props)
        d[TABLE_CHECKSUM] = str(self.computed_checksum())
        return TableConfig(d)

    # -- checksum
    def computed_checksum(self) -> int:
        if TABLE_NAME not in self._props:
            raise ConfigError(f"{TABLE_NAME} property needs to be specified")
        return table_checksum(self._props[TABLE_NAME], self._props.get(DATABASE_NAME, ""))

    def has_valid_checksum(self) -> bool:
        value = self._props.get(TABLE_CHECKSUM)
        if value is None:
            return False
        try:
            return int(value) == self.computed_checksum()
        except ValueError:
            return False

    # -- typed accessors
    def _get(self, key: str) -> str | None:
        v = self._props.get(key)
        return v if v is not None else _READ_DEFAULTS.get(key)

    def _require(self, key: str) -> str:
        v = self._get(key)
        if v is None:
            raise ConfigError(f"{key} is missing from {PROPERTIES_FILE}")
        return v

    def _int(self, key: str, default: int | None = None) -> int:
        v = self._get(key)
        if v is None:
            if default is None:
                raise ConfigError(f"{key} is missing from {PROPERTIES_FILE}")
            return default
        try:
            return int(v)
        except ValueError as e:
            raise ConfigError(f"{key} must be an integer, not {v!r}") from e

    @property
    def table_name(self) -> str:
        return self._require(TABLE_NAME)

    @property
    def database_name(self) -> str | None:
        return self._props.get(DATABASE_NAME)

    @property
    def table_type(self) -> str:
        t = self._require(TABLE_TYPE)
        if t not in TABLE_TYPES:
            raise ConfigError(f"{TABLE_TYPE} must be one of {TABLE_TYPES}, not {t!r}")
        return t

    @property
    def is_cow(self) -> bool:
        return self.table_type == COPY_ON_WRITE

    @property
    def is_mor(self) -> bool:
        return self.table_type == MERGE_ON_READ

    @property
    def table_version(self) -> int:
        return self._int(TABLE_VERSION)

    @property
    def initial_version(self) -> int:
        return self._int(TABLE_INITIAL_VERSION, self.table_version)

    @property
    def timeline_layout_version(self) -> int:
        return self._int(
            TIMELINE_LAYOUT_VERSION, CURRENT_TIMELINE_LAYOUT_VERSION if self.table_version >= 8 else 1
        )

    @property
    def timeline_zone(self) -> tzinfo | None:
        """The zone of the table's instant times (``hoodie.table.timeline.timezone``): UTC, or None for the
        machine's local zone (``LOCAL``). A table that does not say is taken as UTC, the zone pyhudi has always
        written (Hudi's writers take it as LOCAL: the same on machines in UTC)."""
        value = self._props.get(TIMELINE_TIMEZONE)
        if value == "LOCAL":
            return None
        if value is None or value == "UTC":
            return UTC
        raise ConfigError(f"{TIMELINE_TIMEZONE}={value!r} in {PROPERTIES_FILE} must be LOCAL or UTC")

    @property
    def timeline_path(self) -> str:
        """``hoodie.timeline.path``: a folder inside ``.hoodie`` (a value leading elsewhere is refused)."""
        from pyhudi.table.partition_path import partition_path_problem

        value = self._require(TIMELINE_PATH)
        problem = partition_path_problem(value)
        if problem is not None:
            raise ConfigError(
                f"{TIMELINE_PATH}={value!r} in hoodie.properties {problem}: the timeline must be a folder inside "
                f"{METAFOLDER}"
            )
        return value

    @property
    def timeline_history_path(self) -> str:
        return self._require(TIMELINE_HISTORY_PATH)

    @property
    def record_key_fields(self) -> list[str]:
        return _split_fields(self._props.get(RECORDKEY_FIELDS))

    @property
    def partition_fields(self) -> list[str]:
        """Partition field names, without the ``:type`` suffix a custom key generator may add."""
        return [f.split(":", 1)[0] for f in _split_fields(self._props.get(PARTITION_FIELDS))]

    @property
    def ordering_fields(self) -> list[str]:
        """``hoodie.table.ordering.fields`` (v9), falling back to v8's ``hoodie.table.precombine.field``."""
        v = self._props.get(ORDERING_FIELDS)
        if v is None:
            v = self._props.get(PRECOMBINE_FIELD)
        return _split_fields(v)

    @property
    def key_generator_type(self) -> str | None:
        return self._props.get(KEYGENERATOR_TYPE)

    @property
    def key_generator_class(self) -> str | None:
        return self._props.get(KEYGENERATOR_CLASS)

    @property
    def hive_style_partitioning(self) -> bool:
        return _bool(self._require(HIVE_STYLE_PARTITIONING))

    @property
    def url_encode_partitioning(self) -> bool:
        return _bool(self._require(URL_ENCODE_PARTITIONING))

    @property
    def drop_partition_columns(self) -> bool:
        return _bool(self._require(DROP_PARTITION_COLUMNS))

    @property
    def metadata_partitions(self) -> list[str]:
        return _split_fields(self._props.get(METADATA_PARTITIONS))

    @property
    def metadata_partitions_inflight(self) -> list[str]:
        return _split_fields(self._props.get(METADATA_PARTITIONS_INFLIGHT))

    @property
    def create_schema(self) -> str | None:
        return self._props.get(CREATE_SCHEMA)

    @property
    def base_file_format(self) -> str:
        return self._require(BASE_FILE_FORMAT).upper()

    @property
    def record_merge_mode(self) -> str | None:
        return self._props.get(RECORD_MERGE_MODE)

    @property
    def populate_meta_fields(self) -> bool:
        return _bool(self._require(POPULATE_META_FIELDS))

    @property
    def table_format(self) -> str:
        return self._require(TABLE_FORMAT)

    @property
    def index_defs_path(self) -> str | None:
        return self._props.get(INDEX_DEFS_PATH)

    @property
    def checksum(self) -> int | None:
        v = self._props.get(TABLE_CHECKSUM)
        return int(v) if v is not None and v.strip().lstrip("-").isdigit() else None

    # -- text form
    def to_properties_text(self, now: datetime | None = None) -> str:
        """The file text Hudi would store: ``Updated at`` when the checksum is valid, else add the checksum."""
        ts = now or datetime.now(UTC)
        if self.has_valid_checksum():
            return format_properties(self._props, f"Updated at {_java_instant(ts)}", ts)
        return format_properties(self.with_checksum(), f"Properties saved on {_java_instant(ts)}", ts)

    @classmethod
    def from_properties_text(cls, text: str) -> TableConfig:
        return cls(parse_properties(text))

    def get_any(self, key: str, default: Any = None) -> Any:
        return self._props.get(key, default)


# -- storage -----------------------------------------------------------------------------------------------
def meta_path(base_path: str) -> str:
    return posixpath.join(base_path, METAFOLDER)


def _paths(metafolder: str) -> tuple[str, str]:
    return posixpath.join(metafolder, PROPERTIES_FILE), posixpath.join(metafolder, PROPERTIES_BACKUP_FILE)


def table_config_exists(storage: Storage, metafolder: str) -> bool:
    """Whether ``<metafolder>/hoodie.properties`` (or its backup, during an update) exists."""
    return any(storage.exists(p) for p in _paths(metafolder))


def read_table_config(storage: Storage, metafolder: str) -> TableConfig:
    """Load ``<metafolder>/hoodie.properties`` (falling back to the backup during an update, as Hudi does).

    A file that is there but incomplete is not used (:func:`_incomplete`: a torn or truncated write would
    otherwise lose keys such as the ordering fields or the metadata partitions, which a later write would then
    store as lost). Where no file is whole, both are read again after a moment (another process's update may be
    writing the live file where writes are not atomic, as Hudi's readers retry), then CorruptFileError names the
    live file's fault."""
    cfg, backup = _paths(metafolder)
    for attempt in range(_READ_ATTEMPTS):
        faults: list[tuple[str, str]] = []  # (path, what is wrong with it)
        missing: StorageError | None = None
        for path in (cfg, backup):
            try:
                data = storage.read_bytes(path)
            except StorageError as e:
                if path == cfg:
                    missing = e
                continue
            config, fault = _parse_whole(data)
            if config is not None:
                return config
            faults.append((path, fault))
        if not faults:
            raise StorageError(f"cannot read table config from {cfg}: {missing}")
        if attempt + 1 < _READ_ATTEMPTS:
            time.sleep(_READ_RETRY_S)
    path, fault = faults[0]
    also = "".join(f"; {p}: {f}" for p, f in faults[1:])
    raise CorruptFileError(path, f"{fault}{also}; the table is neither read nor written until {PROPERTIES_FILE} "
                           "is repaired")


_READ_ATTEMPTS = 3
_READ_RETRY_S = 0.1


#: tables of these versions always carry a checksum (Hudi writes one since table version 3)
_CHECKSUM_SINCE_VERSION = 3


def _parse_whole(data: bytes) -> tuple[TableConfig | None, str]:
    """``(config, "")`` for the bytes of a whole ``hoodie.properties``, else ``(None, what is wrong)``: one that
    does not parse, or is not whole (:func:`_incomplete`)."""
    try:
        config = TableConfig.from_properties_text(_decode(data))
    except ConfigError as e:
        return None, str(e)
    fault = _incomplete(config, data)
    return (config, "") if fault is None else (None, fault)


def _incomplete(config: TableConfig, data: bytes) -> str | None:
    """Why a ``hoodie.properties`` read as ``config`` from ``data`` is not a whole file Hudi wrote, or None: Java's
    ``Properties.store`` ends every line with a line break, and Hudi writes the table name, type and version and
    (since version 3) the checksum of every table. pyhudi writes the checksum last, so a truncated file of its
    own always lacks it or holds it cut."""
    if not data.endswith(b"\n"):
        return "the file does not end with a line break (truncated?)"
    for key in (TABLE_NAME, TABLE_TYPE, TABLE_VERSION):
        if key not in config:
            return f"{key} is missing (truncated file?)"
    try:
        version = int(config[TABLE_VERSION])
    except ValueError:
        return f"{TABLE_VERSION} is not a number: {config[TABLE_VERSION]!r}"
    if TABLE_CHECKSUM not in config:
        if version >= _CHECKSUM_SINCE_VERSION:
            return f"{TABLE_CHECKSUM} is missing (truncated file?)"
    elif not config.has_valid_checksum():
        return f"{TABLE_CHECKSUM} {config[TABLE_CHECKSUM]!r} does not match the table name (a damaged file?)"
    return None


def create_table_config(
    storage: Storage, metafolder: str, config: TableConfig, now: datetime | None = None
) -> TableConfig:
    """Write a new table's ``hoodie.properties`` (fails if one exists). Returns the config as stored."""
    cfg, _ = _paths(metafolder)
    stored = config if config.has_valid_checksum() else config.with_checksum()
    text = format_properties(stored, f"Properties saved on {_java_instant(now or datetime.now(UTC))}", now)
    storage.makedirs(metafolder)
    storage.write_bytes(cfg, _encode(text), overwrite=False)
    return stored


def recover_table_config(storage: Storage, metafolder: str) -> None:
    """Finish or undo an interrupted update: restore ``hoodie.properties`` from the backup if it is missing,
    then delete the backup (Hudi's ``ConfigUtils.recoverIfNeeded``). A live file that is not whole
    (:func:`_incomplete`: an update cut while writing it) is restored from a whole backup too, never left with
    its backup deleted: readers use the backup meanwhile, and the table would be lost to them."""
    cfg, backup = _paths(metafolder)
    if storage.exists(backup):
        if not storage.exists(cfg):
            storage.write_bytes(cfg, storage.read_bytes(backup), overwrite=False)
        elif _whole_bytes(storage, cfg) is None and (saved := _whole_bytes(storage, backup)) is not None:
            storage.write_bytes(cfg, saved, overwrite=True)
    storage.delete(backup, missing_ok=True)


def _whole_bytes(storage: Storage, path: str) -> bytes | None:
    """The bytes of ``path`` when it holds a whole ``hoodie.properties`` (:func:`_parse_whole`), else None."""
    try:
        data = storage.read_bytes(path)
    except StorageError:
        return None
    return data if _parse_whole(data)[0] is not None else None


def update_table_config(
    storage: Storage,
    metafolder: str,
    updates: Mapping[str, str] | None = None,
    deletes: Iterable[str] = (),
    now: datetime | None = None,
) -> TableConfig:
    """Upsert ``updates`` and remove ``deletes`` in ``hoodie.properties`` with Hudi's backup protocol."""
    cfg, backup = _paths(metafolder)
    recover_table_config(storage, metafolder)
    current = read_table_config(storage, metafolder)
    ts = now or datetime.now(UTC)
    # 1. back up the current properties; readers fall back to it while hoodie.properties is absent.
    storage.write_bytes(backup, _encode(current.to_properties_text(ts)), overwrite=False)
    # 2. remove the live file, 3. write the new one.
    storage.delete(cfg)
    new = current.with_updates(dict(updates or {})).without(deletes)
    if TABLE_CHECKSUM in current and not new.has_valid_checksum():
        new = new.with_checksum()
    if TABLE_CHECKSUM in new:  # written last: a truncated file lacks it (read_table_config)
        new = new.without([TABLE_CHECKSUM]).with_updates({TABLE_CHECKSUM: new[TABLE_CHECKSUM]})
    text = new.to_properties_text(ts)
    storage.write_bytes(cfg, _encode(text), overwrite=True)
    # 4. verify, 5. drop the backup.
    reread = TableConfig.from_properties_text(_decode(storage.read_bytes(cfg)))
    expected = TableConfig.from_properties_text(text).get(TABLE_CHECKSUM)
    if reread.get(TABLE_CHECKSUM) != expected or expected is None:
        storage.delete(cfg)
        raise StorageError(f"{cfg}: checksum missing or mismatched after update; the backup is kept")
    storage.delete(backup)
    return reread

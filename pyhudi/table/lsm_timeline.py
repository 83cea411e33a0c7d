"""The LSM timeline: where Hudi 1.x (table version 8+) keeps archived instants, ``.hoodie/<timeline>/<history>/``
(``hoodie.timeline.path`` / ``hoodie.timeline.history.path``, by default ``.hoodie/timeline/history``).

Files (checked against apache/hudi ``LSMTimeline``, ``HoodieLSMTimelineManifest``, ``LSMTimelineWriter``):

- ``_version_``: the current snapshot version N as decimal UTF-8 text, no newline. Rewritten by delete + create;
  a reader that cannot read it takes the greatest N of the ``manifest_N`` files present.
- ``manifest_N``: the live parquet files of snapshot N, Jackson's default pretty print of
  ``{"files" : [ {"fileName" : ..., "fileLen" : ...}, ... ]}``. N starts at 1 and grows by one per change.
- ``<min>_<max>_<layer>.parquet``: archived instants, one row each, sorted by requested time; ``min``/``max`` are
  the requested times of the first and last row. Layer 0 files come from archival runs, layer L+1 files from
  merging layer-L files. Rows follow the Avro record ``HoodieLSMTimelineInstant`` as Hudi's Avro-parquet writer
  stores it with meta fields off: ``instantTime``, ``completionTime``, ``action`` (optional UTF-8 strings),
  ``metadata``, ``plan`` (optional binary) and ``version`` (required int32, 1); footer key-value metadata
  ``parquet.avro.schema`` (the compiled Avro schema) and ``writer.model.name`` = ``avro``.

  ``action`` is the completed action (``commit`` for a compaction, ``replacecommit`` for a clustering);
  ``metadata`` the bytes of the completed instant file (null if empty); ``plan`` the bytes of the requested plan
  of a clean, compaction or log compaction, or for a replacecommit/clustering the requested replace metadata,
  overridden by the inflight file's content when that is not empty.

Only ``_version_`` and the manifest say which parquet files count: a file that is not listed (an archival that
stopped before its manifest, or an input of a compaction) is not read.

:class:`ArchivedTimeline` is the archived instants as a :class:`~pyhudi.table.timeline.Timeline`;
:class:`FullTimeline` joins it with the active timeline for readers that need the whole history;
:class:`ArchivedCompletionTimes` looks up the completion times of a few archived instants (the file-system view
asks it where a log file of an archived deltacommit belongs).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pyhudi.errors import CorruptFileError, PyHudiError, StorageError
from pyhudi.io import avro
from pyhudi.io.storage import Storage
from pyhudi.table.properties import METAFOLDER, TableConfig, read_table_config
from pyhudi.table.timeline import ActiveTimeline, Instant, State, Timeline

VERSION_FILE = "_version_"
MANIFEST_PREFIX = "manifest_"
LSM_INSTANT_VERSION = 1  # LSMTimeline.LSM_TIMELINE_INSTANT_VERSION_1
INSTANT_SCHEMA = "HoodieLSMTimelineInstant"
AVRO_SCHEMA_KEY = "parquet.avro.schema"
WRITER_MODEL_KEY = "writer.model.name"
MAX_LAYER = 9  # Hudi's file name pattern has a one-digit layer

_MANIFEST_RE = re.compile(r"^manifest_(\d+)$")
_FILE_RE = re.compile(r"^(\d+)_(\d+)_(\d)\.parquet$")

#: columns of an LSM timeline parquet file, as Hudi's Avro-parquet writer lays out ``HoodieLSMTimelineInstant``
ARROW_SCHEMA = pa.schema(
    [
        pa.field("instantTime", pa.string(), nullable=True),
        pa.field("completionTime", pa.string(), nullable=True),
        pa.field("action", pa.string(), nullable=True),
        pa.field("metadata", pa.binary(), nullable=True),
        pa.field("plan", pa.binary(), nullable=True),
        pa.field("version", pa.int32(), nullable=False),
    ]
)
_TIME_COLUMNS = ["instantTime", "completionTime", "action"]


# -- file names ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, order=True)
class LsmFile:
    """A parquet file name of the LSM timeline: ``<min>_<max>_<layer>.parquet``."""

    min_instant: str
    max_instant: str
    layer: int

    def __post_init__(self) -> None:
        if not (self.min_instant.isdigit() and self.max_instant.isdigit()):
            raise ValueError(f"LSM timeline file instants must be digits: {self.min_instant!r}, {self.max_instant!r}")
        if not 0 <= self.layer <= MAX_LAYER:
            raise ValueError(f"LSM timeline layer must be 0..{MAX_LAYER}, not {self.layer}")

    @property
    def name(self) -> str:
        return f"{self.min_instant}_{self.max_instant}_{self.layer}.parquet"

    @staticmethod
    def parse(name: str) -> LsmFile | None:
        m = _FILE_RE.match(name)
        return LsmFile(m.group(1), m.group(2), int(m.group(3))) if m else None

    def overlaps(self, lo: str | None, hi: str | None) -> bool:
        """Whether requested times in ``[lo, hi]`` (open ends when None) may be in this file."""
        return (lo is None or self.max_instant >= lo) and (hi is None or self.min_instant <= hi)


def manifest_version(name: str) -> int | None:
    m = _MANIFEST_RE.match(name)
    return int(m.group(1)) if m else None


def compacted_name(names: Sequence[str]) -> str:
    """The file a compaction of ``names`` (files of one layer) writes: min of mins, max of maxes, layer + 1."""
    files = [_parse_required(n) for n in names]
    layer = files[0].layer + 1
    if layer > MAX_LAYER:
        raise PyHudiError(f"LSM timeline cannot grow beyond layer {MAX_LAYER}")
    return LsmFile(min(f.min_instant for f in files), max(f.max_instant for f in files), layer).name


def _parse_required(name: str) -> LsmFile:
    f = LsmFile.parse(name)
    if f is None:
        raise PyHudiError(f"not an LSM timeline file name: {name!r}")
    return f


# -- manifest -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ManifestEntry:
    file_name: str
    file_len: int


@dataclass(frozen=True)
class Manifest:
    """The live files of one snapshot version of the LSM timeline."""

    files: tuple[ManifestEntry, ...] = ()

    @property
    def file_names(self) -> list[str]:
        return [f.file_name for f in self.files]

    def __contains__(self, file_name: object) -> bool:
        return any(f.file_name == file_name for f in self.files)

    def with_changes(self, remove: Iterable[str] = (), add: ManifestEntry | None = None) -> Manifest:
        """This manifest without ``remove``, with ``add`` appended (``HoodieLSMTimelineManifest.copy/addFile``)."""
        gone = set(remove)
        files = [f for f in self.files if f.file_name not in gone]
        if add is not None:
            files = [f for f in files if f.file_name != add.file_name] + [add]
        return Manifest(tuple(files))

    def to_json(self) -> str:
        """Jackson's default pretty print, as ``HoodieLSMTimelineManifest.toJsonString`` writes it."""
        if not self.files:
            return '{\n  "files" : [ ]\n}'
        items = [
            "{\n"
            f'    "fileName" : {json.dumps(f.file_name, ensure_ascii=False)},\n'
            f'    "fileLen" : {int(f.file_len)}\n'
            "  }"
            for f in self.files
        ]
        return '{\n  "files" : [ ' + ", ".join(items) + " ]\n}"

    @staticmethod
    def from_json(text: str, path: str = "<manifest>") -> Manifest:
        if not text.strip():
            return Manifest()  # Hudi reads an empty manifest file as no files
        try:
            obj = json.loads(text)
            files = tuple(
                ManifestEntry(str(e["fileName"]), int(e.get("fileLen") or 0)) for e in (obj.get("files") or [])
            )
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise CorruptFileError(path, f"not an LSM timeline manifest: {e}") from e
        for f in files:
            if LsmFile.parse(f.file_name) is None:
                raise CorruptFileError(path, f"manifest lists {f.file_name!r}, not an LSM timeline file name")
        return Manifest(files)


# -- rows ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LsmEntry:
    """One archived instant: a row of an LSM timeline file."""

    instant_time: str
    completion_time: str | None
    action: str
    metadata: bytes | None = None
    plan: bytes | None = None
    version: int = LSM_INSTANT_VERSION

    @property
    def instant(self) -> Instant:
        """The completed instant. An entry without a completion time (instants archived before Hudi 1.0 and
        carried over by a table upgrade) completed, as then, in requested-time order: its requested time."""
        return Instant(self.instant_time, self.action, State.COMPLETED, self.completion_time or self.instant_time)


def footer_metadata() -> dict[str, str]:
    """The key-value metadata parquet-avro's ``AvroWriteSupport`` puts in the footer."""
    return {
        AVRO_SCHEMA_KEY: avro.java_schema_json(avro.schema_json(INSTANT_SCHEMA)),
        WRITER_MODEL_KEY: "avro",
    }


def entries_table(entries: Sequence[LsmEntry]) -> pa.Table:
    return pa.table(
        {
            "instantTime": pa.array([e.instant_time for e in entries], pa.string()),
            "completionTime": pa.array([e.completion_time for e in entries], pa.string()),
            "action": pa.array([e.action for e in entries], pa.string()),
            "metadata": pa.array([e.metadata for e in entries], pa.binary()),
            "plan": pa.array([e.plan for e in entries], pa.binary()),
            "version": pa.array([e.version for e in entries], pa.int32()),
        },
        schema=ARROW_SCHEMA,
    )


def encode_file(
    rows: pa.Table | Sequence[LsmEntry],
    *,
    compression: str = "gzip",
    compression_level: int | None = None,
    dictionary: bool = True,
    page_size: int | None = None,
) -> bytes:
    """An LSM timeline parquet file holding ``rows`` (in the given order) in one row group."""
    table = rows if isinstance(rows, pa.Table) else entries_table(rows)
    table = table.select(ARROW_SCHEMA.names).cast(ARROW_SCHEMA)
    sink = pa.BufferOutputStream()
    # no ARROW:schema entry: the footer holds what parquet-avro writes, and nothing else
    with pq.ParquetWriter(
        sink,
        ARROW_SCHEMA,
        compression=compression,
        compression_level=compression_level,
        use_dictionary=dictionary,
        data_page_size=page_size,
        store_schema=False,
    ) as w:
        w.write_table(table, row_group_size=max(1, table.num_rows))
        w.add_key_value_metadata(footer_metadata())
    return bytes(sink.getvalue().to_pybytes())


def decode_file(data: bytes | pa.NativeFile, path: str, columns: Sequence[str] | None = None) -> pa.Table:
    """Rows of an LSM timeline parquet file (``columns``: a subset of the schema's), schema-checked."""
    src = pa.BufferReader(data) if isinstance(data, bytes) else data
    try:
        pf = pq.ParquetFile(src)
        names = set(pf.schema_arrow.names)
        wanted = list(columns) if columns is not None else ARROW_SCHEMA.names
        missing = [c for c in wanted if c not in names]
        if missing:
            raise CorruptFileError(path, f"LSM timeline file lacks column(s) {missing}")
        table = pf.read(columns=wanted)
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptFileError(path, f"cannot read LSM timeline file: {e}") from e
    return table.cast(pa.schema([ARROW_SCHEMA.field(c) for c in wanted]).remove_metadata())


# -- the history folder -------------------------------------------------------------------------------------------
def history_dir_for(base_path: str, config: TableConfig) -> str:
    if config.table_version < 8 or config.timeline_layout_version != 2:
        raise PyHudiError(
            f"{base_path}: the LSM timeline needs table version 8+ with timeline layout 2 "
            f"(version {config.table_version}, layout {config.timeline_layout_version})"
        )
    return posixpath.join(ActiveTimeline.timeline_dir_for(base_path, config), config.timeline_history_path)


class LsmHistory:
    """The files of one table's LSM timeline folder: versions, manifests and parquet files."""

    def __init__(self, storage: Storage, history_dir: str) -> None:
        self.storage = storage
        self.dir = history_dir.rstrip("/")

    @classmethod
    def for_table(cls, storage: Storage, base_path: str, config: TableConfig | None = None) -> LsmHistory:
        if config is None:
            config = read_table_config(storage, posixpath.join(base_path.rstrip("/"), METAFOLDER))
        return cls(storage, history_dir_for(base_path.rstrip("/"), config))

    # -- paths
    @property
    def version_path(self) -> str:
        return posixpath.join(self.dir, VERSION_FILE)

    def manifest_path(self, version: int) -> str:
        return posixpath.join(self.dir, f"{MANIFEST_PREFIX}{version}")

    def path(self, file_name: str) -> str:
        return posixpath.join(self.dir, file_name)

    # -- versions
    def read_version_file(self) -> int | None:
        """The version ``_version_`` names, or None when it is missing or unreadable."""
        try:
            raw = self.storage.read_bytes(self.version_path)
        except (StorageError, OSError):
            return None
        try:
            return int(raw.decode("utf-8").strip())
        except (UnicodeDecodeError, ValueError):
            return None

    def listing(self) -> list[str]:
        return [st.name for st in self.storage.list(self.dir) if not st.is_dir]

    def manifest_versions(self, names: Iterable[str] | None = None) -> list[int]:
        out = [v for v in (manifest_version(n) for n in (names if names is not None else self.listing())) if v is not None]
        return sorted(out)

    def latest_version(self) -> int:
        """The current snapshot version (0: nothing archived yet), as Hudi's readers find it."""
        v = self.read_version_file()
        if v is not None:
            return v
        versions = self.manifest_versions()
        return versions[-1] if versions else 0

    def read_manifest(self, version: int) -> Manifest:
        if version <= 0:
            return Manifest()
        path = self.manifest_path(version)
        try:
            data = self.storage.read_bytes(path)
        except StorageError as e:
            raise CorruptFileError(path, f"manifest of LSM timeline version {version} is missing") from e
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptFileError(path, "manifest is not UTF-8") from e
        return Manifest.from_json(text, path)

    def latest(self) -> tuple[int, Manifest]:
        v = self.latest_version()
        return v, self.read_manifest(v)

    # -- parquet files
    def read_file(self, file_name: str, columns: Sequence[str] | None = None) -> pa.Table:
        path = self.path(file_name)
        with self.storage.open_input(path) as f:
            return decode_file(f, path, columns)

    def parquet_files(self, names: Iterable[str] | None = None) -> list[str]:
        return sorted(n for n in (names if names is not None else self.listing()) if n.endswith(".parquet"))


# -- the archived timeline ----------------------------------------------------------------------------------------
def _entries(table: pa.Table) -> Iterator[LsmEntry]:
    cols = {c: table.column(c).to_pylist() for c in table.column_names}
    n = table.num_rows
    for i in range(n):
        t = cols["instantTime"][i]
        action = cols["action"][i]
        if not t or not action:
            continue  # not an instant (Hudi writes every row with both)
        yield LsmEntry(
            t,
            cols["completionTime"][i],
            action,
            cols["metadata"][i] if "metadata" in cols else None,
            cols["plan"][i] if "plan" in cols else None,
            int(cols["version"][i]) if "version" in cols and cols["version"][i] is not None else LSM_INSTANT_VERSION,
        )


class ArchivedTimeline(Timeline):
    """The archived instants of a table (all completed), read from the current snapshot of its LSM timeline.

    Instants are loaded with their times and actions only; :meth:`read_entry` and the ``read_*`` methods fetch
    an instant's metadata or plan from the one file that holds it (files are read whole and kept).
    """

    def __init__(self, history: LsmHistory, version: int, manifest: Manifest, located: Mapping[str, tuple[Instant, str]]) -> None:
        super().__init__(inst for inst, _ in located.values())
        self.history = history
        self.version = version
        self.manifest = manifest
        self._file_of = {t: f for t, (_, f) in located.items()}
        self._rows: dict[str, dict[str, LsmEntry]] = {}

    @classmethod
    def load(cls, storage: Storage, base_path: str, config: TableConfig | None = None) -> ArchivedTimeline:
        return cls.from_history(LsmHistory.for_table(storage, base_path, config))

    @classmethod
    def from_history(cls, history: LsmHistory) -> ArchivedTimeline:
        version, manifest = history.latest()
        located: dict[str, tuple[Instant, str]] = {}
        # newest layer first: a row that is in two files (possible only after a failed run of another writer)
        # is taken from one of them; both hold the same bytes
        for name in sorted(manifest.file_names, key=lambda n: (-_parse_required(n).layer, n)):
            for e in _entries(history.read_file(name, _TIME_COLUMNS)):
                located.setdefault(e.instant_time, (e.instant, name))
        return cls(history, version, manifest, located)

    @classmethod
    def empty(cls, history: LsmHistory) -> ArchivedTimeline:
        return cls(history, 0, Manifest(), {})

    def file_of(self, requested_time: str) -> str:
        f = self._file_of.get(requested_time)
        if f is None:
            raise PyHudiError(f"instant {requested_time} is not in the archived timeline of {self.history.dir}")
        return f

    def read_entry(self, requested_time: str) -> LsmEntry:
        name = self.file_of(requested_time)
        rows = self._rows.get(name)
        if rows is None:
            rows = {e.instant_time: e for e in _entries(self.history.read_file(name))}
            self._rows[name] = rows
        e = rows.get(requested_time)
        if e is None:
            raise CorruptFileError(self.history.path(name), f"instant {requested_time} is missing")
        return e

    def read_bytes(self, instant: Instant) -> bytes:
        """The completed instant file's bytes (empty if it was empty)."""
        return self.read_entry(instant.requested_time).metadata or b""

    def read_plan_bytes(self, instant: Instant) -> bytes | None:
        return self.read_entry(instant.requested_time).plan

    def _where(self, instant: Instant) -> str:
        return f"{self.history.path(self.file_of(instant.requested_time))}[{instant.requested_time}]"

    def read_content(self, instant: Instant) -> dict[str, Any] | None:
        """The completed instant's Avro record as a dict, or None if its file was empty."""
        data = self.read_bytes(instant)
        return avro.read_single(data, self._where(instant)) if data else None

    def read_completed(self, instant: Instant, action: str | None = None) -> dict[str, Any]:
        if action is not None and instant.action != action:
            raise PyHudiError(f"instant {instant} is not a completed {action}")
        content = self.read_content(instant)
        if content is None:
            raise CorruptFileError(self._where(instant), f"archived {instant.action} has no metadata")
        return content

    def read_commit_metadata(self, instant: Instant) -> dict[str, Any]:
        return self.read_completed(instant)

    def read_plan(self, instant: Instant) -> dict[str, Any] | None:
        """The archived plan (clean, compaction, replace metadata) as a dict, or None when none was kept."""
        data = self.read_plan_bytes(instant)
        return avro.read_single(data, self._where(instant)) if data else None


class ArchivedCompletionTimes:
    """Completion times of archived instants, read from the LSM timeline only when asked for (as Hudi's
    ``CompletionTimeQueryView`` loads archived completion times lazily, past its cursor).

    Calling it with requested times reads ``_version_`` and the manifest, then only the listed files whose
    instant range holds one of them, and of those only the time columns; what it found (and what it did not)
    is kept, so asking again reads nothing. Constructing one reads nothing. An archived instant without a
    completion time (archived before Hudi 1.0) completed, as then, at its requested time.
    """

    def __init__(self, storage: Storage, base_path: str, config: TableConfig | None = None) -> None:
        self.storage = storage
        self.base_path = base_path.rstrip("/")
        self._config = config
        self._history: LsmHistory | None = None
        self._found: dict[str, str] = {}
        self._absent: set[str] = set()
        self._earliest: tuple[str] | None = None
        self.files_read = 0  # LSM parquet files read so far

    @property
    def history(self) -> LsmHistory:
        if self._history is None:
            self._history = LsmHistory.for_table(self.storage, self.base_path, self._config)
        return self._history

    def earliest(self) -> str | None:
        """The earliest instant time the LSM timeline's files cover (from their names; None: it holds none). An
        instant at or after it that the timeline does not hold was never archived; before it, the archive does
        not say (a table upgraded from an older version, history that was removed)."""
        if self._earliest is None:
            _, manifest = self.history.latest()
            lows = [_parse_required(n).min_instant for n in manifest.file_names]
            self._earliest = (min(lows) if lows else "",)
        return self._earliest[0] or None

    def never_archived(self, instant: str) -> bool:
        """Whether ``instant`` is within what the LSM timeline covers and not held by it."""
        first = self.earliest()
        return first is not None and instant >= first and not self([instant])

    def __call__(self, instants: Iterable[str]) -> dict[str, str]:
        """requested time -> completion time of those of ``instants`` the LSM timeline holds."""
        asked = set(instants)
        todo = asked - self._found.keys() - self._absent
        if todo:
            self._load(todo)
        return {t: self._found[t] for t in asked if t in self._found}

    def _load(self, todo: set[str]) -> None:
        history = self.history
        _, manifest = history.latest()
        for name in manifest.file_names:
            f = _parse_required(name)
            if not any(f.min_instant <= t <= f.max_instant for t in todo):
                continue
            self.files_read += 1
            for e in _entries(history.read_file(name, _TIME_COLUMNS)):
                if e.instant_time in todo:
                    self._found.setdefault(e.instant_time, e.instant.completion_time or e.instant_time)
        self._absent.update(todo - self._found.keys())


class FullTimeline(Timeline):
    """A table's whole timeline: its archived instants and its active timeline (one entry per requested time).

    An instant in both (an archival that stopped after committing its file, before deleting the active files) is
    taken from the active timeline.
    """

    def __init__(self, active: ActiveTimeline, archived: ArchivedTimeline) -> None:
        live = {i.requested_time for i in active}
        super().__init__([i for i in archived if i.requested_time not in live] + list(active))
        self.active = active
        self.archived = archived
        self._archived_only = {i.requested_time for i in archived} - live

    @classmethod
    def load(
        cls, storage: Storage, base_path: str, config: TableConfig | None = None, active: ActiveTimeline | None = None
    ) -> FullTimeline:
        if config is None:
            config = read_table_config(storage, posixpath.join(base_path.rstrip("/"), METAFOLDER))
        if active is None:
            active = ActiveTimeline.load(storage, base_path, config)
        return cls(active, ArchivedTimeline.load(storage, base_path, config))

    def is_archived(self, instant: Instant | str) -> bool:
        t = instant.requested_time if isinstance(instant, Instant) else instant
        return t in self._archived_only

    def read_content(self, instant: Instant) -> dict[str, Any] | None:
        if self.is_archived(instant):
            return self.archived.read_content(instant)
        return self.active.read_content(instant)

    def read_completed(self, instant: Instant, action: str | None = None) -> dict[str, Any]:
        if self.is_archived(instant):
            return self.archived.read_completed(instant, action)
        return self.active.read_completed(instant, action)

    def read_commit_metadata(self, instant: Instant) -> dict[str, Any]:
        return self.read_completed(instant)

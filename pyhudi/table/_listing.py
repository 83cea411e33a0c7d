"""Minimal storage listing used by rollback and clean until :mod:`pyhudi.table.fsview` is available.

Only what rollback/clean need: the partitions of a table (folders holding ``.hoodie_partition_metadata``, outside
``.hoodie/``), and the data files of a partition with the fields their names carry:

- base file ``<fileId>_<writeToken>_<instant>.<ext>`` (ext parquet, hfile, orc)
- log file ``.<fileId>_<instant>.log.<version>_<writeToken>`` (``.cdc`` suffix for CDC logs)

Keep the surface small (:func:`list_partitions`, :func:`list_data_files`, :func:`parse_data_file_name`) so callers
can switch to the file-system view module without other changes.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from pyhudi.io.storage import Storage
from pyhudi.table.properties import METAFOLDER

PARTITION_METAFILE_PREFIX = ".hoodie_partition_metadata"

_BASE_RE = re.compile(r"^(?P<fid>.+)_(?P<token>\d+-\d+-\d+)_(?P<t>\d+)\.(?P<ext>parquet|hfile|orc)$")
_LOG_RE = re.compile(
    r"^\.(?P<fid>.+)_(?P<t>\d+)\.log\.(?P<ver>\d+)(?:_(?P<token>\d+-\d+-\d+))?(?P<cdc>\.cdc)?$"
)


@dataclass(frozen=True)
class DataFile:
    """One base or log file of a table."""

    partition: str
    name: str
    path: str
    file_id: str
    instant_time: str
    is_log: bool
    size: int = 0
    log_version: int = 0

    @property
    def is_base(self) -> bool:
        return not self.is_log


def parse_data_file_name(name: str) -> tuple[str, str, bool, int] | None:
    """``(fileId, instant time, is_log, log version)`` of a data file name, or None for any other file."""
    m = _BASE_RE.match(name)
    if m:
        return m.group("fid"), m.group("t"), False, 0
    m = _LOG_RE.match(name)
    if m:
        return m.group("fid"), m.group("t"), True, int(m.group("ver"))
    return None


def relative_path(base_path: str, path: str) -> str:
    base = base_path.rstrip("/") + "/"
    return path[len(base) :] if path.startswith(base) else path


def list_partitions(storage: Storage, base_path: str) -> list[str]:
    """Relative partition paths (``""`` for a non-partitioned table), sorted."""
    out: set[str] = set()
    for st in storage.walk_files(base_path):
        if not st.name.startswith(PARTITION_METAFILE_PREFIX):
            continue
        rel = relative_path(base_path, st.path)
        if rel.split("/", 1)[0] == METAFOLDER:
            continue
        out.add(posixpath.dirname(rel))
    return sorted(out)


def list_data_files(storage: Storage, base_path: str, partition: str) -> list[DataFile]:
    """The base and log files directly in ``partition`` (sorted by name)."""
    folder = posixpath.join(base_path, partition) if partition else base_path
    files = []
    for st in storage.list(folder):
        if st.is_dir:
            continue
        parsed = parse_data_file_name(st.name)
        if parsed is None:
            continue
        fid, t, is_log, ver = parsed
        files.append(DataFile(partition, st.name, st.path, fid, t, is_log, st.size, ver))
    return sorted(files, key=lambda f: f.name)

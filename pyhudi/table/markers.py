"""Write markers (Hudi's DIRECT marker type): one empty file per data file a write creates or changes.

Layout (apache/hudi ``DirectWriteMarkers``, ``WriteMarkers``, ``HoodieTableMetaClient.getMarkerFolderPath``)::

    <base>/.hoodie/.temp/<instant>/<partition path>/<data file name>.marker.<IOType>

IOType is ``CREATE`` (new base or log file), ``MERGE`` (base file rewritten from an older version) or ``APPEND``
(log file appended to). A non-partitioned table's markers sit directly in ``.temp/<instant>/``. Hudi creates the
marker *before* the data file, with ``create(path, overwrite=false)`` and no content, and skips creation when the
marker already exists (a retried task). Rollback of a failed write deletes the data files its markers name; the
marker directory is deleted once the instant completes or is rolled back.

The TIMELINE_SERVER_BASED marker type keeps the names in ``MARKERS<n>`` files (one marker name a line) next to
a ``MARKERS.type`` file; :func:`list_marked_files` reads those too so a table written by Hudi with a timeline
server can be rolled back, but pyhudi only writes DIRECT markers.

Every function here needs only a :class:`Storage` (no driver state), so Spark tasks can call them.
"""

from __future__ import annotations

import enum
import posixpath
import re
from typing import Any

from pyhudi.errors import CorruptFileError, PyHudiError
from pyhudi.io.storage import Storage
from pyhudi.table.filenames import parse_data_file_name
from pyhudi.table.partition_path import file_name_problem, partition_path_problem, shown
from pyhudi.table.properties import METAFOLDER

TEMP_FOLDER = ".temp"
MARKER_EXTN = ".marker."
MARKER_TYPE_FILE = "MARKERS.type"
_TIMELINE_SERVER_MARKERS_RE = re.compile(r"^MARKERS\d+$")


class IOType(enum.Enum):
    CREATE = "CREATE"
    MERGE = "MERGE"
    APPEND = "APPEND"


def marker_dir(base_path: str, instant_time: str) -> str:
    """``<base>/.hoodie/.temp/<instant>``."""
    return posixpath.join(base_path, METAFOLDER, TEMP_FOLDER, instant_time)


def marker_name(partition: str, file_name: str, io_type: IOType | str) -> str:
    """The marker's path relative to the marker directory, e.g. ``region=eu/<file>.marker.CREATE``."""
    t = IOType(io_type) if isinstance(io_type, str) else io_type
    if not file_name or "/" in file_name:
        raise PyHudiError(f"marker needs a bare data file name, not {file_name!r}")
    name = f"{file_name}{MARKER_EXTN}{t.value}"
    part = partition.strip("/")
    return posixpath.join(part, name) if part else name


def marker_path(
    base_path: str, instant_time: str, partition: str, file_name: str, io_type: IOType | str
) -> str:
    return posixpath.join(marker_dir(base_path, instant_time), marker_name(partition, file_name, io_type))


def create_marker(
    storage: Storage,
    base_path: str,
    instant_time: str,
    partition: str,
    file_name: str,
    io_type: IOType | str,
) -> str:
    """Create the (empty) marker of ``partition/file_name`` for ``instant_time``; return its path.

    Idempotent: an existing marker (a retried task) is left as is, as Hudi does.
    """
    path = marker_path(base_path, instant_time, partition, file_name, io_type)
    if storage.exists(path):
        return path
    try:
        storage.write_bytes(path, b"", overwrite=False)
    except PyHudiError:
        if not storage.exists(path):  # lost a race with another attempt: fine; anything else: raise
            raise
    return path


def parse_marker_name(relative: str) -> tuple[str, str, IOType] | None:
    """``(partition, file name, IOType)`` of a marker path relative to the marker dir, or None."""
    rel = relative.strip("/")
    name = posixpath.basename(rel)
    if MARKER_EXTN not in name:
        return None
    data_name, _, kind = name.rpartition(MARKER_EXTN)
    try:
        io_type = IOType(kind)
    except ValueError:
        return None
    return posixpath.dirname(rel), data_name, io_type


def list_marked_files(storage: Storage, base_path: str, instant_time: str) -> list[tuple[str, str, IOType]]:
    """Every ``(partition, data file name, IOType)`` marked for ``instant_time``, sorted (empty if none).

    Rollback deletes the files markers name: a marker whose partition or file name would lead outside the table
    (possible in a timeline-server ``MARKERS<n>`` list, a text file) is refused with CorruptFileError naming
    the marker file.
    """
    storage = storage.rooted(base_path)
    root = marker_dir(base_path, instant_time)
    found: set[tuple[str, str, IOType]] = set()
    prefix = root.rstrip("/") + "/"
    for st in storage.walk_files(root):
        rel = st.path[len(prefix) :] if st.path.startswith(prefix) else st.name
        parsed = parse_marker_name(rel)
        if parsed is not None:
            found.add(_checked_marker(parsed, rel, st.path))
        elif "/" not in rel and _TIMELINE_SERVER_MARKERS_RE.match(rel):
            text = storage.read_bytes(st.path).decode("utf-8", "replace")
            for line in text.splitlines():
                p = parse_marker_name(line.strip())
                if p is not None:
                    found.add(_checked_marker(p, line.strip(), st.path))
    return sorted(found, key=lambda m: (m[0], m[1], m[2].value))


def _checked_marker(
    marker: tuple[str, str, IOType], name: str, source: str
) -> tuple[str, str, IOType]:
    partition, file_name, _ = marker
    if name.startswith("/"):
        raise CorruptFileError(source, f"marker {shown(name)} is an absolute path")
    problem = partition_path_problem(partition, strict=False)
    if problem is not None:
        raise CorruptFileError(source, f"marker {shown(name)} names the partition {shown(partition)} that {problem}")
    problem = file_name_problem(file_name)
    if problem is not None:
        raise CorruptFileError(source, f"marker {shown(name)} names the file {shown(file_name)} that {problem}")
    return marker


def markers_exist(storage: Storage, base_path: str, instant_time: str) -> bool:
    return storage.is_dir(marker_dir(base_path, instant_time))


def delete_markers(storage: Storage, base_path: str, instant_time: str) -> None:
    """Delete the marker directory of ``instant_time`` (no-op if absent)."""
    storage = storage.rooted(base_path)
    storage.delete(marker_dir(base_path, instant_time), missing_ok=True)


def reconcile_against_markers(
    storage: Storage, base_path: str, instant_time: str, commit_metadata: dict[str, Any]
) -> list[str]:
    """Delete the data files of ``instant_time`` that its markers name but its commit does not: what a failed or
    speculative Spark task attempt wrote before another attempt of the task succeeded (apache/hudi
    ``HoodieTable.reconcileAgainstMarkers``). Called before the instant completes, so no reader ever sees them.

    Only files named with ``instant_time`` are deleted (a marker naming another instant's file is left alone), and
    only inside the table. Returns the deleted paths relative to the table.
    """
    kept = {
        str(s.get("path") or "").strip("/")
        for stats in (commit_metadata.get("partitionToWriteStats") or {}).values()
        for s in stats or ()
    }
    storage = storage.rooted(base_path)
    gone = []
    for partition, file_name, _ in list_marked_files(storage, base_path, instant_time):
        rel = posixpath.join(partition, file_name) if partition else file_name
        parsed = parse_data_file_name(file_name)
        if rel in kept or parsed is None or parsed.instant != instant_time:
            continue
        path = posixpath.join(base_path, rel)
        if storage.exists(path):
            storage.delete(path, missing_ok=True, dirs=False)
            gone.append(rel)
    return gone

"""Names a table's own files record (rollback and clean plans, commit write stats) are untrusted: a table written
by someone else, or a corrupt one, could name ``../`` paths or files pyhudi must not touch. These checks turn
them into (partition, file name) pairs that stay inside the table, or refuse the whole plan with an error naming
the file that carried the bad name, before anything is deleted or read (the storage refuses paths outside the
table too, as a second line).

- a partition is a relative path with no empty, ``.``, ``..`` or ``.hoodie`` segment (``""``: the table's root);
- a file a rollback or clean deletes must carry a Hudi data file name (base or log file): only its base name is
  used (Hudi records full paths or URIs), joined to the partition the plan names;
- a rollback deletes only files written by the instant it rolls back (their names carry that instant, for table
  versions 8 and 9), so a crafted plan cannot make it delete committed data;
- a write stat's ``path`` is ``<partition>/<file name>`` (the bare name for the table's root);
- a compaction operation names a partition, a file id that makes a bare file name, and the base and log files of
  that file group only (bare names: only their base names are used, as for rollback and clean plans).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from pyhudi.errors import CorruptFileError
from pyhudi.table.filenames import BaseFileName, LogFileName, parse_data_file_name
from pyhudi.table.partition_path import check_file_name, check_partition_path, shown


def _data_file_name(recorded: Any, source: str, what: str) -> str:
    """The base name of a recorded data file path (or URI); CorruptFileError unless it names a data file."""
    if not isinstance(recorded, str) or not recorded:
        raise CorruptFileError(source, f"{what} {recorded!r} is not a file path")
    name = posixpath.basename(recorded)
    check_file_name(name, source, what)
    if parse_data_file_name(name) is None:
        raise CorruptFileError(source, f"{what} {shown(recorded)} does not name a Hudi data file")
    return name


def rollback_targets(plan: Mapping[str, Any], source: str) -> list[tuple[str, list[str]]]:
    """(partition, [file names]) of every ``RollbackRequests`` entry of a HoodieRollbackPlan, checked."""
    target = plan.get("instantToRollback") or {}
    t = str(target.get("commitTime") or "")
    if not t.isdigit():
        raise CorruptFileError(source, f"rollback plan names no valid instant to roll back ({t!r})")
    out: list[tuple[str, list[str]]] = []
    for req in plan.get("RollbackRequests") or []:
        partition = check_partition_path(str(req.get("partitionPath") or ""), source, "rollback partition")
        names = []
        for recorded in req.get("filesToBeDeleted") or []:
            name = _data_file_name(recorded, source, "file to delete")
            parsed = parse_data_file_name(name)
            assert parsed is not None
            if parsed.instant != t:
                raise CorruptFileError(
                    source,
                    f"file to delete {shown(str(recorded))} was written by instant {parsed.instant}, not by the "
                    f"instant {t} this rollback undoes",
                )
            names.append(name)
        out.append((partition, names))
    return out


def clean_targets(plan: Mapping[str, Any], source: str) -> dict[str, list[str]]:
    """partition -> file names of a HoodieCleanerPlan's ``filePathsToBeDeletedPerPartition``, checked."""
    out: dict[str, list[str]] = {}
    for partition, infos in (plan.get("filePathsToBeDeletedPerPartition") or {}).items():
        check_partition_path(str(partition), source, "clean partition")
        out[str(partition)] = [
            _data_file_name(info.get("filePath"), source, "file to delete") for info in infos or [] if info.get("filePath")
        ]
    return out


def write_stat_path(partition: str, stat: Mapping[str, Any], source: str) -> str:
    """The table-relative path of a commit write stat's file: ``<partition>/<name>``, checked."""
    check_partition_path(partition, source, "write stat partition")
    path = stat.get("path")
    if not isinstance(path, str) or not path:
        raise CorruptFileError(source, f"write stat of partition {shown(partition)} has no file path ({path!r})")
    folder, name = posixpath.split(path)
    check_file_name(name, source, "write stat file")
    if folder != partition:
        raise CorruptFileError(
            source, f"write stat file {shown(path)} does not lie in its partition {shown(partition)}"
        )
    return path


def compaction_operations(plan: Mapping[str, Any], source: str) -> list[dict[str, Any]]:
    """The ``operations`` of a HoodieCompactionPlan, checked, with ``dataFilePath`` and ``deltaFilePaths``
    reduced to bare file names: each names a safe partition, a file id that is a bare file name without ``_``,
    and only that file group's base file and log files."""
    out: list[dict[str, Any]] = []
    for op in plan.get("operations") or []:
        partition = check_partition_path(op.get("partitionPath") or "", source, "compaction partition")
        fid = op.get("fileId")
        if not isinstance(fid, str) or "_" in fid:
            raise CorruptFileError(source, f"compaction file id {fid!r} is not a Hudi file id")
        check_file_name(fid, source, "compaction file id")
        base_t = str(op.get("baseInstantTime") or "")
        if not base_t.isdigit():
            raise CorruptFileError(source, f"compaction of file group {shown(fid)} has no valid base instant "
                                           f"({base_t!r})")
        checked = dict(op, partitionPath=partition)
        if op.get("dataFilePath"):
            name = _data_file_name(op["dataFilePath"], source, "compaction base file")
            if not isinstance(parse_data_file_name(name), BaseFileName):
                raise CorruptFileError(source, f"compaction base file {shown(name)} is not a base file")
            checked["dataFilePath"] = name
        else:
            checked["dataFilePath"] = None
        logs = []
        for recorded in op.get("deltaFilePaths") or []:
            name = _data_file_name(recorded, source, "compaction log file")
            if not isinstance(parse_data_file_name(name), LogFileName):
                raise CorruptFileError(source, f"compaction log file {shown(name)} is not a log file")
            logs.append(name)
        checked["deltaFilePaths"] = logs
        for name in filter(None, [checked["dataFilePath"], *logs]):
            parsed = parse_data_file_name(name)
            assert parsed is not None
            if parsed.file_id != fid:
                raise CorruptFileError(source, f"compaction of file group {shown(fid)} names {shown(name)}, a file "
                                               "of another file group")
        out.append(checked)
    return out

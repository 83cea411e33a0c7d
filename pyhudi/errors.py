"""The exceptions pyhudi raises. Every message names the file, key, column or option at fault."""

from __future__ import annotations


class PyHudiError(Exception):
    """Base class of every error pyhudi raises on purpose."""


def file_groups_text(groups: list[tuple[str, str]], limit: int = 5) -> str:
    """``part/fileId, ...`` of the first ``limit`` (partition, file id) pairs, and how many more, for messages."""
    shown = ", ".join(f"{p or '<root>'}/{f}" for p, f in groups[:limit])
    return shown + (f" and {len(groups) - limit} more" if len(groups) > limit else "")


class StorageError(PyHudiError):
    """A file could not be read or written."""


class CorruptFileError(PyHudiError):
    """A file does not follow its format: bad magic, checksum mismatch, truncation, ..."""

    def __init__(self, path: str, message: str, offset: int | None = None) -> None:
        self.path = path
        self.offset = offset
        where = f"{path}" if offset is None else f"{path} at offset {offset}"
        super().__init__(f"{where}: {message}")


class UnsupportedFormatError(PyHudiError):
    """A file uses a valid feature of its format that pyhudi does not implement (e.g. a codec)."""


class InvalidInputError(PyHudiError):
    """Input data is not acceptable: unsorted or duplicate keys, null record keys, missing columns, ..."""


class ConfigError(PyHudiError):
    """An option has an unknown name or an invalid value."""


class StreamingCheckpointError(ConfigError):
    """A micro-batch's id is lower than the last batch its stream identifier committed: the query's checkpoint is
    not the one that wrote those batches (a new checkpoint location, another query with the same identifier), and
    skipping the batch would drop its records."""


class ConcurrentWriterError(PyHudiError):
    """Another writer holds the table in single-writer mode."""


class ConcurrentWriteConflict(PyHudiError):
    """Another write committed meanwhile and touched the same file groups; this write was rolled back."""

    def __init__(self, base_path: str, instant: str, other: str, groups: list[tuple[str, str]]) -> None:
        self.instant, self.other = instant, other
        self.file_groups = sorted(groups)
        shown = file_groups_text(self.file_groups)
        super().__init__(
            f"{base_path}: write {instant} conflicts with {other}, committed meanwhile, on file group(s) {shown}; "
            f"{instant} was rolled back: retry the write"
        )


class ConcurrentKeyConflict(ConcurrentWriteConflict):
    """Another write committed meanwhile and inserted keys this write inserts too (into other file groups): with
    both committed the table would hold the keys twice."""

    def __init__(self, base_path: str, instant: str, other: str, keys: list[tuple[str, str, str]]) -> None:
        self.instant, self.other = instant, other
        self.file_groups = sorted({(p, f) for _, p, f in keys})
        self.keys = [k for k, _, _ in keys]
        shown = ", ".join(f"{k!r} (in {p or '<root>'}/{f})" for k, p, f in keys[:5])
        PyHudiError.__init__(
            self,
            f"{base_path}: write {instant} conflicts with {other}, committed meanwhile, which inserted the same new "
            f"key(s): {shown}; {instant} was rolled back: retry the write (it will update them)"
        )


class IndexAheadConflict(ConcurrentWriteConflict):
    """The record index names file groups that a write committed after this one began created: its entries reached
    the index's base files (the metadata table compacted meanwhile) while the file groups are not in this write's
    view of the table. Refused while planned, before anything is written."""

    def __init__(self, base_path: str, other: str, groups: list[tuple[str, str]]) -> None:
        self.instant, self.other = "", other
        self.file_groups = sorted(groups)
        shown = file_groups_text(self.file_groups)
        PyHudiError.__init__(
            self,
            f"{base_path}: the record index places keys of this write in file group(s) {shown}, written by "
            f"{other}, which committed after this write began; nothing was written: retry the write",
        )


class ClusteringConflict(ConcurrentWriteConflict):
    """This write would change file groups a pending clustering (a Java writer's) rewrites: the clustering
    replaces them with what its plan read, so the write's records there would be lost. Apache Hudi's writers
    refuse such updates too (``SparkRejectUpdateStrategy``, its default)."""

    def __init__(self, base_path: str, instant: str, clustering: str, groups: list[tuple[str, str]],
                 rolled_back: bool = False) -> None:
        self.instant, self.other = instant, clustering
        self.file_groups = sorted(groups)
        shown = file_groups_text(self.file_groups)
        done = f"{instant} was rolled back" if rolled_back else "nothing was written"
        who = f"write {instant}" if instant else "the write"  # refused while planned: no instant yet
        PyHudiError.__init__(
            self,
            f"{base_path}: {who} would change file group(s) {shown}, which the pending clustering "
            f"{clustering} rewrites (its records there would be lost when the clustering completes); {done}: "
            "write again once the clustering completed",
        )


class ConcurrentSchemaConflict(ConcurrentWriteConflict):
    """This write evolves the table's schema, and meanwhile another write changed it too, or a commit with a later
    instant completed (readers take the schema of the latest instant: this write's new columns would be read by
    none)."""

    def __init__(self, base_path: str, instant: str, later: str | None = None) -> None:
        self.instant, self.other = instant, later or ""
        self.file_groups = []
        why = (f"{later}, a commit with a later instant, completed meanwhile (readers would take its schema)" if later
               else "another write committed meanwhile changed it too")
        PyHudiError.__init__(
            self,
            f"{base_path}: write {instant} changes the table's schema, and {why}; {instant} was rolled back: retry "
            "the write (it evolves the schema committed since)",
        )


class UnsafePathError(StorageError):
    """A path pyhudi was about to write, move, delete or read lies outside the table it works on (a ``..``
    segment, an absolute path, a symbolic link leading out, ...). Nothing was done with it."""

    path: str | None = None
    root: str | None = None

    def __init__(self, path: str, root: str, reason: str, operation: str = "use") -> None:
        self.path = path
        self.root = root
        super().__init__(f"refusing to {operation} {path!r}: {reason} (the table's files lie under {root!r})")


class TableChangedError(PyHudiError):
    """A read could not be planned on one state of the table: its timeline changed (a commit, clean, compaction or
    archival completed) each time the read was planned. Nothing was read; run the read again."""


class UnsupportedTableError(PyHudiError):
    """A table pyhudi can read but cannot write exactly (its type or version); refused before anything is
    written."""


class PostCommitError(PyHudiError):
    """A write committed, then a table service it runs after its commit (rollback of failed writes, compaction,
    cleaning, metadata-table compaction, archival) failed: the write's data is in the table, and writing it
    again would write it twice. ``instant``: the committed write's; ``service``: the one that failed."""

    def __init__(self, base_path: str, instant: str, service: str, cause: BaseException) -> None:
        self.base_path = base_path
        self.instant = instant
        self.service = service
        super().__init__(
            f"{base_path}: write {instant} committed (its records are in the table: do not write them again); "
            f"then its post-commit {service} failed: {type(cause).__name__}: {cause}")


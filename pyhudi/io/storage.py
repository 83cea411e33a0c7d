"""The storage abstraction: every byte pyhudi reads or writes goes through a :class:`Storage`.

A Storage wraps a :mod:`pyarrow.fs` filesystem (local, S3, GCS, HDFS, ...). Paths handed to it are the
filesystem's own paths (no scheme); :func:`Storage.from_uri` splits a URI into both. Storages pickle, so Spark
tasks receive them and read and write on the executor, never through the driver.

A storage *rooted* at a table (:meth:`Storage.rooted`; every :class:`~pyhudi.table.table.Table` holds one, and the
root travels with it into Spark tasks) refuses, with :class:`~pyhudi.errors.UnsafePathError`, any path that does
not lie under its root, whatever produced the path (a record's partition value, a file name read from commit
metadata, a marker, a rollback or clean plan, a metadata-table record): a path with a ``..`` segment or a NUL is
refused outright; any other is normalised (``posixpath.normpath``) and must be the root or start with the root and
a separator; on the local filesystem it is also resolved through symbolic links (``os.path.realpath``) and must
still lie under the resolved root, so a link planted in a table cannot lead a write, a delete or a read out of
it. The root itself may be listed and created, never deleted or moved.

Object stores (S3) and interpreter exit: pyarrow finalizes its S3 subsystem in an :mod:`atexit` hook, and an S3
output stream still open after that waits forever, when it is finally destroyed, for an upload that can no longer
run (the process never exits). This module registers its own hook after pyarrow's, so it runs first: it collects
garbage (streams only kept alive by reference cycles, e.g. those of an exception's traceback) and closes every
output stream a Storage opened on an object store and nobody closed, while S3 still works.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import gc
import os
import posixpath
import stat
import uuid
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from pyhudi.errors import StorageError, UnsafePathError

# output streams opened on an object store that are not closed yet (see the module doc)
_OPEN_OUTPUTS: weakref.WeakSet[pa.NativeFile] = weakref.WeakSet()


def _close_outputs_before_s3_finalized() -> None:
    """Close the object-store output streams still open, while pyarrow's S3 subsystem is alive: one destroyed
    after its finalization blocks the exit of the process for ever. Nothing to do (no collection) in a process
    that never opened one: a stream kept alive only by a reference cycle is still in the set."""
    if not _OPEN_OUTPUTS:
        return
    gc.collect()
    for out in list(_OPEN_OUTPUTS):
        with contextlib.suppress(Exception):
            if not out.closed:
                out.close()


# pyarrow.fs (imported above) registered its S3 finalization at import; hooks run last-registered first
atexit.register(_close_outputs_before_s3_finalized)


@dataclass(frozen=True)
class FileStatus:
    path: str
    size: int
    is_dir: bool
    mtime_ns: int | None = None

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)


#: the URI scheme other programs (Hadoop, Hudi) use for a pyarrow filesystem whose paths start with its bucket;
#: paths of the others (local, HDFS: absolute, on the default filesystem) are written as they are
_URI_SCHEMES = {"s3": "s3", "gcs": "gs"}


class Storage:
    """A thin layer over a pyarrow filesystem with the operations Hudi needs."""

    def __init__(self, fs: pafs.FileSystem) -> None:
        self.fs = fs
        self.root: str | None = None  # set by rooted(): every path must lie under it
        self._real_root: str | None = None  # the root resolved through symbolic links (local), per process
        self._real_folders: dict[str, str] = {}  # folders read from, resolved (local), per process: see _real

    # -- construction -------------------------------------------------------------------------------
    @staticmethod
    def from_uri(uri: str) -> tuple[Storage, str]:
        """Return the storage for ``uri`` and the path inside it. A plain path means the local filesystem."""
        if "://" not in uri:
            return Storage(pafs.LocalFileSystem()), os.path.abspath(uri)
        try:
            fs, path = pafs.FileSystem.from_uri(uri)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise StorageError(f"cannot open storage for {uri!r}: {e}") from e
        return Storage(fs), path

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    @property
    def scheme(self) -> str:
        """The filesystem's kind: ``local``, ``s3``, ``gcs``, ``hdfs``, ..."""
        return "local" if self.is_local else str(self.fs.type_name).lower()

    def uri(self, path: str) -> str:
        """``path`` as other programs name it: ``s3://bucket/key`` and ``gs://bucket/key`` on object stores (a bare
        ``bucket/key`` would read as a relative path), the path itself elsewhere. For the full paths Hudi records
        in plans."""
        scheme = _URI_SCHEMES.get(self.scheme)
        return f"{scheme}://{path.lstrip('/')}" if scheme else path

    @property
    def atomic_create(self) -> bool:
        """Whether ``write_bytes(..., overwrite=False)`` creates a file only if it is absent, atomically: on the
        local filesystem only (it links a written temporary file into place). Elsewhere (S3 and other object
        stores, HDFS) pyarrow offers no create-if-absent (no ``If-None-Match: *`` on S3 PUTs): the write looks the
        path up and then writes it, so two writers racing for one path may both succeed."""
        return self.is_local

    def __reduce__(self) -> tuple[Any, ...]:
        return (Storage, (self.fs,), self._pickled_state())

    def _pickled_state(self) -> dict[str, Any]:
        """What a pickled storage carries besides its constructor arguments: the root (never the resolved root,
        which each process works out for itself)."""
        return {"root": self.root}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.root = state.get("root")
        self._real_root = None
        self._real_folders = {}

    # -- the root -----------------------------------------------------------------------------------
    def rooted(self, root: str) -> Storage:
        """A storage over the same filesystem that refuses every path outside ``root`` (see the module doc).

        A storage already rooted can only be narrowed: ``root`` must lie under its root.
        """
        norm = _normalise(root)
        if not norm or "\x00" in norm:
            raise UnsafePathError(root, self.root or "/", "not a usable table path", "root a storage at")
        if self.root is not None:
            self.check_path(norm, "root a storage at")
        if norm == self.root:
            return self
        new = copy.copy(self)
        new.root = norm
        new._real_root = None
        new._real_folders = {}
        return new

    def check_path(self, path: str, operation: str = "use", *, reading: bool = False) -> str:
        """``path`` if it lies under the root (any path when the storage has none); UnsafePathError otherwise.
        ``reading``: the path is only read, and the real path of its folder may be one resolved before
        (:meth:`_real`)."""
        root = self.root
        if root is None:
            return path
        if "\x00" in path:
            raise UnsafePathError(path, root, "it contains a NUL character", operation)
        if ".." in path.split("/"):
            raise UnsafePathError(path, root, "it has a '..' segment", operation)
        norm = _normalise(path)
        if not is_under(norm, root):
            raise UnsafePathError(path, root, "it lies outside the table", operation)
        if self.is_local:
            real = self._real(norm) if reading else os.path.realpath(norm)
            real_root = self._resolved_root()
            if not is_under(real, real_root):
                raise UnsafePathError(
                    path, root, f"it resolves through a symbolic link to {real!r}, outside the table", operation
                )
        return path

    def _real(self, norm: str) -> str:
        """``os.path.realpath(norm)`` with its folder's real path remembered: a merge-on-read read opens thousands
        of files in a few hundred folders, and resolving each path anew (a ``stat`` per path segment, in Python)
        took a tenth of its time. The file itself is looked at every time (a symbolic link is resolved)."""
        folder, name = posixpath.split(norm)
        real_folder = self._real_folders.get(folder)
        if real_folder is None:
            real_folder = os.path.realpath(folder)
            if len(self._real_folders) >= _REAL_FOLDERS_KEPT:
                self._real_folders.clear()
            self._real_folders[folder] = real_folder
        real = posixpath.join(real_folder, name)
        try:
            if stat.S_ISLNK(os.lstat(real).st_mode):
                return os.path.realpath(real)
        except OSError:
            pass
        return real

    def _resolved_root(self) -> str:
        if self._real_root is None:
            assert self.root is not None
            self._real_root = os.path.realpath(self.root)
        return self._real_root

    def _check_changes(self, path: str, operation: str) -> str:
        """:meth:`check_path` for a delete or a move: the root itself is refused too."""
        self.check_path(path, operation)
        if self.root is not None and _normalise(path) == self.root:
            raise UnsafePathError(path, self.root, "it is the table's own folder", operation)
        return path

    # -- reading ------------------------------------------------------------------------------------
    def open_input(self, path: str) -> pa.NativeFile:
        """A random-access file supporting ranged reads (``read_at``)."""
        self.check_path(path, "read", reading=True)
        try:
            return self.fs.open_input_file(path)
        except FileNotFoundError as e:
            raise StorageError(f"file not found: {path}") from e
        except OSError as e:
            raise StorageError(f"cannot open {path}: {e}") from e

    def read_bytes(self, path: str) -> bytes:
        with self.open_input(path) as f:
            return f.read()

    def exists(self, path: str) -> bool:
        return self.fs.get_file_info(self.check_path(path, "look up")).type != pafs.FileType.NotFound

    def is_dir(self, path: str) -> bool:
        return self.fs.get_file_info(self.check_path(path, "look up")).type == pafs.FileType.Directory

    def status(self, path: str) -> FileStatus:
        info = self.fs.get_file_info(self.check_path(path, "look up"))
        if info.type == pafs.FileType.NotFound:
            raise StorageError(f"file not found: {path}")
        return _status(info)

    def list(self, path: str, recursive: bool = False) -> list[FileStatus]:
        """Entries of directory ``path`` (empty if it does not exist)."""
        selector = pafs.FileSelector(self.check_path(path, "list"), allow_not_found=True, recursive=recursive)
        return [_status(i) for i in self.fs.get_file_info(selector)]

    def walk_files(self, path: str) -> Iterator[FileStatus]:
        for st in self.list(path, recursive=True):
            if not st.is_dir:
                yield st

    # -- writing ------------------------------------------------------------------------------------
    def makedirs(self, path: str) -> None:
        self.fs.create_dir(self.check_path(path, "create"), recursive=True)

    def open_output(self, path: str) -> pa.NativeFile:
        self._check_changes(path, "write")
        parent = posixpath.dirname(path)
        if parent and self.is_local:
            self.makedirs(parent)
        return self._track(self.fs.open_output_stream(path))

    def open_append(self, path: str) -> pa.NativeFile:
        """An output stream appending to ``path`` (created if absent; local filesystems, HDFS)."""
        self._check_changes(path, "append to")
        parent = posixpath.dirname(path)
        if parent and self.is_local:
            self.makedirs(parent)
        return self._track(self.fs.open_append_stream(path))

    def _track(self, out: pa.NativeFile) -> pa.NativeFile:
        if not self.is_local:
            _OPEN_OUTPUTS.add(out)
        return out

    def write_bytes(self, path: str, data: bytes | Sequence[bytes], *, overwrite: bool = True) -> None:
        """Write a whole file so that readers see either nothing or all of it; ``data`` its bytes, or its parts
        in order (written one after the other, never joined in memory).

        On the local filesystem this writes a temporary sibling and renames it (``overwrite=False``: links it,
        which fails if the path exists); object stores make a single PUT visible atomically, but
        ``overwrite=False`` there is a look-up followed by the PUT, not atomic (:attr:`atomic_create`).
        """
        self._check_changes(path, "write")
        if not overwrite and self.exists(path):
            raise StorageError(f"file already exists: {path}")
        if self.is_local:
            parent = posixpath.dirname(path)
            self.makedirs(parent)
            tmp = posixpath.join(parent, f".{posixpath.basename(path)}.{uuid.uuid4().hex}.tmp")
            with self.fs.open_output_stream(tmp) as out:
                _write_parts(out, data)
            if not overwrite:
                try:
                    os.link(tmp, path)  # fails if path appeared meanwhile
                except FileExistsError as e:
                    raise StorageError(f"file already exists: {path}") from e
                finally:
                    # the file is written (or refused) either way: a temporary file left behind is not an error
                    with contextlib.suppress(OSError):
                        self.fs.delete_file(tmp)
            else:
                self.fs.move(tmp, path)
        else:
            with self.fs.open_output_stream(path) as out:
                _write_parts(out, data)

    def touch(self, path: str) -> None:
        """Set an existing file's modification time to now, on the local filesystem (a held lock file's refresh;
        the file-system lock runs there only)."""
        self._check_changes(path, "touch")
        if not self.is_local:
            raise StorageError(f"{path}: setting a file's modification time is supported on the local filesystem only")
        try:
            os.utime(path)
        except OSError as e:
            raise StorageError(f"{path}: {e}") from e

    def delete(self, path: str, missing_ok: bool = True, *, dirs: bool = True) -> None:
        """Delete a file, or a folder and everything in it (``dirs=False``: refuse a folder, for callers that
        delete files named by a plan)."""
        self._check_changes(path, "delete")
        for attempt in range(3):
            info = self.fs.get_file_info(path)
            if info.type == pafs.FileType.NotFound:
                if missing_ok:
                    return
                raise StorageError(f"file not found: {path}")
            if info.type == pafs.FileType.Directory and not dirs:
                raise StorageError(f"refusing to delete {path!r}: it is a folder, not a file")
            try:
                if info.type == pafs.FileType.Directory:
                    self.fs.delete_dir(path)
                else:
                    self.fs.delete_file(path)
                return
            except FileNotFoundError:
                # another process deleted it (or part of the folder) between the look and the delete: look again
                if attempt == 2:
                    raise

    def move(self, src: str, dst: str) -> None:
        self._check_changes(src, "move")
        self._check_changes(dst, "move onto")
        self.fs.move(src, dst)


#: folders whose real path a storage remembers (:meth:`Storage._real`), at most
_REAL_FOLDERS_KEPT = 4096


def _write_parts(out: pa.NativeFile, data: bytes | Sequence[bytes]) -> None:
    for part in (data,) if isinstance(data, (bytes, bytearray, memoryview)) else data:
        out.write(part)


def _normalise(path: str) -> str:
    """``path`` normalised (``.`` segments, repeated and trailing separators gone; ``/`` stays ``/``)."""
    if not path:
        return ""
    return posixpath.normpath(path)


def is_under(path: str, root: str) -> bool:
    """Is the normalised ``path`` the normalised ``root`` or inside it? (Normalise both first: ``_normalise``,
    or ``os.path.realpath`` for local paths through symbolic links.)"""
    if path == root:
        return True
    prefix = root if root.endswith("/") else root + "/"
    return path.startswith(prefix)


def _status(info: pafs.FileInfo) -> FileStatus:
    return FileStatus(
        path=info.path,
        size=info.size if info.size is not None else 0,
        is_dir=info.type == pafs.FileType.Directory,
        mtime_ns=info.mtime_ns,
    )

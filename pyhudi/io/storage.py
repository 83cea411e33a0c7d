"""The storage abstraction: every byte pyhudi reads or writes goes through a :class:`Storage`.

A Storage wraps a :mod:`pyarrow.fs` filesystem (local, S3, GCS, HDFS, ...). Paths handed to it are the
filesystem's own paths (no scheme); :func:`Storage.from_uri` splits a URI into both. Storages pickle, so Spark
tasks receive them and read and write on the executor, never through the driver.
"""

from __future__ import annotations

import os
import posixpath
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from pyhudi.errors import StorageError


@dataclass(frozen=True)
class FileStatus:
    path: str
    size: int
    is_dir: bool
    mtime_ns: int | None = None

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)


class Storage:
    """A thin layer over a pyarrow filesystem with the operations Hudi needs."""

    def __init__(self, fs: pafs.FileSystem) -> None:
        self.fs = fs

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

    @property
    def atomic_create(self) -> bool:
        """Whether ``write_bytes(..., overwrite=False)`` creates a file only if it is absent, atomically (on the
        local filesystem it links a written temporary file into place)."""
        return self.is_local

    def __reduce__(self) -> tuple[type[Storage], tuple[pafs.FileSystem]]:
        return (Storage, (self.fs,))

    # -- reading ------------------------------------------------------------------------------------
    def open_input(self, path: str) -> pa.NativeFile:
        """A random-access file supporting ranged reads (``read_at``)."""
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
        return self.fs.get_file_info(path).type != pafs.FileType.NotFound

    def is_dir(self, path: str) -> bool:
        return self.fs.get_file_info(path).type == pafs.FileType.Directory

    def status(self, path: str) -> FileStatus:
        info = self.fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise StorageError(f"file not found: {path}")
        return _status(info)

    def list(self, path: str, recursive: bool = False) -> list[FileStatus]:
        """Entries of directory ``path`` (empty if it does not exist)."""
        selector = pafs.FileSelector(path, allow_not_found=True, recursive=recursive)
        return [_status(i) for i in self.fs.get_file_info(selector)]

    def walk_files(self, path: str) -> Iterator[FileStatus]:
        for st in self.list(path, recursive=True):
            if not st.is_dir:
                yield st

    # -- writing ------------------------------------------------------------------------------------
    def makedirs(self, path: str) -> None:
        self.fs.create_dir(path, recursive=True)

    def open_output(self, path: str) -> pa.NativeFile:
        parent = posixpath.dirname(path)
        if parent and self.is_local:
            self.makedirs(parent)
        return self.fs.open_output_stream(path)

    def write_bytes(self, path: str, data: bytes, *, overwrite: bool = True) -> None:
        """Write a whole file so that readers see either nothing or all of it.

        On the local filesystem this writes a temporary sibling and renames it; object stores make a single
        PUT visible atomically.
        """
        if not overwrite and self.exists(path):
            raise StorageError(f"file already exists: {path}")
        if self.is_local:
            parent = posixpath.dirname(path)
            self.makedirs(parent)
            tmp = posixpath.join(parent, f".{posixpath.basename(path)}.{uuid.uuid4().hex}.tmp")
            with self.fs.open_output_stream(tmp) as out:
                out.write(data)
            if not overwrite:
                try:
                    os.link(tmp, path)  # fails if path appeared meanwhile
                except FileExistsError as e:
                    raise StorageError(f"file already exists: {path}") from e
                finally:
                    self.fs.delete_file(tmp)
            else:
                self.fs.move(tmp, path)
        else:
            with self.fs.open_output_stream(path) as out:
                out.write(data)

    def delete(self, path: str, missing_ok: bool = True) -> None:
        info = self.fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            if missing_ok:
                return
            raise StorageError(f"file not found: {path}")
        if info.type == pafs.FileType.Directory:
            self.fs.delete_dir(path)
        else:
            self.fs.delete_file(path)

    def move(self, src: str, dst: str) -> None:
        self.fs.move(src, dst)


def _status(info: pafs.FileInfo) -> FileStatus:
    return FileStatus(
        path=info.path,
        size=info.size if info.size is not None else 0,
        is_dir=info.type == pafs.FileType.Directory,
        mtime_ns=info.mtime_ns,
    )

"""The exceptions pyhudi raises. Every message names the file, key, column or option at fault."""

from __future__ import annotations


class PyHudiError(Exception):
    """Base class of every error pyhudi raises on purpose."""


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


class UnsafePathError(StorageError):
    """A path pyhudi was about to write, move, delete or read lies outside the table it works on (a ``..``
    segment, an absolute path, a symbolic link leading out, ...). Nothing was done with it."""

    path: str | None = None
    root: str | None = None

    def __init__(self, path: str, root: str, reason: str, operation: str = "use") -> None:
        self.path = path
        self.root = root
        super().__init__(f"refusing to {operation} {path!r}: {reason} (the table's files lie under {root!r})")

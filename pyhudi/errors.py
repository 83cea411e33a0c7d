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


class UnsupportedTableError(PyHudiError):
    """A table pyhudi can read but cannot write exactly (its type or version); refused before anything is
    written."""

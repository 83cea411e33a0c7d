"""Indexes: locate the file group of each incoming record key (one interface, several implementations)."""

from __future__ import annotations

from pyhudi.errors import ConfigError
from pyhudi.index.base import Index
from pyhudi.index.bloom import BloomIndex
from pyhudi.index.record import RecordLevelIndex
from pyhudi.index.simple import SimpleIndex

__all__ = ["Index", "index_for"]


def index_for(index_type: str) -> Index:
    """The index ``hoodie.index.type`` names."""
    t = index_type.upper()
    if t == "RECORD_INDEX":
        return RecordLevelIndex()
    if t == "SIMPLE":
        return SimpleIndex(is_global=False)
    if t == "GLOBAL_SIMPLE":
        return SimpleIndex(is_global=True)
    if t in ("BLOOM", "GLOBAL_BLOOM"):
        return BloomIndex(is_global=t == "GLOBAL_BLOOM")
    raise ConfigError(f"option hoodie.index.type: index {index_type!r} is not available")

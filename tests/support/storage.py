"""The local file system as a pyhudi :class:`~pyhudi.io.storage.Storage`, for tests that build or inspect tables
on disk."""

from __future__ import annotations

from pyhudi.io.storage import Storage

LOCAL = Storage.from_uri("/")[0]

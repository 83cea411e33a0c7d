"""Faults injected through :mod:`pyhudi.faults` for tests that need a writer to die at a given point."""

from __future__ import annotations

import pytest


def crash_next_metadata_compactions(monkeypatch: pytest.MonkeyPatch, message: str) -> None:
    """Make metadata compactions die after writing their base files (before they complete), raising
    RuntimeError(message), until ``monkeypatch`` is undone."""
    from pyhudi import faults

    def die(point: str) -> None:
        raise RuntimeError(message)

    monkeypatch.setattr(faults, "_handlers", [*faults._handlers, ("metadata.compaction.before_complete", die)])

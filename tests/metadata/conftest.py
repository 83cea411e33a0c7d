from __future__ import annotations

import pytest


def crash_next_metadata_compactions(monkeypatch: pytest.MonkeyPatch, message: str) -> None:
    """Make metadata compactions die after writing their base files (before they complete), raising
    RuntimeError(message), until ``monkeypatch`` is undone."""
    from pyhudi.metadata.writer import MetadataWriter

    state = {"compacting": False}
    orig_compact, orig_ct = MetadataWriter.compact, MetadataWriter._completion_time

    def compact(self, dt, instant):  # type: ignore[no-untyped-def]
        state["compacting"] = True
        try:
            return orig_compact(self, dt, instant)
        finally:
            state["compacting"] = False

    def completion_time(self, tl, instant):  # type: ignore[no-untyped-def]
        if state["compacting"]:
            raise RuntimeError(message)
        return orig_ct(self, tl, instant)

    monkeypatch.setattr(MetadataWriter, "compact", compact)
    monkeypatch.setattr(MetadataWriter, "_completion_time", completion_time)

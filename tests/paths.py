"""Where the shared read-compatibility fixtures live: ``shared/`` beside the repository (CI clones the repository
next to it), or wherever ``PYHUDI_SHARED`` points."""

from __future__ import annotations

import os
from pathlib import Path

SHARED = Path(os.environ.get("PYHUDI_SHARED", Path(__file__).resolve().parents[2] / "shared"))
SHARED_FIXTURES = SHARED / "fixtures"
HFILE_VECTORS = SHARED_FIXTURES / "hfile"
TABLE_ZIPS_DIR = SHARED_FIXTURES / "tables"

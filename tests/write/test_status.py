"""WriteStatus rows: the inserted keys packed, their count checked."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pyhudi.io.arrow import unpack_strings
from pyhudi.write.status import WRITE_STATUS_SCHEMA, status_row


def _status(**kw):
    base = dict(partition="p", file_id="f", path="p/f.parquet", prev_commit="null", prev_base_file=None,
                num_writes=2, num_inserts=2, num_updates=0, num_deletes=0, file_size=1, min_key=None, max_key=None,
                runtime_ms=0, inserted_keys=pa.array(["a", "b"]), updated_keys=[], deleted_keys=[])
    return status_row(**{**base, **kw})


def test_status_row_packs_inserted_keys() -> None:
    row = _status()
    assert row.schema == WRITE_STATUS_SCHEMA
    assert unpack_strings(row.column("inserted_keys")[0]).to_pylist() == ["a", "b"]
    assert _status(num_writes=0, num_inserts=0, inserted_keys=[]).column("inserted_keys")[0].as_py() is None


def test_status_row_refuses_a_wrong_insert_count() -> None:
    # the record index counts a commit's inserted keys by num_inserts
    with pytest.raises(ValueError, match="3 inserted keys, num_inserts 2"):
        _status(inserted_keys=["a", "b", "c"])

"""A metadata table (or commit metadata) naming files outside the table, as a table someone else wrote could:
reads, validation, writes and the record-index catch-up refuse it with an error naming the file that carried the
bad name, never opening or changing anything outside the table."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pyhudi.errors import CorruptFileError, UnsafePathError
from pyhudi.metadata import reader as reader_mod
from pyhudi.metadata.indexer import commit_key_changes
from pyhudi.metadata.records import files_record, partition_list_record
from pyhudi.metadata.validate import validate_table
from pyhudi.metadata.writer import MetadataWriter
from pyhudi.table import fsview as fsview_mod
from pyhudi.table.table import Table
from pyhudi.table.timeline import COMMIT, ActiveTimeline
from tests.support.fabricate import AVRO_SCHEMA, Clock, commit, make_table
from tests.support.storage import LOCAL
from tests.support.tree import snapshot


class MdtLayout:
    """<tmp>/around/t with a metadata table (files partition) and two commits; <tmp>/around/victim holds a
    parquet file named like a data file of the table."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path
        self.parent = tmp_path / "around"
        self.base = make_table(self.parent / "t")
        self.clock = Clock()
        self.c1 = commit(self.base, self.clock, {"region=eu": [("f1-0", [("k1", 1)])]})
        table = Table.open(self.base)
        MetadataWriter(LOCAL, self.base, table.config).create(table.timeline())
        assert Table.open(self.base).has_metadata_table
        self.victim = self.parent / "victim"
        self.victim.mkdir()
        self.victim_name = f"f9-0_0-1-0_{self.c1}.parquet"
        src = next(Path(self.base, "region=eu").glob("*.parquet"))
        pq.write_table(pq.read_table(src), self.victim / self.victim_name)

    def craft(self, records: list) -> str:
        """A completed data commit whose metadata deltacommit carries ``records``: returns the log file."""
        t = commit(self.base, self.clock, {})
        table = Table.open(self.base)
        MetadataWriter(LOCAL, self.base, table.config)._deltacommit(t, records, operation="UPSERT_PREPPED")
        (log,) = Path(self.base, ".hoodie", "metadata", "files").glob(f".files-0000-0_{t}.log.*")
        return str(log)


@pytest.fixture
def lay(tmp_path: Path) -> MdtLayout:
    return MdtLayout(tmp_path)


CASES = {
    "partition_dotdot": (lambda lay: [partition_list_record(["region=eu", "../victim"]),
                                      files_record("../victim", {lay.victim_name: 100})],
                         r"metadata (partition list entry|files record key) '\.\./victim' has a '\.\.' segment"),
    "partition_absolute": (lambda lay: [files_record(str(lay.victim), {lay.victim_name: 100})],
                           r"metadata files record key '/.*'(\.\.\. \(\d+ characters\))? is absolute"),
    "file_name_path": (lambda lay: [files_record("region=eu", {f"../../victim/{lay.victim_name}": 100})],
                       r"file of partition 'region=eu' '\.\./\.\./victim/.*' is a path, not a bare file name"),
    "file_name_dotdot": (lambda lay: [files_record("region=eu", {"..": 100})], r"'\.\.' is '\.\.'"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_reads_and_validation_refuse_a_crafted_files_partition(lay: MdtLayout, case: str) -> None:
    make, pattern = CASES[case]
    log = lay.craft(make(lay))
    before = snapshot(lay.root)
    where = rf"^{re.escape(log)}: .*{pattern}"
    with pytest.raises(CorruptFileError, match=where):
        Table.open(lay.base).to_arrow()
    with pytest.raises(CorruptFileError, match=where):
        Table.open(lay.base).view()
    with pytest.raises(CorruptFileError, match=where):
        validate_table(Table.open(lay.base))
    assert snapshot(lay.root) == before


def test_reads_never_open_outside_even_unchecked(lay: MdtLayout, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the record and listing checks bypassed, the rooted storage still refuses to read outside."""
    log = lay.craft(CASES["partition_dotdot"][0](lay))
    monkeypatch.setattr(reader_mod, "check_files_record", lambda rec, source: None)
    with pytest.raises(CorruptFileError, match=r"the table's file listing: partition '\.\./victim'"):
        Table.open(lay.base).to_arrow()
    monkeypatch.setattr(fsview_mod, "check_partition_path", lambda path, source, what="": path)
    opened: list[str] = []
    real_open = LOCAL.__class__.open_input

    def spy(self, path):  # type: ignore[no-untyped-def]
        f = real_open(self, path)  # refuses (raises) before opening anything outside the table
        opened.append(path)
        return f

    monkeypatch.setattr(LOCAL.__class__, "open_input", spy)
    with pytest.raises(UnsafePathError, match=r"refusing to read '.*/t/\.\./victim/f9-0.*': it has a '\.\.' segment"):
        Table.open(lay.base).to_arrow()
    assert not any("victim" in p for p in opened), opened
    assert os.path.exists(log)


def test_commit_metadata_paths_leading_out_are_refused(lay: MdtLayout, monkeypatch: pytest.MonkeyPatch) -> None:
    """The record-index catch-up reads the files a commit's write stats name: a ``../`` path is refused."""
    tl = ActiveTimeline.load(LOCAL, lay.base)
    t = lay.clock()
    stat = {"fileId": "f9-0", "path": f"region=eu/../../victim/{lay.victim_name}", "prevCommit": "null",
            "numWrites": 1, "numDeletes": 0, "numUpdateWrites": 0, "numInserts": 1, "totalWriteBytes": 1,
            "totalWriteErrors": 0, "partitionPath": "region=eu", "fileSizeInBytes": 1}
    inflight = tl.transition_to_inflight(tl.create_requested(COMMIT, t), None)
    done = tl.complete(inflight, {"partitionToWriteStats": {"region=eu": [stat]}, "compacted": False,
                                  "extraMetadata": {"schema": AVRO_SCHEMA}, "version": 1, "operationType": "UPSERT"},
                       lay.clock())
    before = snapshot(lay.root)
    with pytest.raises(CorruptFileError, match=rf"{t}_\d+\.commit: write stat file '.*victim.*' does not lie in its "
                                               r"partition 'region=eu'"):
        t_ = Table.open(lay.base)
        commit_key_changes(t_.storage, t_.base_path, t_.view(), tl.reload(), done)
    # reads and validation list files through the metadata table, not through write stats: they work, and open
    # nothing outside the table
    opened: list[str] = []
    real_open = LOCAL.__class__.open_input

    def spy(self, path):  # type: ignore[no-untyped-def]
        f = real_open(self, path)  # refuses (raises) before opening anything outside the table
        opened.append(path)
        return f

    monkeypatch.setattr(LOCAL.__class__, "open_input", spy)
    assert Table.open(lay.base).to_arrow().column("id").to_pylist() == ["k1"]
    assert validate_table(Table.open(lay.base)).ok
    assert opened and all(os.path.realpath(p).startswith(lay.base + "/") for p in opened), opened
    assert snapshot(lay.root) == before


@pytest.mark.spark
def test_spark_read_and_write_refuse_a_crafted_files_partition(spark, lay: MdtLayout) -> None:  # type: ignore[no-untyped-def]
    log = lay.craft(CASES["partition_dotdot"][0](lay))
    before = snapshot(lay.root)
    table = Table.open(lay.base)
    with pytest.raises(CorruptFileError, match=rf"^{re.escape(log)}: "):
        table.read(spark)
    opts = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "region",
            "hoodie.table.ordering.fields": "v", "hoodie.datasource.write.hive_style_partitioning": "true"}
    df = spark.createDataFrame(pa.table({"id": ["k5"], "v": pa.array([5], pa.int64()), "region": ["eu"]}))
    with pytest.raises(CorruptFileError, match=rf"^{re.escape(log)}: "):
        table.write(df, "upsert", opts)
    assert snapshot(lay.root) == before

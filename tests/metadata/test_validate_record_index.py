"""``pyhudi validate``'s record-index check: each file group against the data's keys routed to it, on the driver
and in Spark tasks, finds the same keys missing, extra, wrong and held twice."""

from __future__ import annotations

import posixpath
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from pyhudi import Table
from pyhudi.metadata.reader import MetadataTableReader
from pyhudi.metadata.record_index import (
    RecordIndexLookup,
    encode_locations,
    file_group_id,
    file_groups_of,
    log_block_bytes,
)
from pyhudi.metadata.validate import check_file_group, validate_table
from pyhudi.table.filenames import make_log_file_name

OPTS = {
    "hoodie.table.name": "v",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "dt",
    "hoodie.table.ordering.fields": "ts",
    "hoodie.index.type": "RECORD_INDEX",
    "hoodie.metadata.record.index.min.filegroup.count": "3",
}


def _rows(ids: list[str], dts: list[str], ts: int = 1) -> pa.Table:
    return pa.table({"id": ids, "ts": pa.array([ts] * len(ids), pa.int64()), "dt": dts,
                     "v": [float(i) for i in range(len(ids))]})


def _table(spark, tmp_path: Path) -> Table:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    ids = [f"k{i:03d}" for i in range(60)]
    first = _rows(ids, [("a", "b", "c")[i % 3] for i in range(60)])
    table = Table.create(base, first.schema, OPTS)
    table.write(spark.createDataFrame(first), "bulk_insert", OPTS)
    table.write(spark.createDataFrame(_rows([*ids[:10], "n1", "n2"], ["a"] * 12, 2)), "upsert", OPTS)
    return Table.open(base)


def _lookup(table: Table) -> RecordIndexLookup:
    reader = MetadataTableReader(table.storage, table.base_path, data_timeline=table.timeline(),
                                 data_config=table.config)
    return RecordIndexLookup.from_reader(reader)


def _locations(table: Table) -> dict[str, tuple[str, str]]:
    t = table.to_arrow()
    cols = ("_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name")
    return {k: (p, f.split("_")[0]) for k, p, f in zip(*(t.column(c).to_pylist() for c in cols), strict=True)}


def test_one_file_group_against_crafted_data(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The data side altered: a key the index lacks, a key dropped from the data, a key moved to another file
    group, a key held by two file groups."""
    table = _table(spark, tmp_path)
    lk = _lookup(table)
    where = _locations(table)
    n = lk.num_file_groups
    keys = sorted(where)
    fgs = file_groups_of(pa.array(keys), n)
    g = int(np.bincount(fgs).argmax())
    mine = [k for k, f in zip(keys, fgs, strict=True) if f == g]
    healthy = pa.table({"key": mine, "partition": [where[k][0] for k in mine], "file_id": [where[k][1] for k in mine]})
    ok = check_file_group(lk, g, healthy, 20)
    assert ok["entries"] == len(mine) and not any(ok[f"{k}_count"] for k in ("missing", "extra", "wrong",
                                                                            "duplicate_keys")), ok
    gone, moved, twice = mine[0], mine[1], mine[2]
    other = next(fid for p, fid in where.values() if fid != where[moved][1])
    rows = [(k, *where[k]) for k in mine if k not in (gone, moved)]
    rows += [(moved, where[moved][0], other), ("ghost", "a", other), (twice, "zz", "elsewhere")]
    data = pa.table({c: [r[i] for r in rows] for i, c in enumerate(("key", "partition", "file_id"))})
    got = check_file_group(lk, g, data, 20)
    assert got["entries"] == len(mine)
    assert (got["missing"], got["extra"]) == (["ghost"], [gone])
    assert got["wrong"] == [f"{moved}: index says {where[moved]}, data in {(where[moved][0], other)}"]
    assert got["duplicate_keys"] == [f"{twice}: in {', '.join(map(str, sorted([where[twice], ('zz', 'elsewhere')])))}"]
    assert (got["missing_count"], got["extra_count"], got["wrong_count"], got["duplicate_keys_count"]) == (1, 1, 1, 1)
    assert check_file_group(lk, g, data, 0)["missing"] == []


def test_driver_and_spark_checks_agree_on_a_corrupted_index(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A log file appended to the record index (by a completed metadata-table instant) deletes one live key, maps
    a key no record has, and moves one key to another file group: both checks report exactly those."""
    table = _table(spark, tmp_path)
    where = _locations(table)
    keys = sorted(where)
    twice = keys[7]  # operation insert does not look stored keys up: the key lands in a second file group
    table.write(spark.createDataFrame(_rows([twice], ["zz"], 3)), "insert", OPTS)
    table = Table.open(table.base_path)
    held = sorted({(p, f.split("_")[0]) for k, p, f in zip(*(table.to_arrow().column(c).to_pylist() for c in (
        "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name")), strict=True) if k == twice})
    assert len(held) == 2
    healthy = validate_table(table)
    assert healthy.ok and validate_table(table, spark=spark).to_dict() == healthy.to_dict()
    assert healthy.record_index is not None
    assert healthy.record_index["duplicate_keys"] == [f"{twice}: in {', '.join(map(str, held))}"]
    lk = _lookup(table)
    gone, moved = keys[5], keys[40]
    other = next((p, fid) for p, fid in where.values() if fid != where[moved][1])
    mdt = posixpath.join(table.base_path, ".hoodie", "metadata")
    instant = max(p.name.split(".")[0].split("_")[0] for p in Path(mdt, ".hoodie", "timeline").iterdir()
                  if p.name.endswith(".deltacommit"))
    # an entry moved to a file group other than the one its key hashes to: lookups never read it
    astray = keys[20]
    home = int(file_groups_of(pa.array([astray]), lk.num_file_groups)[0])
    changes: dict[int, tuple[list[str], list[tuple[str, str]], list[str]]] = {}
    for k, loc, dele, g in ((moved, other, False, None), ("ghost", where[keys[0]], False, None),
                            (gone, None, True, None), (astray, None, True, home),
                            (astray, where[astray], False, (home + 1) % lk.num_file_groups)):
        if g is None:
            g = int(file_groups_of(pa.array([k]), lk.num_file_groups)[0])
        ks, locs, deleted = changes.setdefault(g, ([], [], []))
        if dele:
            deleted.append(k)
        else:
            ks.append(k)
            locs.append(loc)  # type: ignore[arg-type]
    for g, (ks, locs, deleted) in changes.items():
        values = encode_locations(pa.array([p for p, _ in locs], pa.string()), pa.array([f for _, f in locs], pa.string()),
                                  pa.array([0] * len(locs), pa.int64()))
        data = log_block_bytes(instant, pa.array(ks, pa.string()), values, deleted)
        rel = posixpath.join("record_index", make_log_file_name(file_group_id(g), instant, 7, "9-9-9"))
        table.storage.write_bytes(posixpath.join(mdt, rel), data)
    here = validate_table(Table.open(table.base_path)).to_dict()
    there = validate_table(Table.open(table.base_path), spark=spark).to_dict()
    assert here == there
    ri = here["record_index"]
    assert not here["ok"]
    assert (ri["missing"], ri["extra"]) == (sorted([gone, astray]), sorted(["ghost", astray]))
    assert ri["wrong"] == [f"{moved}: index says {other}, data in {where[moved]}"]
    assert ri["entries"] == len(keys) and ri["file_groups"] == lk.num_file_groups


@pytest.mark.parametrize("spark_job", [False, True], ids=["driver", "spark_job"])
def test_one_commit_inserting_a_key_twice(spark, tmp_path: Path, monkeypatch, spark_job: bool) -> None:  # type: ignore[no-untyped-def]
    """Operation insert does not combine a batch's records by default: a key given twice in one batch, in two
    partitions, is written twice (as Hudi does); the record index names one of the two file groups, lookups find
    it there, and validate reports the key as held twice."""
    from pyhudi.metadata import record_index

    if spark_job:
        monkeypatch.setattr(record_index, "DRIVER_UPDATE_MAX_KEYS", 0)
    base = str(tmp_path / "t")
    first = _rows(["a", "b"], ["x", "y"])
    table = Table.create(base, first.schema, OPTS)
    table.write(spark.createDataFrame(first), "insert", OPTS)
    table.write(spark.createDataFrame(_rows(["c", "c", "d"], ["x", "y", "y"], 2)), "insert", OPTS)
    table = Table.open(base)
    held = {(p, f.split("_")[0]) for k, p, f in zip(*(table.to_arrow().column(c).to_pylist() for c in (
        "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name")), strict=True) if k == "c"}
    assert len(held) == 2
    found = table.lookup(["c"]).to_pylist()[0]
    assert found["found"] and (found["partition"], found["file_id"]) in held
    for rep in (validate_table(table), validate_table(table, spark=spark)):
        ri = rep.record_index
        assert rep.ok and ri is not None and ri["entries"] == 4, rep.to_dict()
        assert ri["duplicate_keys"] == [f"c: in {', '.join(map(str, sorted(held)))}"]


def test_samples_of_file_groups_merged_in_key_order() -> None:
    """The first samples of every file group, merged by key (as the Spark check orders them), not by message."""
    from pyhudi.metadata.validate import _merge_checks

    def group(wrong: list[str]) -> dict:
        return {"entries": 1, "missing_count": 0, "extra_count": 0, "wrong_count": len(wrong),
                "duplicate_keys_count": 0, "missing": [], "extra": [], "duplicate_keys": [],
                "wrong": [f"{k}: index says x" for k in wrong],
                "sample_keys": {"missing": None, "extra": None, "wrong": wrong, "duplicate_keys": []}}

    merged = _merge_checks([group(["k10"]), group(["k1", "k2"])], 2, 2)
    assert merged["wrong"] == ["k1: index says x", "k10: index says x"] and merged["wrong_count"] == 3


pytestmark = pytest.mark.spark

"""BLOOM and GLOBAL_BLOOM indexes.

- the comparison step (range pruning) against a brute-force model, with keys whose Java (UTF-16) order differs
  from their byte order, and footer min/max keys written in Java's order;
- on Spark and real files: the bloom indexes tag exactly as SIMPLE / GLOBAL_SIMPLE do (the tagged locations
  compared directly), with range pruning on and off, on a table built to prune by range and by bloom filter, on
  the Java-written COW fixture tables (their own DYNAMIC_V0 footer filters; the pruning counts checked against
  counts computed here from the footers), with a SIMPLE footer filter, a footer without a filter and one without
  key range; upserts with BLOOM / GLOBAL_BLOOM read back by hudi-rs as expected;
- randomized seeded workloads (slow tier): every upsert/delete batch tagged by the bloom index and by SIMPLE /
  GLOBAL_SIMPLE (same result), then written with the bloom index; hudi-rs reads what the model predicts.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pyhudi.config import WriteConfig
from pyhudi.index import index_for
from pyhudi.index.base import LOC_FILE_ID_COL, LOC_PARTITION_COL
from pyhudi.index.bloom import BloomIndex, BloomIndexStats, candidate_pairs, file_groups
from pyhudi.io.bloom import PARQUET_BLOOM_FILTER_TYPE_CODE_KEY, BloomFilter
from pyhudi.spark import cached
from pyhudi.table import base_file
from pyhudi.table.schema import PARTITION_PATH_COL, RECORD_KEY_COL
from pyhudi.table.table import Table
from pyhudi.txn.transaction import resolve_options
from pyhudi.write.context import WriteJob
from pyhudi.write.executor import OP_COL
from pyhudi.write.producer import PRODUCERS
from tests.paths import TABLE_ZIPS_DIR
from tests.support.fixtures import unzip_table

hudi = pytest.importorskip("hudi")

COW_FIXTURES = sorted(p.name for p in TABLE_ZIPS_DIR.glob("cow_v9_*.zip")) if TABLE_ZIPS_DIR.is_dir() else []
BLOOM_OF = {"BLOOM": "SIMPLE", "GLOBAL_BLOOM": "GLOBAL_SIMPLE"}


def _sort_key(t: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, v if v is not None else "") for v in t)


# -- range pruning, without Spark -------------------------------------------------------------------------------
_ALPHABET = ["a", "b", "z", "0", "\x00", "é", "\ud7ff", "\ue000", "\uffff", "\U0001f600", "\U00010000"]


def _java(s: str) -> bytes:
    return s.encode("utf-16-be")


@pytest.mark.parametrize("seed", range(4))
def test_candidate_pairs_against_brute_force(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every key is paired with every file whose (inclusive, byte-order) range holds it and with every file without
    a range; no pair is repeated; a stored key always meets its file, whichever order (bytes or Java's) its
    writer used for min/max; only keys with a character >= U+E000 meet files whose byte range excludes them."""
    import pyhudi.index.bloom as bloom_index

    rng = random.Random(seed)

    def key() -> str:
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 4)))

    for _ in range(150):
        monkeypatch.setattr(bloom_index, "_MAX_PAIRS", rng.choice([1, 5, 1 << 20]))  # output chunking
        files = []
        for i in range(rng.randint(0, 8)):
            stored = [key() for _ in range(rng.randint(1, 5))]
            order = rng.choice([lambda s: s.encode(), _java])
            lo, hi = (min(stored, key=order), max(stored, key=order)) if rng.random() > 0.2 else (None, None)
            files.append({"idx": i, "partition": rng.choice("pq"), "min_key": lo, "max_key": hi, "keys": stored})
        table = pa.table(
            {
                "idx": pa.array([f["idx"] for f in files], pa.int32()),
                "partition": pa.array([f["partition"] for f in files], pa.string()),
                "min_key": pa.array([f["min_key"] for f in files], pa.string()),
                "max_key": pa.array([f["max_key"] for f in files], pa.string()),
            }
        )
        keys = [key() for _ in range(rng.randint(0, 30))] + [k for f in files for k in f["keys"] if rng.random() < 0.5]
        parts = [rng.choice("pq") for _ in keys]
        for is_global in (False, True):
            groups = file_groups(table, is_global)
            got: set[tuple[int, int]] = set()
            for g in groups:
                sel = [i for i in range(len(keys)) if g is None or parts[i] == g]
                for pos, fidx in candidate_pairs(pa.array([keys[i] for i in sel], pa.string()), groups[g]):
                    for a, b in zip(pos.tolist(), fidx.tolist(), strict=True):
                        assert (sel[a], b) not in got
                        got.add((sel[a], b))
            want_min: set[tuple[int, int]] = set()  # pairs that must be there
            allowed: set[tuple[int, int]] = set()  # pairs that may be there
            for i, k in enumerate(keys):
                exotic = any(ord(c) >= 0xE000 for c in k)
                for f in files:
                    if not (is_global or parts[i] == f["partition"]):
                        continue
                    pair = (i, f["idx"])
                    in_range = f["min_key"] is None or f["min_key"].encode() <= k.encode() <= f["max_key"].encode()
                    if in_range or k in f["keys"]:
                        want_min.add(pair)
                    if f["min_key"] is None or exotic or f["min_key"].encode() <= k.encode() <= f["max_key"].encode():
                        allowed.add(pair)
            assert want_min <= got <= allowed


def test_footer_min_max_in_java_order(tmp_path: Path) -> None:
    """Footer min/max record keys are ordered as Java Hudi's writer orders them (String.compareTo), so that Java
    readers' range pruning never skips a file holding the key."""
    from pyhudi.io.storage import Storage

    rng = random.Random(7)
    for _ in range(300):
        ks = ["".join(rng.choice(_ALPHABET[1:]) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 9))]
        assert base_file.java_min_max(pa.array(ks)) == (min(ks, key=_java), max(ks, key=_java)), ks
    keys = ["a", "\ue000", "\U0001f600", "\uffff", "z"]
    storage, root = Storage.from_uri(str(tmp_path))
    path = f"{root}/f1-0_0-0-0_20260101000000000.parquet"
    base_file.write_base_file(
        storage, path, pa.table({"v": list(range(5))}), instant_time="20260101000000000", partition_path="",
        record_keys=keys,
    )  # fmt: skip
    footer = base_file.read_footer(storage, path)
    assert (footer.min_key, footer.max_key) == ("a", "\uffff")  # bytes order would say max is U+1F600


# -- Spark helpers ----------------------------------------------------------------------------------------------
def make_job(spark, table: Table, options: dict[str, str], operation: str = "upsert") -> WriteJob:  # type: ignore[no-untyped-def]
    opts = resolve_options(table.config, {**options, "hoodie.datasource.write.operation": operation}, table.timeline())
    tl = table.timeline()
    return WriteJob(
        spark=spark,
        storage=table.storage,
        base_path=table.base_path,
        table_name=table.name,
        config=WriteConfig.from_options(opts),
        instant="29990101000000000",
        timeline=tl,
        view=table.view(tl),
        data_schema=table.schema(),
    )


@dataclass
class Tagged:
    rows: list[tuple[Any, ...]]  # (key, partition, location partition, location file id, op), sorted
    stats: BloomIndexStats | None


def tag(spark, table: Table, df, index_type: str, options: dict[str, str], operation: str = "upsert") -> Tagged:  # type: ignore[no-untyped-def]
    job = make_job(spark, table, {**options, "hoodie.index.type": index_type}, operation)
    prepared = PRODUCERS[operation](job).prepare(df)
    job.prepared = prepared
    index = index_for(index_type)
    out = index.tag(job, prepared).select(RECORD_KEY_COL, PARTITION_PATH_COL, LOC_PARTITION_COL, LOC_FILE_ID_COL, OP_COL)
    rows = sorted((tuple(r) for r in out.collect()), key=_sort_key)
    for held in job.held:  # what a write's producer releases when it ends
        cached.release(held)
    return Tagged(rows, index.stats if isinstance(index, BloomIndex) else None)


def compare_with_simple(spark, table: Table, df, options: dict[str, str], operation: str = "upsert",  # type: ignore[no-untyped-def]
                        prune: tuple[bool, ...] = (True, False)) -> dict[tuple[str, bool], BloomIndexStats]:
    """Tag ``df`` with BLOOM and GLOBAL_BLOOM (range pruning on / off) and with SIMPLE / GLOBAL_SIMPLE: the same
    rows. Returns the bloom indexes' stats."""
    out = {}
    for bloom, simple in BLOOM_OF.items():
        want = tag(spark, table, df, simple, options, operation).rows
        assert any(r[3] is not None for r in want), "the batch finds no stored key: a weak comparison"
        for p in prune:
            got = tag(spark, table, df, bloom, {**options, "hoodie.bloom.index.prune.by.ranges": str(p).lower()},
                      operation)
            assert got.rows == want, f"{bloom} (prune by ranges {p}) tags differently from {simple}"
            assert got.stats is not None
            assert got.stats.matches == len({(r[0], r[2], r[3]) for r in got.rows if r[3] is not None})
            out[(bloom, p)] = got.stats
    return out


def hudi_rs_rows(base: str) -> pa.Table:
    from hudi import HudiTableBuilder

    batches = list(HudiTableBuilder.from_base_uri(base).build().read())
    return pa.Table.from_batches(batches)


# -- a table built to prune ---------------------------------------------------------------------------------------
SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("dt", pa.string()), ("v", pa.float64())])
PARTS = ["p0", "p1", "p2"]
OPTS = {
    "hoodie.table.name": "bloomidx",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "dt",
    "hoodie.table.ordering.fields": "ts",
    "hoodie.metadata.enable": "false",
    "hoodie.index.type": "SIMPLE",
}
EXOTIC = ["\ue000-a", "\U0001f600-b", "\uffff-c"]


def _rows(ids: list[str], parts: list[str], ts: int, v: float) -> list[dict[str, Any]]:
    return [{"id": i, "ts": ts, "dt": p, "v": v} for i, p in zip(ids, parts, strict=True)]


def build_table(spark, path: Path) -> tuple[Table, dict[str, str]]:  # type: ignore[no-untyped-def]
    """Four bulk inserts of disjoint key ranges, each one file per partition (``key-<b>-<i>``); the exotic keys
    (characters >= U+E000, ordered differently by Java) all in p0 with the first batch. Returns the table and
    key -> partition."""
    table = Table.create(str(path), SCHEMA, OPTS)
    where: dict[str, str] = {}
    for b in range(4):
        ids = [f"key-{b}-{i:03d}" for i in range(60)]
        parts = [PARTS[i % 3] for i in range(60)]
        if b == 0:
            ids += EXOTIC
            parts += ["p0"] * len(EXOTIC)
        where.update(zip(ids, parts, strict=True))
        table.write(spark.createDataFrame(pa.Table.from_pylist(_rows(ids, parts, 1, float(b)), schema=SCHEMA)),
                    "bulk_insert", OPTS)
    return Table.open(str(path)), where


@pytest.fixture(scope="module")
def pruning_table(spark, tmp_path_factory: pytest.TempPathFactory) -> tuple[Table, dict[str, str]]:  # type: ignore[no-untyped-def]
    return build_table(spark, tmp_path_factory.mktemp("bloomidx") / "t")


def plain_batch(where: dict[str, str]) -> list[dict[str, Any]]:
    """Updates of batch-0 keys (some arriving with another partition), new keys inside batch-2 ranges (bloom
    filters rule them out), a new key beyond every range; nothing in batch 1 or 3's ranges."""
    ids = [f"key-0-{i:03d}" for i in range(0, 60, 4)]
    parts = [where[i] for i in ids]
    parts[:3] = [PARTS[(PARTS.index(p) + 1) % 3] for p in parts[:3]]  # found elsewhere by the global index
    ids += [f"key-2-{i:03d}x" for i in range(0, 60, 7)] + ["zzz-new"]
    parts += [PARTS[i % 3] for i in range(0, 60, 7)] + ["p1"]
    return _rows(ids, parts, 5, -1.0)


@pytest.mark.spark  # the quick tier's bloom-index check
def test_tagging_matches_simple_index(spark, pruning_table) -> None:  # type: ignore[no-untyped-def]
    table, where = pruning_table
    n_files = len(table.view().latest_base_files())
    assert n_files == 12
    df = spark.createDataFrame(pa.Table.from_pylist(plain_batch(where), schema=SCHEMA))
    stats = compare_with_simple(spark, table, df, OPTS)
    for (_, prune), s in stats.items():
        assert s.files == n_files and s.false_positives == 0, s
        assert s.bloom_filter_types == {"DYNAMIC_V0": s.files_compared}, s  # pyhudi's default filter
        assert s.files_without_bloom == 0
        if prune:
            # batch 1 and 3 files hold no incoming key in their range; batch 2 files hold candidates only
            assert s.files_without_range == 0
            assert s.files_pruned_by_range == 6, s
            assert s.files_pruned_by_bloom == 3 and s.files_checked == 3, s
        else:
            assert s.files_without_range == n_files and s.files_pruned_by_range == 0, s
            assert s.files_pruned_by_bloom == 9 and s.files_checked == 3, s
        assert s.bloom_positives == s.matches < s.candidate_pairs, s
    # GLOBAL_BLOOM finds the three keys that arrive with another partition, BLOOM does not
    assert stats[("GLOBAL_BLOOM", True)].matches == stats[("BLOOM", True)].matches + 3


@pytest.mark.spark
@pytest.mark.slow
def test_exotic_keys_and_deletes_match_simple_index(spark, pruning_table) -> None:  # type: ignore[no-untyped-def]
    """Keys Java orders differently from bytes (stored ones and new ones), as upserts and as deletes."""
    table, where = pruning_table
    batch = plain_batch(where) + _rows(EXOTIC, ["p0", "p1", "p0"], 5, 1.0) + _rows(["\ue000-new"], ["p0"], 5, 1.0)
    df = spark.createDataFrame(pa.Table.from_pylist(batch, schema=SCHEMA))
    stats = compare_with_simple(spark, table, df, OPTS, prune=(True,))
    # BLOOM: 12 updates in their partition + 2 exotic keys in p0; GLOBAL_BLOOM: 15 + 3
    assert (stats[("BLOOM", True)].matches, stats[("GLOBAL_BLOOM", True)].matches) == (14, 18)
    compare_with_simple(spark, table, df, OPTS, operation="delete", prune=(True,))


def _rewrite(path: str, md: dict[str, str]) -> None:
    """Rewrite a base file in place with the same rows and Hudi footer entries ``md``."""
    t = pq.read_table(path).replace_schema_metadata(None)
    with pq.ParquetWriter(path, t.schema, store_schema=False) as w:
        w.write_table(t)
        w.add_key_value_metadata(md)


@pytest.mark.spark
@pytest.mark.slow
def test_simple_filter_missing_filter_and_missing_range(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """One batch-0 file gets a SIMPLE footer filter, one no bloom filter (checked against its keys), one no
    min/max (compared with every key of its partition); tagging still matches SIMPLE and an upsert with BLOOM
    updates the records of those files in place."""
    table, where = build_table(spark, tmp_path / "t")
    by_part = {}  # the batch-0 file of each partition
    for f in table.view().latest_base_files():
        if base_file.read_footer(table.storage, f"{table.base_path}/{f.relative_path}").min_key.startswith("key-0-"):
            by_part[f.partition] = f
    assert sorted(by_part) == PARTS
    for part, kind in zip(PARTS, ("simple", "none", "norange"), strict=True):
        path = f"{table.base_path}/{by_part[part].relative_path}"
        keys = pq.read_table(path, columns=[RECORD_KEY_COL]).column(0).combine_chunks()
        if kind == "simple":
            md = base_file.footer_metadata(keys, {"hoodie.bloom.index.filter.type": "SIMPLE"})
            assert PARQUET_BLOOM_FILTER_TYPE_CODE_KEY not in md  # Java writes no type code for SIMPLE
        elif kind == "none":
            lo, hi = base_file.java_min_max(keys)
            md = {"hoodie_min_record_key": lo, "hoodie_max_record_key": hi}
        else:
            bf = BloomFilter.create()
            bf.add_many(keys)
            md = bf.parquet_footer_metadata()
        _rewrite(path, md)
        footer = base_file.read_footer(table.storage, path)
        assert (footer.bloom_filter is None) == (kind == "none") and (footer.min_key is None) == (kind == "norange")
    table = Table.open(table.base_path)
    batch = plain_batch(where)
    df = spark.createDataFrame(pa.Table.from_pylist(batch, schema=SCHEMA))
    stats = compare_with_simple(spark, table, df, OPTS)
    for (_, prune), s in stats.items():
        assert s.files_without_bloom == 1 and s.false_positives == 0, s
        assert s.bloom_filter_types.get("SIMPLE") == 1, s
        assert s.files_checked == 3, s  # the batch-0 files hold the updated keys
        assert s.files_without_range == (1 if prune else 12), s

    opts = {**OPTS, "hoodie.index.type": "BLOOM"}
    table.write(spark.createDataFrame(pa.Table.from_pylist(batch, schema=SCHEMA)), "upsert", opts)
    got = hudi_rs_rows(table.base_path)
    stored = dict(where)
    want = {(p, k): 1.0 * (int(k.split("-")[1]) if k.startswith("key-") else 0) for k, p in stored.items()}
    for r in batch:
        want[(r["dt"], r["id"])] = -1.0  # BLOOM: a key arriving with another partition is another record
    have = {(p, k): v for p, k, v in zip(got.column("dt").to_pylist(), got.column("id").to_pylist(),
                                         got.column("v").to_pylist(), strict=True)}
    assert len(have) == got.num_rows
    assert have == want


# -- the Java-written fixture tables --------------------------------------------------------------------------
@dataclass
class FileInfo:
    partition: str
    file_id: str
    min_key: str
    max_key: str
    keys: list[str]


def fixture_files(table: Table) -> list[FileInfo]:
    out = []
    for f in table.view().latest_base_files():
        path = f"{table.base_path}/{f.relative_path}"
        md = pq.read_metadata(path).metadata
        keys = pq.read_table(path, columns=[RECORD_KEY_COL]).column(0).to_pylist()
        out.append(FileInfo(f.partition, f.file_id, md[b"hoodie_min_record_key"].decode(),
                            md[b"hoodie_max_record_key"].decode(), keys))
    return sorted(out, key=lambda f: (f.partition, f.file_id))


def record_key(table: Table, row: dict[str, Any]) -> str:
    fields = table.config.record_key_fields
    return str(row[fields[0]]) if len(fields) == 1 else ",".join(f"{f}:{row[f]}" for f in fields)


def expected_stats(files: list[FileInfo], incoming: list[tuple[str, str]], is_global: bool, prune: bool) -> dict[str, int]:
    """The counts the bloom index must report, from the footers and keys read here (ASCII keys: str order is the
    byte order) and a false-positive-free bloom filter (fpp 1e-9)."""
    incoming_parts = {p for _, p in incoming}
    files = [f for f in files if is_global or f.partition in incoming_parts]
    pairs = found = compared = checked = 0
    for f in files:
        keys = {k for k, p in incoming if is_global or p == f.partition}
        cands = {k for k in keys if not prune or f.min_key <= k <= f.max_key}
        hits = cands & set(f.keys)
        pairs += len(cands)
        found += len(hits)
        compared += bool(cands)
        checked += bool(hits)
    return {"files": len(files), "candidate_pairs": pairs, "matches": found, "bloom_positives": found,
            "files_compared": compared, "files_checked": checked, "files_pruned_by_range": len(files) - compared,
            "files_pruned_by_bloom": compared - checked}


def fixture_batch(table: Table, files: list[FileInfo], data: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Updates of every key of the first file; a new key inside another file's range (in its partition); a new key
    beyond every range. Returns the rows and what each is (key -> "update" / "new")."""
    by_key = {record_key(table, r): r for r in data}
    rows, kinds = [], {}
    for k in files[0].keys:
        r = dict(by_key[k])
        r["merchant_name"] = f"bloom-{k}"
        r["txn_ts"] = (r["txn_ts"] or 0) + 1
        rows.append(r)
        kinds[k] = "update"
    others = [f for f in files[1:] if f.min_key < f.max_key]
    news = []
    if others:
        news.append((by_key[others[0].min_key], "x"))
    news.append((by_key[files[0].keys[0]], None))
    for src, suffix in news:
        r = dict(src)
        r["txn_id"] = f"{r['txn_id']}{suffix}" if suffix else "TXN-~new"  # "~" sorts after every stored key
        r["merchant_name"] = "bloom-new"
        rows.append(r)
        kinds[record_key(table, r)] = "new"
    if others:
        inside = record_key(table, rows[-2])
        assert others[0].min_key < inside < others[0].max_key
    return rows, kinds


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("zip_name", COW_FIXTURES)
def test_java_fixture_upserts(spark, tmp_path: Path, zip_name: str, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    base = str(unzip_table(zip_name, tmp_path))
    table = Table.open(base)
    snap = hudi_rs_rows(base)
    data_cols = [c for c in snap.column_names if not c.startswith("_hoodie_")]
    data = snap.select(data_cols)
    files = fixture_files(table)
    rows, kinds = fixture_batch(table, files, data.to_pylist())
    batch = pa.Table.from_pylist(rows, schema=data.schema)
    opts = {"hoodie.table.name": table.name}
    df = spark.createDataFrame(batch)
    stats = compare_with_simple(spark, table, df, opts)
    incoming = tag_partitions(spark, table, df, opts)
    for (name, prune), s in stats.items():
        want = expected_stats(files, incoming, name == "GLOBAL_BLOOM", prune)
        assert {k: getattr(s, k) for k in want} == want, (name, prune, s)
        # the fixture's own footer filters were read: all Java's DYNAMIC_V0, all with key ranges
        assert s.bloom_filter_types == {"DYNAMIC_V0": s.files_compared} and s.files_compared > 0, s
        assert s.files_without_bloom == 0 and s.false_positives == 0
        assert s.files_without_range == (0 if prune else s.files)
    # the filters ruled out comparisons; the ranges pruned files, unless the batch hits both files of the table
    assert sum(s.candidate_pairs - s.bloom_positives for s in stats.values()) > 0
    assert sum(s.files_pruned_by_bloom for s in stats.values()) > 0
    assert sum(s.files_pruned_by_range for s in stats.values()) > 0 or len(files) <= 2

    # end to end: the upsert with BLOOM, read back by hudi-rs; what its index persisted is released with it
    persistent = spark.sparkContext._jsc.getPersistentRDDs
    for rdd in persistent().values():
        rdd.unpersist(True)
    with caplog.at_level(logging.INFO, logger="pyhudi.index.bloom"):
        table.write(df, "upsert", {**opts, "hoodie.index.type": "BLOOM"})
    assert len(dict(persistent())) == 0
    logged = [r.bloom_index_stats for r in caplog.records if hasattr(r, "bloom_index_stats")]
    assert len(logged) == 1 and logged[0].matches == sum(v == "update" for v in kinds.values())
    want_rows = {record_key(table, r): r for r in data.to_pylist()}
    want_rows.update({record_key(table, r): r for r in rows})
    after = hudi_rs_rows(base)
    got = after.select(data_cols).cast(data.schema).to_pylist()
    assert sorted(got, key=lambda r: record_key(table, r)) == sorted(want_rows.values(), key=lambda r: record_key(table, r))


def tag_partitions(spark, table: Table, df, opts: dict[str, str]) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    """(record key, partition path) of the incoming records, as the write computes them."""
    job = make_job(spark, table, {**opts, "hoodie.index.type": "SIMPLE"})
    prepared = PRODUCERS["upsert"](job).prepare(df)
    return [(r[0], r[1]) for r in prepared.select(RECORD_KEY_COL, PARTITION_PATH_COL).collect()]


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.skipif("cow_v9_txns_simple_meta.zip" not in COW_FIXTURES, reason="fixture not available")
def test_global_bloom_moves_a_key_in_java_fixture(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """GLOBAL_BLOOM with hoodie.bloom.index.update.partition.path (default true): a key arriving with another
    region moves there; with false, it is updated where it is."""
    base = str(unzip_table("cow_v9_txns_simple_meta.zip", tmp_path))
    table = Table.open(base)
    snap = hudi_rs_rows(base)
    data = snap.select([c for c in snap.column_names if not c.startswith("_hoodie_")])
    by_id = {r["txn_id"]: r for r in data.to_pylist()}
    a, b = "TXN-007", "TXN-011"
    assert (by_id[a]["region"], by_id[b]["region"]) == ("apac", "eu")
    moved = {**by_id[a], "region": "us", "txn_ts": by_id[a]["txn_ts"] + 1, "merchant_name": "moved"}
    opts = {"hoodie.table.name": table.name, "hoodie.index.type": "GLOBAL_BLOOM"}
    table.write(spark.createDataFrame(pa.Table.from_pylist([moved], schema=data.schema)), "upsert", opts)
    stay = {**by_id[b], "region": "us", "txn_ts": by_id[b]["txn_ts"] + 1, "merchant_name": "stays"}
    Table.open(base).write(spark.createDataFrame(pa.Table.from_pylist([stay], schema=data.schema)), "upsert",
                           {**opts, "hoodie.bloom.index.update.partition.path": "false"})
    after = hudi_rs_rows(base)
    got = {r["txn_id"]: (r["_hoodie_partition_path"], r["merchant_name"]) for r in after.to_pylist()}
    assert after.num_rows == len(by_id)
    assert got[a] == ("region=us", "moved")
    assert got[b] == ("region=eu", "stays")
    assert {k: v for k, v in got.items() if k not in (a, b)} == {
        k: (f"region={r['region']}", r["merchant_name"]) for k, r in by_id.items() if k not in (a, b)
    }


# -- randomized workloads (slow tier) --------------------------------------------------------------------------------
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("name", ["simple_nested", "complex_hive_2parts", "non_partitioned", "global_move", "global_stay"])
def test_random_workload_with_bloom_index(spark, tmp_path: Path, name: str) -> None:  # type: ignore[no-untyped-def]
    from tests.support.model import Model
    from tests.support.workload import CONFIGS, Workload, arrow_schema, assert_rows, hudi_rs_read, rows_of

    class MixedKeysWorkload(Workload):
        """New keys of even steps in insertion order (``k%05d``: files with narrow key ranges), of odd steps
        scattered (``k%06d``, a permutation: files whose ranges overlap, left to the bloom filters)."""

        def _row(self, base: dict[str, Any] | None = None, ts: int | None = None) -> dict[str, Any]:
            r = super()._row(base, ts)
            if base is None and self.step % 2:
                r["id"] = f"k{self.next_id * 7919 % 100003:06d}"
            return r

    cfg = next(c for c in CONFIGS if c.name == name)
    schema = arrow_schema(cfg)
    cols = tuple(schema.names)
    index_type = "GLOBAL_BLOOM" if cfg.spec.global_index else "BLOOM"
    opts = {
        **cfg.spec.options(cfg.name),
        "hoodie.index.type": index_type,
        "hoodie.bloom.index.update.partition.path": str(cfg.spec.update_partition_path).lower(),
        "hoodie.metadata.enable": "false",
        # several file groups per partition, so that ranges and filters have something to prune
        "hoodie.parquet.max.file.size": str(600 * 1024),
        "hoodie.parquet.small.file.limit": "0",
    }
    path = str(tmp_path / cfg.name)
    table = Table.create(path, schema, opts)
    model = Model(cfg.spec, cols)
    work = MixedKeysWorkload(cfg, model)
    totals: dict[str, int] = {}
    for step in range(cfg.steps):
        op, batch = work.next_batch()
        df = spark.createDataFrame(pa.Table.from_pylist(batch, schema=schema))
        if op in ("upsert", "delete") and table.view().latest_base_files():
            simple = "GLOBAL_SIMPLE" if cfg.spec.global_index else "SIMPLE"
            want = tag(spark, table, df, simple, opts, op)
            got = tag(spark, table, df, index_type, opts, op)
            assert got.rows == want.rows, f"{name} step {step} ({op}): {index_type} and {simple} differ"
            assert got.stats is not None
            for k, v in got.stats.to_dict().items():
                if isinstance(v, int):
                    totals[k] = totals.get(k, 0) + v
        res = table.write(df, op, opts)
        model.apply(op, batch, res.instant)
        assert_rows(f"{name} step {step} ({op}): hudi-rs", rows_of(hudi_rs_read(path), cols), model.snapshot())
        table = Table.open(path)
    print(f"{name}: {index_type} totals over the workload: {totals}")
    assert totals.get("files_checked", 0) > 0 and totals["bloom_positives"] < totals["candidate_pairs"], totals
